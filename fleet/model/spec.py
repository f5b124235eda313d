"""The fleet: ``policy/fleet.yaml`` checked against the catalogue and the workload folders, then resolved.

``load_fleet`` is the only way in: it reports every problem at once as ``FILE:LINE: key.path: message``
(an ``InputError``) and otherwise returns an immutable ``Fleet`` in which every default is applied.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from fleet.model import pod_contract
from fleet.model.catalogue import (
    CLOUDS,
    Accelerator,
    Catalogue,
    CloudFacts,
    Offer,
    Taint,
    load_catalogue,
    version_key,
)
from fleet.model.ci_pools import CI_TAINT, ci_pool
from fleet.model.clouds import cloud_rules
from fleet.model.errors import InputError, Problem, did_you_mean
from fleet.model.prometheus import duration_seconds
from fleet.model.queues import Dispatch, QueuedJob, card_affinity, check_queued_workloads, check_queues, resolve
from fleet.model.registry import DEFAULT_REGISTRY, in_registry, outside_message, outside_registry
from fleet.model.schedules import longest_gap_seconds
from fleet.model.spec_schema import FleetFile, Monitoring, PoolSettings, ProbeDefaults, RunnerSettings
from fleet.model.sweeps import CARDS_PER_NODE_LABEL, SWEEP_TAINT, ClusterSweeps, SweepPoint, plan_cluster
from fleet.model.validation import validate_document
from fleet.model.workloads import WORKLOADS_DIR, Workload, load_probe_workload, load_workloads
from fleet.model.yaml_source import YamlDocument, read_yaml

ROOT = Path(__file__).resolve().parents[2]
POLICY_FILE = ROOT / "policy" / "fleet.yaml"
CLUSTER_NAME = re.compile(r"^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$")
GPU_LABEL = "gpu"


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


# The node label naming the device plugin's configuration a node uses (NVIDIA/k8s-device-plugin v0.17.1 README,
# "Updating Per-Node Configuration With a Node Label"; the chart's config-manager reads it), and the fleet's own label
# telling how a pool's cards are shared.
DEVICE_PLUGIN_CONFIG_LABEL = "nvidia.com/device-plugin.config"
SHARING_LABEL = "gpu-fleet.io/sharing"
# The node labels that set a sweep pool (its size) or a CI pool apart from the card's own pool.
POOL_KIND_LABELS = (CARDS_PER_NODE_LABEL, pod_contract.CI_LABEL)


@dataclass(frozen=True)
class Sharing:
    """How a pool's cards are shared: ``units`` pods per card, by time-slicing or as MIG instances of ``profile``."""

    kind: str  # "time-slicing" or "mig"
    units: int  # pods per card: the time slices, or the profile's instances per card
    profile: str = ""  # the MIG profile

    @property
    def name(self) -> str:
        """``time-slicing-4`` or ``mig-1g.5gb``: the device plugin configuration's name and the sharing label."""
        return f"time-slicing-{self.units}" if self.kind == "time-slicing" else f"mig-{self.profile}"


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
    ci: bool = False  # a CI pool: the card's machine for one runner's CI jobs only (fleet/model/ci_pools.py)

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


@dataclass(frozen=True)
class Cluster:
    """One cluster of the fleet (and one Pulumi stack of the same name)."""

    name: str
    cloud: str
    region: str | None
    zone: str | None
    central: bool
    kubernetes_version: str
    system_pool: SystemPoolSpec
    pools: tuple[GpuPool, ...]
    facts: CloudFacts
    description: str = ""
    # how long an unneeded node (and a new one) is kept before the autoscaler removes it (policy: defaults.gpu_pool)
    scale_down_after: str = "10m"
    # pools of other machine sizes for the scaling sweeps (fleet/model/sweeps.py)
    sweep_pools: tuple[GpuPool, ...] = ()
    # an existing ReadWriteMany claim for the sweep jobs' checkpoints (policy: checkpoint_claim)
    checkpoint_claim: str | None = None
    # the account its GPU time is billed to, unless a workload names its own (policy: billing_account)
    billing_account: str = "default"
    # where its pods pull the fleet's own images and the charts' images from (policy: registry)
    registry: str = DEFAULT_REGISTRY
    # the pools of the cards' GitLab CI jobs, one per card with a runner of its own pool (fleet/model/ci_pools.py)
    ci_pools: tuple[GpuPool, ...] = ()

    @property
    def all_pools(self) -> tuple[GpuPool, ...]:
        """The card pools, then the sweep pools, then the CI pools: every GPU node pool the cluster has."""
        return self.pools + self.sweep_pools + self.ci_pools

    @property
    def pool_kind_labels(self) -> tuple[str, ...]:
        """The node labels that set a sweep or CI pool's nodes apart from its card's pool (which carries the card's
        label too), where a pool's selector names them: a node without them is a card pool's node."""
        selected = {k for p in self.all_pools for k in p.node_selector}
        return tuple(k for k in POOL_KIND_LABELS if k in selected)

    @property
    def location(self) -> str:
        """Zone if given (zonal), else region; empty for an existing cluster without either."""
        return self.zone or self.region or ""

    @property
    def system_selector(self) -> dict[str, str]:
        """The node label of the system pool, where the fleet's own services run (empty: wherever they fit)."""
        return dict(self.facts.system_selector)

    def pool_sized(self, card: str, cards_per_node: str | None, ci: bool = False) -> GpuPool | None:
        """The pool of ``card`` whose nodes carry ``cards_per_node`` in the sweep pools' size label (None: the card's
        own pool, whose nodes carry none), as a pod's selector or a pool's labels name it, or with ``ci`` the card's
        CI pool; None if there is none."""
        return next(
            (
                p
                for p in self.all_pools
                if p.card == card and p.labels.get(CARDS_PER_NODE_LABEL) == cards_per_node and p.ci == ci
            ),
            None,
        )

    def pool(self, card: str) -> GpuPool:
        """The pool of ``card`` (KeyError if the cluster does not offer it)."""
        for pool in self.pools:
            if pool.card == card:
                return pool
        raise KeyError(card)


