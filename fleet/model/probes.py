"""A pool's probe (policy: ``probe``): when it runs and when its scale-up is slow enough to alert."""

from __future__ import annotations

from dataclasses import dataclass

from fleet.model import pod_contract
from fleet.model.prometheus import duration_seconds
from fleet.model.schedules import longest_gap_seconds
from fleet.model.spec_schema import PoolSettings, ProbeDefaults
from fleet.model.workloads import Workload


@dataclass(frozen=True)
class Probe:
    """A pool's probe, resolved: when it runs and when to alert.

    ``stale_after_seconds`` is how long "no probe result" is normal: the schedule's longest gap between runs plus
    the longest a run may take (its Job's deadline).
    """

    schedule: str
    scale_up_alert_after: str
    scale_up_alert_seconds: float
    stale_after_seconds: float


def resolve_probe(settings: PoolSettings, defaults: ProbeDefaults, min_nodes: int, probe: Workload) -> Probe | None:
    """The pool's probe: on when the pool says so (``true``, or a schedule or threshold of its own), off with
    ``false``, else on exactly when the pool may scale to zero (a pool that keeps a node has nothing to scale up, and
    a probe costs a node start each run)."""
    own = settings.probe
    # a pool that gives its probe a schedule or threshold wants it, whatever its minimum
    wanted = (
        own.enabled if own.enabled is not None else (min_nodes == 0 or bool(own.schedule or own.scale_up_alert_after))
    )
    if not wanted:
        return None
    schedule = own.schedule or defaults.schedule
    threshold = own.scale_up_alert_after or defaults.scale_up_alert_after
    run = pod_contract.active_deadline_seconds(probe.spec.timeout_seconds)
    return Probe(schedule, threshold, duration_seconds(threshold), longest_gap_seconds(schedule) + run)
