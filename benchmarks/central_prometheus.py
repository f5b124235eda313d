"""The central benchmark's Prometheus: its configuration and rules as the model renders them, started on loopback,
queried and stopped (benchmarks/README.md, ``central_scale.py``)."""

from __future__ import annotations

import json
import resource
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from benchmarks.central_leaves import Leaf
from components.kubernetes.federation import federated_selectors, probe_expectations
from fleet.model.billing import accounting_hours
from fleet.model.core.fleet import Fleet
from fleet.model.monitoring.prometheus import (
    FederationTarget,
    central_alert_rules,
    central_prometheus_config,
    duration_seconds,
    probe_alert_rules,
    to_yaml,
    workload_metrics,
)
from fleet.model.probes import probe_phases

# The central's address space: the machine's 23 GiB are shared; a query past this fails (Prometheus dies) instead of
# the kernel choosing what to kill.
MEMORY_LIMIT = 12 * 2**30
PROBE_RUNS_FILE = "probe-runs.yml"  # the central's records of finished probe runs (fleet/model/probe_phases.py)


def central_files(fleet: Fleet, leaves: list[Leaf], directory: Path, port: int) -> Path:
    """The central's prometheus.yml and rule files as the model renders them, targets on loopback over plain HTTP."""
    rules = {
        "central-alerts.yml": central_alert_rules(workload_metrics(fleet.workloads)),
        "probe-alerts.yml": probe_alert_rules(probe_expectations(fleet)),
    }
    hours = accounting_hours.hourly_rules(duration_seconds(fleet.monitoring.federation_interval))
    if hours is not None:
        rules["accounting-hours.yml"] = hours
    runs = probe_phases.settled_run_rules(duration_seconds(fleet.monitoring.federation_interval))
    if runs is not None:
        rules[PROBE_RUNS_FILE] = runs
    for name, rule in rules.items():
        (directory / name).write_text(to_yaml(rule), encoding="utf-8")
    targets = [
        FederationTarget(leaf.cluster.name, leaf.cluster.cloud, f"127.0.0.1:{leaf.port}", "leaf", "ca", "crt", "key")
        for leaf in leaves
    ]
    config = central_prometheus_config(
        targets,
        federated_selectors(fleet),
        {"fleet_role": "central"},
        rule_files=list(rules),
        interval=fleet.monitoring.federation_interval,
        self_address=f"127.0.0.1:{port}",
    )
    for job in config["scrape_configs"]:
        if job.pop("tls_config", None) is not None:  # mutual TLS left out: loopback, no certificates
            job["scheme"] = "http"
    path = directory / "prometheus.yml"
    path.write_text(to_yaml(config), encoding="utf-8")
    return path


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def query(url: str, promql: str, timeout: float = 120) -> list[dict[str, Any]]:
    full = f"{url}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    with urllib.request.urlopen(full, timeout=timeout) as response:
        return json.load(response)["data"]["result"]


def scalar(url: str, promql: str) -> float | None:
    result = query(url, promql)
    return float(result[0]["value"][1]) if result else None


def start_prometheus(config: Path, data: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    """``prometheus`` on ``port`` keeping the 180-day history (the central's retention, with a day of margin)."""
    args = [
        shutil.which("prometheus") or "prometheus",
        f"--config.file={config}",
        f"--storage.tsdb.path={data}",
        "--storage.tsdb.retention.time=182d",
        f"--web.listen-address=127.0.0.1:{port}",
    ]

    def bounded() -> None:  # on a shared machine a runaway query must not take everyone's memory
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))

    proc = subprocess.Popen(
        args, stdout=log.open("wb"), stderr=subprocess.STDOUT, cwd=config.parent, preexec_fn=bounded
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"prometheus exited: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"{url}/-/ready", timeout=5) as response:
                if response.status == 200:
                    return proc
        except OSError:
            pass
        time.sleep(1)
    raise RuntimeError("prometheus did not become ready in 10 minutes")


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
