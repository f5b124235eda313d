"""The rows of the GPU pools: each pool's nodes, Ready, and the accelerators (or shared slices) they advertise, with
the fix when a node advertises none or whole cards."""

from __future__ import annotations

from fleet.model.core.card_sharing import DEVICE_PLUGIN_CONFIG_LABEL
from fleet.model.core.pools import GpuPool
from fleet.tools.doctor.context import Context
from fleet.tools.doctor.kube_objects import allocatable, capacity, node_ready, pool_nodes, selector_text
from fleet.tools.doctor.names import DEVICE_PLUGIN, DEVICE_PLUGIN_NS
from fleet.tools.doctor.table import Row

# A node this young may still be installing its driver and device plugin, so advertise no accelerator yet.
NEW_NODE_SECONDS = 600


def _node_age(ctx: Context, name: str) -> float:
    """Seconds since the node ``name`` joined (its creation)."""
    node = next(n for n in ctx.snapshot.nodes if n.metadata.name == name)
    created = node.metadata.creation_timestamp
    return (ctx.now - created).total_seconds() if created else float("inf")


def pool_rows(ctx: Context) -> list[Row]:
    """One row per GPU pool: its nodes, Ready, and the accelerators they advertise."""
    rows = []
    for pool in ctx.cluster.all_pools:
        nodes = pool_nodes(pool, ctx.snapshot.nodes)
        what = f"pool {pool.name} ({selector_text(pool.node_selector)})"
        total = sum(allocatable(n, pool.resource) for n in nodes)
        state = (
            f"{len(nodes)} node(s), {total} {pool.resource} allocatable (min {pool.min_nodes}, max {pool.max_nodes})"
        )
        problems, fixes = [], []
        not_ready = sorted(n.metadata.name for n in nodes if not node_ready(n))
        if not_ready:
            problems.append(f"node(s) {', '.join(not_ready)} not Ready")
            fixes.append(f"{ctx.kubectl} describe node {not_ready[0]} (conditions, kubelet)")
        empty = sorted(n.metadata.name for n in nodes if node_ready(n) and allocatable(n, pool.resource) == 0)
        # A node that just joined advertises its cards only once its driver and device plugin are up (GKE installs
        # the driver after the node is Ready): a wait, not yet a problem.
        young = [n for n in empty if _node_age(ctx, n) < NEW_NODE_SECONDS]
        if young:
            state += f"; {', '.join(young)} joined less than {NEW_NODE_SECONDS // 60} min ago"
            empty = [n for n in empty if n not in young]
        if empty:
            problems.append(f"node(s) {', '.join(empty)} advertise 0 {pool.resource}")
            fixes.append(_no_accelerator_fix(pool, ctx, empty[0]))
        unshared = sorted(
            n.metadata.name
            for n in nodes
            if pool.sharing and 0 < capacity(n, pool.resource) < pool.units_per_node and n.metadata.name not in young
        )
        if unshared:  # the pool is shared, but its nodes advertise whole cards: pods wait for slices that are not there
            problems.append(
                f"node(s) {', '.join(unshared)} advertise fewer {pool.resource} than the pool's "
                f"{pool.units_per_node} ({pool.sharing.name if pool.sharing else ''})"
            )
            fixes.append(_sharing_fix(pool, ctx, unshared[0]))
        if not nodes and pool.min_nodes > 0:
            problems.append(f"no node, though min_nodes is {pool.min_nodes}")
            fixes.append(
                "the node group did not start its nodes: check it in the cloud (quota for "
                f"{pool.machine_type or 'the machine type'}, "
                f"{'spot ' if pool.spot else ''}capacity in {ctx.cluster.location or 'its location'})"
            )
        if not nodes and pool.min_nodes == 0:
            state += "; scaled to zero"
        rows.append(Row(what, state, "; ".join(problems), "; ".join(fixes)))
    return rows


def _sharing_fix(pool: GpuPool, ctx: Context, node: str) -> str:
    """What to look at when a shared pool's node advertises whole cards."""
    assert pool.sharing is not None
    if pool.needs_device_plugin:
        return (
            f"the node must carry {DEVICE_PLUGIN_CONFIG_LABEL}={pool.sharing.name} and the device plugin's "
            f"configuration {pool.sharing.name} ({ctx.kubectl} get node {node} --show-labels; the plugin's "
            f"config-manager log in kube-system); then {ctx.up}"
        )
    return f"the pool's GPU sharing must be {pool.sharing.name} in the cloud (recreate it with {ctx.up})"


def _no_accelerator_fix(pool: GpuPool, ctx: Context, node: str) -> str:
    if pool.needs_device_plugin:
        plugin = [
            p.metadata.name
            for p in ctx.snapshot.agent_pods.get(DEVICE_PLUGIN, [])
            if p.spec and p.spec.node_name == node
        ]
        look = (
            f"{ctx.kubectl} -n {DEVICE_PLUGIN_NS} logs {plugin[0]}"
            if plugin
            else f"it has no pod there: {ctx.kubectl} -n {DEVICE_PLUGIN_NS} get pods -l "
            f"app.kubernetes.io/instance={DEVICE_PLUGIN} -o wide"
        )
        return (
            f"the NVIDIA device plugin on {node} is not running or finds no GPU: {look} (and the driver: "
            f"nvidia-smi on the node)"
        )
    if pool.accelerator.is_nvidia and pool.cloud_facts.provides_device_plugin:
        return (
            f"the platform's GPU driver installer or device plugin has not finished on {node}: {ctx.kubectl} -n "
            f"kube-system get pods --field-selector spec.nodeName={node}"
        )
    return (
        f"the platform's device plugin for {pool.resource} is not ready on {node}: {ctx.kubectl} describe node {node}"
    )
