"""policy/gpufleet_policies/benchmark_queue.py on the fleet of tests/components/kubernetes/test_benchmark_queue.py:
the planned stacks pass, and each rule fails once when a stack breaks it."""

from __future__ import annotations

import copy

import pytest

from fleet.model.core import pod_contract
from fleet.model.loader import load_fleet
from fleet.tools.engine.analyzer import PolicyPackSession
from fleet.tools.engine.plan import plan_fleet
from tests.helpers import BENCHMARK_QUEUE_POLICY as POLICY
from tests.helpers import BENCHMARK_QUEUE_STACKS as STACKS
from tests.helpers import FIXTURE_WORKLOADS, write_policy
from tests.policy.support import only

RULE = "benchmarks-wait-their-turn"
KUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:"
JOB = "kubernetes:batch/v1:Job"


@pytest.fixture(scope="module")
def benched(tmp_path_factory):
    """The fleet planned, and a policy pack running against it."""
    policy, stacks = write_policy(tmp_path_factory.mktemp("bench-pack"), POLICY, STACKS)
    fleet = load_fleet(policy, FIXTURE_WORKLOADS)
    plans = {p.stack: p for p in plan_fleet(fleet, policy, stacks_dir=stacks, workloads_dir=FIXTURE_WORKLOADS)}
    with PolicyPackSession(policy, workloads_dir=FIXTURE_WORKLOADS) as session:
        yield fleet, plans, session


def _findings(session, regs):
    return "\n".join(f.message for f in only(session.analyze_registrations(regs), RULE))


def test_the_planned_stacks_pass(benched):
    _, plans, session = benched
    for stack, plan in plans.items():  # cern-old: no queue, Jobs unlabelled
        assert _findings(session, copy.deepcopy(plan.registrations)) == "", stack


def test_a_job_that_does_not_name_the_queue_is_refused(benched):
    _, plans, session = benched
    regs = copy.deepcopy(plans["gke-bench"].registrations)
    job = next(r for r in regs if r.type == JOB)
    del job.inputs["metadata"]["labels"][pod_contract.QUEUE_NAME_LABEL]
    assert f"benchmark {job.name} does not wait its turn" in _findings(session, regs)


def test_a_flavor_below_its_pools_capacity_or_off_its_nodes_is_refused(benched):
    _, plans, session = benched
    regs = copy.deepcopy(plans["aks-bench"].registrations)
    queue = next(r for r in regs if r.type == KUEUE + "ClusterQueue")
    for r in queue.inputs["spec"]["resourceGroups"][0]["flavors"][0]["resources"]:
        if r["name"] == "nvidia.com/gpu":
            r["nominalQuota"] = "2"  # whole T4s, not their slices
    flavor = next(r for r in regs if r.type == KUEUE + "ResourceFlavor")
    flavor.inputs["spec"]["nodeLabels"] = {"gpu": "a100"}
    found = _findings(session, regs)
    assert "holds 2 nvidia.com/gpu, but pool gpu-t4 holds 4" in found
    assert "does not label pool gpu-t4's nodes" in found


def test_jobs_naming_a_queue_the_stack_lacks_are_refused(benched):
    _, plans, session = benched
    regs = [r for r in copy.deepcopy(plans["gke-bench"].registrations) if r.type != KUEUE + "ClusterQueue"]
    assert "has no benchmark queue (gpu-fleet-benchmarks): it would never start" in _findings(session, regs)
    regs = [
        r
        for r in copy.deepcopy(plans["gke-bench"].registrations)
        if not (r.type == KUEUE + "LocalQueue" and r.inputs["metadata"]["namespace"] == "benchmarks-root")
    ]
    assert "has no LocalQueue benchmarks in benchmarks-root" in _findings(session, regs)
