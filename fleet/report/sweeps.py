"""The sweeps section: per sweeping workload and card, time per epoch against the job's accelerator count.

Every worker of a sweep job exports two counters (the workload's ``distributed.epoch_seconds`` and ``epochs``),
labelled with the job's size (``accelerators``), the worker and the JobSet restart attempt; the PodMonitor adds the
card, cluster and cloud. At the window's end the report takes each series' highest value in the window (a counter of
one pod only grows), sums a worker's attempts, and for each (cluster, card, accelerators):

* time per epoch: the slowest worker's seconds over its epochs (the workers step together, the slowest sets the pace);
* speed-up: the smallest point's time per epoch over this point's; parallel efficiency: the speed-up over the ratio
  of accelerator counts (1 is linear scaling);
* restarts: the highest restart attempt seen (0: the job never restarted);
* cost per epoch: time per epoch x the machine's hourly price x the job's nodes (the sweep point's machine and
  node count from the policy, fleet/model/sweeps/; spot or on-demand as its pool).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fleet.model.core.fleet import Fleet
from fleet.model.core.workloads import Workload
from fleet.report.costs import PriceEntry, PriceTable
from fleet.report.queries import Window, selector

POINT = ("cluster", "cloud", "gpu", "accelerators")
# per pod too: a point run again in the window (a Kueue re-admission keeps the attempt) is another pod, added, not maxed
BY = "cluster, cloud, gpu, accelerators, worker, attempt, namespace, pod"


@dataclass(frozen=True)
class SweepRow:
    """One sweep point's measurements (``machine``, ``nodes`` and ``price`` None where the policy has no such point)."""

    cluster: str
    cloud: str
    gpu: str
    accelerators: int
    epochs: float
    seconds_per_epoch: float
    restarts: int
    speedup: float
    efficiency: float
    machine: str | None = None
    nodes: int | None = None
    spot: bool = True
    price: PriceEntry | None = None

    @property
    def cost_per_epoch(self) -> float | None:
        """Time per epoch x the hourly price of the job's machines (None without a price or a node count)."""
        if self.price is None or self.nodes is None:
            return None
        hourly = self.price.per_hour(self.spot)
        return None if hourly is None else self.seconds_per_epoch / 3600 * hourly * self.nodes


def sweep_queries(workload: Workload, window: Window) -> dict[str, str]:
    """The two instant queries at the window's end: each worker's epoch seconds and epochs, per attempt."""
    distributed = workload.spec.distributed
    assert distributed is not None
    out = {}
    for key, metric in (("seconds", distributed.epoch_seconds), ("epochs", distributed.epochs)):
        series = selector(metric, {"workload": workload.name})
        out[key] = f"max by ({BY}) (max_over_time({series}[{window.range}]))"
    return out


def _points(answers: Mapping[str, list[dict[str, Any]]]) -> dict[tuple[str, ...], tuple[float, float, int]]:
    """(cluster, cloud, gpu, accelerators) -> (epochs, seconds per epoch, restarts) from the two answers."""
    per_worker: dict[tuple[str, ...], dict[str, list[float]]] = defaultdict(lambda: defaultdict(lambda: [0.0, 0.0]))
    attempts: dict[tuple[str, ...], int] = defaultdict(int)
    for index, key in enumerate(("seconds", "epochs")):
        for sample in answers.get(key, []):
            labels = sample["metric"]
            point = tuple(labels.get(k, "") for k in POINT)
            per_worker[point][labels.get("worker", "")][index] += float(sample["value"][1])
            attempt = labels.get("attempt", "0")
            attempts[point] = max(attempts[point], int(attempt) if attempt.isdigit() else 0)
    out = {}
    for point, workers in per_worker.items():
        paces = [(seconds / epochs, epochs) for seconds, epochs in workers.values() if epochs > 0]
        if paces and point[3].isdigit():
            pace, epochs = max(paces)
            out[point] = (epochs, pace, attempts[point])
    return out


def sweep_rows(
    workload: Workload, answers: Mapping[str, list[dict[str, Any]]], fleet: Fleet | None, prices: PriceTable
) -> list[SweepRow]:
    """One row per measured point, by (cluster, card) then accelerator count, with speed-ups against the first."""
    measured = _points(answers)
    rows: list[SweepRow] = []
    by_card: dict[tuple[str, ...], list[tuple[int, tuple[float, float, int]]]] = defaultdict(list)
    for (cluster, cloud, gpu, n), values in measured.items():
        by_card[(cluster, cloud, gpu)].append((int(n), values))
    for (cluster, cloud, gpu), points in sorted(by_card.items()):
        points.sort()
        base_n, (_, base_pace, _) = points[0]
        for n, (epochs, pace, restarts) in points:
            speedup = base_pace / pace
            placed = _sweep_point(fleet, workload.name, cluster, gpu, n)
            machine, nodes, spot, price = None, None, True, None
            if placed is not None:
                pool, nodes = placed
                accelerator = pool.offer.accelerator_type if pool.offer else ""
                machine = pool.machine_type + (f" + {accelerator}" if accelerator else "")
                spot = pool.spot
                price = prices.lookup(cloud, pool.machine_type, accelerator)
            efficiency = speedup * base_n / n
            row = SweepRow(
                cluster, cloud, gpu, n, epochs, pace, restarts, speedup, efficiency, machine, nodes, spot, price
            )
            rows.append(row)
    return rows


def _sweep_point(
    fleet: Fleet | None, workload: str, cluster: str, gpu: str, accelerators: int
) -> tuple[Any, int] | None:
    """(pool, nodes) of the policy's sweep point on ``cluster`` (its own, or a queued one it may be given), or None when
    the policy has no such point."""
    if fleet is None or cluster not in fleet.clusters:
        return None
    for point in fleet.sweep_points(fleet.clusters[cluster]):
        if (point.workload.name, point.card, point.accelerators) == (workload, gpu, accelerators):
            return point.pool, point.nodes
    # a point of a sweep through a queue, on the pool of the worker that ran it
    for queued, pool in fleet.queued_points_on(fleet.clusters[cluster]):
        if (queued.workload.name, queued.card, queued.accelerators) == (workload, gpu, accelerators):
            return pool, queued.nodes
    return None
