"""The PromQL of the benchmark report, built from the workload definitions: pure functions, no I/O.

Every benchmark series on the central Prometheus carries ``cluster`` and ``cloud`` (the leaf's external
labels, kept by federation) and ``workload``, ``gpu``, ``namespace`` and ``pod`` (the PodMonitor's target
labels; see components/kubernetes/benchmark.py). A card of the report is one (cluster, cloud, gpu).

Benchmark Jobs end, and their series stop (on the central they even linger up to 5 minutes, since
staleness does not cross federation). So every number is taken over the whole report window, evaluated
at its end, never as an instant value:

* result: per pod, the last value of the headline series in the window (``last_over_time``), averaged
  over the card's pods (one pod per Job run);
* best: the best value any sample reached (``max_over_time`` or ``min_over_time`` by the headline's direction);
* runs: the workload's run counter (chosen by :func:`runs_counter`), per pod the highest value in the
  window (``max_over_time``: mtail's counters start at 0 in every pod), summed over the pods;
* GPU utilisation and energy: the leaf's GPU recording rules (fleet/model/monitoring/prometheus.py), per benchmark pod,
  joined on (cluster, namespace, pod) with the pods of the benchmark; the mean utilisation over the
  pod's life and the energy ``increase()`` over the window. Those records carry no workload (one series per GPU pod
  of the fleet: over 180 days of 200 clusters, over half a million), so one query each serves every workload of the
  report (:func:`gpu_queries`: the pods of all benchmarks joined at once, the answer by workload) instead of one per
  workload reading them all again;
* the time series of the headline per card, as a range query whose step keeps every series under
  Prometheus' limit of 11,000 points; over more cards than a plot can tell apart (``CARDS_PER_PLOT``, a fleet of many
  clusters), per card type its lowest, median and highest card at each step instead (``spread``: Prometheus
  aggregates, the answer holds three series a card type whatever the clusters);
* per pod, the timestamps of the run counter's first and last samples in the window (its raw samples, read once:
  a pod's series holds only the samples of its run, so this is exact and costs what the runs hold, where a
  ``timestamp()`` subquery evaluates every step of the window over every series): the pod's running time, from
  which the GPU time per result is derived.
"""

from __future__ import annotations

import datetime
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fleet.model.core.workloads import WorkloadSpec, runs_counter
from fleet.model.monitoring.prometheus import GPU_RECORDING_RULES, duration_seconds
from fleet.report.prometheus_api import MAX_POINTS_PER_SERIES

#: A card of the report: the labels every benchmark series has once federated.
CARD_LABELS: tuple[str, ...] = ("cluster", "cloud", "gpu")
#: What identifies a pod across the fleet; GPU aggregates and benchmark series share these labels.
POD_LABELS: tuple[str, ...] = ("cluster", "namespace", "pod")
GPU_UTILIZATION = "gpufleet:gpu_utilization_percent:avg"
GPU_ENERGY = "gpufleet:gpu_energy_joules:sum"
assert GPU_UTILIZATION in GPU_RECORDING_RULES and GPU_ENERGY in GPU_RECORDING_RULES

#: The most cards a workload's plots draw one by one (a bar and a line each, with a legend entry); above it they show
#: each card type's spread over the clusters, from :attr:`WorkloadQueries.spread` (a fleet of many clusters).
CARDS_PER_PLOT = 24
#: The statistics of the spread, by the ``stat`` label its query adds: the lowest card, the median, the highest.
SPREAD_STATS: tuple[str, ...] = ("min", "median", "max")


def at_fleet_scale(cards: int) -> bool:
    """Whether a workload's plots show each card type's spread instead of each of its ``cards`` cards."""
    return cards > CARDS_PER_PLOT


#: Points a plotted series aims at; the step grows with the window and never drops below MIN_STEP_SECONDS.
TARGET_POINTS = 1000
MIN_STEP_SECONDS = 1.0

_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


@dataclass(frozen=True)
class Window:
    """The report's time window, in Unix seconds; queries over it are evaluated at ``end``."""

    start: float
    end: float

    def __post_init__(self) -> None:
        if not self.end > self.start:
            raise ValueError("the window's end must be after its start")

    @property
    def seconds(self) -> float:
        """Length of the window."""
        return self.end - self.start

    @property
    def range(self) -> str:
        """The window as a PromQL range duration (whole seconds, rounded up): ``3600s``."""
        return f"{math.ceil(self.seconds)}s"


