"""The central Prometheus at fleet scale: a real ``prometheus`` federating 10, 50 and 200 synthetic leaves.

For each size N it writes a synthetic fleet (``synthetic_fleet.generate_fleet``: N leaves of 8 GKE pools and 4
workloads, every pool probed, CI runners on two cards, plus the central; ``central_leaves.py``), serves each leaf's
``/federate`` answer from one Python process (one port a leaf; the series come from ``benchmarks.synthetic_leaf``),
backfills a 180-day history into the central's storage with ``promtool tsdb create-blocks-from openmetrics``
(``central_history.py``), starts ``prometheus`` with the central configuration the model renders
(``central_prometheus_config`` with the central's alert and probe rules; targets on loopback, plain HTTP instead of
mutual TLS; ``central_prometheus.py``), lets it scrape for ``--observe`` seconds and reads from it: series and
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
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import Any

from benchmarks import synthetic_leaf
from benchmarks.central_history import DAY, backfill
from benchmarks.central_leaves import Leaf, serve, synthetic_fleet
from benchmarks.central_prometheus import (
    PROBE_RUNS_FILE,
    central_files,
    free_port,
    query,
    scalar,
    start_prometheus,
    stop,
)
from benchmarks.central_render import REPORT_WINDOWS, SizeResult, environment, render
from fleet.model.billing.accounting import BILLED, IDLE, USED
from fleet.model.monitoring.prometheus import (
    duration_seconds,
)
from fleet.report.accounting import exact_integral, hourly_integral
from fleet.report.queries import Window, parse_duration

ROOT = Path(__file__).resolve().parent.parent
# The exact accounting integral (a step a minute through the window for every record) is timed up to 30 days only:
# over 180 days at 200 leaves (30 days of history) it took Prometheus to 21 GB resident and the kernel killed it, on
# a machine shared with others (the report sums the hourly records there instead).
EXACT_UP_TO = 31 * DAY


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
    result.federated_series = scalar(url, f"sum(scrape_samples_scraped{{{jobs}}})")
    result.head_series = scalar(url, "prometheus_tsdb_head_series")
    result.blocks = scalar(url, "prometheus_tsdb_blocks_loaded")
    result.scrape_seconds_avg = scalar(url, f"avg(avg_over_time(scrape_duration_seconds{{{jobs}}}[{window}]))")
    result.scrape_seconds_max = scalar(url, f"max(max_over_time(scrape_duration_seconds{{{jobs}}}[{window}]))")
    rss = scalar(url, 'max(process_resident_memory_bytes{job="prometheus"})')
    result.rss_mib = rss / 2**20 if rss is not None else None
    result.cpu_cores = scalar(url, f'rate(process_cpu_seconds_total{{job="prometheus"}}[{window}])')
    for sample in query(url, "prometheus_rule_group_last_duration_seconds"):
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
                    query(url, build(window, step, record), timeout=limit)
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
    port = free_port()
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
