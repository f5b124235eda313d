"""The stack's benchmarks are exactly the policy file's (workload x card) placements for its cluster, and its probes
exactly the probed pools."""

from __future__ import annotations

from typing import Any

from pulumi_policy import ReportViolation, StackValidationArgs

from fleet.model.core import pod_contract

from .benchmark_pods import JOB_TYPES
from .registry import stack_policy
from .resources import fleet, plain, pod_template, stack_cluster


@stack_policy(
    "benchmark-set-matches-policy",
    "The stack's benchmark Jobs/CronJobs are exactly the policy file's (workload x card) placements for the cluster, "
    "and its probe CronJobs exactly its probed pools.",
)
def _validate_benchmark_set(args: StackValidationArgs, report: ReportViolation) -> None:
    found_stack = stack_cluster(args, report)
    if found_stack is None:
        return
    resources, stack, cluster = found_stack
    expected: dict[tuple[str, str], Any] = {(b.workload.name, b.pool.card): b for b in fleet().workload_jobs(cluster)}
    dispatch = fleet().dispatch
    queued = set()
    if dispatch is not None and dispatch.manager == cluster.name:  # the queued workloads' Jobs, once on the manager
        queued = {(j.workload.name, j.card) for j in fleet().queued_jobs()}
        expected.update({(j.workload.name, j.card): j for j in fleet().queued_jobs()})
    found: dict[tuple[str, str], Any] = {}
    for r in resources:
        if r.resource_type not in JOB_TYPES:  # sweep jobs: sweeps.py
            continue
        _, template = pod_template(plain(r.props), r.resource_type)
        labels = (template.get("metadata") or {}).get("labels") or {}
        if labels.get("app.kubernetes.io/part-of") != pod_contract.BENCHMARK_PART_OF and "workload" not in labels:
            continue
        key = (labels.get("workload", ""), labels.get("gpu", ""))
        if key in found:
            report(f"benchmark {key[0]} on {key[1]} is defined twice ({found[key].name}, {r.name}); keep one", r.urn)
        found[key] = r
    for key in sorted(set(expected) - set(found)):
        report(
            f"the policy file places workload {key[0]} on card {key[1]} of {stack}, but the stack has no "
            "benchmark Job/CronJob for it; create it with "
            + ("QueuedJobs(fleet.queued_jobs())" if key in queued else "WorkloadJobs(fleet.workload_jobs(cluster))")
        )
    for key in sorted(set(found) - set(expected)):
        report(
            f"benchmark {found[key].name} runs workload {key[0]} on card {key[1]}, which the policy file does not "
            f"place on {stack}; remove it or add the placement to the policy file",
            found[key].urn,
        )
    for key in sorted(set(found) & set(expected)):
        kind = "CronJob" if getattr(expected[key], "schedule", None) else "Job"
        if not found[key].resource_type.endswith(":" + kind):
            report(
                f"benchmark {found[key].name} should be a {kind} (the policy file "
                f"{'gives' if kind == 'CronJob' else 'gives no'} schedule for {key[0]})",
                found[key].urn,
            )


# --- (d) clusters are protected -------------------------------------------------------------------------------
