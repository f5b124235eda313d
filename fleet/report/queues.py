"""The fleet's queues in the report window: where Kueue's MultiKueue ran each queue's jobs, how long they waited for
admission, and how many spilled past the queue's first cluster (docs/queues.md).

Read on the central, which is the manager and scrapes its Kueue (components/kubernetes/multikueue.py
``kueue_metrics_scrape``). The metrics, kueue v0.19.2 pkg/metrics/metrics.go:

* ``multikueue_workloads_admitted_total{cluster_queue, cluster}``: a workload admitted by the worker ``cluster`` (the
  MultiKueueCluster's name, which the fleet makes the cluster's name), counted when the manager's admission check
  turns Ready; a re-admission after an eviction on a worker counts again;
* ``kueue_admission_wait_time_seconds{cluster_queue}``: a histogram of the time from a workload's creation (or
  requeue) to its admission, which on the manager is the wait until a worker admitted it. The report gives its
  **mean** over the window (``_sum`` / ``_count``), exact where the buckets would only bound a quantile.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fleet.model.spec import Fleet
from fleet.report.queries import Window

ADMITTED = "multikueue_workloads_admitted_total"
WAIT = "kueue_admission_wait_time_seconds"


@dataclass(frozen=True)
class QueueRow:
    """One queue's window: admissions per worker in the queue's order (then workers the policy does not name), the
    mean wait to admission (None: none measured) and the admissions on a worker other than the queue's first (None:
    a queue the policy does not have, whose order is unknown)."""

    queue: str
    order: tuple[str, ...]  # the policy's workers of the queue, most preferred first
    admitted: dict[str, float]
    mean_wait_seconds: float | None
    spilled: float | None

    @property
    def total(self) -> float:
        """Admissions on every worker."""
        return sum(self.admitted.values())


def queue_queries(window: Window) -> dict[str, str]:
    """The instant queries at the window's end: admissions per queue and worker, the waits' sum and count per queue."""
    r = window.range
    return {
        "admitted": f"sum by (cluster_queue, cluster) (increase({ADMITTED}[{r}]))",
        "wait_sum": f"sum by (cluster_queue) (increase({WAIT}_sum[{r}]))",
        "wait_count": f"sum by (cluster_queue) (increase({WAIT}_count[{r}]))",
    }


def _per_queue(samples: list[dict[str, Any]]) -> dict[str, float]:
    return {s["metric"].get("cluster_queue", ""): float(s["value"][1]) for s in samples}


def queue_rows(results: Mapping[str, list[dict[str, Any]]], fleet: Fleet | None) -> list[QueueRow]:
    """One row per queue of the policy, in its order, then per other ClusterQueue the metrics name (a queue renamed or
    removed), from the answers to :func:`queue_queries`; a queue that admitted nothing and measured no wait is left
    out."""
    admitted: dict[str, dict[str, float]] = {}
    for s in results.get("admitted", []):
        labels = s["metric"]
        admitted.setdefault(labels.get("cluster_queue", ""), {})[labels.get("cluster", "")] = float(s["value"][1])
    sums, counts = _per_queue(results.get("wait_sum", [])), _per_queue(results.get("wait_count", []))
    policy = {q.cluster_queue: q for q in (fleet.dispatch.queues if fleet and fleet.dispatch else ())}
    rows = []
    for cq in [*policy, *sorted((set(admitted) | set(counts)) - set(policy))]:
        queue, seen = policy.get(cq), admitted.get(cq, {})
        order = queue.clusters if queue else ()
        count = counts.get(cq)
        rows.append(
            QueueRow(
                queue.name if queue else cq,
                order,
                {w: seen.get(w, 0.0) for w in [*order, *sorted(set(seen) - set(order))]},
                sums[cq] / count if count and cq in sums else None,
                sum(v for w, v in seen.items() if w != order[0]) if order else None,
            )
        )
    return [r for r in rows if r.total > 0 or r.mean_wait_seconds is not None]
