"""Time to first accelerator by phase, end to end: kube-state-metrics series of an hour whose probe phases are known,
the leaf's probe phase rules (fleet/model/probes/probe_phases.py) evaluated over them by promtool's rule backfill
against a real Prometheus, then ``python -m fleet report``'s phase table, every median and worst by hand, and
``doctor``'s line per phase of each pool's last probe.

The cluster (its own policy) has a T4 pool (nodes labelled gpu=t4) and an L4 pool. Times from the hour's start, s:

* T4 probe a: created 0, its node n1 created 300, scheduled 400, probe container started 460, finished 540 (the
  75 s linger after a 5 s check); the completed pod stays (its Job is kept), but once b is bound only b is recorded.
* T4 probe b: created 1800 on n1 (already up: no wait for a node), scheduled 1830, started 1900, finished 1990.
* L4 probe c: created 600, its node n2 created 1200, scheduled 1290, started 1500, finished 1578.
* a benchmark pod on n1 created at 100 (after probe a): not a probe, never recorded.

By hand (node, device, containers, check): a (300, 100, 60, 5), b (0, 30, 70, 15), c (600, 90, 210, 3).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from fleet.model.loader import load_fleet
from fleet.model.probes.probe_phases import (
    PHASE_MEANING,
    PHASE_RECORD,
    PHASE_RUN_RECORD,
    PHASES,
    SETTLED_AFTER,
    SETTLED_RUNS_RECORD,
    leaf_rules,
    settled_run_rules,
)
from fleet.report.formatting import fmt
from fleet.report.probes import (
    SETTLED_FROM,
    phase_queries,
    records_cover,
    records_query,
    settled_phase_queries,
)
from fleet.report.queries import Window
from fleet.report.tables import PHASES_TITLE
from fleet.tools.doctor.probe_phases import probe_phase_query, probe_phase_rows
from tests.conftest import FIXTURES, ROOT, require_tool
from tests.e2e.processes import PATIENCE_S, Prometheus, http_get, patience, wait_for
from tests.e2e.support import markdown_tables, write_yaml

pytestmark = pytest.mark.e2e

POLICY = """\
clusters:
  gcp:
    phase-gke:
      zone: us-central1-a
      central: true
      gpus: {t4: {}, l4: {}}
monitoring:
  federation_interval: 60s
workloads:
  tracker: [t4, l4]
