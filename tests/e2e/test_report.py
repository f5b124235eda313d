"""``python -m fleet report`` against a real Prometheus fed by real mtail processes on 127.0.0.1.

The loopback fleet stands in for the central Prometheus after federation:

* one mtail per (workload, card), started with the sidecar's flags on a pre-created empty log, to which
  the test appends the shipped ``workloads/<name>/sample.log`` (or its first results, so that cards differ)
  in chunks over a few seconds, as a running benchmark would;
* a GPU exporter (a thread) serving the leaf GPU recording rules (``gpufleet:*``, names from
  fleet/model/monitoring/prometheus.py) for the benchmark pods of two of the three clusters, as federation delivers
  them;
* one mtail per probed card with the pool probe's program (fleet/model/probes/probe), fed by really running its probe.sh
  a few times (a stand-in nvidia-smi, ``true`` or ``false``, decides whether the card answers: there is none here),
  each run scraped before the next, as the probe's CronJob runs one pod at a time;
* one ``prometheus`` scraping all of them every second: each mtail target carries the labels the
  PodMonitor adds (``workload``, ``gpu``, ``cluster``, ``cloud``: fleet/model/core/pod_contract.py METRIC_LABELS,
  plus the operator's ``namespace`` and ``pod``); the GPU job keeps the exporter's labels
  (``honor_labels``, as the central's federation jobs do).

The expected numbers come from ``mtail --one_shot`` over the very log files the live mtails read.

Run ``python -m tests.e2e.test_report DIR`` to build the same loopback fleet, write a report into DIR and
print the exact command that made it (how docs/sample-report.png was made).

With ``GPU_FLEET_UPDATE_SCREENSHOT=1`` (``make screenshot``) the loopback fleet runs the shipped workloads' sample logs
only (not the tests' own workload) and the browser test writes the report's first screen to
docs/report-first-screen.png; otherwise it writes it into its temp folder, never into docs/.
"""

from __future__ import annotations

import atexit
import base64
import functools
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from components.kubernetes.benchmark import PROBE_SERIES_RELABELINGS
from fleet.model.core import pod_contract
from fleet.model.core.workloads import PROBE_DIR, Workload, WorkloadSpec, load_workload, load_workloads
from fleet.model.monitoring.prometheus import leaf_external_labels
from fleet.report.costs import approximate, load_prices
from fleet.report.queries import GPU_ENERGY, GPU_UTILIZATION, runs_counter
from tests.conftest import ROOT, require_tool
from tests.e2e.processes import PATIENCE_S, Mtail, Process, Prometheus, TextExporter, free_port, patience, wait_for
from tests.e2e.support import SCREEN, markdown_tables, open_in_chromium, png_size, run_probe

pytestmark = pytest.mark.e2e

NAMESPACE = "benchmarks"
PLOT_SIZE = (1000, 500)  # fleet/report/plots.py: 10 x 5 inches at 100 dpi

# The lines of each sample log that end one result (the run counter's lines): a card that ran fewer
# results gets the log up to its k-th result.
RESULT_LINE = {
    "simpletrack": re.compile(r" particles\*turns/seconds, "),
    "madgraph4gpu": re.compile(r"^TOTAL +:"),
    "pyhf": re.compile(r"^pyhf fit "),
    "3dgan": re.compile(r"^Time taken by epoch ?\d+ was "),
    # the tests' own workload, whatever the repository ships: the lab fleet's gemm (a real run), one result per
    # timed product of the largest size, its headline
    "gemm": re.compile(r"^gemm run backend=\w+ size=4096 "),
}
# Where the tests' own workload lives (tests/fixtures/ownfleet, the lab fleet of tests/test_own_fleet.py).
OWN_WORKLOADS = ROOT / "tests" / "fixtures" / "ownfleet" / "workloads"
OWN = "gemm"


@dataclass(frozen=True)
class Card:
    """A (cluster, cloud, card) of the loopback fleet: how many results it runs, and its GPU readings."""

    cluster: str
    cloud: str
    gpu: str
    model: str
    results: str  # "all", "all-but-last", "half" or "one" of the sample's results
    utilization: float | None  # GPU utilisation the exporter reports (None: no GPU metrics for this cluster)
    watts: float = 0.0
    probe_runs: tuple[bool, ...] = ()  # whether each probe run of the pool finds its card (none: not probed)


# The loopback fleet's own policy (tests/fixtures/report/fleet.yaml): its clusters and cards, so the report resolves
# their machines (and prices) from it, whatever fleet the repository ships.
REPORT_CLUSTERS = ROOT / "tests" / "fixtures" / "report" / "fleet.yaml"
CARDS = (
    Card("loop-aws", "aws", "t4", "Tesla T4", "all", utilization=62.5, watts=70.0, probe_runs=(True, False, True)),
    Card("loop-aws", "aws", "a10g", "NVIDIA A10G", "all-but-last", utilization=80.0, watts=150.0),
    Card("loop-gke", "gcp", "l4", "NVIDIA L4", "half", utilization=41.0, watts=72.0, probe_runs=(True, True)),
    Card("loop-site", "openstack", "v100", "Tesla V100-PCIE-32GB", "one", utilization=None),
)
# Set to 1 (``make screenshot``): the report of the sample data only, its first screen written to FIRST_SCREEN.
UPDATE_SCREENSHOT = "GPU_FLEET_UPDATE_SCREENSHOT"
FIRST_SCREEN = ROOT / "docs" / "report-first-screen.png"


