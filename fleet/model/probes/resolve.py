"""A pool's probe (policy: ``probe``), resolved into the pool's ``Probe``: when it runs and when its scale-up is slow
enough to alert."""

from __future__ import annotations

from fleet.model.core import pod_contract
from fleet.model.core.pools import Probe
from fleet.model.core.schedules import longest_gap_seconds
from fleet.model.core.workloads import Workload
from fleet.model.monitoring.prometheus import duration_seconds
from fleet.model.probes.settings import ProbeDefaults, ProbeSettings


def resolve_probe(own: ProbeSettings, defaults: ProbeDefaults, min_nodes: int, probe: Workload) -> Probe | None:
    """The pool's probe from its ``probe`` settings: on when the pool says so (``true``, or a schedule or threshold of
    its own), off with ``false``, else on exactly when the pool may scale to zero (a pool that keeps a node has nothing
    to scale up, and a probe costs a node start each run)."""
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
