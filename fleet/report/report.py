"""``python -m fleet report``: benchmark results from the central Prometheus, as HTML, Markdown and PNG plots.

For each workload (``workloads/<name>/workload.yaml``) the report queries, over one time window, its
headline metric per card (cluster, cloud, gpu), its run counter, and the GPU recording rules of the
benchmark's pods (the queries and what they mean: fleet/report/queries.py), then adds the cost per result
from the dated price table (fleet/report/costs.py). It writes ``DIR/index.html`` (self-contained: the plots are
embedded), ``DIR/report.md`` and the plots as ``DIR/<workload>-bars.png`` and ``DIR/<workload>-timeseries.png``.

Nothing is written when the report would be empty: an unreachable Prometheus, a refused query or a window
in which no workload has data ends the command with a message and a non-zero exit status. A workload
without data while others have some is reported as such (and named on stderr).
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import html
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from fleet.model.probe_phases import PHASES
from fleet.model.prometheus import duration_seconds
from fleet.model.spec import Fleet, load_fleet
from fleet.model.workloads import Workload, load_workloads
from fleet.report.accounting import AccountRow, accounting_queries, accounting_rows, lost_query
from fleet.report.costs import (
    PriceEntry,
    PriceTable,
    approximate,
    load_prices,
    machine_for,
    machine_share,
)
from fleet.report.model import Card, CardRow, Report, WorkloadSection
from fleet.report.probes import PhaseRow, ProbeRow, phase_queries, phase_rows, pool_waits, probe_queries, probe_rows
from fleet.report.prometheus_api import PrometheusClient, PrometheusError
from fleet.report.queries import (
    Window,
    WorkloadQueries,
    card_key,
    choose_step,
    observed_seconds,
    pod_spans,
    runs_counter,
    selector,
    window_from,
    workload_queries,
)
from fleet.report.queues import QueueRow, Wait, queue_queries, queue_rows
from fleet.report.runners import RunnerRow, runner_queries, runner_rows
from fleet.report.scaling import ScalingRow, scaling_queries, scaling_rows
from fleet.report.summary import summary_facts, summary_header, summary_rows

MISSING = "—"


class ReportError(Exception):
    """The report cannot be made; ``bad_input`` tells a problem with the command line from a failed query."""

    def __init__(self, message: str, bad_input: bool = False):
        super().__init__(message)
        self.bad_input = bad_input


class Progress:
    """``report: [n/total] what`` on stderr for every query: one updated line on a terminal, lines otherwise."""

    def __init__(self, total: int, stream: TextIO | None = None):
        self.total = total
        self.done = 0
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._width = 0

    def step(self, what: str) -> None:
        """Announce the next query."""
        self.done += 1
        line = f"report: [{self.done}/{self.total}] {what}"
        if self.tty:
            self.stream.write("\r" + line.ljust(self._width))
            self._width = max(self._width, len(line))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def finish(self) -> None:
        """End the progress line on a terminal."""
        if self.tty and self.done:
            self.stream.write("\n")
            self.stream.flush()


def _number(sample: dict[str, Any], key: str = "value") -> float | None:
    value = float(sample[key][1])
    return None if math.isnan(value) or math.isinf(value) else value


def _by_card(samples: list[dict[str, Any]]) -> dict[Card, float]:
    out: dict[Card, float] = {}
    for sample in samples:
        value = _number(sample)
        if value is not None:
            out[card_key(sample["metric"])] = value
    return out


def sweeping(workload: Workload, fleet: Fleet | None) -> bool:
    """Whether the report shows ``workload`` as a scaling sweep (the policy gives it a scale) instead of per card."""
    return workload.spec.distributed is not None and fleet is not None and workload.name in fleet.sweep_counts


def count_queries(workloads: list[Workload], window: Window, fleet: Fleet | None = None) -> int:
    """How many requests :func:`gather` sends at most (for the progress line)."""
    extra = (
        len(probe_queries(window))
        + len(phase_queries(window))
        + len(runner_queries(window))
        + len(queue_queries(window))
        + len(accounting_queries(window, 60))
        + 1
    )
    per_workload = [
        len(scaling_queries(w, window)) if sweeping(w, fleet) else len(workload_queries(w.spec, window).instant()) + 2
        for w in workloads
    ]
    return 1 + extra + sum(per_workload)


def gather(
    client: PrometheusClient,
    workloads: list[Workload],
    window: Window,
    fleet: Fleet | None,
    prices: PriceTable,
    progress: Progress,
) -> Report:
    """Query Prometheus for every workload; raises ``PrometheusError`` when a request fails."""
    step = choose_step(window.seconds)
    sections = []
    scaling: dict[str, list[ScalingRow]] = {}
    for wl in (w for w in workloads if sweeping(w, fleet)):
        answers = {}
        for name, promql in scaling_queries(wl, window).items():
            progress.step(f"{wl.name}: sweep epoch {name}")
            answers[name] = client.query(promql, window.end)
        scaling[wl.name] = scaling_rows(wl, answers, fleet, prices)
    for wl in (w for w in workloads if not sweeping(w, fleet)):
        queries = workload_queries(wl.spec, window)
        section = WorkloadSection(wl, queries, runs_counter(wl.spec))
        sections.append(section)
        values: dict[str, dict[Card, float]] = {}
        for name, promql in queries.instant().items():
            progress.step(f"{wl.name}: {name.replace('_', ' ')}")
            values[name] = _by_card(client.query(promql, window.end))
            if name == "result" and not values[name]:
                break
        if not values["result"]:
            section.no_data = _why_no_data(client, wl, queries, window, progress)
            continue
        progress.step(f"{wl.name}: headline time series")
        for sample in client.query_range(queries.series, window.start, window.end, step):
            points = [(float(t), float(v)) for t, v in sample["values"] if math.isfinite(float(v))]
            if points:
                section.series[card_key(sample["metric"])] = points
        progress.step(f"{wl.name}: first and last sample per pod")
        observed = observed_seconds(*pod_spans(client.query_samples(queries.samples, window.end)))
        for card, result in sorted(values["result"].items()):
            cluster, cloud, gpu = card
            machine = machine_for(cluster, cloud, gpu, fleet) if cloud and gpu else None
            row = CardRow(
                cluster,
                cloud,
                gpu,
                result,
                best=values["best"].get(card),
                pods=int(values["pods"].get(card, 0)),
                runs=values.get("runs", {}).get(card),
                gpu_utilization=values["gpu_utilization"].get(card),
                gpu_energy_joules=values["gpu_energy"].get(card),
                observed_seconds=observed.get(card),
                machine=machine,
                price=prices.lookup(machine.cloud, machine.machine_type, machine.accelerator_type) if machine else None,
                share=machine_share(wl.spec.accelerators, machine.gpus) if machine else 1.0,
            )
            section.rows.append(row)
        section.rows.sort(key=lambda r: r.result, reverse=wl.spec.headline.higher_is_better)
    probe_samples = {}
    for metric, promql in probe_queries(window).items():
        progress.step(f"probes: {metric}")
        probe_samples[metric] = client.query_samples(promql, window.end)
    probes = probe_rows(probe_samples)
    phase_answers = {}
    for name, promql in phase_queries(window).items():
        progress.step(f"probes: {name} by phase")
        phase_answers[name] = client.query(promql, window.end)
    phases = phase_rows(phase_answers)
    waits = pool_waits(probes)
    for section in sections:
        for row in section.rows:
            row.scale_up_seconds = waits.get((row.cluster, row.cloud, row.gpu))
    runner_answers = {}
    for name, promql in runner_queries(window).items():
        progress.step(f"CI runners: {name.replace('_', ' ')}")
        runner_answers[name] = client.query(promql, window.end)
    # the records arrive every federation interval: the integrals' resolution
    resolution = duration_seconds(fleet.monitoring.federation_interval) if fleet else 60.0
    account_answers = {}
    for name, promql in accounting_queries(window, resolution).items():
        progress.step(f"accounting: {name.replace('_', ' ')}" + ("" if name == "lost_pods" else " card-hours"))
        account_answers[name] = client.query(promql, window.end)
    progress.step("accounting: lost card-hours")
    lost = lost_query(window, resolution, account_answers["lost_pods"])
    account_answers["lost"] = client.query(lost, window.end) if lost else []
    queue_answers = {}
    for name, promql in queue_queries(window).items():
        progress.step(f"queues: {name.replace('_', ' ')}")
        queue_answers[name] = client.query(promql, window.end)
    return Report(
        client.display_url, window, step, time.time(), sections, prices, client.requests, probes,
        runner_rows(runner_answers), scaling, accounting_rows(account_answers, fleet, prices), phases,
        queue_rows(queue_answers, fleet),
    )  # fmt: skip


def _why_no_data(
    client: PrometheusClient, wl: Workload, queries: WorkloadQueries, window: Window, progress: Progress
) -> str:
    """Say whether the headline metric is absent from the window altogether or only without the right labels."""
    metric = wl.spec.headline.metric
    progress.step(f"{wl.name}: is {metric} there at all")
    anywhere = client.query(f"count(last_over_time({selector(metric, {})}[{window.range}]))", window.end)
    if not anywhere:
        return f"no series of the headline metric {metric} in the window"
    return (
        f"{metric} has series in the window, but none matches {queries.headline_selector} "
        "(are the PodMonitor's workload/gpu/cluster/cloud labels on them?)"
    )


# --- rendering --------------------------------------------------------------------------------------------


def utc(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _span(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"


def fmt(value: float | None, digits: int = 4) -> str:
    """A measured value for the tables: ``digits`` significant digits, or a dash when unknown."""
    return MISSING if value is None else approximate(value, digits)


def fmt_count(value: float | None) -> str:
    """A count (runs, jobs, epochs) as the whole number nearest to it, with thousands separators: Prometheus answers
    in floats, and ``increase()`` extrapolates a counter to the window's edges (4.07 jobs are 4)."""
    if value is None:
        return MISSING
    return f"{round(value):,}"


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


