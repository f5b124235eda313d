"""The doctor's Prometheus rows against real ``prometheus`` processes on 127.0.0.1.

Two Prometheus servers scrape every 10 s:

* "broken" holds what a leaf's and the central's Prometheus hold: the two PodMonitors' jobs as the operator renders
  them (``job_name: podMonitor/<ns>/<name>/0``, the ``job`` label relabelled to ``<ns>/<name>``, a ``pod`` target
  label), the benchmarks one pointed at a live text exporter and the probes one at a dead loopback port; and one
  ``federate-<leaf>`` job per leaf of the fixture fleet but one, each pointed at the live exporter except one pointed
  at a dead port (a leaf gateway that does not answer);
* "healthy" holds a federation job for every leaf, all live, and no PodMonitor target (no benchmark pod runs).

The doctor must report exactly the dead leaf, the missing one and the dead pod, and nothing on the healthy one.
The rows from the Kubernetes API are tested against a loopback API server in tests/tools/doctor/.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from fleet.model.core.clusters import Cluster
from fleet.model.core.fleet import Fleet
from fleet.model.loader import load_fleet
from fleet.model.monitoring.prometheus import FEDERATE_JOB_PREFIX
from fleet.tools.doctor.names import POD_MONITORS
from fleet.tools.doctor.prometheus import prometheus_rows
from fleet.tools.doctor.table import Row, exit_status, render_table
from tests.conftest import FIXTURES, require_tool
from tests.e2e.processes import PATIENCE_S, Prometheus, TextExporter, free_port, patience, wait_for

pytestmark = pytest.mark.e2e

FLEET_DIR = FIXTURES / "fleet"
LIVE_POD = "tracker-t4-5e6f7a8b-x7k2p"
DEAD_POD = "probe-t4-1a2b3c4d-29000100-q2w3e"


@dataclass(frozen=True)
class Servers:
    fleet: Fleet
    broken: Prometheus
    healthy: Prometheus
    up_leaf: Cluster
    down_leaf: Cluster
    missing_leaf: Cluster


def pod_monitor_job(monitor: str, targets: dict[str, str]) -> dict[str, object]:
    """A scrape job shaped as prometheus-operator v0.86.2 renders a PodMonitor's (pkg/prometheus/promcfg.go
    generatePodMonitorConfig), static targets (address: pod) standing in for the pods Kubernetes discovery finds."""
    namespace = "benchmarks"
    return {
        "job_name": f"podMonitor/{namespace}/{monitor}/0",
        "static_configs": [
            {"targets": [target], "labels": {"pod": pod, "namespace": namespace}} for target, pod in targets.items()
        ],
        "relabel_configs": [{"target_label": "job", "replacement": f"{namespace}/{monitor}"}],
    }


def federation_job(leaf: Cluster, target: str) -> dict[str, object]:
    """A federation job as the central has it (fleet/model/monitoring/prometheus.py: its name, its target labels),
    scraping ``target`` over plain HTTP instead of a leaf gateway."""
    return {
        "job_name": f"{FEDERATE_JOB_PREFIX}{leaf.name}",
        "static_configs": [{"targets": [target], "labels": {"cluster": leaf.name, "cloud": leaf.cloud}}],
    }


def config(jobs: list[dict[str, object]]) -> dict[str, object]:
    """Scrapes 10 s apart, each given all of those 10 s: the doctor reads the last scrape's ``up``, and the live
    exporter is a thread of the test process, which a loaded machine can keep from answering for a while (at a 200 ms
    timeout a live leaf was read as down, with a broken pipe in the exporter, on a 2-core machine at load 10). A dead
    port is refused at once whatever the timeout."""
    return {"global": {"scrape_interval": "10s", "scrape_timeout": "10s"}, "scrape_configs": jobs}


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    exe = require_tool("prometheus")
    fleet = load_fleet(FLEET_DIR / "fleet.yaml", FLEET_DIR / "workloads")
    leaves = [c for c in fleet.clusters.values() if not c.central]
    assert len(leaves) >= 3, "the fixture fleet needs three leaves: one up, one down, one not federated"
    up_leaf, down_leaf, missing_leaf = leaves[0], leaves[1], leaves[2]
    exporter = TextExporter(lambda: "# TYPE fixture_up gauge\nfixture_up 1\n")
    dead = f"127.0.0.1:{free_port()}"  # nothing listens there: a gateway that does not answer
    broken_jobs = [
        pod_monitor_job(POD_MONITORS[0][1], {exporter.address: LIVE_POD, dead: DEAD_POD}),
        *(
            federation_job(leaf, dead if leaf is down_leaf else exporter.address)
            for leaf in leaves
            if leaf is not missing_leaf
        ),
    ]
    healthy_jobs = [federation_job(leaf, exporter.address) for leaf in leaves]
    root: Path = tmp_path_factory.mktemp("doctor-prometheus")
    broken = Prometheus(exe, root / "broken", config(broken_jobs), name="broken")
    healthy = Prometheus(exe, root / "healthy", config(healthy_jobs), name="healthy")
    processes = [broken, healthy]
    try:
        deadline = patience()
        for server, jobs in ((broken, broken_jobs), (healthy, healthy_jobs)):
            wait_for(f"{server.log.name} ready", server.ready, deadline, processes)
            # every target scraped at least once: one `up` series per target
            targets = sum(len(c["targets"]) for job in jobs for c in job["static_configs"])  # type: ignore[union-attr]
            wait_for(
                f"every target of {server.log.name} scraped",
                lambda server=server, targets=targets: len(server.query("up")) == targets,
                deadline,
                processes,
            )
        yield Servers(fleet, broken, healthy, up_leaf, down_leaf, missing_leaf)
    finally:
        for process in processes:
            process.stop()
        exporter.stop()


def rows_by_what(rows: list[Row]) -> dict[str, Row]:
    return {row.what: row for row in rows}


def test_the_central_names_the_leaf_that_does_not_answer_and_the_one_not_federated(servers: Servers):
    fleet, central = servers.fleet, servers.fleet.central
    rows = prometheus_rows(fleet, central, central.name, servers.broken.url, None, timeout=PATIENCE_S)
    found = rows_by_what(rows)
    leaves = [c for c in fleet.clusters.values() if not c.central]
    assert [r.what for r in rows if r.what.startswith("federation:")] == [
        f"federation: {central.name} scrapes {leaf.name}" for leaf in leaves
    ]
    down = found[f"federation: {central.name} scrapes {servers.down_leaf.name}"]
    assert (
        down.problem
        == f"the gateway of {servers.down_leaf.name} does not answer the central or refuses its certificate"
    )
    assert f"python -m fleet doctor --stack {servers.down_leaf.name}" in down.fix
    assert f'up{{job="federate-{servers.down_leaf.name}"}} 0' == down.state
    missing = found[f"federation: {central.name} scrapes {servers.missing_leaf.name}"]
    assert missing.problem == f"the central Prometheus has no federation job for {servers.missing_leaf.name}"
    assert f"pulumi up --stack {servers.missing_leaf.name}, then pulumi up --stack {central.name}" in missing.fix
    for leaf in leaves:
        if leaf not in (servers.down_leaf, servers.missing_leaf):
            row = found[f"federation: {central.name} scrapes {leaf.name}"]
            assert row.status == "ok" and row.state == f'up{{job="federate-{leaf.name}"}} 1'
    assert exit_status(rows) == 1
    table = render_table(rows)
    assert servers.down_leaf.name in table and servers.missing_leaf.name in table


def test_pod_monitor_targets_down_are_named_by_pod(servers: Servers):
    fleet, central = servers.fleet, servers.fleet.central
    found = rows_by_what(prometheus_rows(fleet, central, central.name, servers.broken.url, None, timeout=PATIENCE_S))
    namespace, monitor = POD_MONITORS[0]
    row = found[f"PodMonitor {namespace}/{monitor}: targets up"]
    assert row.status == "FAIL" and row.state == "1 up, 1 down", row
    assert DEAD_POD in row.problem and LIVE_POD not in row.problem and "-c mtail" in row.fix


def test_a_leaf_checks_that_the_central_federates_it(servers: Servers):
    fleet = servers.fleet
    for leaf, status in ((servers.down_leaf, "FAIL"), (servers.up_leaf, "ok"), (servers.missing_leaf, "FAIL")):
        rows = prometheus_rows(fleet, leaf, leaf.name, None, servers.broken.url, timeout=PATIENCE_S)
        federation = [r for r in rows if r.what.startswith("federation:")]
        assert [r.what for r in federation] == [f"federation: {fleet.central.name} scrapes {leaf.name}"]
        assert federation[0].status == status, federation[0]
        # no --prometheus: the leaf's own rows are skipped, with the command that opens it
        assert all(
            r.skipped and "port-forward svc/kps-prometheus 9090:9090" in r.state for r in rows if r not in federation
        )


def test_a_healthy_central_with_no_benchmark_pod_running_exits_0(servers: Servers):
    fleet, central = servers.fleet, servers.fleet.central
    rows = prometheus_rows(fleet, central, central.name, servers.healthy.url, None, timeout=PATIENCE_S)
    assert exit_status(rows) == 0, render_table(rows)
    monitors = [r for r in rows if r.what.startswith("PodMonitor")]
    assert not fleet.runners_of(central)  # the fixture's central has no runner: only the benchmarks' monitor
    assert [r.state for r in monitors] == ["0 targets (no pod runs now)"]
    assert all(r.status == "ok" for r in rows)


def test_a_cluster_whose_runner_has_no_pod_is_told_to_set_its_token(servers: Servers):
    """A runner manager is long-lived: no target for it means it never started (no token Secret)."""
    fleet = servers.fleet
    leaf = next(c for c in fleet.clusters.values() if fleet.runners_of(c))
    rows = prometheus_rows(fleet, leaf, leaf.name, servers.healthy.url, None, timeout=PATIENCE_S)
    (row,) = [r for r in rows if r.what == "PodMonitor ci-runners/gpu-fleet-runners: targets up"]
    assert row.status == "FAIL" and row.state == f"0 of {len(fleet.runners_of(leaf))} runner(s) scraped"
    assert "gpu-fleet:runnerTokens" in row.fix
