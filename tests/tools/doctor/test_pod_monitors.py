"""The PodMonitor rows (fleet/tools/doctor/pod_monitors.py) when Prometheus does not answer; against a real
Prometheus in tests/e2e/test_doctor_prometheus.py."""

from __future__ import annotations

from tests.tools.doctor.support import leaf_of, row_of
from tests.tools.doctor.world import healthy


def test_an_unreachable_prometheus_url_is_a_problem(fleet, run_doctor):
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    cluster = leaf_of(fleet)
    result = run_doctor(healthy(fleet, cluster), cluster.name, "--prometheus", f"http://127.0.0.1:{port}")
    assert result.status == 1
    row = row_of(result.out, "PodMonitor benchmarks/gpu-fleet-benchmarks: targets up")
    assert "FAIL" in row and f"cannot query Prometheus at http://127.0.0.1:{port}" in row and "port-forward" in row
