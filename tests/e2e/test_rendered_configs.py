"""Real tools on what ``python -m fleet render`` writes for the shipped fleet.

* ``promtool check config`` on the central's rendered ``prometheus.yml`` (its federation jobs, certificate
  paths pointed at a throwaway PKI), ``promtool check rules`` on every stack's rule files, and a
  ``promtool test rules`` case run against the rendered central alerts;
* ``nginx -t`` on every leaf's rendered gateway configuration;
* a loopback federation through the rendered nginx gateway: exporter -> leaf Prometheus (rendered external
  labels and rules) -> nginx (rendered config, mTLS) -> central Prometheus (rendered federation job). Only
  the selected series cross, and the gateway refuses every other path and every client without a
  certificate from the fleet CA.

Only the addresses, ports, intervals and file locations of a cluster are rewritten for loopback.
"""

from __future__ import annotations

import http.client
import os
import selectors
import shutil
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.kubernetes.gateway import (
    GATEWAY_MEMORY_MIB,
    GATEWAY_PORT,
    GATEWAY_WORKER_CONNECTIONS,
    GATEWAY_WORKERS,
    server_name,
)
from components.kubernetes.prometheus_stack import PROMETHEUS_URL
from fleet.model.billing import accounting_hours
from fleet.model.billing.prices import card_prices, load_prices
from fleet.model.loader import POLICY_FILE, load_fleet
from fleet.model.monitoring.prometheus import duration_seconds
from fleet.model.probes import probe_phases
from fleet.tools.cli import main
from tests.conftest import require_tool
from tests.e2e.processes import (
    PATIENCE_S,
    Process,
    Prometheus,
    RecordingUpstream,
    TextExporter,
    patience,
    tree_rss_kib,
    wait_for,
)
from tests.e2e.processes import free_port as _free_port
from tests.e2e.support import Pki, make_pki, promtool, rule_tests, write_yaml

pytestmark = pytest.mark.e2e

FLEET = load_fleet(POLICY_FILE)
CENTRAL = FLEET.central.name
# A leaf of the shipped fleet and one of its benchmarks: the metric the loopback federates is that workload's own.
LEAF = next(name for name, cluster in FLEET.clusters.items() if not cluster.central and FLEET.benchmarks(cluster))
LEAF_CLOUD = FLEET.cluster(LEAF).cloud
BENCH = FLEET.benchmarks(FLEET.cluster(LEAF))[0]
METRIC = BENCH.workload.spec.metrics[0].name
WORKLOAD, CARD = BENCH.workload.name, BENCH.pool.card
SECRETS_DIR = "/etc/prometheus/secrets"
GATEWAY_TLS_DIR = "/etc/gateway/tls/"

