"""Scaling sweeps: where each point of a workload's ``scale`` runs on a cluster, and the pools that takes.

A point is a total accelerator count for one distributed job. It runs on the fewest nodes: on one node of the
smallest machine of the card that holds it (the catalogue's ``machines`` besides the pool's own), or else on nodes of
the largest machine, all cards of each. A card whose pods take every chip of their machine (``whole_host``: TPU VMs)
runs a point only on a machine of exactly that size. A point needing more nodes than the card's pool may have
(``max_nodes``) is left out on that cluster, with a warning.

Points on the pool's own machine run on the card's pool; the others on a *sweep pool* per machine size,
``gpu-<card>-x<count>``, labelled with its cards per node and tainted so that only sweep jobs land there.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from fleet.model.core.catalogue import Machine
from fleet.model.core.jobs import ClusterSweeps, SweepPoint
from fleet.model.core.pools import GpuPool
from fleet.model.core.workloads import Workload

# the largest sweep point: 128 accelerators as in the original study, with room
MAX_SWEEP_ACCELERATORS = 1024


@dataclass(frozen=True)
class Placed:
    """Where one point runs: the machine and how many of them."""

    machine: Machine
    nodes: int


def place(accelerators: int, sizes: list[Machine], whole_host: bool, max_nodes: int) -> Placed | None:
    """The machine and node count for a job of ``accelerators`` cards, or None when none can run it."""
    fitting = [m for m in sizes if (m.count == accelerators if whole_host else m.count >= accelerators)]
    if fitting:
        return Placed(min(fitting, key=lambda m: m.count), 1)
    largest = max(sizes, key=lambda m: m.count)
    nodes, rest = divmod(accelerators, largest.count)
    if whole_host or rest or nodes > max_nodes:
        return None
    return Placed(largest, nodes)


def plan_cluster(
    pools: tuple[GpuPool, ...],
    sweep_counts: Mapping[str, tuple[int, ...]],
    placements: Mapping[str, tuple[str, ...]],
    workloads: Mapping[str, Workload],
) -> ClusterSweeps:
    """Every sweep point of every sweeping workload allowed on one of ``pools`` (a cluster's card pools)."""
    points: list[SweepPoint] = []
    sweep_pools: dict[str, GpuPool] = {}
    needed_nodes: dict[str, int] = {}
    left_out: list[tuple[str, str, int, str]] = []
    for name, scale in sweep_counts.items():
        workload = workloads[name]
        for pool in pools:
            if pool.card not in placements[name] or pool.resource not in workload.spec.accelerator_kinds:
                continue
            own = Machine(machine_type=pool.machine_type, count=pool.accelerators_per_node, source="pool")
            sizes = [own, *(m for m in (pool.offer.machines if pool.offer else []) if m.count != own.count)]
            whole_host = pool.accelerator.whole_host
            for n in scale:
                placed = place(n, sizes, whole_host, pool.max_nodes)
                if placed is not None and pool.sharing and placed.machine.machine_type == own.machine_type:
                    left_out.append((name, pool.card, n, f"the {pool.card} pool is shared ({pool.sharing.name})"))
                    continue
                if placed is None:
                    counts = "/".join(str(m.count) for m in sorted(sizes, key=lambda m: m.count))
                    largest = max(m.count for m in sizes)
                    if whole_host:
                        rule = "a job takes whole machines"
                    elif n % largest:
                        rule = f"not a whole number of {largest}-card machines"
                    else:
                        rule = f"{n // largest} nodes, above max_nodes {pool.max_nodes}"
                    left_out.append((name, pool.card, n, f"machines of {counts} cards, {rule}"))
                    continue
                target = pool
                if placed.machine.machine_type != own.machine_type:
                    key = f"{pool.card}/{placed.machine.count}"
                    needed_nodes[key] = max(needed_nodes.get(key, 0), placed.nodes)
                    target = sweep_pools.setdefault(key, sweep_pool(pool, placed.machine))
                points.append(SweepPoint(workload, target, n, placed.nodes))
    sized = {key: dataclasses.replace(p, max_nodes=needed_nodes[key]) for key, p in sweep_pools.items()}
    resized = tuple(
        dataclasses.replace(pt, pool=sized[f"{pt.card}/{pt.pool.accelerators_per_node}"]) if pt.pool.sweep else pt
        for pt in points
    )
    return ClusterSweeps(resized, tuple(sized.values()), tuple(left_out))


def sweep_pool(pool: GpuPool, machine: Machine) -> GpuPool:
    """The sweep pool of ``pool``'s card on ``machine``: from zero, never probed, the card pool's spot setting."""
    return dataclasses.replace(
        pool, machine_type=machine.machine_type, count=machine.count, sweep=True, min_nodes=0, probe=None, sharing=None
    )