@dataclass(frozen=True)
class Runner:
    """A GitLab CI runner of one card: each CI job it runs requests ``accelerators`` of the cards of ``pool``, the
    card's CI pool (or, with ``own_pool`` false on an existing cluster, the card's own pool)."""

    pool: GpuPool
    gitlab_url: str
    tags: tuple[str, ...]
    concurrency: int
    accelerators: int
    cpu_request: str
    memory_request: str
    cpu_limit: str
    memory_limit: str
    own_pool: bool = True

    @property
    def name(self) -> str:
        """The runner's name in the cluster: ``gitlab-runner-<card>``."""
        return f"gitlab-runner-{self.pool.card}"


@dataclass(frozen=True)
class Benchmark:
    """One (workload, card) pair that runs on a cluster."""

    workload: Workload
    pool: GpuPool
    schedule: str | None


@dataclass(frozen=True)
class Fleet:
    """The validated, resolved policy: clusters, placements and the workloads they run."""

    file: str
    clusters: dict[str, Cluster]
    placements: dict[str, tuple[str, ...]]  # workload -> cards ("all" expanded)
    schedules: dict[str, str | None]
    monitoring: Monitoring
    workloads: dict[str, Workload] = field(repr=False)
    # What the policy allows but probably does not mean (``FILE:LINE: key: message``), shown once by validate/plan.
    warnings: tuple[str, ...] = ()
    # The pool probe (fleet/model/probe), run on every probed pool; None only in fleets built by hand.
    probe_workload: Workload | None = field(default=None, repr=False)
    # The GitLab CI runners of each cluster (policy file: runners)
    runners: dict[str, tuple[Runner, ...]] = field(default_factory=dict)
    # Sweeping workloads and their points (policy file: workloads.<name>.scale), and each cluster's sweep jobs
    scales: dict[str, tuple[int, ...]] = field(default_factory=dict)
    sweeps: dict[str, ClusterSweeps] = field(default_factory=dict)
    # workloads billed to an account of their own instead of their cluster's (policy: workloads.<name>.billing_account)
    billing_accounts: dict[str, str] = field(default_factory=dict)
    # the fleet-wide queues dispatched by MultiKueue (policy: queues); None: the fleet has none
    dispatch: Dispatch | None = None
    # the registry every image is pulled from and pushed to (policy: registry); workload images are resolved in it
    registry: str = DEFAULT_REGISTRY
    # workloads that name a queue, and its name (policy: workloads.<name>.queue): dispatched, not run per cluster
    queued: dict[str, str] = field(default_factory=dict)

    @property
    def central(self) -> Cluster:
        """The cluster holding the central Prometheus."""
        return next(c for c in self.clusters.values() if c.central)

    def cluster(self, name: str) -> Cluster:
        """The cluster called ``name``; an ``InputError`` naming the known ones if there is none."""
        try:
            return self.clusters[name]
        except KeyError:
            known = ", ".join(self.clusters)
            raise InputError(
                [Problem(self.file, 1, "clusters", f"no cluster named {name!r} (known: {known})")]
            ) from None

    def benchmarks(self, cluster: Cluster) -> list[Benchmark]:
        """The (workload, card) pairs the policy places on ``cluster``: offered by it and allowed for the workload.
        A workload that names a queue has none: its Jobs are on the manager (``queued_jobs``)."""
        out = []
        for workload, cards in self.placements.items():
            if workload in self.scales or workload in self.queued:  # sweep_points, queued_jobs instead
                continue
            wl = self.workloads[workload]
            for pool in cluster.pools:
                if pool.card in cards and _runs_on(wl, pool):
                    out.append(Benchmark(wl, pool, self.schedules[workload]))
        return out

    def queued_jobs(self) -> list[QueuedJob]:
        """The Jobs of the workloads that name a queue, declared on the manager: one per card of the queue the workload
        allows and some worker's pool of it can run, in the queue's card order."""
        if self.dispatch is None:
            return []
        queues = {q.name: q for q in self.dispatch.queues}
        out = []
        for workload, queue_name in self.queued.items():
            queue, wl = queues[queue_name], self.workloads[workload]
            for card in queue.cards:
                job = QueuedJob(wl, queue, card)
                if card in self.placements[workload] and self.queued_pools(job):
                    out.append(job)
        return out

    def queued_pools(self, job: QueuedJob) -> tuple[GpuPool, ...]:
        """Every pool a queued Job may run on: its card's pool on each worker of its queue, in the queue's order."""
        return tuple(
            p
            for name in job.queue.clusters
            for p in self.clusters[name].pools
            if p.card == job.card and _runs_on(job.workload, p)
        )

    def queued_affinity(self, job: QueuedJob) -> dict[str, object]:
        """The node affinity that keeps ``job`` on its card on every worker (``card_affinity``)."""
        pools = tuple(p for name in job.queue.clusters for p in job.queue.pools(self.clusters[name]))
        return card_affinity(job.card, pools)

    def dispatched_to(self, cluster: Cluster) -> list[Benchmark]:
        """The queued Jobs a worker may be given, as benchmarks on its own pools: what must be ready for them there
        (ConfigMaps, credentials, egress, the PodMonitor) and what its nodes must hold."""
        return [
            Benchmark(job.workload, pool, None)
            for job in self.queued_jobs()
            for pool in self.queued_pools(job)
            if pool in cluster.pools and cluster.name in job.queue.clusters
        ]

    def probes(self, cluster: Cluster) -> list[Benchmark]:
        """The probe of each probed pool of ``cluster``: the probe workload on the pool, a CronJob on its schedule."""
        if self.probe_workload is None:
            return []
        return [Benchmark(self.probe_workload, p, p.probe.schedule) for p in cluster.pools if p.probe is not None]

    def sweep_points(self, cluster: Cluster) -> tuple[SweepPoint, ...]:
        """The distributed jobs of the scaling sweeps on ``cluster``, one per point and card."""
        return self.sweeps[cluster.name].points if cluster.name in self.sweeps else ()

    def runners_of(self, cluster: Cluster) -> tuple[Runner, ...]:
        """The GitLab CI runners of ``cluster`` (policy file: runners.clusters)."""
        return self.runners.get(cluster.name, ())

    def workload_jobs(self, cluster: Cluster) -> list[Benchmark]:
        """Every Job or CronJob of workloads on ``cluster``: the policy's benchmarks, then the pool probes."""
        return self.benchmarks(cluster) + self.probes(cluster)

    @property
    def deployed_workloads(self) -> dict[str, Workload]:
        """Every workload that runs in the fleet's pods: the policy's workloads, and the probe when a pool is probed
        (their images are copied, their metrics federated, their mtail programs checked)."""
        probed = self.probe_workload is not None and any(p.probe for c in self.clusters.values() for p in c.pools)
        return {**self.workloads, **({self.probe_workload.name: self.probe_workload} if probed else {})}  # type: ignore[union-attr]


