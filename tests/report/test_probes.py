"""fleet/report/probes.py and the cost it adds: runs told apart by their start time, success rate, median and worst
time to first accelerator, and the billed time per result that includes each pod's wait for a node."""

from __future__ import annotations

import pytest

from fleet.model.core.pod_contract import PROBE_METRICS
from fleet.model.probes.probe_phases import (
    PHASE_RECORD,
    PHASE_RUN_RECORD,
    RUNS_EVALUATED,
    SETTLED_AFTER,
    SETTLED_RUNS_RECORD,
    settled_run_rules,
)
from fleet.report.costs import Machine, PriceEntry
from fleet.report.model import CardRow
from fleet.report.probes import (
    SETTLED_FROM,
    phase_queries,
    phase_rows,
    pool_waits,
    probe_rows,
    records_cover,
    records_query,
)
from fleet.report.queries import Window

SCALE_UP, SUCCESS, LAST_RUN = PROBE_METRICS
T4 = {"cluster": "alpha", "cloud": "gcp", "gpu": "t4", "job": "benchmarks/gpu-fleet-benchmarks"}
L4 = {"cluster": "alpha", "cloud": "gcp", "gpu": "l4", "job": "benchmarks/gpu-fleet-benchmarks"}


def matrix(labels: dict[str, str], points: list[tuple[float, float]]) -> dict:
    return {"metric": labels, "values": [[t, str(v)] for t, v in points]}


def samples(runs: dict[str, list[tuple[float, float, int, float | None]]]) -> dict[str, list[dict]]:
    """Raw samples as Prometheus returns ``metric[window]``: per pool, (scrape time, start, success, wait)."""
    pools = {"t4": T4, "l4": L4}
    out: dict[str, list[dict]] = {LAST_RUN: [], SUCCESS: [], SCALE_UP: []}
    for gpu, scrapes in runs.items():
        labels = pools[gpu]
        out[LAST_RUN].append(matrix(labels, [(t, start) for t, start, _, _ in scrapes]))
        out[SUCCESS].append(matrix(labels, [(t, ok) for t, _, ok, _ in scrapes]))
        waits = [(t, w) for t, _, _, w in scrapes if w is not None]
        if waits:
            out[SCALE_UP].append(matrix(labels, waits))
    return out


def test_runs_are_told_apart_by_their_start_and_counted_once() -> None:
    # t4: three runs, each scraped two or three times while its pod lingered; the second failed after a long wait
    t4 = [
        (1000, 900, 1, 100),
        (1030, 900, 1, 100),
        (2000, 1500, 0, 480),
        (2030, 1500, 0, 480),
        (2060, 1500, 0, 480),
        (3000, 2900, 1, 60),
        (3030, 2900, 1, 60),
    ]
    # l4: one run started by hand (no wait known), one scheduled
    l4 = [(1200, 1190, 1, None), (5000, 4700, 1, 300)]
    rows = probe_rows(samples({"t4": t4, "l4": l4}))
    by_gpu = {r.gpu: r for r in rows}
    assert [(r.cluster, r.cloud, r.gpu) for r in rows] == [("alpha", "gcp", "l4"), ("alpha", "gcp", "t4")]
    t4_row = by_gpu["t4"]
    assert [r.started for r in t4_row.runs] == [900, 1500, 2900]
    assert t4_row.success_rate == pytest.approx(2 / 3)
    assert t4_row.median_wait == 100 and t4_row.worst_wait == 480
    l4_row = by_gpu["l4"]
    assert len(l4_row.runs) == 2 and l4_row.success_rate == 1
    assert l4_row.waits == [300] and l4_row.median_wait == 300
    assert pool_waits(rows) == {("alpha", "gcp", "t4"): 100, ("alpha", "gcp", "l4"): 300}


def test_series_of_one_pool_merge_and_a_scrape_without_result_is_skipped() -> None:
    data = samples({"t4": [(1000, 900, 1, 100)]})
    # the same pool through a second federation job: more scrapes of another run
    other = {**T4, "job": "federate-alpha"}
    data[LAST_RUN].append(matrix(other, [(4000, 3600), (4030, 3600)]))
    data[SUCCESS].append(matrix(other, [(4030, 0)]))  # the first scrape of that run came before its result
    data[SCALE_UP].append(matrix(other, [(4030, 250)]))
    (row,) = probe_rows(data)
    assert [(r.started, r.success, r.wait_seconds) for r in row.runs] == [(900, True, 100), (3600, False, 250)]
    assert row.median_wait == 175


def test_no_probe_samples_no_rows() -> None:
    assert probe_rows({}) == [] and pool_waits([]) == {}


