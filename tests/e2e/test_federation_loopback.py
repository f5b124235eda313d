"""Real federation on 127.0.0.1: exporter -> leaf Prometheus (mTLS) -> central Prometheus, rendered configs.

* a tiny exporter (http.server thread) serves benchmark metrics, dcgm-exporter-like GPU metrics and
  metrics nobody should federate;
* the leaf ``prometheus`` scrapes it every second, with the rendered external labels, GPU recording rules
  and mutual-TLS web config;
* the central ``prometheus`` runs ``central_prometheus_config(...)`` pointed at the leaf.

The test waits (bounded) until the benchmark series reach the central, then checks their labels, that
nothing unselected crossed, and that the leaf refuses clients without a certificate from the fleet CA.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from fleet.model.core.workloads import MetricSpec
from fleet.model.monitoring.prometheus import (
    BENCHMARK_LAST_SAMPLE_RULE,
    GPU_RECORDING_RULES,
    FederationTarget,
    central_alert_rules,
    central_prometheus_config,
    leaf_external_labels,
    leaf_recording_rules,
    leaf_web_config,
    match_selectors,
    to_yaml,
)
from tests.conftest import require_tool
from tests.e2e.processes import PATIENCE_S, Prometheus, TextExporter, free_port, patience
from tests.e2e.support import Pki, make_pki

pytestmark = pytest.mark.e2e

SERVER_NAME = "prometheus.leaf-a.gpufleet.test"

METRICS = [
    MetricSpec(name="benchmark_events_per_second", type="gauge", help="events/s", labels=["stage"]),
    MetricSpec(name="benchmark_fit_seconds", type="histogram", help="fit time"),
]

EXPORTED = """\
# TYPE benchmark_events_per_second gauge
benchmark_events_per_second{workload="madgraph",gpu="nvidia-t4",stage="rmb_me"} 3.673078e+07
benchmark_events_per_second{workload="madgraph",gpu="nvidia-t4",stage="me_only"} 7.195237e+07
benchmark_events_per_second{workload="spoof",gpu="nvidia-t4",stage="x",cluster="leaf-b",cloud="aws"} 1
# TYPE benchmark_fit_seconds histogram
benchmark_fit_seconds_bucket{workload="pyhf",gpu="nvidia-t4",le="1"} 2
benchmark_fit_seconds_bucket{workload="pyhf",gpu="nvidia-t4",le="10"} 5
benchmark_fit_seconds_bucket{workload="pyhf",gpu="nvidia-t4",le="+Inf"} 6
benchmark_fit_seconds_sum{workload="pyhf",gpu="nvidia-t4"} 23.5
benchmark_fit_seconds_count{workload="pyhf",gpu="nvidia-t4"} 6
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-aaaa",modelName="Tesla T4",Hostname="n1",namespace="bench",pod="mg-x"} 80
DCGM_FI_DEV_GPU_UTIL{gpu="1",UUID="GPU-bbbb",modelName="Tesla T4",Hostname="n1",namespace="bench",pod="mg-x"} 60
# TYPE DCGM_FI_DEV_POWER_USAGE gauge
DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-aaaa",modelName="Tesla T4",Hostname="n1",namespace="bench",pod="mg-x"} 55.5
DCGM_FI_DEV_POWER_USAGE{gpu="1",UUID="GPU-bbbb",modelName="Tesla T4",Hostname="n1",namespace="bench",pod="mg-x"} 44.5
# TYPE node_cpu_seconds_total counter
node_cpu_seconds_total{cpu="0",mode="idle"} 1234.5
# TYPE benchmark_scratch_bytes gauge
benchmark_scratch_bytes{workload="madgraph"} 42
"""
# Series names the central may hold with job="exporter" (the leaf's job, kept by honor_labels).
FEDERATED_FROM_EXPORTER = {
    "benchmark_events_per_second",
    "benchmark_fit_seconds_bucket",
    "benchmark_fit_seconds_sum",
    "benchmark_fit_seconds_count",
}


def _wait_for(what: str, probe: Callable[[], Any], fed: dict[str, Any]) -> Any:
    """Call ``probe`` until it returns something truthy (for at most ``PATIENCE_S``); fail fast if a process died."""
    last: Any = None
    procs: list[Prometheus] = [fed["leaf"], fed["central"]]
    deadline = patience()
    while time.monotonic() < deadline:
        if any(p.proc.poll() is not None for p in procs):
            raise AssertionError(f"a prometheus exited while waiting for {what}\n" + "\n".join(p.logs() for p in procs))
        try:
            last = probe()
            if last:
                return last
        except (OSError, ValueError, http.client.HTTPException) as exc:
            last = exc
        time.sleep(0.25)
    logs = "\n".join(p.logs() for p in procs)
    raise AssertionError(f"timed out after {PATIENCE_S:.0f}s waiting for {what} (last: {last!r})\n{logs}")


def _client_context(pki: Pki, cert: Path | None, key: Path | None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(pki.ca_cert))
    ctx.check_hostname = True
    if cert is not None and key is not None:
        ctx.load_cert_chain(str(cert), str(key))
    return ctx


def _leaf_get(port: int, ctx: ssl.SSLContext, path: str) -> tuple[int, bytes]:
    """GET on the leaf over TLS, verifying its certificate for SERVER_NAME at 127.0.0.1."""
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        ctx.wrap_socket(raw, server_hostname=SERVER_NAME) as tls,
    ):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        conn.sock = tls
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read()


def _query(port: int, promql: str) -> list[dict[str, Any]]:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    with urllib.request.urlopen(url, timeout=5) as resp:
        body = json.load(resp)
    assert body["status"] == "success", body
    return list(body["data"]["result"])


def _central_rules(port: int) -> dict[str, dict[str, Any]]:
    """The central's loaded rules by alert or record name, once every one has been evaluated."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/rules", timeout=5) as resp:
        body = json.load(resp)
    rules = {r["name"]: r for g in body["data"]["groups"] for r in g["rules"]}
    return rules if rules and all(r["health"] != "unknown" for r in rules.values()) else {}


