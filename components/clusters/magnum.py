"""OpenStack Magnum: a cluster template, a cluster (masters + the default worker group) and one node group per card."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pulumi_openstack as openstack
from pulumi_openstack import containerinfra

from components.clusters.autoscaler import cluster_autoscaler
from components.clusters.cluster import GpuCluster
from components.clusters.version_tags import tag_minor
from components.kubernetes.images import magnum_autoscaler_image
from components.settings import ComponentSettings
from fleet.model.core import pod_contract
from fleet.model.core.clouds.magnum import (
    API_CIDRS_LABELS,
    GPU_AUTOSCALER,
    KUBELET_OPTIONS,
    kubelet_options_with_taints,
)
from fleet.model.core.clusters import Cluster, pool_resource_name
from fleet.model.core.errors import InputError
from fleet.model.core.pools import GpuPool
from fleet.model.core.taints import CI_TAINT

# The Kubernetes node label Magnum puts on every node of a node group: ``<ROLE_LABEL>=<the group's role>``.
ROLE_LABEL = "magnum.openstack.org/role"

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
    # Enforces the namespaces' Pod Security labels (Kubernetes 1.25+; on by default elsewhere, but the heat
    # driver passes the legacy --admission-control list, which enables only what it names: magnum 17.0.2,
    # magnum/drivers/common/templates/kubernetes/fragments/configure-kubernetes-master.sh).
    "PodSecurity",
)


def gpu_role(card: str) -> str:
    """The Magnum node-group role of ``card``'s group; nodes get ``magnum.openstack.org/role=gpu-<card>``."""
    return pod_contract.pool_name(card)


def node_selector(card: str) -> dict[str, str]:
    """The node selector a pod uses to land on ``card``'s node group on Magnum (not ``gpu=<card>``)."""
    return {ROLE_LABEL: gpu_role(card)}


# Where Magnum itself pulls its cluster-autoscaler from (openstack/magnum 20.0.0,
# magnum/drivers/common/templates/kubernetes/fragments/enable-auto-scaling.sh:
# ``${CONTAINER_INFRA_PREFIX:-docker.io/openstackmagnum/}cluster-autoscaler:${AUTOSCALER_TAG}``).
MAGNUM_AUTOSCALER_IMAGE = "docker.io/openstackmagnum/cluster-autoscaler"
# Magnum's CI built and pushed that image for the tags listed in openstack/magnum 20.0.0
# playbooks/container-builder-vars.yaml ``cluster_autoscaler_versions`` (1.25.0 ... 1.28.0, the newest; the playbooks
# are gone from later releases). Upstream's own image, registry.k8s.io/autoscaling/cluster-autoscaler, is built with
# every cloud provider, Magnum's included (kubernetes/autoscaler cluster-autoscaler-1.31.5,
# cluster-autoscaler/cloudprovider/builder/builder_all.go, used when the Makefile's BUILD_TAGS is empty, as for the
# release images), and is published for every release: a site on a newer Kubernetes sets autoscalerImage to it.
UPSTREAM_AUTOSCALER_IMAGE = "registry.k8s.io/autoscaling/cluster-autoscaler"


def autoscaler_minor_problem(kube_tag: str, autoscaler_tag: str) -> str | None:
    """Why ``autoscaler_tag`` does not fit a cluster of ``kube_tag``, or None (same minor, or a tag naming no
    version, about which nothing is claimed)."""
    kube, autoscaler = tag_minor(kube_tag), tag_minor(autoscaler_tag)
    if kube is None or autoscaler is None or kube == autoscaler:
        return None
    minor, their = ".".join(map(str, kube)), ".".join(map(str, autoscaler))
    return (
        f"{autoscaler_tag} is cluster-autoscaler {their}, but kubeTag {kube_tag} runs Kubernetes "
        f"{minor}: the autoscaler's minor must be the cluster's (kubernetes/autoscaler cluster-autoscaler README, "
        f'"Releases"). Set a {minor} tag, such as autoscalerTag: v{minor}.0 with autoscalerImage: '
        f"{UPSTREAM_AUTOSCALER_IMAGE} (Magnum's CI published {MAGNUM_AUTOSCALER_IMAGE} up to v1.28.0), and "
        "make sure the image Magnum's own autoscaler pulls (container_infra_prefix, or Docker Hub) has it too"
    )