def _runs_on(wl: Workload, pool: GpuPool) -> bool:
    """Whether a pod of ``wl`` can run on ``pool``: `all` may name a card whose machines hold fewer accelerators than a
    pod asks for (an explicit card like that is refused by the checker; an existing cluster's machines are unknown),
    and a time slice is all a pod gets on a time-sliced pool."""
    fits = pool.offer is None or pool.accelerators_per_node >= wl.spec.accelerators
    sliced = pool.sharing is not None and pool.sharing.kind == "time-slicing" and wl.spec.accelerators > 1
    return fits and not sliced


class _Checker:
    """Cross-key rules of the policy file, collecting every problem with its line."""

    def __init__(self, doc: YamlDocument, spec: FleetFile, catalogue: Catalogue, workloads: dict[str, Workload]):
        self.doc, self.spec, self.catalogue, self.workloads = doc, spec, catalogue, workloads
        self.problems: list[Problem] = []

    def report(self, path: tuple[object, ...], message: str) -> None:
        self.problems.append(self.doc.problem(path, message))

    def card_path(self, cluster_path: tuple[object, ...], card: str) -> tuple[object, ...]:
        """Key path of a card whether the cluster lists cards or maps them to settings."""
        raw = self.doc.data["clusters"][cluster_path[1]][cluster_path[2]].get("gpus")
        if isinstance(raw, list):
            return (*cluster_path, "gpus", raw.index(card))
        return (*cluster_path, "gpus", card)

    def check_clusters(self) -> None:
        seen: dict[str, str] = {}
        central = []
        for cloud, clusters in self.spec.clusters.items():
            for name, settings in clusters.items():
                path = ("clusters", cloud, name)
                if not CLUSTER_NAME.match(name):
                    self.report(
                        path,
                        f"cluster name {name!r} must be a DNS-1123 label: lower-case letters, digits and '-', "
                        "starting with a letter, at most 40 characters",
                    )
                if name in seen:
                    self.report(path, f"cluster name {name!r} is used twice (also under clusters.{seen[name]})")
                seen[name] = cloud
                if settings.central:
                    central.append(path)
                self.check_location(cloud, path, settings.region, settings.zone)
                for card, pool in settings.gpus.items():
                    self.check_card(cloud, path, card, pool)
        if not central:
            self.report(
                ("clusters",), "no cluster is marked 'central: true': exactly one must hold the central Prometheus"
            )
        for path in central[1:]:
            first = ".".join(str(p) for p in central[0])
            self.report(
                (*path, "central"),
                f"a second central cluster: only one may hold the central Prometheus (first: {first})",
            )

    def check_runners(self) -> None:
        """Runners only on clusters of the policy, for cards they offer, asking for no more cards than a node has."""
        clusters = {name: (cloud, c) for cloud, cs in self.spec.clusters.items() for name, c in cs.items()}
        raw = (self.doc.data.get("runners") or {}).get("clusters") or {}
        for name, cards in self.spec.runners.clusters.items():
            where = ("runners", "clusters", name)
            if name not in clusters:
                self.report(where, f"no cluster named {name!r} (clusters: {', '.join(clusters)})")
                continue
            cloud, cluster = clusters[name]
            for card, settings in cards.items():
                at = (*where, raw[name].index(card)) if isinstance(raw.get(name), list) else (*where, card)
                if card not in cluster.gpus:
                    self.report(
                        at,
                        f"cluster {name} offers no {card} (its cards: {', '.join(cluster.gpus) or 'none'}); add the "
                        f"card under clusters.{cloud}.{name}.gpus or remove the runner",
                    )
                    continue
                offer = self.catalogue.offer(card, cloud) if cloud_rules(cloud).builds_pools else None
                self.check_runner_pool(at, name, cloud, card, settings)
                shared = cluster.gpus[card].sharing if not settings.own_pool else None
                if shared is not None and shared.time_slicing is not None and settings.accelerators > 1:
                    self.report(
                        (*at, "accelerators") if not isinstance(raw.get(name), list) else at,
                        f"a CI job asks for {settings.accelerators} {card}, but the {card} pool is time-sliced: a pod "
                        "gets one slice at most (the device plugin and GKE refuse more)",
                    )
                if offer is not None and settings.accelerators > offer.count:
                    self.report(
                        (*at, "accelerators") if not isinstance(raw.get(name), list) else at,
                        f"a CI job asks for {settings.accelerators} {card}, but {offer.machine_type} has {offer.count}",
                    )

    def offered(self) -> dict[str, tuple[str, frozenset[str]]]:
        """Every cluster of the policy: its cloud and the cards it offers."""
        return {
            name: (cloud, frozenset(c.gpus))
            for cloud, clusters in self.spec.clusters.items()
            for name, c in clusters.items()
        }

    def check_queues(self) -> None:
        """The fleet-wide queues (fleet/model/queues.py): a known manager that is no worker, known clusters that offer
        the queue's cards."""
        if self.spec.queues is None:
            return
        self.problems.extend(check_queues(self.doc, self.spec.queues, self.offered(), self.catalogue))
        central = [n for cs in self.spec.clusters.values() for n, c in cs.items() if c.central]
        manager = self.spec.queues.manager
        if central and manager in self.offered() and manager != central[0]:
            self.report(
                ("queues", "manager"),
                f"the manager reads every worker's stack outputs, as the central cluster ({central[0]}) reads every "
                f"leaf's, and is deployed after them: make the central cluster the manager (manager: {central[0]})",
            )

    def check_queued_workloads(self) -> None:
        """Workloads that name a queue (fleet/model/queues.py): a known queue, cards it serves, a Job it can
        dispatch."""
        self.problems.extend(
            check_queued_workloads(
                self.doc, self.spec.workloads, self.spec.queues, self.workloads, self.offered(), self.catalogue
            )
        )

    def check_runner_pool(
        self, at: tuple[object, ...], cluster: str, cloud: str, card: str, settings: RunnerSettings
    ) -> None:
        """A runner's CI jobs get a pool of their own wherever the fleet creates pools; only on an existing cluster,
        whose pools are the site's, may (and must) a runner say ``own_pool: false``."""
        own = settings.own_pool
        builds_pools = cloud_rules(cloud).builds_pools
        if not builds_pools and own:
            self.report(
                at,
                f"{cluster} is an existing cluster: the fleet creates no node pool there, so the {card} runner's CI "
                f"jobs cannot get a pool of their own ({pod_contract.ci_pool_name(card)}); set own_pool: false to run "
                f"them on the {card} pool beside the benchmarks (which may hold credentials: docs/runners.md), or "
                "remove the runner",
            )
        elif builds_pools and not own:
            self.report(
                (*at, "own_pool"),
                f"own_pool: false is for existing clusters only: on {cloud} the fleet gives the {card} runner's CI "
                f"jobs a pool of their own ({pod_contract.ci_pool_name(card)}), so a job never shares a node with a "
                "benchmark that holds credentials; remove own_pool",
            )

    def check_monitoring(self) -> None:
        """A pod's last samples must reach the central before the pod ends: the central federates each leaf every
        federation_interval, and a benchmark or probe pod lingers LINGER_SECONDS after its last line."""
        interval = duration_seconds(self.spec.monitoring.federation_interval)
        scrape = self.spec.monitoring.scrape_interval
        if interval < duration_seconds(scrape):
            self.report(
                ("monitoring", "federation_interval"),
                f"{self.spec.monitoring.federation_interval} is below the scrape_interval {scrape}: federating more "
                f"often than the leaves scrape fetches the same samples again; use {scrape} or more, such as "
                "federation_interval: 60s with scrape_interval: 30s",
            )
        if interval >= pod_contract.LINGER_SECONDS:
            self.report(
                ("monitoring", "federation_interval"),
                f"{self.spec.monitoring.federation_interval} is not below the {pod_contract.LINGER_SECONDS} s a "
                "benchmark or probe pod stays up after its result: the central could miss the result; use 60s or less",
            )

    def check_location(self, cloud: str, path: tuple[object, ...], region: str | None, zone: str | None) -> None:
        """A region and zone the cloud has (the catalogue's lists, with their source), consistent with each other."""
        rules = cloud_rules(cloud)
        for sub_key, message in rules.location_problems(region, zone):
            self.report((*path, *sub_key), message)
        known = self.catalogue.clouds[cloud].locations  # type: ignore[index]
        if known is None:
            return
        title = self.catalogue.clouds[cloud].title  # type: ignore[index]
        regions = known.all_regions
        region_ok = region is None or region in regions
        if not region_ok:
            example = rules.region_example or regions[0]
            elsewhere = self._elsewhere(region, cloud)
            near = "" if elsewhere else did_you_mean(region, regions)
            self.report(
                (*path, "region"),
                f"{region!r} is not a region of {title}{elsewhere}; expected one such as {example}{near} (the "
                f"catalogue's list: {known.cited_as}; a newer region goes into fleet/model/catalogue.yaml)",
            )
        if rules.zonal and zone and not known.has_zone(zone):
            elsewhere = self._elsewhere(zone, cloud)
            near = "" if elsewhere else did_you_mean(zone, known.all_zones)
            self.report(
                (*path, "zone"),
                f"{zone!r} is not a zone of {title}{elsewhere}; expected a region and a zone letter such as "
                f"us-central1-a{near} (the catalogue's list: {known.cited_as}; a newer zone goes into "
                "fleet/model/catalogue.yaml)",
            )
        elif rules.zonal and region_ok and region and zone and not zone.startswith(region + "-"):
            self.report((*path, "zone"), f"zone {zone!r} is not in region {region!r}")

    def _elsewhere(self, name: str, cloud: str) -> str:
        """`` ('eastus' is an Azure region)`` when ``name`` is a location of another cloud, else empty."""
        for other, facts in self.catalogue.clouds.items():
            known = facts.locations
            if other == cloud or known is None:
                continue
            if name in known.all_regions:
                return f" ({name!r} is a region of {facts.title})"
            if name in known.all_zones:
                return f" ({name!r} is a zone of {facts.title})"
        return ""

    def check_kubernetes_versions(self) -> tuple[str, ...]:
        """Each managed cluster's Kubernetes version against the versions its cloud supports (the catalogue's
        calendar, as of its date): one no longer supported is a problem, with the supported range; one newer than the
        catalogue knows is a warning (the cloud may have it already). Returns the warnings."""
        warnings: list[str] = []
        default = self.spec.defaults.kubernetes_version
        # by (cloud, where the version is written) -> the clusters that take it from there
        users: dict[tuple[str, tuple[object, ...]], list[str]] = {}
        for cloud, clusters in self.spec.clusters.items():
            for name, settings in clusters.items():
                own = settings.kubernetes_version is not None
                where = ("clusters", cloud, name, "kubernetes_version") if own else ("defaults", "kubernetes_version")
                users.setdefault((cloud, where), []).append(name)
        for (cloud, where), names in users.items():
            facts = self.catalogue.clouds[cloud]  # type: ignore[index]
            calendar = facts.kubernetes_versions
            ignored = cloud_rules(cloud).kubernetes_version_refusal()
            if ignored is not None and where[0] == "clusters":
                warnings.append(str(self.doc.problem(where, ignored)))
            if calendar is None or not calendar.supported:
                continue
            version = default if where[0] == "defaults" else self.spec.clusters[cloud][names[0]].kubernetes_version  # type: ignore[index]
            assert version is not None
            supported = calendar.supported
            oldest, newest = supported[0], supported[-1]
            taken = f" (taken by {', '.join(names)})" if where[0] == "defaults" else ""
            if version_key(version) < version_key(oldest):
                self.report(
                    where,
                    f"Kubernetes {version}{taken} is no longer supported by {facts.title}: it supports {oldest} to "
                    f"{newest} (as of {calendar.as_of}; {calendar.cited_as}); use one of them, such as "
                    f'kubernetes_version: "{newest}"',
                )
            elif version_key(version) > version_key(newest):
                warnings.append(
                    str(
                        self.doc.problem(
                            where,
                            f"Kubernetes {version}{taken} is newer than the newest {facts.title} version the catalogue "
                            f"knows ({newest}, as of {calendar.as_of}): check that {facts.title} offers it, then add "
                            "it to fleet/model/catalogue.yaml",
                        )
                    )
                )
        return tuple(warnings)

    def check_card(self, cloud: str, path: tuple[object, ...], card: str, pool: PoolSettings) -> None:
        where = self.card_path(path, card)
        acc = self.catalogue.accelerators.get(card)
        if acc is None:
            self.report(where, f"unknown card {card!r}; the catalogue knows: {', '.join(self.catalogue.accelerators)}")
            return
        defaults = self.spec.defaults.gpu_pool
        lo = pool.min_nodes if pool.min_nodes is not None else defaults.min_nodes
        hi = pool.max_nodes if pool.max_nodes is not None else defaults.max_nodes
        if lo > hi:
            self.report(where, f"min_nodes {lo} is above max_nodes {hi}")
        rules = cloud_rules(cloud)
        if not rules.builds_pools:
            refusal = rules.sharing_refusal()
            if pool.sharing is not None and refusal is not None:
                self.report((*where, "sharing"), refusal)
            return
        offer = acc.offers.get(cloud)  # type: ignore[call-overload]
        if offer is None:
            have = ", ".join(self.catalogue.available_on(cloud))
            self.report(where, f"{cloud} has no {card} ({acc.model}); cards on {cloud}: {have}")
        elif offer.status == "retired":
            self.report(
                where,
                f"{card} ({acc.model}) was retired on {cloud} on {offer.retired_on} ({offer.note}); "
                f"use one of: {', '.join(offer.alternatives)}",
            )
        elif pool.sharing is not None:
            self.check_sharing(cloud, where, card, acc, offer, pool)

    def check_sharing(
        self, cloud: str, where: tuple[object, ...], card: str, acc: Accelerator, offer: Offer, pool: PoolSettings
    ) -> None:
        """A shared pool: an NVIDIA card, on a cloud that can share it that way, with a MIG profile the card has."""
        sharing = pool.sharing
        assert sharing is not None
        facts = self.catalogue.clouds[cloud]  # type: ignore[index]
        at = (*where, "sharing") if not isinstance(where[-1], int) else where
        if not acc.is_nvidia:
            self.report(at, f"{card} is a {acc.resource} accelerator: only NVIDIA GPUs are shared")
        elif sharing.time_slicing is not None and not facts.time_slicing:
            self.report(
                at, f"{facts.title} pools cannot be time-sliced: their nodes carry no label of ours to configure them"
            )
        elif sharing.time_slicing is not None and offer.ami_type.startswith("BOTTLEROCKET"):
            self.report(at, f"{offer.ami_type} brings its own device plugin, which takes no time-slicing configuration")
        elif sharing.mig is not None and not facts.mig_partitioning:
            self.report(at, f"{facts.title} cannot partition GPUs into MIG instances itself; use time_slicing")
        elif sharing.mig is not None and sharing.mig not in offer.mig_profiles:
            have = ", ".join(offer.mig_profiles) or "none: the card has no MIG"
            self.report(at, f"{card} on {cloud} has no MIG profile {sharing.mig} (its profiles: {have})")

    def check_workloads(self) -> None:
        known_cards = self.catalogue.accelerators
        kinds_known = sorted({acc.resource for acc in known_cards.values()})
        for wl in self.workloads.values():
            unknown_kinds = sorted(set(wl.spec.accelerator_kinds) - set(kinds_known))
            if unknown_kinds:
                self.problems.append(
                    read_yaml(wl.folder / "workload.yaml").problem(
                        ("accelerator_kinds",),
                        f"unknown kind(s) {', '.join(unknown_kinds)}; the catalogue's: {', '.join(kinds_known)}",
                    )
                )
        for name, placement in self.spec.workloads.items():
            path = ("workloads", name)
            wl = self.workloads.get(name)
            if wl is None:
                have = ", ".join(self.workloads) or "none"
                self.report(
                    path, f"no workload definition {name!r} (expected workloads/{name}/workload.yaml; defined: {have})"
                )
            raw = self.doc.data["workloads"][name]
            if placement.scale is not None and wl is not None and wl.spec.distributed is None:
                self.report(
                    (*path, "scale"),
                    f"{name} cannot run as one job over many accelerators: a sweep needs `distributed` in "
                    f"{name}/workload.yaml (see workloads/3dgan-jax)",
                )
            elif placement.scale is not None and wl is not None and wl.spec.needs_root:
                self.report(
                    (*path, "scale"),
                    f"{name} needs root (needs_root in its workload.yaml), but sweep jobs run under Pod Security "
                    "`restricted` in the benchmarks namespace: build its image to run as a user first",
                )
            for i, card in enumerate(placement.gpus):
                where = (*path, *((i,) if isinstance(raw, list) else ("gpus", i)))
                if card == "all":
                    continue
                acc = known_cards.get(card)
                if acc is None:
                    self.report(where, f"unknown card {card!r}; the catalogue knows: {', '.join(known_cards)}")
                elif wl and acc.resource not in wl.spec.accelerator_kinds:
                    self.report(
                        where,
                        f"{name} runs on {', '.join(wl.spec.accelerator_kinds)} (accelerator_kinds in its "
                        f"workload.yaml), but {card} is a {acc.resource} card",
                    )
                elif wl and placement.scale is None:
                    self.check_accelerators_fit(where, wl, card)

    def check_accelerators_fit(self, where: tuple[object, ...], wl: Workload, card: str) -> None:
        """A pod asks for ``accelerators`` cards: every machine of ``card`` in the fleet must hold that many, and no
        pool of the card may be time-sliced if it asks for more than one (a pod gets one slice at most)."""
        sliced = []
        for clusters in self.spec.clusters.values():
            for name, cluster in clusters.items():
                sharing = cluster.gpus[card].sharing if card in cluster.gpus else None
                if sharing is not None and sharing.time_slicing is not None:
                    sliced.append(name)
        if sliced and wl.spec.accelerators > 1:
            self.report(
                where,
                f"{wl.name} asks for {wl.spec.accelerators} {card} per pod, but {card} is time-sliced on "
                f"{', '.join(sliced)}: a pod gets one slice at most",
            )
        for cloud, clusters in self.spec.clusters.items():
            offer = self.catalogue.accelerators[card].offers.get(cloud)  # type: ignore[call-overload]
            if offer is None or not cloud_rules(cloud).builds_pools:
                continue
            offering = [n for n, c in clusters.items() if card in c.gpus]
            if offering and offer.count < wl.spec.accelerators:
                self.report(
                    where,
                    f"{wl.name} asks for {wl.spec.accelerators} {card} per pod, but {offer.machine_type} on {cloud} "
                    f"(clusters {', '.join(offering)}) has {offer.count}",
                )

    def warnings(self, fleet: Fleet) -> tuple[str, ...]:
        """Placements no cluster can run, runners whose jobs cannot all run at once: allowed, but most likely a
        mistake."""
        offered = {card for clusters in self.spec.clusters.values() for c in clusters.values() for card in c.gpus}
        found = [
            str(self.doc.problem(("workloads", name), f"no cluster offers any of its cards ({', '.join(cards)})"))
            for name, cards in fleet.placements.items()
            if not set(cards) & offered
        ]
        for cluster, sweeps in fleet.sweeps.items():
            for workload, card, n, why in sweeps.left_out:
                found.append(
                    str(
                        self.doc.problem(
                            ("workloads", workload, "scale"),
                            f"{cluster} leaves out the point {n} on {card}: {why}",
                        )
                    )
                )
            where = fleet.clusters[cluster]
            if sweeps.points and where.checkpoint_claim is None:
                found.append(
                    str(
                        self.doc.problem(
                            ("clusters", where.cloud, cluster),
                            f"{cluster} runs sweep jobs without checkpoint_claim: a job restarted after a preemption "
                            "starts again from its first epoch",
                        )
                    )
                )
        for cluster, runners in fleet.runners.items():
            for r in runners:
                if not r.own_pool:
                    found.append(
                        str(
                            self.doc.problem(
                                ("runners", "clusters", cluster, r.pool.card, "own_pool"),
                                f"the {r.pool.card} runner's CI jobs run on the {r.pool.name} pool beside the "
                                "benchmarks (own_pool: false): a CI job may share a node with a benchmark that holds "
                                "credentials",
                            )
                        )
                    )
                room = r.pool.max_nodes * r.pool.units_per_node
                if r.concurrency * r.accelerators > room:
                    found.append(
                        str(
                            self.doc.problem(
                                ("runners", "clusters", cluster),
                                f"the {r.pool.card} runner takes {r.concurrency} jobs of {r.accelerators} card(s) at "
                                f"once, but its pool holds {room} at most (max_nodes {r.pool.max_nodes}): the others "
                                "wait, then fail after the runner's poll timeout; lower concurrency or raise max_nodes",
                            )
                        )
                    )
        return tuple(found)