def _markdown_table(header: list[str], rows: list[list[str]], numeric: range | None = None) -> str:
    """A Markdown table; the ``numeric`` columns (default: from the fifth on) are right-aligned."""

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    numeric = numeric if numeric is not None else range(4, len(header))
    align = ["---:" if i in numeric else "---" for i in range(len(header))]
    return "\n".join([line(header), "| " + " | ".join(align) + " |", *(line(r) for r in rows)])


def prices_used(report: Report) -> list[PriceEntry]:
    """The price entries some row used, once each, in table order."""
    seen: dict[tuple[str, str, str], PriceEntry] = {}
    for section in report.sections:
        for r in section.rows:
            if r.price is not None and r.price_per_hour is not None:
                seen.setdefault(r.price.key, r.price)
    for rows in report.scaling.values():
        for s in rows:
            if s.price is not None and s.cost_per_epoch is not None:
                seen.setdefault(s.price.key, s.price)
    for a in report.accounting:
        if a.price is not None and a.cost is not None:
            seen.setdefault(a.price.key, a.price)
    return list(seen.values())


def scaling_header(currency: str) -> list[str]:
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


def scaling_table_rows(rows: list[ScalingRow]) -> list[list[str]]:
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


def scaling_sections(report: Report) -> list[tuple[str, str, list[str], list[list[str]], str]]:
    """Each sweeping workload's section (workload, title, header, rows, what to say without rows); numeric columns
    start at the fifth."""
    currency = report.prices.currency
    return [
        (name, f"Scaling: {name}", scaling_header(currency), scaling_table_rows(rows), NO_SWEEP)
        for name, rows in report.scaling.items()
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


SUMMARY_NOTE = (
    "Best card: the best result by the workload's headline metric (its table below); cost / result: there, at the "
    "price table's price for its machine; cheapest per result: the card whose results cost least."
)

METHOD = [
    "Every number is taken over the whole window and evaluated at its end, so finished Jobs still count "
    "(`last_over_time`/`max_over_time`, never instant values).",
    "result: per pod, the last headline value in the window, averaged over the card's pods (one pod per run "
    "of the Job); best: the best single sample.",
    "mean GPU util. and GPU energy: the `gpufleet:*` GPU recording rules of the benchmark's own pods (joined "
    "on cluster, namespace, pod), over the pods' whole life including start-up and the linger after the run.",
    "GPU time / result: the time between the first and last sample of the run counter in each pod, divided "
    "by the runs; est. billed time / result: an estimate, that time plus, for each pod, the pool's median wait for a "
    "node as its probes measured it in the window (scheduled run to running pod: the controller's and autoscaler's "
    "decisions, which are not billed, with the node's boot and image pull, which are), divided by the runs; "
    "cost / result: the estimated billed time x the machine's hourly price x the share of the machine the pod "
    "requests. Idle time after a run, before the autoscaler removes the node (10 minutes by default), is not "
    "counted.",
    "Shared cards: a pool whose cards are time-sliced or split into MIG instances shows it beside its machine "
    "(`time-slicing-2`, `mig-1g.5gb`), and a pod there pays for its slice or instance of the card; the same card "
    "whole on another cluster is the row to compare it with (the sharing penalty).",
    "Time to first accelerator: each probe run's wait from its CronJob's scheduled time to its pod running "
    "(`gpufleet_probe_scaleup_seconds`), the runs told apart by `gpufleet_probe_last_run_timestamp_seconds`; "
    "succeeded: runs whose accelerator answered (`gpufleet_probe_success`).",
    "CI jobs per card: `increase()` over the window of each GitLab runner's `gitlab_runner_jobs_total` and "
    "`gitlab_runner_failed_jobs_total`, and its job duration histogram's sum over its count (increase() "
    "extrapolates to the window's edges: the counts are rounded to whole jobs).",
    "Scaling: for each sweep job (one per accelerator count), each worker's timed epoch seconds and epochs "
    "(the workload's `distributed` counters, their highest value in the window, summed over restart attempts); time "
    "/ epoch is the slowest worker's seconds per epoch; speed-up is the smallest point's time over this one's and "
    "efficiency the speed-up over the ratio of accelerator counts; restarts is the highest JobSet restart attempt; "
    "cost / epoch is the time x the machine's hourly price x the job's nodes (the sweep point of the policy file).",
    "GPU accounting: each leaf's `gpufleet:billed_cards`, `used_cards` and `idle_cards` (cards at each evaluation: "
    "nodes up x their cards; running pods' requests, a time slice or MIG instance counting its part of a card; the "
    "difference) integrated over the window at the federation interval, `sum_over_time(x[window:interval]) x "
    "interval`, in card-hours; lost to preemption: the card-hours of pods whose node disappeared while they ran, "
    "already in used; cost: the account's used card-hours plus, for the pool's owner, its idle ones, at "
    "the machine's price per card-hour, so the accounts add up to what the cloud bills.",
    "Prices are approximate, dated observations (fleet/model/prices.yaml); the date and source of each are below.",
]


def render_markdown(report: Report, images: dict[str, dict[str, str]]) -> str:
    """The report as Markdown; ``images`` maps workload -> {"bars": file, "series": file} (relative paths)."""
    currency = report.prices.currency
    out = [
        "# GPU fleet benchmark report",
        "",
        f"Prometheus {report.prometheus}, window {utc(report.window.start)} to {utc(report.window.end)} "
        f"({_span(round(report.window.seconds))}), time series step {report.step:g} s, "
        f"generated {utc(report.generated)} with {report.queries_sent} queries.",
        "",
        "## Summary",
        "",
    ]
    rows = summary_rows(report)
    if rows:
        out += [_markdown_table(summary_header(currency), rows, numeric=range(5, 6)), "", SUMMARY_NOTE, ""]
    out += [f"- {fact}" for fact in summary_facts(report)] + [""]
    for section in report.sections:
        wl = section.workload
        headline = f"Headline: `{headline_series(wl)}`, {headline_direction(wl)}."
        out += [f"## {wl.name}", "", wl.spec.description.strip(), "", headline, ""]
        if not section.has_data:
            out += [f"**No data** in this window: {section.no_data}.", ""]
            continue
        files = images.get(wl.name, {})
        for kind, alt in (("bars", "per card"), ("series", "over time")):
            if kind in files:
                out += [f"![{wl.name}: {wl.spec.headline.metric} {alt}]({files[kind]})", ""]
        out += [_markdown_table(table_header(section, currency), table_rows(section)), ""]
        out += [f"- {note}" for note in section_notes(section, currency)] + [""]
    for name, title, header, rows, empty in scaling_sections(report):
        out += [f"## {title}", ""]
        if rows and "scaling" in images.get(name, {}):
            out += [f"![{name}: time per epoch and speed-up against accelerators]({images[name]['scaling']})", ""]
        out += [_markdown_table(header, rows) if rows else empty, ""]
    for title, header, rows, empty in fleet_tables(report):
        table = _markdown_table(header, rows, numeric=range(3, len(header))) if rows else empty
        out += [f"## {title}", "", table, ""]
    out += ["## Prices used", ""]
    used = prices_used(report)
    if used:
        out.append(
            _markdown_table(
                *prices_table(used, currency),
                numeric=range(3, 5),
            )
        )
    else:
        out.append("No card of this report has a price in the price table, so no cost is shown.")
    out += ["", "## How the numbers are made", ""] + [f"- {m}" for m in METHOD] + [""]
    for section in report.sections:
        out += [f"Queries for {section.name}:", "", "```promql"]
        out += [f"{name}: {q}" for name, q in section.queries.listing()] + ["```", ""]
    return "\n".join(out)


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2rem auto;max-width:1100px;
color:#222;padding:0 1rem}h1{font-size:1.6rem}h2{margin-top:2.5rem;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:1rem 0;font-size:.9rem}th,td{border:1px solid #ccc;padding:.3rem .5rem}
th{background:#f3f3f3}td.n{text-align:right;font-variant-numeric:tabular-nums}img{max-width:100%;display:block;
margin:.5rem 0}.nodata{background:#fff4e5;border-left:4px solid #f90;padding:.5rem 1rem}.meta{color:#555}
code,pre{background:#f6f6f6}pre{padding:.5rem;overflow-x:auto;font-size:.8rem}li{margin:.2rem 0}
"""


def _html_table(header: list[str], rows: list[list[str]], numeric_from: int = 4) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="n">{html.escape(c)}</td>' if i >= numeric_from else f"<td>{html.escape(c)}</td>"
            for i, c in enumerate(row)
        )
        + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _inline_code(text: str) -> str:
    """Markdown-ish notes to HTML: `code` spans become <code>, everything else is escaped."""
    parts = text.split("`")
    return "".join(f"<code>{html.escape(p)}</code>" if i % 2 else html.escape(p) for i, p in enumerate(parts))


def render_html(report: Report, pngs: dict[str, dict[str, bytes]]) -> str:
    """The report as one self-contained HTML page (plots embedded as base64 PNG)."""
    currency = report.prices.currency
    esc = html.escape
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8"><title>GPU fleet benchmark report</title>',
        f"<style>{_CSS}</style></head><body>",
        "<h1>GPU fleet benchmark report</h1>",
        f'<p class="meta">Prometheus <code>{esc(report.prometheus)}</code>, window {esc(utc(report.window.start))} '
        f"to {esc(utc(report.window.end))} ({esc(_span(round(report.window.seconds)))}), time series step "
        f"{report.step:g} s, generated {esc(utc(report.generated))} with {report.queries_sent} queries.</p>",
        '<h2 id="summary">Summary</h2>',
    ]
    rows = summary_rows(report)
    if rows:
        parts += [_html_table(summary_header(currency), rows, numeric_from=5), f"<p>{esc(SUMMARY_NOTE)}</p>"]
    facts = "".join(f"<li>{_inline_code(f)}</li>" for f in summary_facts(report))
    parts.append(f"<ul>{facts}</ul>" if facts else "")
    for section in report.sections:
        wl = section.workload
        parts += [
            f'<h2 id="{esc(wl.name)}">{esc(wl.name)}</h2>',
            f"<p>{esc(wl.spec.description.strip())}</p>",
            f"<p>Headline: <code>{esc(headline_series(wl))}</code>, {esc(headline_direction(wl))}.</p>",
        ]
        if not section.has_data:
            parts.append(f'<p class="nodata"><strong>No data</strong> in this window: {esc(section.no_data)}.</p>')
            continue
        for kind, alt in (("bars", "per card"), ("series", "over time")):
            data = pngs.get(wl.name, {}).get(kind)
            if data:
                encoded = base64.b64encode(data).decode("ascii")
                parts.append(
                    f'<img alt="{esc(wl.name)}: {esc(wl.spec.headline.metric)} {alt}" '
                    f'src="data:image/png;base64,{encoded}">'
                )
        parts.append(_html_table(table_header(section, currency), table_rows(section)))
        notes = "".join(f"<li>{_inline_code(n)}</li>" for n in section_notes(section, currency))
        parts.append(f"<ul>{notes}</ul>")
    for name, title, header, rows, empty in scaling_sections(report):
        parts.append(f'<h2 id="scaling-{esc(name)}">{esc(title)}</h2>')
        data = pngs.get(name, {}).get("scaling")
        if rows and data:
            encoded = base64.b64encode(data).decode("ascii")
            alt = f"{esc(name)}: time per epoch and speed-up against accelerators"
            parts.append(f'<img alt="{alt}" src="data:image/png;base64,{encoded}">')
        parts.append(_html_table(header, rows) if rows else f"<p>{esc(empty)}</p>")
    for title, header, rows, empty in fleet_tables(report):
        parts.append(f"<h2>{title}</h2>")
        parts.append(_html_table(header, rows, numeric_from=3) if rows else f"<p>{esc(empty)}</p>")
    parts.append("<h2>Prices used</h2>")
    used = prices_used(report)
    if used:
        parts.append(
            _html_table(
                *prices_table(used, currency),
                numeric_from=3,
            )
        )
    else:
        parts.append("<p>No card of this report has a price in the price table, so no cost is shown.</p>")
    parts.append("<h2>How the numbers are made</h2><ul>")
    parts += [f"<li>{_inline_code(m)}</li>" for m in METHOD]
    parts.append("</ul>")
    for section in report.sections:
        lines = [f"{n}: {q}" for n, q in section.queries.listing()]
        summary = f"<summary>Queries for {esc(section.name)}</summary>"
        parts.append(f"<details>{summary}<pre>{esc(chr(10).join(lines))}</pre></details>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def write_report(report: Report, out: Path) -> list[Path]:
    """Draw the plots and write index.html, report.md and the PNGs into ``out``; the files written."""
    from fleet.report.plots import bar_chart, scaling_chart, series_chart  # matplotlib only when plotting

    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    names: dict[str, dict[str, str]] = {}
    pngs: dict[str, dict[str, bytes]] = {}
    for section in report.sections:
        if not section.has_data:
            continue
        for kind, draw in (("bars", bar_chart), ("series", series_chart)):
            path = out / f"{section.name}-{'bars' if kind == 'bars' else 'timeseries'}.png"
            draw(section, path)
            names.setdefault(section.name, {})[kind] = path.name
            pngs.setdefault(section.name, {})[kind] = path.read_bytes()
            written.append(path)
    for name, rows in report.scaling.items():
        if rows:
            path = out / f"{name}-scaling.png"
            scaling_chart(name, rows, path)
            names.setdefault(name, {})["scaling"] = path.name
            pngs.setdefault(name, {})["scaling"] = path.read_bytes()
            written.append(path)
    (out / "report.md").write_text(render_markdown(report, names), encoding="utf-8")
    (out / "index.html").write_text(render_html(report, pngs), encoding="utf-8")
    return [out / "index.html", out / "report.md", *written]


# --- the command ------------------------------------------------------------------------------------------


def _select(workloads: dict[str, Workload], names: list[str] | None) -> list[Workload]:
    if not names:
        return list(workloads.values())
    unknown = [n for n in names if n not in workloads]
    if unknown:
        raise ReportError(f"unknown workload(s) {', '.join(unknown)}; known: {', '.join(workloads)}", bad_input=True)
    return [workloads[n] for n in dict.fromkeys(names)]


@dataclass(frozen=True)
class ReportRequest:
    """What a report is asked for: the Prometheus, the window (``since`` or ``start``/``end``), the output folder,
    the per-request timeout, the workloads (None: all), and the fleet, workload and price files."""

    prometheus: str
    out: Path
    since: str | None
    start: str | None
    end: str | None
    timeout: float
    workload: list[str] | None
    policy: Path
    workloads_dir: Path
    prices: Path | None

    @classmethod
    def from_namespace(cls, args: Any) -> ReportRequest:
        """The request of the ``report`` command line (an ``argparse.Namespace`` with these names)."""
        return cls(**{f.name: getattr(args, f.name) for f in dataclasses.fields(cls)})


def build(
    args: ReportRequest, now: float | None = None, stream: TextIO | None = None, budget: float | None = None
) -> Report:
    """Check the command line, query Prometheus and return the gathered report (``ReportError`` otherwise).

    Every request gets ``--timeout`` seconds for its whole answer, and all of them together ``budget`` seconds
    (default: the timeout times the number of requests the report may send), so the report ends in bounded
    time whatever the server does.
    """
    if not (args.timeout > 0 and math.isfinite(args.timeout)):
        raise ReportError(f"--timeout must be a positive number of seconds (got {args.timeout:g})", bad_input=True)
    try:
        window = window_from(now if now is not None else time.time(), args.since, args.start, args.end)
        client = PrometheusClient(args.prometheus, timeout=args.timeout)
    except ValueError as exc:
        raise ReportError(str(exc), bad_input=True) from None
    if args.out.exists() and not args.out.is_dir():
        raise ReportError(f"--out {args.out} exists and is not a directory", bad_input=True)
    workloads = _select(load_workloads(args.workloads_dir), args.workload)
    if not workloads:
        raise ReportError(f"no workload is defined under {args.workloads_dir}", bad_input=True)
    fleet = load_fleet(args.policy, args.workloads_dir)
    prices = load_prices(args.prices)
    progress = Progress(count_queries(workloads, window, fleet), stream)
    client.deadline = time.monotonic() + (budget if budget is not None else progress.total * args.timeout)
    try:
        progress.step(f"connecting to {client.display_url}")
        client.build_info()
        return gather(client, workloads, window, fleet, prices, progress)
    except PrometheusError as exc:
        raise ReportError(str(exc)) from None
    finally:
        progress.finish()
