"""The rows of each probed pool's last probe, phase by phase (fleet/model/probes/probe_phases.py), from the cluster's
own recording rules."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fleet.model.core.clusters import Cluster
from fleet.model.probes.probe_phases import PHASE_MEANING, PHASE_RECORD, PHASES
from fleet.tools.doctor.table import Row


def probe_phase_query(cluster: Cluster) -> str:
    """The cluster's own records of its pools' last probe, by phase (fleet/model/probes/probe_phases.py)."""
    return f'{PHASE_RECORD}{{cluster="{cluster.name}"}}'


def probe_phase_rows(cluster: Cluster, results: Sequence[dict[str, Any]]) -> list[Row]:
    """A line per phase of each probed pool's last probe (the answer to :func:`probe_phase_query`): how long it waited
    for a node, the device, its containers and the check; informational, never a problem (ProbeSlowPhase alerts)."""
    seen: dict[tuple[str, str], tuple[float, str]] = {}
    for r in results:
        labels = r["metric"]
        seen[(labels.get("gpu", ""), labels.get("phase", ""))] = (float(r["value"][1]), labels.get("pod", ""))
    rows = []
    for pool in (p for p in cluster.pools if p.probe is not None):
        what = f"last probe of pool {pool.name}"
        if not any(card == pool.card for card, _ in seen):
            rows.append(
                Row(what, "no phases recorded: no probe pod of the pool has been bound to a node", skipped=True)
            )
            continue
        for phase in PHASES:
            seconds, pod = seen.get((pool.card, phase), (None, ""))
            state = "not measured yet" if seconds is None else f"{seconds:g} s in {PHASE_MEANING[phase]} ({pod})"
            rows.append(Row(f"{what}: {phase}", state))
    return rows
