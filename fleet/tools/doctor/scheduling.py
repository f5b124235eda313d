"""Why the scheduler cannot place a pod, from its ``Unschedulable`` message, the cluster's nodes and what the
autoscaler said: an untolerated taint (the user's, or one the cluster's own components set and lift: the node
controller's on a lost, cordoned or pressured node, the autoscaler's on a node it removes, GKE's on a reclaimed VM),
nodes without the pool's label, a pod too big for its machine, a free card the pod does not fit beside, the pool
full, or nothing adding a node."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kubernetes.client import ApiClient, V1Node, V1Pod

from fleet.model.core.catalogue import load_catalogue
from fleet.model.core.pools import GpuPool
from fleet.model.placement.pods import describe, pod_requests
from fleet.tools.doctor.autoscaler import scale_up_diagnosis
from fleet.tools.doctor.context import Context, Diagnosis
from fleet.tools.doctor.hints import autoscaler_logs, label_fix
from fleet.tools.doctor.kube_objects import (
    allocatable,
    capacity,
    labels_of,
    matches,
    pool_nodes,
    quantity_of,
    selector_text,
    taint_text,
    untolerated,
)
from fleet.tools.doctor.messages import (
    CORDONED_PATTERN,
    INSUFFICIENT_PATTERN,
    NODE_CONTROLLER_TAINTS,
    NOT_TRIGGERED,
    SELECTOR_PATTERN,
    SYSTEM_TAINTS,
    TAINT_PATTERN,
    TRIGGERED,
    filter_reasons,
)

# A pod this young may simply not have been looked at by the scheduler or the autoscaler yet.
GRACE_SECONDS = 120


def _pod_spec(pod: V1Pod) -> dict[str, Any]:
    """The pod's spec in Kubernetes API field names (what fleet/model/placement/pods.py reads)."""
    return ApiClient().sanitize_for_serialization(pod.spec) or {}


def _too_big(
    pod: V1Pod, insufficient: set[str], pool: GpuPool | None, own: Sequence[V1Node], ctx: Context
) -> Diagnosis | None:
    """A pod asking more cpu, memory (or another resource but its accelerator) than an empty node of its pool has: it
    never runs there, whatever the autoscaler adds, even while a card is free. The node's allocatable is read from the
    pool's nodes, or computed from its machine by the catalogue (fleet/model/core/catalogue.py) when it has none."""
    if pool is None:
        return None
    short = sorted(r for r in insufficient if r != pool.resource)
    if not short:
        return None
    asked = pod_requests(_pod_spec(pod))
    if own:
        offered = {r: max(quantity_of(r, (n.status.allocatable or {}).get(r)) for n in own) for r in short}
        where = f"the largest allocatable of its {len(own)} node(s)"
    else:
        computed = load_catalogue().allocatable(ctx.cluster.cloud, pool.machine_type, ctx.cluster.kubernetes_version)
        if computed is None:
            return None
        offered = {r: computed.as_resources().get(r, 0) for r in short}
        where = f"a {pool.machine_type} node's allocatable ({computed.how})"
    over = [r for r in short if asked.get(r, 0) > offered[r]]
    if not over:
        return None
    numbers = ", ".join(f"{r} {describe(r, asked.get(r, 0))} > {describe(r, offered[r])}" for r in over)
    workload = labels_of(pod).get("workload", "")
    folder = f"workloads/{workload}/workload.yaml" if workload else "the pod's resources"
    return Diagnosis(
        f"the pod asks more than a node of pool {pool.name} ({pool.machine_type}) has: {numbers} ({where}); it never "
        f"fits there, even with a card free",
        f"lower resources.cpu_request / memory_request in {folder} to what the machine gives (python -m fleet validate "
        f"checks every pool), or take {pool.card} off its cards; then {ctx.up}",
    )


def _cards_in_use(node: V1Node, pool: GpuPool, ctx: Context) -> int:
    """The accelerators the fleet's pods bound to ``node`` hold (the only pods of the cluster that ask for them)."""
    held = 0
    for other in ctx.snapshot.pods:
        phase = other.status.phase if other.status else None
        if other.spec is None or other.spec.node_name != node.metadata.name or phase in ("Succeeded", "Failed"):
            continue
        held += pod_requests(_pod_spec(other)).get(pool.resource, 0)
    return held


