"""Time to first accelerator: the pool probes' runs in the report window (fleet/model/probes/probe), per pool.

Each probed pool writes one series per probe metric (the PodMonitor drops the probe pod's own labels), so the report
reads the raw samples of the window (``metric[window]``) and tells the runs apart by their start time
(``gpufleet_probe_last_run_timestamp_seconds``): a run is scraped several times while its pod lingers, and each
scrape of a run carries the same start time. Success and wait of a run are the samples scraped with it.

The wait by phase comes from the leaves' ``gpufleet:probe_phase_seconds`` (fleet/model/probes/probe_phases.py), one
series per phase of each run's probe pod: :func:`phase_queries` asks Prometheus for each pool's runs and its median and
worst per phase.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fleet.model.core.pod_contract import PROBE_METRICS
from fleet.model.probes.probe_phases import (
    PHASE_RECORD,
    PHASE_RUN_RECORD,
    PHASES,
    RUNS_EVALUATED,
    SETTLED_AFTER,
    SETTLED_RUNS_RECORD,
)
from fleet.report.queries import Window, card_key

SCALE_UP, SUCCESS, LAST_RUN = PROBE_METRICS
#: Windows from this long read the phases of finished runs from the central's records (``settled_phase_queries``).
SETTLED_FROM = 2 * 86400
Card = tuple[str, str, str]  # (cluster, cloud, gpu)


@dataclass(frozen=True)
class ProbeRun:
    """One probe run: when it started, whether the accelerator answered, how long the pod waited (None: unknown)."""

    started: float
    success: bool
    wait_seconds: float | None


@dataclass
class ProbeRow:
    """A pool's probe runs in the window."""

    cluster: str
    cloud: str
    gpu: str
    runs: list[ProbeRun] = field(default_factory=list)

    @property
    def success_rate(self) -> float | None:
        """Share of the runs whose accelerator answered (None without runs)."""
        return sum(r.success for r in self.runs) / len(self.runs) if self.runs else None

    @property
    def waits(self) -> list[float]:
        """The measured waits from scheduled run to running pod, in seconds (runs started by hand have none)."""
        return [r.wait_seconds for r in self.runs if r.wait_seconds is not None]

    @property
    def median_wait(self) -> float | None:
        """The median time to first accelerator."""
        return statistics.median(self.waits) if self.waits else None

    @property
    def worst_wait(self) -> float | None:
        """The longest time to first accelerator."""
        return max(self.waits) if self.waits else None


def probe_queries(window: Window) -> dict[str, str]:
    """The three raw-sample queries of the window, by metric."""
    return {metric: f"{metric}[{window.range}]" for metric in (LAST_RUN, SUCCESS, SCALE_UP)}


def _by_time(series: list[dict[str, Any]]) -> dict[Card, dict[float, float]]:
    """Samples per pool and scrape time (several series of one pool, e.g. from two federation jobs, merge)."""
    out: dict[Card, dict[float, float]] = defaultdict(dict)
    for s in series:
        samples = out[card_key(s["metric"])]
        for t, v in s["values"]:
            samples[float(t)] = float(v)
    return out


def probe_rows(samples: Mapping[str, list[dict[str, Any]]]) -> list[ProbeRow]:
    """The pools' runs from the raw samples of the three metrics (query results of :func:`probe_queries`)."""
    started, success, wait = (_by_time(samples.get(m, [])) for m in (LAST_RUN, SUCCESS, SCALE_UP))
    rows = []
    for card in sorted(started):
        runs: dict[float, ProbeRun] = {}
        for t, start in sorted(started[card].items()):
            ok = success.get(card, {}).get(t)
            if ok is None:
                continue  # scraped without its result: a later scrape of the same run has it
            runs[start] = ProbeRun(start, ok == 1, wait.get(card, {}).get(t))
        if runs:
            rows.append(ProbeRow(*card, runs=[runs[s] for s in sorted(runs)]))
    return rows


def pool_waits(rows: list[ProbeRow]) -> dict[Card, float]:
    """The median time to first accelerator of each pool that has one."""
    return {(r.cluster, r.cloud, r.gpu): r.median_wait for r in rows if r.median_wait is not None}


