"""The report's PromQL and window handling (fleet/report/queries.py): pure functions, plus promtool on the output."""

from __future__ import annotations

import datetime
import itertools
import math
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from fleet.model.core.workloads import WORKLOADS_DIR, WorkloadSpec, load_workloads
from fleet.model.monitoring.prometheus import GPU_RECORDING_RULES
from fleet.report.prometheus_api import MAX_POINTS_PER_SERIES, PrometheusClient, check_base_url
from fleet.report.queries import (
    SAMPLES_CHUNK,
    Window,
    card_key,
    choose_step,
    escape_label_value,
    gpu_queries,
    observed_seconds,
    parse_duration,
    parse_time,
    pod_key,
    pod_spans,
    runs_counter,
    selector,
    time_chunks,
    window_from,
    workload_queries,
)
from tests.conftest import require_tool

NOW = 1_800_000_000.0


def spec(metrics: list[dict], headline: dict, name: str = "demo") -> WorkloadSpec:
    """A minimal valid workload spec with the given metrics and headline."""
    return WorkloadSpec.model_validate(
        {
            "name": name,
            "description": "a demo workload",
            "image": "example.org/demo:1.0",
            "command": ["run"],
            "resources": {"cpu_request": "1", "memory_request": "1Gi", "cpu_limit": "2", "memory_limit": "2Gi"},
            "timeout_seconds": 600,
            "metrics": metrics,
            "headline": headline,
        }
    )


# --- window ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "seconds"), [("90m", 5400), ("12h", 43200), ("7d", 604800), ("1h30m", 5400)])
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "soon", "7 days", "-1h", "1.5h"])
def test_bad_durations_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


def test_times_in_rfc3339_dates_and_unix_seconds() -> None:
    assert parse_time("2026-11-01T08:00:00Z") == datetime.datetime(2026, 11, 1, 8, tzinfo=datetime.UTC).timestamp()
    assert parse_time("2026-11-01T09:00:00+01:00") == parse_time("2026-11-01T08:00:00Z")
    assert parse_time("2026-11-01") == parse_time("2026-11-01T00:00:00Z")  # a bare date is UTC midnight
    assert parse_time("1800000000") == 1_800_000_000.0
    with pytest.raises(ValueError, match="is not a time"):
        parse_time("yesterday")


def test_window_from_since_defaults_to_seven_days_ending_now() -> None:
    assert window_from(NOW) == Window(NOW - 7 * 86400, NOW)
    assert window_from(NOW, since="2h") == Window(NOW - 7200, NOW)


