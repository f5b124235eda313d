"""The rows of the node agents: the NVIDIA device plugin (where the platform brings none) and dcgm-exporter, their
DaemonSets ready and covering every node of the pools they serve."""

from __future__ import annotations

from collections.abc import Sequence

from fleet.model.core.pools import GpuPool
from fleet.model.placement.node_agents import SITE_GPU_AGENTS
from fleet.tools.doctor.context import Context
from fleet.tools.doctor.kube_objects import pod_ready, pool_nodes
from fleet.tools.doctor.names import DEVICE_PLUGIN, DEVICE_PLUGIN_NS, EXPORTER, NODE_AGENTS_NS
from fleet.tools.doctor.pods import container_diagnoses
from fleet.tools.doctor.table import Row


def _daemonset_row(
    what: str, key: str, namespace: str, served: Sequence[GpuPool], ctx: Context, install_note: str
) -> Row:
    ds = ctx.snapshot.daemonsets.get(key)
    if ds is None:
        return Row(
            what,
            "not found",
            f"no DaemonSet {namespace}/{key}",
            f"{install_note}: {ctx.up} installs it (Helm release {key})",
        )
    desired = (ds.status.desired_number_scheduled if ds.status else 0) or 0
    ready = (ds.status.number_ready if ds.status else 0) or 0
    state = f"{ready}/{desired} ready"
    nodes = sorted({n.metadata.name for p in served for n in pool_nodes(p, ctx.snapshot.nodes)})
    pods = ctx.snapshot.agent_pods.get(key, [])
    covered = {p.spec.node_name for p in pods if p.spec and p.spec.node_name}
    problems, fixes = [], []
    if ready < desired:
        unready = [p for p in pods if not pod_ready(p)]
        details = []
        for p in unready:
            reasons = [d.cause for d in container_diagnoses(p, ctx)] or [p.status.phase if p.status else "?"]
            details.append(f"{p.metadata.name} on {p.spec.node_name if p.spec else '?'}: {'; '.join(reasons)}")
        problems.append(f"{desired - ready} pod(s) not ready" + (f" ({'; '.join(details)})" if details else ""))
        name = unready[0].metadata.name if unready else f"-l app.kubernetes.io/instance={key}"
        fixes.append(f"{ctx.kubectl} -n {namespace} describe pod {name}; {ctx.kubectl} -n {namespace} logs {name}")
    if pods or not desired:
        missing = [n for n in nodes if n not in covered]
        if missing:
            problems.append(f"no pod on node(s) {', '.join(missing)} of the GPU pools")
            fixes.append(
                f"its tolerations or node affinity do not admit those nodes (components/kubernetes/gpu_agents.py "
                f"gpu_tolerations, gpu_node_affinity): {ctx.up}"
            )
    if not nodes:
        state += "; no GPU node now"
    return Row(what, state, "; ".join(problems), "; ".join(fixes))


def agent_rows(ctx: Context) -> list[Row]:
    """The NVIDIA device plugin where the platform brings none, and dcgm-exporter on the NVIDIA pools."""
    nvidia = [p for p in ctx.cluster.pools if p.accelerator.is_nvidia]
    if not nvidia:
        return []
    rows = []
    if SITE_GPU_AGENTS in ctx.cluster.site_provides:  # the site's own (the GPU Operator's), not the fleet's to check
        return [Row("NVIDIA device plugin and dcgm-exporter", "the site's own (site_provides: gpu_agents)")]
    plugin = [p for p in nvidia if p.needs_device_plugin]
    what = f"NVIDIA device plugin ({DEVICE_PLUGIN_NS}/{DEVICE_PLUGIN})"
    if plugin:
        rows.append(_daemonset_row(what, DEVICE_PLUGIN, DEVICE_PLUGIN_NS, plugin, ctx, "the fleet installs it here"))
    else:
        rows.append(Row(what, f"not needed: the platform ({ctx.cluster.facts.title}) brings its own"))
    rows.append(
        _daemonset_row(
            f"dcgm-exporter ({NODE_AGENTS_NS}/{EXPORTER})", EXPORTER, NODE_AGENTS_NS, nvidia, ctx, "GPU metrics need it"
        )
    )
    return rows
