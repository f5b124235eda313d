"""The central's Prometheus on the real tier: a real Prometheus in the tier's namespace scraping the real Kueues as the
fleet's ServiceMonitors say, so the report's Queues table is read from real runs (tests/real/test_fleet_stacks.py).

On a real fleet the central (the queues' manager) scrapes its Kueue through the ServiceMonitor ``kueue-metrics``
(components/kubernetes/kueue_metrics.py), which prometheus-operator turns into a scrape job, and federates each
worker's Kueue wait series, labelled with the worker's external labels, from the worker's own Prometheus. The fleet's
Prometheus pods are KWOK's on the tier, so ``TierCentral`` stands in for both: for each cluster with a part in the
queues it reads the ServiceMonitor the stack deployed and turns it into a job of its own (``monitor_scrape_config``:
the fields the fleet's monitor uses; any other field is refused, so the translation never silently differs), on the
endpoints the monitor selects in that cluster's API server (``monitor_targets``; Debian's Prometheus has no
Kubernetes discovery), authenticating with a token of the Prometheus' ServiceAccount there, as the monitor's scrape
class does. A worker's job keeps only the series the central federates
(components/kubernetes/federation.py ``federated_selectors``) and adds the worker's external labels (fleet/model/
monitoring/prometheus.py ``leaf_external_labels``), as federation would. Scrapes are every few seconds, not the
monitor's 30 s: the tier's runs last minutes.
"""

from __future__ import annotations

import math
import re
import signal
from pathlib import Path
from typing import Any

import yaml

from components.kubernetes.federation import federated_selectors
from components.kubernetes.kueue_metrics import KUEUE_METRICS_MONITOR
from components.kubernetes.namespaces import MONITORING_NS
from components.kubernetes.prometheus_stack import PROMETHEUS_ACCOUNT
from fleet.model.core.fleet import Fleet
from fleet.model.core.pod_contract import KUEUE_NAMESPACE
from fleet.model.monitoring.prometheus import leaf_external_labels
from tests.conftest import require_tool
from tests.e2e.processes import Prometheus, free_port, patience, wait_for

SCRAPE_INTERVAL = "3s"
SELF_JOB = "prometheus"
# the fields of a ServiceMonitor (prometheus-operator v0.86.2 monitoring.coreos.com/v1) the translation knows
_MONITOR_FIELDS = {"selector", "endpoints", "scrapeClass"}
_ENDPOINT_FIELDS = {"port", "path", "scheme", "interval", "tlsConfig"}
_TLS_FIELDS = {"insecureSkipVerify"}


def monitor_targets(hollow: Any, monitor: dict[str, Any]) -> list[str]:
    """The ``address:port`` of each ready endpoint of the Services a ServiceMonitor selects, on its endpoint's port:
    what prometheus-operator's discovery finds (Debian's Prometheus is built without Kubernetes discovery, so the
    tier reads the EndpointSlices itself: Debian 12's prometheus 2.42.0+ds-5+deb12u1 refuses a job with
    ``kubernetes_sd_configs``, "field kubernetes_sd_configs not found in type config.ScrapeConfig", as
    ``promtool check config`` said on 2026-12-06)."""
    spec = monitor["spec"]
    namespace = monitor["metadata"]["namespace"]
    (endpoint,) = spec["endpoints"]
    selector = ",".join(f"{k}={v}" for k, v in spec["selector"]["matchLabels"].items())
    targets = []
    for service in hollow.get("services", "-n", namespace, "-l", selector)["items"]:
        owned = f"kubernetes.io/service-name={service['metadata']['name']}"
        for piece in hollow.get("endpointslices.discovery.k8s.io", "-n", namespace, "-l", owned)["items"]:
            ports = [p["port"] for p in piece.get("ports") or () if p.get("name") == endpoint["port"]]
            ready = [e for e in piece.get("endpoints") or () if (e.get("conditions") or {}).get("ready")]
            targets += [f"{address}:{port}" for port in ports for e in ready for address in e["addresses"]]
    return sorted(targets)


def monitor_scrape_config(
    monitor: dict[str, Any], job: str, targets: list[str], token_file: Path, labels: dict[str, str]
) -> dict[str, Any]:
    """The scrape job of a ServiceMonitor's one endpoint, as prometheus-operator would make it, on ``targets`` (from
    :func:`monitor_targets`): the endpoint's scheme, path and TLS, the token as the scrape class's credentials;
    ``labels`` added to every target. A monitor field this does not translate is refused."""
    spec = monitor["spec"]
    unknown = set(spec) - _MONITOR_FIELDS
    (endpoint,) = spec["endpoints"]
    unknown |= set(endpoint) - _ENDPOINT_FIELDS
    unknown |= set(endpoint.get("tlsConfig") or {}) - _TLS_FIELDS
    unknown |= set(spec["selector"]) - {"matchLabels"}
    if unknown:
        raise AssertionError(f"ServiceMonitor {monitor['metadata']['name']}: no translation for {sorted(unknown)}")
    return {
        "job_name": job,
        "scheme": endpoint.get("scheme", "http"),
        "metrics_path": endpoint.get("path", "/metrics"),
        "authorization": {"credentials_file": str(token_file)},
        "tls_config": {"insecure_skip_verify": bool((endpoint.get("tlsConfig") or {}).get("insecureSkipVerify"))},
        "static_configs": [{"targets": targets, "labels": labels}],
    }


