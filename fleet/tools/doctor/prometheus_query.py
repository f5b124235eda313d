"""Asking a cluster's Prometheus (``/api/v1/query``, reached through ``kubectl port-forward``): the query, the command
that opens it, and the row when it does not answer."""

from __future__ import annotations

import time
from typing import Any

from fleet.tools.doctor.names import MONITORING_NS, PROMETHEUS_PORT, PROMETHEUS_SERVICE
from fleet.tools.doctor.table import Row


def port_forward_command(kubectl: str, local_port: int) -> str:
    """The command that opens a cluster's Prometheus (kube-prometheus-stack's Service) on 127.0.0.1:local_port."""
    return f"{kubectl} -n {MONITORING_NS} port-forward svc/{PROMETHEUS_SERVICE} {local_port}:{PROMETHEUS_PORT}"


def query(url: str, promql: str, timeout: float) -> list[dict[str, Any]]:
    """The instant vector ``promql`` answers now on the Prometheus at ``url``."""
    from fleet.report.prometheus_api import PrometheusClient

    return PrometheusClient(url, timeout=timeout).query(promql, time.time())


def unreachable_row(what: str, url: str, error: Exception, forward: str) -> Row:
    """The row of a check whose Prometheus did not answer, naming the port-forward that opens it."""
    return Row(
        what,
        "cannot query",
        f"cannot query Prometheus at {url}: {error}",
        f"is the port-forward still running? {forward}",
    )
