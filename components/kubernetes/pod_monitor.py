"""PodMonitors: how the cluster's Prometheus (the Prometheus Operator's ``monitoring.coreos.com/v1`` PodMonitor)
scrapes the fleet's own pods, with pod labels copied onto their metrics."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s


def pod_monitor(
    resource_name: str,
    name: str,
    namespace: pulumi.Input[str],
    pod_labels: Mapping[str, str],
    port: str,
    target_labels: Sequence[str],
    opts: pulumi.ResourceOptions,
    namespaces: Sequence[pulumi.Input[str]] | None = None,
    **endpoint: Any,
) -> k8s.apiextensions.CustomResource:
    """A PodMonitor that scrapes ``/metrics`` on the named ``port`` of the pods with ``pod_labels`` every 30 s (in
    its own namespace, or in ``namespaces``), copying ``target_labels`` from the pods onto their series; ``endpoint``:
    more settings of the endpoint (``metricRelabelings``, ...)."""
    spec: dict[str, Any] = {"namespaceSelector": {"matchNames": list(namespaces)}} if namespaces else {}
    spec |= {
        "selector": {"matchLabels": dict(pod_labels)},
        "podMetricsEndpoints": [{"port": port, "path": "/metrics", "interval": "30s", **endpoint}],
        "podTargetLabels": list(target_labels),
    }
    return k8s.apiextensions.CustomResource(
        resource_name,
        api_version="monitoring.coreos.com/v1",
        kind="PodMonitor",
        metadata={"name": name, "namespace": namespace},
        spec=spec,
        opts=opts,
    )