@dataclass
class PhaseRow:
    """A pool's probe runs in the window split into phases (fleet/model/probes/probe_phases.py): how many runs, and per
    phase the median and the worst over the runs (each run's last value of the phase)."""

    cluster: str
    cloud: str
    gpu: str
    runs: int = 0
    medians: dict[str, float] = field(default_factory=dict)
    worsts: dict[str, float] = field(default_factory=dict)

    def median(self, phase: str) -> float | None:
        """The median seconds of ``phase`` over the runs (None: never measured)."""
        return self.medians.get(phase)

    def worst(self, phase: str) -> float | None:
        """The longest ``phase`` of any run."""
        return self.worsts.get(phase)


def phase_queries(window: Window, records: bool = False) -> dict[str, str]:
    """The instant queries of the phases, aggregated by Prometheus (a run is a probe pod, each of its phases one
    series: over 180 days of a large fleet, over a million series, too many to read one by one). With ``records``
    (a window of ``SETTLED_FROM`` or more that the records cover, :func:`records_cover`) they read the central's
    record of finished runs instead (:func:`settled_phase_queries`)."""
    if records:
        return settled_phase_queries(window)
    last = f"last_over_time({PHASE_RECORD}[{window.range}])"
    return {
        "runs": f"count by (cluster, cloud, gpu) (group by (cluster, cloud, gpu, pod) ({last}))",
        "median": f"quantile by (cluster, cloud, gpu, phase) (0.5, {last})",
        "worst": f"max by (cluster, cloud, gpu, phase) ({last})",
    }


def asks_records(window: Window) -> bool:
    """Whether the report asks if the records of finished runs cover ``window`` (:func:`records_query`): from
    ``SETTLED_FROM`` on."""
    return window.seconds >= SETTLED_FROM


def records_query(window: Window) -> str:
    """The first evaluation of the central's records of finished runs in the window (its instant, as the value)."""
    return f"min_over_time({RUNS_EVALUATED}[{window.range}])"


def records_cover(answer: list[dict[str, Any]], window: Window, step: float) -> bool:
    """Whether the records hold every run of ``window`` (the answer to :func:`records_query`; ``step``: the group's
    interval, the federation interval): the window is ``SETTLED_FROM`` or longer and the records' first evaluation in
    it took the runs whose last sample came just after its start. Not when the rule group was deployed later, or for a
    past window from before it: the report then reads every run's series."""
    if not asks_records(window) or not answer:
        return False
    first = float(answer[0]["value"][1])
    return first <= window.start + SETTLED_AFTER + step


def settled_phase_queries(window: Window) -> dict[str, str]:
    """The phase queries on the central's record of finished runs (fleet/model/probes/probe_phases.py
    ``settled_run_rules``): a few samples per pool and phase instead of a series per run. The records from
    ``SETTLED_AFTER`` after the window's start to its end hold the runs whose phases were last recorded in the window up
    to ``SETTLED_AFTER`` before its end: the raw series' runs but the newest (recorded until 15 minutes after they
    completed, then settled 15 minutes later: those that completed in the window's last half hour or still ran at its
    end)."""
    span = f"[{max(1, round((window.seconds - SETTLED_AFTER) * 1000))}ms]"
    return {
        "runs": f"sum by (cluster, cloud, gpu) (sum_over_time({SETTLED_RUNS_RECORD}{span}))",
        "median": f"quantile_over_time(0.5, {PHASE_RUN_RECORD}{span})",
        "worst": f"max_over_time({PHASE_RUN_RECORD}{span})",
    }


def phase_rows(answers: Mapping[str, list[dict[str, Any]]]) -> list[PhaseRow]:
    """The pools' rows from the answers to :func:`phase_queries`, by name (phases not in ``PHASES`` left out)."""
    rows: dict[Card, PhaseRow] = {}
    for s in answers.get("runs", []):
        card = card_key(s["metric"])
        rows.setdefault(card, PhaseRow(*card)).runs = int(float(s["value"][1]))
    for name in ("median", "worst"):
        for s in answers.get(name, []):
            phase = s["metric"].get("phase", "")
            if phase not in PHASES:
                continue
            card = card_key(s["metric"])
            row = rows.setdefault(card, PhaseRow(*card))
            (row.medians if name == "median" else row.worsts)[phase] = float(s["value"][1])
    return [rows[c] for c in sorted(rows)]