# The heat driver writes the trust credentials the autoscaler needs to this file on masters only, with the CA
# bundle beside it (openstack/magnum 20.0.0, fragments/write-kube-os-config.sh, wired into kubemaster.yaml);
# the chart mounts both from the host (kubernetes/autoscaler cluster-autoscaler-chart-9.56.0,
# charts/cluster-autoscaler/templates/deployment.yaml, and its README "Magnum").
CLOUD_CONFIG_PATH = "/etc/kubernetes/cloud-config"
CA_BUNDLE_PATH = "/etc/kubernetes/ca-bundle.crt"
# Masters carry this label and taint (openstack/magnum 20.0.0, fragments/enable-services-master.sh and
# configure-kubernetes-master.sh); Magnum's own autoscaler runs there the same way.
CONTROL_PLANE = "node-role.kubernetes.io/control-plane"
# Our autoscaler runs beside Magnum's own (which keeps the default worker group): a lease and a status ConfigMap
# of its own, or the two would elect one leader between them (cluster-autoscaler main.go leader election
# resource "cluster-autoscaler"; flags --leader-elect-resource-name, --status-config-map-name).


@dataclass(frozen=True)
class MagnumSettings:
    """The ``gpu-fleet:magnum`` stack config object: site-specific Magnum inputs.

    ``kubeTag`` and ``autoscalerTag`` are required: what the driver can pull depends on the site (the upstream
    heat driver pulls ``hyperkube:<kube_tag>`` from a Rancher registry, newest tested 1.28), so no default is
    guessed from the policy's Kubernetes version. ``extraLabels`` are further driver labels of the site (CERN's
    ``nvidia_gpu_enabled``, not an upstream label), merged over the fleet's own.
    """

    image: str
    keypair: str
    external_network: str
    master_flavor: str
    kube_tag: str
    autoscaler_tag: str
    master_count: int = 1
    autoscaler_image: str = MAGNUM_AUTOSCALER_IMAGE
    fixed_network: str | None = None
    fixed_subnet: str | None = None
    extra_labels: dict[str, str] = field(default_factory=dict)

    KEYS = {
        "image": "image",
        "keypair": "keypair",
        "externalNetwork": "external_network",
        "masterFlavor": "master_flavor",
        "kubeTag": "kube_tag",
        "autoscalerTag": "autoscaler_tag",
        "masterCount": "master_count",
        "autoscalerImage": "autoscaler_image",
        "fixedNetwork": "fixed_network",
        "fixedSubnet": "fixed_subnet",
        "extraLabels": "extra_labels",
    }
    REQUIRED = ("image", "keypair", "externalNetwork", "masterFlavor", "kubeTag", "autoscalerTag")
    HINTS = {
        "kubeTag": "the Kubernetes tag your Magnum driver pulls (heat driver: hyperkube, e.g. v1.28.9-rancher1)",
        "autoscalerTag": "the cluster-autoscaler tag of the Kubernetes minor version of kubeTag, e.g. v1.28.0",
    }

    @staticmethod
    def problems(raw: Any) -> list[tuple[tuple[object, ...], str]]:
        """What is wrong with a ``gpu-fleet:magnum`` value, as (path inside the value, message); [] when fine."""
        if not isinstance(raw, dict):
            return [((), f"required: an object with at least the keys {', '.join(MagnumSettings.REQUIRED)}")]
        found = [
            ((k,), f"unknown key (known: {', '.join(MagnumSettings.KEYS)})")
            for k in sorted(set(raw) - set(MagnumSettings.KEYS))
        ]
        for k in MagnumSettings.REQUIRED:
            if not isinstance(raw.get(k), str) or not raw[k].strip():
                hint = f": {MagnumSettings.HINTS[k]}" if k in MagnumSettings.HINTS else ""
                found.append(((k,), f"missing {k}, a site setting{hint}"))
        kube, autoscaler = raw.get("kubeTag"), raw.get("autoscalerTag")
        if isinstance(kube, str) and isinstance(autoscaler, str):
            mismatch = autoscaler_minor_problem(kube, autoscaler)
            if mismatch:
                found.append((("autoscalerTag",), mismatch))
        if raw.get("masterCount", 1) not in (1, 3):
            found.append((("masterCount",), "must be 1 or 3 (etcd quorum)"))
        labels = raw.get("extraLabels", {})
        if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
            found.append((("extraLabels",), 'must map driver labels to strings ("true", not true)'))
        return found

    @staticmethod
    def read(settings: ComponentSettings) -> MagnumSettings:
        """Check ``gpu-fleet:magnum`` (``settings.magnum``); every problem at once, located in the stack file."""
        key, raw = settings.key("magnum"), settings.magnum
        found = MagnumSettings.problems(raw)
        if found:
            raise InputError([settings.config_problem(key, message, *where) for where, message in found])
        return MagnumSettings(**{MagnumSettings.KEYS[k]: v for k, v in raw.items()})


