"""The benchmark queue (fleet/model/benchmark_queue/): where a stack has one, every benchmark and probe Job names it,
it holds a flavor of each card pool they run on with the pool's node selector and capacity, each benchmark namespace
has its LocalQueue, and Kueue runs there; a Job naming the queue on a stack without it would never start."""

from __future__ import annotations

from typing import Any

from pulumi_policy import ReportViolation, StackValidationArgs

from fleet.model.benchmark_queue.quotas import flavor_quota, queued_pools
from fleet.model.core import pod_contract

from .benchmark_pods import JOB_TYPES
from .queues import KUEUE
from .registry import stack_policy
from .resources import fleet, plain, release_charts, stack_cluster


def _kind(resources: list[Any], kind: str) -> list[dict[str, Any]]:
    return [plain(r.props) or {} for r in resources if r.resource_type == KUEUE + kind]


def _named(items: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [i for i in items if (i.get("metadata") or {}).get("name") == name]


def _queue_of(props: dict[str, Any], resource_type: str) -> tuple[str | None, dict[str, str]]:
    """(the LocalQueue a Job, or the Jobs of a CronJob, name; the pod labels)."""
    spec = props.get("spec") or {}
    holder = (spec.get("jobTemplate") or {}) if resource_type.endswith(":CronJob") else props
    job_spec = (holder.get("spec") or {}) if resource_type.endswith(":CronJob") else spec
    labels = ((job_spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    return ((holder.get("metadata") or {}).get("labels") or {}).get(pod_contract.QUEUE_NAME_LABEL), labels


@stack_policy(
    "benchmarks-wait-their-turn",
    "Where a stack has the benchmark queue, every benchmark and probe Job names it, and it holds each card pool they "
    "run on at the pool's capacity, so the Jobs of a card run in turn and a waiting Job holds no quota.",
)
def _validate_benchmark_queue(args: StackValidationArgs, report: ReportViolation) -> None:
    found = stack_cluster(args, report)
    if found is None:
        return
    resources, stack, cluster = found
    dispatch = fleet().dispatch
    manager = dispatch is not None and dispatch.manager == stack  # its queued Jobs name the fleet's queues
    queues = _named(_kind(resources, "ClusterQueue"), pod_contract.BENCHMARK_CLUSTER_QUEUE)
    jobs = []
    for r in resources:
        if r.resource_type not in JOB_TYPES:
            continue
        queue, labels = _queue_of(plain(r.props) or {}, r.resource_type)
        if labels.get("app.kubernetes.io/part-of") != pod_contract.BENCHMARK_PART_OF:
            continue
        if manager and queue is not None and queue != pod_contract.BENCHMARK_QUEUE:
            continue
        jobs.append((r, queue))
    if not queues:
        for r, queue in jobs:
            if queue == pod_contract.BENCHMARK_QUEUE:
                report(
                    f"benchmark {r.name} names the LocalQueue {queue}, but {stack} has no benchmark queue "
                    f"({pod_contract.BENCHMARK_CLUSTER_QUEUE}): it would never start; build both with "
                    "WorkloadJobs(queue=...)",
                    r.urn,
                )
        return
    for r, queue in jobs:
        if queue != pod_contract.BENCHMARK_QUEUE:
            report(
                f"benchmark {r.name} does not wait its turn: {stack} queues its benchmarks, so its Job must carry "
                f"{pod_contract.QUEUE_NAME_LABEL}: {pod_contract.BENCHMARK_QUEUE} (a CronJob: in its jobTemplate), "
                "or it starts at once and its pod waits for a card, holding the namespace's quota",
                r.urn,
            )
    spec = queues[0].get("spec") or {}
    held: dict[str, dict[str, str]] = {}
    for group in spec.get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            held[str(flavor.get("name"))] = {
                q.get("name"): str(q.get("nominalQuota")) for q in flavor.get("resources") or []
            }
    flavors = {
        str((f.get("metadata") or {}).get("name")): f.get("spec") or {} for f in _kind(resources, "ResourceFlavor")
    }
    for pool in queued_pools(fleet(), cluster):
        name = pod_contract.benchmark_flavor(pool.name)
        if name not in held:
            report(f"the benchmark queue of {stack} has no flavor {name}: the Jobs on {pool.name} would never start")
            continue
        if held[name].get(pool.resource) != str(flavor_quota(pool)):
            report(
                f"the flavor {name} of the benchmark queue holds {held[name].get(pool.resource)} {pool.resource}, but "
                f"pool {pool.name} holds {flavor_quota(pool)} (max_nodes x units per node)"
            )
        if (flavors.get(name) or {}).get("nodeLabels") != pool.node_selector:
            report(
                f"the flavor {name} of the benchmark queue does not label pool {pool.name}'s nodes "
                f"({pool.node_selector}): Kueue would charge its Jobs to no pool or another"
            )
    namespaces = {
        str((q.get("metadata") or {}).get("namespace"))
        for q in _named(_kind(resources, "LocalQueue"), pod_contract.BENCHMARK_QUEUE)
        if (q.get("spec") or {}).get("clusterQueue") == pod_contract.BENCHMARK_CLUSTER_QUEUE
    }
    wanted = {
        pod_contract.ROOT_BENCHMARK_NAMESPACE if b.workload.spec.needs_root else pod_contract.BENCHMARK_NAMESPACE
        for b in fleet().workload_jobs(cluster)
    }
    for ns in sorted(wanted - namespaces):
        report(
            f"{stack} has no LocalQueue {pod_contract.BENCHMARK_QUEUE} in {ns}: its benchmarks there would never start"
        )
    charts = release_charts(resources)
    if "kueue" not in charts:
        report(f"{stack} queues its benchmarks but has no kueue release: nothing would admit them")
