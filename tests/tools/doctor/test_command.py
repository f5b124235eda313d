"""``python -m fleet doctor`` on a cluster served on loopback (fleet/tools/doctor/command.py): a healthy leaf and
the central, read with list calls only; an API server that does not answer or refuses the credentials; bad
input. The Prometheus rows against a real Prometheus are in tests/e2e/test_doctor_prometheus.py."""

from __future__ import annotations

import urllib.parse

import pytest

from fleet.tools.cli import main
from fleet.tools.doctor.names import PROMETHEUS_SERVICE
from tests.tools.doctor.fake_kube_api import COLLECTIONS, TOKEN, ApiServer, write_kubeconfig
from tests.tools.doctor.support import BASE, POLICY, leaf_of, row_of
from tests.tools.doctor.world import healthy


def test_a_healthy_leaf_exits_0_and_shows_every_pool_benchmark_and_probe(fleet, run_doctor):
    cluster = leaf_of(fleet)
    result = run_doctor(healthy(fleet, cluster), cluster.name)
    assert result.status == 0, result.out + result.err
    assert "FAIL" not in result.out and "Traceback" not in result.err
    for pool in cluster.all_pools:
        row = row_of(result.out, f"pool {pool.name} ")
        expected = pool.units_per_node if pool is cluster.pools[0] else 0  # a shared card: its slices
        assert f"{expected} {pool.resource} allocatable" in row
    for bench in fleet.benchmarks(cluster):
        row = row_of(result.out, f"benchmark {bench.workload.name} on {bench.pool.card}")
        assert "Complete" in row and " ok " in row
    probed = [p for p in cluster.pools if p.probe is not None]
    for pool in probed:
        assert "Complete" in row_of(result.out, f"probe of pool {pool.name}")
    assert "1/1 ready" in row_of(result.out, "NVIDIA device plugin")
    assert "1/1 ready" in row_of(result.out, "dcgm-exporter")
    assert "203.0.113.10:443" in row_of(result.out, "federation gateway")
    # no Prometheus URL: its rows are skipped, say so, and give the exact port-forward commands
    targets = row_of(result.out, "PodMonitor benchmarks/gpu-fleet-benchmarks: targets up")
    assert " skip " in targets
    assert f"-n monitoring port-forward svc/{PROMETHEUS_SERVICE} 9090:9090" in targets
    assert "--kubeconfig " in targets
    central = row_of(result.out, f"federation: {fleet.central.name} scrapes {cluster.name}")
    assert f"pulumi stack output kubeconfig --show-secrets --stack {fleet.central.name}" in central
    assert "--central-prometheus http://127.0.0.1:9091" in central
    # read-only: list calls only, every one a GET, none refused
    assert result.requests and all(method == "GET" for method, _ in result.requests)
    # ... and only collections, never one object by name
    assert all(urllib.parse.urlsplit(path).path.endswith(COLLECTIONS) for _, path in result.requests)


def test_the_central_lists_no_gateway_and_one_federation_row_per_leaf(fleet, run_doctor):
    central = fleet.central
    result = run_doctor(healthy(fleet, central), central.name)
    assert result.status == 0, result.out
    assert "federation gateway" not in result.out
    for leaf in (c for c in fleet.clusters.values() if not c.central):
        row = row_of(result.out, f"federation: {central.name} scrapes {leaf.name}")
        assert " skip " in row and "--prometheus http://127.0.0.1:9090" in row


def test_an_unreachable_api_server_exits_1_naming_it(fleet, tmp_path, capsys):
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens there
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig.yaml", f"http://127.0.0.1:{port}")
    cluster = leaf_of(fleet)
    status = main([*BASE, "--stack", cluster.name, "--kubeconfig", str(kubeconfig), "--timeout", "2"])
    captured = capsys.readouterr()
    assert status == 1
    row = row_of(captured.out, "Kubernetes API server")
    assert "FAIL" in row and f"cannot reach the API server at http://127.0.0.1:{port}" in row
    assert "Traceback" not in captured.err


def test_refused_credentials_exit_1(fleet, tmp_path, capsys):
    cluster = leaf_of(fleet)
    with ApiServer(healthy(fleet, cluster)) as api:
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig.yaml", api.url)
        text = kubeconfig.read_text().replace(TOKEN, "wrong-token")
        kubeconfig.write_text(text)
        status = main([*BASE, "--stack", cluster.name, "--kubeconfig", str(kubeconfig)])
    out = capsys.readouterr().out
    assert status == 1 and "refused the credentials (401" in out


def test_bad_kubeconfig_path_and_unknown_stack_exit_2_without_a_traceback(fleet, tmp_path, capsys):
    cluster = leaf_of(fleet)
    missing = tmp_path / "nowhere.yaml"
    base = BASE
    assert main([*base, "--stack", cluster.name, "--kubeconfig", str(missing)]) == 2
    err = capsys.readouterr().err
    assert f"{missing}:1: --kubeconfig: cannot read the kubeconfig: no such file" in err and "Traceback" not in err
    garbage = tmp_path / "garbage.yaml"
    garbage.write_text("apiVersion: v1\nkind: Config\nclusters: []\n")
    assert main([*base, "--stack", cluster.name, "--kubeconfig", str(garbage)]) == 2
    assert f"{garbage}:1: contexts: no context: expected a kubeconfig such as" in capsys.readouterr().err
    assert main([*base, "--stack", "no-such-cluster", "--kubeconfig", str(garbage)]) == 2
    err = capsys.readouterr().err
    assert "no cluster named 'no-such-cluster'" in err and cluster.name in err and "Traceback" not in err
    assert main([*base, "--stack", cluster.name, "--kubeconfig", str(garbage), "--prometheus", "ftp://x"]) == 2
    assert "--prometheus" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["doctor", "--policy", str(POLICY)])  # --stack is required
    assert exc.value.code == 2