"""
STEP = 60
MINUTES = range(0, 61)
# pod: (node, workload, created, scheduled, started, finished, last minute it exists)
PODS = {
    "probe-t4-a": ("n1", "probe", 0, 400, 460, 540, 60),
    "probe-t4-b": ("n1", "probe", 1800, 1830, 1900, 1990, 60),
    "probe-l4-c": ("n2", "probe", 600, 1290, 1500, 1578, 60),
    "tracker-1": ("n1", "tracker", 100, 110, 120, 3000, 60),
}
NODES = {"n1": ("t4", 300), "n2": ("l4", 1200)}  # node: (card, created)
EXPECTED = {  # card: (runs, {phase: (median, worst)})
    "t4": (2, {"node": (150, 300), "device": (65, 100), "containers": (65, 70), "check": (10, 15)}),
    "l4": (1, {"node": (600, 600), "device": (90, 90), "containers": (210, 210), "check": (3, 3)}),
}
Value = Callable[[int], float | None]  # minute -> value, None: no sample
# b and c are recorded until 15 minutes after they completed (2890 s, 2478 s), then settle SETTLED_AFTER later
SETTLED_END = 2 * 3600


def ksm_series(start: int) -> dict[str, list[tuple[dict[str, str], Value]]]:
    """The kube-state-metrics series of the hour from ``start`` (the leaf's own scrape: no cluster label), each from
    the first minute its time has passed; a timestamp's value is Unix seconds."""
    out: dict[str, list[tuple[dict[str, str], Value]]] = {}

    def add(name: str, labels: dict[str, str], value: Value) -> None:
        out.setdefault(name, []).append((labels, value))

    def since(t: int, value: float, last: int) -> Value:
        return lambda k: value if t <= k * STEP and k <= last else None

    for node, (card, created) in NODES.items():
        add("kube_node_labels", {"node": node, "label_gpu": card}, since(created, 1, 60))
        add("kube_node_created", {"node": node}, since(created, start + created, 60))
    for pod, (node, workload, created, scheduled, started, finished, last) in PODS.items():
        where = {"namespace": "benchmarks", "pod": pod, "uid": f"uid-{pod}"}
        add("kube_pod_labels", {**where, "label_workload": workload}, since(created, 1, last))
        add("kube_pod_created", where, since(created, start + created, last))
        add("kube_pod_info", {**where, "node": ""}, lambda k, c=created, s=scheduled: 1 if c <= k * STEP < s else None)
        add("kube_pod_info", {**where, "node": node}, since(scheduled, 1, last))
        add("kube_pod_status_scheduled_time", where, since(scheduled, start + scheduled, last))
        probe_container, sidecar = {**where, "container": "workload"}, {**where, "container": "mtail"}
        add("kube_pod_container_state_started", probe_container, since(started, start + started, last))
        add("kube_pod_container_state_started", sidecar, since(scheduled, start + scheduled + 5, last))
        add("kube_pod_completion_time", where, since(finished, start + finished, last))
    # the benchmark's own result, federated (the report writes nothing without some benchmark's data)
    result = {"cluster": "phase-gke", "cloud": "gcp", "gpu": "t4", "workload": "tracker", "pod": "tracker-1"}
    add("tracker_throughput", {**result, "namespace": "benchmarks"}, since(120, 100, 60))
    return out


def openmetrics(series: dict[str, list[tuple[dict[str, str], Value]]], start: int) -> str:
    lines = []
    for name, items in series.items():
        lines.append(f"# TYPE {name} gauge")
        for labels, value in items:
            inner = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
            for k in MINUTES:
                v = value(k)
                if v is not None:
                    lines.append(f"{name}{{{inner}}} {v} {start + k * STEP}")
    return "\n".join([*lines, "# EOF"]) + "\n"


@pytest.fixture(scope="module")
def phase_report(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Load the series, backfill the phase rules over them with promtool, load the records, report the hour."""
    promtool, prometheus_exe = require_tool("promtool"), require_tool("prometheus")
    tmp = tmp_path_factory.mktemp("probe-phases")
    start = (int(time.time()) // 3600 - 4) * 3600  # a whole hour, four hours ago: only the loaded blocks hold it
    policy = tmp / "fleet.yaml"
    policy.write_text(POLICY, encoding="utf-8")
    fleet = load_fleet(policy, FIXTURES / "fleet" / "workloads")
    rules = leaf_rules(fleet.clusters["phase-gke"])
    assert rules is not None
    source = tmp / "ksm.om"
    source.write_text(openmetrics(ksm_series(start), start), encoding="utf-8")
    data = tmp / "prometheus" / "data"
    data.mkdir(parents=True)

    def run(*args: str) -> None:
        done = subprocess.run([promtool, *args], capture_output=True, text=True, timeout=PATIENCE_S)
        assert done.returncode == 0, done.stdout + done.stderr

    run("tsdb", "create-blocks-from", "openmetrics", str(source), str(data))
    config = {"global": {"scrape_interval": "15s"}}

    def backfill(name: str, rules: dict[str, Any], end: int, begin: int = start) -> None:
        """Evaluate ``rules`` with promtool over the data so far, from ``begin`` to ``end``, and load the blocks."""
        blocks = tmp / f"blocks-{name}"
        prometheus = Prometheus(prometheus_exe, tmp / "prometheus", config)
        try:
            wait_for("prometheus to be ready", prometheus.ready, patience(), [prometheus])
            rule_file = write_yaml(tmp / f"{name}.yaml", rules)
            run(
                "tsdb", "create-blocks-from", "rules", "--url", prometheus.url, "--start", str(begin),
                "--end", str(end), "--eval-interval", f"{STEP}s", "--output-dir", str(blocks), str(rule_file),
            )  # fmt: skip
        finally:
            prometheus.stop()
        for block in (b for b in blocks.iterdir() if b.is_dir()):
            shutil.move(str(block), data / block.name)

    backfill("phases", rules, start + 3600)  # the leaf's records of the hour
    runs = settled_run_rules(STEP)
    assert runs is not None
    # the central's records of finished runs, from before the long report's window to when all the runs have settled
    backfill("runs", runs, start + SETTLED_END, begin=start + SETTLED_END - SETTLED_FROM)
    prometheus = Prometheus(prometheus_exe, tmp / "prometheus", config)
    try:
        wait_for("prometheus to be ready", prometheus.ready, patience(), [prometheus])
        out = tmp / "out"
        report = subprocess.run(
            [
                sys.executable, "-m", "fleet", "report", "--prometheus", prometheus.url, "--start", str(start),
                "--end", str(start + 3600), "--out", str(out), "--workload", "tracker", "--policy", str(policy),
                "--workloads-dir", str(FIXTURES / "fleet" / "workloads"),
            ],
            capture_output=True, text=True, timeout=PATIENCE_S, cwd=ROOT,
        )  # fmt: skip
        long_report = subprocess.run(
            [
                sys.executable, "-m", "fleet", "report", "--prometheus", prometheus.url,
                "--start", str(start + SETTLED_END - SETTLED_FROM), "--end", str(start + SETTLED_END),
                "--out", str(tmp / "long"), "--workload", "tracker", "--policy", str(policy),
                "--workloads-dir", str(FIXTURES / "fleet" / "workloads"),
            ],
            capture_output=True, text=True, timeout=PATIENCE_S, cwd=ROOT,
        )  # fmt: skip
        yield {
            "run": report, "out": out, "url": prometheus.url, "start": start, "policy": policy,
            "long": long_report, "long_out": tmp / "long",
        }  # fmt: skip
    finally:
        prometheus.stop()


@pytest.mark.parametrize("window", ["hour", "long"])
def test_the_phase_table_holds_the_known_median_and_worst(phase_report: dict[str, Any], window: str) -> None:
    """Over the hour, from every run's series; over a window of SETTLED_FROM, from the central's records of finished
    runs: the same runs, medians and worsts."""
    run, out = (phase_report["run"], phase_report["out"]) if window == "hour" else (
        phase_report["long"], phase_report["long_out"])  # fmt: skip
    assert run.returncode == 0, run.stderr
    rows = markdown_tables((out / "report.md").read_text(encoding="utf-8"))[PHASES_TITLE]
    got = {r["card"]: r for r in rows}
    assert set(got) == set(EXPECTED)
    for card, (runs, phases) in EXPECTED.items():
        row = got[card]
        assert (row["cluster"], row["cloud"], row["runs"]) == ("phase-gke", "gcp", str(runs))
        assert set(phases) == set(PHASES)
        for phase, (median, worst) in phases.items():
            assert row[f"{phase}: median / worst (s)"] == f"{fmt(median, 3)} / {fmt(worst, 3)}", (card, phase)


def at(phase_report: dict[str, Any], promql: str, seconds: int) -> list[dict[str, Any]]:
    """The answer to ``promql`` at ``seconds`` into the hour."""
    query = urllib.parse.urlencode({"query": promql, "time": phase_report["start"] + seconds})
    status, body = http_get(f"{phase_report['url']}/api/v1/query?{query}")
    assert status == 200, body
    return json.loads(body)["data"]["result"]


def test_only_each_pools_newest_probe_pod_is_recorded_until_15_minutes_after_it_completed(
    phase_report: dict[str, Any],
) -> None:
    """At 2400 s probe a (completed, kept) and b both exist on the T4 pool: only b, the newest, has records, and c on
    the L4 (completed 822 s before); the benchmark pod has none. At the hour's end b and c completed over 15 minutes
    ago: nothing is recorded (the central keeps the last values)."""
    query = f"count by (gpu, pod) ({PHASE_RECORD})"
    got = {(r["metric"]["gpu"], r["metric"]["pod"]): r["value"][1] for r in at(phase_report, query, 2400)}
    assert got == {("t4", "probe-t4-b"): str(len(PHASES)), ("l4", "probe-l4-c"): str(len(PHASES))}
    assert at(phase_report, query, 3600) == []


def test_doctor_shows_each_phase_of_the_last_probe(phase_report: dict[str, Any]) -> None:
    """doctor's query on the cluster's Prometheus (here 2400 s into the hour) and its line per phase of the last
    probe."""
    cluster = load_fleet(phase_report["policy"], FIXTURES / "fleet" / "workloads").clusters["phase-gke"]
    rows = {r.what: r for r in probe_phase_rows(cluster, at(phase_report, probe_phase_query(cluster), 2400))}
    last = {"t4": ("probe-t4-b", (0, 30, 70, 15)), "l4": ("probe-l4-c", (600, 90, 210, 3))}
    assert set(rows) == {f"last probe of pool gpu-{card}: {phase}" for card in last for phase in PHASES}
    for card, (pod, seconds) in last.items():
        for phase, value in zip(PHASES, seconds, strict=True):
            row = rows[f"last probe of pool gpu-{card}: {phase}"]
            assert row.status == "ok" and row.state == f"{value:g} s in {PHASE_MEANING[phase]} ({pod})"


def test_doctor_says_when_no_probe_has_phases() -> None:
    cluster = load_fleet(FIXTURES / "fleet" / "fleet.yaml", FIXTURES / "fleet" / "workloads").clusters
    probed = next(c for c in cluster.values() if any(p.probe is not None for p in c.pools))
    rows = probe_phase_rows(probed, [])
    assert rows and all(r.status == "skip" and "no phases recorded" in r.state for r in rows)


def test_the_records_of_finished_runs_hold_each_run_once(phase_report: dict[str, Any]) -> None:
    """The central's records (fleet/model/probes/probe_phases.py ``settled_run_rules``) over the two hours: one sample
    per run and phase, the runs counted once each (a's series stopped when b was bound, b's and c's 15 minutes after
    they completed), and the report's long-window queries on them give what the hour's raw series give."""
    end = SETTLED_END
    samples = at(phase_report, f"count_over_time({PHASE_RUN_RECORD}[{end}s])", end)
    assert {(r["metric"]["gpu"], r["metric"]["phase"]): r["value"][1] for r in samples} == {
        (card, phase): str(runs) for card, (runs, _) in EXPECTED.items() for phase in PHASES
    }
    settled = at(phase_report, f"sum by (gpu) (sum_over_time({SETTLED_RUNS_RECORD}[{end}s]))", end)
    assert {r["metric"]["gpu"]: r["value"][1] for r in settled} == {card: str(r) for card, (r, _) in EXPECTED.items()}
    start = phase_report["start"]
    window = Window(start + end - SETTLED_FROM, start + end)
    long = settled_phase_queries(window)
    assert records_cover(at(phase_report, records_query(window), end), window, STEP)  # so the report reads them
    assert phase_queries(window, records=True) == long
    raw = phase_queries(Window(start, start + 3600))
    for name in ("runs", "median", "worst"):

        def answer(promql: str, when: int) -> dict[tuple[str, ...], str]:
            return {tuple(sorted(r["metric"].items())): r["value"][1] for r in at(phase_report, promql, when)}

        assert answer(long[name], end) == answer(raw[name], 3600), name
    # before the runs settled: none of them is in the records yet
    assert at(phase_report, f"{SETTLED_RUNS_RECORD}[{SETTLED_AFTER}s]", SETTLED_AFTER) == []


def test_a_window_the_records_do_not_cover_reads_every_runs_series(phase_report: dict[str, Any]) -> None:
    """A long window that begins before the records' first evaluation (the rule group deployed later, or a past
    window): the report reads the runs' own series, so its first runs are not lost."""
    start = phase_report["start"]
    window = Window(start + SETTLED_END - 2 * SETTLED_FROM, start + SETTLED_END)
    assert not records_cover(at(phase_report, records_query(window), SETTLED_END), window, STEP)
