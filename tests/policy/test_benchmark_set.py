"""policy/gpufleet_policies/benchmark_set.py: a stack's benchmarks are exactly the policy file's placements."""

from __future__ import annotations

import copy

from tests.policy.support import JOB, only


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