def updating_screenshot() -> bool:
    """Whether this run makes docs/report-first-screen.png (``GPU_FLEET_UPDATE_SCREENSHOT=1``)."""
    return os.environ.get(UPDATE_SCREENSHOT) == "1"


def first_screen(tmp: Path) -> Path:
    """Where the browser test saves the report's first screen: docs/ when updating it, else ``tmp``."""
    return FIRST_SCREEN if updating_screenshot() else tmp / "first-screen.png"


def known_workloads(sample_only: bool) -> list[str]:
    """The shipped workloads this test knows how to cut into results (RESULT_LINE) and that the repository still has,
    and, unless ``sample_only`` (the screenshot in docs/ shows the sample data), the tests' own: the report is tested
    on every fleet."""
    shipped = set(RESULT_LINE) & set(load_workloads())
    return sorted(shipped if sample_only else shipped | {OWN})


KNOWN = known_workloads(updating_screenshot())


@functools.cache
def report_workloads() -> Path:
    """The loopback fleet's workloads folder: the KNOWN shipped workloads and the tests' own."""
    folder = Path(tempfile.mkdtemp(prefix="report-workloads-"))
    atexit.register(shutil.rmtree, folder, True)
    shipped = load_workloads()
    for name in KNOWN:
        shutil.copytree(OWN_WORKLOADS / name if name == OWN else shipped[name].folder, folder / name)
    return folder


def workloads() -> dict[str, Workload]:
    """The loopback fleet's workloads, by name."""
    return load_workloads(report_workloads())


@functools.cache
def report_policy() -> Path:
    """The loopback fleet's policy file: its clusters, and every KNOWN workload placed on all their cards."""
    folder = Path(tempfile.mkdtemp(prefix="report-policy-"))
    atexit.register(shutil.rmtree, folder, True)
    placements = "".join(f"  {name}: all\n" for name in KNOWN)
    path = folder / "fleet.yaml"
    path.write_text(REPORT_CLUSTERS.read_text(encoding="utf-8") + "workloads:\n" + placements, encoding="utf-8")
    return path


def pod_name(workload: str, card: Card) -> str:
    return f"{workload}-{card.gpu}-{card.cluster}-x7k2p"


def utilization(workload: str, card: Card) -> float:
    """The GPU utilisation the exporter reports for the workload's pod on the card: the card's, plus a step per
    workload, so that a report that mixed up the workloads' pods (one GPU query serves them all) shows it."""
    assert card.utilization is not None
    return card.utilization + 2.0 * sorted(workloads()).index(workload)


def log_lines(workload: str, results: str) -> list[str]:
    """The sample log, or its lines up to the end of its k-th result."""
    lines = workloads()[workload].sample_log.read_text(encoding="utf-8").splitlines(keepends=True)
    ends = [i for i, line in enumerate(lines) if RESULT_LINE[workload].search(line)]
    assert ends, f"{workload}: no result line in the sample"
    k = {"all": len(ends), "all-but-last": len(ends) - 1, "half": math.ceil(len(ends) / 2), "one": 1}[results]
    return lines if k == len(ends) else lines[: ends[k - 1] + 1]


SAMPLE = re.compile(r"^(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)(?:\{(?P<labels>.*)\})? (?P<value>\S+)(?: \d+)?$")
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def one_shot(mtail: str, programs: Path, log: Path) -> list[tuple[str, dict[str, str], float]]:
    """Every sample ``mtail --one_shot`` prints for ``log``: (name, labels, value)."""
    run = subprocess.run(
        [
            *(mtail, "--one_shot", "--one_shot_format=prometheus", "--emit_prog_label=false", "--logtostderr"),
            *("--progs", str(programs), "--logs", str(log), "--address", "127.0.0.1", "--port", "0"),
        ],
        capture_output=True,
        text=True,
        timeout=PATIENCE_S,
    )
    assert run.returncode == 0, run.stderr
    out = []
    for line in run.stdout.splitlines():
        found = SAMPLE.match(line) if line and not line.startswith("#") else None
        if found:
            out.append((found["name"], dict(LABEL.findall(found["labels"] or "")), float(found["value"])))
    return out


def runs_match(spec: WorkloadSpec) -> dict[str, str]:
    """The labels of the headline's match that the run counter has too: the report counts the runs of those series
    only (fleet/report/queries.py), such as the largest size's products of a workload timed at several sizes."""
    declared = next((m.labels for m in spec.metrics if m.name == runs_counter(spec)), [])
    return {k: v for k, v in spec.headline.match.items() if k in declared}


@dataclass(frozen=True)
class Expected:
    """What the report must say for one (workload, card), from mtail's one-shot output."""

    result: float
    runs: float


def expected_values(mtail: str, programs: Path, log: Path, workload: str) -> Expected:
    spec = workloads()[workload].spec
    samples = one_shot(mtail, programs, log)
    head = [
        v
        for name, labels, v in samples
        if name == spec.headline.metric and all(labels.get(k) == val for k, val in spec.headline.match.items())
    ]
    counter, narrowed = runs_counter(spec), runs_match(spec)
    runs = sum(v for name, labels, v in samples if name == counter and narrowed.items() <= labels.items())
    assert len(head) == 1 and runs > 0, (workload, samples)
    return Expected(head[0], runs)


# The GitLab runners of two cards, as the central holds their federated counters: jobs start at a steady rate, a
# fixed share fails, and every job takes the same time, so the report's failed share and mean duration are exact
# whatever increase() extrapolates.
RUNNER_CARDS = {("loop-aws", "aws", "t4"): (2.0, 0.25, 42.5), ("loop-gke", "gcp", "l4"): (1.0, 0.0, 300.0)}


