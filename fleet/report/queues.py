"""The fleet's queues in the report window: where Kueue's MultiKueue ran each queue's jobs, how long they waited for
admission and then for their pods to run, and how many spilled past the queue's first cluster (docs/queues.md).

Read on the central, which is the manager and scrapes its Kueue, and federates each worker's Kueue
(components/kubernetes/kueue_metrics.py ``kueue_metrics_scrape``, components/kubernetes/federation.py
``federated_selectors``). The metrics, kueue v0.19.2 pkg/metrics/metrics.go (fleet/model/queues/ says more):

* ``multikueue_workloads_admitted_total{cluster_queue, cluster}`` on the manager: a workload admitted by the worker
  ``cluster`` (the MultiKueueCluster's name, which the fleet makes the cluster's name), counted when the manager's
  admission check turns Ready; a re-admission after an eviction on a worker counts again;
* ``kueue_admission_wait_time_seconds{cluster_queue}`` on the manager: a histogram of the time from a workload's
  creation (or requeue) to its admission, which on the manager is the wait until a worker admitted it;
* ``kueue_admitted_until_ready_wait_time_seconds{cluster_queue}`` on each worker (federated with its ``cluster``
  label): a histogram of the time from the workload's admission there until its pods are ready, the wait to start.
  The manager's Kueue measures it too for its own copies of the dispatched jobs, with no ``cluster`` label on the
  central: those series are left out.

Each wait is given as its **mean** (``_sum`` / ``_count``, exact), its **median** (``histogram_quantile(0.5)``,
Prometheus' linear interpolation inside the bucket holding it, so known only to that bucket: Kueue's bounds are 1 s
then 2.5 s doubling, 2.5, 5, 10 ... 40960 s) and its **worst** as the upper bound of the highest bucket holding a wait:
the longest wait was at most that (``≤ 640``), or beyond the last bound (``> 40960``). A quantile such as p99 would
be an interpolation inside that same bucket, not a measurement, so the bound is what the report states. The wait from
submission to running pods is the sum of the two means (a mean of sums is the sum of the means over the same jobs;
quantiles do not add, so it has no median): exact when each job admitted in the window also started in it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fleet.model.core import pod_contract
from fleet.model.core.fleet import Fleet
from fleet.model.queues.settings import ADMISSION_WAIT_METRIC, START_WAIT_METRIC
from fleet.report.queries import Window, increase_from_birth

ADMITTED = "multikueue_workloads_admitted_total"
WAIT = ADMISSION_WAIT_METRIC
START = START_WAIT_METRIC
# a bucket holds a wait when its count rises by at least this over the bucket below it: ``increase()`` answers
# extrapolated fractions of whole observations
HALF_AN_OBSERVATION = 0.5


@dataclass(frozen=True)
class Worst:
    """The worst wait's bound: it was at most ``bound`` seconds, or more than ``bound`` (Kueue's last finite bucket)
    when ``beyond``."""

    bound: float
    beyond: bool = False

    def text(self) -> str:
        """``≤ 640`` or ``> 40,960``."""
        return f"{'>' if self.beyond else '≤'} {self.bound:,g}"


@dataclass(frozen=True)
class Wait:
    """A wait over the window: its mean, median and worst; None where nothing was measured."""

    mean: float | None = None
    median: float | None = None
    worst: Worst | None = None


@dataclass(frozen=True)
class QueueRow:
    """One queue's window: admissions per worker in the queue's order (then workers the policy does not name), the
    wait to admission on the manager, the wait from admission to running pods per worker and over all of them, and
    the admissions on a worker other than the queue's first (None: a queue the policy does not have, whose order is
    unknown)."""

    queue: str
    order: tuple[str, ...]  # the policy's workers of the queue, most preferred first
    admitted: dict[str, float]
    admission: Wait
    spilled: float | None
    start: dict[str, Wait] = field(default_factory=dict)  # per worker
    start_all: Wait = Wait()

    @property
    def total(self) -> float:
        """Admissions on every worker."""
        return sum(self.admitted.values())

    @property
    def submission_to_running_mean(self) -> float | None:
        """The mean wait from submission to running pods: the mean to admission plus the mean from admission to
        running (None unless both were measured)."""
        if self.admission.mean is None or self.start_all.mean is None:
            return None
        return self.admission.mean + self.start_all.mean


def queue_queries(window: Window) -> dict[str, str]:
    """The instant queries at the window's end: admissions per queue and worker; the wait to admission's sum, count,
    buckets and median per queue; the wait from admission to running's sum, count, buckets and median per queue and
    worker, and its median per queue. Every histogram is summed over Kueue's other labels (priority_class,
    replica_role) before a quantile is taken, ``le`` kept. Every increase counts a series born inside the window from
    zero (:func:`fleet.report.queries.increase_from_birth`): Kueue creates a queue's series at its first event."""
    per_worker = "cluster_queue, cluster"

    def inc(counter: str) -> str:
        return increase_from_birth(counter, window)

    def federated(part: str) -> str:
        # a worker's wait, federated with its ``cluster``; the manager's Kueue measures its own copies of the
        # dispatched jobs too, under no ``cluster`` label on the central (found on the real tier)
        return f'{START}_{part}{{cluster!=""}}'

    return {
        "admitted": f"sum by ({per_worker}) ({inc(ADMITTED)})",
        "wait_sum": f"sum by (cluster_queue) ({inc(WAIT + '_sum')})",
        "wait_count": f"sum by (cluster_queue) ({inc(WAIT + '_count')})",
        "wait_buckets": f"sum by (cluster_queue, le) ({inc(WAIT + '_bucket')})",
        "wait_median": f"histogram_quantile(0.5, sum by (cluster_queue, le) ({inc(WAIT + '_bucket')}))",
        "start_sum": f"sum by ({per_worker}) ({inc(federated('sum'))})",
        "start_count": f"sum by ({per_worker}) ({inc(federated('count'))})",
        "start_buckets": f"sum by ({per_worker}, le) ({inc(federated('bucket'))})",
        "start_median": f"histogram_quantile(0.5, sum by ({per_worker}, le) ({inc(federated('bucket'))}))",
        "start_median_all": f"histogram_quantile(0.5, sum by (cluster_queue, le) ({inc(federated('bucket'))}))",
    }


