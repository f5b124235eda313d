"""fleet/report/queues.py on answers written by hand: the worst wait's bound from Kueue's buckets, a queue whose jobs
were admitted but have not started, and the queries summing Kueue's other labels before a quantile (the end-to-end
test, tests/e2e/test_report_queues.py, runs them on a real Prometheus)."""

from __future__ import annotations

import pytest

from fleet.model.core import pod_contract
from fleet.report.queries import Window, increase_from_birth
from fleet.report.queues import Wait, Worst, queue_queries, queue_rows, worst_bound

# kueue v0.19.2 generateExponentialBuckets(14) as Prometheus stores the ``le`` values
BOUNDS = ["1", "2.5", "5", "10", "20", "40", "80", "160", "320", "640", "1280", "2560", "5120", "10240", "+Inf"]


def cumulative(counts: dict[str, float]) -> list[tuple[str, float]]:
    """Cumulative bucket counts from the count each bound adds."""
    total, out = 0.0, []
    for le in BOUNDS:
        total += counts.get(le, 0.0)
        out.append((le, total))
    return out


@pytest.mark.parametrize(
    ("added", "worst"),
    [
        ({}, None),  # nothing observed
        ({"10": 1, "160": 2}, Worst(160.0)),
        ({"5": 3, "+Inf": 1}, Worst(10240.0, beyond=True)),  # beyond the last finite bound
        # increase() extrapolates: a bucket's rise of a fraction of an observation is noise, not a wait
        ({"20": 3.02, "40": 0.03}, Worst(20.0)),
        ({"20": 2.9, "40": 1.05}, Worst(40.0)),
    ],
)
def test_the_worst_is_the_bound_of_the_highest_bucket_holding_a_wait(added, worst) -> None:
    assert worst_bound(cumulative(added)) == worst


def test_the_worst_reads_as_a_bound() -> None:
    assert Worst(1280.0).text() == "≤ 1,280"
    assert Worst(10240.0, beyond=True).text() == "> 10,240"
    assert Worst(2.5).text() == "≤ 2.5"


def test_a_queue_admitted_but_not_started_has_no_wait_to_running_and_no_sum() -> None:
    sample = {"metric": {"cluster_queue": "queue-gpu", "cluster": "w1"}, "value": [0, "2"]}
    answers = {
        "admitted": [sample],
        "wait_sum": [{"metric": {"cluster_queue": "queue-gpu"}, "value": [0, "30"]}],
        "wait_count": [{"metric": {"cluster_queue": "queue-gpu"}, "value": [0, "2"]}],
        "wait_median": [{"metric": {"cluster_queue": "queue-gpu"}, "value": [0, "12.5"]}],
        "wait_buckets": [
            {"metric": {"cluster_queue": "queue-gpu", "le": le}, "value": [0, str(v)]}
            for le, v in cumulative({"20": 2})
        ],
        # a queue with nothing started: histogram_quantile answers NaN
        "start_median_all": [{"metric": {"cluster_queue": "queue-gpu"}, "value": [0, "NaN"]}],
    }
    (row,) = queue_rows(answers, None)
    assert row.admission == Wait(15.0, 12.5, Worst(20.0))
    assert row.start == {"w1": Wait()} and row.start_all == Wait()
    assert row.submission_to_running_mean is None
    assert row.spilled is None  # a ClusterQueue the policy does not name: its order is unknown


def test_quantiles_are_taken_over_every_priority_class_and_replica_with_le_kept() -> None:
    queries = queue_queries(Window(0, 3600))
    for name in ("wait_median", "start_median", "start_median_all"):
        assert queries[name].startswith("histogram_quantile(0.5, sum by (")
        assert ", le) ((" in queries[name] and "_bucket" in queries[name]
    # a start wait is a worker's, federated with its cluster: the manager's own (no cluster label) is none
    for name in ("start_sum", "start_count", "start_buckets", "start_median", "start_median_all"):
        assert queries[name].count('{cluster!=""}') == 3, name
    assert "cluster_queue, cluster, le" in queries["start_buckets"]


def test_a_clusters_own_queues_are_no_rows_of_the_queues_table() -> None:
    """Kueue on the manager measures every ClusterQueue's admission wait, the sweeps' own per pool too where the
    manager sweeps (gpu-fleet-sweeps-<pool>, pod_contract.sweep_cluster_queue) and the benchmarks' where it runs
    benchmarks (gpu-fleet-benchmarks): they are not fleet queues (the sweep's own section reports the sweeps)."""
    own = (pod_contract.sweep_cluster_queue("gpu-l4-x8"), pod_contract.BENCHMARK_CLUSTER_QUEUE)
    answers = {
        "wait_sum": [{"metric": {"cluster_queue": q}, "value": [0, "30"]} for q in ("queue-gpu", *own)],
        "wait_count": [{"metric": {"cluster_queue": q}, "value": [0, "2"]} for q in ("queue-gpu", *own)],
    }
    assert [row.queue for row in queue_rows(answers, None)] == ["queue-gpu"]


def test_every_increase_counts_a_series_born_inside_the_window_from_zero() -> None:
    """Kueue creates a queue's series at its first event: each query takes a series absent at the window's start
    (while the Prometheus was collecting) by its value at the end, every other by increase()."""
    window = Window(0, 3600)
    for name, query in queue_queries(window).items():
        assert "increase(" in query, name
        counter = query.split("increase(", 1)[1].split("[", 1)[0]
        assert increase_from_birth(counter, window) in query, name
    born = increase_from_birth("m_total", window)
    assert (
        born == "(((m_total unless m_total offset 3600s) and on () group(up offset 3600s)) or increase(m_total[3600s]))"
    )
