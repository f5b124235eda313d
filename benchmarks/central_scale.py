"""The central Prometheus at fleet scale: a real ``prometheus`` federating 10, 50 and 200 synthetic leaves.

For each size N it writes a synthetic fleet (``plan_speed.generate_fleet``: N leaves of 8 GKE pools and 4 workloads,
every pool probed, CI runners on two cards, plus the central), serves each leaf's ``/federate`` answer from one Python
process (one port a leaf; the series come from ``benchmarks.synthetic_leaf``), backfills a 180-day history into the
central's storage with ``promtool tsdb create-blocks-from openmetrics``, starts ``prometheus`` with the central
configuration the model renders (``central_prometheus_config`` with the central's alert and probe rules; targets on
loopback, plain HTTP instead of mutual TLS), lets it scrape for ``--observe`` seconds and reads from it: series and
bytes per federate answer, scrape duration, resident memory and CPU, rule evaluation time; then times ``python -m
fleet report`` over 7, 30 and 180 days.

    nice -n 10 .venv/bin/python -m benchmarks.central_scale [--sizes 10,50,200] [--observe 240] [--json FILE]

The history is thinner than a real central's (see ``write_history``): runs keep their real series (a new ``pod``
each run), continuous records get one sample a day. See docs/performance.md for the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
import zlib
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from benchmarks import synthetic_leaf
from benchmarks.plan_speed import generate_fleet
from components.kubernetes.federation import federated_selectors, probe_expectations
from fleet.model import accounting_hours, probe_phases
from fleet.model.accounting import BILLED, IDLE, USED
from fleet.model.loader import load_fleet
from fleet.model.prometheus import (
    FederationTarget,
    central_alert_rules,
    central_prometheus_config,
    duration_seconds,
    probe_alert_rules,
    to_yaml,
    workload_metrics,
)
from fleet.model.spec import Cluster, Fleet
from fleet.report.accounting import exact_integral, hourly_integral
from fleet.report.queries import Window, parse_duration

ROOT = Path(__file__).resolve().parent.parent
RUNNER_CARDS = ("t4", "l4")
DAY = 86400
RUN_HOUR = 3  # the day's runs start at 03:00 UTC (a nightly CronJob), spread over the next hour
REPORT_WINDOWS = ("7d", "30d", "180d")
# The exact accounting integral (a step a minute through the window for every record) is timed up to 30 days only:
# over 180 days at 200 leaves (30 days of history) it took Prometheus to 21 GB resident and the kernel killed it, on
# a machine shared with others (the report sums the hourly records there instead).
EXACT_UP_TO = 31 * DAY
# The central's address space: the machine's 23 GiB are shared; a query past this fails (Prometheus dies) instead of
# the kernel choosing what to kill.
MEMORY_LIMIT = 12 * 2**30
PROBE_RUNS_FILE = "probe-runs.yml"  # the central's records of finished probe runs (fleet/model/probe_phases.py)


# --------------------------------------------------------------------------------------------------------------
# The leaves
# --------------------------------------------------------------------------------------------------------------


@dataclass
class Leaf:
    """One synthetic leaf: its cluster and its ``/federate`` answer's lines."""

    cluster: Cluster
    lines: list[tuple[str, str]]
    port: int = 0
    served: int = 0
    bytes_served: int = 0


def synthetic_fleet(root: Path, leaves: int) -> tuple[Fleet, Path, Path]:
    """The fleet of ``leaves`` leaves (and the central), with runners on two cards of every leaf."""
    synthetic = generate_fleet(root, leaves + 1, cards=8, workloads=4)
    policy = yaml.safe_load(synthetic.policy_file.read_text(encoding="utf-8"))
    cards = {c: {"concurrency": 2} for c in RUNNER_CARDS if c in synthetic.cards}
    policy["runners"] = {
        "gitlab_url": "https://gitlab.example.org",
        "clusters": {name: dict(cards) for name in synthetic.clusters[1:]},
    }
    synthetic.policy_file.write_text(yaml.safe_dump(policy, sort_keys=False), encoding="utf-8")
    fleet = load_fleet(synthetic.policy_file, synthetic.workloads_dir)
    return fleet, synthetic.policy_file, synthetic.workloads_dir


