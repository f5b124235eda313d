"""The fleet's node agents: the DaemonSets it runs on every node of a pool, and what they hold of each node.

Every Linux node runs kube-prometheus-stack's node exporter; every node of an NVIDIA pool also runs dcgm-exporter
and, where the platform brings no device plugin for some pool of the cluster, NVIDIA's device plugin (its affinity
takes every NVIDIA pool: components/kubernetes/gpu_agents.py ``gpu_node_affinity``). The components hand the charts
these requests as values; kube-scheduler counts a node's DaemonSet pods against its allocatable like any pod
(NodeResourcesFit sums the requests of every pod on the node), so a pool's own pods only get what the agents leave.
The chart tier (tests/tools/test_charts.py) places the DaemonSets the pinned charts really render on the model's
nodes and checks they hold exactly :func:`agents_on`.

The cloud's own agents (kube-proxy, the CNI, the CSI node plugins, GKE's logging and metrics agents and its device
plugin) hold some of the node too and are not counted: docs/placement.md says to keep a margin.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from fleet.model.core.clusters import Cluster
from fleet.model.core.pools import GpuPool

# prometheus-node-exporter 4.49.1 values.yaml ``resources`` (empty upstream), through kube-prometheus-stack 79.5.0's
# ``prometheus-node-exporter`` values.
NODE_EXPORTER_RESOURCES: dict[str, Any] = {"requests": {"cpu": "10m", "memory": "32Mi"}}
# nvidia-device-plugin 0.17.1 values.yaml ``resources`` (the plugin's container only: the template gives its config
# manager's init and sidecar containers none, templates/daemonset-device-plugin.yml; the release's post-renderer
# gives them these too, as NVIDIA's GPU Operator does: components/kubernetes/postrender/device_plugin.py).
DEVICE_PLUGIN_RESOURCES: dict[str, Any] = {"requests": {"cpu": "10m", "memory": "32Mi"}}
# dcgm-exporter 4.1.1 values.yaml ``resources`` (empty; its comment suggests 100m and 128Mi).
DCGM_EXPORTER_RESOURCES: dict[str, Any] = {"requests": {"cpu": "50m", "memory": "128Mi"}}


@dataclass(frozen=True)
class NodeAgent:
    """One DaemonSet of the fleet on a node: its name, the ``resources`` of its containers, and the containers its pod
    runs beside the agent's own (``sidecars``) and before them (``init``), each with the same resources."""

    name: str
    resources: dict[str, Any]
    sidecars: tuple[str, ...] = ()
    init: tuple[str, ...] = ()

    def pod_spec(self) -> dict[str, Any]:
        """Its pod as the scheduler counts it (its containers and init containers, each with the agent's requests)."""
        spec: dict[str, Any] = {
            "containers": [{"name": name, "resources": self.resources} for name in (self.name, *self.sidecars)]
        }
        if self.init:
            spec["initContainers"] = [{"name": name, "resources": self.resources} for name in self.init]
        return spec


NODE_EXPORTER = NodeAgent("prometheus-node-exporter", NODE_EXPORTER_RESOURCES)
DEVICE_PLUGIN = NodeAgent("nvidia-device-plugin", DEVICE_PLUGIN_RESOURCES)
# The device plugin where the release has a configuration (a pool it serves is shared): the chart adds its config
# manager, an init container and a sidecar (nvidia-device-plugin 0.17.1 templates/daemonset-device-plugin.yml lines
# 60-132), which the release's post-renderer gives the plugin's resources; the pod asks twice the plugin's.
DEVICE_PLUGIN_CONFIGURED = NodeAgent(
    "nvidia-device-plugin", DEVICE_PLUGIN_RESOURCES, ("nvidia-device-plugin-sidecar",), ("nvidia-device-plugin-init",)
)
DCGM_EXPORTER = NodeAgent("dcgm-exporter", DCGM_EXPORTER_RESOURCES)


# What an existing cluster's site may already run, which the fleet then does not install (policy: site_provides;
# docs/clouds.md, "Existing clusters").
SITE_GPU_AGENTS = "gpu_agents"
SITE_NODE_EXPORTER = "node_exporter"
SITE_MONITORING_CRDS = "monitoring_crds"
SiteService = Literal["gpu_agents", "node_exporter", "monitoring_crds"]
SITE_PROVIDES = (
    "Existing clusters only: what the site already runs, which the fleet then does not install: gpu_agents (the "
    "NVIDIA device plugin and dcgm-exporter, such as the GPU Operator's), node_exporter (a node exporter on each "
    "node's port 9100), monitoring_crds (the Prometheus Operator's CRDs, of the site's own monitoring stack). "
    'docs/clouds.md, "Existing clusters".'
)


def runs_device_plugin(cluster: Cluster) -> bool:
    """Whether the fleet installs NVIDIA's device plugin on ``cluster`` (some pool's platform brings none, and the
    site does not run its own)."""
    return SITE_GPU_AGENTS not in cluster.site_provides and any(p.needs_device_plugin for p in cluster.all_pools)


def configures_device_plugin(cluster: Cluster) -> bool:
    """Whether the device plugin the fleet installs on ``cluster`` has a configuration, and so its config manager: some
    pool it serves is shared (components/kubernetes/gpu_agents.py ``device_plugin_sharing``)."""
    return runs_device_plugin(cluster) and any(p.sharing and p.needs_device_plugin for p in cluster.all_pools)


def runs_gpu_exporter(cluster: Cluster) -> bool:
    """Whether the fleet installs dcgm-exporter on ``cluster`` (an NVIDIA pool, and the site runs none of its own)."""
    return SITE_GPU_AGENTS not in cluster.site_provides and any(p.accelerator.is_nvidia for p in cluster.all_pools)


def runs_node_exporter(cluster: Cluster) -> bool:
    """Whether kube-prometheus-stack's node exporter runs on ``cluster`` (the site runs none of its own)."""
    return SITE_NODE_EXPORTER not in cluster.site_provides


def agents_on(cluster: Cluster, pool: GpuPool | None) -> tuple[NodeAgent, ...]:
    """The fleet's node agents on a node of ``pool`` (None: the system pool)."""
    exporter = (NODE_EXPORTER,) if runs_node_exporter(cluster) else ()
    if pool is None or not pool.accelerator.is_nvidia:
        return exporter
    plugin = DEVICE_PLUGIN_CONFIGURED if configures_device_plugin(cluster) else DEVICE_PLUGIN
    return (
        *exporter,
        *((plugin,) if runs_device_plugin(cluster) else ()),
        *((DCGM_EXPORTER,) if runs_gpu_exporter(cluster) else ()),
    )
