"""Sweep points of a workload that names a queue: each point one TrainJob, declared once on the queues' manager and
dispatched by Kueue's MultiKueue to a worker of the queue that can hold it.

A point's **shape** (nodes and cards per node) is fixed on the manager, where its TrainJob and TrainingRuntime are
declared, so it is the shape the queue's most preferred worker would give it (``fleet/model/sweeps/`` ``place``:
the fewest nodes, on the smallest machine of the card that holds them). A worker **holds** the point when one
machine of the card it can build has room for the cards per node (exactly that many for a card whose pods take whole
machines, TPU VMs) and its card pool's ``max_nodes`` allows the nodes: on its own card pool when that machine is the
pool's, else on a sweep pool ``gpu-<card>-x<count>`` of that machine, which the worker builds for it (only GKE and
EKS build sweep pools: ``CloudRules.sweep_pools``; elsewhere the catalogue lists no other machine). A worker of the
queue that cannot hold a point never admits it (its ClusterQueue has no flavor its pods match), and the dispatcher
moves on; a point no worker of its queue can hold is refused with its line.

Kueue 0.19.2 dispatches TrainJobs (pkg/controller/jobs/trainjob/trainjob_multikueue_adapter.go): the manager's
TrainJob is copied to the worker with its name, namespace, labels and spec, ``managedBy`` cleared, so the
TrainingRuntime it names must exist under the same name in the same namespace on every worker that may take it
(site/content/en/docs/tasks/run/multikueue/trainjob.md: "TrainingRuntime: Must be installed in the corresponding
namespaces on the worker clusters"), and on the manager, whose Kueue reads it to count the job's pods.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from fleet.model.core.catalogue import Machine
from fleet.model.core.clouds import sweep_pool_clouds
from fleet.model.core.clusters import Cluster
from fleet.model.core.errors import InputError, Problem
from fleet.model.core.fleet import Fleet
from fleet.model.core.jobs import Dispatch, Queue, QueuedPoint, QueuedSweeps
from fleet.model.core.pools import GpuPool
from fleet.model.core.workloads import Workload
from fleet.model.core.yaml_source import YamlDocument
from fleet.model.queues.dispatch import pool_capacity, quota
from fleet.model.sweeps.plan import place, sweep_pool

# The label of a queued point's TrainingRuntime naming its queue, on the manager and the workers (its TrainJob carries
# Kueue's own kueue.x-k8s.io/queue-name, which a runtime does not need)
QUEUE_LABEL = "gpu-fleet.io/queue"
# and the point's total accelerator count, which tells the points of one workload and card apart
POINT_LABEL = "gpu-fleet.io/sweep-accelerators"


def machines(pool: GpuPool) -> list[Machine]:
    """The machines of the card a cluster may run: its pool's own, then the catalogue's other sizes of the card on the
    cluster's cloud (``sweeps.plan_cluster`` uses the same list)."""
    own = Machine(machine_type=pool.machine_type, count=pool.accelerators_per_node, source="pool")
    return [own, *(m for m in (pool.offer.machines if pool.offer else []) if m.count != own.count)]


def shape(pool: GpuPool, accelerators: int) -> tuple[int, int] | None:
    """(nodes, cards per node) of a point of ``accelerators`` cards on the cluster of ``pool``; None if it cannot."""
    own = machines(pool)[0]
    placed = place(accelerators, machines(pool), pool.accelerator.whole_host, pool.max_nodes)
    if placed is None or (pool.sharing and placed.machine.machine_type == own.machine_type):
        return None
    return placed.nodes, accelerators // placed.nodes


def holding_pool(pool: GpuPool, nodes: int, per_node: int) -> GpuPool | None:
    """The pool of ``pool``'s cluster that holds ``nodes`` nodes of ``per_node`` cards: the card pool itself when its
    machine is the smallest with room, else a sweep pool of that machine (sized later); None if none can."""
    whole = pool.accelerator.whole_host
    fitting = [m for m in machines(pool) if (m.count == per_node if whole else m.count >= per_node)]
    if not fitting or nodes > pool.max_nodes:
        return None
    machine = min(fitting, key=lambda m: m.count)
    if machine.machine_type == pool.machine_type and machine.count == pool.accelerators_per_node:
        return None if pool.sharing else pool
    return sweep_pool(pool, machine)


