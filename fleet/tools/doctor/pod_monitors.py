"""The rows of the fleet's PodMonitors on a cluster's Prometheus: ``up`` of their targets, and a runner of the policy
without a scraped pod."""

from __future__ import annotations

from fleet.model.core import pod_contract
from fleet.tools.doctor.names import MONITOR_SERVERS, MONITORING_NS, POD_MONITORS, PROMETHEUS_PORT
from fleet.tools.doctor.prometheus_query import query, unreachable_row
from fleet.tools.doctor.table import Row


def pod_monitor_rows(
    url: str | None, timeout: float, forward: str, kubectl: str = "kubectl", runners: int = 0
) -> list[Row]:
    """``up`` of the PodMonitors' targets on this cluster's Prometheus: for benchmarks none is fine (no pod runs),
    for the cluster's ``runners`` (long-lived managers) fewer targets is a problem; any 0 is one."""
    rows = []
    monitors = [m for m in POD_MONITORS if runners or m[1] != pod_contract.RUNNER_POD_MONITOR]
    for monitor_namespace, monitor in monitors:
        job = f"{monitor_namespace}/{monitor}"
        what = f"PodMonitor {job}: targets up"
        if url is None:
            rows.append(
                Row(
                    what,
                    f"skipped: no --prometheus; open it with: {forward}, then --prometheus http://127.0.0.1:{PROMETHEUS_PORT}",
                    skipped=True,
                )
            )
            continue
        try:
            result = query(url, f'up{{job="{job}"}}', timeout)
        except Exception as exc:  # PrometheusError and a URL that does not parse alike
            rows.append(unreachable_row(what, url, exc, forward))
            continue
        down_series = [r["metric"] for r in result if float(r["value"][1]) == 0]
        down = sorted(m.get("pod") or m.get("instance", "?") for m in down_series)
        namespace = (down_series[0].get("namespace") if down_series else None) or monitor_namespace
        state = f"{len(result) - len(down)} up, {len(down)} down" if result else "0 targets (no pod runs now)"
        if monitor == pod_contract.RUNNER_POD_MONITOR and len(result) < runners:
            rows.append(
                Row(
                    what,
                    f"{len(result)} of {runners} runner(s) scraped",
                    "a runner of the policy has no running pod: without its token Secret its pod waits",
                    "pulumi config set --stack <stack> --secret --path 'gpu-fleet:runnerTokens.<card>' <glrt-...>, "
                    f"then pulumi up; {kubectl} -n {monitor_namespace} get pods",
                )
            )
            continue
        if down:
            server, logs_of = MONITOR_SERVERS[monitor]
            container = f" -c {logs_of}" if logs_of else ""
            rows.append(
                Row(
                    what,
                    state,
                    f"Prometheus cannot scrape pod(s) {', '.join(down)} (up 0)",
                    f"{server} must listen: {kubectl} -n {namespace} logs {down[0]}{container}; the NetworkPolicy "
                    f"allow-prometheus of its namespace must admit the {MONITORING_NS} namespace",
                )
            )
        else:
            rows.append(Row(what, state))
    return rows
