"""The one interface every cloud's cluster component shares: a cluster with one GPU pool per card.

A subclass creates the cloud's resources in ``_build`` and returns the kubeconfig (a secret) and the
native pool resources by card. The base class then creates the Kubernetes provider every in-cluster
resource uses, and registers the outputs every stack exports.
"""

from __future__ import annotations

import abc
import importlib
from collections.abc import Sequence
from typing import Any, ClassVar

import pulumi
import pulumi_kubernetes as k8s

from components.settings import ComponentSettings
from fleet.model.core.clouds import cloud_rules
from fleet.model.core.clusters import Cluster

# The module of each cloud's component (each registers itself by its CLOUD).
CLOUD_MODULES = {"gcp": "gke", "aws": "eks", "azure": "aks", "openstack": "magnum", "existing": "existing"}


class GpuCluster(pulumi.ComponentResource, abc.ABC):
    """A Kubernetes cluster of the fleet with a system pool and one tainted, autoscaled pool per card.

    Outputs, the same on every cloud:
      - ``kubeconfig``: a secret kubeconfig for the cluster;
      - ``provider``: the ``pulumi_kubernetes.Provider`` every in-cluster resource must use;
      - ``node_pools``: the native node-pool resource of every accelerator pool of the cluster
        (``Cluster.all_pools``, the system pool apart), by ``GpuPool.key``: each card's as ``<card>``, each sweep
        pool's as ``<card>-x<count>``, each CI pool's as ``<card>-ci`` (the escape hatch to the cloud's API);
      - ``cluster_name``: the cloud's name for the cluster.
    """

    TYPE: ClassVar[str] = ""
    CLOUD: ClassVar[str] = ""
    # Whether the component creates the API endpoint, and so applies gpu-fleet:apiAllowedCidrs to it.
    CONTROLS_API_ACCESS: ClassVar[bool] = True
    _registry: ClassVar[dict[str, type[GpuCluster]]] = {}

    kubeconfig: pulumi.Output[str]
    provider: k8s.Provider
    node_pools: dict[str, pulumi.Resource]
    cluster_name: pulumi.Output[str]

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if cls.CLOUD:
            GpuCluster._registry[cls.CLOUD] = cls

    def __init__(self, cluster: Cluster, settings: ComponentSettings, opts: pulumi.ResourceOptions | None = None):
        super().__init__(self.TYPE, cluster.name, None, opts)
        self.spec = cluster
        self.settings = settings
        # gpu-fleet:standInKubeconfig: another cluster stands in for the cloud's (the real test tier's hollow control
        # plane, its pools as KWOK nodes): no cloud resource is made, everything in-cluster goes to it
        self.stands_in = settings.stand_in_kubeconfig is not None
        if self.stands_in:
            kubeconfig, pools, cluster_name = settings.stand_in_kubeconfig, {}, cluster.name
        else:
            self._warn_open_endpoint(cluster)
            kubeconfig, pools, cluster_name = self._build(cluster)
        self.kubeconfig = pulumi.Output.secret(kubeconfig)
        self.node_pools = pools
        self.cluster_name = pulumi.Output.from_input(cluster_name)
        self.provider = k8s.Provider(
            f"{cluster.name}-k8s",
            kubeconfig=self.kubeconfig,
            cluster_identifier=cluster.name,
            enable_server_side_apply=True,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs(
            {
                "kubeconfig": self.kubeconfig,
                "cluster_name": self.cluster_name,
                "node_pools": {pool.key: pool.name for pool in cluster.all_pools},
            }
        )

    def _warn_open_endpoint(self, cluster: Cluster) -> None:
        """Warn when the API endpoint this component creates admits every address, or none from outside."""
        settings = self.settings
        closes = cloud_rules(self.CLOUD).closes_api_by_default
        if self.CONTROLS_API_ACCESS and not settings.api_allowed_cidrs and not settings.private_api_endpoint:
            if closes and not settings.open_api_endpoint:
                pulumi.log.warn(
                    f"{cluster.name}: the Kubernetes API endpoint admits no outside address (no "
                    "gpu-fleet:apiAllowedCidrs): kubectl and pulumi must run inside the cluster's network; set their "
                    f"ranges with pulumi config set --stack {cluster.name} --path 'gpu-fleet:apiAllowedCidrs[0]' <CIDR>"
                )
            else:
                pulumi.log.warn(
                    f"{cluster.name}: the Kubernetes API endpoint accepts connections from any address (sign-in "
                    "still required): set the ranges of the people and CI runners that run kubectl and pulumi with "
                    f"pulumi config set --stack {cluster.name} --path 'gpu-fleet:apiAllowedCidrs[0]' <CIDR>"
                    + (", or gpu-fleet:privateApiEndpoint true" if cloud_rules(self.CLOUD).private_api_endpoint else "")
                )

    @abc.abstractmethod
    def _build(self, cluster: Cluster) -> tuple[pulumi.Input[str], dict[str, pulumi.Resource], pulumi.Input[str]]:
        """Create the cloud's resources; return (kubeconfig, node pools by ``GpuPool.key``, cloud cluster name)."""

    @classmethod
    def has_default_storage_class(cls, cluster: Cluster) -> bool:
        """Whether ``cluster`` will have a default StorageClass (else a volume must name one)."""
        return cluster.facts.default_storage_class

    def gpu_exporter_values(self) -> dict[str, Any]:
        """dcgm-exporter chart values this cloud needs on top of the fleet's (where its GPU driver lives).

        Empty where the container runtime hands the driver to the exporter pod, as the NVIDIA container toolkit
        does on EKS, AKS and Magnum GPU nodes.
        """
        return {}

    def open_to_control_plane(self, name: str, ports: Sequence[int]) -> pulumi.Resource | None:
        """Let the control plane reach webhooks and API services of the cluster's own pods on ``ports`` (``name``
        says whose), where the cloud's network would stop it; returns what it created, for ``depends_on``. Nothing
        to do by default: a public control plane, or one in the nodes' network, reaches every port."""
        return None

    def preview_user(self) -> str | None:
        """The Kubernetes user name of the pull-request preview identity (``gpu-fleet:previewPrincipal``), which
        ``components.kubernetes.preview_access`` limits to dry runs; None when the stack names none. A cloud whose
        identities need an entry to reach the cluster (EKS) creates it here."""
        return self.settings.preview_principal

    def child(self, provider: pulumi.ProviderResource | None = None, **kwargs: object) -> pulumi.ResourceOptions:
        """Options for a child resource: parented to this component, with the cloud's explicit provider."""
        return pulumi.ResourceOptions(parent=self, provider=provider, **kwargs)  # type: ignore[arg-type]

    def protected(self, provider: pulumi.ProviderResource | None = None, **kwargs: object) -> pulumi.ResourceOptions:
        """Options for the cluster resource itself: protected unless the stack opts out (``gpu-fleet:protect``).

        Removing a cluster from the policy must never delete it: ``pulumi up`` stops at a protected
        resource. Deleting one is explicit: ``pulumi state unprotect`` then ``pulumi destroy``.
        """
        return self.child(provider, protect=self.settings.protect, **kwargs)

    @staticmethod
    def for_cloud(cloud: str) -> type[GpuCluster]:
        """The component class of ``cloud``; only that cloud's module (and SDK) is imported."""
        importlib.import_module(f"components.clusters.{CLOUD_MODULES[cloud]}")
        return GpuCluster._registry[cloud]
