"""The fleet's core types: ``Fleet``, its ``Cluster``s and their ``GpuPool``s, and the jobs of workloads on them.

A ``Fleet`` is immutable, with every default applied; ``fleet.model.loader.load_fleet`` is the only way to build one
from a policy file (it checks the file first and reports every problem at once).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from fleet.model import pod_contract
from fleet.model.catalogue import Accelerator, CloudFacts, Offer, Taint
from fleet.model.ci_pools import CI_TAINT
from fleet.model.errors import InputError, Problem, did_you_mean
from fleet.model.fits import fits
from fleet.model.probes import Probe
from fleet.model.queued_sweeps import QueuedPoint, QueuedSweeps
from fleet.model.queues import Dispatch, QueuedJob, card_affinity
from fleet.model.registry import DEFAULT_REGISTRY
from fleet.model.runners import Runner
from fleet.model.sharing import DEVICE_PLUGIN_CONFIG_LABEL, SHARING_LABEL, Sharing
from fleet.model.spec_schema import Monitoring
from fleet.model.sweeps import CARDS_PER_NODE_LABEL, SWEEP_TAINT, ClusterSweeps, SweepPoint
from fleet.model.workloads import Workload

GPU_LABEL = "gpu"


# The node labels that set a sweep pool (its size) or a CI pool apart from the card's own pool.
POOL_KIND_LABELS = (CARDS_PER_NODE_LABEL, pod_contract.CI_LABEL)


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

    def fits(self, accelerators: int) -> bool:
        """A pod asking for ``accelerators`` cards fits this pool (fleet/model/fits.py); an existing cluster's
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
    # the account its GPU time is billed to, unless a workload names its own (policy: billing_account;
    # fleet/model/billing.py)
    billing_account: str = "default"
    # where its pods pull the fleet's own images and the charts' images from (policy: registry)
    registry: str = DEFAULT_REGISTRY
    # the pools of the cards' GitLab CI jobs, one per card with a runner of its own pool (fleet/model/ci_pools.py)
    ci_pools: tuple[GpuPool, ...] = ()
    # what an existing cluster's site already runs, which the fleet does not install (policy: site_provides)
    site_provides: frozenset[str] = frozenset()

    @property
    def all_pools(self) -> tuple[GpuPool, ...]:
        """The card pools, then the sweep pools, then the CI pools: every GPU node pool the cluster has (the cluster
        component's ``node_pools`` and the stack's ``node_pools`` output, by ``GpuPool.key``)."""
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


def pool_resource_name(cluster: Cluster, pool: GpuPool) -> str:
    """The resource name of ``pool``'s node pool in ``cluster``, ``<cluster>-<pool>``: each cloud component's pool,
    the stack's ``node_pools`` output and the pack's lookups use it."""
    return f"{cluster.name}-{pool.name}"