class _Handler(BaseHTTPRequestHandler):
    leaf: Leaf

    def do_GET(self) -> None:
        leaf = self.server.leaf  # type: ignore[attr-defined]
        body = synthetic_leaf.exposition(leaf.lines, 1.0 + (time.time() // 60) % 7, int(time.time() * 1000))
        data = body.encode()
        if "gzip" in self.headers.get("Accept-Encoding", ""):
            compressor = zlib.compressobj(6, zlib.DEFLATED, 31)
            data = compressor.compress(data) + compressor.flush()
            self.send_response(200)
            self.send_header("Content-Encoding", "gzip")
        else:
            self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        leaf.served += 1
        leaf.bytes_served += len(data)

    def log_message(self, *args: Any) -> None:
        return


def serve(leaves: list[Leaf]) -> list[ThreadingHTTPServer]:
    """One HTTP server a leaf on a free loopback port, each in a daemon thread of this process."""
    servers = []
    for leaf in leaves:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        server.leaf = leaf  # type: ignore[attr-defined]
        leaf.port = server.server_address[1]
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
    return servers


# --------------------------------------------------------------------------------------------------------------
# The history
# --------------------------------------------------------------------------------------------------------------

RUN_MARK = "-x7k2p"
HOUR_PHASE = 1234  # seconds into each hour at which the central's hourly accounting group evaluates
_LABEL = re.compile(r'(\w+)="([^"]*)"')


def hourly_records(leaves: list[Leaf], day: int) -> dict[str, list[str]]:
    """The day's hourly card-hours records (fleet/model/accounting_hours.py) as the central's rules would have written
    them: one sample an hour per (account, cluster, cloud, card, pool) of each billed, used and idle record, and the
    hour's end marker. The values are synthetic (the thin history holds too few samples to integrate)."""
    keys = accounting_hours.BY.split(", ")
    series: dict[str, set[str]] = {}
    for leaf in leaves:
        for _, text in leaf.lines:
            name = text.split("{", 1)[0]
            if name in accounting_hours.HOURLY:
                labels = dict(_LABEL.findall(text))
                inner = ",".join(f'{k}="{labels.get(k, "")}"' for k in sorted(keys))
                series.setdefault(accounting_hours.HOURLY[name], set()).add(
                    f"{accounting_hours.HOURLY[name]}{{{inner}}}"
                )
    out: dict[str, list[str]] = {}
    for hour in range(24):
        t = day * DAY + hour * 3600 + HOUR_PHASE
        for name, texts in series.items():
            out.setdefault(name, []).extend(f"{text} {(hour + day) % 5 * 0.5} {t}" for text in sorted(texts))
        out.setdefault(accounting_hours.HOUR_END, []).append(f"{accounting_hours.HOUR_END} {t} {t}")
    return out


BLOCK = 7200  # seconds: the 2-hour block promtool writes (tsdb.DefaultBlockDuration), aligned to the epoch


def history_samples(
    leaves: list[Leaf], day: int, run_every_days: int, hourly: bool = True
) -> dict[str, list[tuple[int, str]]]:
    """One day of history, by metric name, each sample line with its timestamp (seconds): every series of a benchmark
    run with the run's own pod, 3 samples a minute apart, each (workload, card) pair every ``run_every_days`` days;
    each pool's probe series daily, likewise; the continuous records (pools' billed and idle cards, idle GPUs,
    runners) one sample, all in the 2 h from 03:00; with ``hourly``, the central's hourly card-hours records (every
    hour: they span the day)."""
    by_name: dict[str, list[tuple[int, str]]] = {}
    base = day * DAY + RUN_HOUR * 3600
    for j, leaf in enumerate(leaves):
        offset = (j * 37) % 3000
        for k, (_, text) in enumerate(leaf.lines):
            name = text.split("{", 1)[0]
            if RUN_MARK in text or name.startswith("gpufleet_probe_"):
                probe = "probe-" in text or name.startswith("gpufleet_probe_")
                pair = zlib.crc32(text.split(RUN_MARK)[0].encode()) if RUN_MARK in text else k
                if not probe and (day + pair) % run_every_days:
                    continue
                series = text.replace(RUN_MARK, f"-d{day}")
                t0 = base + offset + (pair % 600)
                value = 30 + (pair + day) % 200
                by_name.setdefault(name, []).extend((t0 + 60 * i, f"{series} {value} {t0 + 60 * i}") for i in range(3))
            else:
                by_name.setdefault(name, []).append((base + offset, f"{text} {(k + day) % 5} {base + offset}"))
    if hourly:
        for name, samples in hourly_records(leaves, day).items():
            by_name.setdefault(name, []).extend((int(line.rsplit(" ", 1)[1]), line) for line in samples)
    return by_name


def _write_openmetrics(by_name: dict[str, list[str]], out: Path) -> int:
    lines = 0
    with out.open("w", encoding="utf-8") as f:
        for name, samples in sorted(by_name.items()):
            f.write(f"# TYPE {name} gauge\n")
            f.write("\n".join(samples) + "\n")
            lines += len(samples)
        f.write("# EOF\n")
    return lines


def write_history(leaves: list[Leaf], day: int, run_every_days: int, out: Path, hourly: bool = True) -> int:
    """One day of history (:func:`history_samples`) as one OpenMetrics file; returns the samples written."""
    samples = history_samples(leaves, day, run_every_days, hourly)
    return _write_openmetrics({name: [line for _, line in lines] for name, lines in samples.items()}, out)


def write_history_blocks(
    leaves: list[Leaf], day: int, run_every_days: int, directory: Path, hourly: bool = True
) -> tuple[list[Path], int]:
    """One day of history (:func:`history_samples`) as one OpenMetrics file per 2-hour block it touches, so that
    promtool reads each sample twice (its time range, then its block) instead of once more for every block the day
    spans (promtool 2.42 re-parses its whole input for each 2-hour block, ``createBlocks`` in
    ``cmd/promtool/backfill.go``: a day of hourly records spans 12). The files and the samples written."""
    blocks: dict[int, dict[str, list[str]]] = {}
    for name, lines in history_samples(leaves, day, run_every_days, hourly).items():
        for t, line in lines:
            blocks.setdefault(t // BLOCK, {}).setdefault(name, []).append(line)
    directory.mkdir(parents=True, exist_ok=True)
    files, samples = [], 0
    for block, by_name in sorted(blocks.items()):
        path = directory / f"{block * BLOCK}.om"
        samples += _write_openmetrics(by_name, path)
        files.append(path)
    return files, samples


def _promtool_block(promtool: str, source: Path, scratch: Path, data: Path) -> None:
    """``source`` turned into blocks in the empty folder ``scratch``, which then move into ``data``: promtool opens
    every block already in its output folder after each one it writes, so a shared output folder is quadratic."""
    scratch.mkdir(parents=True)
    subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", "-q", str(source), str(scratch)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    for block in scratch.iterdir():
        if block.is_dir() and len(block.name) == 26:  # a block's ULID
            block.rename(data / block.name)
    shutil.rmtree(scratch, ignore_errors=True)
    source.unlink()


def backfill(
    leaves: list[Leaf],
    days: int,
    run_every_days: int,
    data: Path,
    work: Path,
    limit: float | None = None,
    jobs: int = 2,
) -> dict[str, Any]:
    """``days`` days of history up to yesterday into ``data``, yesterday first; with ``limit``, no day is begun after
    ``limit`` seconds (the history then holds the days written: ``days`` in the answer, and ``asked``). Each day is
    one input file per 2-hour block (:func:`write_history_blocks`), each turned into its block by a promtool run of
    its own, ``jobs`` at a time while the next days are written."""
    promtool = shutil.which("promtool") or "promtool"
    today = int(time.time()) // DAY
    samples, started, written = 0, time.monotonic(), 0
    inputs, scratch = work / "history", work / "new-blocks"
    pending: list[list[Future[None]]] = []
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for day in range(today - 1, today - days - 1, -1):
            if limit is not None and time.monotonic() - started > limit:
                break
            files, count = write_history_blocks(leaves, day, run_every_days, inputs / str(day))
            samples += count
            pending.append(
                [pool.submit(_promtool_block, promtool, f, scratch / f"{day}-{f.stem}", data) for f in files]
            )
            while len(pending) > jobs:  # at most a few days of inputs on disk and in flight
                for future in pending.pop(0):
                    future.result()
                written += 1
                _progress(written, days, samples, started)
        for futures in pending:
            for future in futures:
                future.result()
            written += 1
            _progress(written, days, samples, started)
    shutil.rmtree(inputs, ignore_errors=True)
    shutil.rmtree(scratch, ignore_errors=True)
    seconds = round(time.monotonic() - started, 1)
    return {"days": written, "asked": days, "samples": samples, "seconds": seconds, "jobs": jobs, "today": today}


def _progress(written: int, days: int, samples: int, started: float) -> None:
    if written % 10 == 0:
        elapsed = time.monotonic() - started
        print(f"central_scale: backfill {written}/{days} days, {samples:,} samples, {elapsed:.0f} s "
              f"(load {os.getloadavg()[0]:.1f})", file=sys.stderr, flush=True)  # fmt: skip


# --------------------------------------------------------------------------------------------------------------
# The central
# --------------------------------------------------------------------------------------------------------------


def central_files(fleet: Fleet, leaves: list[Leaf], directory: Path, port: int) -> Path:
    """The central's prometheus.yml and rule files as the model renders them, targets on loopback over plain HTTP."""
    rules = {
        "central-alerts.yml": central_alert_rules(workload_metrics(fleet.workloads)),
        "probe-alerts.yml": probe_alert_rules(probe_expectations(fleet)),
    }
    hours = accounting_hours.hourly_rules(duration_seconds(fleet.monitoring.federation_interval))
    if hours is not None:
        rules["accounting-hours.yml"] = hours
    runs = probe_phases.settled_run_rules(duration_seconds(fleet.monitoring.federation_interval))
    if runs is not None:
        rules[PROBE_RUNS_FILE] = runs
    for name, rule in rules.items():
        (directory / name).write_text(to_yaml(rule), encoding="utf-8")
    targets = [
        FederationTarget(leaf.cluster.name, leaf.cluster.cloud, f"127.0.0.1:{leaf.port}", "leaf", "ca", "crt", "key")
        for leaf in leaves
    ]
    config = central_prometheus_config(
        targets,
        federated_selectors(fleet),
        {"fleet_role": "central"},
        rule_files=list(rules),
        interval=fleet.monitoring.federation_interval,
        self_address=f"127.0.0.1:{port}",
    )
    for job in config["scrape_configs"]:
        if job.pop("tls_config", None) is not None:  # mutual TLS left out: loopback, no certificates
            job["scheme"] = "http"
    path = directory / "prometheus.yml"
    path.write_text(to_yaml(config), encoding="utf-8")
    return path


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _query(url: str, promql: str, timeout: float = 120) -> list[dict[str, Any]]:
    full = f"{url}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    with urllib.request.urlopen(full, timeout=timeout) as response:
        return json.load(response)["data"]["result"]


def _scalar(url: str, promql: str) -> float | None:
    result = _query(url, promql)
    return float(result[0]["value"][1]) if result else None


def start_prometheus(config: Path, data: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    """``prometheus`` on ``port`` keeping the 180-day history (the central's retention, with a day of margin)."""
    args = [
        shutil.which("prometheus") or "prometheus",
        f"--config.file={config}",
        f"--storage.tsdb.path={data}",
        "--storage.tsdb.retention.time=182d",
        f"--web.listen-address=127.0.0.1:{port}",
    ]

    def bounded() -> None:  # on a shared machine a runaway query must not take everyone's memory
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))

    proc = subprocess.Popen(
        args, stdout=log.open("wb"), stderr=subprocess.STDOUT, cwd=config.parent, preexec_fn=bounded
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"prometheus exited: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"{url}/-/ready", timeout=5) as response:
                if response.status == 200:
                    return proc
        except OSError:
            pass
        time.sleep(1)
    raise RuntimeError("prometheus did not become ready in 10 minutes")


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@dataclass
class SizeResult:
    """The figures of one size."""

    leaves: int
    series_per_leaf: int
    bytes_per_answer: int
    gzip_bytes_per_answer: int
    history: dict[str, Any]
    federated_series: float | None = None
    head_series: float | None = None
    blocks: float | None = None
    scrape_seconds_avg: float | None = None
    scrape_seconds_max: float | None = None
    rss_mib: float | None = None
    cpu_cores: float | None = None
    rule_groups_ms: dict[str, float] = field(default_factory=dict)
    report_seconds: dict[str, float | None] = field(default_factory=dict)
    report_errors: dict[str, str] = field(default_factory=dict)
    report_phases: dict[str, dict[str, Any]] = field(default_factory=dict)
    accounting_seconds: dict[str, dict[str, float | str]] = field(default_factory=dict)
    compaction: dict[str, Any] = field(default_factory=dict)
    records: dict[str, Any] = field(default_factory=dict)
    observed: float | None = None
    rss_after_reports_mib: float | None = None


def observation(observe: float, interval: float) -> float:
    """The seconds to scrape before reading: at least two scrape intervals and a margin, so that every figure has a
    sample whatever the scrapes' phase in the interval and the CPU rate has two (shorter, the figures came back
    blank)."""
    return max(observe, 2 * interval + 30)


def metrics_text(url: str) -> dict[str, float]:
    """The central's own ``/metrics``, unlabelled series only (read directly: its self-scrape lags a minute)."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=60) as response:
        text = response.read().decode()
    values = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if line and not line.startswith("#") and "{" not in name:
            values[name] = float(value)
    return values


def settle(url: str, limit: float, quiet: float = 150, poll: float = 15) -> dict[str, Any]:
    """Wait until the central has compacted the backfilled blocks: no compaction for ``quiet`` seconds (it tries
    once a minute), at most ``limit`` seconds. A central that recorded the history itself would have compacted it as
    it went; the 2-hour blocks of a backfill are all compacted at its start. Blocks before and after, seconds."""
    started = time.monotonic()
    first = metrics_text(url)
    compactions, last_change = first.get("prometheus_tsdb_compactions_total", 0.0), started
    now = metrics_text(url)
    while time.monotonic() - started < limit:
        time.sleep(poll)
        now = metrics_text(url)
        if now.get("prometheus_tsdb_compactions_total", 0.0) != compactions:
            compactions, last_change = now.get("prometheus_tsdb_compactions_total", 0.0), time.monotonic()
        elif time.monotonic() - last_change >= quiet:
            break
    return {
        "blocks_before": first.get("prometheus_tsdb_blocks_loaded"),
        "blocks_after": now.get("prometheus_tsdb_blocks_loaded"),
        "compactions": now.get("prometheus_tsdb_compactions_total", 0.0)
        - first.get("prometheus_tsdb_compactions_total", 0.0),
        "seconds": round(time.monotonic() - started, 1),
        "settled": time.monotonic() - last_change >= quiet,
    }


def _promtool_records(url: str, rules: Path, start: int, end: int, scratch: Path, data: Path) -> int:
    """The records of ``rules`` from ``start`` to ``end`` into the empty folder ``scratch``, whose blocks then move
    into ``data`` (promtool reopens every block of its output folder after each one it writes: one folder for 180
    days wrote 19 blocks a minute and slowing, a folder a day keeps that small). The blocks moved."""
    subprocess.run(
        [shutil.which("promtool") or "promtool", "tsdb", "create-blocks-from", "rules", "-q", "--url", url,
         "--start", str(start), "--end", str(end), "--output-dir", str(scratch), str(rules)],
        check=True, capture_output=True, timeout=3600,
    )  # fmt: skip
    blocks = [b for b in scratch.iterdir() if b.is_dir() and len(b.name) == 26]  # a block's ULID
    for block in blocks:
        block.rename(data / block.name)
    shutil.rmtree(scratch, ignore_errors=True)
    return len(blocks)


def backfill_records(
    url: str, rules: Path, data: Path, work: Path, days: int, jobs: int = 2, today: int | None = None
) -> dict[str, Any]:
    """The central's records of finished probe runs over the backfilled history, as its rule group would have written
    them had it run then: evaluated by ``promtool tsdb create-blocks-from rules`` from the central's own data, a day
    per promtool run, ``jobs`` at a time, each day's blocks moved into its data folder, which the central loads and
    compacts (:func:`settle`). How many blocks, seconds. Each day starts on a block's first instant: promtool 2.42
    writes nothing when the group's first evaluation after the start falls past the first block
    (tests/e2e/test_accounting_hours.py). ``today``: the day the history ends before (the backfill's; default now)."""
    today = int(time.time()) // DAY if today is None else today
    started = time.monotonic()
    scratch = work / "record-blocks"
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = [
            pool.submit(_promtool_records, url, rules, day * DAY, (day + 1) * DAY, scratch / str(day), data)
            for day in range(today - days, today)
        ]
        blocks = sum(f.result() for f in futures)
    shutil.rmtree(scratch, ignore_errors=True)
    return {"blocks": blocks, "seconds": round(time.monotonic() - started, 1), "jobs": jobs}


def measure(url: str, result: SizeResult, observe: float) -> None:
    """Read the central's own figures after ``observe`` seconds of scraping (:func:`observation`)."""
    jobs = 'job=~"federate-.+"'
    window = f"{int(observe)}s"
    result.federated_series = _scalar(url, f"sum(scrape_samples_scraped{{{jobs}}})")
    result.head_series = _scalar(url, "prometheus_tsdb_head_series")
    result.blocks = _scalar(url, "prometheus_tsdb_blocks_loaded")
    result.scrape_seconds_avg = _scalar(url, f"avg(avg_over_time(scrape_duration_seconds{{{jobs}}}[{window}]))")
    result.scrape_seconds_max = _scalar(url, f"max(max_over_time(scrape_duration_seconds{{{jobs}}}[{window}]))")
    rss = _scalar(url, 'max(process_resident_memory_bytes{job="prometheus"})')
    result.rss_mib = rss / 2**20 if rss is not None else None
    result.cpu_cores = _scalar(url, f'rate(process_cpu_seconds_total{{job="prometheus"}}[{window}])')
    for sample in _query(url, "prometheus_rule_group_last_duration_seconds"):
        group = sample["metric"]["rule_group"].rsplit(";", 1)[-1]
        result.rule_groups_ms[group] = round(float(sample["value"][1]) * 1000, 2)


PROGRESS = re.compile(r"^report: \[\d+/\d+\] (.*)$")
DRAWING = "report: drawing "


def report_phases(lines: list[tuple[float, str]], started: float, ended: float) -> dict[str, Any]:
    """Where a report's time went, from its stderr lines each with the time it arrived: ``start`` (Python and the
    policy, to the first query), ``queries`` (from the first query's progress line to the drawing line), ``drawing``
    (plots and pages, to the end), and the slowest query (a query's time runs to the next line)."""
    marks = [(t, m.group(1)) for t, line in lines if (m := PROGRESS.match(line))]
    drawing = next((t for t, line in lines if line.startswith(DRAWING)), None)
    if not marks or drawing is None:
        return {}
    ends = [t for t, _ in marks[1:]] + [drawing]
    slowest = max(((end - t, what) for (t, what), end in zip(marks, ends, strict=True)), default=(0.0, ""))
    return {
        "start": round(marks[0][0] - started, 1),
        "queries": round(drawing - marks[0][0], 1),
        "drawing": round(ended - drawing, 1),
        "query_count": len(marks) - 1,  # the first line is the connection (build info)
        "slowest_query": [slowest[1], round(slowest[0], 1)],
    }


def run_report(args: list[str], limit: float) -> tuple[int | None, str, float, dict[str, Any]]:
    """Run a report command with its stderr read line by line as it comes; (exit status or None when stopped after
    ``limit`` seconds, stderr's tail, seconds taken, :func:`report_phases`)."""
    started = time.monotonic()
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    lines: list[tuple[float, str]] = []

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append((time.monotonic(), line.rstrip("\n")))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        code: int | None = proc.wait(timeout=limit)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        code = None
    ended = time.monotonic()
    reader.join(timeout=10)
    tail = "\n".join(line for _, line in lines[-5:])
    return code, tail, ended - started, report_phases(lines, started, ended)


def time_reports(
    url: str,
    policy: Path,
    workloads: Path,
    work: Path,
    result: SizeResult,
    limit: float,
    windows: tuple[str, ...] = REPORT_WINDOWS,
) -> None:
    """``python -m fleet report`` over each window, timed (one run each, a generous per-request timeout) with where
    its time went (:func:`report_phases`); a window whose report takes over ``limit`` seconds is stopped, and the
    longer windows are not tried."""
    for since in windows:
        out = work / f"report-{since}"
        code, tail, elapsed, phases = run_report(
            [
                sys.executable, "-m", "fleet", "report", "--prometheus", url, "--since", since, "--out", str(out),
                "--policy", str(policy), "--workloads-dir", str(workloads), "--timeout", "600",
            ],
            limit,
        )  # fmt: skip
        if phases:
            result.report_phases[since] = phases
        if code is None:
            result.report_errors[since] = f"stopped after {limit:g} s"
            return
        result.report_seconds[since] = round(elapsed, 1) if code == 0 else None
        if code != 0:
            result.report_errors[since] = tail[-500:]


def time_accounting(
    url: str, result: SizeResult, step: float, limit: float, windows: tuple[str, ...] = REPORT_WINDOWS
) -> None:
    """The report's billed, used and idle card-hours over each window, timed both ways on the same data: the sum of
    the central's hourly records (fleet/report/accounting.py), then the exact integral of the raw records (last: over
    30 days at 200 leaves it took the central past its memory bound, and every query after it failed)."""
    now = time.time()
    for way, build in (("hourly", hourly_integral), ("exact", exact_integral)):
        for since in windows:
            window = Window(now - parse_duration(since), now)
            if way == "exact" and window.seconds > EXACT_UP_TO:
                result.accounting_seconds.setdefault(since, {})[way] = "not run (see EXACT_UP_TO)"
                continue
            started = time.monotonic()
            try:
                for record in (BILLED, USED, IDLE):
                    _query(url, build(window, step, record), timeout=limit)
            except OSError as error:  # a timeout or an error answer
                result.accounting_seconds.setdefault(since, {})[way] = f"failed: {error}"[:200]
                continue
            result.accounting_seconds.setdefault(since, {})[way] = round(time.monotonic() - started, 1)


def measure_size(
    size: int,
    work: Path,
    observe: float,
    days: int,
    run_every_days: int,
    report_limit: float,
    backfill_limit: float | None = None,
    windows: tuple[str, ...] = REPORT_WINDOWS,
    settle_limit: float = 1800,
    jobs: int = 2,
) -> SizeResult:
    """Every figure of one size (module docstring)."""
    work.mkdir(parents=True, exist_ok=True)
    fleet, policy, workloads = synthetic_fleet(work / "fleet", size)
    leaves = [
        Leaf(c, synthetic_leaf.exposition_lines(synthetic_leaf.leaf_series(c, fleet)))
        for c in fleet.clusters.values()
        if not c.central
    ]
    sample = synthetic_leaf.exposition(leaves[0].lines, 1.0, int(time.time() * 1000)).encode()
    data = work / "data"
    data.mkdir()
    history = backfill(leaves, days, run_every_days, data, work, backfill_limit, jobs)
    result = SizeResult(
        size, len(leaves[0].lines), len(sample), len(zlib.compress(sample, 6)) + 18, history
    )  # gzip: deflate + header
    servers = serve(leaves)
    port = _free_port()
    config = central_files(fleet, leaves, work, port)
    starting = time.monotonic()
    proc = start_prometheus(config, data, port, work / "prometheus.log")
    ready = round(time.monotonic() - starting, 1)
    url = f"http://127.0.0.1:{port}"
    try:
        result.compaction = {"ready_seconds": ready, **settle(url, settle_limit)}
        if (work / PROBE_RUNS_FILE).exists():
            result.records = backfill_records(
                url, work / PROBE_RUNS_FILE, data, work, history["days"], jobs, history["today"]
            )
            result.records["compaction"] = settle(url, settle_limit)
        result.observed = observation(observe, duration_seconds(fleet.monitoring.federation_interval))
        time.sleep(result.observed)
        measure(url, result, result.observed)
        time_reports(url, policy, workloads, work, result, report_limit, windows)
        try:  # what the reports' queries left the central holding (its own figure, read directly)
            result.rss_after_reports_mib = round(metrics_text(url)["process_resident_memory_bytes"] / 2**20)
        except (OSError, KeyError):
            pass
        time_accounting(url, result, duration_seconds(fleet.monitoring.federation_interval), report_limit, windows)
    finally:
        stop(proc)
        for server in servers:
            server.shutdown()
    return result


def render(results: list[SizeResult], environment: dict[str, Any]) -> str:
    """The figures as Markdown tables."""
    head = (
        "| leaves | series / leaf | answer KiB (gzip) | federated series | head series | blocks "
        "| scrape s avg / max | RSS MiB | CPU cores | rule groups ms (max) | "
        + " | ".join(f"report {w} s" for w in REPORT_WINDOWS)
        + " |"
    )
    lines = [head, "|" + "---:|" * (10 + len(REPORT_WINDOWS))]
    for r in results:

        def f(v: float | None, d: int = 1) -> str:
            return "—" if v is None else f"{v:.{d}f}"

        rules = max(r.rule_groups_ms.values()) if r.rule_groups_ms else None
        lines.append(
            f"| {r.leaves} | {r.series_per_leaf} "
            f"| {r.bytes_per_answer / 1024:.0f} ({r.gzip_bytes_per_answer / 1024:.0f}) "
            f"| {f(r.federated_series, 0)} | {f(r.head_series, 0)} | {f(r.blocks, 0)} "
            f"| {f(r.scrape_seconds_avg, 3)} / {f(r.scrape_seconds_max, 3)} | {f(r.rss_mib, 0)} | {f(r.cpu_cores, 3)} "
            f"| {f(rules, 1)} | " + " | ".join(f(r.report_seconds.get(w)) for w in REPORT_WINDOWS) + " |"
        )
    lines.append("")
    lines.append("History backfilled: " + "; ".join(
        f"{r.leaves} leaves: {r.history['samples']:,} samples over {r.history['days']} days in {r.history['seconds']} s"
        f" ({r.history.get('jobs', 1)} promtool runs at a time)"
        + (f" (of {r.history['asked']} asked: stopped by --backfill-limit; "
           f"{r.history['seconds'] / max(1, r.history['days']):.1f} s a day)"
           if r.history.get("asked", r.history["days"]) > r.history["days"] else "")
        for r in results
    ))  # fmt: skip
    lines.append("Central start-up and compaction of the backfilled blocks: " + "; ".join(
        f"{r.leaves} leaves: ready in {r.compaction.get('ready_seconds')} s, {r.compaction.get('blocks_before')} "
        f"blocks to {r.compaction.get('blocks_after')} in {r.compaction.get('seconds')} s "
        f"({r.compaction.get('compactions')} compactions{'' if r.compaction.get('settled') else ', not finished'}); "
        f"observed {r.observed} s; resident after the reports {r.rss_after_reports_mib} MiB"
        for r in results
    ))  # fmt: skip
    lines.append("Records of finished probe runs backfilled by promtool: " + "; ".join(
        f"{r.leaves} leaves: {r.records.get('blocks')} blocks in {r.records.get('seconds')} s, then "
        f"{r.records.get('compaction', {}).get('blocks_before')} blocks to "
        f"{r.records.get('compaction', {}).get('blocks_after')} in {r.records.get('compaction', {}).get('seconds')} s"
        for r in results if r.records
    ))  # fmt: skip
    lines.append("Accounting integrals (billed, used, idle; s): " + "; ".join(
        f"{r.leaves}: {r.accounting_seconds}" for r in results
    ))  # fmt: skip
    lines.append("Report phases (s: start, queries, drawing; queries sent; slowest query): " + "; ".join(
        f"{r.leaves} leaves {w}: {p.get('start')}, {p.get('queries')}, {p.get('drawing')}; {p.get('query_count')}; "
        f"{p.get('slowest_query')}"
        for r in results for w, p in r.report_phases.items()
    ))  # fmt: skip
    lines.append("Rule groups (last evaluation, ms): " + "; ".join(f"{r.leaves}: {r.rule_groups_ms}" for r in results))
    lines.append(f"Environment: {json.dumps(environment)}")
    for r in results:
        for window, error in r.report_errors.items():
            lines.append(f"report {window} at {r.leaves} leaves failed: {error}")
    return "\n".join(lines)


def environment() -> dict[str, Any]:
    """Where the figures come from: the machine, its load, the tools."""
    version = subprocess.run(["prometheus", "--version"], capture_output=True, text=True).stdout.splitlines()
    return {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "loadavg_at_start": [round(x, 2) for x in os.getloadavg()],
        "prometheus": version[0] if version else "?",
        "nice": os.nice(0),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,50,200", help="leaf counts (default 10,50,200)")
    parser.add_argument("--observe", type=float, default=240, help="seconds of scraping per size (default 240)")
    parser.add_argument("--days", type=int, default=180, help="days of history backfilled (default 180)")
    parser.add_argument("--run-every", type=int, default=7, help="days between two runs of a pair (default 7)")
    parser.add_argument("--report-limit", type=float, default=300, help="seconds a report may take (default 300)")
    parser.add_argument(
        "--backfill-limit", type=float, help="seconds after which no further day is backfilled (default: none)"
    )
    parser.add_argument(
        "--settle-limit",
        type=float,
        default=1800,
        help="seconds to wait at most for the central to compact the backfilled blocks (default 1800)",
    )
    parser.add_argument("--jobs", type=int, default=2, help="promtool runs at a time in the backfill (default 2)")
    parser.add_argument(
        "--windows",
        default=",".join(REPORT_WINDOWS),
        help=f"report windows timed, a subset of {','.join(REPORT_WINDOWS)} (default: all)",
    )
    parser.add_argument("--json", type=Path, help="write every figure as JSON")
    parser.add_argument("--keep", type=Path, help="work in this directory and keep it")
    args = parser.parse_args(argv)
    windows = tuple(w for w in REPORT_WINDOWS if w in args.windows.split(","))
    env = environment()
    work = args.keep or Path(tempfile.mkdtemp(prefix="central-scale-"))
    results = []
    started = time.monotonic()
    try:
        for size in (int(s) for s in args.sizes.split(",")):
            print(f"central_scale: {size} leaves ...", file=sys.stderr, flush=True)
            results.append(
                measure_size(
                    size,
                    work / f"leaves-{size}",
                    args.observe,
                    args.days,
                    args.run_every,
                    args.report_limit,
                    args.backfill_limit,
                    windows,
                    args.settle_limit,
                    args.jobs,
                )
            )
            print(render(results[-1:], env).splitlines()[2], file=sys.stderr, flush=True)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    env["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    env["seconds"] = round(time.monotonic() - started)
    print(render(results, env))
    if args.json:
        args.json.write_text(json.dumps({"results": [asdict(r) for r in results], "environment": env}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
