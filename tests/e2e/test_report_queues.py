"""The report's Queues table against a real Prometheus holding Kueue's manager metrics of one hour whose totals are
known (fleet/report/queues.py).

The series are written here at one-minute steps and loaded with ``promtool tsdb create-blocks-from openmetrics``, so
every sample's time is exact. Every counter is still 0 at minute 1, the window's first sample, so ``increase()``
does not extrapolate past it (Prometheus extrapolates a counter no further back than its zero): each increase is the
counter's value at minute 60. The fleet is tests/helpers.py QUEUED (``gpu``: cern-gpu, eks-a, gke-a in that order;
``tpu``: gke-a). By hand:

* ``gpu``: admitted on cern-gpu at minutes 10, 20, 30, 40 (4), on eks-a at 35 and 50 (2), on gke-a at 55 (1): 7 in
  all, 3 past the first cluster; waits 10, 20, 30, 40, 310, 320, 650 s: mean 1380 / 7 = 197.142... s;
* ``tpu``: admitted on gke-a at 12 and 48 (2), its first and only cluster: 0 spilled; waits 5 and 15 s: mean 10 s;
* ``queue-old``, a ClusterQueue the policy does not have: 1 on cern-gpu at 30, no wait recorded: its place and
  spills unknown.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from fleet.report.report import NO_QUEUES, QUEUES_TITLE, fmt
from tests.conftest import FIXTURES, ROOT, require_tool
from tests.e2e.processes import Prometheus, wait_for
from tests.e2e.support import blocks_from_openmetrics, markdown_tables
from tests.helpers import QUEUED, QUEUED_STACKS, write_policy

pytestmark = pytest.mark.e2e

STEP = 60
POINTS = range(0, 61)
# (cluster_queue, worker) -> the minutes of its admissions; cluster_queue -> (minute, wait in seconds) of each
ADMISSIONS = {
    ("queue-gpu", "cern-gpu"): (10, 20, 30, 40),
    ("queue-gpu", "eks-a"): (35, 50),
    ("queue-gpu", "gke-a"): (55,),
    ("queue-tpu", "gke-a"): (12, 48),
    ("queue-old", "cern-gpu"): (30,),
}
WAITS = {
    "queue-gpu": ((10, 10), (20, 20), (30, 30), (40, 40), (35, 310), (50, 320), (55, 650)),
    "queue-tpu": ((12, 5), (48, 15)),
}
# the Queues table by hand: (queue, worker) -> (place, admitted); queue -> (total, mean wait, spilled)
EXPECTED_WORKERS = {
    ("gpu", "cern-gpu"): ("1", "4"),
    ("gpu", "eks-a"): ("2", "2"),
    ("gpu", "gke-a"): ("3", "1"),
    ("tpu", "gke-a"): ("1", "2"),
    ("queue-old", "cern-gpu"): ("—", "1"),
}
EXPECTED_QUEUES = {
    "gpu": ("7", fmt(1380 / 7, 4), "3"),
    "tpu": ("2", fmt(10.0, 4), "0"),
    "queue-old": ("1", "—", "—"),
}


def openmetrics(start: int) -> str:
    """Kueue's counters on the manager, minute by minute: admissions per queue and worker, the waits' sum and count."""
    lines = ["# TYPE multikueue_workloads_admitted_total gauge"]
    for (queue, worker), minutes in ADMISSIONS.items():
        series = f'multikueue_workloads_admitted_total{{cluster="{worker}",cluster_queue="{queue}"}}'
        lines += [f"{series} {sum(m <= k for m in minutes)} {start + k * STEP}" for k in POINTS]
    for part, value in (("sum", lambda w: w), ("count", lambda w: 1)):
        name = f"kueue_admission_wait_time_seconds_{part}"
        lines.append(f"# TYPE {name} gauge")
        for queue, waits in WAITS.items():
            lines += [
                f'{name}{{cluster_queue="{queue}"}} {sum(value(w) for m, w in waits if m <= k)} {start + k * STEP}'
                for k in POINTS
            ]
    return "\n".join([*lines, "# EOF"]) + "\n"


@pytest.fixture(scope="module")
def queues_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    promtool, prometheus_exe = require_tool("promtool"), require_tool("prometheus")
    tmp = tmp_path_factory.mktemp("queues")
    start = (int(time.time()) // 3600 - 4) * 3600  # an hour, whole, four hours ago: only the loaded blocks hold it
    blocks_from_openmetrics(promtool, openmetrics(start), tmp)
    policy, _stacks = write_policy(tmp, QUEUED, QUEUED_STACKS)
    prometheus = Prometheus(prometheus_exe, tmp / "prometheus", {"global": {"scrape_interval": "15s"}})
    try:
        wait_for("prometheus to be ready", prometheus.ready, time.monotonic() + 60, [prometheus])
        out = tmp / "out"
        run = subprocess.run(
            [
                sys.executable, "-m", "fleet", "report", "--prometheus", prometheus.url, "--start", str(start),
                "--end", str(start + 3600), "--out", str(out), "--policy", str(policy),
                "--workload", "tracker",
                "--workloads-dir", str(FIXTURES / "fleet" / "workloads"),
            ],
            capture_output=True, text=True, timeout=120, cwd=ROOT,
        )  # fmt: skip
    finally:
        prometheus.stop()
    return {"run": run, "out": Path(out)}


def test_queues_table_holds_the_known_admissions_waits_and_spills(queues_report: dict[str, Any]) -> None:
    run, out = queues_report["run"], queues_report["out"]
    assert run.returncode == 0, run.stderr
    text = (out / "report.md").read_text(encoding="utf-8")
    assert NO_QUEUES not in text
    rows = markdown_tables(text)[QUEUES_TITLE]
    workers = {(r["queue"], r["worker"]): (r["place"], r["admitted"]) for r in rows if r["worker"] != "all workers"}
    assert workers == EXPECTED_WORKERS
    # in the policy's order: gpu, then tpu, then what the policy does not name
    assert [r["queue"] for r in rows if r["worker"] == "all workers"] == ["gpu", "tpu", "queue-old"]
    totals = {
        r["queue"]: (r["admitted"], r["mean wait to admission (s)"], r["spilled past the first"])
        for r in rows
        if r["worker"] == "all workers"
    }
    assert totals == EXPECTED_QUEUES
    # the worker rows of a queue follow its order, the first cluster first
    assert [r["worker"] for r in rows if r["queue"] == "gpu"][:3] == ["cern-gpu", "eks-a", "gke-a"]
