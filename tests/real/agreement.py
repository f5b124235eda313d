"""The model's placement (``fleet.model.placement.pods``, what ``validate`` and ``plan`` check) held against what the
real kube-scheduler did with the pods a stack really runs on a hollow cluster.

For every pod the scheduler bound, the model must admit it on a node of that pool (labels, taints, and the room an
empty node leaves after the node agents); for every pod it could not bind, the model must not admit it anywhere
either, unless the scheduler's reason is room that other pods hold (a Job waiting for a card another one has): an
empty node of the pool must hold it.
A DaemonSet's pods are placed per node by their controller (a ``matchFields`` affinity on the node's name), so only
their binding is checked.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from fleet.model.core.clusters import Cluster
from fleet.model.placement import pods as placement

#: Where a hollow node names the model's pool it was made from (tests.real.hollow.NodeSpec.manifest).
POOL_ANNOTATION = "gpu-fleet.io/pool"


def _owner_kind(pod: Mapping[str, Any]) -> str:
    owners = pod["metadata"].get("ownerReferences") or [{}]
    return str(owners[0].get("kind", ""))


def _unschedulable_reason(pod: Mapping[str, Any]) -> str:
    for condition in pod.get("status", {}).get("conditions", []):
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return str(condition.get("message", ""))
    return ""


def disagreements(cluster: Cluster, pods: Iterable[Mapping[str, Any]], nodes: list[Mapping[str, Any]]) -> list[str]:
    """Every pod of ``pods`` (API objects) on which the scheduler and the model part, in words; ``nodes`` are the
    cluster's Node objects, each annotated with its pool."""
    model = {node.pool: node for node in placement.cluster_nodes(cluster)}
    pool_of = {n["metadata"]["name"]: n["metadata"].get("annotations", {}).get(POOL_ANNOTATION) for n in nodes}
    out = []
    for pod in pods:
        name = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
        spec = pod["spec"]
        admitted = sorted(pool for pool, node in model.items() if not node.reasons(spec))
        bound = spec.get("nodeName")
        if bound:
            pool = pool_of.get(bound)
            if _owner_kind(pod) != "DaemonSet" and pool not in admitted:
                reasons = model[pool].reasons(spec) if pool in model else ["no such pool in the model"]
                out.append(f"{name}: the scheduler bound it to pool {pool}, the model refuses it there: {reasons}")
            continue
        reason = _unschedulable_reason(pod)
        if not reason:
            continue  # not tried yet
        if not admitted:
            continue
        if "Insufficient" not in reason and "Too many pods" not in reason:
            out.append(f"{name}: the model admits it on {', '.join(admitted)}, the scheduler did not: {reason}")
        elif not any(_holds(spec, n) for n in nodes if pool_of.get(n["metadata"]["name"]) in admitted):
            # room is excused only when other pods hold it: an empty node of the pool must hold the pod
            out.append(f"{name}: the model admits it on {', '.join(admitted)}, no node of it could ever: {reason}")
    return out


def _holds(spec: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """Whether the Node object ``node``'s allocatable, empty, holds the requests of the pod spec ``spec``."""
    allocatable = node.get("status", {}).get("allocatable", {})
    have = placement.container_requests({"resources": {"requests": allocatable}})
    return all(have.get(name, 0) >= amount for name, amount in placement.pod_requests(spec).items() if amount)
