"""The benchmark queue: the benchmark and probe Jobs of one card on one cluster wait their turn in the cluster's Kueue.

Without it every (workload, card) Job of a cluster starts at once: pods that wait for a card another Job holds stay
Pending, count against the benchmark namespace's ResourceQuota (which then refuses the pods of other cards' Jobs), and
their ``activeDeadlineSeconds`` runs while they wait. With it each Job carries the LocalQueue label
(``pod_contract.BENCHMARK_QUEUE``); Kueue's Job webhook creates it suspended, so it has no pod and holds no quota, and
Kueue resumes it when its card pool's flavor has room: the Jobs of a card run one after another, or as many at once as
the pool holds (components/kubernetes/benchmark_queue.py gives the upstream facts).

Each card pool a Job runs on is a flavor of the cluster's benchmark ClusterQueue, with the pool's node selector as its
node labels and what the pool holds at most as its quota (``max_nodes`` machines of ``units_per_node``: slices for a
shared card, ``queues.pool_capacity``), the same count as the namespace's quota and the fleet's queues use.
"""

from __future__ import annotations

from fleet.model.core.clusters import Cluster
from fleet.model.core.fleet import Fleet
from fleet.model.core.jobs import WorkloadJob
from fleet.model.core.pools import GpuPool
from fleet.model.queues.dispatch import pool_capacity


def queued_pools(fleet: Fleet, cluster: Cluster) -> list[GpuPool]:
    """The card pools the benchmark and probe Jobs of ``cluster`` run on, each once, in the cluster's pool order: the
    flavors of its benchmark queue (none: the cluster runs no benchmark and has no benchmark queue)."""
    used = {job.pool.name for job in fleet.workload_jobs(cluster)}
    return [pool for pool in cluster.pools if pool.name in used]


def flavor_quota(pool: GpuPool) -> int:
    """A card pool's quota in the benchmark queue: what it holds at most of its resource."""
    return pool_capacity(pool)


def at_once(job: WorkloadJob) -> int:
    """How many Jobs like ``job`` the queue runs at once on its pool: the pool's quota over the cards each asks (at
    least one: a Job whose cards the pool cannot hold is no placement, ``GpuPool.fits``)."""
    return max(1, flavor_quota(job.pool) // job.workload.spec.accelerators)


def covered_resources(pools: list[GpuPool]) -> list[str]:
    """The accelerator resources the queue's flavors cover, each once, sorted (one resource group covers them all, so
    every flavor lists every one: Kueue wants each flavor to list the group's resources)."""
    return sorted({pool.resource for pool in pools})
