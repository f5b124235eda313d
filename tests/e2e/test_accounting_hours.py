"""The central's hourly card-hours (fleet/model/billing/accounting_hours.py) and the report's sum of them
(fleet/report/accounting.py ``hourly_integral``) against real promtool and Prometheus.

* ``promtool test rules``: an hour of minute records gives the hand-computed card-hours, and the hour's end.
* The report's sum over a window of several hours, hourly records backfilled with ``promtool tsdb create-blocks-from
  rules`` (which evaluates at a phase of its own within the hour, milliseconds included, as a group's hash offset
  puts a live group's), over windows whose start and end fall mid-hour or on the evaluations themselves, equals the
  exact integral of the raw minute records and the hand-computed one.
"""

from __future__ import annotations

import json
import shutil
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from fleet.model.billing.accounting import BILLED, IDLE, USED
from fleet.model.billing.accounting_hours import HOUR_END, HOURLY, hourly_rules
from fleet.report.accounting import KEYS, accounting_queries, exact_integral, hourly_integral
from fleet.report.queries import Window
from tests.conftest import require_tool
from tests.e2e.processes import PATIENCE_S, Prometheus, patience, wait_for
from tests.e2e.support import promtool, write_yaml

pytestmark = pytest.mark.e2e

STEP = 60
POOL = {"billing_account": "physics", "cluster": "acct-gke", "cloud": "gcp", "gpu": "t4", "pool": "gpu-t4"}
THEORY = {**POOL, "billing_account": "theory"}