def _sharing(settings: PoolSettings, offer: Offer | None) -> Sharing | None:
    """The pool's sharing, resolved: the pods per card of its time-slicing or of its MIG profile."""
    wanted = settings.sharing
    if wanted is None:
        return None
    if wanted.time_slicing is not None:
        return Sharing("time-slicing", wanted.time_slicing)
    assert wanted.mig is not None and offer is not None  # the checker refused a profile the offer lacks
    return Sharing("mig", offer.mig_profiles[wanted.mig], wanted.mig)


def _probe(settings: PoolSettings, defaults: ProbeDefaults, min_nodes: int, probe: Workload) -> Probe | None:
    """The pool's probe: on when the pool says so (``true``, or a schedule or threshold of its own), off with
    ``false``, else on exactly when the pool may scale to zero (a pool that keeps a node has nothing to scale up, and
    a probe costs a node start each run)."""
    own = settings.probe
    # a pool that gives its probe a schedule or threshold wants it, whatever its minimum
    wanted = (
        own.enabled if own.enabled is not None else (min_nodes == 0 or bool(own.schedule or own.scale_up_alert_after))
    )
    if not wanted:
        return None
    schedule = own.schedule or defaults.schedule
    threshold = own.scale_up_alert_after or defaults.scale_up_alert_after
    run = pod_contract.active_deadline_seconds(probe.spec.timeout_seconds)
    return Probe(schedule, threshold, duration_seconds(threshold), longest_gap_seconds(schedule) + run)


