"""The dispatch-rate benchmark's arithmetic: which stage of its life a Kubernetes object has reached, the stream of
``kubectl get --watch -o json`` split into objects, rates from the times the stages were reached, and the table.

Pure: no cluster, no clock. ``benchmarks/dispatch_watch.py`` feeds it what the API servers answered, when."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# The stages of each kind the benchmark follows, in the order an object goes through them.
WORKLOAD_STAGES = ("seen", "quota_reserved", "admitted", "finished")
JOB_STAGES = ("seen", "complete")
POD_STAGES = ("seen", "scheduled", "running")


def _holds(obj: Mapping[str, Any], kind: str) -> bool:
    conditions = obj.get("status", {}).get("conditions") or []
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)


def workload_stages(obj: Mapping[str, Any]) -> set[str]:
    """A Kueue Workload: seen; its quota reserved (by its ClusterQueue); admitted (every admission check Ready: on a
    MultiKueue manager, a worker admitted its copy and the Job was made there); finished."""
    reached = {"seen"}
    for stage, condition in (("quota_reserved", "QuotaReserved"), ("admitted", "Admitted"), ("finished", "Finished")):
        if _holds(obj, condition):
            reached.add(stage)
    return reached


def job_stages(obj: Mapping[str, Any]) -> set[str]:
    """A batch Job: seen (made); complete."""
    return {"seen", *(["complete"] if _holds(obj, "Complete") else [])}


def pod_stages(obj: Mapping[str, Any]) -> set[str]:
    """A pod: seen (made by the Job controller); scheduled (bound to a node); running (or already past it)."""
    reached = {"seen"}
    if obj.get("spec", {}).get("nodeName"):
        reached.add("scheduled")
    if obj.get("status", {}).get("phase") in ("Running", "Succeeded", "Failed"):
        reached.add("running")
    return reached


def split_objects(buffer: str) -> tuple[list[dict[str, Any]], str]:
    """The whole JSON documents at the start of ``buffer`` (``kubectl get --watch -o json`` writes one indented
    document per event, back to back) and what is left of it (a document not yet complete)."""
    decoder = json.JSONDecoder()
    found: list[dict[str, Any]] = []
    at = 0
    while True:
        while at < len(buffer) and buffer[at].isspace():
            at += 1
        if at >= len(buffer):
            return found, ""
        try:
            obj, end = decoder.raw_decode(buffer, at)
        except json.JSONDecodeError:
            return found, buffer[at:]
        found.append(obj)
        at = end


@dataclass(frozen=True)
class StageRate:
    """How many objects reached a stage, when the first and the last did (seconds after the burst was submitted) and
    the rate between them (objects a second; None with fewer than two, or all in the same instant)."""

    count: int
    first_s: float | None
    last_s: float | None
    per_second: float | None


def stage_rate(times: Iterable[float], start: float) -> StageRate:
    """The ``StageRate`` of the instants ``times`` (one per object that reached the stage), ``start`` the instant the
    burst's submission began: the rate is (count - 1) over the time from the first to the last, so the wait before
    the first does not count (it is ``first_s``)."""
    ordered = sorted(times)
    if not ordered:
        return StageRate(0, None, None, None)
    first, last = ordered[0] - start, ordered[-1] - start
    rate = (len(ordered) - 1) / (last - first) if len(ordered) > 1 and last > first else None
    return StageRate(len(ordered), round(first, 2), round(last, 2), None if rate is None else round(rate, 2))


def rates(reached: Mapping[str, Mapping[str, float]], stages: Sequence[str], start: float) -> dict[str, StageRate]:
    """Per stage, the ``StageRate`` of ``reached`` (object -> stage -> the instant it was first seen there)."""
    return {stage: stage_rate((s[stage] for s in reached.values() if stage in s), start) for stage in stages}


# The table's columns: (heading, the run's part, the stage) for a dispatch run and for a launch run on a worker.
DISPATCH_COLUMNS = (
    ("admitted on the manager (quota)", "manager_workloads", "quota_reserved"),
    ("Job made on the worker", "worker_jobs", "seen"),
    ("admitted (worker's check)", "manager_workloads", "admitted"),
    ("pods running on the worker", "worker_pods", "running"),
    ("finished on the manager", "manager_workloads", "finished"),
)
LAUNCH_COLUMNS = (
    ("admitted on the worker", "worker_workloads", "quota_reserved"),
    ("pods made", "worker_pods", "seen"),
    ("pods scheduled", "worker_pods", "scheduled"),
    ("pods running", "worker_pods", "running"),
    ("Jobs complete", "worker_jobs", "complete"),
)


def _cell(rate: Mapping[str, Any] | None, total: int) -> str:
    if not rate or not rate["count"]:
        return "-"
    per_second = "-" if rate["per_second"] is None else f"{rate['per_second']:.1f}"
    missing = "" if rate["count"] == total else f" ({rate['count']} of {total})"
    return f"{per_second} /s, all by {rate['last_s']:.0f} s{missing}"


def _load(run: Mapping[str, Any]) -> str:
    return f"{run['load_before'][0]:.1f} / {run['load_after'][0]:.1f}"


def render(report: Mapping[str, Any]) -> str:
    """Two Markdown tables: the dispatch runs (Jobs submitted on the manager) and the launch runs (Jobs submitted on
    the worker), a row per Kueue client setting; each cell the rate between the first and the last object reaching
    the stage, and when the last did (s after the submission began); the machine's 1-minute load average before and
    after the run."""
    lines = []
    for title, kind, columns in (
        ("Jobs submitted on the manager, dispatched to the worker", "dispatch", DISPATCH_COLUMNS),
        ("Jobs submitted on the worker (its own pod launch rate)", "launch", LAUNCH_COLUMNS),
    ):
        runs = [r for r in report["runs"] if r["kind"] == kind]
        if not runs:
            continue
        headings = " | ".join(c[0] for c in columns)
        lines += [
            f"{title}:",
            "",
            f"| Kueue clientConnection qps / burst | jobs | {headings} | load before / after |",
            "|---|---:|" + "---:|" * len(columns) + "---:|",
        ]
        for run in runs:
            cells = " | ".join(_cell(run["parts"].get(part, {}).get(stage), run["jobs"]) for _, part, stage in columns)
            lines.append(f"| {run['setting']} | {run['jobs']} | {cells} | {_load(run)} |")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