class RunnerExporter:
    """Serves gitlab_runner_jobs_total, _failed_jobs_total and the job duration's sum and count per card, growing
    with the time since it started (jobs per second, failed share, seconds per job in RUNNER_CARDS)."""

    def __init__(self) -> None:
        self.started = time.time()
        self.server = TextExporter(self.exposition)
        self.address = self.server.address

    def exposition(self) -> str:
        elapsed = time.time() - self.started
        lines = [
            "# TYPE gitlab_runner_jobs_total counter",
            "# TYPE gitlab_runner_failed_jobs_total counter",
            "# TYPE gitlab_runner_job_duration_seconds histogram",
        ]
        for (cluster, cloud, gpu), (per_second, failed, seconds) in RUNNER_CARDS.items():
            jobs = per_second * elapsed
            base = f'cluster="{cluster}",cloud="{cloud}",gpu="{gpu}",runner="abc123",system_id="s_1"'
            lines += [
                f"gitlab_runner_jobs_total{{{base}}} {jobs:.3f}",
                f'gitlab_runner_failed_jobs_total{{{base},failure_reason="script_failure"}} {failed * jobs:.3f}',
                f'gitlab_runner_job_duration_seconds_bucket{{{base},le="+Inf"}} {jobs:.3f}',
                f"gitlab_runner_job_duration_seconds_sum{{{base}}} {seconds * jobs:.3f}",
                f"gitlab_runner_job_duration_seconds_count{{{base}}} {jobs:.3f}",
            ]
        return "\n".join(lines) + "\n"

    def stop(self) -> None:
        self.server.stop()


class GpuExporter:
    """Serves the leaf GPU recording rules for the benchmark pods, as the central holds them after federation:
    a constant utilisation and an energy counter growing at a constant power since the exporter started."""

    def __init__(self, pods: list[tuple[Card, str, float]]):
        self.started = time.time()
        self.pods = pods
        self.server = TextExporter(self.exposition)
        self.address = self.server.address

    def exposition(self) -> str:
        elapsed = time.time() - self.started
        lines = [f"# TYPE {GPU_UTILIZATION} gauge", f"# TYPE {GPU_ENERGY} counter"]
        for card, pod, percent in self.pods:
            labels = leaf_external_labels(card.cluster, card.cloud) | {
                "modelName": card.model,
                "namespace": NAMESPACE,
                "pod": pod,
            }
            text = ",".join(f'{k}="{v}"' for k, v in labels.items())
            lines.append(f"{GPU_UTILIZATION}{{{text}}} {percent}")
            lines.append(f"{GPU_ENERGY}{{{text}}} {card.watts * elapsed:.3f}")
        return "\n".join(lines) + "\n"

    def stop(self) -> None:
        self.server.stop()


PROBE = load_workload(PROBE_DIR)
PROBE_LINE = re.compile(
    r"^gpufleet probe .* scheduled=(?P<scheduled>\d+) started=(?P<started>\d+) success=(?P<ok>[01])$"
)


@dataclass(frozen=True)
class ProbeRun:
    """One probe run as probe.sh printed it."""

    started: int
    wait: int
    success: bool


def probe_run(line: str) -> ProbeRun:
    found = PROBE_LINE.match(line.strip())
    assert found, line
    started = int(found["started"])
    return ProbeRun(started, started - int(found["scheduled"]), found["ok"] == "1")


def feed_probes(tmp: Path, logs: dict[Card, Path], prometheus: Prometheus, running: list[Process]):
    """Run each probed card's probe.sh once per entry of its ``probe_runs``, scheduled a few minutes earlier each
    time; wait for Prometheus to scrape each run before the next (the CronJob runs one pod at a time)."""
    answers = {}
    for ok in (True, False):
        folder = tmp / f"nvidia-smi-{ok}"
        folder.mkdir(exist_ok=True)
        (folder / "nvidia-smi").symlink_to("/bin/true" if ok else "/bin/false")
        answers[ok] = f"{folder}:/usr/bin:/bin"
    runs: dict[Card, list[ProbeRun]] = {card: [] for card in logs}
    for i in range(max(len(card.probe_runs) for card in logs)):
        for card, log in logs.items():
            if i >= len(card.probe_runs):
                continue
            minute = int(time.time()) // 60 - 2 - 3 * i
            status = run_probe(
                log, f"probe-{card.gpu}-1a2b3c4d-{minute}", path=answers[card.probe_runs[i]], card=card.gpu
            )
            runs[card].append(probe_run(log.read_text(encoding="utf-8").splitlines()[-1]))
            assert status == (0 if card.probe_runs[i] else 1)

        def scraped(i: int = i) -> bool:
            for card, done in runs.items():
                if len(done) > i:
                    sel = f'{{cluster="{card.cluster}",gpu="{card.gpu}"}}'
                    got = prometheus.query(f"gpufleet_probe_last_run_timestamp_seconds{sel}")
                    if not got or float(got[0]["value"][1]) != done[i].started:
                        return False
            return True

        wait_for(f"probe run {i + 1} to be scraped", scraped, patience(), running)
        time.sleep(1.05)  # the next run starts in a later second
    return {(card.cluster, card.gpu): done for card, done in runs.items()}