def _resolve(
    spec: FleetFile, catalogue: Catalogue, workloads: dict[str, Workload], probe: Workload, file: str
) -> Fleet:
    defaults = spec.defaults
    clusters: dict[str, Cluster] = {}
    for cloud in CLOUDS:
        facts = catalogue.clouds[cloud]  # type: ignore[index]
        for name, settings in spec.clusters.get(cloud, {}).items():  # type: ignore[call-overload]
            pools = []
            for card, pool in settings.gpus.items():
                acc = catalogue.accelerators[card]
                offer = acc.offers.get(cloud)  # type: ignore[call-overload]
                # A cloud whose autoscaler cannot scale a GPU pool up from zero gets min 1 unless the
                # policy sets min_nodes explicitly (an opt-in the plan warns about).
                floor = (
                    defaults.gpu_pool.min_nodes if facts.gpu_scale_from_zero else max(1, defaults.gpu_pool.min_nodes)
                )
                min_nodes = pool.min_nodes if pool.min_nodes is not None else floor
                pools.append(
                    GpuPool(
                        sharing=_sharing(pool, offer),
                        card=card,
                        accelerator=acc,
                        offer=offer,
                        machine_type=pool.machine_type or (offer.machine_type if offer else ""),
                        min_nodes=min_nodes,
                        max_nodes=pool.max_nodes if pool.max_nodes is not None else defaults.gpu_pool.max_nodes,
                        spot=pool.spot if pool.spot is not None else defaults.gpu_pool.spot,
                        cloud_facts=facts,
                        probe=_probe(pool, defaults.probe, min_nodes, probe),
                    )
                )
            system = settings.system_pool or defaults.system_pool
            clusters[name] = Cluster(
                name=name,
                cloud=cloud,
                region=settings.region,
                zone=settings.zone,
                central=settings.central,
                kubernetes_version=settings.kubernetes_version or defaults.kubernetes_version,
                system_pool=SystemPoolSpec(
                    system.machine_type or facts.system_machine_type, system.min_nodes, system.max_nodes
                ),
                pools=tuple(pools),
                facts=facts,
                description=settings.description,
                scale_down_after=defaults.gpu_pool.scale_down_after,
                checkpoint_claim=settings.checkpoint_claim,
                billing_account=settings.billing_account,
                registry=spec.registry,
            )

    def every_card_of(workload: str) -> tuple[str, ...]:
        kinds = workloads[workload].spec.accelerator_kinds
        return tuple(card for card, acc in catalogue.accelerators.items() if acc.resource in kinds)

    placements = {
        name: (every_card_of(name) if p.gpus == ["all"] else tuple(p.gpus))
        for name, p in spec.workloads.items()
        if p.enabled
    }
    schedules = {name: p.schedule for name, p in spec.workloads.items()}
    runners = {
        name: tuple(_runner(clusters[name].pool(card), spec.runners.gitlab_url, r) for card, r in cards.items())
        for name, cards in spec.runners.clusters.items()
    }
    for name, own in runners.items():
        clusters[name] = dataclasses.replace(clusters[name], ci_pools=tuple(r.pool for r in own if r.own_pool))
    scales = {name: tuple(p.scale) for name, p in spec.workloads.items() if p.enabled and p.scale is not None}
    sweeps = {name: plan_cluster(c.pools, scales, placements, workloads) for name, c in clusters.items()}
    sweeps = {name: s for name, s in sweeps.items() if s.points or s.left_out}
    for name, planned in sweeps.items():
        clusters[name] = dataclasses.replace(clusters[name], sweep_pools=planned.pools)
    # the sweep points hold the pools of the clusters before the sweep pools were added: same pools, same values
    return Fleet(
        file, clusters, placements, schedules, spec.monitoring, workloads, probe_workload=probe, runners=runners,
        scales=scales, sweeps=sweeps,
        billing_accounts={n: p.billing_account for n, p in spec.workloads.items() if p.billing_account},
        registry=spec.registry,
        queued={n: p.queue for n, p in spec.workloads.items() if p.enabled and p.queue},
    )  # fmt: skip