def test_window_from_start_and_end() -> None:
    assert window_from(NOW, start="1799990000", end="1799999000") == Window(1_799_990_000, 1_799_999_000)
    assert window_from(NOW, start="1799990000") == Window(1_799_990_000, NOW)  # end defaults to now


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"since": "1h", "start": "2026-11-01"}, "either --since or --start/--end"),
        ({"end": "2026-11-01"}, "--end needs --start"),
        ({"start": "2026-11-02", "end": "2026-11-01"}, "the window is empty"),
        ({"start": "2026-11-01", "end": "2026-11-01"}, "the window is empty"),
    ],
)
def test_window_from_refuses_contradictions(kwargs: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        window_from(NOW, **kwargs)


def test_window_range_is_whole_seconds_rounded_up() -> None:
    assert Window(0, 3600).range == "3600s"
    assert Window(0, 3600.2).range == "3601s"
    with pytest.raises(ValueError):
        Window(10, 10)


# --- step -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("seconds", "step"), [(300, 1), (3600, 4), (7 * 86400, 605), (180 * 86400, 15552)])
def test_step_aims_at_a_thousand_points(seconds: float, step: float) -> None:
    assert choose_step(seconds) == step


@pytest.mark.parametrize("seconds", [1, 59, 999, 1001, 86399, 86400 * 365, 11_000, 10_999.5])
def test_step_never_exceeds_the_point_limit(seconds: float) -> None:
    for target in (1, 1000, MAX_POINTS_PER_SERIES):
        step = choose_step(seconds, target_points=target)
        assert step >= 1 and math.floor(seconds / step) + 1 <= MAX_POINTS_PER_SERIES


def test_a_sub_second_minimum_step_still_respects_the_limit() -> None:
    step = choose_step(20_000, target_points=MAX_POINTS_PER_SERIES, min_step=0.1)
    assert math.floor(20_000 / step) + 1 <= MAX_POINTS_PER_SERIES


def test_the_client_refuses_a_range_query_over_the_point_limit() -> None:
    client = PrometheusClient("http://127.0.0.1:9")  # never contacted: the check comes first
    with pytest.raises(ValueError, match="11000"):
        client.query_range("up", 0, 11_000, 1)
    assert client.requests == 0


@pytest.mark.parametrize("url", ["prometheus:9090", "ftp://host", "http://", "http://host/?q=1"])
def test_the_client_wants_an_http_base_url(url: str) -> None:
    with pytest.raises(ValueError):
        check_base_url(url)
    assert check_base_url("https://prom.example.org/") == "https://prom.example.org"


# --- selectors and the run counter ---------------------------------------------------------------------


def test_selector_sorts_and_escapes() -> None:
    assert selector("m", {}) == "m"
    assert selector("m", {"workload": "w", "stage": 'a"b\\c'}) == 'm{stage="a\\"b\\\\c",workload="w"}'
    assert selector("m", {"workload": "w"}, 'pod!=""') == 'm{workload="w",pod!=""}'
    assert escape_label_value("x\ny") == "x\\ny"
    with pytest.raises(ValueError):
        selector("m", {"bad-name": "x"})


def test_the_run_counter_of_each_shipped_workload() -> None:
    shipped = {
        "3dgan": "gan3d_epochs_total",  # its headline is per epoch, not per batch
        "madgraph4gpu": "madgraph_runs_total",
        "pyhf": "pyhf_fits_total",
        "simpletrack": "simpletrack_runs_total",
    }
    present = {name: runs_counter(wl.spec) for name, wl in load_workloads().items() if name in shipped}
    assert present == {name: shipped[name] for name in present}


def test_run_counter_ties_go_to_the_first_declared_and_no_counter_gives_none() -> None:
    gauge = {"name": "demo_rate", "type": "gauge", "help": "h"}
    first = {"name": "demo_a_total", "type": "counter", "help": "h"}
    second = {"name": "demo_b_total", "type": "counter", "help": "h"}
    assert runs_counter(spec([gauge, first, second], {"metric": "demo_rate", "unit": "x"})) == "demo_a_total"
    assert runs_counter(spec([gauge], {"metric": "demo_rate", "unit": "x"})) is None


# --- the queries ----------------------------------------------------------------------------------------


@pytest.mark.skipif(
    not (WORKLOADS_DIR / "madgraph4gpu").is_dir(), reason="the shipped madgraph4gpu workload was removed"
)
def test_madgraph_queries_select_the_headline_stage_over_the_window() -> None:
    q = workload_queries(load_workloads()["madgraph4gpu"].spec, Window(NOW - 3600, NOW))
    head = 'madgraph_throughput_events_per_second{stage="MatrixElems",workload="madgraph4gpu"}'
    assert q.headline_selector == head
    assert q.result == f"avg by (cluster, cloud, gpu) (last_over_time({head}[3600s]))"
    assert q.best == f"max by (cluster, cloud, gpu) (max_over_time({head}[3600s]))"
    assert q.runs == 'sum by (cluster, cloud, gpu) (max_over_time(madgraph_runs_total{workload="madgraph4gpu"}[3600s]))'
    assert q.series == f"max by (cluster, cloud, gpu) ({head})"
    assert q.samples == 'madgraph_runs_total{workload="madgraph4gpu"}[3600s]'


@pytest.mark.skipif(not (WORKLOADS_DIR / "pyhf").is_dir(), reason="the shipped pyhf workload was removed")
def test_lower_is_better_takes_the_minimum_as_best() -> None:
    q = workload_queries(load_workloads()["pyhf"].spec, Window(NOW - 60, NOW))
    assert q.best == 'min by (cluster, cloud, gpu) (min_over_time(pyhf_fit_duration_seconds{workload="pyhf"}[60s]))'


@pytest.mark.skipif(not (WORKLOADS_DIR / "simpletrack").is_dir(), reason="the shipped simpletrack workload was removed")
def test_gpu_queries_join_the_benchmark_pods_only() -> None:
    q = workload_queries(load_workloads()["simpletrack"].spec, Window(NOW - 600, NOW))
    pods = (
        "on (cluster, namespace, pod) group_left (gpu, workload) (group by (cluster, namespace, pod, gpu, workload) "
        '(last_over_time(simpletrack_throughput_particle_turns_per_second{workload="simpletrack",pod!=""}[600s])))'
    )
    assert q.gpu_utilization == (
        f"avg by (workload, cluster, cloud, gpu) (avg_over_time(gpufleet:gpu_utilization_percent:avg[600s]) * {pods})"
    )
    assert q.gpu_energy == (
        f"sum by (workload, cluster, cloud, gpu) (increase(gpufleet:gpu_energy_joules:sum[600s]) * {pods})"
    )
    for name in ("gpufleet:gpu_utilization_percent:avg", "gpufleet:gpu_energy_joules:sum"):
        assert name in GPU_RECORDING_RULES  # the names the leaves really record


def test_one_gpu_query_serves_every_workload_of_the_report() -> None:
    """The GPU records carry no workload: one query joins them with the pods of all the report's workloads (each
    told by its own headline series), where one query per workload read every GPU pod of the fleet again."""
    specs = [
        spec([{"name": f"{name}_rate", "type": "gauge", "help": "h"}], {"metric": f"{name}_rate", "unit": "x"}, name)
        for name in ("alpha", "beta")
    ]
    gpu = gpu_queries(specs, Window(0, 10))
    for query in (gpu.utilization, gpu.energy):
        assert query.count("gpufleet:gpu_") == 1  # the GPU records read once
        assert 'alpha_rate{workload="alpha",pod!=""}' in query and 'beta_rate{workload="beta",pod!=""}' in query
        assert query.startswith(("avg by (workload, cluster, cloud, gpu)", "sum by (workload, cluster, cloud, gpu)"))
    assert workload_queries(specs[0], Window(0, 10), gpu).gpu_energy == gpu.energy
    assert "gpu_utilization" not in workload_queries(specs[0], Window(0, 10)).instant()  # sent once, not per workload
    with pytest.raises(ValueError, match="at least one workload"):
        gpu_queries([], Window(0, 10))


def test_a_counter_narrowed_by_the_headline_match_when_it_has_the_label() -> None:
    metrics = [
        {"name": "demo_rate", "type": "gauge", "help": "h", "labels": ["stage"]},
        {"name": "demo_runs_total", "type": "counter", "help": "h", "labels": ["stage"]},
    ]
    s = spec(metrics, {"metric": "demo_rate", "unit": "x", "match": {"stage": "fast"}})
    q = workload_queries(s, Window(0, 10))
    assert q.runs == 'sum by (cluster, cloud, gpu) (max_over_time(demo_runs_total{stage="fast",workload="demo"}[10s]))'


def test_a_workload_without_counter_has_no_runs_query() -> None:
    s = spec([{"name": "demo_rate", "type": "gauge", "help": "h"}], {"metric": "demo_rate", "unit": "x"})
    q = workload_queries(s, Window(0, 10))
    assert q.runs is None and "runs" not in q.instant()
    assert q.samples == 'demo_rate{workload="demo"}[10s]'


@pytest.mark.e2e
def test_promtool_accepts_every_query(tmp_path: Path) -> None:
    promtool = require_tool("promtool")
    rules = []
    for name, wl in load_workloads().items():
        q = workload_queries(wl.spec, Window(NOW - 7 * 86400, NOW))
        for kind, expr in dict([*q.listing(), *q.listing(spread=True)]).items():
            safe = re.sub(r"[^a-zA-Z0-9_]", "_", name.replace("3", "x"))
            rules.append({"record": f"check:{safe}:{kind.replace(' ', '_')}", "expr": expr})
    (tmp_path / "rules.yml").write_text(yaml.safe_dump({"groups": [{"name": "report", "rules": rules}]}))
    run = subprocess.run([promtool, "check", "rules", str(tmp_path / "rules.yml")], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"SUCCESS: {len(rules)} rules found" in run.stdout


# --- reading results ------------------------------------------------------------------------------------


def test_pod_spans_take_each_pods_first_and_last_sample_over_its_series() -> None:
    pod = {"cluster": "c", "cloud": "gcp", "gpu": "t4", "namespace": "benchmarks", "pod": "p1"}
    series = [
        {"metric": {**pod, "stage": "a"}, "values": [[120.5, "1"], [180.5, "2"]]},
        {"metric": {**pod, "stage": "b"}, "values": [[60.5, "1"], [150.5, "2"]]},
        {"metric": {**pod, "pod": "p2"}, "values": [[900, "1"]]},
        {"metric": {**pod, "pod": "p3"}, "values": []},
    ]
    first, last = pod_spans(series)
    key = pod_key(pod)
    assert (first[key], last[key]) == (60.5, 180.5)
    assert first[pod_key({**pod, "pod": "p2"})] == last[pod_key({**pod, "pod": "p2"})] == 900
    assert pod_key({**pod, "pod": "p3"}) not in first


def test_observed_seconds_sums_each_cards_pods() -> None:
    a1, a2 = ("c", "aws", "t4", "ns", "run-1"), ("c", "aws", "t4", "ns", "run-2")
    b = ("c", "aws", "l4", "ns", "run-3")
    single = ("c", "gcp", "l4", "ns", "run-4")  # seen in one sample: no duration
    first = {a1: 100.0, a2: 5000.0, b: 10.0, single: 70.0}
    last = {a1: 400.0, a2: 5060.0, b: 40.0, single: 70.0}
    assert observed_seconds(first, last) == {("c", "aws", "t4"): 360.0, ("c", "aws", "l4"): 30.0}
    assert pod_key({"cluster": "c", "cloud": "aws", "gpu": "t4", "namespace": "ns", "pod": "run-1"}) == a1


def test_card_key_reads_cluster_cloud_gpu() -> None:
    assert card_key({"cluster": "c", "cloud": "aws", "gpu": "t4", "pod": "p"}) == ("c", "aws", "t4")
    assert card_key({}) == ("", "", "")


def test_raw_samples_are_read_fourteen_days_at_a_time() -> None:
    """Over 180 days the run counter's raw samples are 13 requests of at most SAMPLES_CHUNK, each at its chunk's end,
    tiling the window; the report lists each as sent. A week is one request, as before."""
    s = spec([{"name": "demo_runs_total", "type": "counter", "help": "h"}], {"metric": "demo_runs_total", "unit": "x"})
    week = workload_queries(s, Window(NOW - 7 * 86400, NOW))
    assert week.sample_parts == (week.samples,)
    window = Window(NOW - 180 * 86400, NOW)
    q = workload_queries(s, window)
    parts = q.sample_parts
    assert len(parts) == 13 == len(time_chunks(window, SAMPLES_CHUNK))
    spans = []
    for part in parts:
        match = re.fullmatch(r'demo_runs_total\{workload="demo"\}\[(\d+)ms\] @ ([\d.]+)', part)
        assert match, part
        length, end = int(match[1]) / 1000, float(match[2])
        assert length <= SAMPLES_CHUNK
        spans.append((end - length, end))
    assert spans[0][0] == window.start and spans[-1][1] == window.end
    assert all(a[1] == b[0] for a, b in itertools.pairwise(spans))  # consecutive, no gap, no overlap
    assert [query for name, query in q.listing() if name == "samples"] == list(parts)