@dataclass
class LoopbackFleet:
    """The running processes, the expected values per (workload, cluster, gpu) and the Prometheus URL."""

    prometheus: Prometheus
    gpu: GpuExporter
    expected: dict[tuple[str, str, str], Expected]
    probes: dict[tuple[str, str], list[ProbeRun]]  # the probe runs of each probed (cluster, gpu)
    prometheus_started: float  # Unix time just before Prometheus started (no scrape before it)
    processes: list[Process] = field(default_factory=list)

    @property
    def url(self) -> str:
        return self.prometheus.url


def _scrape_configs(
    mtails: dict[tuple[str, Card], Mtail], probes: dict[Card, Mtail], gpu: GpuExporter
) -> list[dict[str, Any]]:
    jobs = []
    for (workload, card), mtail in mtails.items():
        # What the PodMonitor's podTargetLabels (pod_contract.METRIC_LABELS) and the operator's own relabelling put on
        # the target.
        values = {"workload": workload, "gpu": card.gpu, "cluster": card.cluster, "cloud": card.cloud}
        assert set(values) == set(pod_contract.METRIC_LABELS)
        labels = values | {"namespace": NAMESPACE, "pod": pod_name(workload, card)}
        jobs.append({"targets": [mtail.address], "labels": labels})
    # The probe pods carry a pod label like any; the PodMonitor's own metric relabelling (rendered below from
    # components/kubernetes/benchmark.py) takes pod and instance off the probe series: one series per pool.
    probe_jobs = [
        {
            "targets": [m.address],
            "labels": {
                "workload": PROBE.name,
                "gpu": c.gpu,
                "cluster": c.cluster,
                "cloud": c.cloud,
                "namespace": NAMESPACE,
                "pod": f"{PROBE.name}-{c.gpu}-1a2b3c4d-29000000-q2w3e",
            },
        }
        for c, m in probes.items()
    ]
    relabel = [
        {
            "source_labels": r["sourceLabels"],
            "regex": r["regex"],
            "target_label": r["targetLabel"],
            "replacement": r["replacement"],
            "action": r["action"],
        }
        for r in PROBE_SERIES_RELABELINGS
    ]
    return [
        {"job_name": "benchmarks", "static_configs": jobs + probe_jobs, "metric_relabel_configs": relabel},
        {"job_name": "gpu-aggregates", "honor_labels": True, "static_configs": [{"targets": [gpu.address]}]},
    ]


@contextmanager
def loopback_fleet(tmp: Path, mtail_exe: str, prometheus_exe: str) -> Iterator[LoopbackFleet]:
    """Start mtails, the GPU exporter and Prometheus; feed the logs; yield once Prometheus holds every result (each
    wait for at most ``PATIENCE_S``)."""
    placed = workloads()
    running: list[Process] = []
    with_gpu = [card for card in CARDS if card.utilization is not None]
    gpu = GpuExporter([(card, pod_name(w, card), utilization(w, card)) for w in placed for card in with_gpu])
    runners = RunnerExporter()
    try:
        mtails: dict[tuple[str, Card], Mtail] = {}
        feeds: dict[Path, list[str]] = {}
        expected: dict[tuple[str, str, str], Expected] = {}
        for name, wl in placed.items():
            programs = wl.folder / "mtail"
            for card in CARDS:
                lines = log_lines(name, card.results)
                full = tmp / "logs-expected" / f"{name}-{card.cluster}-{card.gpu}.log"
                full.parent.mkdir(parents=True, exist_ok=True)
                full.write_text("".join(lines), encoding="utf-8")
                expected[(name, card.cluster, card.gpu)] = expected_values(mtail_exe, programs, full, name)
                live = tmp / "logs" / f"{name}-{card.cluster}-{card.gpu}.log"
                live.parent.mkdir(parents=True, exist_ok=True)
                live.touch()  # what the pod's init container does before mtail starts
                feeds[live] = lines
                mtail = Mtail(mtail_exe, programs, live, tmp / "logs" / f"mtail-{name}-{card.cluster}-{card.gpu}.out")
                running.append(mtail)
                mtails[(name, card)] = mtail
        probe_logs: dict[Card, Path] = {}
        probe_mtails: dict[Card, Mtail] = {}
        for card in (c for c in CARDS if c.probe_runs):
            live = tmp / "logs" / f"probe-{card.cluster}-{card.gpu}.log"
            live.touch()
            probe_logs[card] = live
            probe_mtails[card] = Mtail(
                mtail_exe, PROBE.folder / "mtail", live, tmp / "logs" / f"mtail-probe-{card.cluster}-{card.gpu}.out"
            )
            running.append(probe_mtails[card])
        config = {
            "global": {"scrape_interval": "1s", "scrape_timeout": "900ms", "evaluation_interval": "1s"},
            "scrape_configs": [
                *_scrape_configs(mtails, probe_mtails, gpu),
                {"job_name": "runners", "honor_labels": True, "static_configs": [{"targets": [runners.address]}]},
            ],
        }
        prometheus_started = time.time()
        prometheus = Prometheus(prometheus_exe, tmp / "prometheus", config)
        running.append(prometheus)
        every_mtail = [*mtails.values(), *probe_mtails.values()]
        wait_for("mtail to serve /metrics", lambda: all(m.serving() for m in every_mtail), patience(), running)
        wait_for("prometheus to be ready", prometheus.ready, patience(), running)
        wait_for(
            "every target to be scraped",
            lambda: len([u for u in prometheus.query("up == 1")]) == len(every_mtail) + 2,
            patience(),
            running,
        )
        # Append the logs in five chunks a second apart, so the time series see the results arrive.
        chunks = 5
        for i in range(chunks):
            for log, lines in feeds.items():
                size = math.ceil(len(lines) / chunks)
                with log.open("a", encoding="utf-8") as handle:
                    handle.writelines(lines[i * size : (i + 1) * size])
            time.sleep(1.0)

        def all_results_in() -> bool:
            for (name, cluster, gpu_name), want in expected.items():
                spec = placed[name].spec
                narrowed = "".join(f',{k}="{v}"' for k, v in runs_match(spec).items())
                sel = f'{{workload="{name}",cluster="{cluster}",gpu="{gpu_name}"{narrowed}}}'
                runs = prometheus.query(f"sum({runs_counter(spec)}{sel})")
                if not runs or float(runs[0]["value"][1]) != want.runs:
                    return False
            return True

        wait_for("Prometheus to hold every card's last result", all_results_in, patience(), running)
        probes = feed_probes(tmp, probe_logs, prometheus, running)
        yield LoopbackFleet(prometheus, gpu, expected, probes, prometheus_started, running)
    finally:
        for proc in reversed(running):
            proc.stop()
        gpu.stop()
        runners.stop()