def _runner(pool: GpuPool, gitlab_url: str, settings: RunnerSettings) -> Runner:
    """A card's runner with its defaults: tags ``gpu-fleet``, the card, and its kind (``gpu``, ``tpu``, ...); its
    jobs on the card's CI pool (fleet/model/ci_pools.py) unless it opts out with ``own_pool: false``."""
    kind = pool.resource.rsplit("/", 1)[-1]
    tags = tuple(settings.tags) or ("gpu-fleet", pool.card, kind)
    jobs_pool = ci_pool(pool, settings.concurrency, settings.accelerators) if settings.own_pool else pool
    return Runner(
        jobs_pool, gitlab_url, tags, settings.concurrency, settings.accelerators, settings.cpu_request,
        settings.memory_request, settings.cpu_limit, settings.memory_limit, settings.own_pool,
    )  # fmt: skip


def load_fleet(path: Path | str = POLICY_FILE, workloads_dir: Path = WORKLOADS_DIR) -> Fleet:
    """Read, check and resolve a policy file; raises ``InputError`` listing every problem.

    The policy file's shape, the workload folders and the cross-key rules are all checked before
    anything is reported, so one run shows every problem that can be found.
    """
    doc = read_yaml(path)
    problems: list[Problem] = []
    spec: FleetFile | None = None
    workloads: dict[str, Workload] | None = None
    try:
        spec = validate_document(FleetFile, doc)
    except InputError as exc:
        problems.extend(exc.problems)
    try:
        workloads = load_workloads(workloads_dir)
    except InputError as exc:
        problems.extend(exc.problems)
    probe = load_probe_workload()
    if workloads and probe.name in workloads:
        problems.append(
            Problem(
                str(workloads[probe.name].folder / "workload.yaml"),
                1,
                "name",
                f"{probe.name!r} is the fleet's own pool probe (fleet/model/probe): give the workload another name",
            )
        )
    catalogue = load_catalogue()
    if spec is not None:
        checker = _Checker(doc, spec, catalogue, workloads or {})
        checker.check_clusters()
        version_warnings = checker.check_kubernetes_versions()
        checker.check_monitoring()
        checker.check_runners()
        checker.check_queues()
        if workloads is not None:
            checker.check_workloads()
            checker.check_queued_workloads()
        problems.extend(checker.problems)
        problems.extend(_image_problems(doc, spec.registry, [*(workloads or {}).values(), probe]))
    if problems or spec is None or workloads is None:
        raise InputError(problems)
    workloads = {name: _in_registry(wl, spec.registry) for name, wl in workloads.items()}
    fleet = _resolve(spec, catalogue, workloads, _in_registry(probe, spec.registry), doc.file)
    if spec.queues is not None:
        fleet = dataclasses.replace(fleet, dispatch=resolve(spec.queues, checker.offered(), catalogue))
    # every pod the fleet runs must land on its own pool and fit a node of it (fleet/model/placement.py)
    from fleet.model.placement import placement_problems  # placement builds on this module's Fleet

    misplaced = placement_problems(fleet, doc)
    if misplaced:
        raise InputError(misplaced)
    return dataclasses.replace(fleet, warnings=version_warnings + checker.warnings(fleet))


