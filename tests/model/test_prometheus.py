"""Unit tests of fleet.model.monitoring.prometheus: selectors, scrape jobs, web config, rules and the central
prometheus.yml."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from fleet.model.core.workloads import MetricSpec, Workload, WorkloadSpec
from fleet.model.monitoring.prometheus import (
    BENCHMARK_LAST_SAMPLE_RULE,
    FEDERATE_JOB_PREFIX,
    GPU_RECORDING_RULES,
    FederationTarget,
    central_alert_rules,
    central_prometheus_config,
    check_selectors,
    duration_seconds,
    federation_scrape_config,
    federation_timeout,
    leaf_external_labels,
    leaf_recording_rules,
    leaf_web_config,
    match_selectors,
    series_names,
    to_yaml,
    workload_metrics,
)

GAUGE = MetricSpec(name="benchmark_events_per_second", type="gauge", help="events/s", labels=["stage"])
HISTOGRAM = MetricSpec(name="benchmark_fit_seconds", type="histogram", help="fit time")
COUNTER = MetricSpec(name="benchmark_runs_total", type="counter", help="runs")
METRIC_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")


def _target(cluster: str = "gke-a", cloud: str = "gcp", **kw: str) -> FederationTarget:
    fields = {
        "address": f"prometheus.{cluster}.example.org:443",
        "server_name": f"prometheus.{cluster}.example.org",
        "ca_file": "/etc/prometheus/secrets/federation/ca.crt",
        "cert_file": "/etc/prometheus/secrets/federation/tls.crt",
        "key_file": "/etc/prometheus/secrets/federation/tls.key",
    }
    fields.update(kw)
    return FederationTarget(cluster=cluster, cloud=cloud, **fields)


def _workload(name: str, metrics: list[MetricSpec]) -> Workload:
    spec = WorkloadSpec(
        name=name,
        description="test",
        image="example.org/bench:1.0",
        command=["run"],
        resources={"cpu_request": "1", "memory_request": "1Gi", "cpu_limit": "2", "memory_limit": "2Gi"},
        timeout_seconds=600,
        metrics=metrics,
        headline={"metric": metrics[0].name, "unit": "x"},
    )
    return Workload(spec=spec, folder=Path("/nonexistent") / name, mtail_programs={}, files={})


# --- selectors ---------------------------------------------------------------------------------------------


def test_selectors_cover_each_metric_and_histogram_suffixes() -> None:
    sels = match_selectors([GAUGE, HISTOGRAM, COUNTER], gpu_aggregates=False)
    assert sels == [
        "benchmark_events_per_second",
        "benchmark_fit_seconds_bucket",
        "benchmark_fit_seconds_count",
        "benchmark_fit_seconds_sum",
        "benchmark_runs_total",
    ]
    assert "benchmark_fit_seconds" not in sels  # a histogram has no series of its bare name


def test_selectors_include_gpu_aggregates_by_default() -> None:
    sels = match_selectors([GAUGE])
    assert set(GPU_RECORDING_RULES) <= set(sels)
    assert all(name.startswith("gpufleet:") for name in GPU_RECORDING_RULES)
    assert not any(s.startswith("DCGM_") for s in sels)  # raw per-GPU series never cross


def test_selectors_are_sorted_and_deduplicated() -> None:
    assert match_selectors([GAUGE, GAUGE, HISTOGRAM], gpu_aggregates=False) == sorted(
        set(match_selectors([HISTOGRAM, GAUGE], gpu_aggregates=False))
    )


@given(
    st.lists(
        st.tuples(st.from_regex(r"[a-z][a-z0-9_]{0,20}", fullmatch=True), st.sampled_from(["gauge", "histogram"])),
        max_size=8,
    ),
    st.booleans(),
)
def test_selectors_always_name_their_metric(specs: list[tuple[str, str]], gpu: bool) -> None:
    metrics = [MetricSpec(name=n, type=t, help="h") for n, t in specs]  # type: ignore[arg-type]
    sels = match_selectors(metrics, gpu_aggregates=gpu)
    assert all(METRIC_NAME.match(s) for s in sels)  # bare names: never a match-all selector
    for m in metrics:
        assert set(series_names(m)) <= set(sels)
    if sels:
        assert check_selectors(sels) == sels


@pytest.mark.parametrize(
    "bad", ['{__name__=~".+"}', '{__name__=~".*",job!=""}', '{job="kubernetes-pods"}', "", "{}", '.+{job="x"}']
)
def test_match_all_or_nameless_selectors_are_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="metric name"):
        check_selectors(["benchmark_runs_total", bad])
    with pytest.raises(ValueError, match="metric name"):
        federation_scrape_config(_target(), [bad])


def test_a_named_selector_with_label_matchers_is_allowed() -> None:
    assert check_selectors(['benchmark_runs_total{workload="pyhf"}']) == ['benchmark_runs_total{workload="pyhf"}']


def test_no_selector_is_refused_because_federate_would_silently_return_nothing() -> None:
    with pytest.raises(ValueError, match="no federation selector"):
        check_selectors([])
    with pytest.raises(ValueError, match="no federation selector"):
        central_prometheus_config([_target()], match_selectors([], gpu_aggregates=False), {"role": "central"})
    with pytest.raises(TypeError):
        check_selectors("benchmark_runs_total")  # one string would be iterated character by character


# --- workloads ---------------------------------------------------------------------------------------------


def test_workload_metrics_from_loaded_workloads() -> None:
    loaded = {"a": _workload("a", [GAUGE, HISTOGRAM]), "b": _workload("b", [GAUGE, COUNTER])}
    names = [m.name for m in workload_metrics(loaded)]
    assert names == ["benchmark_events_per_second", "benchmark_fit_seconds", "benchmark_runs_total"]
    assert workload_metrics(loaded.values()) == workload_metrics(loaded)


def test_workload_metrics_refuse_one_name_with_two_types() -> None:
    other = MetricSpec(name="benchmark_fit_seconds", type="gauge", help="x")
    with pytest.raises(ValueError, match="histogram in workload 'a' but a gauge in workload 'b'"):
        workload_metrics([_workload("a", [HISTOGRAM]), _workload("b", [other])])


# --- scrape job --------------------------------------------------------------------------------------------


def test_scrape_job_shape() -> None:
    t = _target()
    job = federation_scrape_config(t, match_selectors([GAUGE, HISTOGRAM]))
    assert job["job_name"] == "federate-gke-a" == f"{FEDERATE_JOB_PREFIX}{t.cluster}"
    assert job["honor_labels"] is True
    # the leaf keeps job/instance, but cluster and cloud come from the central's own job, whatever the leaf sends
    assert job["metric_relabel_configs"] == [
        {"action": "replace", "target_label": "cluster", "replacement": t.cluster},
        {"action": "replace", "target_label": "cloud", "replacement": t.cloud},
    ]
    assert job["metrics_path"] == "/federate"
    assert job["scheme"] == "https"
    assert job["params"] == {"match[]": match_selectors([GAUGE, HISTOGRAM])}
    assert job["scrape_interval"] == "60s" and job["scrape_timeout"] == "45s"
    assert job["sample_limit"] > 0 and job["body_size_limit"].endswith("MB")
    assert job["tls_config"] == {
        "ca_file": t.ca_file,
        "cert_file": t.cert_file,
        "key_file": t.key_file,
        "server_name": "prometheus.gke-a.example.org",
        "insecure_skip_verify": False,
    }
    assert job["static_configs"] == [
        {"targets": ["prometheus.gke-a.example.org:443"], "labels": {"cluster": "gke-a", "cloud": "gcp"}}
    ]
    assert "basic_auth" not in job


@pytest.mark.parametrize(("interval", "timeout"), [("60s", "60s"), ("60s", "90s"), ("30s", "1m"), ("1s", "1500ms")])
def test_timeout_must_be_below_interval(interval: str, timeout: str) -> None:
    with pytest.raises(ValueError, match="below the scrape interval"):
        federation_scrape_config(_target(), ["up"], interval=interval, timeout=timeout)


def test_short_intervals_for_tests_are_accepted() -> None:
    job = federation_scrape_config(_target(), ["x"], interval="1s", timeout="900ms")
    assert (job["scrape_interval"], job["scrape_timeout"]) == ("1s", "900ms")


@pytest.mark.parametrize(
    ("sample_limit", "body"), [(0, "16MB"), (-1, "16MB"), (10, "0MB"), (10, "16 MiB"), (10, "lots")]
)
def test_limits_must_be_real_limits(sample_limit: int, body: str) -> None:
    with pytest.raises(ValueError):
        federation_scrape_config(_target(), ["x"], sample_limit=sample_limit, body_size_limit=body)


@pytest.mark.parametrize(
    "kw",
    [
        {"cluster": "GKE_A"},
        {"cloud": ""},
        {"address": "prometheus.example.org"},
        {"address": "prometheus.example.org:99999"},
        {"address": "https://prometheus.example.org:443"},
        {"server_name": ""},
        {"ca_file": ""},
        {"cert_file": ""},
        {"key_file": ""},
    ],
)
def test_target_validation(kw: dict[str, str]) -> None:
    cluster = kw.pop("cluster", "gke-a")
    cloud = kw.pop("cloud", "gcp")
    with pytest.raises(ValueError):
        _target(cluster, cloud, **kw)


def test_target_accepts_ipv6_and_ip_addresses() -> None:
    assert _target(address="[::1]:9090").address == "[::1]:9090"
    assert _target(address="127.0.0.1:9090").address == "127.0.0.1:9090"


@pytest.mark.parametrize(
    ("text", "seconds"), [("45s", 45), ("1m30s", 90), ("500ms", 0.5), ("7d", 604800), ("26h", 93600), ("1w", 604800)]
)
def test_durations(text: str, seconds: float) -> None:
    assert duration_seconds(text) == seconds


@pytest.mark.parametrize("text", ["", "45", "1.5s", "s", "1m 30s", "30s1m"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError, match="duration"):
        duration_seconds(text)


# --- leaf --------------------------------------------------------------------------------------------------


def test_leaf_web_config_requires_verified_client_certificates() -> None:
    web = leaf_web_config("/tls/tls.crt", "/tls/tls.key", "/tls/ca.crt")
    assert web == {
        "tls_server_config": {
            "cert_file": "/tls/tls.crt",
            "key_file": "/tls/tls.key",
            "client_ca_file": "/tls/ca.crt",
            "client_auth_type": "RequireAndVerifyClientCert",
            "min_version": "TLS12",
        }
    }
    assert "basic_auth_users" not in web  # the operator's spec.web supports TLS only
    with pytest.raises(ValueError, match="client_ca_file"):
        leaf_web_config("/tls/tls.crt", "/tls/tls.key", "")


def test_leaf_external_labels() -> None:
    assert leaf_external_labels("gke-a", "gcp") == {"cluster": "gke-a", "cloud": "gcp"}
    with pytest.raises(ValueError):
        leaf_external_labels("", "gcp")


def test_leaf_recording_rules_aggregate_dcgm_per_card_and_pod() -> None:
    rules = leaf_recording_rules()
    (group,) = rules["groups"]
    assert "interval" not in group  # the leaf's evaluation_interval unless asked
    records = {r["record"]: r["expr"] for r in group["rules"]}
    assert tuple(records) == GPU_RECORDING_RULES
    for name, expr in records.items():
        assert name.startswith("gpufleet:") and name.count(":") == 2, name
        assert "by (modelName, namespace, pod)" in expr
        assert "DCGM_FI_DEV_" in expr
    used = " ".join(records.values())
    for dcgm in ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"):
        assert dcgm in used
    assert records["gpufleet:gpu_utilization_percent:avg"].startswith("avg by")
    assert leaf_recording_rules(interval="30s")["groups"][0]["interval"] == "30s"
    with pytest.raises(ValueError):
        leaf_recording_rules(interval="soon")


# --- central -----------------------------------------------------------------------------------------------


def _alerts(rules: dict) -> dict[str, dict]:
    return {r["alert"]: r for g in rules["groups"] for r in g["rules"] if "alert" in r}


def test_central_alerts_present_and_labelled() -> None:
    alerts = _alerts(central_alert_rules([GAUGE, HISTOGRAM]))
    assert set(alerts) == {
        "FederatedClusterDown",
        "FederationScrapeSlow",
        "FederationNearSampleLimit",
        "FederationLimitHit",
        "BenchmarkStoppedReporting",
    }
    down = alerts["FederatedClusterDown"]
    assert down["expr"] == f'up{{job=~"{FEDERATE_JOB_PREFIX}.+"}} == 0'
    assert down["for"] == "5m"
    assert "$labels.cluster" in down["annotations"]["summary"]
    for alert in alerts.values():
        assert {"summary", "description"} <= alert["annotations"].keys()
        assert alert["labels"]["severity"]


def test_scrape_slow_and_sample_limit_alerts_follow_the_jobs_settings() -> None:
    alerts = _alerts(central_alert_rules([GAUGE], scrape_timeout="20s", sample_limit=1000))
    assert alerts["FederationScrapeSlow"]["expr"].endswith("> 16")
    assert alerts["FederationNearSampleLimit"]["expr"].endswith("> 800")


def test_benchmark_stopped_reporting_design() -> None:
    rules = central_alert_rules([GAUGE, HISTOGRAM, COUNTER], stale_after="26h", lookback="7d")
    freshness = next(g for g in rules["groups"] if g["name"] == "gpufleet-benchmark-freshness")
    record, alert = freshness["rules"]  # the record first: rules of a group run in order
    assert record["record"] == BENCHMARK_LAST_SAMPLE_RULE
    stamps = [
        f'label_replace(timestamp({name}), "metric", "{name}", "", "")'
        for name in ("benchmark_events_per_second", "benchmark_fit_seconds_count", "benchmark_runs_total")
    ]
    assert record["expr"] == f"max by (cluster, workload, gpu) ({' or '.join(stamps)})"
    assert alert["alert"] == "BenchmarkStoppedReporting"
    assert alert["expr"] == f"time() - max_over_time({BENCHMARK_LAST_SAMPLE_RULE}[7d]) > 93600"
    assert "timestamp()" in alert["annotations"]["description"]
    assert "7d" in alert["annotations"]["description"] and "26h" in alert["annotations"]["description"]


def test_no_benchmark_metric_means_no_freshness_group() -> None:
    rules = central_alert_rules()
    assert [g["name"] for g in rules["groups"]] == ["gpufleet-federation"]


def test_lookback_must_exceed_stale_after() -> None:
    with pytest.raises(ValueError, match="lookback"):
        central_alert_rules([GAUGE], stale_after="7d", lookback="2d")


def test_central_config_one_job_per_cluster() -> None:
    targets = [_target("gke-a", "gcp"), _target("eks-b", "aws"), _target("os-c", "openstack")]
    sels = match_selectors([GAUGE, HISTOGRAM])
    config = central_prometheus_config(targets, sels, {"role": "central"}, rule_files=["/etc/prometheus/rules/*.yml"])
    assert config["global"]["external_labels"] == {"role": "central"}
    assert config["global"]["scrape_timeout"] == "45s" and config["global"]["scrape_interval"] == "60s"
    assert config["rule_files"] == ["/etc/prometheus/rules/*.yml"]
    jobs = config["scrape_configs"]
    assert [j["job_name"] for j in jobs] == ["federate-gke-a", "federate-eks-b", "federate-os-c"]
    for job, t in zip(jobs, targets, strict=True):
        assert job == federation_scrape_config(t, sels)
        assert job["static_configs"][0]["labels"] == {"cluster": t.cluster, "cloud": t.cloud}


def test_central_config_self_scrape_job() -> None:
    config = central_prometheus_config([_target()], ["x"], {}, self_address="localhost:9090")
    assert config["scrape_configs"][0] == {
        "job_name": "prometheus",
        "static_configs": [{"targets": ["localhost:9090"]}],
    }
    assert config["scrape_configs"][1]["job_name"] == "federate-gke-a"


def test_central_config_refusals() -> None:
    with pytest.raises(ValueError, match="twice"):
        central_prometheus_config([_target("gke-a"), _target("gke-a")], ["x"], {})
    with pytest.raises(ValueError, match="no cluster"):
        central_prometheus_config([], ["x"], {})
    with pytest.raises(ValueError, match="cluster"):
        central_prometheus_config([_target()], ["x"], {"cluster": "central"})
    with pytest.raises(ValueError, match="label name"):
        central_prometheus_config([_target()], ["x"], {"bad-label": "x"})


def test_yaml_round_trip_keeps_order_and_match_key() -> None:
    config = central_prometheus_config([_target()], match_selectors([HISTOGRAM]), {"role": "central"})
    text = to_yaml(config)
    assert yaml.safe_load(text) == config
    assert text.index("global:") < text.index("rule_files:") < text.index("scrape_configs:")
    assert "match[]:" in text
    rules_text = to_yaml(leaf_recording_rules())
    assert yaml.safe_load(rules_text) == leaf_recording_rules()


def test_probe_alert_rules_need_pools_once_each_and_wait_the_longest_silence_for_a_pool_never_seen() -> None:
    from fleet.model.monitoring.prometheus import ProbeExpectation, probe_alert_rules

    daily = ProbeExpectation("alpha", "gcp", "t4", stale_after_seconds=90195.5, scale_up_alert_seconds=1200)
    with pytest.raises(ValueError, match="no probed pool"):
        probe_alert_rules([])
    with pytest.raises(ValueError, match="the t4 pool of alpha is expected twice"):
        probe_alert_rules([daily, daily])
    monthly = ProbeExpectation("alpha", "gcp", "l4", stale_after_seconds=31 * 86400 + 3795, scale_up_alert_seconds=60)
    rules = probe_alert_rules([daily, monthly])
    exprs = " ".join(r["expr"] for g in rules["groups"] for r in g["rules"])
    assert "${" not in exprs and "vector(90196)" in exprs and f"vector({31 * 86400 + 3795})" in exprs  # no 1e+06
    never = next(r for g in rules["groups"] for r in g["rules"] if r.get("alert") == "ProbeNeverReported")
    assert never["for"] == f"{31 * 86400 + 3795}s"
    assert [g["name"] for g in rules["groups"]] == [
        "gpufleet-probe-expectations",
        "gpufleet-probe-state",
        "gpufleet-probes",
    ]


@pytest.mark.parametrize(("interval", "timeout"), [("60s", "45s"), ("5m", "45s"), ("30s", "22s"), ("20s", "15s")])
def test_a_federation_timeout_fits_below_any_interval(interval, timeout):
    assert federation_timeout(interval) == timeout
    job = federation_scrape_config(
        FederationTarget("c", "gcp", "leaf.example:443", "s", "/ca", "/crt", "/key"),
        ["m"],
        interval=interval,
        timeout=federation_timeout(interval),
    )  # Prometheus refuses a timeout at or above the interval: this would raise
    assert job["scrape_timeout"] == timeout
