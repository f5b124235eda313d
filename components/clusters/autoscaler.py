"""The cluster-autoscaler Helm release, for the clouds whose GPU pools need an autoscaler we run (EKS, Magnum)."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.kubernetes.images import helm_release

NAMESPACE = "kube-system"
# Flags every fleet autoscaler runs with (cluster-autoscaler FAQ): pick the group that wastes least, treat GPU
# groups of one card alike, and let nodes with kube-system DaemonSet pods (device plugin, exporter) scale down.
COMMON_ARGS: dict[str, Any] = {
    "balance-similar-node-groups": True,
    "skip-nodes-with-system-pods": False,
    "expander": "least-waste",
}

REQUESTS = {"requests": {"cpu": "100m", "memory": "300Mi"}}


def cluster_autoscaler(
    resource_name: str,
    release: str,
    cloud_values: dict[str, Any],
    opts: pulumi.ResourceOptions,
    scale_down_after: str,
    registry: str,
) -> k8s.helm.v3.Release:
    """The pinned cluster-autoscaler chart in kube-system with the cloud's values, the fleet's common flags, and the
    policy's ``scale_down_after`` as how long an unneeded node, or a new one, is kept (cluster-autoscaler FAQ:
    --scale-down-unneeded-time and --scale-down-delay-after-add, both 10m by default); images from ``registry``."""
    scale_down = {"scale-down-unneeded-time": scale_down_after, "scale-down-delay-after-add": scale_down_after}
    values = {
        # the chart leaves resources empty; its values.yaml suggests 100m and 300Mi (cluster-autoscaler-chart-9.56.0)
        "resources": REQUESTS,
        **cloud_values,
        "extraArgs": {**COMMON_ARGS, **scale_down, **cloud_values.get("extraArgs", {})},
    }
    return helm_release(resource_name, "cluster-autoscaler", release, NAMESPACE, values, opts, registry=registry)