def parse_duration(text: str) -> float:
    """Seconds in a Prometheus-style duration (``90m``, ``12h``, ``7d``, ``1h30m``); ``ValueError`` otherwise."""
    seconds = duration_seconds(text.strip())
    if seconds <= 0:
        raise ValueError(f"{text!r} is not a positive duration")
    return seconds


def parse_time(text: str) -> float:
    """Unix seconds from RFC 3339 (``2026-11-01T08:00:00Z``), a date (``2026-11-01``, UTC) or Unix seconds."""
    value = text.strip()
    try:
        return float(value)
    except ValueError:
        pass
    try:
        moment = datetime.datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"{text!r} is not a time: use RFC 3339 (2026-11-01T08:00:00Z), a date or Unix time") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return moment.timestamp()


# The longest window a report asks for: beyond it, the queries planned grow with a window no Prometheus holds
# (``--since 99999999d`` planned 14 million of them).
DAY = 86400.0
MAX_WINDOW_DAYS = 3660


def window_from(
    now: float, since: str | None = None, start: str | None = None, end: str | None = None, default: str = "7d"
) -> Window:
    """The window from the command line: ``since`` before ``now``, or ``start``..``end`` (``end`` defaults to now)."""
    if since is not None and (start is not None or end is not None):
        raise ValueError("give either --since or --start/--end, not both")
    if end is not None and start is None:
        raise ValueError("--end needs --start")
    if start is not None:
        begin, finish = parse_time(start), parse_time(end) if end is not None else now
        if finish <= begin:
            raise ValueError(f"the window is empty: --end ({end or 'now'}) is not after --start ({start})")
        if finish - begin > MAX_WINDOW_DAYS * DAY:
            raise ValueError(
                f"--start {start} to --end {end or 'now'} is {(finish - begin) / DAY:,.0f} days: a report covers at "
                f"most {MAX_WINDOW_DAYS} days (10 years, longer than a Prometheus keeps), such as --since 180d"
            )
        return Window(begin, finish)
    seconds = parse_duration(since or default)
    if seconds > MAX_WINDOW_DAYS * DAY:
        raise ValueError(
            f"--since {since}: a report covers at most {MAX_WINDOW_DAYS}d (10 years, longer than a Prometheus "
            "keeps), such as --since 180d"
        )
    return Window(now - seconds, now)


def choose_step(
    seconds: float,
    target_points: int = TARGET_POINTS,
    max_points: int = MAX_POINTS_PER_SERIES,
    min_step: float = MIN_STEP_SECONDS,
) -> float:
    """A range-query step (whole seconds) giving about ``target_points`` per series and never over ``max_points``."""
    if seconds <= 0:
        raise ValueError("the window must be longer than zero")
    if not 1 <= target_points <= max_points:
        raise ValueError("target_points must be between 1 and max_points")
    step = max(min_step, math.ceil(seconds / target_points))
    while math.floor(seconds / step) + 1 > max_points:  # only when min_step is below 1 s
        step = math.ceil(step + 1)
    return float(step)


#: A series every Prometheus has while it scrapes (its targets' health): present at a window's start, the Prometheus
#: was collecting then, so a counter without samples at that time was born inside the window.
COLLECTING = "up"


def increase_from_birth(counter: str, window: Window) -> str:
    """A counter's increase over ``window``, per series, counting a series born inside it from zero.

    ``increase()`` starts at a series' first sample, so it misses what a counter held when it first appeared: a
    Kueue counter or histogram child is created by its first event (a queue's first admission on a worker, its
    first wait of a priority class), and over a window where that was the only one it answered 0, or nothing with a
    single sample (found with a real Kueue on the real tier). A series with no sample at the window's start, while
    the Prometheus was collecting (:data:`COLLECTING`), is counted by its value at the end, which is every event
    since it was born; every other series by ``increase()``. Where the Prometheus holds nothing at the start (a
    window longer than its retention) every series is taken by ``increase()``, as before."""
    r = window.range
    born = f"({counter} unless {counter} offset {r}) and on () group({COLLECTING} offset {r})"
    return f"(({born}) or increase({counter}[{r}]))"


