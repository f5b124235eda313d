"""The real tier's stand-in for the central (tests/real/central.py) and its record of the manager's admissions
(tests/real/admissions.py), offline: the scrape job made of the fleet's own Kueue ServiceMonitor is one Prometheus
accepts, a monitor field it cannot translate is refused, and the record counts what Kueue's counter counts."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from components.kubernetes.kueue_metrics import (
    KUEUE_METRICS_MONITOR,
    KUEUE_METRICS_SERVICE_LABELS,
    kueue_metrics_endpoint,
)
from fleet.model.core.pod_contract import KUEUE_NAMESPACE
from fleet.model.monitoring import prometheus
from tests.conftest import require_tool
from tests.e2e.support import promtool
from tests.real.admissions import AdmissionLedger
from tests.real.central import monitor_scrape_config, monitor_targets


def fleets_monitor(**endpoint_extra: Any) -> dict[str, Any]:
    """The ServiceMonitor the fleet deploys for Kueue, as the API server returns it."""
    return {
        "metadata": {"name": KUEUE_METRICS_MONITOR, "namespace": KUEUE_NAMESPACE},
        "spec": {
            "selector": {"matchLabels": dict(KUEUE_METRICS_SERVICE_LABELS)},
            "endpoints": [{**kueue_metrics_endpoint(), **endpoint_extra}],
            "scrapeClass": prometheus.SERVICE_ACCOUNT_SCRAPE_CLASS,
        },
    }


def test_the_fleets_kueue_monitor_becomes_a_job_prometheus_accepts(tmp_path: Path) -> None:
    require_tool("promtool")
    token = tmp_path / "token"
    token.write_text("t")
    labels = {"cluster": "eks-a", "cloud": "aws"}
    job = monitor_scrape_config(fleets_monitor(), "kueue-eks-a", ["10.200.1.1:8443"], token, labels)
    assert job["scheme"] == "https" and job["metrics_path"] == "/metrics"
    assert job["tls_config"] == {"insecure_skip_verify": True}
    assert job["static_configs"] == [{"targets": ["10.200.1.1:8443"], "labels": labels}]
    config = tmp_path / "prometheus.yml"
    config.write_text(yaml.safe_dump({"scrape_configs": [job]}))
    checked = promtool("check", "config", config)
    assert checked.returncode == 0, checked.stdout + checked.stderr


class Hollow:
    """A hollow cluster's ``get``, answering from fixed objects by kind."""

    def __init__(self, objects: dict[str, list[dict[str, Any]]]) -> None:
        self.objects, self.asked = objects, []

    def get(self, kind: str, *args: str) -> dict[str, Any]:
        self.asked.append((kind, *args))
        return {"items": self.objects[kind]}


def test_the_targets_are_the_ready_endpoints_of_the_selected_services_on_the_monitors_port() -> None:
    service = {"metadata": {"name": "kueue-controller-manager-metrics-service"}}
    piece = {
        "ports": [{"name": "https", "port": 8443}, {"name": "other", "port": 9000}],
        "endpoints": [
            {"addresses": ["10.200.1.3"], "conditions": {"ready": True}},
            {"addresses": ["10.200.1.4"], "conditions": {"ready": False}},
        ],
    }
    hollow = Hollow({"services": [service], "endpointslices.discovery.k8s.io": [piece]})
    assert monitor_targets(hollow, fleets_monitor()) == ["10.200.1.3:8443"]
    selector = ",".join(f"{k}={v}" for k, v in KUEUE_METRICS_SERVICE_LABELS.items())
    assert hollow.asked[0] == ("services", "-n", KUEUE_NAMESPACE, "-l", selector)
    assert hollow.asked[1][-1] == "kubernetes.io/service-name=kueue-controller-manager-metrics-service"


def test_a_monitor_field_without_translation_is_refused(tmp_path: Path) -> None:
    monitor = fleets_monitor(relabelings=[{"action": "drop"}])
    with pytest.raises(AssertionError, match="relabelings"):
        monitor_scrape_config(monitor, "kueue-x", [], tmp_path / "t", {})


def workload(uid: str, queue: str, cluster: str | None, state: str, check: str | None = None) -> dict[str, Any]:
    status = {"admission": {"clusterQueue": queue}, "admissionChecks": [{"name": check or queue, "state": state}]}
    return {"metadata": {"uid": uid}, "status": {**status, **({"clusterName": cluster} if cluster else {})}}


def test_the_record_counts_each_turn_of_the_multikueue_check_to_ready() -> None:
    """As Kueue's counter: once per turn to Ready (not per sighting), again after an eviction and a new admission,
    never for another check's state or a queue the fleet does not have."""
    ledger = AdmissionLedger(SimpleNamespace(name="manager"), frozenset({"queue-gpu"}))  # type: ignore[arg-type]
    ledger.seen(workload("a", "queue-gpu", None, "Pending"))
    ledger.seen(workload("a", "queue-gpu", "cern", "Ready"))
    ledger.seen(workload("a", "queue-gpu", "cern", "Ready"))
    ledger.seen(workload("b", "queue-gpu", "eks", "Ready"))
    ledger.seen(workload("b", "queue-gpu", None, "Pending"))  # evicted on eks, nominated again
    ledger.seen(workload("b", "queue-gpu", "cern", "Ready"))
    ledger.seen(workload("c", "queue-gpu", "cern", "Ready", check="other-check"))
    ledger.seen(workload("d", "queue-old", "cern", "Ready"))
    assert ledger.counts() == {("queue-gpu", "cern"): 2, ("queue-gpu", "eks"): 1}
