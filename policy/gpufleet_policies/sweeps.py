"""Scaling sweeps: each sweep point of the policy file is one queued TrainJob with its total accelerator count on a
pool that can hold it, and the training operator and Kueue run exactly where sweeps run.

The workers' pods themselves (placement, limits, sidecar, labels, images, Pod Security) are checked as benchmark pods
(benchmark_pods.py, pod_security.py): the pack reads them from the TrainingRuntime each TrainJob names.
"""

from __future__ import annotations

from typing import Any

from pulumi_policy import ReportViolation, ResourceValidationArgs, StackValidationArgs

from fleet.model.core import pod_contract
from fleet.model.core.clusters import Cluster
from fleet.model.core.jobs import QueuedPoint
from fleet.model.core.pod_contract import TRAINJOB_NAME, max_trainjob_name
from fleet.model.core.pools import CARDS_PER_NODE_LABEL
from fleet.model.core.quantity import parse_quantity
from fleet.model.queues.queued_sweeps import runs_trainer

from .registry import resource_policy, stack_policy
from .resources import TRAIN_JOB, TRAINING_RUNTIME, fleet, plain, pod_template, release_charts, stack_cluster, stack_of

KUEUE = "kubernetes:kueue.x-k8s.io/"
OPERATOR_CHARTS = ("kubeflow-trainer", "kueue")