def run_report(*args: str, timeout: float = PATIENCE_S) -> subprocess.CompletedProcess[str]:
    """``python -m fleet report ARGS`` as a subprocess from the repository root (the loopback fleet's policy and
    workloads unless ARGS name them)."""
    policy = () if "--policy" in args else ("--policy", str(report_policy()))
    policy += () if "--workloads-dir" in args else ("--workloads-dir", str(report_workloads()))
    return subprocess.run(
        [sys.executable, "-m", "fleet", "report", *args, *policy],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )


@pytest.fixture(scope="module")
def fleet_report(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The loopback fleet plus one report over its last five minutes, shared by the module's tests."""
    mtail, prometheus = require_tool("mtail"), require_tool("prometheus")
    tmp = tmp_path_factory.mktemp("report")
    with loopback_fleet(tmp, mtail, prometheus) as fleet:
        out = tmp / "out"
        before = time.time()
        run = run_report("--prometheus", fleet.url, "--since", "5m", "--out", str(out))
        after = time.time()
        yield {"fleet": fleet, "run": run, "out": out, "report_started": before, "report_ended": after, "tmp": tmp}


def energy_surely_in_the_window(fleet_report: dict[str, Any], pod: str) -> float:
    """How much ``pod``'s GPU energy counter grew over the samples every window the report may have used holds: its
    window is the 5 minutes (``--since 5m``) up to an instant between the report's start and end, so the samples from
    5 minutes before its end to its start."""
    started, ended = fleet_report["report_started"], fleet_report["report_ended"]
    sure = int(300 - (ended - started))
    assert sure > 0, "the report took more than its whole window"
    (series,) = fleet_report["fleet"].prometheus.query(f'{GPU_ENERGY}{{pod="{pod}"}}[{sure}s]', at=started)
    values = [float(value) for _, value in series["values"]]
    return values[-1] - values[0]


def test_report_tables_hold_every_workload_card_and_value(fleet_report: dict[str, Any]) -> None:
    run, out, fleet = fleet_report["run"], fleet_report["out"], fleet_report["fleet"]
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr
    # Progress on stderr while querying, one line per request.
    assert re.search(r"report: \[1/\d+\] connecting to http://127\.0\.0\.1:\d+", run.stderr), run.stderr
    assert "report: [" in run.stderr and f"{KNOWN[0]}: runs" in run.stderr
    tables = markdown_tables((out / "report.md").read_text(encoding="utf-8"))
    placed = workloads()
    assert set(placed) == set(KNOWN) and set(placed) <= set(tables), tables.keys()
    prices = load_prices()
    for name, wl in placed.items():
        unit = wl.spec.headline.unit
        rows = {(r["cluster"], r["card"]): r for r in tables[name]}
        assert set(rows) == {(c.cluster, c.gpu) for c in CARDS}, rows.keys()
        for card in CARDS:
            row = rows[(card.cluster, card.gpu)]
            want = fleet.expected[(name, card.cluster, card.gpu)]
            assert row["cloud"] == card.cloud
            assert row[f"result ({unit})"] == approximate(want.result, 4), (name, card, row)
            assert row["runs"] == f"{int(want.runs):,}", (name, card, row)
            assert row["pods"] == "1"
            best = float(row[f"best ({unit})"].replace(",", ""))
            better_or_equal = best >= float(row[f"result ({unit})"].replace(",", "")) * (1 - 1e-3)
            if not wl.spec.headline.higher_is_better:
                better_or_equal = best <= float(row[f"result ({unit})"].replace(",", "")) * (1 + 1e-3)
            assert better_or_equal, row
            if card.utilization is None:
                assert row["mean GPU util. (%)"] == "—" and row["GPU energy / result (J)"] == "—", row
            else:
                assert row["mean GPU util. (%)"] == approximate(utilization(name, card), 3), row
                # Energy: increase() of the energy counter over the report's window, split over the results. At
                # least what the counter's samples that the window surely holds grew by (a count of joules read
                # from Prometheus, not a duration: on a loaded machine scrapes may lag), at most the exporter's
                # power x the whole time Prometheus ran (plus increase()'s extrapolation).
                grown = energy_surely_in_the_window(fleet_report, pod_name(name, card))
                longest = fleet_report["report_ended"] - fleet.prometheus_started
                energy = float(row["GPU energy / result (J)"].replace(",", ""))
                assert grown > 0 and 0.99 * grown / want.runs <= energy < 1.1 * card.watts * longest / want.runs, row
            # Measured between the run counter's first and last samples: unknown when there was one sample only.
            if row["GPU time / result (s)"] != "—":
                gpu_time = float(row["GPU time / result (s)"].replace(",", ""))
                assert 0 < gpu_time < fleet_report["report_ended"] - fleet.prometheus_started, row
        # Cost only where the price table has a price: the AWS machines of T4 and A10G and GKE's L4 machine.
        for cluster, cloud, gpu, machine, accelerator in (
            ("loop-aws", "aws", "t4", "g4dn.xlarge", None),
            ("loop-aws", "aws", "a10g", "g5.xlarge", None),
            ("loop-gke", "gcp", "l4", "g2-standard-4", "nvidia-l4"),
        ):
            row = rows[(cluster, gpu)]
            assert row["machine"] == machine + (f" + {accelerator}" if accelerator else "")
            price = prices.lookup(cloud, machine, accelerator)
            assert price is not None and price.spot is not None
            if row["GPU time / result (s)"] == "—":  # one sample only: no running time, so no cost
                assert row["cost / result (USD, approx.)"] == "—", row
                continue
            cost = float(row["cost / result (USD, approx.)"].replace(",", ""))
            seconds = float(row["GPU time / result (s)"].replace(",", ""))
            billed = float(row["est. billed time / result (s)"].replace(",", ""))
            assert cost == pytest.approx(price.spot * billed / 3600, rel=0.12), row  # both shown to 2 digits
            # the billed time adds the pool's median wait for a node (its probes) once per pod (one pod here)
            runs = fleet.expected[(name, cluster, gpu)].runs
            waits = [r.wait for r in fleet.probes.get((cluster, gpu), [])]
            extra = statistics.median(waits) / runs if waits else 0.0
            assert billed == pytest.approx(seconds + extra, rel=0.11, abs=0.01), (row, extra)  # each to 2 digits
        assert rows[("loop-site", "v100")]["cost / result (USD, approx.)"] == "—"  # no public price
    text = (out / "report.md").read_text(encoding="utf-8")
    assert "No GPU (DCGM) metrics for the benchmark pods of: v100@loop-site." in text
    for machine in ("g4dn.xlarge", "g5.xlarge"):  # every price used is cited with its source and date
        entry = prices.lookup("aws", machine)
        assert entry is not None and entry.source.strip() in text and entry.as_of.isoformat() in text


def test_report_shows_time_to_first_accelerator_from_probe_series(fleet_report: dict[str, Any]) -> None:
    """Per probed pool: the runs, the share that found its card, the median and worst wait, exactly as the runs of
    the real probe.sh printed them (each scraped by Prometheus before the next run)."""
    run, out, fleet = fleet_report["run"], fleet_report["out"], fleet_report["fleet"]
    assert run.returncode == 0, run.stderr
    text = (out / "report.md").read_text(encoding="utf-8")
    rows = {(r["cluster"], r["card"]): r for r in markdown_tables(text)["Time to first accelerator (probes)"]}
    assert set(rows) == set(fleet.probes) == {(c.cluster, c.gpu) for c in CARDS if c.probe_runs}
    for (cluster, gpu), runs in fleet.probes.items():
        row = rows[(cluster, gpu)]
        card = next(c for c in CARDS if (c.cluster, c.gpu) == (cluster, gpu))
        assert [r.success for r in runs] == list(card.probe_runs)
        waits = [r.wait for r in runs]
        assert row["cloud"] == card.cloud and row["probe runs"] == str(len(runs))
        assert row["succeeded (%)"] == approximate(100 * sum(card.probe_runs) / len(runs), 3)
        assert row["median time to first accelerator (s)"] == approximate(statistics.median(waits), 4)
        assert row["worst (s)"] == approximate(max(waits), 4)
    assert "probes: gpufleet_probe_success" in run.stderr  # the progress names the probe queries
    for series in fleet.prometheus.query("gpufleet_probe_success"):  # relabelled: no pod, no instance
        assert "pod" not in series["metric"] and "instance" not in series["metric"], series
    page = (out / "index.html").read_text(encoding="utf-8")
    assert "<h2>Time to first accelerator (probes)</h2>" in page


def test_report_counts_ci_jobs_per_card_from_the_runners_series(fleet_report: dict[str, Any]) -> None:
    run, out = fleet_report["run"], fleet_report["out"]
    assert run.returncode == 0, run.stderr
    text = (out / "report.md").read_text(encoding="utf-8")
    rows = {(r["cluster"], r["card"]): r for r in markdown_tables(text)["CI jobs per card (GitLab runners)"]}
    assert set(rows) == {(cluster, gpu) for cluster, _, gpu in RUNNER_CARDS}
    seen = fleet_report["report_ended"] - fleet_report["fleet"].prometheus_started
    for (cluster, cloud, gpu), (per_second, failed, seconds) in RUNNER_CARDS.items():
        row = rows[(cluster, gpu)]
        assert row["cloud"] == cloud
        jobs = int(row["CI jobs"].replace(",", ""))  # a whole number of jobs
        assert 0 < jobs <= per_second * seen * 1.2, row  # increase() over what Prometheus saw, extrapolated a little
        assert row["failed (%)"] == approximate(100 * failed, 3) if failed else row["failed (%)"] in ("0", "—"), row
        assert row["mean job duration (s)"] == approximate(seconds, 4), row
    page = (out / "index.html").read_text(encoding="utf-8")
    assert "<h2>CI jobs per card (GitLab runners)</h2>" in page


def test_report_opens_with_a_summary_of_each_workloads_best_card(fleet_report: dict[str, Any]) -> None:
    """The summary before every workload: the best card by the headline (from mtail's own reading of the logs), where
    it ran, the cost of its result and the cheapest card per result as the workload's table has them, and the CI
    jobs and probe runs as whole numbers, added up from their tables."""
    run, out, fleet = fleet_report["run"], fleet_report["out"], fleet_report["fleet"]
    assert run.returncode == 0, run.stderr
    text = (out / "report.md").read_text(encoding="utf-8")
    assert text.index("## Summary") < min(text.index(f"## {name}\n") for name in KNOWN)
    tables = markdown_tables(text)
    summary = {r["workload"]: r for r in tables["Summary"]}
    assert set(summary) == set(KNOWN)
    for name, wl in ((n, w) for n, w in load_workloads().items() if n in KNOWN):
        results = {c: fleet.expected[(name, c.cluster, c.gpu)].result for c in CARDS}
        top = (max if wl.spec.headline.higher_is_better else min)(results.values())
        row = summary[name]
        best = next(c for c in CARDS if c.gpu == row["best card"] and row["where"] == f"{c.cluster} ({c.cloud})")
        assert results[best] == pytest.approx(top, rel=1e-9), (name, row)
        assert row["result"] == f"{approximate(results[best], 3)} {wl.spec.headline.unit}"
        card_rows = {(r["cluster"], r["card"]): r for r in tables[name]}
        cost = card_rows[(best.cluster, best.gpu)]["cost / result (USD, approx.)"]
        assert row["cost / result (USD)"] == (cost if cost != "—" else "no price"), (name, row)
        costs = {
            key: float(r["cost / result (USD, approx.)"].replace(",", ""))
            for key, r in card_rows.items()
            if r["cost / result (USD, approx.)"] != "—"
        }
        if not costs:
            assert row["cheapest per result"] == "no card has a price"
        elif row["cheapest per result"] != "the best card":
            gpu, rest = row["cheapest per result"].split(" @ ")
            cluster, shown = rest.split(": ")
            assert float(shown.replace(",", "")) == min(costs.values()) == costs[(cluster, gpu)], (name, row)
    ci = tables["CI jobs per card (GitLab runners)"]
    jobs = sum(int(r["CI jobs"].replace(",", "")) for r in ci)  # whole numbers, though increase() extrapolates
    assert f"- CI: {jobs:,} job(s) on {len(ci)} card(s)," in text
    probe_runs = sum(len(runs) for runs in fleet.probes.values())
    assert f"- Probes: {probe_runs} run(s) on {len(fleet.probes)} pool(s)," in text
    assert '<h2 id="summary">Summary</h2>' in (out / "index.html").read_text(encoding="utf-8")


def test_report_writes_real_plots_and_a_self_contained_page(fleet_report: dict[str, Any]) -> None:
    run, out = fleet_report["run"], fleet_report["out"]
    assert run.returncode == 0, run.stderr
    names = KNOWN
    pngs = {p.name: p.read_bytes() for p in out.glob("*.png")}
    assert sorted(pngs) == sorted(f"{n}-{kind}.png" for n in names for kind in ("bars", "timeseries"))
    for name, data in pngs.items():
        assert png_size(data) == PLOT_SIZE, name
        assert 15_000 < len(data) < 1_000_000, (name, len(data))
    page = (out / "index.html").read_text(encoding="utf-8")
    assert page.count('src="data:image/png;base64,') == len(pngs)
    assert 'src="http' not in page and "<script" not in page  # nothing loaded from elsewhere
    for data in pngs.values():
        assert base64.b64encode(data).decode() in page
    markdown = (out / "report.md").read_text(encoding="utf-8")
    for name in names:
        assert f"]({name}-bars.png)" in markdown and f"]({name}-timeseries.png)" in markdown


def test_the_report_opens_in_a_real_browser_with_every_image_and_no_console_error(
    fleet_report: dict[str, Any],
) -> None:
    out = fleet_report["out"]
    screenshot = first_screen(fleet_report["tmp"])
    if screenshot == FIRST_SCREEN:  # the picture in docs/ shows the shipped workloads' sample logs, and some
        assert KNOWN and set(KNOWN) <= set(load_workloads()), f"not only shipped workloads' sample logs: {KNOWN}"
    seen = open_in_chromium(out / "index.html", screenshot)
    assert len(seen.images) == len(list(out.glob("*.png"))) and seen.images
    assert [src for src, loaded in seen.images if not loaded] == []
    assert seen.console_errors == []
    assert png_size(screenshot.read_bytes()) == SCREEN


def test_only_the_screenshot_run_writes_into_docs_and_shows_the_sample_data_only(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(UPDATE_SCREENSHOT, raising=False)
    assert first_screen(tmp_path) == tmp_path / "first-screen.png"
    monkeypatch.setenv(UPDATE_SCREENSHOT, "0")
    assert first_screen(tmp_path).parent == tmp_path
    monkeypatch.setenv(UPDATE_SCREENSHOT, "1")
    assert first_screen(tmp_path) == ROOT / "docs" / "report-first-screen.png"
    shipped = set(RESULT_LINE) & set(load_workloads())  # the tests' own workload too on a fleet that ships it
    assert set(known_workloads(sample_only=True)) == shipped and shipped
    assert set(known_workloads(sample_only=False)) == shipped | {OWN}


def test_the_browser_check_sees_a_broken_image_and_a_console_error(tmp_path: Path) -> None:
    page = tmp_path / "broken.html"
    page.write_text("<img src='missing.png'><script>console.error('boom')</script>", encoding="utf-8")
    seen = open_in_chromium(page)
    assert seen.images == [(page.with_name("missing.png").as_uri(), False)]
    assert any("boom" in e for e in seen.console_errors) and any("missing.png" in e for e in seen.console_errors)


def test_an_empty_window_fails_without_writing_a_report(fleet_report: dict[str, Any]) -> None:
    out = fleet_report["tmp"] / "empty"
    run = run_report(
        "--prometheus",
        fleet_report["fleet"].url,
        "--start",
        "2020-01-01T00:00:00Z",
        "--end",
        "2020-01-01T01:00:00Z",
        "--out",
        str(out),
    )
    assert run.returncode == 1, (run.stdout, run.stderr)
    assert "no benchmark data between 2020-01-01 00:00:00 UTC and 2020-01-01 01:00:00 UTC" in run.stderr
    assert "no report written" in run.stderr and "Traceback" not in run.stderr
    assert not out.exists()


def test_a_workload_without_its_metric_is_reported_as_having_no_data(
    fleet_report: dict[str, Any], tmp_path: Path
) -> None:
    if OWN not in KNOWN:
        pytest.skip(f"{UPDATE_SCREENSHOT}=1: the loopback fleet runs the sample data only, not {OWN}")
    # A workloads folder with the tests' own workload plus "ghost", a copy of it whose metrics nothing exports.
    workloads_dir = tmp_path / "workloads"
    shutil.copytree(OWN_WORKLOADS / OWN, workloads_dir / OWN)
    ghost = workloads_dir / "ghost"
    shutil.copytree(OWN_WORKLOADS / OWN, ghost)
    for path in [ghost / "workload.yaml", *ghost.glob("mtail/*.mtail")]:
        path.write_text(path.read_text(encoding="utf-8").replace(OWN, "ghost"), encoding="utf-8")
    (ghost / "mtail" / f"{OWN}.mtail").rename(ghost / "mtail" / "ghost.mtail")
    policy = tmp_path / "fleet.yaml"
    policy.write_text(
        "clusters:\n  aws:\n    loop-aws: {region: us-east-1, central: true, gpus: [t4]}\n"
        f"workloads:\n  {OWN}: all\n  ghost: all\n",
        encoding="utf-8",
    )
    out = tmp_path / "out"
    run = run_report(
        "--prometheus",
        fleet_report["fleet"].url,
        "--since",
        "5m",
        "--out",
        str(out),
        "--workloads-dir",
        str(workloads_dir),
        "--policy",
        str(policy),
    )
    assert run.returncode == 0, run.stderr
    headline = workloads()[OWN].spec.headline.metric.replace(OWN, "ghost")
    assert f"warning: ghost: no data (no series of the headline metric {headline}" in run.stderr
    markdown = (out / "report.md").read_text(encoding="utf-8")
    assert "## ghost" in markdown and "**No data** in this window" in markdown
    assert set(markdown_tables(markdown)) >= {OWN} and "ghost" not in markdown_tables(markdown)
    assert not (out / "ghost-bars.png").exists() and (out / "gemm-bars.png").exists()


def test_an_unreachable_prometheus_fails_with_a_message(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    run = run_report("--prometheus", url, "--since", "1h", "--out", str(tmp_path / "out"))
    assert run.returncode == 1, (run.stdout, run.stderr)
    assert f"cannot reach Prometheus at {url}" in run.stderr
    assert "Traceback" not in run.stderr and not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--since", "soon"], "'soon' is not a Prometheus duration"),
        (["--start", "2026-11-02", "--end", "2026-11-01"], "the window is empty"),
        (["--end", "2026-11-01"], "--end needs --start"),
        (["--workload", "nope"], "unknown workload(s) nope"),
    ],
)
def test_bad_input_exits_2_with_a_message(tmp_path: Path, args: list[str], message: str) -> None:
    run = run_report("--prometheus", "http://127.0.0.1:9", "--out", str(tmp_path / "out"), *args)
    assert run.returncode == 2, (run.stdout, run.stderr)
    assert message in run.stderr and "Traceback" not in run.stderr


def test_a_url_that_is_not_http_is_bad_input(tmp_path: Path) -> None:
    run = run_report("--prometheus", "prometheus:9090", "--out", str(tmp_path / "out"))
    assert run.returncode == 2 and "is not an http:// or https:// URL" in run.stderr, run.stderr


def main(argv: list[str]) -> int:
    """Build the loopback fleet in a temp dir, write a report into ``argv[0]`` and print the command used (the
    report's first screen in docs/ is made by the browser test instead: ``make screenshot``)."""
    if len(argv) != 1:
        print(
            "usage: python -m tests.e2e.test_report OUT_DIR (the first screen in docs/: make screenshot)",
            file=sys.stderr,
        )
        return 2

    mtail, prometheus = shutil.which("mtail"), shutil.which("prometheus")
    if not mtail or not prometheus:
        print("needs mtail and prometheus on PATH (apt-get install -y prometheus mtail)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp, loopback_fleet(Path(tmp), mtail, prometheus) as fleet:
        args = ["--prometheus", fleet.url, "--since", "5m", "--out", argv[0]]
        print("$ python -m fleet report " + " ".join(args), flush=True)
        run = run_report(*args)
        print(run.stdout + run.stderr, end="")
        return run.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