EXPORTED = f"""\
# TYPE {METRIC} gauge
{METRIC}{{workload="{WORKLOAD}",gpu="{CARD}",cluster="{LEAF}",cloud="{LEAF_CLOUD}"}} 0.42
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{{gpu="0",modelName="Tesla T4",namespace="benchmarks",pod="pyhf-t4"}} 90
DCGM_FI_DEV_GPU_UTIL{{gpu="1",modelName="Tesla T4",namespace="benchmarks",pod="pyhf-t4"}} 50
# TYPE node_cpu_seconds_total counter
node_cpu_seconds_total{{cpu="0",mode="idle"}} 1234.5
"""


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("rendered")
    assert main(["render", "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    """One CA; the server certificate carries the leaf's rendered gateway name (and 127.0.0.1)."""
    return make_pki(tmp_path_factory.mktemp("pki"), server_dns=server_name(LEAF))


def _load(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def _central_secrets(root: Path, pki: Pki) -> Path:
    """The central's mounted federation secrets, one folder per leaf as the operator mounts them."""
    secrets = root / "secrets"
    for leaf in FLEET.clusters:
        if leaf != CENTRAL:
            folder = secrets / f"federation-{leaf}"
            folder.mkdir(parents=True)
            shutil.copy(pki.ca_cert, folder / "ca.crt")
            shutil.copy(pki.client_cert, folder / "tls.crt")
            shutil.copy(pki.client_key, folder / "tls.key")
    return secrets


def _central_config_with_local_secrets(rendered: Path, secrets: Path, dst: Path) -> Path:
    """The rendered central prometheus.yml and rules copied to ``dst``, secret paths pointed at ``secrets``."""
    shutil.copytree(rendered / CENTRAL / "prometheus", dst)
    config = dst / "prometheus.yml"
    config.write_text(config.read_text(encoding="utf-8").replace(SECRETS_DIR, str(secrets)), encoding="utf-8")
    return config


# --- promtool --------------------------------------------------------------------------------------------


def test_rendered_central_config_passes_promtool(rendered: Path, pki: Pki, tmp_path: Path) -> None:
    config = _central_config_with_local_secrets(rendered, _central_secrets(tmp_path, pki), tmp_path / "prom")
    jobs = _load(config)["scrape_configs"]
    assert len(jobs) == len(FLEET.clusters) - 1
    result = promtool("check", "config", config)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout + result.stderr


def test_promtool_fails_the_central_config_without_its_certificates(rendered: Path, tmp_path: Path) -> None:
    config = _central_config_with_local_secrets(rendered, tmp_path / "no-secrets", tmp_path / "prom")
    result = promtool("check", "config", config)
    assert result.returncode != 0 and "tls.crt" in result.stdout + result.stderr


def test_every_rendered_rule_file_passes_promtool(rendered: Path) -> None:
    rule_files = sorted(rendered.glob("*/prometheus/rules/*.yml"))
    probed = any(p.probe for c in FLEET.clusters.values() for p in c.pools)
    priced = bool(card_prices(FLEET, load_prices()))
    # GPU aggregates everywhere, accounting where the cluster has GPU pools, probe phases where a pool is probed; on
    # the central, the federation alerts, (when a pool is probed) the probe alerts and (when a card is priced) the
    # card prices the dashboards read, and (when an hour is whole federation intervals) the hourly card-hours
    with_pools = sum(1 for c in FLEET.clusters.values() if c.all_pools)
    with_probes = sum(1 for c in FLEET.clusters.values() if any(p.probe for p in c.pools))
    hourly = accounting_hours.supported(duration_seconds(FLEET.monitoring.federation_interval))
    # and (when a pool is probed) the records of finished probe runs for the report's long windows
    runs = probed and probe_phases.settled_run_rules(duration_seconds(FLEET.monitoring.federation_interval)) is not None
    assert len(rule_files) == len(FLEET.clusters) + with_pools + with_probes + 1 + probed + priced + hourly + runs
    result = promtool("check", "rules", *rule_files)
    assert result.returncode == 0, result.stdout + result.stderr


def test_rendered_central_alerts_pass_the_cluster_down_unit_test(rendered: Path, tmp_path: Path) -> None:
    shutil.copy(rendered / CENTRAL / "prometheus" / "rules" / "gpufleet-federation-alerts.yml", tmp_path)
    tests = rule_tests()
    tests["rule_files"] = ["gpufleet-federation-alerts.yml"]
    tests["tests"] = tests["tests"][:1]  # a federation job down fires; its metric names are the fleet's own
    path = write_yaml(tmp_path / "alerts_test.yml", tests)
    result = promtool("test", "rules", path.name, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


# --- nginx gateway ---------------------------------------------------------------------------------------


def _loopback_gateway_conf(rendered: Path, leaf: str, pki: Pki, work: Path, port: int, upstream: str) -> Path:
    """The leaf's rendered nginx.conf with its port, upstream, TLS folder and scratch paths moved to loopback."""
    tls = work / "tls"
    tls.mkdir(parents=True, exist_ok=True)
    for src, name in ((pki.server_cert, "tls.crt"), (pki.server_key, "tls.key"), (pki.ca_cert, "ca.crt")):
        shutil.copy(src, tls / name)
    scratch = Path(tempfile.mkdtemp(prefix="gateway-", dir=work))
    os.chmod(scratch, 0o777)  # nginx workers run as nobody
    text = (rendered / leaf / "gateway" / "nginx.conf").read_text(encoding="utf-8")
    for old, new in (  # scratch first: the others may be under /tmp themselves
        ("/tmp/", f"{scratch}/"),
        (f"listen {GATEWAY_PORT} ssl;", f"listen 127.0.0.1:{port} ssl;"),
        (f"proxy_pass {PROMETHEUS_URL}/federate;", f"proxy_pass {upstream}/federate;"),
        (GATEWAY_TLS_DIR, f"{tls}/"),
    ):
        assert old in text, f"the rendered gateway config no longer contains {old!r}"
        text = text.replace(old, new)
    conf = work / "nginx.conf"
    conf.write_text(text, encoding="utf-8")
    return conf


def _nginx_test(conf: Path) -> subprocess.CompletedProcess[str]:
    exe = require_tool("nginx")
    args = [exe, "-t", "-p", str(conf.parent), "-e", "stderr", "-c", str(conf)]
    return subprocess.run(args, capture_output=True, text=True, timeout=PATIENCE_S, check=False)


def test_every_rendered_gateway_passes_nginx_t(rendered: Path, pki: Pki, tmp_path: Path) -> None:
    leaves = [leaf for leaf in FLEET.clusters if leaf != CENTRAL]
    for leaf in leaves:
        conf = _loopback_gateway_conf(rendered, leaf, pki, tmp_path / leaf, _free_port(), "http://127.0.0.1:9")
        result = _nginx_test(conf)
        assert result.returncode == 0, f"{leaf}: {result.stderr}"
        assert "syntax is ok" in result.stderr


def test_nginx_t_fails_a_gateway_without_its_client_ca(rendered: Path, pki: Pki, tmp_path: Path) -> None:
    conf = _loopback_gateway_conf(rendered, LEAF, pki, tmp_path, _free_port(), "http://127.0.0.1:9")
    (tmp_path / "tls" / "ca.crt").unlink()
    result = _nginx_test(conf)
    assert result.returncode != 0 and "ca.crt" in result.stderr


# --- loopback federation through the rendered gateway ----------------------------------------------------


class _Nginx(Process):
    def __init__(self, conf: Path):
        exe = require_tool("nginx")
        args = [exe, "-p", str(conf.parent), "-e", "stderr", "-c", str(conf), "-g", "daemon off;"]
        super().__init__(args, conf.parent / "nginx.log")


@pytest.fixture(scope="module")
def federation(rendered: Path, pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Exporter, leaf Prometheus, rendered gateway and central Prometheus on 127.0.0.1."""
    prometheus = require_tool("prometheus")
    work = tmp_path_factory.mktemp("loopback")
    exporter = TextExporter(lambda: EXPORTED)
    running: list[Process] = []
    try:
        leaf_config = _load(rendered / LEAF / "prometheus" / "prometheus.yml")
        leaf_config["global"].update(scrape_interval="1s", scrape_timeout="900ms", evaluation_interval="1s")
        leaf_config["rule_files"] = [str(rendered / LEAF / "prometheus" / f) for f in leaf_config["rule_files"]]
        leaf_config["scrape_configs"] = [{"job_name": "exporter", "static_configs": [{"targets": [exporter.address]}]}]
        leaf = Prometheus(prometheus, work / "leaf", leaf_config)
        running.append(leaf)

        gateway_port = _free_port()
        conf = _loopback_gateway_conf(rendered, LEAF, pki, work / "gateway", gateway_port, leaf.url)
        gateway = _Nginx(conf)
        running.append(gateway)

        secrets = _central_secrets(work / "central-secrets", pki)
        central_file = _central_config_with_local_secrets(rendered, secrets, work / "central-rendered")
        central_config = _load(central_file)
        job = next(j for j in central_config["scrape_configs"] if j["job_name"] == f"federate-{LEAF}")
        job.update(scrape_interval="1s", scrape_timeout="900ms")
        job["static_configs"][0]["targets"] = [f"127.0.0.1:{gateway_port}"]
        central_config["scrape_configs"] = [job]
        central_config["global"].update(scrape_interval="1s", evaluation_interval="1s")
        central_config["rule_files"] = [str(central_file.parent / f) for f in central_config["rule_files"]]
        central = Prometheus(prometheus, work / "central", central_config)
        running.append(central)
        yield {
            "central": central,
            "leaf": leaf,
            "gateway_port": gateway_port,
            "running": running,
        }
    finally:
        for proc in reversed(running):
            proc.stop()
        exporter.stop()


def _gateway_response(port: int, ctx: ssl.SSLContext, method: str, path: str) -> tuple[int, bytes, str]:
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=5)
    try:
        conn.request(method, path)
        response = conn.getresponse()
        return response.status, response.read(), response.getheader("Server") or ""
    finally:
        conn.close()


def _gateway(port: int, ctx: ssl.SSLContext, method: str, path: str) -> tuple[int, bytes]:
    status, body, _ = _gateway_response(port, ctx, method, path)
    return status, body


def _federate_path(*selectors: str) -> str:
    """``/federate`` with ``match[]`` parameters encoded as Prometheus encodes them (Go's url.Values.Encode)."""
    return "/federate?" + urllib.parse.urlencode([("match[]", s) for s in selectors])


def _context(pki: Pki, cert: Path | None = None, key: Path | None = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(pki.ca_cert))
    if cert is not None and key is not None:
        ctx.load_cert_chain(str(cert), str(key))
    return ctx


def test_selected_metrics_cross_the_rendered_gateway_with_cluster_labels(federation: dict[str, Any]) -> None:
    central: Prometheus = federation["central"]
    running = federation["running"]
    fit = wait_for(f"{METRIC} on the central", lambda: central.query(METRIC), patience(), running)
    assert [(s["metric"]["cluster"], s["metric"]["cloud"], s["metric"]["gpu"]) for s in fit] == [
        (LEAF, LEAF_CLOUD, CARD)
    ]
    assert float(fit[0]["value"][1]) == 0.42
    util = wait_for(
        "the leaf's GPU aggregate on the central",
        lambda: central.query("gpufleet:gpu_utilization_percent:avg"),
        patience(),
        running,
    )
    assert float(util[0]["value"][1]) == 70.0 and util[0]["metric"]["cluster"] == LEAF
    # `up` is only the last scrape's outcome: on a loaded machine one federate call can outlast its 900 ms timeout
    up = wait_for(
        "the federation job up", lambda: central.query(f'up{{job="federate-{LEAF}"}} == 1'), patience(), running
    )
    assert [u["value"][1] for u in up] == ["1"]
    for absent in ("DCGM_FI_DEV_GPU_UTIL", "node_cpu_seconds_total"):
        assert central.query(absent) == [], f"{absent} was federated"


def _gateway_and_its_upstream_ready(federation: dict[str, Any], pki: Pki) -> None:
    """Wait for what the gateway tests use: nginx answering and, behind it, the leaf Prometheus ready with the
    fleet's metric scraped (nginx alone would answer 502 to /federate until then)."""
    leaf: Prometheus = federation["leaf"]
    running = federation["running"]
    wait_for(f"{METRIC} on the leaf", lambda: leaf.ready() and leaf.query(METRIC), patience(), running)
    client = _context(pki, pki.client_cert, pki.client_key)
    wait_for(
        "the gateway",
        lambda: _gateway(federation["gateway_port"], client, "GET", "/healthz")[0] == 200,
        patience(),
        running,
    )


def test_the_gateway_serves_only_get_federate_to_fleet_clients(federation: dict[str, Any], pki: Pki) -> None:
    port = federation["gateway_port"]
    _gateway_and_its_upstream_ready(federation, pki)
    fleet_client = _context(pki, pki.client_cert, pki.client_key)
    status, body, server = _gateway_response(port, fleet_client, "GET", _federate_path(METRIC))
    assert status == 200 and METRIC.encode() in body
    assert server == "nginx", f"the gateway tells its version: Server: {server}"
    for method, path in (("GET", "/api/v1/query?query=up"), ("GET", "/graph"), ("POST", _federate_path(METRIC))):
        assert _gateway(port, fleet_client, method, path)[0] == 403, (method, path)
    # The fleet's client certificate still gets only the fleet's selectors: not a match-all, not another metric,
    # not one smuggled beside an allowed one, not an extra parameter, not /federate without a selector.
    for path in (
        _federate_path('{__name__=~".+"}'),
        _federate_path("up"),
        _federate_path(METRIC, "up"),
        _federate_path(METRIC) + "&format=text",
        "/federate",
    ):
        status, body = _gateway(port, fleet_client, "GET", path)
        assert status == 403 and METRIC.encode() not in body, (path, status)

    rogue = make_pki(pki.ca_cert.parent.parent / "rogue", server_dns=server_name(LEAF))
    for what, ctx in (
        ("no client certificate", _context(pki)),
        ("a certificate from another CA", _context(pki, rogue.client_cert, rogue.client_key)),
    ):
        try:
            status, body = _gateway(port, ctx, "GET", _federate_path(METRIC))
        except (ssl.SSLError, ConnectionError):
            continue  # refused in the handshake
        # nginx answers 400 ("No required SSL certificate was sent" / "certificate error"), never metrics.
        assert status == 400 and METRIC.encode() not in body, (what, status)


# --- the gateway under abuse: raw URIs, bodies, half-open handshakes ------------------------------------------

# A TLS record header (handshake, TLS 1.0 record version, 512 bytes to follow) and then nothing: the half-open
# handshake of issue 35.
TLS_RECORD_HEADER = bytes([0x16, 0x03, 0x01, 0x02, 0x00])
HALF_OPEN = 1500


@pytest.fixture
def gateway_to_recorder(rendered: Path, pki: Pki, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """The rendered leaf gateway on loopback in front of an upstream that records what reaches it."""
    upstream = RecordingUpstream()
    port = _free_port()
    gateway = _Nginx(_loopback_gateway_conf(rendered, LEAF, pki, tmp_path, port, upstream.url))
    client = _context(pki, pki.client_cert, pki.client_key)
    try:
        wait_for(
            "the gateway",
            lambda: _gateway(port, client, "GET", "/healthz")[0] == 200,
            patience(),
            [gateway],
        )
        yield {"port": port, "upstream": upstream, "client": client, "nginx": gateway}
    finally:
        gateway.stop()
        upstream.stop()


def test_the_gateway_passes_exactly_federate_and_its_query_and_no_body(gateway_to_recorder: dict[str, Any]) -> None:
    port, upstream, client = (gateway_to_recorder[k] for k in ("port", "upstream", "client"))
    query = _federate_path(METRIC).split("?", 1)[1]
    for raw_path in (f"/federate?{query}", f"//federate?{query}", f"/./federate?{query}", f"/x/../federate?{query}"):
        conn = http.client.HTTPSConnection("127.0.0.1", port, context=client, timeout=5)
        try:
            conn.request("GET", raw_path, body=b"smuggled=1")
            response = conn.getresponse()
            assert response.status == 200 and response.read() == b"ok\n", raw_path
        finally:
            conn.close()
    assert upstream.received == [("GET", f"/federate?{query}", b"")] * 4


def _hold_half_open_handshakes(port: int, count: int, deadline: float) -> tuple[list[socket.socket], int]:
    """Open ``count`` connections, one after the other, each sending a TLS record header as soon as it is connected
    and nothing more; all the sockets, and how many sent their header before ``deadline``."""
    sockets = []
    pending = selectors.DefaultSelector()
    sent = 0
    for _ in range(count):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        sockets.append(sock)
        sock.connect_ex(("127.0.0.1", port))  # EINPROGRESS
        pending.register(sock, selectors.EVENT_WRITE)
        # this one's header goes out as soon as it connects (so the gateway is in its handshake, not waiting for a
        # first byte), before the next connection opens
        for key, _ in pending.select(timeout=min(0.2, max(0.0, deadline - time.monotonic()))):
            pending.unregister(key.fileobj)
            if key.fileobj.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                key.fileobj.send(TLS_RECORD_HEADER)
                sent += 1
    while pending.get_map() and time.monotonic() < deadline:
        for key, _ in pending.select(timeout=max(0.0, deadline - time.monotonic())):
            sock = key.fileobj
            pending.unregister(sock)
            if sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                sock.send(TLS_RECORD_HEADER)
                sent += 1
    pending.close()
    return sockets, sent


def _closed_by_server(sockets: list[socket.socket], deadline: float) -> int:
    """How many of ``sockets`` the server closes (EOF or reset) before ``deadline``."""
    watch = selectors.DefaultSelector()
    for sock in sockets:
        watch.register(sock, selectors.EVENT_READ)
    closed = 0
    while watch.get_map() and time.monotonic() < deadline:
        for key, _ in watch.select(timeout=max(0.0, deadline - time.monotonic())):
            watch.unregister(key.fileobj)
            try:
                closed += key.fileobj.recv(1) == b""
            except OSError:
                closed += 1  # reset_timedout_connection: an RST
    watch.close()
    return closed


def test_the_gateway_serves_a_fleet_client_through_1500_half_open_handshakes(
    gateway_to_recorder: dict[str, Any],
) -> None:
    port, client = gateway_to_recorder["port"], gateway_to_recorder["client"]
    sockets, connected = _hold_half_open_handshakes(port, HALF_OPEN, patience())
    try:
        assert connected == HALF_OPEN  # every attacker holds a connection in the handshake
        status, body = _gateway(port, client, "GET", _federate_path(METRIC))
        assert (status, body) == (200, b"ok\n")  # served while all of them are held
        # and the gateway lets go of every one (client_header_timeout bounds the handshake)
        assert _closed_by_server(sockets, patience()) == HALF_OPEN
        assert gateway_to_recorder["nginx"].alive()
    finally:
        for sock in sockets:
            sock.close()


# A flood of stalled handshakes filling nearly every connection slot the gateway has (2 workers x 1024), leaving a
# few for the fleet client and its upstream connection: issue 44's memory finding (2 x 8192 slots let ~2,600 stalled
# handshakes take nginx past its 128Mi limit). Measured on nginx 1.22: 21 MiB idle, 111 MiB holding the flood (the
# processes' RSS summed, so shared pages counted in each).
# The slots left free are shared by the two workers as the kernel hands out connections, unevenly: with 100 left, one
# worker could be full when the fleet client's connection reached it (a reset, seen once in a loaded CI run; with 256
# left, again once with both cores busy beside the real tier). A fleet client is Prometheus, which scrapes again at its
# next interval: the gateway serves it when one of a few connections in turn is.
FLOOD = GATEWAY_WORKERS * GATEWAY_WORKER_CONNECTIONS - 256
CLIENT_ATTEMPTS = 5


def _served_within_attempts(port: int, client: ssl.SSLContext, attempts: int) -> tuple[int, bytes] | list[str]:
    """The first answer of up to ``attempts`` connections to ``/federate`` one after the other, or why each failed."""
    failures = []
    for _ in range(attempts):
        try:
            return _gateway(port, client, "GET", _federate_path(METRIC))
        except (ConnectionError, ssl.SSLError) as exc:
            failures.append(repr(exc))
    return failures


def _server_connections(port: int) -> int:
    """How many TCP connections to ``port`` on this host are open (not yet closed on both sides)."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local_port, state = int(fields[1].rsplit(":", 1)[1], 16), fields[3]
            count += local_port == port and state not in ("06", "07", "0A")  # TIME_WAIT, CLOSE, LISTEN
    return count


def test_the_gateway_stays_under_its_memory_limit_with_every_slot_stalled_and_serves_a_fleet_client(
    gateway_to_recorder: dict[str, Any],
) -> None:
    port, client, nginx = (gateway_to_recorder[k] for k in ("port", "client", "nginx"))
    # the slots of an earlier test's connections are the gateway's again before the flood takes them
    wait_for("the gateway to release earlier connections", lambda: _server_connections(port) == 0, patience(), [nginx])
    idle = tree_rss_kib(nginx.proc.pid)
    sockets, connected = _hold_half_open_handshakes(port, FLOOD, patience())
    try:
        assert connected == FLOOD
        answer = _served_within_attempts(port, client, CLIENT_ATTEMPTS)
        assert answer == (200, b"ok\n")  # served while the flood is held
        held = tree_rss_kib(nginx.proc.pid)  # every stalled handshake's buffers are allocated by now
        assert held > idle + FLOOD * 8  # the flood is really held in memory (some KiB each): the measure can fail
        assert held < GATEWAY_MEMORY_MIB * 1024, f"nginx holds {held // 1024} MiB with {FLOOD} stalled handshakes"
        assert nginx.alive()
    finally:
        for sock in sockets:
            sock.close()


# Every other way to Prometheus a fleet client could try: its API (each endpoint with the fleet's own metric, so a
# gateway passing it would answer with data), its UI and management endpoints, and /federate with any other method.
_SELECTOR = urllib.parse.urlencode([("match[]", METRIC)])
REFUSED = [
    *(
        ("GET", path)
        for path in (
            f"/api/v1/series?{_SELECTOR}",
            f"/api/v1/query?{urllib.parse.urlencode({'query': METRIC})}",
            f"/api/v1/query_range?{urllib.parse.urlencode({'query': METRIC, 'start': 0, 'end': 60, 'step': 15})}",
            f"/api/v1/query_exemplars?{urllib.parse.urlencode({'query': METRIC})}",
            f"/api/v1/labels?{_SELECTOR}",
            f"/api/v1/label/__name__/values?{_SELECTOR}",
            "/api/v1/label/workload/values",
            "/api/v1/targets",
            "/api/v1/targets/metadata",
            "/api/v1/metadata",
            "/api/v1/rules",
            "/api/v1/alerts",
            "/api/v1/status/config",
            "/api/v1/status/flags",
            "/api/v1/status/tsdb",
            "/graph",
            "/metrics",
            "/-/ready",
            "/-/healthy",
            "/",
            f"/federate/?{_SELECTOR}",
            f"/federatex?{_SELECTOR}",
        )
    ),
    *(("POST", path) for path in ("/-/reload", "/-/quit", "/api/v1/admin/tsdb/snapshot", f"/api/v1/query?{_SELECTOR}")),
    *((method, f"/federate?{_SELECTOR}") for method in ("HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")),
]


@pytest.mark.parametrize(("method", "path"), REFUSED, ids=[f"{m}:{p.split('?')[0]}" for m, p in REFUSED])
def test_the_gateway_refuses_every_other_path_and_method(
    federation: dict[str, Any], pki: Pki, method: str, path: str
) -> None:
    """Only GET /federate (with the fleet's selectors) reaches the leaf Prometheus; a second endpoint opening would
    hand its API to anyone holding a fleet certificate. The same request through GET /federate succeeds."""
    _gateway_and_its_upstream_ready(federation, pki)
    client = _context(pki, pki.client_cert, pki.client_key)
    status, body = _gateway(federation["gateway_port"], client, method, path)
    assert status == 403 and METRIC.encode() not in body, (method, path, status, body[:200])
    assert _gateway(federation["gateway_port"], client, "GET", _federate_path(METRIC))[0] == 200