def template_name(cluster: str, labels: dict[str, str], inputs: dict[str, Any]) -> str:
    """The content name of a cluster template: ``<cluster>-<hash of everything it says>``.

    Magnum refuses any change but name, public, hidden and tags to a template a cluster uses
    (``ClusterTemplateReferenced``, openstack/magnum 20.0.0 magnum/db/sqlalchemy/api.py), so a changed template
    is a new one, never an update.
    """
    digest = hashlib.sha256(json.dumps([labels, inputs], sort_keys=True).encode()).hexdigest()[:8]
    return f"{cluster}-{digest}"


class MagnumCluster(GpuCluster):
    """A Magnum Kubernetes cluster from its own template, with one GPU node group per card and their autoscaler.

    Choices:
      - Explicit ``openstack`` provider (cloud from the ``openstack:cloud`` stack config when set,
        credentials from ``clouds.yaml``/``OS_*``; region from the policy); stacks disable default providers.
      - The template carries the driver configuration as Magnum labels (driver parameters, strings, not
        Kubernetes node labels): calico, containerd, the site's kube and autoscaler tags, Magnum's own
        autoscaler for the default worker group (``min_node_count``/``max_node_count`` = the system pool),
        ``ExtendedResourceToleration`` added to the admission plugins, Magnum's own monitoring off (the fleet
        deploys its own Prometheus), and the site's ``extraLabels``. Site inputs come from the
        ``gpu-fleet:magnum`` stack config object (``MagnumSettings``).
      - Templates are named by their content and never updated: Magnum refuses to change a template a cluster
        uses. A changed policy (Kubernetes version, system pool size) makes a new template; the old one is
        retained in OpenStack (``retain_on_delete``, it is still in use) and the cluster keeps its template
        (``ignore_changes``): the heat driver refuses in-place upgrades (HTTP 500 since Magnum 18.0.0), so
        moving a cluster to a new template means a new cluster (docs/clouds.md, "Magnum upgrades").
      - The cluster is protected. ``node_count`` of the default worker group belongs to Magnum's autoscaler.
      - One node group per card: ``gpu-<card>``, the card's flavor, role ``gpu-<card>``, autoscaling bounds
        from the policy, ``node_count`` ignored after creation. A card with a GitLab runner gets a CI node group
        ``gpu-<card>-ci`` of role ``gpu-<card>-ci`` (fleet/model/runners/ci_pools.py), which only the runner's job pods
        select; benchmarks select their own group's role, so a CI job never shares a node with one (it keeps one
        node, as a card's group does). Its nodes also register with the CI taint (the group's ``kubelet_options``
        label, ``--register-with-taints``), which only the runner's job pods tolerate. The policy resolves Magnum
        pools to min 1, because the Magnum cluster-autoscaler builds its scale-from-zero template from the flavor
        only, without ``nvidia.com/gpu`` capacity, taints or the role label (kubernetes/autoscaler
        cloudprovider/magnum/magnum_nodegroup.go, magnum_cloud_provider.go), so a GPU group at 0 nodes is never
        chosen for a pending GPU pod. ``min_nodes: 0`` in the policy is an explicit opt-in, and the plan warns.
      - The GPU node groups' autoscaler: Magnum's own one is started with ``--nodes=<min>:<max>:default-worker``
        and never scales another group, so the fleet runs a second cluster-autoscaler (the pinned chart,
        ``cloudProvider: magnum``) that discovers the GPU groups by role and reads each group's min/max from
        Magnum, that is from the policy. It runs on the masters, where the heat driver writes the trust
        credentials it reads, with the site's autoscaler image and tag, and a lease of its own.

    What Magnum cannot do, and how the fleet compensates:
      - Node groups have no Kubernetes labels or taints of their own in Magnum's API (only a CI group's kubelet
        options register one taint). Magnum labels every node with
        ``magnum.openstack.org/role=<role>`` and ``magnum.openstack.org/nodegroup=<name>``, so the role
        carries the card: GPU Jobs on Magnum select ``magnum.openstack.org/role: gpu-<card>``
        (``node_selector(card)``), not ``gpu: <card>``. They still request ``nvidia.com/gpu``, so they only
        fit on GPU nodes; their tolerations are harmless on untainted nodes.
      - Without a taint nothing keeps other pods off GPU nodes (nor off CI nodes: every fleet pod on a GPU group
        selects its group's role, so none lands on another's): the fleet's own services select the default
        worker group (``magnum.openstack.org/role: worker``, the catalogue's ``system_selector``), and
        ``ExtendedResourceToleration`` keeps GPU pods scheduling if an operator taints GPU nodes by hand.
      - GPU nodes carry no ``nvidia.com/gpu.present`` label: the NVIDIA device plugin (and dcgm-exporter)
        select them by ``magnum.openstack.org/role``.
    """

    TYPE = "gpufleet:index:MagnumCluster"
    CLOUD = "openstack"

    def __init__(self, cluster: Cluster, settings: ComponentSettings, opts: pulumi.ResourceOptions | None = None):
        super().__init__(cluster, settings, opts)
        # In-cluster resources come once the base class has created ``self.provider``.
        # (a stand-in has no node groups to scale)
        self.autoscaler = self._gpu_autoscaler(cluster) if cluster.all_pools and not self.stands_in else None

    def _build(self, cluster: Cluster) -> tuple[pulumi.Input[str], dict[str, pulumi.Resource], pulumi.Input[str]]:
        self.site = site = MagnumSettings.read(self.settings)
        self.openstack_provider = openstack.Provider(
            f"{cluster.name}-openstack",
            cloud=pulumi.Config("openstack").get("cloud"),
            region=cluster.region,
            opts=pulumi.ResourceOptions(parent=self),
        )
        system = cluster.system_pool
        labels = self._template_labels(cluster, site)
        if self.settings.api_allowed_cidrs:
            labels.update(dict.fromkeys(API_CIDRS_LABELS, ",".join(self.settings.api_allowed_cidrs)))
        inputs = {
            "coe": "kubernetes",
            "image": site.image,
            "keypair_id": site.keypair,
            "external_network_id": site.external_network,
            "fixed_network": site.fixed_network,
            "fixed_subnet": site.fixed_subnet,
            "master_flavor": site.master_flavor,
            "flavor": system.machine_type,
            "network_driver": "calico",
            # The allow-list lives on the masters' load balancer: with one, even a single master is behind it.
            "master_lb_enabled": site.master_count > 1 or bool(self.settings.api_allowed_cidrs),
        }
        name = template_name(cluster.name, labels, inputs)
        self.template = containerinfra.ClusterTemplate(
            name,
            name=name,
            labels=labels,
            **inputs,
            opts=self.child(self.openstack_provider, retain_on_delete=True),
        )
        self.cluster = containerinfra.Cluster(
            cluster.name,
            name=cluster.name,
            cluster_template_id=self.template.id,
            master_count=site.master_count,
            node_count=system.min_nodes,
            merge_labels=True,
            create_timeout=90,
            opts=self.protected(self.openstack_provider, ignore_changes=["nodeCount", "clusterTemplateId"]),
        )
        pools: dict[str, pulumi.Resource] = {pool.key: self._node_group(cluster, pool) for pool in cluster.all_pools}
        kubeconfig = pulumi.Output.secret(self.cluster.kubeconfig.apply(lambda k: k["raw_config"]))
        return kubeconfig, pools, self.cluster.name

    @staticmethod
    def _template_labels(cluster: Cluster, site: MagnumSettings) -> dict[str, str]:
        return {
            "kube_tag": site.kube_tag,
            "container_runtime": "containerd",
            "auto_scaling_enabled": "true",
            "autoscaler_tag": site.autoscaler_tag,
            "min_node_count": str(cluster.system_pool.min_nodes),
            "max_node_count": str(cluster.system_pool.max_nodes),
            "admission_control_list": ",".join(ADMISSION_PLUGINS),
            "monitoring_enabled": "false",  # the fleet deploys its own Prometheus
            "cloud_provider_enabled": "true",  # LoadBalancer Services (federation endpoint)
            **site.extra_labels,
        }

    def _autoscaler_image(self, cluster: Cluster) -> dict[str, str]:
        """The chart's ``image`` values: the fleet's copy of the site's autoscaler image when images.yaml mirrors it
        (``magnum_autoscaler_images``: Docker Hub rate-limits anonymous pulls and the fleet pulls from its own
        registry), else the site's image by tag, with a warning."""
        upstream = f"{self.site.autoscaler_image}:{self.site.autoscaler_tag}"
        mirrored = magnum_autoscaler_image(upstream, cluster.registry)
        if mirrored is not None:
            return mirrored
        if self.site.autoscaler_image == MAGNUM_AUTOSCALER_IMAGE:
            pulumi.log.warn(
                f"{cluster.name}: the GPU autoscaler pulls {upstream} from Docker Hub: the fleet's registry holds no "
                "copy of this tag; add it to components/kubernetes/images.yaml magnum_autoscaler_images"
            )
        return {"repository": self.site.autoscaler_image, "tag": self.site.autoscaler_tag}

    def _gpu_autoscaler(self, cluster: Cluster) -> k8s.helm.v3.Release:
        """The cluster-autoscaler for the GPU node groups (roles ``gpu-<card>``), beside Magnum's own."""
        values = {
            "cloudProvider": "magnum",
            "fullnameOverride": GPU_AUTOSCALER,
            "autoDiscovery": {"clusterName": self.cluster.id, "roles": [p.name for p in cluster.all_pools]},
            "cloudConfigPath": CLOUD_CONFIG_PATH,
            "magnumCABundlePath": CA_BUNDLE_PATH,
            "image": self._autoscaler_image(cluster),
            "nodeSelector": {CONTROL_PLANE: ""},
            "tolerations": [
                {"key": CONTROL_PLANE, "operator": "Exists", "effect": "NoSchedule"},
                {"key": "CriticalAddonsOnly", "operator": "Exists"},
            ],
            "extraArgs": {
                "leader-elect-resource-name": GPU_AUTOSCALER,
                "status-config-map-name": f"{GPU_AUTOSCALER}-status",
            },
            # The chart's roles name the default lease and status ConfigMap only (templates/role.yaml and
            # clusterrole.yaml at cluster-autoscaler-chart-9.56.0): grant the renamed ones, or the autoscaler is
            # refused its lease and never becomes leader.
            "rbac": {
                "additionalRules": [
                    {
                        "apiGroups": ["coordination.k8s.io"],
                        "resources": ["leases"],
                        "resourceNames": [GPU_AUTOSCALER],
                        "verbs": ["get", "update"],
                    },
                    {
                        "apiGroups": [""],
                        "resources": ["configmaps"],
                        "resourceNames": [f"{GPU_AUTOSCALER}-status"],
                        "verbs": ["delete", "get", "update"],
                    },
                ]
            },
        }
        return cluster_autoscaler(
            f"{cluster.name}-gpu-autoscaler",
            GPU_AUTOSCALER,
            values,
            pulumi.ResourceOptions(parent=self, provider=self.provider, depends_on=list(self.node_pools.values())),
            scale_down_after=cluster.scale_down_after,
            registry=cluster.registry,
        )

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
        # A CI group's nodes register with the CI taint, through the group's own kubelet_options label
        # (fleet/model/core/clouds/magnum.py: the heat driver gives a group's kubelet its group's labels); merged with
        # the cluster's labels, which a group's labels would otherwise replace.
        tainted = (
            {
                "labels": {
                    KUBELET_OPTIONS: kubelet_options_with_taints(
                        [CI_TAINT.as_string()], self.site.extra_labels.get(KUBELET_OPTIONS, "")
                    )
                },
                "merge_labels": True,
            }
            if pool.ci
            else {}
        )
        return containerinfra.NodeGroup(
            pool_resource_name(cluster, pool),
            name=pool.name,
            cluster_id=self.cluster.id,
            flavor_id=pool.machine_type,
            role=pool.name,  # gpu-<card> (gpu_role), a CI group's gpu-<card>-ci: its nodes' role label
            node_count=initial,
            min_node_count=pool.min_nodes,
            # the GPU autoscaler discovers only groups with a maximum (cloudprovider/magnum README)
            max_node_count=pool.max_nodes,
            **tainted,
            opts=self.child(self.openstack_provider, ignore_changes=["nodeCount"]),
        )
