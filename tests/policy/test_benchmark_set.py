"""policy/gpufleet_policies/benchmark_set.py: a stack's benchmarks are exactly the policy file's placements."""

from __future__ import annotations

import copy

from tests.policy.support import CRONJOB, JOB, only


def test_stack_missing_and_extra_benchmarks(plans, session):
    regs = copy.deepcopy(plans["fix-eks"].registrations)
    jobs = [r for r in regs if r.type == JOB]
    dropped = jobs[0]
    regs.remove(dropped)
    extra = jobs[1]
    extra.inputs["spec"]["template"]["metadata"]["labels"]["workload"] = "not-in-policy"
    findings = only(session.analyze_registrations(regs), "benchmark-set-matches-policy")
    labels = dropped.inputs["spec"]["template"]["metadata"]["labels"]
    assert any(f"workload {labels['workload']} on card {labels['gpu']}" in f.message for f in findings)
    assert any("not-in-policy" in f.message and f.urn == extra.urn for f in findings)
    assert all(f.level == "mandatory" for f in findings)


def test_every_probed_pool_has_its_probe_and_no_other_pool_has_one(plans, session):
    """fix-eks scales every pool to zero, so each pool has a probe; the magnum pools keep a node, so none has."""
    regs = copy.deepcopy(plans["fix-eks"].registrations)
    probes = [r for r in regs if r.type == CRONJOB and pod_labels(r)["workload"] == "probe"]
    assert sorted(pod_labels(r)["gpu"] for r in probes) == ["a10g", "t4", "v100"]
    assert not [r for r in plans["fix-magnum"].registrations if r.type == CRONJOB and "probe" in r.name]
    assert not only(session.analyze_registrations(regs), "benchmark-set-matches-policy")
    regs.remove(probes[0])
    findings = only(session.analyze_registrations(regs), "benchmark-set-matches-policy")
    assert [f.message.splitlines()[-1] for f in findings] == [  # after the policy's description
        f"the policy file places workload probe on card {pod_labels(probes[0])['gpu']} of fix-eks, but the stack has "
        "no benchmark Job/CronJob for it; create it with WorkloadJobs(fleet.workload_jobs(cluster))"
    ]
    as_job = copy.deepcopy(probes[1])
    as_job.type = JOB
    as_job.inputs["spec"] = as_job.inputs["spec"]["jobTemplate"]["spec"]
    regs[regs.index(probes[1])] = as_job
    findings = only(session.analyze_registrations(regs), "benchmark-set-matches-policy")
    assert any("should be a CronJob" in f.message for f in findings)


def pod_labels(r) -> dict[str, str]:
    return r.inputs["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["labels"]
