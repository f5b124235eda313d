"""The rendered federation configs and rules, checked by the real promtool (Prometheus 2.42).

Each check is also shown to fail on a broken input, so a green run means promtool really looked.
Certificates are throwaway ones made with the openssl CLI (tests/e2e/support.py, shared with the loopback tests).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fleet.model.monitoring.prometheus import (
    FederationTarget,
    central_alert_rules,
    central_prometheus_config,
    leaf_recording_rules,
    leaf_web_config,
    match_selectors,
)
from tests.e2e.support import METRICS, Pki, make_pki, promtool, rule_tests, write_yaml

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def _targets(pki: Pki) -> list[FederationTarget]:
    return [
        FederationTarget(
            cluster=name,
            cloud=cloud,
            address=f"prometheus.{name}.gpufleet.example:443",
            server_name=f"prometheus.{name}.gpufleet.example",
            ca_file=str(pki.ca_cert),
            cert_file=str(pki.client_cert),
            key_file=str(pki.client_key),
        )
        for name, cloud in (("gke-a", "gcp"), ("eks-b", "aws"))
    ]


def _central(tmp_path: Path, pki: Pki) -> dict[str, Any]:
    write_yaml(tmp_path / "central_alerts.yml", central_alert_rules(METRICS))
    return central_prometheus_config(
        _targets(pki),
        match_selectors(METRICS),
        {"role": "central"},
        rule_files=["central_alerts.yml"],
        self_address="localhost:9090",
    )


# --- promtool check config ---------------------------------------------------------------------------------


def test_central_config_passes_promtool(tmp_path: Path, pki: Pki) -> None:
    path = write_yaml(tmp_path / "prometheus.yml", _central(tmp_path, pki))
    result = promtool("check", "config", path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout + result.stderr
    assert "6 rules found" in result.stdout + result.stderr  # the rule file was read and checked too


def test_check_config_rejects_timeout_above_interval(tmp_path: Path, pki: Pki) -> None:
    config = _central(tmp_path, pki)
    config["scrape_configs"][1]["scrape_timeout"] = "90s"  # bypasses the module's own check on purpose
    result = promtool("check", "config", write_yaml(tmp_path / "prometheus.yml", config))
    assert result.returncode != 0
    assert "greater than scrape interval" in result.stdout + result.stderr


def test_check_config_rejects_missing_client_certificate(tmp_path: Path, pki: Pki) -> None:
    config = _central(tmp_path, pki)
    config["scrape_configs"][1]["tls_config"]["cert_file"] = str(tmp_path / "missing.crt")
    result = promtool("check", "config", write_yaml(tmp_path / "prometheus.yml", config))
    assert result.returncode != 0
    assert "missing.crt" in result.stdout + result.stderr


# --- promtool check rules ----------------------------------------------------------------------------------


def test_rules_pass_promtool(tmp_path: Path) -> None:
    leaf = write_yaml(tmp_path / "leaf.yml", leaf_recording_rules(interval="30s"))
    central = write_yaml(tmp_path / "central.yml", central_alert_rules(METRICS))
    result = promtool("check", "rules", leaf, central)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert out.count("SUCCESS") == 2


def test_check_rules_rejects_a_broken_expression(tmp_path: Path) -> None:
    rules = leaf_recording_rules()
    rules["groups"][0]["rules"][0]["expr"] = "avg by (pod) (DCGM_FI_DEV_GPU_UTIL"
    result = promtool("check", "rules", write_yaml(tmp_path / "leaf.yml", rules))
    assert result.returncode != 0
    assert "parse error" in result.stdout + result.stderr


# --- promtool check web-config -----------------------------------------------------------------------------


def test_leaf_web_config_passes_promtool(tmp_path: Path, pki: Pki) -> None:
    path = write_yaml(
        tmp_path / "web.yml", leaf_web_config(str(pki.server_cert), str(pki.server_key), str(pki.ca_cert))
    )
    result = promtool("check", "web-config", path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout + result.stderr


@pytest.mark.parametrize(
    ("key", "value"), [("client_auth_type", "RequireAnyClientCertPlease"), ("cert_file", "/nonexistent/server.crt")]
)
def test_check_web_config_rejects_broken_config(tmp_path: Path, pki: Pki, key: str, value: str) -> None:
    web = leaf_web_config(str(pki.server_cert), str(pki.server_key), str(pki.ca_cert))
    web["tls_server_config"][key] = value
    result = promtool("check", "web-config", write_yaml(tmp_path / "web.yml", web))
    assert result.returncode != 0, result.stdout + result.stderr


def test_promtool_unit_tests_of_central_alerts(tmp_path: Path) -> None:
    write_yaml(tmp_path / "central_alerts.yml", central_alert_rules(METRICS))
    tests = write_yaml(tmp_path / "central_alerts_test.yml", rule_tests())
    result = promtool("test", "rules", tests.name, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout + result.stderr


def test_promtool_unit_tests_catch_a_wrong_expectation(tmp_path: Path) -> None:
    write_yaml(tmp_path / "central_alerts.yml", central_alert_rules(METRICS))
    tests = rule_tests()
    del tests["tests"][1]  # the cluster-down case alone is enough here
    tests["tests"][0]["alert_rule_test"][2]["exp_alerts"] = []  # claims the down cluster does not alert
    path = write_yaml(tmp_path / "central_alerts_test.yml", tests)
    result = promtool("test", "rules", path.name, cwd=tmp_path)
    assert result.returncode != 0
    assert "FederatedClusterDown" in result.stdout + result.stderr
