"""The pack's benchmark rules (benchmark_set.py, benchmark_pods.py) on workloads that name a queue: the queued fleet of
the tests (tests/helpers.py QUEUED with QUEUED_TRACKER) passes; the manager's queued Jobs are expected there and not
per cluster, and a queued Job that names a pool, loses its card's affinity or is missing is refused."""

from __future__ import annotations

import copy

import pytest

from fleet.model.loader import load_fleet
from fleet.tools.engine.analyzer import PolicyPackSession
from fleet.tools.engine.plan import plan_fleet
from tests.helpers import QUEUED_STACKS, QUEUED_TRACKER, queued, queued_workloads_dir, write_policy

JOB = "kubernetes:batch/v1:Job"
RULES = ("benchmark-set-matches-policy", "benchmark-allowed-card", "benchmark-placement", "benchmark-metric-labels")


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("queued-benchmarks")
    policy, stacks = write_policy(tmp, queued(QUEUED_TRACKER), QUEUED_STACKS)
    workloads = queued_workloads_dir(tmp)
    fleet = load_fleet(policy, workloads)
    plans = {p.stack: p for p in plan_fleet(fleet, policy, stacks_dir=stacks, workloads_dir=workloads)}
    with PolicyPackSession(policy, workloads_dir=workloads) as pack:
        yield fleet, plans, pack


def _findings(pack, regs) -> list[str]:
    return [f"{f.policy}: {f.message}" for f in pack.analyze_registrations(regs) if f.policy in RULES]


def test_the_planned_stacks_pass(session):
    _fleet, plans, pack = session
    for stack, plan in plans.items():
        assert _findings(pack, copy.deepcopy(plan.registrations)) == [], stack


def test_a_queued_job_that_names_a_pool_or_loses_its_card_is_refused(session):
    fleet, plans, pack = session
    regs = copy.deepcopy(plans[fleet.dispatch.manager].registrations)
    jobs = [r for r in regs if r.type == JOB]
    pod = jobs[0].inputs["spec"]["template"]["spec"]
    pod["nodeSelector"] = {"gpu": jobs[0].inputs["metadata"]["labels"]["gpu"]}
    found = "\n".join(_findings(pack, regs))
    assert "must name no pool" in found
    regs = copy.deepcopy(plans[fleet.dispatch.manager].registrations)
    pod = next(r for r in regs if r.type == JOB).inputs["spec"]["template"]["spec"]
    pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"].pop()
    assert "must name no pool" in "\n".join(_findings(pack, regs))


def test_a_missing_queued_job_is_refused_and_one_per_cluster_too(session):
    fleet, plans, pack = session
    manager = fleet.dispatch.manager
    regs = copy.deepcopy(plans[manager].registrations)
    dropped = next(r for r in regs if r.type == JOB)
    regs.remove(dropped)
    labels = dropped.inputs["metadata"]["labels"]
    found = "\n".join(_findings(pack, regs))
    assert f"places workload {labels['workload']} on card {labels['gpu']} of {manager}" in found
    # the same Job declared on a worker, as if the workload ran per cluster, is not what the policy places there
    worker = fleet.dispatch.workers[0]
    regs = copy.deepcopy(plans[worker].registrations)
    stray = copy.deepcopy(dropped)
    stray.urn = stray.urn.replace(f"urn:pulumi:{manager}::", f"urn:pulumi:{worker}::")
    regs.append(stray)
    assert "which the policy file does not place" in "\n".join(_findings(pack, regs))
