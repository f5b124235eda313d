"""The plan benchmark's memory figures: one more, untimed, plan of the fleet under ``tracemalloc``, per stack and in
all, and the process's high-water mark."""

from __future__ import annotations

import contextlib
import gc
import resource
import sys
import tracemalloc
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import fleet.model.loader as fleet_policy
import fleet.tools.engine.plan as fleet_plan
from benchmarks.synthetic_fleet import (
    SyntheticFleet,
)
from fleet.model.core.fleet import Fleet
from fleet.tools.engine.plan import StackPlan, plan_fleet


@dataclass
class StackMemory:
    """Python allocations (tracemalloc) while one stack was planned."""

    stack: str
    peak_above_start: int  # bytes: highest traced size during the stack minus the traced size when it started
    retained: int  # bytes: traced size after the stack minus before (the StackPlan kept by plan_fleet, caches)
    maxrss_kib: int  # process high-water mark (ru_maxrss, KiB on Linux) after the stack


@contextlib.contextmanager
def _per_stack_hook(callback: Callable[[str, Callable[[], StackPlan]], StackPlan]) -> Iterator[None]:
    """Wrap ``fleet.plan.plan_stack`` (which ``plan_fleet`` calls by its module global) for the duration."""
    original = fleet_plan.plan_stack

    def wrapper(stack: str, *args: Any, **kwargs: Any) -> StackPlan:
        return callback(stack, lambda: original(stack, *args, **kwargs))

    fleet_plan.plan_stack = wrapper  # type: ignore[assignment]
    try:
        yield
    finally:
        fleet_plan.plan_stack = original  # type: ignore[assignment]


def measure_memory(synthetic: SyntheticFleet, fleet: Fleet) -> dict[str, Any]:
    """One more ``plan_fleet`` run under tracemalloc (slower, so never the timed one)."""
    rows: list[StackMemory] = []
    overall_peak = 0

    def per_stack(stack: str, plan: Callable[[], StackPlan]) -> StackPlan:
        nonlocal overall_peak
        before, peak = tracemalloc.get_traced_memory()
        overall_peak = max(overall_peak, peak)
        tracemalloc.reset_peak()
        result = plan()
        after, peak = tracemalloc.get_traced_memory()
        overall_peak = max(overall_peak, peak)
        rows.append(StackMemory(stack, peak - before, after - before, _maxrss_kib()))
        return result

    fleet_policy.clear_fleet_cache()  # as a CLI run finds it
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        with _per_stack_hook(per_stack):
            plans = plan_fleet(fleet, synthetic.policy_file, None, synthetic.stacks_dir, synthetic.workloads_dir)
        current, peak = tracemalloc.get_traced_memory()
        overall_peak = max(overall_peak, peak)
    finally:
        tracemalloc.stop()
    del plans
    return {
        "tracemalloc_peak_bytes": overall_peak - base,
        "tracemalloc_retained_bytes": current - base,
        "maxrss_kib": _maxrss_kib(),
        "per_stack": rows,
    }


def _maxrss_kib() -> int:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss // 1024 if sys.platform == "darwin" else rss  # bytes on macOS, KiB on Linux