def unheld_reason(accelerators: int, pools: list[tuple[str, GpuPool]]) -> str:
    """Why no worker holds a point: each worker's machines of the card and its max_nodes."""
    parts = []
    for worker, pool in pools:
        sizes = "/".join(str(m.count) for m in sorted(machines(pool), key=lambda m: m.count))
        note = "" if len(machines(pool)) > 1 else " and no sweep pool of another machine"
        shared = f", its pool is shared ({pool.sharing.name})" if pool.sharing else ""
        parts.append(f"{worker}: machines of {sizes} cards, max_nodes {pool.max_nodes}{shared}{note}")
    whole = " (a job takes whole machines)" if pools[0][1].accelerator.whole_host else ""
    return f"no worker of the queue holds {accelerators}{whole}; " + "; ".join(parts)


def unheld_problems(doc: YamlDocument, planned: QueuedSweeps, scales: Mapping[str, tuple[int, ...]]) -> list[Problem]:
    """A located problem per queued sweep point that no worker of its queue can hold, with the fix."""
    return [
        doc.problem(
            ("workloads", name, "scale", scales[name].index(n)),
            f"{name}'s point {n} on {card} cannot run through its queue: {why}. Remove the point, add a cluster whose "
            f"machines hold it to the queue ({', '.join(sweep_pool_clouds())} build sweep pools of the catalogue's "
            "larger machines), raise "
            "max_nodes, or remove queue to sweep per cluster",
        )
        for name, card, n, why in planned.unheld
    ]


def plan_queued_sweeps(
    dispatch: Dispatch | None,
    clusters: Mapping[str, Cluster],
    queued: Mapping[str, str],
    sweep_counts: Mapping[str, tuple[int, ...]],
    placements: Mapping[str, tuple[str, ...]],
    workloads: Mapping[str, Workload],
) -> QueuedSweeps:
    """Every sweep point of the workloads that name a queue: per card of the queue the workload allows, per count of
    its ``scale``, the shape its queue's first worker gives it, and the workers (and pools) that hold that shape."""
    if dispatch is None:
        return QueuedSweeps()
    queues = {q.name: q for q in dispatch.queues}
    points: list[QueuedPoint] = []
    held: dict[str, list[tuple[QueuedPoint, GpuPool]]] = {}
    unheld: list[tuple[str, str, int, str]] = []
    passed_over: list[tuple[str, str, str, int]] = []
    needed: dict[tuple[str, str], int] = {}
    built: dict[tuple[str, str], GpuPool] = {}
    for name, queue_name in queued.items():
        if name not in sweep_counts:
            continue
        queue, workload = queues[queue_name], workloads[name]
        for card in queue.cards:
            if card not in placements[name]:
                continue
            pools = [
                (worker, p)
                for worker in queue.clusters
                for p in clusters[worker].pools
                if p.card == card and p.resource in workload.spec.accelerator_kinds
            ]
            if not pools:
                continue
            for n in sweep_counts[name]:
                found = next((s for _, p in pools if (s := shape(p, n)) is not None), None)
                if found is None:
                    unheld.append((name, card, n, unheld_reason(n, pools)))
                    continue
                nodes, per_node = found
                point = QueuedPoint(workload, queue, card, n, nodes)
                points.append(point)
                for worker, pool in pools:
                    target = holding_pool(pool, nodes, per_node)
                    if target is None:
                        passed_over.append((worker, name, card, n))
                        continue
                    if target.sweep:
                        key = (worker, target.name)
                        needed[key] = max(needed.get(key, 0), nodes)
                        target = built.setdefault(key, target)
                    held.setdefault(worker, []).append((point, target))
    sized = {key: dataclasses.replace(p, max_nodes=needed[key]) for key, p in built.items()}
    resized = {
        worker: tuple((pt, sized[(worker, p.name)] if p.sweep else p) for pt, p in pairs)
        for worker, pairs in held.items()
    }
    sweep_pools: dict[str, list[GpuPool]] = {}
    for (worker, _), pool in sized.items():
        sweep_pools.setdefault(worker, []).append(pool)
    return QueuedSweeps(
        tuple(points),
        resized,
        {w: tuple(ps) for w, ps in sweep_pools.items()},
        tuple(unheld),
        tuple(passed_over),
    )