def test_the_billed_time_adds_each_pods_wait_and_the_cost_follows() -> None:
    price = PriceEntry(
        cloud="gcp", machine_type="g2-standard-4", region="us-central1", spot=0.36, on_demand=0.7,
        as_of="2026-11-01", source="test",
    )  # fmt: skip
    machine = Machine("gcp", "g2-standard-4", "", gpus=1, spot=True)
    row = CardRow("alpha", "gcp", "l4", 1.0, pods=2, runs=10, observed_seconds=1000, machine=machine, price=price)
    assert row.billed_seconds_per_result == row.seconds_per_result == 100  # no probe: the running time alone
    without = row.cost_per_result
    row.scale_up_seconds = 300
    assert row.seconds_per_result == 100
    assert row.billed_seconds_per_result == (1000 + 2 * 300) / 10
    assert row.cost_per_result == pytest.approx(0.36 * 160 / 3600)
    assert without == pytest.approx(0.36 * 100 / 3600)


def test_phase_rows_from_the_aggregated_answers() -> None:
    pool = {"cluster": "c1", "cloud": "gcp", "gpu": "t4"}
    answers = {
        "runs": [{"metric": pool, "value": [0, "2"]}],
        "median": [
            {"metric": {**pool, "phase": "node"}, "value": [0, "150"]},
            {"metric": {**pool, "phase": "unknown"}, "value": [0, "99"]},
        ],
        "worst": [{"metric": {**pool, "phase": "node"}, "value": [0, "300"]}],
    }
    (row,) = phase_rows(answers)
    assert (row.cluster, row.cloud, row.gpu, row.runs) == ("c1", "gcp", "t4", 2)
    assert (row.median("node"), row.worst("node")) == (150, 300)
    assert row.median("unknown") is None and row.worst("check") is None


def test_phase_queries_aggregate_each_runs_last_value() -> None:
    q = phase_queries(Window(0, 3600))
    last = "last_over_time(gpufleet:probe_phase_seconds[3600s])"
    assert q["median"] == f"quantile by (cluster, cloud, gpu, phase) (0.5, {last})"
    assert q["worst"] == f"max by (cluster, cloud, gpu, phase) ({last})"
    assert q["runs"] == f"count by (cluster, cloud, gpu) (group by (cluster, cloud, gpu, pod) ({last}))"


def test_a_long_window_the_records_cover_reads_them() -> None:
    """From SETTLED_FROM on, and when the records' first evaluation in the window took the runs that ended just after
    its start, the phases come from a few series per pool and phase (the central's records), read from SETTLED_AFTER
    after the window's start to its end; otherwise every run's series."""
    window = Window(0, 30 * 86400)
    assert records_query(window) == f"min_over_time({RUNS_EVALUATED}[{30 * 86400}s])"
    first = [{"metric": {}, "value": [window.end, str(SETTLED_AFTER + 60)]}]
    assert records_cover(first, window, 60)
    late = [{"metric": {}, "value": [window.end, str(SETTLED_AFTER + 61)]}]
    assert not records_cover(late, window, 60)  # deployed after the window began: its first runs are not there
    assert not records_cover([], window, 60)  # a past window, or no records at all
    assert not records_cover(first, Window(0, SETTLED_FROM - 1), 60)  # a short window reads the runs' own series
    assert phase_queries(window)["runs"].startswith("count by")
    q = phase_queries(window, records=True)
    span = f"[{(30 * 86400 - SETTLED_AFTER) * 1000}ms]"
    assert q == {
        "runs": f"sum by (cluster, cloud, gpu) (sum_over_time({SETTLED_RUNS_RECORD}{span}))",
        "median": f"quantile_over_time(0.5, {PHASE_RUN_RECORD}{span})",
        "worst": f"max_over_time({PHASE_RUN_RECORD}{span})",
    }
    assert f"{PHASE_RECORD}[" not in " ".join(q.values())  # no run's own series


@pytest.mark.parametrize("step", [0.5, 61.5])
def test_no_records_of_finished_runs_at_a_step_of_part_seconds(step: float) -> None:
    assert settled_run_rules(step) is None


def test_the_records_of_finished_runs_evaluate_at_the_federation_interval() -> None:
    rules = settled_run_rules(30)
    assert rules is not None
    (group,) = rules["groups"]
    assert group["interval"] == "30s"  # the window each evaluation settles is one interval wide: they tile
    exprs = {r["record"]: r["expr"] for r in group["rules"]}
    assert exprs.pop(RUNS_EVALUATED) == "vector(time())"
    assert set(exprs) == {PHASE_RUN_RECORD, SETTLED_RUNS_RECORD}
    for expr in exprs.values():  # the two ranges share their bound (probe_phases.settled): the evaluations tile time
        assert f"[30s] offset {SETTLED_AFTER}s)" in expr and f"[{SETTLED_AFTER}s])" in expr
