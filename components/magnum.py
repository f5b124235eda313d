"""OpenStack Magnum: a cluster template, a cluster (masters + the default worker group) and one node group per card."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_openstack as openstack
from pulumi_openstack import containerinfra

from components.cluster import GpuCluster
from fleet.policy import Cluster, GpuPool
from fleet.settings import NAMESPACE

# The Kubernetes node label Magnum puts on every node of a node group: ``<ROLE_LABEL>=<the group's role>``.
ROLE_LABEL = "magnum.openstack.org/role"
# The role of Magnum's default worker node group (our system pool).
SYSTEM_ROLE = "worker"

# Magnum's default admission plugins (kubernetes driver), plus ExtendedResourceToleration: the list
# replaces the default, so every default plugin is listed again.
ADMISSION_PLUGINS = (
    "NodeRestriction",
    "NamespaceLifecycle",
    "LimitRanger",
    "ServiceAccount",
    "ResourceQuota",
    "TaintNodesByCondition",
    "Priority",
    "DefaultTolerationSeconds",
    "DefaultStorageClass",
    "StorageObjectInUseProtection",
    "PersistentVolumeClaimResize",
    "MutatingAdmissionWebhook",
    "ValidatingAdmissionWebhook",
    "RuntimeClass",
    "ExtendedResourceToleration",
)


def gpu_role(card: str) -> str:
    """The Magnum node-group role of ``card``'s group; nodes get ``magnum.openstack.org/role=gpu-<card>``."""
    return f"gpu-{card}"


def node_selector(card: str) -> dict[str, str]:
    """The node selector a pod uses to land on ``card``'s node group on Magnum (not ``gpu=<card>``)."""
    return {ROLE_LABEL: gpu_role(card)}


def _patch_tag(version: str) -> str:
    """``1.33`` -> ``v1.33.0``; ``1.33.2`` -> ``v1.33.2``; a ``v``-prefixed tag is kept."""
    if version.startswith("v"):
        return version
    return f"v{version}.0" if version.count(".") == 1 else f"v{version}"


@dataclass(frozen=True)
class MagnumSettings:
    """The ``gpu-fleet:magnum`` stack config object: site-specific Magnum inputs."""

    image: str
    keypair: str
    external_network: str
    master_flavor: str
    master_count: int = 1
    kube_tag: str | None = None  # default: v<kubernetes_version>.0
    autoscaler_tag: str | None = None  # default: v<major.minor>.0
    fixed_network: str | None = None
    fixed_subnet: str | None = None

    KEYS = {
        "image": "image",
        "keypair": "keypair",
        "externalNetwork": "external_network",
        "masterFlavor": "master_flavor",
        "masterCount": "master_count",
        "kubeTag": "kube_tag",
        "autoscalerTag": "autoscaler_tag",
        "fixedNetwork": "fixed_network",
        "fixedSubnet": "fixed_subnet",
    }
    REQUIRED = ("image", "keypair", "externalNetwork", "masterFlavor")

    @staticmethod
    def read() -> MagnumSettings:
        """Read and check ``gpu-fleet:magnum``; a missing or unknown key fails with the key's name."""
        raw: dict[str, Any] = pulumi.Config(NAMESPACE).require_object("magnum")
        if not isinstance(raw, dict):
            raise ValueError(f"{NAMESPACE}:magnum must be an object with keys {', '.join(MagnumSettings.KEYS)}")
        unknown = sorted(set(raw) - set(MagnumSettings.KEYS))
        missing = [k for k in MagnumSettings.REQUIRED if not raw.get(k)]
        if unknown or missing:
            parts = [
                f"missing {', '.join(missing)}" if missing else "",
                f"unknown {', '.join(unknown)}" if unknown else "",
            ]
            raise ValueError(
                f"{NAMESPACE}:magnum: {'; '.join(p for p in parts if p)} (keys: {', '.join(MagnumSettings.KEYS)})"
            )
        settings = MagnumSettings(**{MagnumSettings.KEYS[k]: v for k, v in raw.items()})
        if settings.master_count not in (1, 3):
            raise ValueError(
                f"{NAMESPACE}:magnum.masterCount must be 1 or 3 (etcd quorum), not {settings.master_count}"
            )
        return settings


