"""The synthetic leaf of benchmarks/central_scale.py: it answers ``/federate`` with exactly the series the central's
``match[]`` selectors pull, labelled as a leaf labels them, and its history is OpenMetrics promtool accepts.

Not a timed test: the benchmark itself is run by ``make benchmark``.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from benchmarks import central_history, central_leaves, central_prometheus, central_scale, synthetic_leaf
from fleet.model.billing import accounting
from fleet.model.billing.accounting_hours import HOUR_END
from fleet.model.monitoring.prometheus import GPU_RECORDING_RULES, RUNNER_SERIES
from fleet.model.probes import probe_phases
from tests.conftest import require_tool
from tests.e2e.processes import Prometheus, patience, wait_for


@pytest.fixture(scope="module")
def fleet_and_leaves(tmp_path_factory: pytest.TempPathFactory) -> tuple:
    fleet, _, _ = central_leaves.synthetic_fleet(tmp_path_factory.mktemp("scale"), leaves=2)
    leaves = [c for c in fleet.clusters.values() if not c.central]
    return fleet, leaves


def test_a_leaf_answers_exactly_the_selected_series(fleet_and_leaves: tuple) -> None:
    fleet, leaves = fleet_and_leaves
    names = {s.name for s in synthetic_leaf.leaf_series(leaves[0], fleet)}
    assert names == synthetic_leaf.selected_names(fleet)
    assert {*GPU_RECORDING_RULES, *accounting.ACCOUNTING_RULES, *RUNNER_SERIES, probe_phases.PHASE_RECORD} <= names


def test_every_series_is_one_of_its_cluster_and_unique(fleet_and_leaves: tuple) -> None:
    fleet, leaves = fleet_and_leaves
    for cluster in leaves:
        series = synthetic_leaf.leaf_series(cluster, fleet)
        assert len(set(series)) == len(series)
        for s in series:
            labels = dict(s.labels)
            assert labels["cluster"] == cluster.name and labels["cloud"] == cluster.cloud
    probed = [p for p in leaves[0].pools if p.probe is not None]
    phases = [s for s in synthetic_leaf.leaf_series(leaves[0], fleet) if s.name == probe_phases.PHASE_RECORD]
    assert {(dict(s.labels)["gpu"], dict(s.labels)["phase"]) for s in phases} == {
        (p.card, phase) for p in probed for phase in probe_phases.PHASES
    }


def test_exposition_is_federate_text(fleet_and_leaves: tuple) -> None:
    fleet, leaves = fleet_and_leaves
    lines = synthetic_leaf.exposition_lines(synthetic_leaf.leaf_series(leaves[0], fleet))
    text = synthetic_leaf.exposition(lines, 2.5, 1_700_000_000_000)
    sample = re.compile(r'^[a-zA-Z_:][a-zA-Z0-9_:]*\{([a-zA-Z_]\w*="[^"]*",?)*\} 2\.5 1700000000000$')
    body = [line for line in text.splitlines() if not line.startswith("# TYPE ")]
    assert len(body) == len(lines) and all(sample.match(line) for line in body)
    types = [line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")]
    assert len(types) == len(set(types)) == len({t for t, _ in lines if t})


@pytest.mark.parametrize("hourly", [False, True])
def test_a_day_of_history_loads_with_promtool(fleet_and_leaves: tuple, tmp_path: Path, hourly: bool) -> None:
    promtool = require_tool("promtool")
    fleet, clusters = fleet_and_leaves
    leaves = [
        central_leaves.Leaf(c, synthetic_leaf.exposition_lines(synthetic_leaf.leaf_series(c, fleet))) for c in clusters
    ]
    source = tmp_path / "day.om"
    samples = central_history.write_history(leaves, 20_000, run_every_days=1, out=source, hourly=hourly)
    assert samples > sum(len(leaf.lines) for leaf in leaves)  # every series, runs with three samples
    text = source.read_text(encoding="utf-8")
    assert (f"{HOUR_END} " in text) == hourly and text.count(f"\n{HOUR_END} ") == (24 if hourly else 0)
    run = subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", str(source), str(tmp_path / "data")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    blocks = len([p for p in (tmp_path / "data").iterdir() if p.is_dir()])
    assert blocks == (12 if hourly else 1)  # the hourly records span the day's twelve 2-hour blocks; else the runs' 2 h


def test_a_days_inputs_hold_its_samples_one_2_hour_block_each(fleet_and_leaves: tuple, tmp_path: Path) -> None:
    """The backfill's input: the day's samples exactly (those of the one-file day), split by 2-hour block, so promtool
    reads each file for one block only (it re-parses its input for every block the input spans); each file makes
    exactly one block."""
    promtool = require_tool("promtool")
    fleet, clusters = fleet_and_leaves
    leaves = [
        central_leaves.Leaf(c, synthetic_leaf.exposition_lines(synthetic_leaf.leaf_series(c, fleet))) for c in clusters
    ]
    files, samples = central_history.write_history_blocks(leaves, 20_000, 1, tmp_path / "inputs")
    whole = central_history.write_history(leaves, 20_000, run_every_days=1, out=tmp_path / "day.om")
    assert samples == whole and len(files) == 12  # the hourly records span the day's twelve blocks

    def sample_lines(path: Path) -> list[str]:
        return sorted(line for line in path.read_text(encoding="utf-8").splitlines() if not line.startswith("#"))

    assert sorted(line for f in files for line in sample_lines(f)) == sample_lines(tmp_path / "day.om")
    for f in files:
        start = int(f.stem)
        assert start % central_history.BLOCK == 0
        assert all(start <= int(line.rsplit(" ", 1)[1]) < start + central_history.BLOCK for line in sample_lines(f))
        out = tmp_path / f"blocks-{f.stem}"
        run = subprocess.run(
            [promtool, "tsdb", "create-blocks-from", "openmetrics", str(f), str(out)],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr
        assert len([p for p in out.iterdir() if p.is_dir()]) == 1


def test_the_central_is_read_after_two_scrapes_at_least() -> None:
    """Read before its first scrape the central had no figures (every column blank) and the CPU rate needs two
    samples: the observation is at least two intervals and a margin."""
    assert central_scale.observation(20, 60) == 150
    assert central_scale.observation(240, 60) == 240


def test_report_phases_split_a_reports_time_by_its_progress_lines() -> None:
    """Start to the first query, the queries to the drawing line, the drawing to the end; the slowest query runs from
    its line to the next (the last one to the drawing line)."""
    lines = [
        (10.0, "report: [1/4] connecting to http://x"),
        (10.5, "report: [2/4] fitter: result"),
        (13.5, "report: [3/4] fitter: best"),
        (14.0, "report: [4/4] probes: gpufleet_probe_success"),
        (18.0, "report: drawing 2 plots and writing the pages into out"),
    ]
    assert central_scale.report_phases(lines, 8.0, 20.0) == {
        "start": 2.0,
        "queries": 8.0,
        "drawing": 2.0,
        "query_count": 3,
        "slowest_query": ["probes: gpufleet_probe_success", 4.0],
    }
    assert central_scale.report_phases(lines[:-1], 8.0, 20.0) == {}  # stopped before drawing: no split


def test_backfill_moves_each_days_blocks_and_stops_at_its_limit(fleet_and_leaves: tuple, tmp_path: Path) -> None:
    """A day's blocks land in the data folder (written in an empty one first); past the limit no day is begun, and
    the answer says how many of the days asked were written."""
    require_tool("promtool")
    fleet, clusters = fleet_and_leaves
    leaves = [
        central_leaves.Leaf(c, synthetic_leaf.exposition_lines(synthetic_leaf.leaf_series(c, fleet))) for c in clusters
    ]
    data = tmp_path / "data"
    data.mkdir()
    done = central_history.backfill(leaves, 1, 7, data, tmp_path)
    assert (done["days"], done["asked"]) == (1, 1) and done["samples"] > 0
    blocks = sorted(p.name for p in data.iterdir())
    assert blocks and all(len(name) == 26 for name in blocks) and not (tmp_path / "new-blocks").exists()
    assert not (tmp_path / "history").exists()  # the day's inputs are gone
    stopped = central_history.backfill(leaves, 5, 7, data, tmp_path, limit=0)
    assert (stopped["days"], stopped["asked"], stopped["samples"]) == (0, 5, 0)
    assert sorted(p.name for p in data.iterdir()) == blocks


def test_the_records_of_finished_probe_runs_are_backfilled_over_the_history(
    fleet_and_leaves: tuple, tmp_path: Path
) -> None:
    """The central's records of finished probe runs (fleet/model/probes/probe_phases.py) over two days of history,
    evaluated by promtool from a real Prometheus holding it, a day per promtool run: each pool's daily run once per
    phase."""
    require_tool("promtool")
    prometheus_exe = require_tool("prometheus")
    fleet, clusters = fleet_and_leaves
    leaves = [
        central_leaves.Leaf(c, synthetic_leaf.exposition_lines(synthetic_leaf.leaf_series(c, fleet))) for c in clusters
    ]
    directory = tmp_path / "central"
    data = directory / "data"
    data.mkdir(parents=True)
    history = central_history.backfill(leaves, 2, 7, data, tmp_path)
    today = history["today"]  # the day the history ends before: the records and the query follow it, not the clock
    rules = tmp_path / central_prometheus.PROBE_RUNS_FILE
    rules.write_text(yaml.safe_dump(probe_phases.settled_run_rules(60)), encoding="utf-8")
    config = {"global": {"scrape_interval": "15s"}}
    central = Prometheus(prometheus_exe, directory, config)
    try:
        wait_for("prometheus to be ready", central.ready, patience(), [central])
        done = central_scale.backfill_records(central.url, rules, data, tmp_path, 2, today=today)
    finally:
        central.stop()
    assert done["blocks"] > 0 and not (tmp_path / "record-blocks").exists()
    central = Prometheus(prometheus_exe, directory, config)
    try:
        wait_for("prometheus to be ready", central.ready, patience(), [central])
        now = today * central_history.DAY
        counts = central.query(f"count_over_time({probe_phases.PHASE_RUN_RECORD}[3d])", now)
        runs = central.query(f"sum by (cluster, gpu) (sum_over_time({probe_phases.SETTLED_RUNS_RECORD}[3d]))", now)
    finally:
        central.stop()
    probed = {(c.name, p.card) for c in clusters for p in c.pools if p.probe is not None}
    assert {(s["metric"]["cluster"], s["metric"]["gpu"], s["metric"]["phase"]) for s in counts} == {
        (cluster, card, phase) for cluster, card in probed for phase in probe_phases.PHASES
    }
    assert {float(s["value"][1]) for s in counts} == {2.0}  # a run a day, each once
    assert {(s["metric"]["cluster"], s["metric"]["gpu"]): float(s["value"][1]) for s in runs} == dict.fromkeys(
        probed, 2.0
    )
