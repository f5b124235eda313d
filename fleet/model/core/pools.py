"""GPU pools: one autoscaled node pool of one card in one cluster, with every default applied, and how a pod is kept on
the pools of its card."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from fleet.model.core import pod_contract
from fleet.model.core.card_sharing import DEVICE_PLUGIN_CONFIG_LABEL, SHARING_LABEL, Sharing
from fleet.model.core.catalogue import Accelerator, CloudFacts, Offer
from fleet.model.core.fits import fits
from fleet.model.core.taints import CI_TAINT, SWEEP_TAINT, Taint

GPU_LABEL = "gpu"
# The node label telling a sweep pool's cards per node (fleet/model/sweeps/).
CARDS_PER_NODE_LABEL = "gpu-fleet.io/cards-per-node"

# The node labels that set a sweep pool (its size) or a CI pool apart from the card's own pool.
POOL_KIND_LABELS = (CARDS_PER_NODE_LABEL, pod_contract.CI_LABEL)


@dataclass(frozen=True)
class Probe:
    """A pool's probe, resolved: when it runs and when to alert.

    ``stale_after_seconds`` is how long "no probe result" is normal: the schedule's longest gap between runs plus
    the longest a run may take (its Job's deadline).
    """

    schedule: str
    scale_up_alert_after: str
    scale_up_alert_seconds: float
    stale_after_seconds: float


@dataclass(frozen=True)
class GpuPool:
    """One autoscaled node pool of one card in one cluster, with every default applied."""

    card: str
    accelerator: Accelerator
    offer: Offer | None  # None on existing clusters, whose nodes we do not create
    machine_type: str
    min_nodes: int
    max_nodes: int
    spot: bool
    cloud_facts: CloudFacts
    probe: Probe | None = None  # None: this pool is not probed
    count: int = 0  # cards per machine when not the offer's (a sweep pool's machine size)
    sweep: bool = False  # a sweep pool: another machine size of the card, for scaling-sweep jobs only
    sharing: Sharing | None = None  # None: each pod gets whole cards
    ci: bool = False  # a CI pool: the card's machine for one runner's CI jobs only (fleet/model/runners/ci_pools.py)

    @property
    def units_per_node(self) -> int:
        """What a node advertises of ``resource``: its cards, times the pods per card when they are shared."""
        return self.accelerators_per_node * (self.sharing.units if self.sharing else 1)

    @property
    def device_plugin_config(self) -> str:
        """The device plugin configuration a node of this pool uses (``default``: whole cards, MIG by the plugin's
        single strategy off)."""
        return self.sharing.name if self.sharing else "default"

    @property
    def name(self) -> str:
        """Pool name suffix, the same on every cloud: ``gpu-<card>``; a sweep pool's ``gpu-<card>-x<count>``, a CI
        pool's ``gpu-<card>-ci``."""
        if self.ci:
            return pod_contract.ci_pool_name(self.card)
        return pod_contract.pool_name(self.card) + (f"-x{self.count}" if self.sweep else "")

    @property
    def key(self) -> str:
        """The pool's key in the components' and stack outputs: the card, ``<card>-x<count>`` for a sweep pool,
        ``<card>-ci`` for a CI pool."""
        return self.name.removeprefix(pod_contract.POOL_PREFIX)

    @property
    def resource(self) -> str:
        """The Kubernetes extended resource pods request (``nvidia.com/gpu``, ``google.com/tpu``...)."""
        return self.accelerator.resource

    @property
    def accelerators_per_node(self) -> int:
        """Cards per machine."""
        return self.count or (self.offer.count if self.offer else 1)

    def fits(self, accelerators: int) -> bool:
        """A pod asking for ``accelerators`` cards fits this pool (fleet/model/core/fits.py); an existing cluster's
        machines are unknown."""
        time_sliced = self.sharing is not None and self.sharing.kind == "time-slicing"
        return fits(accelerators, self.accelerators_per_node if self.offer else None, time_sliced)

    @property
    def labels(self) -> dict[str, str]:
        """Kubernetes node labels of the pool: ``gpu=<card>`` plus what the card and cloud need."""
        offer_labels = self.offer.node_labels if self.offer else {}
        shared = {SHARING_LABEL: self.sharing.name} if self.sharing else {}
        if self.sharing and self.needs_device_plugin:  # our plugin picks its configuration by this label
            shared[DEVICE_PLUGIN_CONFIG_LABEL] = self.sharing.name
        own = {GPU_LABEL: self.card, **self.accelerator.node_labels, **offer_labels}
        return {**own, **self._sweep_label, **self._ci_label, **shared}

    @property
    def _sweep_label(self) -> dict[str, str]:
        return {CARDS_PER_NODE_LABEL: str(self.count)} if self.sweep else {}

    @property
    def _ci_label(self) -> dict[str, str]:
        return {pod_contract.CI_LABEL: "true"} if self.ci else {}

    @property
    def needs_device_plugin(self) -> bool:
        """Whether we must install the NVIDIA device plugin for this pool (the platform does not bring one)."""
        bottlerocket = bool(self.offer and self.offer.ami_type.startswith("BOTTLEROCKET"))
        return self.accelerator.is_nvidia and not self.cloud_facts.provides_device_plugin and not bottlerocket

    @property
    def driver_env(self) -> dict[str, str]:
        """What a GPU container on this pool must add to its environment to load the driver the cloud's device
        plugin mounted (GKE: /usr/local/nvidia, with no variable set): ``LD_LIBRARY_PATH`` and ``PATH`` additions."""
        root = self.cloud_facts.gpu_driver_dir
        if not root or not self.accelerator.is_nvidia:
            return {}
        return {"LD_LIBRARY_PATH": f"{root}/lib64", "PATH": f"{root}/bin"}

    @property
    def node_selector(self) -> dict[str, str]:
        """The node labels a pod selects to run on this pool: ``gpu=<card>``, and a sweep pool's size or a CI pool's
        ``gpu-fleet.io/ci=true``; on Magnum the node-group role, the pool's name, alone."""
        selector = self.cloud_facts.pool_selector
        own = {k: v.replace("{pool}", self.name).replace("{card}", self.card) for k, v in selector.items()}
        if any("{pool}" in v for v in selector.values()):  # the label tells each pool apart by itself
            return own
        return {**own, **self._sweep_label, **self._ci_label}

    def has_node(self, labels: Mapping[str, str]) -> bool:
        """Whether a node of these labels is one of this pool's: it carries the pool's selector, and none of the
        labels that set a sweep or CI pool apart (``POOL_KIND_LABELS``) the selector does not name (a card's own pool
        does not count its sweep and CI pools' nodes, which carry its card label too)."""
        selector = self.node_selector
        if any(labels.get(k) != v for k, v in selector.items()):
            return False
        return not any(k in labels for k in POOL_KIND_LABELS if k not in selector)

    @property
    def taints(self) -> tuple[Taint, ...]:
        """Taints we declare on the pool: the accelerator taint, and on a sweep pool the sweep taint, on a CI pool the
        CI taint (cloud spot taints are added by clouds)."""
        return (self.accelerator.taint, *((SWEEP_TAINT,) if self.sweep else ()), *((CI_TAINT,) if self.ci else ()))

    @property
    def pod_tolerations(self) -> tuple[Taint, ...]:
        """Taints a pod on this pool must tolerate: ours plus the cloud's spot taints."""
        spot = tuple(self.cloud_facts.spot_taints) if self.spot else ()
        return (*self.taints, *spot)


@dataclass(frozen=True)
class SystemPoolSpec:
    """The on-demand pool for infra services."""

    machine_type: str
    min_nodes: int
    max_nodes: int


def card_affinity(card: str, pools: Sequence[GpuPool], allowed: Sequence[GpuPool] | None = None) -> dict[str, object]:
    """The required node affinity that keeps a dispatched job on ``card`` whichever worker runs it; ``pools``: every
    pool of the queue's cards on its workers (``Fleet.queue_pools``); ``allowed``: the pools of the card it may run on
    (by default every pool of the card in ``pools``; a queued sweep point names the pool of each worker that holds it).

    The pools of one card carry different selectors (``gpu=<card>`` on GKE, EKS and AKS, the node-group role on
    Magnum), and a worker's ClusterQueue lists a flavor per card of the queue, tried in order, so the job must make
    Kueue skip the other cards' flavors. Kueue matches a flavor on **that flavor's own label keys** only, and a term
    left without any expression matches every flavor (kueue v0.19.2 pkg/scheduler/flavorassigner/flavorassigner.go
    ``checkFlavorForPodSets``, ``flavorSelector``). So each term, one per selector of the allowed pools, names its own
    keys ``In`` their values and every other key the queue's card pools use ``NotIn`` the values of the pools it may not
    run on (the other cards', and for a sweep point its card's pools that cannot hold it, such as Magnum's). A
    flavor of another card fails every term on its own keys, the card's flavor matches its term, and so does a node of
    the card's pool when the pod is scheduled (``NotIn`` holds on a node without the label). A term of a card's own
    pool also wants no sweep-pool size label (``DoesNotExist``): the sweep pools' flavors carry the card's label too,
    and are listed first on a worker that holds queued sweep points.
    """
    chosen = pools if allowed is None else allowed
    own = list(dict.fromkeys(tuple(sorted(p.node_selector.items())) for p in chosen if p.card == card))
    others: dict[str, set[str]] = {}
    for pool in pools:
        if not pool.sweep and (pool.card != card or pool not in chosen):
            for key, value in pool.node_selector.items():
                if key != CARDS_PER_NODE_LABEL:
                    others.setdefault(key, set()).add(value)
    terms = []
    for selector in own:
        mine = dict(selector)
        expressions: list[dict[str, object]] = [{"key": k, "operator": "In", "values": [v]} for k, v in selector]
        if CARDS_PER_NODE_LABEL not in mine:
            expressions.append({"key": CARDS_PER_NODE_LABEL, "operator": "DoesNotExist"})
        expressions += [
            {"key": k, "operator": "NotIn", "values": sorted(values)}
            for k, values in sorted(others.items())
            if k not in mine
        ]
        terms.append({"matchExpressions": expressions})
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}
