"""Asking the central Prometheus for every section of the report: the queries in order, their answers turned into
the report's rows (fleet/report/model.py)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, Protocol, TypeVar

from fleet.model.core.fleet import Fleet
from fleet.model.core.workloads import Workload
from fleet.model.monitoring.prometheus import duration_seconds
from fleet.report.accounting import accounting_queries, accounting_rows, lost_query
from fleet.report.costs import PriceTable, machine_for, machine_share
from fleet.report.model import Card, CardRow, Report, WorkloadSection
from fleet.report.probes import (
    asks_records,
    phase_queries,
    phase_rows,
    pool_waits,
    probe_queries,
    probe_rows,
    records_cover,
    records_query,
)
from fleet.report.progress import Progress
from fleet.report.prometheus_api import PrometheusClient
from fleet.report.queries import (
    Window,
    WorkloadQueries,
    at_fleet_scale,
    card_key,
    choose_step,
    gpu_queries,
    observed_seconds,
    pod_spans,
    runs_counter,
    selector,
    workload_queries,
)
from fleet.report.query_pool import DEFAULT_CONCURRENCY, QueryPool
from fleet.report.queues import queue_queries, queue_rows
from fleet.report.runners import runner_queries, runner_rows
from fleet.report.sweeps import SweepRow, sweep_queries, sweep_rows

T = TypeVar("T")


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
        + (1 if asks_records(window) else 0)  # whether the records of finished runs cover the window
        + len(runner_queries(window))
        + len(queue_queries(window))
        + len(accounting_queries(window, 60))
        + 1
    )
    per_workload = [
        len(sweep_queries(w, window))
        if sweeping(w, fleet)
        else len((q := workload_queries(w.spec, window)).instant()) + 1 + len(q.sample_parts)
        for w in workloads
    ]
    gpu = 2 if any(not sweeping(w, fleet) for w in workloads) else 0  # utilisation and energy, for all workloads
    return 1 + extra + sum(per_workload) + gpu


def gather(
    client: PrometheusClient,
    workloads: list[Workload],
    window: Window,
    fleet: Fleet | None,
    prices: PriceTable,
    progress: Progress,
    concurrency: int = DEFAULT_CONCURRENCY,
) -> Report:
    """Query Prometheus for every workload, ``concurrency`` requests at a time (fleet/report/query_pool.py); raises
    ``PrometheusError`` when a request fails. The report is the same whatever the order the answers come in."""
    step = choose_step(window.seconds)

    with QueryPool(concurrency) as pool:

        def ask(what: str, call: Callable[..., T], *args: Any) -> Future[T]:
            def announced() -> T:
                progress.step(what)
                return call(*args)

            return pool.submit(announced)

        def instant(what: str, promql: str) -> Future[list[dict[str, Any]]]:
            return ask(what, client.query, promql, window.end)

        # every request that needs no other's answer, sent at once: the first of each workload's, then the rest
        sweep_asked = [
            (wl, {n: instant(f"{wl.name}: sweep epoch {n}", q) for n, q in sweep_queries(wl, window).items()})
            for wl in workloads
            if sweeping(wl, fleet)
        ]
        benchmarks = [wl for wl in workloads if not sweeping(wl, fleet)]
        gpu = gpu_queries([wl.spec for wl in benchmarks], window) if benchmarks else None
        per_workload = [(wl, workload_queries(wl.spec, window, gpu)) for wl in benchmarks]
        results_asked = {wl.name: instant(f"{wl.name}: result", queries.result) for wl, queries in per_workload}
        gpu_asked = (
            {
                "gpu_utilization": instant("GPU utilisation of every workload's pods", gpu.utilization),
                "gpu_energy": instant("GPU energy of every workload's pods", gpu.energy),
            }
            if gpu
            else {}
        )
        probes_asked = {
            metric: ask(f"probes: {metric}", client.query_samples, promql, window.end)
            for metric, promql in probe_queries(window).items()
        }
        runners_asked = {
            name: instant(f"CI runners: {name.replace('_', ' ')}", q) for name, q in runner_queries(window).items()
        }
        # the records arrive every federation interval: the integrals' resolution and the records' evaluation interval
        resolution = duration_seconds(fleet.monitoring.federation_interval) if fleet else 60.0
        covered = instant("probes: records of finished runs", records_query(window)) if asks_records(window) else None
        accounts_asked = {
            name: instant(f"accounting: {name.replace('_', ' ')}" + ("" if name == "lost_pods" else " card-hours"), q)
            for name, q in accounting_queries(window, resolution).items()
        }
        queues_asked = {
            name: instant(f"queues: {name.replace('_', ' ')}", q) for name, q in queue_queries(window).items()
        }
        by_workload = _ByWorkload(gpu_asked)
        pending = [
            _Section(client, wl, queries, window, step, fleet, prices, results_asked[wl.name], ask, by_workload)
            for wl, queries in per_workload
        ]
        records = covered is not None and records_cover(covered.result(), window, resolution)
        phases_asked = {
            name: instant(f"probes: {name} by phase", q) for name, q in phase_queries(window, records).items()
        }
        for section in pending:
            section.send_rest()
        sweeps: dict[str, list[SweepRow]] = {
            wl.name: sweep_rows(wl, {k: f.result() for k, f in asked.items()}, fleet, prices)
            for wl, asked in sweep_asked
        }
        sections = [section.result() for section in pending]
        probes = probe_rows({metric: f.result() for metric, f in probes_asked.items()})
        phases = phase_rows({name: f.result() for name, f in phases_asked.items()})
        waits = pool_waits(probes)
        for section in sections:
            for row in section.rows:
                row.scale_up_seconds = waits.get((row.cluster, row.cloud, row.gpu))
        runner_answers = {name: f.result() for name, f in runners_asked.items()}
        account_answers = {name: f.result() for name, f in accounts_asked.items()}
        lost = lost_query(window, resolution, account_answers["lost_pods"])
        if lost:
            account_answers["lost"] = instant("accounting: lost card-hours", lost).result()
        else:  # no pod lost: nothing to ask, the step counted all the same
            account_answers["lost"] = []
            progress.step("accounting: lost card-hours")
        by_workload.wait()  # the GPU answers, read even when no workload had data: their errors are the report's
        queue_answers = {name: f.result() for name, f in queues_asked.items()}
    return Report(
        client.display_url, window, step, time.time(), sections, prices, client.requests, probes,
        runner_rows(runner_answers), sweeps, accounting_rows(account_answers, fleet, prices), phases,
        queue_rows(queue_answers, fleet),
    )  # fmt: skip


class _ByWorkload:
    """The answers of the report's GPU queries (one each for all workloads), split by their ``workload`` label."""

    def __init__(self, asked: dict[str, Future[list[dict[str, Any]]]]):
        self._asked = asked
        self._split: dict[str, dict[str, dict[Card, float]]] | None = None

    def wait(self) -> dict[str, dict[str, dict[Card, float]]]:
        """Per workload and query name, the values per card (waits for the answers; raises what a query raised)."""
        if self._split is None:
            split: dict[str, dict[str, dict[Card, float]]] = {}
            for name, future in self._asked.items():
                for sample in future.result():
                    value = _number(sample)
                    if value is not None:
                        per_card = split.setdefault(sample["metric"].get("workload", ""), {})
                        per_card.setdefault(name, {})[card_key(sample["metric"])] = value
            self._split = split
        return self._split

    def of(self, workload: str) -> dict[str, dict[Card, float]]:
        """Per query name, the workload's values per card (waits for the answers)."""
        return {name: self.wait().get(workload, {}).get(name, {}) for name in self._asked}