def _free_card(
    pod: V1Pod, pool: GpuPool, own: Sequence[V1Node], counts: dict[str, int], insufficient: set[str], ctx: Context
) -> Diagnosis | None:
    """A card of the pool free on some node that the pod does not fit beside the pods already there.

    The scheduler's message counts the nodes short of each resource (``filter_reasons``); the pool's nodes that
    reach NodeResourcesFit are those whose taints the pod tolerates (TaintToleration filters first). Fewer of them
    short of the accelerator than there are means a card is free; the pod is short of something else there."""
    short = sorted(r for r in insufficient if r != pool.resource)
    reaching = [n for n in own if not untolerated(pod, n)]
    without_card = counts.get(f"Insufficient {pool.resource}", 0)
    if not short or not counts or without_card >= len(reaching):
        return None
    free = [n for n in reaching if allocatable(n, pool.resource) > _cards_in_use(n, pool, ctx)]
    names = ", ".join(sorted(n.metadata.name for n in free)) or "which, the fleet's own pods do not tell"
    asked = pod_requests(_pod_spec(pod))
    numbers = ", ".join(f"{r} {describe(r, asked.get(r, 0))}" for r in short if asked.get(r))
    said = ", ".join(f"{counts[f'Insufficient {r}']} Insufficient {r}" for r in short if f"Insufficient {r}" in counts)
    where = f"{len(reaching) - without_card} of its {len(reaching)} node(s) ({names})"
    asking = numbers or ", ".join(short)
    cause = (
        f"a {pool.resource} of pool {pool.name} is free on {where}, but the pod's request ({asking}) does not fit "
        f"beside the pods already there (the scheduler: {said})"
    )
    busy = sorted(
        other.metadata.name
        for other in ctx.snapshot.pods
        if other is not pod
        and other.spec is not None
        and other.spec.node_name in {n.metadata.name for n in free}
        and (other.status.phase if other.status else None) not in ("Succeeded", "Failed")
    )
    if busy:
        return Diagnosis(f"{cause}: it runs when {', '.join(busy)} finish(es)", waiting=True)
    workload = labels_of(pod).get("workload", "")
    folder = f"workloads/{workload}/workload.yaml" if workload else "the pod's resources"
    node = free[0].metadata.name if free else "<node>"
    return Diagnosis(
        f"{cause}; no pod of the fleet runs there, so the node's agents and system pods take what is missing, on "
        "every node of the pool",
        f"see what they request ({ctx.kubectl} describe node {node}, Allocated resources) and lower "
        f"resources.cpu_request / memory_request in {folder} below what they leave, then {ctx.up}",
    )