@dataclass(frozen=True)
class WorkloadJob:
    """One workload's Job (a CronJob when it has a ``schedule``) on one pool of a cluster: a policy's benchmark, a
    pool's probe, a queued Job where a worker runs it, or a sweep point's pods."""

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
    # Sweeping workloads and their accelerator counts (policy file: workloads.<name>.scale), and each cluster's sweeps
    sweep_counts: dict[str, tuple[int, ...]] = field(default_factory=dict)
    sweeps: dict[str, ClusterSweeps] = field(default_factory=dict)
    # workloads billed to an account of their own instead of their cluster's (policy: workloads.<name>.billing_account;
    # fleet/model/billing.py)
    billing_accounts: dict[str, str] = field(default_factory=dict)
    # the fleet-wide queues dispatched by MultiKueue (policy: queues); None: the fleet has none
    dispatch: Dispatch | None = None
    # the registry every image is pulled from and pushed to (policy: registry); workload images are resolved in it
    registry: str = DEFAULT_REGISTRY
    # workloads that name a queue, and its name (policy: workloads.<name>.queue): dispatched, not run per cluster
    queued: dict[str, str] = field(default_factory=dict)
    # the sweep points of the sweeping workloads among them, what each worker may hold (fleet/model/queued_sweeps.py)
    queued_sweeps: QueuedSweeps = field(default_factory=QueuedSweeps)

    @property
    def central(self) -> Cluster:
        """The cluster holding the central Prometheus."""
        return next(c for c in self.clusters.values() if c.central)

    def cluster(self, name: str, given_as: str = "clusters") -> Cluster:
        """The cluster called ``name``; an ``InputError`` naming the nearest and the known ones if there is none
        (``given_as``: where the name came from, such as the command line's ``--stack``)."""
        try:
            return self.clusters[name]
        except KeyError:
            raise InputError([self.no_cluster(name, given_as)]) from None

    def no_cluster(self, name: str, given_as: str) -> Problem:
        """The problem of a cluster name the policy does not have: the nearest one and every one."""
        near = did_you_mean(name, self.clusters)
        known = ", ".join(self.clusters)
        return Problem(self.file, 1, given_as, f"no cluster named {name!r} in the policy{near}; its clusters: {known}")

    def benchmarks(self, cluster: Cluster) -> list[WorkloadJob]:
        """The (workload, card) pairs the policy places on ``cluster``: offered by it and allowed for the workload.
        A workload that names a queue has none: its Jobs are on the manager (``queued_jobs``)."""
        out = []
        for workload, cards in self.placements.items():
            if workload in self.sweep_counts or workload in self.queued:  # sweep_points, queued_jobs instead
                continue
            wl = self.workloads[workload]
            for pool in cluster.pools:
                # `all` may name a card whose pool the pod does not fit: not a pair (an explicit card like that is
                # refused by the checker)
                if pool.card in cards and pool.fits(wl.spec.accelerators):
                    out.append(WorkloadJob(wl, pool, self.schedules[workload]))
        return out

    def queued_jobs(self) -> list[QueuedJob]:
        """The Jobs of the workloads that name a queue, declared on the manager: one per card of the queue the workload
        allows and some worker's pool of it can run, in the queue's card order."""
        if self.dispatch is None:
            return []
        queues = {q.name: q for q in self.dispatch.queues}
        out = []
        for workload, queue_name in self.queued.items():
            if workload in self.sweep_counts:  # its points are TrainJobs: queued_points
                continue
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
            if p.card == job.card and p.fits(job.workload.spec.accelerators)
        )

    def queued_affinity(self, job: QueuedJob) -> dict[str, object]:
        """The node affinity that keeps ``job`` on its card on every worker (``card_affinity``)."""
        pools = tuple(p for name in job.queue.clusters for p in job.queue.pools(self.clusters[name]))
        return card_affinity(job.card, pools)

    def dispatched_to(self, cluster: Cluster) -> list[WorkloadJob]:
        """The queued Jobs a worker may be given, as benchmarks on its own pools: what must be ready for them there
        (ConfigMaps, credentials, egress, the PodMonitor) and what its nodes must hold."""
        return [
            WorkloadJob(job.workload, pool, None)
            for job in self.queued_jobs()
            for pool in self.queued_pools(job)
            if pool in cluster.pools and cluster.name in job.queue.clusters
        ]

    def queued_points(self) -> tuple[QueuedPoint, ...]:
        """The sweep points of the workloads that name a queue, declared once on the manager as TrainJobs."""
        return self.queued_sweeps.points

    def queued_points_on(self, cluster: Cluster) -> tuple[tuple[QueuedPoint, GpuPool], ...]:
        """The queued sweep points a worker may be given, each with the pool of the worker that holds it."""
        return tuple(self.queued_sweeps.held.get(cluster.name, ()))

    def queued_point_affinity(self, point: QueuedPoint) -> dict[str, object]:
        """The node affinity keeping a queued sweep point on its card and the pools that hold it (``card_affinity``)."""
        pools = tuple(p for name in point.queue.clusters for p in point.queue.pools(self.clusters[name]))
        return card_affinity(point.card, pools, self.queued_sweeps.pools_of(point))

    def probes(self, cluster: Cluster) -> list[WorkloadJob]:
        """The probe of each probed pool of ``cluster``: the probe workload on the pool, a CronJob on its schedule."""
        if self.probe_workload is None:
            return []
        return [WorkloadJob(self.probe_workload, p, p.probe.schedule) for p in cluster.pools if p.probe is not None]

    def sweep_points(self, cluster: Cluster) -> tuple[SweepPoint, ...]:
        """The distributed jobs of the scaling sweeps on ``cluster``, one per point and card."""
        return self.sweeps[cluster.name].points if cluster.name in self.sweeps else ()

    def runners_of(self, cluster: Cluster) -> tuple[Runner, ...]:
        """The GitLab CI runners of ``cluster`` (policy file: runners.clusters)."""
        return self.runners.get(cluster.name, ())

    def workload_jobs(self, cluster: Cluster) -> list[WorkloadJob]:
        """Every Job or CronJob of workloads on ``cluster``: the policy's benchmarks, then the pool probes."""
        return self.benchmarks(cluster) + self.probes(cluster)

    @property
    def deployed_workloads(self) -> dict[str, Workload]:
        """Every workload that runs in the fleet's pods: the policy's workloads, and the probe when a pool is probed
        (their images are copied, their metrics federated, their mtail programs checked)."""
        probed = self.probe_workload is not None and any(p.probe for c in self.clusters.values() for p in c.pools)
        return {**self.workloads, **({self.probe_workload.name: self.probe_workload} if probed else {})}  # type: ignore[union-attr]