def _image_problems(doc: YamlDocument, registry: str, workloads: list[Workload]) -> list[Problem]:
    """A workload image outside the policy's ``registry``, located at its ``image:`` line in workload.yaml."""
    where = f"{doc.file}:{doc.line_of(('registry',))} registry" if "registry" in (doc.data or {}) else "the default"
    return [
        read_yaml(wl.folder / "workload.yaml").problem(("image",), outside_message(wl.spec.image, registry, where))
        for wl in workloads
        if outside_registry(wl.spec.image, registry)
    ]


def _in_registry(workload: Workload, registry: str) -> Workload:
    """``workload`` with its image as pods pull it: a name written relative to the registry gets it in front."""
    image = in_registry(workload.spec.image, registry)
    return dataclasses.replace(workload, spec=workload.spec.model_copy(update={"image": image}))


@lru_cache(maxsize=8)
def _load_fleet_cached(path: str, mtime_ns: int, workloads_dir: Path) -> Fleet:
    return load_fleet(path, workloads_dir)


def load_fleet_cached(path: Path | str = POLICY_FILE, workloads_dir: Path = WORKLOADS_DIR) -> Fleet:
    """``load_fleet`` once per file version: a plan of many stacks in one process reads the policy once."""
    try:
        mtime = Path(path).stat().st_mtime_ns
    except OSError:
        return load_fleet(path, workloads_dir)  # reports the unreadable file
    return _load_fleet_cached(str(path), mtime, workloads_dir)