def test_an_hour_of_records_gives_the_hand_computed_card_hours(tmp_path: Path) -> None:
    rules = write_yaml(tmp_path / "hours.yaml", hourly_rules(STEP))
    assert promtool("check", "rules", rules).returncode == 0
    labels = ",".join(f'{k}="{v}"' for k, v in POOL.items())
    # minutes 0-30 one card, then none: the hour's points (minutes 1-60) hold 30 ones; billed 2 cards all along
    inputs = [
        {"series": f'{USED}{{{labels},workload="tracker"}}', "values": "1x30 0x150"},
        {"series": f'{USED}{{{labels},workload="other"}}', "values": "0.5x180"},
        {"series": f"{BILLED}{{{labels}}}", "values": "2x180"},
        {"series": f"{IDLE}{{{labels}}}", "values": "0x180"},
    ]
    expected = [
        (HOURLY[USED], 1.0, "1h"),  # 30/60 + 0.5 (the workloads added up)
        (HOURLY[USED], 0.5, "2h"),
        (HOURLY[BILLED], 2.0, "2h"),
        (HOURLY[IDLE], 0.0, "1h"),
    ]
    tests = [
        {"expr": name, "eval_time": at, "exp_samples": [{"labels": f"{name}{{{labels}}}", "value": value}]}
        for name, value, at in expected
    ]
    tests.append({"expr": HOUR_END, "eval_time": "2h", "exp_samples": [{"labels": HOUR_END, "value": 7200}]})
    spec = {
        "rule_files": [rules.name],
        "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": inputs, "promql_expr_test": tests}],
    }
    run = promtool("test", "rules", write_yaml(tmp_path / "tests.yaml", spec), cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    spec["tests"][0]["promql_expr_test"][0]["exp_samples"][0]["value"] = 0.5  # a wrong expectation fails
    run = promtool("test", "rules", write_yaml(tmp_path / "wrong.yaml", spec), cwd=tmp_path)
    assert run.returncode == 1


def test_no_hourly_rules_where_an_hour_is_not_whole_steps() -> None:
    assert hourly_rules(70) is None
    assert hourly_rules(60) is not None and hourly_rules(30) is not None


# --- several hours: the report's hourly sum against the exact integral -----------------------------------------------
MINUTES = 7 * 60  # the raw records: minute 0 to 420
BLOCK = 2 * 3600  # promtool's block length: the backfill writes one block per 2 hours, from whole multiples of it


def value(record: str, labels: dict[str, str], k: int) -> float:
    """A record's value at minute ``k``: changing every minute, so any point counted twice or missed shows."""
    theory = labels["billing_account"] == "theory"
    return {BILLED: 1 + k % 3, USED: (k % 7) / 2 + (1 if theory else 0), IDLE: (k % 5) / 4}[record]


SERIES = [(BILLED, POOL), (USED, POOL), (USED, THEORY), (IDLE, POOL)]


def by_hand(record: str, labels: dict[str, str], start: int, window: Window) -> float:
    """The integral by hand: one point a minute in (window start, window end], each the record's value then."""
    points = [k for k in range(MINUTES + 1) if window.start < start + k * STEP <= window.end]
    return sum(value(record, labels, k) for k in points) * STEP / 3600


@pytest.fixture(scope="module")
def hours_prometheus(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A Prometheus holding 7 hours of minute records and the hourly records promtool backfilled over them."""
    require_tool("promtool")
    prometheus_exe = require_tool("prometheus")
    tmp = tmp_path_factory.mktemp("accounting-hours")
    # whole 2-hour blocks, 10 hours ago: only the loaded blocks hold them. The backfill starts on a block's first
    # instant: promtool 2.42 moves the start to the group's next evaluation (a phase hashed from the rule file's
    # path) and, if that lies past the first block's end, writes no block at all. Measured here over 16 rule-file
    # paths: a start 17 min into an hour wrote nothing for 6 of them, a start on a block boundary for none.
    start = (int(time.time()) // BLOCK - 5) * BLOCK
    lines = []
    for record in (BILLED, USED, IDLE):
        lines.append(f"# TYPE {record} gauge")
        for name, labels in SERIES:
            if name == record:
                inner = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
                lines += [
                    f"{record}{{{inner}}} {value(record, labels, k)} {start + k * STEP}" for k in range(MINUTES + 1)
                ]
    source = tmp / "records.om"
    source.write_text("\n".join([*lines, "# EOF"]) + "\n", encoding="utf-8")
    data = tmp / "prometheus" / "data"
    data.mkdir(parents=True)

    def run(*args: str) -> None:
        done = promtool(*args)
        assert done.returncode == 0, done.stdout + done.stderr

    run("tsdb", "create-blocks-from", "openmetrics", str(source), str(data))
    config = {"global": {"scrape_interval": "15s"}}
    prometheus = Prometheus(prometheus_exe, tmp / "prometheus", config)
    blocks = tmp / "blocks"
    try:
        wait_for("prometheus to be ready", prometheus.ready, patience(), [prometheus])
        rules = write_yaml(tmp / "hours.yaml", hourly_rules(STEP))
        run(
            "tsdb", "create-blocks-from", "rules", "--url", prometheus.url, "--start", str(start),
            "--end", str(start + MINUTES * STEP), "--eval-interval", "1h", "--output-dir", str(blocks), str(rules),
        )  # fmt: skip
    finally:
        prometheus.stop()
    for block in (b for b in blocks.iterdir() if b.is_dir()):
        shutil.move(str(block), data / block.name)
    prometheus = Prometheus(prometheus_exe, tmp / "prometheus", config)
    try:
        wait_for("prometheus to be ready", prometheus.ready, patience(), [prometheus])
        yield prometheus.url, start, evaluations(prometheus.url, start + MINUTES * STEP)
    finally:
        prometheus.stop()


def query(url: str, promql: str, at: float) -> dict[tuple[str, ...], float]:
    params = urllib.parse.urlencode({"query": promql, "time": f"{at:.3f}"})
    with urllib.request.urlopen(f"{url}/api/v1/query?{params}", timeout=PATIENCE_S) as response:
        answer = json.load(response)
    assert answer["status"] == "success", answer
    return {tuple(s["metric"].get(k, "") for k in KEYS): float(s["value"][1]) for s in answer["data"]["result"]}


def evaluations(url: str, end: float) -> list[float]:
    """The instants the hourly records were evaluated at (the markers' timestamps, each also its value)."""
    params = urllib.parse.urlencode({"query": f"{HOUR_END}[12h]", "time": f"{end:.3f}"})
    with urllib.request.urlopen(f"{url}/api/v1/query?{params}", timeout=PATIENCE_S) as response:
        (series,) = json.load(response)["data"]["result"]
    assert all(float(t) == float(v) for t, v in series["values"])
    return [float(t) for t, _ in series["values"]]


@pytest.mark.parametrize("where", ["mid-hour", "on-the-evaluations", "whole-hours"])
def test_the_hourly_sum_equals_the_exact_integral(hours_prometheus: Any, where: str) -> None:
    url, start, evaluated = hours_prometheus
    assert len(evaluated) >= 6
    window = {
        "mid-hour": Window(start + 23 * 60 + 0.5, start + 6 * 3600 + 41 * 60),
        "on-the-evaluations": Window(evaluated[0], evaluated[5]),
        "whole-hours": Window(start + 3600, start + 6 * 3600),
    }[where]
    queries = accounting_queries(window, STEP)
    for record, name in ((BILLED, "billed"), (USED, "used"), (IDLE, "idle")):
        assert queries[name] == hourly_integral(window, STEP, record)  # the report takes the hourly records
        hourly = query(url, queries[name], window.end)
        exact = query(url, exact_integral(window, STEP, record), window.end)
        expected = {
            tuple(labels[k] for k in KEYS): by_hand(record, labels, start, window)
            for rec, labels in SERIES
            if rec == record
        }
        assert set(hourly) == set(expected), record
        for key, hours in expected.items():
            assert hourly[key] == pytest.approx(hours, abs=1e-9), (record, key)
            assert exact[key] == pytest.approx(hours, abs=1e-9), (record, key)


def test_the_window_holds_whole_hourly_records(hours_prometheus: Any) -> None:
    """The hourly path reads the records whose hour lies in the window: those from an hour after its start to its
    end (several here, so the sum is not the edges' integral alone)."""
    url, start, evaluated = hours_prometheus
    window = Window(start + 23 * 60, start + 6 * 3600 + 41 * 60)
    span = int((window.seconds - 3600) * 1000)
    counted = query(url, f"count_over_time({HOUR_END}[{span}ms])", window.end)
    inside = [t for t in evaluated if window.start + 3600 <= t <= window.end]
    assert len(inside) >= 4 and list(counted.values()) == [float(len(inside))]
