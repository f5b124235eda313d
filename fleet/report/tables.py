"""The report's tables as cells (strings), shared by the Markdown and HTML pages: a workload's table and its notes,
the fleet's tables (probes, phases, CI runners, accounting, queues), the sweeps' tables and the prices used."""

from __future__ import annotations

from fleet.model.core.workloads import Workload
from fleet.model.probes.probe_phases import PHASES
from fleet.report.accounting import AccountRow
from fleet.report.costs import PriceEntry, approximate
from fleet.report.formatting import MISSING, fmt, fmt_count
from fleet.report.model import Report, WorkloadSection
from fleet.report.probes import PhaseRow, ProbeRow
from fleet.report.queues import QueueRow, Wait
from fleet.report.runners import RunnerRow
from fleet.report.sweeps import SweepRow


def headline_series(wl: Workload) -> str:
    """The headline metric with the label values that pick it: ``metric{stage="x"}``."""
    h = wl.spec.headline
    match = "{" + ", ".join(f'{k}="{v}"' for k, v in sorted(h.match.items())) + "}" if h.match else ""
    return h.metric + match


def headline_direction(wl: Workload) -> str:
    """``in <unit>, higher is better`` (or lower)."""
    h = wl.spec.headline
    return f"in {h.unit}, {'higher' if h.higher_is_better else 'lower'} is better"


def table_header(section: WorkloadSection, currency: str) -> list[str]:
    """The column titles of a workload's table."""
    unit = section.workload.spec.headline.unit
    return [
        "cluster",
        "cloud",
        "card",
        "machine",
        f"result ({unit})",
        f"best ({unit})",
        "runs",
        "pods",
        "mean GPU util. (%)",
        "GPU energy / result (J)",
        "GPU time / result (s)",
        "est. billed time / result (s)",
        f"cost / result ({currency}, approx.)",
    ]


def table_rows(section: WorkloadSection) -> list[list[str]]:
    """The cells of a workload's table, one list per card."""
    rows = []
    for r in section.rows:
        cost = r.cost_per_result
        rows.append(
            [
                r.cluster or MISSING,
                r.cloud or MISSING,
                r.gpu or MISSING,
                r.machine.label if r.machine else MISSING,
                fmt(r.result),
                fmt(r.best),
                fmt_count(r.runs),
                str(r.pods),
                fmt(r.gpu_utilization, 3),
                fmt(r.energy_per_result, 2),
                fmt(r.seconds_per_result, 2),
                fmt(r.billed_seconds_per_result, 2),
                approximate(cost, 2) if cost is not None else MISSING,
            ]
        )
    return rows


def section_notes(section: WorkloadSection, currency: str) -> list[str]:
    """Footnotes under a workload's table: what counts as a run, what has no GPU metrics or no price."""
    notes = []
    if section.runs_counter:
        notes.append(f"Runs: results counted by `{section.runs_counter}` in the pods seen in the window.")
    else:
        notes.append("Runs: the workload declares no counter, so runs and per-result columns are unknown.")
    no_gpu = [r.gpu + "@" + r.cluster for r in section.rows if r.gpu_utilization is None]
    if no_gpu:
        notes.append(f"No GPU (DCGM) metrics for the benchmark pods of: {', '.join(no_gpu)}.")
    for r in section.rows:
        if r.machine is None:
            notes.append(f"{r.gpu}@{r.cluster}: machine unknown (card not in the policy or catalogue for {r.cloud}).")
        elif r.price_per_hour is None:
            kind = "spot" if r.machine.spot else "on-demand"
            reason = f": {r.price.source.strip()}" if r.price else ""
            notes.append(f"{r.gpu}@{r.cluster}: no {kind} price for {r.machine.label} in the price table{reason}.")
    return notes


PROBE_HEADER = [
    "cluster",
    "cloud",
    "card",
    "probe runs",
    "succeeded (%)",
    "median time to first accelerator (s)",
    "worst (s)",
]


def probe_table_rows(rows: list[ProbeRow]) -> list[list[str]]:
    """The cells of the probes' table, one list per probed pool."""
    return [
        [
            r.cluster or MISSING,
            r.cloud or MISSING,
            r.gpu or MISSING,
            str(len(r.runs)),
            fmt(100 * r.success_rate if r.success_rate is not None else None, 3),
            fmt(r.median_wait, 4),
            fmt(r.worst_wait, 4),
        ]
        for r in rows
    ]


