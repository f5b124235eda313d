"""The rendered federation configs and rules, checked by the real promtool (Prometheus 2.42).

Each check is also shown to fail on a broken input, so a green run means promtool really looked.
Certificates are throwaway ones made with the openssl CLI; ``make_pki`` is shared with the loopback test.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from fleet.model.prometheus import (
    BENCHMARK_LAST_SAMPLE_RULE,
    FederationTarget,
    central_alert_rules,
    central_prometheus_config,
    leaf_recording_rules,
    leaf_web_config,
    match_selectors,
    to_yaml,
)
from fleet.model.workloads import MetricSpec
from tests.conftest import require_tool

pytestmark = pytest.mark.e2e

METRICS = [
    MetricSpec(name="benchmark_events_per_second", type="gauge", help="events/s", labels=["stage"]),
    MetricSpec(name="benchmark_fit_seconds", type="histogram", help="fit time"),
    MetricSpec(name="benchmark_runs_total", type="counter", help="runs"),
]


@dataclass(frozen=True)
class Pki:
    """A throwaway CA with one server and one client certificate (EC P-256, valid two days)."""

    ca_cert: Path
    ca_key: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


EC_KEY = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"


def _openssl(command: str, *extra: str, cwd: Path) -> None:
    """Run ``openssl`` with ``command`` (split on spaces) followed by ``extra`` arguments kept whole."""
    args = ["openssl", *command.split(), *extra]
    subprocess.run(args, cwd=cwd, check=True, capture_output=True, timeout=30)


def make_pki(directory: Path, server_dns: str = "prometheus.leaf.gpufleet.test") -> Pki:
    """Make a CA, a server certificate for ``server_dns`` and 127.0.0.1, and a client certificate."""
    require_tool("openssl")
    directory.mkdir(parents=True, exist_ok=True)
    _openssl(
        f"req -x509 -keyout ca.key -out ca.crt -days 2 {EC_KEY}",
        "-subj",
        "/CN=gpufleet test CA",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
        cwd=directory,
    )
    exts = {
        "server": f"subjectAltName=DNS:{server_dns},IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
        "client": "subjectAltName=DNS:central.gpufleet.test\nextendedKeyUsage=clientAuth\n",
    }
    for serial, (name, ext) in enumerate(exts.items(), start=2):
        (directory / f"{name}.ext").write_text(ext + "keyUsage=critical,digitalSignature\n", encoding="utf-8")
        _openssl(f"req -new -keyout {name}.key -out {name}.csr {EC_KEY}", "-subj", f"/CN={name}", cwd=directory)
        sign = f"x509 -req -in {name}.csr -CA ca.crt -CAkey ca.key -set_serial {serial} -days 2 -out {name}.crt"
        _openssl(sign, "-extfile", f"{name}.ext", cwd=directory)
    d = directory
    return Pki(d / "ca.crt", d / "ca.key", d / "server.crt", d / "server.key", d / "client.crt", d / "client.key")


def promtool(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run promtool, returning the finished process (never raising on a non-zero exit)."""
    exe = require_tool("promtool")
    return subprocess.run([exe, *map(str, args)], check=False, cwd=cwd, capture_output=True, text=True, timeout=120)


def write_yaml(path: Path, obj: Any) -> Path:
    path.write_text(to_yaml(obj), encoding="utf-8")
    return path


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


# --- promtool test rules -----------------------------------------------------------------------------------


def _alert_annotations(alertname: str, labels: dict[str, str], value: str) -> dict[str, str]:
    """The alert's annotations expanded as Prometheus would for ``labels`` and a pre-formatted ``$value``."""
    rule = next(r for g in central_alert_rules(METRICS)["groups"] for r in g["rules"] if r.get("alert") == alertname)
    out = {}
    for key, text in rule["annotations"].items():
        text = text.replace("{{ $value | humanizeDuration }}", value)
        for name, label in labels.items():
            text = text.replace(f"{{{{ $labels.{name} }}}}", label)
        assert "{{" not in text, text
        out[key] = text
    return out


def _sel(labels: dict[str, str]) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"


def _no_alert(alertname: str, eval_time: str) -> dict[str, Any]:
    return {"eval_time": eval_time, "alertname": alertname, "exp_alerts": []}


