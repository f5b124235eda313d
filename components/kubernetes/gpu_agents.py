"""The NVIDIA node agents on GPU nodes: the device plugin where the platform has none (with its time-slicing or
MIG configuration where a pool is shared) and dcgm-exporter, scheduled onto every NVIDIA pool and tolerating its
taints."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import yaml

from components.kubernetes.images import helm_release
from components.kubernetes.postrender import DEVICE_PLUGIN_POSTRENDER
from fleet.model.core.card_sharing import Sharing
from fleet.model.core.clusters import Cluster
from fleet.model.core.fleet import Fleet
from fleet.model.placement.node_agents import (
    DCGM_EXPORTER_RESOURCES,
    DEVICE_PLUGIN_RESOURCES,
    runs_device_plugin,
    runs_gpu_exporter,
)

CRITICAL_PRIORITY = ("system-node-critical", "system-cluster-critical")


def gpu_tolerations(cluster: Cluster) -> list[dict[str, str]]:
    """Tolerations for DaemonSets that must run on every GPU node: each accelerator taint and spot taint."""
    seen: dict[str, dict[str, str]] = {}
    for pool in cluster.all_pools:
        for taint in pool.pod_tolerations:
            seen[taint.as_string()] = taint.toleration()
    return list(seen.values())


def device_plugin_config(sharing: Sharing | None) -> dict[str, Any]:
    """One configuration of the NVIDIA device plugin (NVIDIA/k8s-device-plugin v0.17.1 api/config/v1, README "With
    CUDA Time-Slicing"): whole cards, N time slices per card (a pod asking more than one slice is refused, as NVIDIA
    recommends: it would not get more GPU), or the MIG instances of a node, each a ``nvidia.com/gpu`` (single
    strategy, as AKS's MIG pools want)."""
    config: dict[str, Any] = {"version": "v1", "flags": {"migStrategy": "none"}}
    if sharing is not None and sharing.kind == "mig":
        config["flags"]["migStrategy"] = "single"
    elif sharing is not None:
        resources = [{"name": "nvidia.com/gpu", "replicas": sharing.units}]
        config["sharing"] = {"timeSlicing": {"failRequestsGreaterThanOne": True, "resources": resources}}
    return config


def device_plugin_sharing(cluster: Cluster) -> dict[str, Any]:
    """The device plugin chart's ``config`` values where a pool we run the plugin on is shared: one named
    configuration per kind of sharing plus ``default``, which a node takes unless its label
    ``nvidia.com/device-plugin.config`` names another (the chart's config-manager reads it); {} otherwise, so an
    unshared cluster's plugin runs as before."""
    shared = {p.sharing.name: p.sharing for p in cluster.all_pools if p.sharing and p.needs_device_plugin}
    if not shared:
        return {}
    configs = {"default": device_plugin_config(None)}
    configs.update({name: device_plugin_config(sharing) for name, sharing in sorted(shared.items())})
    return {
        "config": {
            "default": "default",
            "map": {name: yaml.safe_dump(config, sort_keys=False) for name, config in configs.items()},
        }
    }


def gpu_node_affinity(cluster: Cluster) -> dict[str, Any]:
    """Node affinity onto any GPU pool of the cluster, from each pool's own selector label.

    Works on every cloud: ``gpu=<card>`` where we label pools, the node-group role on Magnum.
    """
    terms = [
        {
            "matchExpressions": [
                {"key": k, "operator": "In", "values": [v]} for k, v in sorted(pool.node_selector.items())
            ]
        }
        for pool in cluster.all_pools
        if pool.accelerator.is_nvidia
    ]
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}


def gpu_node_agents(
    cluster: Cluster,
    fleet: Fleet,
    agents_ns: pulumi.Input[str],
    prometheus: pulumi.Resource,
    opts: pulumi.ResourceOptions,
    exporter_values: dict[str, Any] | None = None,
) -> None:
    """The device plugin (in kube-system, where a pool needs ours) and dcgm-exporter (in the node agents' namespace,
    once ``prometheus`` is up to take its ServiceMonitor) on the cluster's NVIDIA pools; ``opts`` is the infra
    component's child options, ``exporter_values`` the cloud's own dcgm-exporter values."""
    name = cluster.name
    nvidia_pools = [p for p in cluster.all_pools if p.accelerator.is_nvidia]
    tolerations = gpu_tolerations(cluster)
    if runs_device_plugin(cluster):
        helm_release(
            f"{name}-nvidia-device-plugin",
            "nvidia-device-plugin",
            "nvidia-device-plugin",
            "kube-system",
            {
                "tolerations": tolerations,
                "affinity": gpu_node_affinity(cluster),
                # what the model counts on every NVIDIA node (fleet/model/placement/node_agents.py)
                "resources": DEVICE_PLUGIN_RESOURCES,
                **device_plugin_sharing(cluster),
            },
            opts,
            registry=cluster.registry,
            # the chart has no value for the resources of its config manager's containers (with a configuration)
            # and the MPS daemon's: the post-renderer gives them the plugin's (postrender/device_plugin.py)
            postrender=DEVICE_PLUGIN_POSTRENDER,
        )
    if runs_gpu_exporter(cluster):
        # The chart gives its pods priorityClassName system-node-critical (it cannot be unset: the template
        # defaults an empty value to it; NVIDIA/dcgm-exporter@4.2.3-4.1.1 deployment/templates/daemonset.yaml).
        # GKE admits pods of that class only in namespaces with a matching ResourceQuota (its own is in
        # kube-system: gcp-critical-pods; openservicemesh/osm#4408, open-policy-agent/gatekeeper#1120), so the
        # node agents' namespace gets one, sized to one exporter per GPU node at most.
        critical = k8s.core.v1.ResourceQuota(
            f"{name}-node-agents-critical-pods",
            metadata={"name": "critical-pods", "namespace": agents_ns},
            spec={
                "hard": {"pods": str(sum(p.max_nodes for p in nvidia_pools))},
                "scopeSelector": {
                    "matchExpressions": [
                        {"operator": "In", "scopeName": "PriorityClass", "values": list(CRITICAL_PRIORITY)}
                    ]
                },
            },
            opts=opts,
        )
        helm_release(
            f"{name}-dcgm-exporter",
            "dcgm-exporter",
            "dcgm-exporter",
            agents_ns,
            {
                "tolerations": tolerations,
                "affinity": gpu_node_affinity(cluster),
                # what the model counts on every NVIDIA node (fleet/model/placement/node_agents.py)
                "resources": DCGM_EXPORTER_RESOURCES,
                "serviceMonitor": {
                    "enabled": True,
                    "honorLabels": True,
                    "interval": fleet.monitoring.scrape_interval,
                },
                **(exporter_values or {}),
            },
            pulumi.ResourceOptions(parent=opts.parent, depends_on=[prometheus, critical]),
            registry=cluster.registry,
        )