@pytest.fixture(scope="module")
def federation(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Exporter, leaf and central, shared by the module's tests; yields them, the PKI and the Unix time before the
    exporter started (no sample of it is older)."""
    exe = require_tool("prometheus")
    tmp_path = tmp_path_factory.mktemp("federation")
    start = time.time()
    pki = make_pki(tmp_path / "pki", server_dns=SERVER_NAME)

    exporter = TextExporter(lambda: EXPORTED)
    running: list[Prometheus] = []
    try:
        leaf_dir = tmp_path / "leaf"
        leaf_dir.mkdir()
        (leaf_dir / "web.yml").write_text(
            to_yaml(leaf_web_config(str(pki.server_cert), str(pki.server_key), str(pki.ca_cert))), encoding="utf-8"
        )
        (leaf_dir / "rules.yml").write_text(to_yaml(leaf_recording_rules(interval="1s")), encoding="utf-8")
        leaf_config = {
            "global": {
                "scrape_interval": "1s",
                "scrape_timeout": "900ms",
                "evaluation_interval": "1s",
                "external_labels": leaf_external_labels("leaf-a", "gcp"),
            },
            "rule_files": ["rules.yml"],
            "scrape_configs": [{"job_name": "exporter", "static_configs": [{"targets": [exporter.address]}]}],
        }
        leaf = Prometheus(exe, leaf_dir, leaf_config, web_config=leaf_dir / "web.yml", name="leaf")
        running.append(leaf)

        central_dir = tmp_path / "central"
        central_dir.mkdir()
        (central_dir / "alerts.yml").write_text(to_yaml(central_alert_rules(METRICS)), encoding="utf-8")
        target = FederationTarget(
            cluster="leaf-a",
            cloud="gcp",
            address=f"127.0.0.1:{leaf.port}",
            server_name=SERVER_NAME,
            ca_file=str(pki.ca_cert),
            cert_file=str(pki.client_cert),
            key_file=str(pki.client_key),
        )
        central_port = free_port()
        central_config = central_prometheus_config(
            [target],
            match_selectors(METRICS),
            {"role": "central"},
            rule_files=["alerts.yml"],
            interval="1s",
            timeout="900ms",
            evaluation_interval="1s",
            self_address=f"127.0.0.1:{central_port}",
        )
        central = Prometheus(exe, central_dir, central_config, port=central_port, name="central")
        running.append(central)
        yield {"leaf": leaf, "central": central, "pki": pki, "start": start}
    finally:
        for proc in reversed(running):
            proc.stop()
        exporter.stop()


def test_benchmark_metrics_are_federated_with_cluster_labels_and_nothing_else(federation: dict[str, Any]) -> None:
    fed = federation
    central: Prometheus = fed["central"]

    # The benchmark gauge arrives with the leaf's external labels and its own job/instance (honor_labels).
    series = _wait_for(
        "benchmark_events_per_second on the central",
        lambda: _query(central.port, 'benchmark_events_per_second{workload="madgraph"}'),
        fed,
    )
    assert len(series) == 2, series
    # A series the leaf exports with another cluster's labels is booked to the leaf it came from: the central sets
    # cluster and cloud from its own job, not from the leaf (metric_relabel_configs after honor_labels).
    (spoof,) = _query(central.port, 'benchmark_events_per_second{workload="spoof"}')
    assert (spoof["metric"]["cluster"], spoof["metric"]["cloud"]) == ("leaf-a", "gcp"), spoof
    assert _query(central.port, '{cluster="leaf-b"}') == [] and _query(central.port, '{cloud="aws"}') == []
    for s in series:
        labels = s["metric"]
        assert labels["cluster"] == "leaf-a" and labels["cloud"] == "gcp", labels
        assert labels["job"] == "exporter" and labels["workload"] == "madgraph", labels
        assert "exported_job" not in labels and "exported_instance" not in labels, labels
    assert {s["metric"]["stage"]: float(s["value"][1]) for s in series} == {
        "rmb_me": 3.673078e07,
        "me_only": 7.195237e07,
    }

    # The histogram crosses whole, and the leaf's GPU recording rules cross instead of the raw DCGM series.
    _wait_for("the GPU aggregates on the central", lambda: _query(central.port, "gpufleet:gpu_power_watts:sum"), fed)
    util = _wait_for(
        "gpufleet:gpu_utilization_percent:avg",
        lambda: _query(central.port, "gpufleet:gpu_utilization_percent:avg"),
        fed,
    )
    assert float(util[0]["value"][1]) == 70.0
    assert util[0]["metric"]["cluster"] == "leaf-a" and util[0]["metric"]["modelName"] == "Tesla T4", util
    # Recorded series have no job: the central's target labels fill it in (honor_labels keeps what exists).
    assert util[0]["metric"]["job"] == "federate-leaf-a", util

    names = _wait_for(
        "every selected exporter series",
        lambda: (
            (got := {s["metric"]["__name__"] for s in _query(central.port, 'group by (__name__) ({job="exporter"})')})
            >= FEDERATED_FROM_EXPORTER
            and got
        ),
        fed,
    )
    assert names == FEDERATED_FROM_EXPORTER, f"unselected series were federated: {names - FEDERATED_FROM_EXPORTER}"
    # Everything labelled with the cluster: federated series, plus what the central makes itself.
    made_by_central = {
        "up",
        "scrape_duration_seconds",
        "scrape_samples_scraped",
        "scrape_samples_post_metric_relabeling",
        "scrape_series_added",
        BENCHMARK_LAST_SAMPLE_RULE,
    }
    labelled = {s["metric"]["__name__"] for s in _query(central.port, 'group by (__name__) ({cluster="leaf-a"})')}
    assert labelled - made_by_central - set(GPU_RECORDING_RULES) == FEDERATED_FROM_EXPORTER, labelled
    for absent in ("DCGM_FI_DEV_GPU_UTIL", "node_cpu_seconds_total", "benchmark_scratch_bytes"):
        assert _query(central.port, absent) == [], absent

    # The federation job is up and labelled with the cluster (waited for: on a loaded machine one federate call can
    # outlast its 900 ms timeout, and `up` is only the last scrape's outcome).
    up = _wait_for("the federation job up", lambda: _query(central.port, 'up{job="federate-leaf-a"} == 1'), fed)
    assert [(u["metric"]["cluster"], u["metric"]["cloud"], u["value"][1]) for u in up] == [("leaf-a", "gcp", "1")]

    # The central's freshness rule sees each (cluster, workload, gpu) with the leaf's scrape timestamps.
    last = _wait_for("the benchmark freshness record", lambda: _query(central.port, BENCHMARK_LAST_SAMPLE_RULE), fed)
    assert sorted((r["metric"]["cluster"], r["metric"]["workload"], r["metric"]["gpu"]) for r in last) == [
        ("leaf-a", "madgraph", "nvidia-t4"),
        ("leaf-a", "pyhf", "nvidia-t4"),
        ("leaf-a", "spoof", "nvidia-t4"),  # booked to the leaf it came from, whatever labels it claimed
    ]
    # each is the time of one of this run's leaf scrapes: after the exporter started and not after now (bounds, not a
    # maximum age: on a loaded machine the rule may be evaluated long after the scrape)
    for r in last:
        assert fed["start"] <= float(r["value"][1]) <= time.time(), r

    # The rendered alert rules run on the central without error, and the healthy cluster is not alerted.
    rules = _wait_for("the central's rules to be evaluated", lambda: _central_rules(central.port), fed)
    assert {name: r["health"] for name, r in rules.items()} == dict.fromkeys(rules, "ok"), rules
    assert rules["FederatedClusterDown"]["state"] == "inactive"
    assert rules["BenchmarkStoppedReporting"]["state"] == "inactive"


def test_leaf_refuses_clients_without_a_fleet_certificate(federation: dict[str, Any], tmp_path: Path) -> None:
    fed = federation
    leaf: Prometheus = fed["leaf"]
    pki: Pki = fed["pki"]
    path = "/federate?" + urllib.parse.urlencode({"match[]": "benchmark_events_per_second"})
    good = _client_context(pki, pki.client_cert, pki.client_key)

    # Positive control: the central's client certificate gets the federated series.
    def federate() -> tuple[int, bytes] | None:
        status, body = _leaf_get(leaf.port, good, path)
        if status == 503:  # still starting: /federate is wrapped in readyf (prometheus web/web.go), 503 until ready
            return None
        assert status == 200, (status, body[:500])
        return (status, body) if b"benchmark_events_per_second{" in body else None  # empty until the first scrape

    _, body = _wait_for("the leaf to serve /federate over mTLS", federate, fed)
    assert b'cluster="leaf-a"' in body and b'cloud="gcp"' in body, body[:500]

    rogue = make_pki(tmp_path / "rogue", server_dns=SERVER_NAME)  # same names, another CA
    for what, ctx in (
        ("no client certificate", _client_context(pki, None, None)),
        ("a client certificate from another CA", _client_context(pki, rogue.client_cert, rogue.client_key)),
    ):
        # TLS 1.3: the client's handshake may complete before the server's alert, so the refusal can show
        # on the first read (an SSL alert or EOF) rather than in connect; never as an HTTP response.
        try:
            status, _ = _leaf_get(leaf.port, ctx, path)
        except (ssl.SSLError, ConnectionError):
            continue
        pytest.fail(f"the leaf answered HTTP {status} to a client with {what}")
    # The leaf says why it refused each one.
    _wait_for(
        "the leaf to log both refusals",
        lambda: (
            "client didn't provide a certificate" in (log := leaf.log.read_text(errors="replace"))
            and "certificate signed by unknown authority" in log
        ),
        fed,
    )

    # Plain HTTP gets no metrics either (Go answers a plain request on a TLS port with 400).
    conn = http.client.HTTPConnection("127.0.0.1", leaf.port, timeout=5)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        assert resp.status == 400 and b"benchmark_events_per_second" not in resp.read()
    except ConnectionError:
        pass
    finally:
        conn.close()