def _rule_tests() -> dict[str, Any]:
    """A ``promtool test rules`` file for the central rules, rendered next to them as central_alerts.yml."""
    down = {"job": "federate-alpha", "cluster": "alpha", "cloud": "gcp", "instance": "prometheus.alpha:443"}
    healthy = {"job": "federate-beta", "cluster": "beta", "cloud": "aws", "instance": "prometheus.beta:443"}
    stopped = {"cluster": "alpha", "workload": "madgraph", "gpu": "nvidia-t4"}
    running = {"cluster": "alpha", "workload": "pyhf", "gpu": "nvidia-t4"}
    daily = {"cluster": "beta", "workload": "madgraph", "gpu": "nvidia-a100"}
    last = BENCHMARK_LAST_SAMPLE_RULE
    return {
        "rule_files": ["central_alerts.yml"],
        # 5m keeps the 9-day run over a 7d max_over_time to about a second (1m takes over ten).
        "evaluation_interval": "5m",
        "tests": [
            {
                "name": "a federation job failing for over 5m fires; healthy or non-federation jobs never do",
                "interval": "1m",
                "input_series": [
                    {"series": "up" + _sel(down), "values": "1 1 1 0x20"},  # down from 3m on
                    {"series": "up" + _sel(healthy), "values": "1x23"},
                    {"series": 'up{job="node-exporter",instance="node-1:9100"}', "values": "0x23"},
                ],
                "alert_rule_test": [
                    _no_alert("FederatedClusterDown", "2m"),
                    _no_alert("FederatedClusterDown", "5m"),  # pending, not yet firing
                    {
                        "eval_time": "10m",
                        "alertname": "FederatedClusterDown",
                        "exp_alerts": [
                            {
                                "exp_labels": {**down, "severity": "warning"},
                                "exp_annotations": _alert_annotations("FederatedClusterDown", down, ""),
                            }
                        ],
                    },
                ],
            },
            {
                "name": "a benchmark silent for over 26h fires, until its last sample leaves the 7d lookback",
                "interval": "10m",
                "input_series": [
                    # madgraph on T4 in alpha: two stages reporting during the first hour, then nothing.
                    {"series": f"benchmark_events_per_second{_sel({**stopped, 'stage': 'rmb_me'})}", "values": "1x6"},
                    {"series": f"benchmark_events_per_second{_sel({**stopped, 'stage': 'me_only'})}", "values": "2x6"},
                    # pyhf on T4 in alpha: a histogram whose _count keeps coming until about 33h.
                    {"series": f"benchmark_fit_seconds_count{_sel(running)}", "values": "1+1x200"},
                    # madgraph on A100 in beta: one run at 0h, the next at 24h (a daily CronJob).
                    {"series": f"benchmark_events_per_second{_sel(daily)}", "values": "5 _x143 6"},
                    # A non-benchmark metric that stops is not watched.
                    {"series": f"node_load1{_sel(stopped)}", "values": "1x6"},
                ],
                "promql_expr_test": [
                    {
                        # The record exists only while a sample is within the 5m lookback (beta's is not) ...
                        "expr": last,
                        "eval_time": "30m",
                        "exp_samples": [
                            {"labels": last + _sel(stopped), "value": 1800},
                            {"labels": last + _sel(running), "value": 1800},
                        ],
                    },
                    {
                        # ... and max_over_time over the lookback remembers each series' newest sample.
                        "expr": f"max_over_time({last}[7d])",
                        "eval_time": "26h",
                        "exp_samples": [
                            {"labels": _sel(stopped), "value": 3600},
                            {"labels": _sel(running), "value": 93600},
                            {"labels": _sel(daily), "value": 86400},
                        ],
                    },
                ],
                "alert_rule_test": [
                    _no_alert("BenchmarkStoppedReporting", "2h"),
                    _no_alert("BenchmarkStoppedReporting", "27h"),  # exactly 26h after the last sample: not yet
                    {
                        "eval_time": "28h",
                        "alertname": "BenchmarkStoppedReporting",
                        "exp_alerts": [
                            {
                                "exp_labels": {**stopped, "severity": "info"},
                                "exp_annotations": _alert_annotations(
                                    "BenchmarkStoppedReporting", stopped, "1d 3h 0m 0s"
                                ),
                            }
                        ],
                    },
                    # Past the 7d lookback every series here is forgotten: the alert resolves by itself.
                    _no_alert("BenchmarkStoppedReporting", "9d"),
                ],
            },
        ],
    }


def test_promtool_unit_tests_of_central_alerts(tmp_path: Path) -> None:
    write_yaml(tmp_path / "central_alerts.yml", central_alert_rules(METRICS))
    tests = write_yaml(tmp_path / "central_alerts_test.yml", _rule_tests())
    result = promtool("test", "rules", tests.name, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout + result.stderr


def test_promtool_unit_tests_catch_a_wrong_expectation(tmp_path: Path) -> None:
    write_yaml(tmp_path / "central_alerts.yml", central_alert_rules(METRICS))
    tests = _rule_tests()
    del tests["tests"][1]  # the cluster-down case alone is enough here
    tests["tests"][0]["alert_rule_test"][2]["exp_alerts"] = []  # claims the down cluster does not alert
    path = write_yaml(tmp_path / "central_alerts_test.yml", tests)
    result = promtool("test", "rules", path.name, cwd=tmp_path)
    assert result.returncode != 0
    assert "FederatedClusterDown" in result.stdout + result.stderr
