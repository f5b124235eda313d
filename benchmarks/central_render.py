"""The central benchmark's figures of one size, the Markdown tables of them and the environment they were measured
in (benchmarks/README.md, ``central_scale.py``)."""

from __future__ import annotations

import json
import os
import platform
import subprocess
from dataclasses import dataclass, field
from typing import Any

REPORT_WINDOWS = ("7d", "30d", "180d")


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
