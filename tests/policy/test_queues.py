"""policy/gpufleet_policies/queues.py on the tests' own queued fleet (tests/helpers.py QUEUED): the planned
stacks pass, and each rule fails once when a stack breaks it."""

from __future__ import annotations

import copy

import pytest

from fleet.model.loader import load_fleet
from fleet.tools.engine.analyzer import PolicyPackSession
from fleet.tools.engine.plan import plan_fleet
from tests.helpers import QUEUED, QUEUED_STACKS, write_policy
from tests.policy.support import only

RULE = "queues-match-policy"
KUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:"


@pytest.fixture(scope="module")
def queued(tmp_path_factory):
    """The queued fleet planned, and a policy pack running against it."""
    tmp = tmp_path_factory.mktemp("queued-pack")
    policy, stacks = write_policy(tmp, QUEUED, QUEUED_STACKS)
    workloads = tmp / "workloads"
    workloads.mkdir()
    fleet = load_fleet(policy, workloads)
    plans = {p.stack: p for p in plan_fleet(fleet, policy, stacks_dir=stacks, workloads_dir=workloads)}
    with PolicyPackSession(policy, workloads_dir=workloads) as session:
        yield fleet, plans, session


def _findings(session, regs):
    return [f.message for f in only(session.analyze_registrations(regs), RULE)]


def _one(regs, kind, name):
    return next(r for r in regs if r.type == KUEUE + kind and r.inputs["metadata"]["name"] == name)


def test_the_planned_queues_pass(queued):
    _fleet, plans, session = queued
    for stack, plan in plans.items():
        assert _findings(session, copy.deepcopy(plan.registrations)) == [], stack


def test_a_config_out_of_the_policys_order_or_quota_is_refused(queued):
    fleet, plans, session = queued
    regs = copy.deepcopy(plans[fleet.dispatch.manager].registrations)
    gpu = fleet.dispatch.queues[0]
    config = _one(regs, "MultiKueueConfig", f"queue-{gpu.name}")
    config.inputs["spec"]["clusters"] = list(reversed(gpu.clusters))
    queue = _one(regs, "ClusterQueue", f"queue-{gpu.name}")
    for r in queue.inputs["spec"]["resourceGroups"][0]["flavors"][0]["resources"]:
        if r["name"] == gpu.resource:
            r["nominalQuota"] = "1"
    found = "\n".join(_findings(session, regs))
    assert "Kueue dispatches in the config's order" in found
    assert f"holds 1 {gpu.resource}, but the workers' pools" in found


def test_a_worker_without_its_queue_or_with_a_foreign_flavor_is_refused(queued):
    fleet, plans, session = queued
    gpu = fleet.dispatch.queues[0]
    worker = gpu.clusters[0]
    regs = [
        r
        for r in copy.deepcopy(plans[worker].registrations)
        if not (r.type == KUEUE + "LocalQueue" and r.inputs["metadata"]["name"] == gpu.name)
    ]
    assert any("has no ClusterQueue" in m for m in _findings(session, regs))
    regs = copy.deepcopy(plans[worker].registrations)
    queue = _one(regs, "ClusterQueue", f"queue-{gpu.name}")
    queue.inputs["spec"]["resourceGroups"][0]["flavors"][0]["name"] = "queue-gpu-a100"
    assert any("would land outside the queue" in m for m in _findings(session, regs))


def test_no_other_cluster_takes_part(queued):
    fleet, plans, session = queued
    tpu = fleet.dispatch.queues[1]
    outsider = next(c for c in fleet.dispatch.workers if c not in tpu.clusters)
    regs = copy.deepcopy(plans[outsider].registrations)
    stray = copy.deepcopy(_one(plans[tpu.clusters[0]].registrations, "ClusterQueue", f"queue-{tpu.name}"))
    stray.urn = stray.urn.replace(tpu.clusters[0], outsider)
    regs.append(stray)
    assert any("does not name it a worker" in m for m in _findings(session, regs))
    manager_config = copy.deepcopy(_one(plans[fleet.dispatch.manager].registrations, "MultiKueueConfig", "queue-tpu"))
    manager_config.urn = manager_config.urn.replace(fleet.dispatch.manager, outsider)
    regs.append(manager_config)
    assert any("a second manager" in m for m in _findings(session, regs))


WORKER_RULE = "queue-worker-least-privilege"
RBAC = "kubernetes:rbac.authorization.k8s.io/v1:"


def _worker_findings(session, regs):
    return [f.message for f in only(session.analyze_registrations(regs), WORKER_RULE)]


def test_the_workers_identity_passes_and_upstreams_cluster_wide_role_is_refused(queued):
    fleet, plans, session = queued
    for worker in fleet.dispatch.workers:
        assert _worker_findings(session, plans[worker].registrations) == [], worker
    regs = copy.deepcopy(plans["eks-a"].registrations)
    watch = next(r for r in regs if r.type == RBAC + "ClusterRole" and r.inputs["metadata"]["name"].endswith("-watch"))
    # upstream's create-multikueue-kubeconfig.sh: create and delete on Jobs in every namespace
    watch.inputs["rules"].append({"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create", "delete"]})
    (message, *more) = _worker_findings(session, regs)
    assert "['create', 'delete'] on ['jobs'] in every namespace" in message
    assert any("`create jobs.batch -n node-agents`" in m for m in more)


def test_the_workers_identity_may_not_read_secrets_or_act_elsewhere(queued):
    _fleet, plans, session = queued
    regs = copy.deepcopy(plans["eks-a"].registrations)
    role = next(r for r in regs if r.type == RBAC + "Role" and r.inputs["metadata"]["name"] == "gpu-fleet-multikueue")
    role.inputs["rules"].append({"apiGroups": [""], "resources": ["secrets", "pods"], "verbs": ["get", "create"]})
    binding = next(
        r for r in regs if r.type == RBAC + "RoleBinding" and r.inputs["roleRef"]["name"] == "gpu-fleet-multikueue"
    )
    # the Role and its binding moved to the privileged namespace (a RoleBinding grants its own namespace's Role)
    binding.inputs["metadata"]["namespace"] = role.inputs["metadata"]["namespace"] = "node-agents"
    found = " | ".join(_worker_findings(session, regs))
    assert "rights in 'node-agents'" in found
    assert "`create pods -n node-agents`" in found