@resource_policy(
    "sweep-job-queued",
    "Sweep TrainJobs name a sweeps' LocalQueue, so Kueue admits all of a job's workers together or none.",
)
def _validate_queued(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type != TRAIN_JOB:
        return
    props = plain(args.props)
    labels = (props.get("metadata") or {}).get("labels") or {}
    queue = labels.get(pod_contract.QUEUE_NAME_LABEL)
    if not pod_contract.is_sweep_queue(str(queue or "")) and _queued_point(args.urn, props) is None:
        report(
            f"TrainJob {args.name!r} has {pod_contract.QUEUE_NAME_LABEL}={queue!r}, not its pool's "
            f"{pod_contract.sweep_queue('<pool>')!r}: "
            "without Kueue its workers start one by one as nodes come, and a half-started job holds GPU nodes while "
            "it waits; label it as components/kubernetes/sweeps.py does (a queued sweep point, on the queues' manager "
            "only: its queue, as components/kubernetes/queued_sweeps.py does)"
        )
    name = str((props.get("metadata") or {}).get("name") or "")
    nodes = int(((props.get("spec") or {}).get("trainer") or {}).get("numNodes") or 1)
    longest = max_trainjob_name(nodes)
    if not TRAINJOB_NAME.match(name) or len(name) > longest:
        report(
            f"TrainJob {args.name!r} is named {name!r}: Trainer wants a DNS-1035 label (a letter first) and JobSet "
            f"names its {nodes} pods after it, so it must be at most {longest} characters; name it with "
            "components/kubernetes/sweeps.trainjob_name"
        )
    ref = (props.get("spec") or {}).get("runtimeRef") or {}
    if ref.get("kind") != "TrainingRuntime" or not ref.get("name"):
        report(
            f"TrainJob {args.name!r} must name its own TrainingRuntime (runtimeRef kind TrainingRuntime), which "
            "holds the workers' pod; got {ref!r}"
        )


def _queued_point(urn: str, props: dict[str, Any], per_node: int | None = None) -> QueuedPoint | None:
    """The queued sweep point a TrainJob of the queues' manager declares (its workload, card and queue, and with
    ``per_node``, the cards of each of its workers, its nodes and size); else None."""
    dispatch = fleet().dispatch
    if dispatch is None or stack_of(urn) != dispatch.manager:
        return None
    labels = (props.get("metadata") or {}).get("labels") or {}
    key = (labels.get("workload"), labels.get("gpu"), labels.get(pod_contract.QUEUE_NAME_LABEL))
    nodes = ((props.get("spec") or {}).get("trainer") or {}).get("numNodes")
    return next(
        (
            p
            for p in fleet().queued_points()
            if (p.workload.name, p.card, p.queue.name) == key
            and (per_node is None or (p.nodes, p.per_node) == (nodes, per_node))
        ),
        None,
    )


def _resource(card: str) -> str:
    """The extended resource of ``card``, as some pool of the fleet names it (``nvidia.com/gpu`` if none does)."""
    pools = (p for c in fleet().clusters.values() for p in c.pools if p.card == card)
    return next((p.resource for p in pools), "nvidia.com/gpu")


def _workers(runtime: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """(numNodes, worker pod spec) of a TrainingRuntime's inputs."""
    _, template = pod_template(runtime, TRAINING_RUNTIME)
    nodes = ((runtime.get("spec") or {}).get("mlPolicy") or {}).get("numNodes") or 1
    return int(nodes), template.get("spec") or {}


def _cards(pod: dict[str, Any], resource: str) -> int:
    """Cards of ``resource`` the pod's containers ask for."""
    total = 0
    for container in pod.get("containers") or []:
        limits = (container.get("resources") or {}).get("limits") or {}
        if limits.get(resource):
            total += int(parse_quantity(str(limits[resource])))
    return total


def _found_points(cluster: Cluster, resources: list[Any], report: ReportViolation) -> dict[tuple[str, str, int], Any]:
    """(workload, card, total accelerators) -> TrainJob of the stack, checking each job against its pool."""
    runtimes = {
        (plain(r.props).get("metadata") or {}).get("name"): plain(r.props)
        for r in resources
        if r.resource_type == TRAINING_RUNTIME
    }
    found: dict[tuple[str, str, int], Any] = {}
    for r in resources:
        if r.resource_type != TRAIN_JOB:
            continue
        props = plain(r.props)
        labels = (props.get("metadata") or {}).get("labels") or {}
        runtime = runtimes.get(((props.get("spec") or {}).get("runtimeRef") or {}).get("name"))
        if runtime is None:
            report(f"TrainJob {r.name} names no TrainingRuntime of this stack", r.urn)
            continue
        nodes, pod = _workers(runtime)
        nodes = int(((props.get("spec") or {}).get("trainer") or {}).get("numNodes") or nodes)
        card, workload = labels.get("gpu", ""), labels.get("workload", "")
        size = (pod.get("nodeSelector") or {}).get(CARDS_PER_NODE_LABEL)
        pool = cluster.pool_sized(card, size)
        if pool is None:
            report(f"TrainJob {r.name} runs {card} on no pool of {cluster.name} (cards per node {size})", r.urn)
            continue
        per_node = _cards(pod, pool.resource)
        whole = pool.accelerator.whole_host
        if per_node > pool.accelerators_per_node or (whole and per_node != pool.accelerators_per_node):
            report(
                f"TrainJob {r.name} asks {per_node} {card} per worker on {pool.machine_type}, which has "
                f"{pool.accelerators_per_node}{' (a TPU job takes whole machines)' if whole else ''}",
                r.urn,
            )
        if nodes > pool.max_nodes:
            report(
                f"TrainJob {r.name} needs {nodes} nodes but pool {pool.name} has max_nodes {pool.max_nodes}: "
                "Kueue would never admit it",
                r.urn,
            )
        queue = labels.get(pod_contract.QUEUE_NAME_LABEL)
        if queue != pod_contract.sweep_queue(pool.name):
            report(
                f"TrainJob {r.name} runs on pool {pool.name} but names the queue {queue!r}, not the pool's own "
                f"{pod_contract.sweep_queue(pool.name)!r}: in another pool's queue Kueue charges it to that pool",
                r.urn,
            )
        found[(workload, card, nodes * per_node)] = r
    return found


def _kueue_objects(resources: list[Any], kind: str) -> dict[str, dict[str, Any]]:
    """The stack's Kueue objects of ``kind`` by name."""
    out = {}
    for r in resources:
        if r.resource_type.startswith(KUEUE) and r.resource_type.endswith(f":{kind}"):
            props = plain(r.props) or {}
            out[str((props.get("metadata") or {}).get("name", ""))] = props
    return out


def _validate_pool_queues(cluster: Cluster, resources: list[Any], report: ReportViolation) -> None:
    """Each pool a sweep point runs on has its LocalQueue and a ClusterQueue of its own flavor alone (kueue v0.19.2
    pkg/scheduler/flavorassigner: a flavor is matched on its own label keys only and the next flavor tried when one
    does not fit, so a card pool's flavor in the same ClusterQueue would take the points of its full sweep pools)."""
    local = _kueue_objects(resources, "LocalQueue")
    queues = _kueue_objects(resources, "ClusterQueue")
    flavors = _kueue_objects(resources, "ResourceFlavor")
    for pool in {p.pool.name: p.pool for p in fleet().sweep_points(cluster)}.values():
        name = pod_contract.sweep_queue(pool.name)
        target = ((local.get(name) or {}).get("spec") or {}).get("clusterQueue")
        if target != pod_contract.sweep_cluster_queue(pool.name) or target not in queues:
            report(
                f"{cluster.name} sweeps on pool {pool.name} but has no LocalQueue {name} of the ClusterQueue "
                f"{pod_contract.sweep_cluster_queue(pool.name)}: create them with TrainingOperators"
            )
            continue
        groups = (queues[target].get("spec") or {}).get("resourceGroups") or []
        held = [f.get("name") for g in groups for f in g.get("flavors") or []]
        labels = [((flavors.get(str(f)) or {}).get("spec") or {}).get("nodeLabels") for f in held]
        if labels != [dict(pool.node_selector)]:
            report(
                f"the ClusterQueue {target} must hold the flavor of pool {pool.name} alone (node labels "
                f"{dict(pool.node_selector)}); it holds {held}: Kueue would charge the pool's points to another "
                "pool's flavor when its own is full"
            )


@stack_policy(
    "sweep-set-matches-policy",
    "The stack's TrainJobs are exactly the policy file's sweep points for the cluster, each on a pool that holds it, "
    "and Kubeflow Trainer and Kueue are deployed exactly where a sweep runs (Kueue also where the fleet's queues "
    "reach: their manager and workers).",
)
def _validate_sweep_set(args: StackValidationArgs, report: ReportViolation) -> None:
    found_stack = stack_cluster(args, report)
    if found_stack is None:
        return
    resources, stack, cluster = found_stack
    dispatch = fleet().dispatch
    if dispatch is not None and stack == dispatch.manager:
        # the manager's TrainJobs: the queued sweep points it dispatches, and the sweep points of its own pools (in
        # their pools' own queues), checked as any sweep cluster's
        own_job = [r.resource_type == TRAIN_JOB and _in_sweep_queue(r) for r in resources]
        _validate_manager_points([r for r, own in zip(resources, own_job, strict=True) if not own], stack, report)
        if not fleet().sweep_points(cluster) and not any(own_job):
            return
        trainjob = [r.resource_type == TRAIN_JOB for r in resources]
        resources = [r for r, own, job in zip(resources, own_job, trainjob, strict=True) if own or not job]
    expected = {(p.workload.name, p.card, p.accelerators) for p in fleet().sweep_points(cluster)}
    found = _found_points(cluster, resources, report)
    _validate_pool_queues(cluster, resources, report)
    for workload, card, n in sorted(expected - set(found)):
        report(
            f"the policy file sweeps {workload} over {n} {card} on {stack}, but the stack has no TrainJob with that "
            "many accelerators; create them with SweepJobs(fleet.sweep_points(cluster))"
        )
    for key in sorted(set(found) - expected):
        workload, card, n = key
        report(
            f"TrainJob {found[key].name} runs {workload} on {n} {card}, which is not a sweep point of the policy file "
            f"on {stack}; remove it or add the point to the workload's scale",
            found[key].urn,
        )
    charts = release_charts(resources)
    queued = fleet().dispatch is not None and fleet().dispatch.role(stack) is not None  # type: ignore[union-attr]
    trains = runs_trainer(fleet(), cluster)  # also a worker of queues that dispatch sweep points
    # Kueue also runs where the benchmarks wait their turn (benchmark_queue.py)
    queued = queued or any(
        r.resource_type.startswith(KUEUE)
        and r.resource_type.endswith(":ClusterQueue")
        and ((plain(r.props) or {}).get("metadata") or {}).get("name") == pod_contract.BENCHMARK_CLUSTER_QUEUE
        for r in resources
    )
    for name in OPERATOR_CHARTS:
        if (expected or trains) and name not in charts:
            report(f"{stack} runs sweep jobs but has no {name} release: nothing would admit or run them")
        if not expected and name in charts and not trains and not (name == "kueue" and queued):
            report(f"{stack} runs no sweep but deploys {name}: remove the release (TrainingOperators)")


def _in_sweep_queue(resource: Any) -> bool:
    """Whether a TrainJob names a pool's own sweep queue (a sweep point of its cluster, not a queued one)."""
    labels = ((plain(resource.props) or {}).get("metadata") or {}).get("labels") or {}
    return pod_contract.is_sweep_queue(str(labels.get(pod_contract.QUEUE_NAME_LABEL) or ""))


def _validate_manager_points(resources: list[Any], stack: str, report: ReportViolation) -> None:
    """The queues' manager: its TrainJobs are exactly the queued sweep points, once each, and it runs Trainer (its
    CRDs and webhooks; its controller skips the TrainJobs MultiKueue manages) when there are any."""
    expected = {p.name: p for p in fleet().queued_points()}
    runtimes = {
        (plain(r.props).get("metadata") or {}).get("name"): plain(r.props)
        for r in resources
        if r.resource_type == TRAINING_RUNTIME
    }
    found: dict[str, Any] = {}
    for r in resources:
        if r.resource_type != TRAIN_JOB:
            continue
        props = plain(r.props)
        runtime = runtimes.get(((props.get("spec") or {}).get("runtimeRef") or {}).get("name"))
        card = ((props.get("metadata") or {}).get("labels") or {}).get("gpu", "")
        per_node = _cards(_workers(runtime)[1], _resource(card)) if runtime is not None else -1
        point = _queued_point(r.urn, props, per_node)
        if point is None:
            report(
                f"TrainJob {r.name} on the queues' manager {stack} is no queued sweep point of the policy file (its "
                "workload, card, queue and nodes): the manager runs nothing itself; remove it",
                r.urn,
            )
        elif point.name in found:
            report(f"the queued sweep point {point.name} is declared twice on {stack}", r.urn)
        else:
            found[point.name] = r
    for name in sorted(set(expected) - set(found)):
        report(
            f"the policy file sweeps {name} through queue {expected[name].queue.name}, but the manager {stack} has no "
            "TrainJob for it; create them with QueuedSweepJobs(fleet.queued_points())"
        )
    charts = release_charts(resources)
    if expected and "kubeflow-trainer" not in charts:
        report(f"{stack} dispatches queued sweep points but has no kubeflow-trainer release (TrainJob's CRDs)")
