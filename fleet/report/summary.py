"""The report's opening summary, for a reader with a minute: per workload the best card by its headline metric,
where it ran and what one result cost there, and the cheapest card per result; then one line each for the scaling
sweeps, the GPU accounting, the CI jobs and the probes, when the window has them. Every number is one the report's
tables show in full further down; counts are whole numbers."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from fleet.report.costs import approximate
from fleet.report.model import CardRow, Report, WorkloadSection

MISSING = "—"


@dataclass(frozen=True)
class WorkloadSummary:
    """One workload's line: its best card and the card whose results cost least (None: no data, no price)."""

    workload: str
    unit: str
    best: CardRow | None
    cheapest: CardRow | None


def workload_summary(section: WorkloadSection) -> WorkloadSummary:
    """The best card by the headline (the section's rows are sorted best first) and the cheapest per result."""
    priced = [r for r in section.rows if r.cost_per_result is not None]
    cheapest = min(priced, key=lambda r: r.cost_per_result or 0.0) if priced else None
    best = section.rows[0] if section.rows else None
    return WorkloadSummary(section.name, section.workload.spec.headline.unit, best, cheapest)


def summary_header(currency: str) -> list[str]:
    """The summary table's column titles."""
    return ["workload", "best card", "result", "where", "machine", f"cost / result ({currency})", "cheapest per result"]


def _cost(row: CardRow | None) -> str:
    cost = row.cost_per_result if row is not None else None
    return approximate(cost, 2) if cost is not None else "no price"


def summary_rows(report: Report) -> list[list[str]]:
    """One row per workload with data, in the report's order."""
    rows = []
    for section in report.sections:
        if not section.has_data:
            continue
        s = workload_summary(section)
        best = s.best
        assert best is not None
        if s.cheapest is None:
            cheapest = "no card has a price"
        elif s.cheapest is best:
            cheapest = "the best card"
        else:
            cheapest = f"{s.cheapest.gpu} @ {s.cheapest.cluster}: {_cost(s.cheapest)}"
        rows.append(
            [
                s.workload,
                best.gpu or MISSING,
                f"{approximate(best.result, 3)} {s.unit}",
                f"{best.cluster or MISSING} ({best.cloud or MISSING})",
                best.machine.label if best.machine else MISSING,
                _cost(best),
                cheapest,
            ]
        )
    return rows


def _whole(value: float) -> str:
    return f"{round(value):,}"


def summary_facts(report: Report) -> list[str]:
    """The lines under the table: sweeps, accounting, CI jobs, probes and the workloads without data."""
    currency = report.prices.currency
    facts = []
    for name, points in report.sweeps.items():
        if points:
            top = max(points, key=lambda p: p.speedup)
            cost = (
                f", {approximate(top.cost_per_epoch, 2)} {currency} an epoch" if top.cost_per_epoch is not None else ""
            )
            facts.append(
                f"Sweep {name}: best speed-up {approximate(top.speedup, 2)} at {top.accelerators} {top.gpu} on "
                f"{top.cluster} ({approximate(100 * top.efficiency, 2)} % efficient{cost})."
            )
    if report.accounting:
        billed = sum(a.billed for a in report.accounting)
        used = sum(a.used for a in report.accounting)
        idle = sum(a.idle for a in report.accounting)
        lost = sum(a.lost for a in report.accounting)
        costs = [a.cost for a in report.accounting]
        known = [c for c in costs if c is not None]
        share = f" ({approximate(100 * idle / billed, 2)} %)" if billed else ""
        cost = f"; cost {approximate(sum(known), 2)} {currency}" if known else ""
        unpriced = f" ({len(costs) - len(known)} pool row(s) without a price)" if known and None in costs else ""
        accounts = len({a.billing_account for a in report.accounting})
        facts.append(
            f"GPU accounting: {approximate(billed, 3)} card-hours billed to {accounts} account(s), "
            f"{approximate(used, 3)} used, {approximate(idle, 3)} idle{share}, {approximate(lost, 2)} lost to "
            f"preemption{cost}{unpriced}."
        )
    if report.runners:
        jobs = sum(round(r.jobs) for r in report.runners)
        failed = sum(round(r.failed or 0) for r in report.runners)
        facts.append(f"CI: {_whole(jobs)} job(s) on {len(report.runners)} card(s), {_whole(failed)} failed.")
    if report.probes:
        runs = [run for row in report.probes for run in row.runs]
        waits = [w for row in report.probes for w in row.waits]
        ok = sum(run.success for run in runs)
        wait = f", median time to first accelerator {approximate(statistics.median(waits), 2)} s" if waits else ""
        worst = f" (worst {approximate(max(waits), 2)} s)" if waits else ""
        facts.append(
            f"Probes: {_whole(len(runs))} run(s) on {len(report.probes)} pool(s), {_whole(ok)} found their "
            f"accelerator{wait}{worst}."
        )
    empty = [s.name for s in report.sections if not s.has_data]
    if empty:
        facts.append(f"No data in the window for: {', '.join(empty)}.")
    return facts
