"""The central benchmark's synthetic history: each leaf's records over the days before the run, written as
OpenMetrics and backfilled into the central's storage with ``promtool`` (benchmarks/README.md, ``central_scale.py``).

The history is thinner than a real central's (see ``write_history``): runs keep their real series (a new ``pod``
each run), continuous records get one sample a day.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import zlib
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks.central_leaves import Leaf
from fleet.model.billing import accounting_hours

DAY = 86400
RUN_HOUR = 3  # the day's runs start at 03:00 UTC (a nightly CronJob), spread over the next hour


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
