"""What the fleet runs on its pools, resolved: a workload's Job on a pool, the points of a scaling sweep, a card's CI
runner, the fleet-wide queues and the Jobs and sweep points dispatched through them. The features resolve the policy
into these (fleet/model/sweeps/, runners/, queues/); the components and the policy pack read them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from fleet.model.core.clusters import Cluster
from fleet.model.core.pools import GpuPool
from fleet.model.core.workloads import Workload


@dataclass(frozen=True)
class WorkloadJob:
    """One workload's Job (a CronJob when it has a ``schedule``) on one pool of a cluster: a policy's benchmark, a
    pool's probe, a queued Job where a worker runs it, or a sweep point's pods."""

    workload: Workload
    pool: GpuPool
    schedule: str | None


@dataclass(frozen=True)
class SweepPoint:
    """One distributed job of a sweep: ``accelerators`` cards of ``pool`` over ``nodes`` nodes."""

    workload: Workload
    pool: GpuPool
    accelerators: int
    nodes: int

    @property
    def per_node(self) -> int:
        """Cards each node (each worker process) takes."""
        return self.accelerators // self.nodes

    @property
    def card(self) -> str:
        """The card the point runs on."""
        return self.pool.card


@dataclass(frozen=True)
class ClusterSweeps:
    """A cluster's sweep points, the sweep pools they need, and the points left out (workload, card, count, why)."""

    points: tuple[SweepPoint, ...] = ()
    pools: tuple[GpuPool, ...] = ()
    left_out: tuple[tuple[str, str, int, str], ...] = ()


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
class Queue:
    """One resolved queue: its workers in order of preference, its cards in order, and the resource they count."""

    name: str
    clusters: tuple[str, ...]
    cards: tuple[str, ...]
    resource: str

    @property
    def cluster_queue(self) -> str:
        """Its ClusterQueue's name (and on the manager its AdmissionCheck's and MultiKueueConfig's): ``queue-<name>``;
        Kueue's metrics label it ``cluster_queue``."""
        return f"queue-{self.name}"

    def pools(self, cluster: Cluster) -> tuple[GpuPool, ...]:
        """The pools of ``cluster`` that serve this queue, in the queue's card order."""
        return tuple(p for card in self.cards for p in cluster.pools if p.card == card)


@dataclass(frozen=True)
class Dispatch:
    """The fleet's queues: the manager, the spill-over mode, and the queues in the file's order."""

    manager: str
    spill: str
    queues: tuple[Queue, ...]

    @property
    def workers(self) -> tuple[str, ...]:
        """Every worker cluster, each once, in the order the queues first name them."""
        return tuple(dict.fromkeys(c for q in self.queues for c in q.clusters))

    def queues_of(self, cluster: str) -> tuple[Queue, ...]:
        """The queues ``cluster`` works for."""
        return tuple(q for q in self.queues if cluster in q.clusters)

    def role(self, cluster: str) -> str | None:
        """``manager``, ``worker`` or None (the cluster takes no part in the queues)."""
        if cluster == self.manager:
            return "manager"
        return "worker" if cluster in self.workers else None


@dataclass(frozen=True)
class QueuedJob:
    """One Job of a workload that names a queue: declared on the manager for one card, run by a worker's pool of it."""

    workload: Workload
    queue: Queue
    card: str

    @property
    def name(self) -> str:
        """``<workload>/<card>``, as the plan and messages name it."""
        return f"{self.workload.name}/{self.card}"


@dataclass(frozen=True)
class QueuedPoint:
    """One sweep point of a workload that names a queue: ``accelerators`` cards of ``card`` over ``nodes`` nodes."""

    workload: Workload
    queue: Queue
    card: str
    accelerators: int
    nodes: int

    @property
    def per_node(self) -> int:
        """Cards each node (each worker process) takes."""
        return self.accelerators // self.nodes

    @property
    def name(self) -> str:
        """``<workload>/<card>/n<accelerators>``, as the plan and messages name it."""
        return f"{self.workload.name}/{self.card}/n{self.accelerators}"


@dataclass(frozen=True)
class QueuedSweeps:
    """The fleet's queued sweep points, what each worker may hold of them (and on which of its pools), the sweep pools
    the workers build for them, and the points no worker can hold (workload, card, count, why)."""

    points: tuple[QueuedPoint, ...] = ()
    held: Mapping[str, tuple[tuple[QueuedPoint, GpuPool], ...]] = field(default_factory=dict)
    pools: Mapping[str, tuple[GpuPool, ...]] = field(default_factory=dict)
    unheld: tuple[tuple[str, str, int, str], ...] = ()
    # (worker, workload, card, count): a worker of the queue offering the card that cannot hold the point
    passed_over: tuple[tuple[str, str, str, int], ...] = ()

    def pools_of(self, point: QueuedPoint) -> tuple[GpuPool, ...]:
        """The pool that holds ``point`` on each worker of its queue that can, in the queue's order."""
        return tuple(p for name in point.queue.clusters for pt, p in self.held.get(name, ()) if pt == point)

    def sweep_pools_of(self, queue: str, cluster: str) -> tuple[GpuPool, ...]:
        """The sweep pools ``cluster`` builds for the sweep points of ``queue``, each once."""
        seen: dict[str, GpuPool] = {}
        for point, pool in self.held.get(cluster, ()):
            if point.queue.name == queue and pool.sweep:
                seen.setdefault(pool.name, pool)
        return tuple(seen.values())