def scheduling_diagnoses(pod: V1Pod, message: str, pool: GpuPool | None, ctx: Context) -> list[Diagnosis]:
    """Why the scheduler cannot place the pod, from its Unschedulable message, the nodes and the autoscaler."""
    out: list[Diagnosis] = []
    nodes = ctx.snapshot.nodes
    own = pool_nodes(pool, nodes) if pool else []
    if (TAINT_PATTERN.search(message) or CORDONED_PATTERN.search(message)) and pool is not None and own:
        tainted = {n.metadata.name: untolerated(pod, n) for n in own}
        lost = {k: [t for t in v if t.key in NODE_CONTROLLER_TAINTS] for k, v in tainted.items()}
        lost = {k: v for k, v in lost.items() if v}
        for key, why in NODE_CONTROLLER_TAINTS.items():
            gone = sorted(k for k, v in lost.items() if any(t.key == key for t in v))
            if gone:
                out.append(
                    Diagnosis(
                        f"node(s) {', '.join(gone)} of pool {pool.name} are {why}: the node controller owns that "
                        f"taint ({key}) and lifts it when the kubelet reports again; a reclaimed spot node is being "
                        "replaced (the autoscaler adds a node for the pod)",
                        f"if it stays {key.rsplit('/', 1)[-1]}, delete the node ({ctx.kubectl} delete node {gone[0]}) "
                        "so that a new one replaces it",
                        waiting=True,
                    )
                )
        for key, system in SYSTEM_TAINTS.items():
            held = sorted(k for k, v in tainted.items() if any(t.key == key for t in v))
            if held:
                out.append(
                    Diagnosis(
                        f"node(s) {', '.join(held)} of pool {pool.name} are {system.state}: {system.owner} sets that "
                        f"taint ({key}) and lifts it itself, it is not one to remove",
                        system.instead.format(kubectl=ctx.kubectl, node=held[0]),
                        waiting=system.waiting,
                    )
                )
        owned = {*NODE_CONTROLLER_TAINTS, *SYSTEM_TAINTS}
        tainted = {k: [t for t in v if t.key not in owned] for k, v in tainted.items()}
        tainted = {k: v for k, v in tainted.items() if v}
        if tainted:
            taints = sorted({taint_text(t) for ts in tainted.values() for t in ts})
            out.append(
                Diagnosis(
                    f"node(s) {', '.join(sorted(tainted))} of pool {pool.name} carry the taint "
                    f"{', '.join(taints)}, which its pods do not tolerate",
                    f"if the cloud puts that taint on the pool, add it to spot_taints of {ctx.cluster.cloud} in "
                    f"fleet/model/core/catalogue.yaml (the pods then tolerate it); otherwise remove it "
                    f"({ctx.kubectl} taint nodes <node> {taints[0].split('=')[0]}-); then {ctx.up}",
                )
            )
    if SELECTOR_PATTERN.search(message) and pool is not None:
        wanted = (pod.spec.node_selector if pod.spec else None) or pool.node_selector
        known = [p.node_selector for p in ctx.cluster.all_pools]
        stray = sorted(
            n.metadata.name
            for n in nodes
            if max(capacity(n, pool.resource), allocatable(n, pool.resource)) > 0
            and not matches(labels_of(n), wanted)
            and not any(matches(labels_of(n), s) for s in known)
        )
        if stray:
            out.append(
                Diagnosis(
                    f"node(s) {', '.join(stray)} have {pool.resource} but not the label "
                    f"{selector_text(wanted)} that pool {pool.name}'s pods select",
                    label_fix(pool, ctx, stray),
                )
            )
    insufficient = {m.group(1) for m in INSUFFICIENT_PATTERN.finditer(message)}
    too_big = _too_big(pod, insufficient, pool, own, ctx)
    free = None
    if too_big is None and pool is not None and own:
        free = _free_card(pod, pool, own, filter_reasons(message), insufficient, ctx)
    scale = None if too_big is not None else scale_up_diagnosis(pod, pool, ctx)
    if free is not None and not free.waiting and scale is not None and scale.waiting:
        # the autoscaler sized a new node of the pool with its DaemonSets and found the pod fits there: what crowds it
        # out of the free card is not on every node, and the new node is what it waits for
        free = None
    if too_big is not None:
        out.append(too_big)
    elif free is not None:
        out.append(free)
    elif pool is not None and pool.resource in insufficient and own:
        total = sum(allocatable(n, pool.resource) for n in own)
        if total == 0:
            out.append(
                Diagnosis(
                    f"the {len(own)} node(s) of pool {pool.name} advertise no {pool.resource}",
                    f"see the row of pool {pool.name}: the device plugin must run there",
                )
            )
        elif len(own) >= pool.max_nodes:
            out.append(
                Diagnosis(
                    f"all {total} {pool.resource} of pool {pool.name} are taken and it has its maximum of "
                    f"{pool.max_nodes} node(s)",
                    f"wait for the pods on it to finish, or raise max_nodes under {ctx.policy_key(pool)} in the "
                    f"policy file, then {ctx.up}",
                    waiting=True,
                )
            )
    if scale is not None:
        out.append(scale)
    elif pool is not None and not out and len(own) < pool.max_nodes:
        # the pod needs a new node of its pool (none there, or none that fits) and nothing says one is coming
        created = pod.metadata.creation_timestamp
        where = f"pool {pool.name} has no node" if not own else f"no node of pool {pool.name} can take it"
        if created is not None and (ctx.now - created).total_seconds() < GRACE_SECONDS:
            out.append(Diagnosis(f"{where}; the autoscaler has not answered yet", waiting=True))
        else:
            out.append(
                Diagnosis(
                    f"{where} and no autoscaler event names the pod (no {TRIGGERED} or {NOT_TRIGGERED}): nothing "
                    "is adding a node",
                    f"check that the autoscaler runs and sees pool {pool.name}: {autoscaler_logs(ctx)}",
                )
            )
    if not out:
        out.append(
            Diagnosis(
                f"unschedulable: {message}",
                f"{ctx.kubectl} -n {pod.metadata.namespace} describe pod {pod.metadata.name}",
            )
        )
    return out
