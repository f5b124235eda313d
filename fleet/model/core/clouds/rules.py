"""What the fleet knows about a cloud that is not an SDK call: the shape every cloud module fills in.

Each cloud has one module in this package (gke.py, eks.py, aks.py, magnum.py, existing.py) holding one ``CloudRules``
(EKS's IAM documents are eks_iam.py, beside it): how a cluster's location is read and checked, which GPU sharing it
can build (and why not) and how a pool declares it, whether it builds sweep pools, the engine types of its cluster,
API allow-list and node pools and how they read back out of the engine's inputs (the policy pack finds them by
these), what its pools cannot carry, how it spells a taint, and the doctor's hints. The per-cloud *data* (locations,
Kubernetes versions, machine offers) stays in ``fleet/model/core/catalogue.yaml``; this is the rule of how to use it.
Outside this package no code compares a cloud's name (tests/model/test_clouds.py).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from fleet.model.core.card_sharing import Sharing
from fleet.model.core.taints import Taint

# Kubernetes' taint effects in the upper-case spelling of EKS node groups and GKE node configs
UPPER_EFFECT = {"NoSchedule": "NO_SCHEDULE", "PreferNoSchedule": "PREFER_NO_SCHEDULE", "NoExecute": "NO_EXECUTE"}
_KUBERNETES_EFFECT = {upper: k8s for k8s, upper in UPPER_EFFECT.items()}


def upper_effect(taint: Taint) -> dict[str, str]:
    """EKS node-group and GKE node-config spelling: ``{key, value, effect: NO_SCHEDULE}``."""
    return {"key": taint.key, "value": taint.value, "effect": UPPER_EFFECT[taint.effect]}


def taint_string(key: str, value: str, effect: str) -> str:
    """``key=value:NoSchedule`` from any spelling of the effect (a pool read back shows its taints this way)."""
    return f"{key}={value}:{_KUBERNETES_EFFECT.get(effect, effect)}"


def open_to_all(ranges: Any) -> bool:
    """Whether a list of source ranges is missing, empty or admits every address (a malformed range is not counted:
    ``check_source_ranges`` reports it)."""
    if not isinstance(ranges, list) or not ranges:
        return True
    for cidr in ranges:
        try:
            if ipaddress.ip_network(str(cidr), strict=False).prefixlen == 0:
                return True
        except ValueError:
            continue
    return False


class SharedPool(Protocol):
    """What a cloud's rules read of a GPU pool (``fleet.model.core.pools.GpuPool``, which is built on the catalogue and
    so on this package): how its cards are shared."""

    @property
    def sharing(self) -> Sharing | None:
        """The pool's sharing; None: whole cards."""
        ...


class Registration(Protocol):
    """One resource the plan engine received (fleet/tools/engine/mock_engine.py registers these): what a pool reader
    needs."""

    type: str
    name: str
    inputs: dict[str, Any]


@dataclass(frozen=True)
class PoolView:
    """One node pool as the engine sees it."""

    type: str
    name: str
    card: str
    machine_type: str
    min_nodes: int | None
    max_nodes: int | None
    spot: bool
    taints: tuple[str, ...]
    labels: dict[str, str]
    ci: bool = False  # a CI pool (fleet/model/runners/ci_pools.py): its CI label, or on Magnum its role gpu-<card>-ci


@dataclass(frozen=True)
class DoctorContext:
    """What the doctor knows when it words a hint about one GPU pool (fleet/tools/doctor/hints.py fills it in)."""

    stack: str
    kubectl: str  # the kubectl command with the cluster's context
    up: str  # the command that deploys the stack
    pool_name: str
    card: str
    resource: str  # the extended resource the pool's nodes offer
    units_per_node: int
    machine_type: str
    policy_key: str  # where the pool is written in the policy file
    selector: str  # the pool's node selector as text


