"""Every Prometheus row of a cluster: its PodMonitors' targets, its pools' last probe phases and the federation, each
skipped (saying which port-forward opens it) without a URL."""

from __future__ import annotations

from pathlib import Path

from fleet.model.core.clusters import Cluster
from fleet.model.core.fleet import Fleet
from fleet.tools.doctor.federation import federation_rows
from fleet.tools.doctor.kubeconfig import kubectl_for_stack
from fleet.tools.doctor.names import PROMETHEUS_PORT
from fleet.tools.doctor.pod_monitors import pod_monitor_rows
from fleet.tools.doctor.probe_phases import probe_phase_query, probe_phase_rows
from fleet.tools.doctor.prometheus_query import port_forward_command, query, unreachable_row
from fleet.tools.doctor.table import Row


def prometheus_rows(
    fleet: Fleet,
    cluster: Cluster,
    stack: str,
    prometheus: str | None,
    central_prometheus: str | None,
    timeout: float,
    kubeconfig: Path | None = None,
) -> list[Row]:
    """The Prometheus rows: this cluster's PodMonitor targets and the federation (skipped without a URL)."""
    kubectl = kubectl_for_stack(stack, kubeconfig)
    here = port_forward_command(kubectl, PROMETHEUS_PORT)
    central = fleet.central
    rows = pod_monitor_rows(prometheus, timeout, here, kubectl, runners=len(fleet.runners_of(cluster)))
    if cluster.central:
        url, forward = central_prometheus or prometheus, here
    else:
        url = central_prometheus
        forward = port_forward_command(kubectl_for_stack(central.name, None), PROMETHEUS_PORT + 1)
    leaf_fix = f"pulumi up --stack {central.name} so the central mounts the new ones"
    if prometheus is not None and any(p.probe is not None for p in cluster.pools):  # time to first accelerator
        try:
            rows += probe_phase_rows(cluster, query(prometheus, probe_phase_query(cluster), timeout))
        except Exception as exc:
            rows.append(unreachable_row("probe phases", prometheus, exc, here))
    return rows + federation_rows(fleet, cluster, url, timeout, forward, leaf_fix)