class _Asker(Protocol):
    def __call__(self, what: str, call: Callable[..., T], *args: Any) -> Future[T]: ...


class _Section:
    """A workload's section while its answers come in: :meth:`result` waits for them and builds the rows."""

    def __init__(
        self,
        client: PrometheusClient,
        wl: Workload,
        queries: WorkloadQueries,
        window: Window,
        step: float,
        fleet: Fleet | None,
        prices: PriceTable,
        result: Future[list[dict[str, Any]]],
        ask: _Asker,
        gpu: _ByWorkload,
    ):
        self.client, self.wl, self.queries, self.window, self.step = client, wl, queries, window, step
        self.fleet, self.prices, self.result_asked, self.ask, self.gpu = fleet, prices, result, ask, gpu
        self.values: dict[str, dict[Card, float]] = {}
        self.no_data = ""
        self.fleet_scale = False
        self.rest: dict[str, Future[list[dict[str, Any]]]] = {}
        self.series: Future[list[dict[str, Any]]] | None = None
        self.samples: list[Future[list[dict[str, Any]]]] = []

    def send_rest(self) -> None:
        """Once the workload's result is in, send the rest of its queries (when it has cards) or ask why it has
        none."""
        wl, queries, window, ask = self.wl, self.queries, self.window, self.ask
        self.values["result"] = _by_card(self.result_asked.result())
        if not self.values["result"]:
            self.no_data = _why_no_data(self.client, wl, queries, window, ask)
            return
        self.rest = {
            name: ask(f"{wl.name}: {name.replace('_', ' ')}", self.client.query, promql, window.end)
            for name, promql in queries.instant().items()
            if name != "result"
        }
        self.fleet_scale = at_fleet_scale(len(self.values["result"]))  # many clusters: each card type's spread
        self.series = ask(
            f"{wl.name}: headline time series" + (" per card type" if self.fleet_scale else ""),
            self.client.query_range,
            queries.spread if self.fleet_scale else queries.series,
            window.start,
            window.end,
            self.step,
        )
        chunks = queries.sample_parts
        self.samples = [
            ask(f"{wl.name}: first and last sample per pod" + (f" ({i + 1}/{len(chunks)})" if len(chunks) > 1 else ""),
                self.client.query_samples, promql, window.end)
            for i, promql in enumerate(chunks)
        ]  # fmt: skip

    def result(self) -> WorkloadSection:
        """The section, once all its answers are in (after :meth:`send_rest`)."""
        wl, values, fleet_scale = self.wl, self.values, self.fleet_scale
        section = WorkloadSection(wl, self.queries, runs_counter(wl.spec))
        if self.series is None:
            section.no_data = self.no_data
            return section
        values.update({name: _by_card(f.result()) for name, f in self.rest.items()})
        values.update(self.gpu.of(wl.name))
        for sample in self.series.result():
            points = _finite(sample["values"])
            if not points:
                continue
            if fleet_scale:
                section.spread.setdefault(sample["metric"].get("gpu", ""), {})[sample["metric"]["stat"]] = points
            else:
                section.series[card_key(sample["metric"])] = points
        observed = observed_seconds(*pod_spans([s for chunk in self.samples for s in chunk.result()]))
        fleet, prices = self.fleet, self.prices
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
        return section


def _why_no_data(client: PrometheusClient, wl: Workload, queries: WorkloadQueries, window: Window, ask: _Asker) -> str:
    """Say whether the headline metric is absent from the window altogether or only without the right labels."""
    metric = wl.spec.headline.metric
    promql = f"count(last_over_time({selector(metric, {})}[{window.range}]))"
    anywhere = ask(f"{wl.name}: is {metric} there at all", client.query, promql, window.end).result()
    if not anywhere:
        return f"no series of the headline metric {metric} in the window"
    return (
        f"{metric} has series in the window, but none matches {queries.headline_selector} "
        "(are the PodMonitor's workload/gpu/cluster/cloud labels on them?)"
    )
