"""The report's Queues table against a real Prometheus holding an hour of Kueue's metrics whose totals are known:
the manager's admissions and wait to admission, the workers' wait from admission to running, federated to the
central with their ``cluster`` label (fleet/report/queues.py).

The series are Kueue 0.19.2's as it exports them (pkg/metrics/metrics.go): ``multikueue_workloads_admitted_total``
labelled ``cluster_queue``, ``cluster``, ``replica_role``; ``kueue_admission_wait_time_seconds`` and
``kueue_admitted_until_ready_wait_time_seconds`` histograms labelled ``cluster_queue``, ``priority_class``,
``replica_role`` (``leader``: pkg/util/roletracker; an empty priority class is no label once Prometheus stores it),
with Kueue's buckets (``generateExponentialBuckets``: 1, then 2.5 doubling; 16 of them for the admission wait, 14
for the wait to ready). They are written here at one-minute steps and loaded with ``promtool tsdb create-blocks-from
openmetrics``, so every sample's time is exact. Every counter is still 0 at minute 0, the window's first sample, so
``increase()`` does not extrapolate: each increase is the counter's value at minute 60. The same hour again with
each series born at its first event, as Kueue creates them, gives the same table. The fleet is
tests/helpers.py QUEUED (``gpu``: cern-gpu, eks-a, gke-a in that order; ``tpu``: gke-a). By hand:

* ``gpu``: admitted on cern-gpu at minutes 10, 20, 30, 40 (4), on eks-a at 35 and 50 (2), on gke-a at 55 (1): 7 in
  all, 3 past the first cluster; waits to admission 10, 20, 30, 40, 310 (priority class ``high``), 320, 650 s: mean
  1380 / 7 s; in buckets le=10: 1, 20: 2, 40: 4, 320: 6, 1280: 7, so the median (rank 3.5) lies in (20, 40], holding
  2 of which it needs 1.5: 20 + 20 * 1.5 / 2 = 35 s (Prometheus' interpolation; the true median is 30), the worst at
  most 1280 s. From admission to running: on cern-gpu 30, 45, 50, 100 s (mean 56.25; buckets 40: 1, 80: 3, 160: 4;
  median in (40, 80] 40 + 40 * 1 / 2 = 60; worst at most 160), on eks-a 200 and 900 s (mean 550; median in (160,
  320] 160 + 160 * 1 / 1 = 320; worst at most 1280), on gke-a one of 12000 s, beyond the last bucket 10240 (mean
  12000; median the last bound, 10240, as histogram_quantile answers in the +Inf bucket; worst more than 10240); all
  7: mean 13325 / 7, median rank 3.5 in (80, 160] 80 + 80 * 0.5 / 1 = 120, worst more than 10240. Submission to
  running: 1380 / 7 + 13325 / 7 = 14705 / 7 s;
* ``tpu``: admitted on gke-a at 12 and 48 (2), its first and only cluster: 0 spilled; waits 5 and 15 s: mean 10,
  median in (2.5, 5] 2.5 + 2.5 * 1 / 1 = 5, worst at most 20; to running 4 and 6 s: mean 5, median 5, worst at most
  10; submission to running 15 s;
* ``queue-old``, a ClusterQueue the policy does not have: 1 on cern-gpu at 30, no wait recorded: its place and
  spills unknown;
* ``gpu-t4``, a ClusterQueue of a worker's own (a sweep's): a wait to running there makes no row.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from fleet.report.formatting import fmt
from fleet.report.tables import NO_QUEUES, QUEUES_TITLE
from tests.conftest import FIXTURES, ROOT, require_tool
from tests.e2e.processes import PATIENCE_S, Prometheus, patience, wait_for
from tests.e2e.support import blocks_from_openmetrics, markdown_tables
from tests.helpers import QUEUED, QUEUED_STACKS, write_policy

pytestmark = pytest.mark.e2e

STEP = 60
POINTS = range(0, 61)
ROLE = 'replica_role="leader"'
# kueue v0.19.2 pkg/metrics/metrics.go generateExponentialBuckets(count): 1, then 2.5 * 2**i for i < count - 1
ADMISSION_BUCKETS = [1.0, *(2.5 * 2**i for i in range(15))]
READY_BUCKETS = [1.0, *(2.5 * 2**i for i in range(13))]
# (cluster_queue, worker) -> the minutes of its admissions
ADMISSIONS = {
    ("queue-gpu", "cern-gpu"): (10, 20, 30, 40),
    ("queue-gpu", "eks-a"): (35, 50),
    ("queue-gpu", "gke-a"): (55,),
    ("queue-tpu", "gke-a"): (12, 48),
    ("queue-old", "cern-gpu"): (30,),
}
# the manager's waits to admission: (cluster_queue, priority class) -> (minute, wait in seconds) of each
WAITS = {
    ("queue-gpu", ""): ((10, 10), (20, 20), (30, 30), (40, 40), (50, 320), (55, 650)),
    ("queue-gpu", "high"): ((35, 310),),
    ("queue-tpu", ""): ((12, 5), (48, 15)),
}
# the workers' waits from admission to running pods: (cluster_queue, worker) -> (minute, wait in seconds) of each
STARTS = {
    ("queue-gpu", "cern-gpu"): ((11, 30), (21, 45), (31, 50), (42, 100)),
    ("queue-gpu", "eks-a"): ((39, 200), (59, 900)),
    ("queue-gpu", "gke-a"): ((58, 12000),),
    ("queue-tpu", "gke-a"): ((13, 4), (49, 6)),
    ("gpu-t4", "gke-a"): ((20, 7),),
}
# the manager's own Kueue measures its copies of the dispatched jobs too, scraped on the central with no ``cluster``
# label: not a worker's wait, so no part of any column (found on the real tier)
MANAGER_STARTS = {"queue-gpu": ((15, 30000), (45, 30000))}
CLOUDS = {"cern-gpu": "openstack", "eks-a": "aws", "gke-a": "gcp"}
# the Queues table by hand: (queue, worker) -> (place, admitted, to running: median, worst, mean)
EXPECTED_WORKERS = {
    ("gpu", "cern-gpu"): ("1", "4", fmt(60.0), "≤ 160", fmt(56.25)),
    ("gpu", "eks-a"): ("2", "2", fmt(320.0), "≤ 1,280", fmt(550.0)),
    ("gpu", "gke-a"): ("3", "1", fmt(10240.0), "> 10,240", fmt(12000.0)),
    ("tpu", "gke-a"): ("1", "2", fmt(5.0), "≤ 10", fmt(5.0)),
    ("queue-old", "cern-gpu"): ("—", "1", "—", "—", "—"),
}
# queue -> (total, to admission: median, worst, mean; to running: median, worst, mean; submission to running, spilled)
EXPECTED_QUEUES = {
    "gpu": ("7", fmt(35.0), "≤ 1,280", fmt(1380 / 7), fmt(120.0), "> 10,240", fmt(13325 / 7), fmt(14705 / 7), "3"),
    "tpu": ("2", fmt(5.0), "≤ 20", fmt(10.0), fmt(5.0), "≤ 10", fmt(5.0), fmt(15.0), "0"),
    "queue-old": ("1", "—", "—", "—", "—", "—", "—", "—", "—"),
}
WAIT_COLUMNS = [
    "to admission, median (s)", "to admission, worst (s)", "to admission, mean (s)",
    "admission to running, median (s)", "admission to running, worst (s)", "admission to running, mean (s)",
]  # fmt: skip


def histogram(
    name: str, labels: str, buckets: list[float], observed: tuple[tuple[int, float], ...], start: int, born: bool
):
    """The minute-by-minute series of one Kueue histogram child: a bucket per bound and +Inf, the sum and the count;
    when ``born``, from its first observation only, as Kueue creates the child then."""
    first = min(m for m, _ in observed) if born else 0
    points = [k for k in POINTS if k >= first]
    lines = []
    for le in [*(f"{b:g}" for b in buckets), "+Inf"]:
        bound = float(le)
        lines += [
            f'{name}_bucket{{{labels},le="{le}"}} {sum(m <= k and w <= bound for m, w in observed)} {start + k * STEP}'
            for k in points
        ]
    lines += [f"{name}_sum{{{labels}}} {sum(w for m, w in observed if m <= k)} {start + k * STEP}" for k in points]
    lines += [f"{name}_count{{{labels}}} {sum(m <= k for m, _ in observed)} {start + k * STEP}" for k in points]
    return lines


def openmetrics(start: int, born: bool) -> str:
    """Kueue's series minute by minute: on the manager, admissions per queue and worker and the waits to admission;
    from each worker, federated with its external labels, the waits from admission to running. Every series is there
    from minute 0 at 0, or, when ``born``, from its first event on (as Kueue creates them), the central scraping
    (``up``) all along."""
    lines = ["# TYPE up gauge", *(f'up{{job="kueue"}} 1 {start + k * STEP}' for k in POINTS)] if born else []
    lines.append("# TYPE multikueue_workloads_admitted_total gauge")
    for (queue, worker), minutes in ADMISSIONS.items():
        series = f'multikueue_workloads_admitted_total{{cluster="{worker}",cluster_queue="{queue}",{ROLE}}}'
        lines += [
            f"{series} {sum(m <= k for m in minutes)} {start + k * STEP}"
            for k in POINTS
            if k >= min(minutes) or not born
        ]
    name = "kueue_admission_wait_time_seconds"
    lines.append(f"# TYPE {name} histogram")
    for (queue, priority), waits in WAITS.items():
        labels = f'cluster_queue="{queue}",{ROLE}' + (f',priority_class="{priority}"' if priority else "")
        lines += histogram(name, labels, ADMISSION_BUCKETS, waits, start, born)
    name = "kueue_admitted_until_ready_wait_time_seconds"
    lines.append(f"# TYPE {name} histogram")
    for (queue, worker), waits in STARTS.items():
        labels = f'cloud="{CLOUDS[worker]}",cluster="{worker}",cluster_queue="{queue}",{ROLE}'
        lines += histogram(name, labels, READY_BUCKETS, waits, start, born)
    for queue, waits in MANAGER_STARTS.items():
        lines += histogram(name, f'cluster_queue="{queue}",{ROLE}', READY_BUCKETS, waits, start, born)
    return "\n".join([*lines, "# EOF"]) + "\n"


@pytest.fixture(scope="module", params=["from-zero", "born-at-first-event"])
def queues_report(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> dict[str, Any]:
    """The report over the hour, its series there from minute 0 or each born at its first event (where
    ``increase()`` alone would miss every first event: 0 admissions on gke-a, no tpu row)."""
    promtool, prometheus_exe = require_tool("promtool"), require_tool("prometheus")
    tmp = tmp_path_factory.mktemp("queues")
    start = (int(time.time()) // 3600 - 4) * 3600  # an hour, whole, four hours ago: only the loaded blocks hold it
    blocks_from_openmetrics(promtool, openmetrics(start, request.param != "from-zero"), tmp)
    policy, _stacks = write_policy(tmp, QUEUED, QUEUED_STACKS)
    prometheus = Prometheus(prometheus_exe, tmp / "prometheus", {"global": {"scrape_interval": "15s"}})
    try:
        wait_for("prometheus to be ready", prometheus.ready, patience(), [prometheus])
        out = tmp / "out"
        run = subprocess.run(
            [
                sys.executable, "-m", "fleet", "report", "--prometheus", prometheus.url, "--start", str(start),
                "--end", str(start + 3600), "--out", str(out), "--policy", str(policy),
                "--workload", "tracker",
                "--workloads-dir", str(FIXTURES / "fleet" / "workloads"),
            ],
            capture_output=True, text=True, timeout=PATIENCE_S, cwd=ROOT,
        )  # fmt: skip
    finally:
        prometheus.stop()
    return {"run": run, "out": Path(out)}


def test_queues_table_holds_the_known_admissions_waits_to_admission_and_to_running_and_spills(
    queues_report: dict[str, Any],
) -> None:
    run, out = queues_report["run"], queues_report["out"]
    assert run.returncode == 0, run.stderr
    text = (out / "report.md").read_text(encoding="utf-8")
    assert NO_QUEUES not in text
    rows = markdown_tables(text)[QUEUES_TITLE]
    workers = {
        (r["queue"], r["worker"]): (r["place"], r["admitted"], *(r[c] for c in WAIT_COLUMNS[3:]))
        for r in rows
        if r["worker"] != "all workers"
    }
    assert workers == EXPECTED_WORKERS
    # in the policy's order: gpu, then tpu, then what the policy does not name
    assert [r["queue"] for r in rows if r["worker"] == "all workers"] == ["gpu", "tpu", "queue-old"]
    totals = {
        r["queue"]: (r["admitted"], *(r[c] for c in WAIT_COLUMNS), r["submission to running, mean (s)"],
                     r["spilled past the first"])
        for r in rows
        if r["worker"] == "all workers"
    }  # fmt: skip
    assert totals == EXPECTED_QUEUES
    # the worker rows of a queue follow its order, the first cluster first
    assert [r["worker"] for r in rows if r["queue"] == "gpu"][:3] == ["cern-gpu", "eks-a", "gke-a"]