class MagnumCluster(GpuCluster):
    """A Magnum Kubernetes cluster from its own template, with one GPU node group per card.

    Choices:
      - Explicit ``openstack`` provider (cloud from the ``openstack:cloud`` stack config when set,
        credentials from ``clouds.yaml``/``OS_*``; region from the policy); stacks disable default providers.
      - The template carries the driver configuration as Magnum labels (driver parameters, strings, not
        Kubernetes node labels): calico, containerd, the kube and autoscaler tags, the cluster autoscaler
        for the default worker group (``min_node_count``/``max_node_count`` = the system pool), the NVIDIA
        driver (``nvidia_gpu_enabled``), ``ExtendedResourceToleration`` added to the admission plugins,
        and Magnum's own monitoring off (the fleet deploys its own Prometheus). Site inputs (image, keypair,
        external network, master flavor, optional ``masterCount`` 1 or 3, ``kubeTag``, ``autoscalerTag``)
        come from the ``gpu-fleet:magnum`` stack config object.
      - The cluster is protected. Magnum refuses to change a template that a cluster uses, and a new
        template id would replace the cluster: upgrades go through ``openstack coe cluster upgrade``.
        ``node_count`` of the default worker group belongs to the autoscaler and is ignored.
      - One node group per card: ``gpu-<card>``, the card's flavor, role ``gpu-<card>``, autoscaling bounds
        from the policy, ``node_count`` ignored after creation. The policy resolves Magnum pools to min 1,
        because the Magnum cluster-autoscaler builds its scale-from-zero template without
        ``nvidia.com/gpu`` capacity or taints, so a GPU group at 0 nodes is never chosen for a pending GPU
        pod. ``min_nodes: 0`` in the policy is an explicit opt-in, and the plan warns about it.

    What Magnum cannot do, and how the fleet compensates:
      - Node groups cannot carry our Kubernetes labels or taints. Magnum labels every node with
        ``magnum.openstack.org/role=<role>`` and ``magnum.openstack.org/nodegroup=<name>``, so the role
        carries the card: GPU Jobs on Magnum select ``magnum.openstack.org/role: gpu-<card>``
        (``node_selector(card)``), not ``gpu: <card>``. They still request ``nvidia.com/gpu``, so they only
        fit on GPU nodes; their tolerations are harmless on untainted nodes.
      - Without a taint nothing keeps other pods off GPU nodes. The fleet's non-GPU services should select
        the default worker group (``magnum.openstack.org/role: worker``); ``ExtendedResourceToleration``
        is enabled so that GPU pods keep scheduling if an operator taints GPU nodes by hand.
      - GPU nodes carry no ``nvidia.com/gpu.present`` label: the NVIDIA device plugin (and dcgm-exporter)
        must select them by ``magnum.openstack.org/role`` (or run node-feature-discovery).
      - Magnum's built-in cluster autoscaler is started with ``--nodes=<min>:<max>:default-worker``: it only
        scales the default group. For the GPU groups, the autoscaler needs
        ``--node-group-auto-discovery=magnum:role=<roles>`` (``autoscaler_discovery`` gives the value) or
        one ``--nodes=<min>:<max>:gpu-<card>`` per group (cluster-autoscaler 1.19+, Magnum Train+).
    """

    TYPE = "gpufleet:index:MagnumCluster"
    CLOUD = "openstack"

    def _build(self, cluster: Cluster) -> tuple[pulumi.Input[str], dict[str, pulumi.Resource], pulumi.Input[str]]:
        site = MagnumSettings.read()
        self.openstack_provider = openstack.Provider(
            f"{cluster.name}-openstack",
            cloud=pulumi.Config("openstack").get("cloud"),
            region=cluster.region,
            opts=pulumi.ResourceOptions(parent=self),
        )
        system = cluster.system_pool
        self.template = containerinfra.ClusterTemplate(
            f"{cluster.name}-template",
            name=f"{cluster.name}-template",
            coe="kubernetes",
            image=site.image,
            keypair_id=site.keypair,
            external_network_id=site.external_network,
            fixed_network=site.fixed_network,
            fixed_subnet=site.fixed_subnet,
            master_flavor=site.master_flavor,
            flavor=system.machine_type,
            network_driver="calico",
            master_lb_enabled=site.master_count > 1,
            labels=self._template_labels(cluster, site),
            opts=self.child(self.openstack_provider),
        )
        self.cluster = containerinfra.Cluster(
            cluster.name,
            name=cluster.name,
            cluster_template_id=self.template.id,
            master_count=site.master_count,
            node_count=system.min_nodes,
            merge_labels=True,
            create_timeout=90,
            opts=self.protected(self.openstack_provider, ignore_changes=["nodeCount"]),
        )
        pools: dict[str, pulumi.Resource] = {pool.card: self._node_group(cluster, pool) for pool in cluster.pools}
        self.autoscaler_discovery = "magnum:role=" + ",".join(gpu_role(p.card) for p in cluster.pools)
        kubeconfig = pulumi.Output.secret(self.cluster.kubeconfig.apply(lambda k: k["raw_config"]))
        return kubeconfig, pools, self.cluster.name

    @staticmethod
    def _template_labels(cluster: Cluster, site: MagnumSettings) -> dict[str, str]:
        version = cluster.kubernetes_version
        minor = ".".join(version.removeprefix("v").split(".")[:2])
        return {
            "kube_tag": site.kube_tag or _patch_tag(version),
            "container_runtime": "containerd",
            "auto_scaling_enabled": "true",
            "autoscaler_tag": site.autoscaler_tag or _patch_tag(minor),
            "min_node_count": str(cluster.system_pool.min_nodes),
            "max_node_count": str(cluster.system_pool.max_nodes),
            "nvidia_gpu_enabled": "true",
            "admission_control_list": ",".join(ADMISSION_PLUGINS),
            "monitoring_enabled": "false",  # the fleet deploys its own Prometheus
            "cloud_provider_enabled": "true",  # LoadBalancer Services (federation endpoint)
        }

    def _node_group(self, cluster: Cluster, pool: GpuPool) -> containerinfra.NodeGroup:
        if pool.min_nodes == 0:
            pulumi.log.warn(
                f"{cluster.name}: node group {pool.name} has min_nodes 0 (set in the policy). The Magnum "
                "cluster-autoscaler builds its scale-from-zero node template without nvidia.com/gpu capacity "
                f"or taints, so a pending GPU pod will most likely never scale {pool.name} up from 0 nodes; "
                "remove min_nodes to get the Magnum default of 1",
                resource=self,
            )
        # Magnum wants node_count within [min, max]. Start with at least one node when max allows it: the
        # autoscaler then has seen a real GPU node of the group (and remembers its capacity) before it
        # scales an opted-in min-0 group down.
        initial = min(max(pool.min_nodes, 1), pool.max_nodes)
        return containerinfra.NodeGroup(
            f"{cluster.name}-{pool.name}",
            name=pool.name,
            cluster_id=self.cluster.id,
            flavor_id=pool.machine_type,
            role=gpu_role(pool.card),
            node_count=initial,
            min_node_count=pool.min_nodes,
            max_node_count=pool.max_nodes,
            opts=self.child(self.openstack_provider, ignore_changes=["nodeCount"]),
        )
