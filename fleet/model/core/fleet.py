"""The fleet: its clusters, the workloads placed on them and what each feature resolved of the policy.

A ``Fleet`` is immutable, with every default applied; ``fleet.model.loader.load_fleet`` is the only way to build one
from a policy file (it checks the file first and reports every problem at once).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fleet.model.core.clusters import Cluster
from fleet.model.core.errors import InputError, Problem, did_you_mean
from fleet.model.core.jobs import (
    ClusterSweeps,
    Dispatch,
    QueuedJob,
    QueuedPoint,
    QueuedSweeps,
    Runner,
    SweepPoint,
    WorkloadJob,
)
from fleet.model.core.monitoring import Monitoring
from fleet.model.core.pools import GpuPool, card_affinity
from fleet.model.core.registry import DEFAULT_REGISTRY
from fleet.model.core.workloads import Workload


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
    # The pool probe (fleet/model/probes/probe), run on every probed pool; None only in fleets built by hand.
    probe_workload: Workload | None = field(default=None, repr=False)
    # The GitLab CI runners of each cluster (policy file: runners)
    runners: dict[str, tuple[Runner, ...]] = field(default_factory=dict)
    # Sweeping workloads and their accelerator counts (policy file: workloads.<name>.scale), and each cluster's sweeps
    sweep_counts: dict[str, tuple[int, ...]] = field(default_factory=dict)
    sweeps: dict[str, ClusterSweeps] = field(default_factory=dict)
    # workloads billed to an account of their own instead of their cluster's (policy: workloads.<name>.billing_account;
    # fleet/model/billing/accounts.py)
    billing_accounts: dict[str, str] = field(default_factory=dict)
    # the fleet-wide queues dispatched by MultiKueue (policy: queues); None: the fleet has none
    dispatch: Dispatch | None = None
    # the registry every image is pulled from and pushed to (policy: registry); workload images are resolved in it
    registry: str = DEFAULT_REGISTRY
    # workloads that name a queue, and its name (policy: workloads.<name>.queue): dispatched, not run per cluster
    queued: dict[str, str] = field(default_factory=dict)
    # the sweep points of the sweeping workloads among them, what each worker may hold
    # (fleet/model/queues/queued_sweeps.py)
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
