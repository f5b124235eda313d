"""The rows of the benchmarks and pool probes the policy places on a cluster: each one's Job, or its CronJob and
newest Job, found by the fleet's labels."""

from __future__ import annotations

from kubernetes.client import V1CronJob

from fleet.model.core import pod_contract
from fleet.tools.doctor.context import Context
from fleet.tools.doctor.jobs import job_state
from fleet.tools.doctor.kube_objects import age_of, labels_of, matches, newest_of, owner_of, selector_text
from fleet.tools.doctor.names import PART_OF
from fleet.tools.doctor.table import Row


def _cronjob_row(what: str, cronjob: V1CronJob, ctx: Context) -> Row:
    spec = cronjob.spec
    jobs = [j for j in ctx.snapshot.jobs if owner_of(j, "CronJob") == cronjob.metadata.name]
    jobs = [j for j in jobs if j.metadata.namespace == cronjob.metadata.namespace]
    schedule = f"schedule '{spec.schedule}'"
    if spec.suspend:
        return Row(
            what,
            f"{schedule}, suspended",
            f"CronJob {cronjob.metadata.name} is suspended",
            f"{ctx.up} restores it",
        )
    if not jobs:
        last = cronjob.status.last_schedule_time if cronjob.status else None
        seen = f"last scheduled {age_of(last, ctx.now)} ago, its Job is gone" if last else "not run yet"
        return Row(what, f"{schedule}, {seen}")
    newest = newest_of(jobs)
    state, problem, fix = job_state(newest, ctx)
    return Row(what, f"{schedule}; last Job {newest.metadata.name}: {state}", problem, fix)


def benchmark_rows(ctx: Context) -> list[Row]:
    """One row per benchmark the policy places on the cluster (a Job, or a CronJob and its newest Job) and one per
    probed pool (its probe CronJob and newest Job)."""
    rows = []
    snap = ctx.snapshot
    probes = ctx.fleet.probes(ctx.cluster)
    for bench in ctx.fleet.workload_jobs(ctx.cluster):
        workload, card = bench.workload.name, bench.pool.card
        namespace = (
            pod_contract.ROOT_BENCHMARK_NAMESPACE
            if bench.workload.spec.needs_root
            else pod_contract.BENCHMARK_NAMESPACE
        )
        what = f"probe of pool {bench.pool.name}" if bench in probes else f"benchmark {workload} on {card}"
        wanted = {PART_OF: pod_contract.BENCHMARK_PART_OF, "workload": workload, "gpu": card}
        if bench.schedule:
            crons = [c for c in snap.cronjobs if c.metadata.namespace == namespace and matches(labels_of(c), wanted)]
            if not crons:
                rows.append(
                    Row(
                        what,
                        "not found",
                        f"no CronJob in {namespace} with labels {selector_text(wanted)}",
                        f"{ctx.up} creates it",
                    )
                )
                continue
            rows.append(_cronjob_row(what, newest_of(crons), ctx))
            continue
        jobs = [
            j
            for j in snap.jobs
            if j.metadata.namespace == namespace and matches(labels_of(j), wanted) and not owner_of(j, "CronJob")
        ]
        if not jobs:
            rows.append(
                Row(
                    what,
                    "not found",
                    f"no Job in {namespace} with labels {selector_text(wanted)}",
                    f"{ctx.up} creates it",
                )
            )
            continue
        newest = newest_of(jobs)
        state, problem, fix = job_state(newest, ctx)
        rows.append(Row(what, f"Job {newest.metadata.name}: {state}", problem, fix))
    return rows