class CloudRules:
    """One cloud's rules. Subclasses (one per cloud module) override what differs; the defaults are a managed
    cloud's."""

    #: the cloud's key in the policy file (clusters.<name>) and the catalogue
    name: str = ""
    #: a region of the cloud, as an example in messages ("" where the cloud has no fixed regions)
    region_example: str = ""
    #: its clusters may be zonal (a zone checked against the catalogue and against the region)
    zonal: bool = False
    #: provider settings in a stack file that name the location the policy gives: {stack key: policy field}
    stack_location_keys: Mapping[str, str] = {}
    #: the fleet builds the cluster's node pools (False: a site's existing cluster; no catalogue offer applies)
    builds_pools: bool = True
    #: its component builds sweep pools of other machine sizes (a card's ``machines`` in the catalogue)
    sweep_pools: bool = False
    #: the stack's settings, not the policy's kubernetes_version, decide the Kubernetes version (Magnum's kubeTag)
    kubernetes_version_from_stack: bool = False
    #: the API endpoint can be made private (gpu-fleet:privateApiEndpoint)
    private_api_endpoint: bool = True
    #: its component closes the API endpoint when the stack lists no range (EKS: private only; GKE: authorised
    #: networks with none); AKS and Magnum cannot express "no address" (an empty allow-list admits every one), so
    #: their open default is refused at deploy (the pack's api-allow-list, mandatory) unless ranges are set
    closes_api_by_default: bool = False
    #: the engine type of its cluster ("" where the fleet builds none)
    cluster_type: str = ""
    #: the engine type of the resource that says who reaches the cluster's API endpoint ("" where the fleet builds none)
    api_endpoint_type: str = ""
    #: the engine type of its node pools ("" where the fleet builds none)
    pool_type: str = ""
    #: its node pools carry the Kubernetes node labels the fleet gives them (pods select a pool by them)
    pool_labels: bool = True
    #: its node pools carry the accelerator taints the fleet gives them
    pool_taints: bool = True
    #: its node pools can run on spot capacity
    spot_pools: bool = True
    #: its scheduler, controller manager, etcd and kube-proxy run as pods a Prometheus in the cluster can scrape
    #: (kube-prometheus-stack's Services for them select pods by label); on a managed cloud the provider runs the
    #: control plane out of the cluster's reach and keeps kube-proxy's metrics on the node's loopback
    control_plane_pods: bool = False
    #: the cluster's control-plane nodes are nodes of the cluster (labelled node-role.kubernetes.io/control-plane) that
    #: a pod may select, as the Magnum GPU autoscaler does; a managed cloud's control plane is none
    control_plane_nodes: bool = False
    #: its cluster DNS is CoreDNS pods labelled ``k8s-app: kube-dns`` serving metrics on 9153, which
    #: kube-prometheus-stack's coreDns Service selects (values.yaml coreDns.service: port 9153)
    coredns_pods: bool = True

    def location_problems(self, region: str | None, zone: str | None) -> list[tuple[tuple[str, ...], str]]:
        """Where a cluster is, before the catalogue's lists: (sub-key, message) of each problem."""
        return []

    def regional_location_problems(self, region: str | None, zone: str | None) -> list[tuple[tuple[str, ...], str]]:
        """The rule of a cloud whose clusters are regional (EKS, AKS): a region, and no zone."""
        found: list[tuple[tuple[str, ...], str]] = []
        if not region:
            found.append(((), f"an {self.name} cluster needs a region"))
        if zone:
            found.append((("zone",), f"{self.name} clusters span zones of their region: give only 'region'"))
        return found

    def region_of(self, region: str | None, zone: str | None) -> str | None:
        """The region a cluster is in."""
        return region

    def sharing_refusal(self) -> str | None:
        """Why a pool of this cloud can have no GPU sharing at all (None: the catalogue's facts decide)."""
        return None

    def kubernetes_version_refusal(self) -> str | None:
        """Why a cluster's own kubernetes_version is ignored here (None: it is used)."""
        return None

    def read_pool(self, registration: Registration) -> PoolView:
        """A node pool read back out of the inputs the engine received (only clouds with a ``pool_type`` are asked:
        ``pool_readers`` lists those)."""
        raise TypeError(f"{self.name} builds no node pools, so it has none to read back")

    def api_open(self, inputs: dict[str, Any]) -> bool:
        """Whether the ``api_endpoint_type`` resource with these inputs (as the engine received them) leaves the API
        endpoint open to every address: public, and no allow-list or one that admits every address."""
        return False

    def declared_sharing(self, inputs: dict[str, Any]) -> str | None:
        """The GPU sharing a node pool declares itself, read back out of the inputs the engine received, in the terms
        of ``pool_sharing`` ('' for whole cards); None where a pool declares none (our device plugin's configuration,
        selected by the pool's label, shares its cards)."""
        return None

    def pool_sharing(self, pool: SharedPool) -> str:
        """What a node pool of this cloud declares for ``pool``'s sharing, in the terms of ``declared_sharing``."""
        return ""

    def autoscaler_logs(self, kubectl: str) -> str:
        """How to read what the cluster's autoscaler thinks."""
        return "ask the site which autoscaler serves its GPU nodes"

    def template_fix(self, ctx: DoctorContext) -> str:
        """What makes the autoscaler's idea of a new node of the pool include its accelerators."""
        return (
            f"the pool's machine type {ctx.machine_type or '?'} must carry {ctx.resource}: check machine_type under "
            f"{ctx.policy_key} and the catalogue's offer, then {ctx.up}"
        )

    def label_fix(self, ctx: DoctorContext, nodes: tuple[str, ...]) -> str:
        """What puts the pool's labels back on its nodes."""
        return (
            f"the node pool lost its labels ({ctx.selector}): {ctx.up} puts them back "
            f"(pulumi preview --stack {ctx.stack} shows the drift)"
        )