def worst_bound(buckets: Iterable[tuple[str, float]]) -> Worst | None:
    """The upper bound of the highest bucket holding an observation, from ``(le, cumulative count)`` pairs of one
    histogram: the worst observation was at most that, or beyond the last finite bound when the ``+Inf`` bucket holds
    one; None when nothing was observed."""
    worst, below, last = None, 0.0, 0.0
    for le, count in sorted((float(le), count) for le, count in buckets):
        if count - below >= HALF_AN_OBSERVATION:
            worst = Worst(last, beyond=True) if math.isinf(le) else Worst(le)
        below = max(below, count)
        last = le if math.isfinite(le) else last
    return worst


def _value(sample: dict[str, Any]) -> float | None:
    value = float(sample["value"][1])
    return None if math.isnan(value) or math.isinf(value) else value


def _keyed(samples: list[dict[str, Any]], *labels: str) -> dict[tuple[str, ...], float]:
    out = {}
    for s in samples:
        value = _value(s)
        if value is not None:
            out[tuple(s["metric"].get(k, "") for k in labels)] = value
    return out


def _worsts(samples: list[dict[str, Any]], *labels: str) -> dict[tuple[str, ...], Worst]:
    buckets: dict[tuple[str, ...], list[tuple[str, float]]] = {}
    for s in samples:
        value = _value(s)
        if value is not None and "le" in s["metric"]:
            buckets.setdefault(tuple(s["metric"].get(k, "") for k in labels), []).append((s["metric"]["le"], value))
    return {key: bound for key, pairs in buckets.items() if (bound := worst_bound(pairs)) is not None}


def _wait(key: tuple[str, ...], sums: Mapping, counts: Mapping, medians: Mapping, worsts: Mapping) -> Wait:
    count = counts.get(key)
    mean = sums[key] / count if count and key in sums else None
    return Wait(mean, medians.get(key) if count else None, worsts.get(key) if count else None)


def queue_rows(results: Mapping[str, list[dict[str, Any]]], fleet: Fleet | None) -> list[QueueRow]:
    """One row per queue of the policy, in its order, then per other ClusterQueue the manager's metrics name (a queue
    renamed or removed; not a cluster's own, its sweeps' or benchmarks'), from the answers to :func:`queue_queries`;
    a queue that admitted nothing and measured no wait is left out."""
    admitted: dict[str, dict[str, float]] = {}
    for (cq, worker), value in _keyed(results.get("admitted", []), "cluster_queue", "cluster").items():
        admitted.setdefault(cq, {})[worker] = value
    get = results.get
    waits = [_keyed(get(name, []), "cluster_queue") for name in ("wait_sum", "wait_count", "wait_median")]
    wait_worsts = _worsts(get("wait_buckets", []), "cluster_queue")
    per_worker = ("cluster_queue", "cluster")
    start_sums, start_counts = _keyed(get("start_sum", []), *per_worker), _keyed(get("start_count", []), *per_worker)
    start_medians = _keyed(get("start_median", []), *per_worker)
    start_worsts = _worsts(get("start_buckets", []), *per_worker)
    all_medians = _keyed(get("start_median_all", []), "cluster_queue")
    policy = {q.cluster_queue: q for q in (fleet.dispatch.queues if fleet and fleet.dispatch else ())}
    counted = {cq for (cq,) in waits[1]}
    rows = []
    # the cluster's own ClusterQueues (its sweeps', its benchmarks'), which Kueue measures too where the manager sweeps
    # or benchmarks, are not the fleet's
    others = {cq for cq in (set(admitted) | counted) - set(policy) if not pod_contract.is_cluster_own_queue(cq)}
    for cq in [*policy, *sorted(others)]:
        queue, seen = policy.get(cq), admitted.get(cq, {})
        order = queue.clusters if queue else ()
        started = {w for q, w in start_counts if q == cq and w}
        workers = [*order, *sorted((set(seen) | started) - set(order))]
        start = {w: _wait((cq, w), start_sums, start_counts, start_medians, start_worsts) for w in workers}
        ran = [w for w in workers if start_counts.get((cq, w))]
        count = sum(start_counts[(cq, w)] for w in ran)
        start_all = Wait(
            sum(start_sums.get((cq, w), 0.0) for w in ran) / count if count else None,
            all_medians.get((cq,)) if count else None,
            max((start[w].worst for w in ran if start[w].worst), default=None, key=lambda x: (x.beyond, x.bound)),
        )
        rows.append(
            QueueRow(
                queue.name if queue else cq,
                order,
                {w: seen.get(w, 0.0) for w in workers},
                _wait((cq,), *waits, wait_worsts),
                sum(v for w, v in seen.items() if w != order[0]) if order else None,
                start,
                start_all,
            )
        )
    return [r for r in rows if r.total > 0 or r.admission.mean is not None or r.start_all.mean is not None]