class TierCentral:
    """A real Prometheus standing in for the fleet's central: it scrapes itself from the start (so a report window
    starting at :attr:`collecting_since` finds it collecting) and each cluster's Kueue once :meth:`scrape_kueue`
    is called after the cluster's ``up``."""

    def __init__(self, fleet: Fleet, folder: Path) -> None:
        self.fleet = fleet
        self.folder = folder
        self.jobs: list[dict[str, Any]] = []
        self.prometheus: Prometheus | None = None
        self.collecting_since = 0.0

    def _config(self, port: int) -> dict[str, Any]:
        own = {"job_name": SELF_JOB, "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}
        return {"global": {"scrape_interval": SCRAPE_INTERVAL}, "scrape_configs": [own, *self.jobs]}

    def start(self) -> TierCentral:
        """Start the Prometheus; return once it holds a sample of its own."""
        port = free_port()
        self.prometheus = Prometheus(require_tool("prometheus"), self.folder, self._config(port), port=port)
        wait_for("the central to scrape itself", lambda: self._up(SELF_JOB), patience(), [self.prometheus])
        # a report window starting here must find a sample of ``up`` at its start (fleet/report/queries.py
        # increase_from_birth) after Window.range rounds its length up to whole seconds: a second past a sample's
        sampled = max(float(s["value"][1]) for s in self.prometheus.query(f'timestamp(up{{job="{SELF_JOB}"}})'))
        self.collecting_since = math.ceil(sampled) + 1.0
        return self

    @property
    def url(self) -> str:
        """The Prometheus' base URL."""
        assert self.prometheus is not None
        return self.prometheus.url

    def _write(self) -> None:
        assert self.prometheus is not None
        config = self._config(self.prometheus.port)
        (self.folder / "prometheus.yml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")

    def _up(self, job: str, after: float = 0.0) -> bool:
        assert self.prometheus is not None
        if not self.prometheus.ready():
            return False
        # timestamp() gives a sample's own time only of a plain selector (of ``up == 1`` it gives the query's time)
        healthy = self.prometheus.query(f'up{{job="{job}"}}')
        sampled = self.prometheus.query(f'timestamp(up{{job="{job}"}})')
        return (
            bool(healthy)
            and all(float(s["value"][1]) == 1 for s in healthy)
            and all(float(s["value"][1]) > after for s in sampled)
        )

    def scrape_kueue(self, on: Any) -> None:
        """Scrape the Kueue of ``on`` (a ``tests.real.fleet_tier.StackOnHollow`` after its ``up``) through the
        ServiceMonitor its stack deployed: as the central's own on the manager, as federated from a worker (once: a
        later call for the same cluster does nothing)."""
        name = on.cluster.name
        job_name = f"kueue-{name}"
        if any(job["job_name"] == job_name for job in self.jobs):
            return
        monitor = on.hollow.get("servicemonitors.monitoring.coreos.com", "-n", KUEUE_NAMESPACE, KUEUE_METRICS_MONITOR)
        token = on.hollow.kubectl("create", "token", PROMETHEUS_ACCOUNT, "-n", MONITORING_NS, "--duration", "24h")
        token_file = self.folder / f"{name}.token"
        token_file.write_text(token.stdout.strip())
        worker = self.fleet.dispatch is not None and self.fleet.dispatch.manager != name
        labels = leaf_external_labels(name, on.cluster.cloud) if worker else {}
        targets = wait_for(f"the endpoints of {name}'s Kueue metrics", lambda: monitor_targets(on.hollow, monitor),
                           patience(), [self.prometheus])  # fmt: skip
        job = monitor_scrape_config(monitor, job_name, targets, token_file, labels)
        if worker:
            federated = "|".join(re.escape(s) for s in federated_selectors(self.fleet))
            job["metric_relabel_configs"] = [{"action": "keep", "source_labels": ["__name__"], "regex": federated}]
        self.jobs.append(job)
        self._write()
        assert self.prometheus is not None
        self.prometheus.proc.send_signal(signal.SIGHUP)
        wait_for(f"the central to scrape {name}'s Kueue", lambda: self._up(job_name), patience(),
                 [self.prometheus])  # fmt: skip

    def scraped_since(self, moment: float) -> bool:
        """Whether every job has been scraped successfully after ``moment`` (Unix seconds)."""
        return all(self._up(job["job_name"], after=moment) for job in [{"job_name": SELF_JOB}, *self.jobs])

    def stop(self) -> None:
        """Stop the Prometheus (by its PID)."""
        if self.prometheus is not None:
            self.prometheus.stop()