def escape_label_value(value: str) -> str:
    """A label value as a PromQL string literal body (backslash, double quote and newline escaped)."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def selector(metric: str, labels: Mapping[str, str], *raw_matchers: str) -> str:
    """``metric{a="x",b="y",...}`` with equality matchers in sorted order, plus any raw matchers (``pod!=""``)."""
    for name in labels:
        if not _LABEL_NAME.match(name):
            raise ValueError(f"{name!r} is not a valid label name")
    matchers = [f'{name}="{escape_label_value(value)}"' for name, value in sorted(labels.items())]
    matchers.extend(raw_matchers)
    return f"{metric}{{{','.join(matchers)}}}" if matchers else metric


@dataclass(frozen=True)
class WorkloadQueries:
    """Every PromQL expression the report runs for one workload (instant ones at the window's end)."""

    headline_selector: str
    result: str  # per card: mean over pods of each pod's last headline value
    best: str  # per card: the best headline sample
    pods: str  # per card: how many pods reported the headline
    runs: str | None  # per card: results counted by the run counter (None: the workload declares no counter)
    gpu_utilization: str  # per workload and card: mean GPU utilisation of the benchmark's pods over their life
    gpu_energy: str  # per workload and card: GPU energy (J) of the benchmark's pods in the window
    series: str  # range query: the headline per card
    spread: str  # range query: per card type (gpu), its lowest, median and highest card (label ``stat``)
    samples: str  # per pod: the run counter's (or headline's) raw samples in the window (its first and last)
    sample_parts: tuple[str, ...] = ()  # ``samples`` a part of the window at a time, as sent (:func:`sample_chunks`)

    def instant(self) -> dict[str, str]:
        """The workload's own instant queries by name (the order the report runs them); the GPU ones are the
        report's, sent once for all its workloads."""
        out = {"result": self.result, "best": self.best, "pods": self.pods, "runs": self.runs}
        return {name: query for name, query in out.items() if query is not None}

    def listing(self, spread: bool = False) -> list[tuple[str, str]]:
        """Every query with its name, as the report prints them (``spread``: the time series per card type)."""
        return [
            *self.instant().items(),
            ("gpu_utilization", self.gpu_utilization),
            ("gpu_energy", self.gpu_energy),
            ("series per card type", self.spread) if spread else ("series", self.series),
            *(("samples", part) for part in self.sample_parts or (self.samples,)),
        ]


@dataclass(frozen=True)
class GpuQueries:
    """The GPU recording rules of the benchmark pods of every workload of a report, one query each, answered per
    (workload, cluster, cloud, gpu)."""

    utilization: str  # mean GPU utilisation of each card's benchmark pods over their life
    energy: str  # GPU energy (J) of each card's benchmark pods in the window


def gpu_queries(specs: Sequence[WorkloadSpec], window: Window) -> GpuQueries:
    """One utilisation and one energy query over ``window`` for the workloads ``specs``: their pods are told by each
    one's headline series (the workload's ``workload`` label and a ``pod``), joined with the GPU records on (cluster,
    namespace, pod), and every answer carries its ``workload``."""
    if not specs:
        raise ValueError("the GPU queries need at least one workload")
    w = window.range
    on_pod = ", ".join(POD_LABELS)
    # The benchmark's pods: series without a pod label are left out, or they would join the idle GPUs
    # (dcgm-exporter leaves pod empty for a GPU no pod uses).
    with_pod = [selector(spec.headline.metric, {"workload": spec.name}, 'pod!=""') for spec in specs]
    pods = " or ".join(f"group by ({on_pod}, gpu, workload) (last_over_time({s}[{w}]))" for s in with_pod)
    join = f"on ({on_pod}) group_left (gpu, workload) ({pods})"
    by = ", ".join(("workload", *CARD_LABELS))
    return GpuQueries(
        utilization=f"avg by ({by}) (avg_over_time({GPU_UTILIZATION}[{w}]) * {join})",
        energy=f"sum by ({by}) (increase({GPU_ENERGY}[{w}]) * {join})",
    )


def workload_queries(spec: WorkloadSpec, window: Window, gpu: GpuQueries | None = None) -> WorkloadQueries:
    """The report's queries for one workload over ``window``; ``gpu``: the report's GPU queries of all its workloads
    (default: this workload's alone)."""
    w = window.range
    card = ", ".join(CARD_LABELS)
    headline = spec.headline
    head = selector(headline.metric, {"workload": spec.name, **headline.match})
    direction = "max" if headline.higher_is_better else "min"
    counter_name = runs_counter(spec)
    counter = None
    if counter_name is not None:
        counter_labels = next(m.labels for m in spec.metrics if m.name == counter_name)
        narrowed = {k: v for k, v in headline.match.items() if k in counter_labels}
        counter = selector(counter_name, {"workload": spec.name, **narrowed})
    gpu = gpu or gpu_queries([spec], window)
    per_card = f"max by ({card}) ({head})"
    stats = {"min": f"min by (gpu) ({per_card})", "median": f"quantile by (gpu) (0.5, {per_card})",
             "max": f"max by (gpu) ({per_card})"}  # fmt: skip
    assert tuple(stats) == SPREAD_STATS
    return WorkloadQueries(
        headline_selector=head,
        result=f"avg by ({card}) (last_over_time({head}[{w}]))",
        best=f"{direction} by ({card}) ({direction}_over_time({head}[{w}]))",
        pods=f"count by ({card}) (group by ({card}, namespace, pod) (last_over_time({head}[{w}])))",
        runs=f"sum by ({card}) (max_over_time({counter}[{w}]))" if counter else None,
        gpu_utilization=gpu.utilization,
        gpu_energy=gpu.energy,
        series=per_card,
        spread=" or ".join(f'label_replace({q}, "stat", "{name}", "", "")' for name, q in stats.items()),
        samples=f"{counter or head}[{w}]",
        sample_parts=tuple(sample_chunks(f"{counter or head}[{w}]", window)),
    )


def time_chunks(window: Window, longest: float) -> list[Window]:
    """The window cut into consecutive windows of at most ``longest`` seconds, from its end back, their ends on
    whole milliseconds: (start, end] is the union of their (start, end], so subqueries over the chunks hold exactly
    the whole window's points (the points lie on multiples of the step, wherever the window is cut)."""
    start_ms, end_ms = round(window.start * 1000), round(window.end * 1000)
    chunks = []
    while end_ms > start_ms:
        begin = max(start_ms, end_ms - round(longest * 1000))
        chunks.append(Window(begin / 1000, end_ms / 1000))
        end_ms = begin
    return chunks or [window]


#: The longest part of the window whose raw samples one request reads (``WorkloadQueries.sample_chunks``): each pod's
#: run counter over 180 days of 200 clusters is one answer per chunk, well under the client's 64 MiB however densely
#: the central holds the runs, and the chunks go side by side.
SAMPLES_CHUNK = 14 * 86400


def sample_chunks(samples: str, window: Window) -> list[str]:
    """The raw-samples selector ``samples`` (``metric{...}[<window>]``) as one instant query per chunk of the window
    (:func:`time_chunks`, ``SAMPLES_CHUNK``), each evaluated at its chunk's end (``@``): a pod's first and last
    samples are the earliest and latest over the chunks' answers (:func:`pod_spans` merges them)."""
    selector_part = samples[: samples.rindex("[")]
    chunks = time_chunks(window, SAMPLES_CHUNK)
    if len(chunks) == 1:
        return [samples]
    return [f"{selector_part}[{round(c.seconds * 1000)}ms] @ {c.end:.3f}" for c in reversed(chunks)]


def card_key(labels: Mapping[str, str]) -> tuple[str, str, str]:
    """(cluster, cloud, gpu) of a result series; missing labels are empty strings."""
    return (labels.get("cluster", ""), labels.get("cloud", ""), labels.get("gpu", ""))


def pod_key(labels: Mapping[str, str]) -> tuple[str, str, str, str, str]:
    """(cluster, cloud, gpu, namespace, pod) of a per-pod series."""
    return (*card_key(labels), labels.get("namespace", ""), labels.get("pod", ""))


def pod_spans(series: Sequence[Mapping[str, Any]]) -> tuple[dict[tuple[str, ...], float], dict[tuple[str, ...], float]]:
    """Per pod key, the times of its first and of its last sample, from raw samples (a matrix: ``metric`` and
    ``values`` per series; a pod's several series, one per label value, merge)."""
    first: dict[tuple[str, ...], float] = {}
    last: dict[tuple[str, ...], float] = {}
    for s in series:
        times = [float(t) for t, _ in s["values"]]
        if not times:
            continue
        key = pod_key(s["metric"])
        first[key] = min(first.get(key, math.inf), min(times))
        last[key] = max(last.get(key, -math.inf), max(times))
    return first, last


def observed_seconds(
    first: Mapping[tuple[str, ...], float], last: Mapping[tuple[str, ...], float]
) -> dict[tuple[str, str, str], float]:
    """Per card, the summed running time of its pods (last sample minus first sample, per pod key as from
    :func:`pod_key`); a card whose pods were each seen in one sample only is left out (no duration known)."""
    out: dict[tuple[str, str, str], float] = {}
    for key, begin in first.items():
        end = last.get(key)
        if end is not None and end > begin:
            card = (key[0], key[1], key[2])
            out[card] = out.get(card, 0.0) + (end - begin)
    return out
