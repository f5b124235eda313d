"""Asking the central Prometheus for every section of the report: the queries in order, their answers turned into
the report's rows (fleet/report/model.py)."""

from __future__ import annotations

import math
import time
from typing import Any

from fleet.model.prometheus import duration_seconds
from fleet.model.spec import Fleet
from fleet.model.workloads import Workload
from fleet.report.accounting import accounting_queries, accounting_rows, lost_query
from fleet.report.costs import PriceTable, machine_for, machine_share
from fleet.report.model import Card, CardRow, Report, WorkloadSection
from fleet.report.probes import phase_queries, phase_rows, pool_waits, probe_queries, probe_rows
from fleet.report.progress import Progress
from fleet.report.prometheus_api import PrometheusClient
from fleet.report.queries import (
    Window,
    WorkloadQueries,
    at_fleet_scale,
    card_key,
    choose_step,
    observed_seconds,
    pod_spans,
    runs_counter,
    selector,
    workload_queries,
)
from fleet.report.queues import queue_queries, queue_rows
from fleet.report.runners import runner_queries, runner_rows
from fleet.report.sweeps import SweepRow, sweep_queries, sweep_rows


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


def _finite(values: list[list[Any]]) -> list[tuple[float, float]]:
    return [(float(t), float(v)) for t, v in values if math.isfinite(float(v))]


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
        len(sweep_queries(w, window)) if sweeping(w, fleet) else len(workload_queries(w.spec, window).instant()) + 2
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
    sweeps: dict[str, list[SweepRow]] = {}
    for wl in (w for w in workloads if sweeping(w, fleet)):
        answers = {}
        for name, promql in sweep_queries(wl, window).items():
            progress.step(f"{wl.name}: sweep epoch {name}")
            answers[name] = client.query(promql, window.end)
        sweeps[wl.name] = sweep_rows(wl, answers, fleet, prices)
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
        if at_fleet_scale(len(values["result"])):  # a fleet of many clusters: each card type's spread
            progress.step(f"{wl.name}: headline time series per card type")
            for sample in client.query_range(queries.spread, window.start, window.end, step):
                points = _finite(sample["values"])
                if points:
                    section.spread.setdefault(sample["metric"].get("gpu", ""), {})[sample["metric"]["stat"]] = points
        else:
            progress.step(f"{wl.name}: headline time series")
            for sample in client.query_range(queries.series, window.start, window.end, step):
                points = _finite(sample["values"])
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
        runner_rows(runner_answers), sweeps, accounting_rows(account_answers, fleet, prices), phases,
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