def merge_sweep_pools(own: tuple[GpuPool, ...], queued: tuple[GpuPool, ...]) -> dict[str, GpuPool]:
    """A cluster's sweep pools for its own sweeps and for the queued points it may hold, each once by name, sized for
    the larger of the two."""
    merged: dict[str, GpuPool] = {}
    for pool in (*own, *queued):
        have = merged.get(pool.name)
        merged[pool.name] = pool if have is None or pool.max_nodes > have.max_nodes else have
    return merged


def with_queued_sweeps(fleet: Fleet, doc: YamlDocument) -> Fleet:
    """``fleet`` with its queued sweep points planned (``plan_queued_sweeps``): each worker's sweep pools now also hold
    the points it may be given, and its own sweep points name the pools as resized. A point no worker of its queue
    holds raises ``InputError``, located in ``doc``."""
    planned = plan_queued_sweeps(
        fleet.dispatch, fleet.clusters, fleet.queued, fleet.sweep_counts, fleet.placements, fleet.workloads
    )
    unheld = unheld_problems(doc, planned, fleet.sweep_counts)
    if unheld:
        raise InputError(unheld)
    if not planned.points:
        return fleet
    clusters = dict(fleet.clusters)
    sweeps = dict(fleet.sweeps)
    held = dict(planned.held)
    for name, queued_pools in planned.pools.items():
        merged = merge_sweep_pools(clusters[name].sweep_pools, queued_pools)
        clusters[name] = dataclasses.replace(clusters[name], sweep_pools=tuple(merged.values()))
        if name in sweeps:
            points = tuple(
                dataclasses.replace(pt, pool=merged[pt.pool.name]) if pt.pool.sweep else pt
                for pt in sweeps[name].points
            )
            sweeps[name] = dataclasses.replace(sweeps[name], points=points, pools=tuple(merged.values()))
        held[name] = tuple((pt, merged[p.name] if p.sweep else p) for pt, p in held.get(name, ()))
    planned = dataclasses.replace(planned, held=held)
    return dataclasses.replace(fleet, clusters=clusters, sweeps=sweeps, queued_sweeps=planned)


def queue_quota(fleet: Fleet, queue: Queue) -> int:
    """The manager's quota of ``queue``: what its workers' pools of its cards hold at most (``queues.quota``), and the
    sweep pools they build for its sweep points."""
    swept = sum(
        pool_capacity(p) for name in queue.clusters for p in fleet.queued_sweeps.sweep_pools_of(queue.name, name)
    )
    return quota(queue, fleet.clusters) + swept


def manager_watches_trainjobs(fleet: Fleet) -> bool:
    """Whether the queues' manager integrates TrainJobs, and so watches them on every worker: the fleet has queued
    sweep points, or the manager sweeps its own cards. Kueue 0.19.2 opens a watch on each worker for every kind its
    manager integrates that has a MultiKueue adapter, whatever it dispatches (pkg/controller/admissionchecks/
    multikueue/multikueuecluster.go: a watch that fails, forbidden or of an unknown kind, keeps the worker from
    becoming Active; found by the real tier on a fleet whose manager ran a sweep of its own)."""
    if fleet.dispatch is None:
        return False
    return bool(fleet.queued_points()) or bool(fleet.sweep_points(fleet.cluster(fleet.dispatch.manager)))


def runs_trainer(fleet: Fleet, cluster: Cluster) -> bool:
    """Whether ``cluster`` runs Kubeflow Trainer: it sweeps, or it takes part in queues whose manager watches TrainJobs
    on every worker (``manager_watches_trainjobs``: the workers need Trainer's kinds to be watched)."""
    role = fleet.dispatch.role(cluster.name) if fleet.dispatch else None
    return bool(fleet.sweep_points(cluster)) or (role is not None and manager_watches_trainjobs(fleet))