PHASE_HEADER = ["cluster", "cloud", "card", "runs"] + [f"{p}: median / worst (s)" for p in PHASES]


def phase_table_rows(rows: list[PhaseRow]) -> list[list[str]]:
    """The cells of the phases' table, one list per probed pool: per phase its median and worst over the runs."""
    return [
        [r.cluster or MISSING, r.cloud or MISSING, r.gpu or MISSING, str(r.runs)]
        + [f"{fmt(r.median(p), 3)} / {fmt(r.worst(p), 3)}" for p in PHASES]
        for r in rows
    ]


RUNNER_HEADER = ["cluster", "cloud", "card", "CI jobs", "failed", "failed (%)", "mean job duration (s)"]


def runner_table_rows(rows: list[RunnerRow]) -> list[list[str]]:
    """The cells of the CI runners' table, one list per card."""
    return [
        [
            r.cluster or MISSING,
            r.cloud or MISSING,
            r.gpu or MISSING,
            fmt_count(r.jobs),
            fmt_count(r.failed),
            fmt(100 * r.failed_share if r.failed_share is not None else None, 3),
            fmt(r.mean_seconds, 4),
        ]
        for r in rows
    ]


ACCOUNT_HEADER = [
    "billing account",
    "cluster",
    "card (pool)",
    "billed (card-h)",
    "used (card-h)",
    "idle (card-h)",
    "idle (%)",
    "lost to preemption (card-h)",
    "cost (USD, approx.)",
]


def account_table_rows(rows: list[AccountRow]) -> list[list[str]]:
    """The cells of the accounting table, one list per (account, pool)."""
    return [
        [
            r.billing_account or MISSING,
            r.cluster or MISSING,
            f"{r.gpu} ({r.pool})" if r.pool else r.gpu or MISSING,
            fmt(r.billed, 4),
            fmt(r.used, 4),
            fmt(r.idle, 4),
            fmt(100 * r.idle_share if r.idle_share is not None else None, 3),
            fmt(r.lost, 4),
            approximate(r.cost, 2) if r.cost is not None else MISSING,
        ]
        for r in rows
    ]


QUEUE_HEADER = [
    "queue", "worker", "place", "admitted",
    "to admission, median (s)", "to admission, worst (s)", "to admission, mean (s)",
    "admission to running, median (s)", "admission to running, worst (s)", "admission to running, mean (s)",
    "submission to running, mean (s)", "spilled past the first",
]  # fmt: skip


def _wait_cells(wait: Wait) -> list[str]:
    return [fmt(wait.median, 4), wait.worst.text() if wait.worst else MISSING, fmt(wait.mean, 4)]


def queue_table_rows(rows: list[QueueRow]) -> list[list[str]]:
    """The cells of the queues' table: per queue, a row per worker in the queue's order (its place in it; a dash for
    a worker the policy does not name) with its wait from admission to running, then the queue's total, its waits to
    admission (measured on the manager, per queue) and to running, the mean from submission to running and spills
    (fleet/report/queues.py says what each wait is)."""
    cells = []
    for r in rows:
        for worker, admitted in r.admitted.items():
            place = str(r.order.index(worker) + 1) if worker in r.order else MISSING
            cells.append(
                [r.queue, worker, place, fmt_count(admitted), "", "", "", *_wait_cells(r.start[worker]), "", ""]
            )
        cells.append(
            [
                r.queue, "all workers", "", fmt_count(r.total), *_wait_cells(r.admission), *_wait_cells(r.start_all),
                fmt(r.submission_to_running_mean, 4), fmt_count(r.spilled),
            ]
        )  # fmt: skip
    return cells


