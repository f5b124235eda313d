"""The one-replica Deployment shape of the fleet's own services (the federation gateway)."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

# the app.kubernetes.io/part-of value of the fleet's own services (benchmarks and runners carry pod_contract's values)
FLEET_PART_OF = "gpu-fleet"


def app_labels(app: str) -> dict[str, str]:
    """The labels of a fleet service's objects, also its pods' selector."""
    return {"app.kubernetes.io/name": app, "app.kubernetes.io/part-of": FLEET_PART_OF}


def single_replica_deployment(
    resource_name: str,
    app: str,
    namespace: pulumi.Input[str],
    pod_spec: dict[str, Any],
    opts: pulumi.ResourceOptions,
    node_selector: dict[str, str] | None = None,
) -> k8s.apps.v1.Deployment:
    """A Deployment named ``app`` with one replica of ``pod_spec``, selected by ``app_labels(app)``, on the nodes
    ``node_selector`` names (the cluster's system pool, so no service lands on a GPU node)."""
    labels = app_labels(app)
    if node_selector:
        pod_spec = {**pod_spec, "nodeSelector": node_selector}
    return k8s.apps.v1.Deployment(
        resource_name,
        metadata={"name": app, "namespace": namespace, "labels": labels},
        spec={
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": pod_spec},
        },
        opts=opts,
    )