QUEUES_TITLE = "Queues (Kueue MultiKueue on the manager)"
NO_QUEUES = "No queue admitted a job in this window (policy file: queues; Kueue's metrics on the manager)."
NO_ACCOUNTING = "No GPU card-hours were recorded in this window (the leaves' gpufleet-accounting rules)."
ACCOUNTING_TITLE = "GPU accounting per billing account"
NO_RUNNERS = "No CI job ran on the fleet's GitLab runners in this window (policy file: runners)."
RUNNERS_TITLE = "CI jobs per card (GitLab runners)"
NO_PROBES = "No probe ran in this window (the pools' probes: defaults.probe in the policy file)."
NO_PHASES = "No probe's phases were recorded in this window (the leaves' gpufleet-probe-phases rules)."
PHASES_TITLE = "Time to first accelerator by phase (probes)"
PROBES_TITLE = "Time to first accelerator (probes)"


def fleet_tables(report: Report) -> list[tuple[str, list[str], list[list[str]], str]]:
    """The report's tables beside the workloads' (title, header, rows, what to say without rows): the probes' time to
    first accelerator and the runners' CI jobs. Their numeric columns start at the fourth."""
    return [
        (PROBES_TITLE, PROBE_HEADER, probe_table_rows(report.probes), NO_PROBES),
        (PHASES_TITLE, PHASE_HEADER, phase_table_rows(report.phases), NO_PHASES),
        (RUNNERS_TITLE, RUNNER_HEADER, runner_table_rows(report.runners), NO_RUNNERS),
        (ACCOUNTING_TITLE, ACCOUNT_HEADER, account_table_rows(report.accounting), NO_ACCOUNTING),
        (QUEUES_TITLE, QUEUE_HEADER, queue_table_rows(report.queues), NO_QUEUES),
    ]


def prices_used(report: Report) -> list[PriceEntry]:
    """The price entries some row used, once each, in table order."""
    seen: dict[tuple[str, str, str], PriceEntry] = {}
    for section in report.sections:
        for r in section.rows:
            if r.price is not None and r.price_per_hour is not None:
                seen.setdefault(r.price.key, r.price)
    for rows in report.sweeps.values():
        for s in rows:
            if s.price is not None and s.cost_per_epoch is not None:
                seen.setdefault(s.price.key, s.price)
    for a in report.accounting:
        if a.price is not None and a.cost is not None:
            seen.setdefault(a.price.key, a.price)
    return list(seen.values())


def sweep_header(currency: str) -> list[str]:
    """The column titles of a sweep's table."""
    return [
        "cluster",
        "cloud",
        "card",
        "machine",
        "accelerators",
        "nodes",
        "epochs",
        "time / epoch (s)",
        "speed-up",
        "efficiency (%)",
        "restarts",
        f"cost / epoch ({currency}, approx.)",
    ]


def sweep_table_rows(rows: list[SweepRow]) -> list[list[str]]:
    """The cells of a sweep's table, one list per point."""
    return [
        [
            r.cluster or MISSING,
            r.cloud or MISSING,
            r.gpu or MISSING,
            r.machine or MISSING,
            str(r.accelerators),
            str(r.nodes) if r.nodes is not None else MISSING,
            fmt_count(r.epochs),
            fmt(r.seconds_per_epoch, 4),
            fmt(r.speedup, 3),
            fmt(100 * r.efficiency, 3),
            str(r.restarts),
            approximate(r.cost_per_epoch, 2) if r.cost_per_epoch is not None else MISSING,
        ]
        for r in rows
    ]


NO_SWEEP = "No sweep job reported an epoch in this window (policy file: the workload's scale)."


def sweep_sections(report: Report) -> list[tuple[str, str, list[str], list[list[str]], str]]:
    """Each sweeping workload's section (workload, title, header, rows, what to say without rows); numeric columns
    start at the fifth."""
    currency = report.prices.currency
    return [
        (name, f"Sweep: {name}", sweep_header(currency), sweep_table_rows(rows), NO_SWEEP)
        for name, rows in report.sweeps.items()
    ]


def prices_table(used: list[PriceEntry], currency: str) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the "Prices used" table (Markdown and HTML alike)."""
    header = ["cloud", "machine", "region", f"spot ({currency}/h)", f"on-demand ({currency}/h)", "as of", "source"]
    rows = [
        [
            p.cloud,
            p.machine_type + (f" + {p.accelerator_type}" if p.accelerator_type else ""),
            p.region,
            fmt(p.spot, 2),
            fmt(p.on_demand, 3),
            p.as_of.isoformat(),
            p.source.strip() + (f" ({p.note})" if p.note else ""),
        ]
        for p in used
    ]
    return header, rows
