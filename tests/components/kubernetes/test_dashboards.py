"""The dashboards on the central cluster under the mock engine (components/kubernetes/dashboards.py): one ConfigMap
per dashboard for the chart's sidecar, in the fleet's folder, Grafana told where to look, the card prices recorded;
a leaf gets none of it."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from fleet.model.loader import load_fleet
from fleet.model.monitoring import dashboards, grafana
from fleet.tools.engine.plan import StackPlan, plan_stack
from tests.conftest import FIXTURES
from tests.helpers import by_type, central_series, panels_on_missing_series, promql_metric_names, write_policy

POLICY = """
clusters:
  gcp:
    dash-central:
      zone: europe-west4-a
      central: true
      gpus: [l4]
    dash-leaf:
      zone: us-central1-a
      gpus: [t4]
workloads:
  tracker: [l4, t4]
"""
CONFIG = {"gcp:project": "proj-1"}


@pytest.fixture(scope="module")
def plans(tmp_path_factory: pytest.TempPathFactory) -> dict[str, StackPlan]:
    tmp = tmp_path_factory.mktemp("dashboards")
    policy, stacks = write_policy(tmp, POLICY, {"dash-central": CONFIG, "dash-leaf": CONFIG})
    workloads = FIXTURES / "fleet" / "workloads"
    leaf = plan_stack("dash-leaf", policy, stacks, None, workloads)
    references = {"dash-leaf": leaf.outputs_for_reference()}
    return {
        "central": plan_stack("dash-central", policy, stacks, references, workloads),
        "leaf": leaf,
        "fleet": load_fleet(policy, workloads),  # type: ignore[dict-item]
    }


def config_maps(plan: StackPlan) -> list[dict]:
    return [r.inputs for r in by_type(plan, "kubernetes:core/v1:ConfigMap") if grafana.SIDECAR_LABEL[0] in
            r.inputs["metadata"].get("labels", {})]  # fmt: skip


def test_the_central_holds_one_config_map_per_dashboard_in_the_fleet_folder(plans: dict) -> None:
    expected = dashboards.fleet_dashboards(plans["fleet"])
    maps = config_maps(plans["central"])
    assert {m["metadata"]["name"] + ".json" for m in maps} == set(expected)
    label, value = grafana.SIDECAR_LABEL
    for m in maps:
        assert m["metadata"]["labels"][label] == value and m["metadata"]["namespace"] == "monitoring"
        assert m["metadata"]["annotations"] == {grafana.FOLDER_ANNOTATION: grafana.FOLDER}
        ((file, text),) = m["data"].items()
        assert json.loads(text) == expected[file]


def fleet_plans(plans: dict) -> dict[str, StackPlan]:
    return {"dash-central": plans["central"], "dash-leaf": plans["leaf"]}


def test_every_metric_a_panel_reads_reaches_the_central(plans: dict) -> None:
    """Read in the plans: what every federation job of the central pulls, and what the central records itself."""
    boards = dashboards.fleet_dashboards(plans["fleet"])
    available = central_series(fleet_plans(plans), "dash-central")
    assert panels_on_missing_series(boards, available) == []
    read = {n for q in grafana.panel_queries(boards) for n in promql_metric_names(q.expr)}
    assert {"tracker_throughput", dashboards.CARD_PRICE, "ALERTS"} <= read


def test_a_panel_on_a_series_that_never_reaches_the_central_is_found(plans: dict) -> None:
    """Panels on a leaf's raw dcgm-exporter and kube-state-metrics series (the central federates only the records
    made of them) are errors; the fleet's own panels are untouched."""
    boards = copy.deepcopy(dashboards.fleet_dashboards(plans["fleet"]))
    overview = boards["gpufleet-overview.json"]
    wrong = [
        ("GPU utilisation", 'avg by (cluster) (DCGM_FI_DEV_GPU_UTIL{cluster=~"$cluster"})'),
        ("Pods", 'count by (cluster) (kube_pod_info{cluster=~"$cluster"}) / on (cluster) gpufleet:billed_cards'),
    ]
    for title, expr in wrong:
        overview["panels"].append({"title": title, "targets": [{"refId": "A", "expr": expr}]})
    available = central_series(fleet_plans(plans), "dash-central")
    assert panels_on_missing_series(boards, available) == [
        ("gpufleet-overview", "GPU utilisation", "DCGM_FI_DEV_GPU_UTIL"),
        ("gpufleet-overview", "Pods", "kube_pod_info"),
    ]


def test_the_metric_names_of_a_query() -> None:
    expr = 'sum by (a) (rate(x_total{a="b"}[5m])) / on (a) group_left () y > bool 0 or topk(1, z:rec[$__range:1m])'
    assert promql_metric_names(expr) == {"x_total", "y", "z:rec"}


def test_a_leaf_has_no_dashboard(plans: dict) -> None:
    assert config_maps(plans["leaf"]) == []


def test_grafana_reads_the_folder_and_keeps_the_datasource_uid(plans: dict) -> None:
    (kps,) = [r.inputs for r in by_type(plans["central"], "kubernetes:helm.sh/v3:Release") if r.inputs["name"] == "kps"]
    sidecar = kps["values"]["grafana"]["sidecar"]
    assert sidecar["dashboards"]["folderAnnotation"] == grafana.FOLDER_ANNOTATION
    assert sidecar["dashboards"]["provider"]["foldersFromFilesStructure"] is True
    assert sidecar["datasources"]["uid"] == grafana.DATASOURCE_UID
    # Grafana's $__rate_interval is 4 x the datasource's scrape interval: the federation interval of the policy
    assert sidecar["datasources"]["defaultDatasourceScrapeInterval"] == plans["fleet"].monitoring.federation_interval
    prices = kps["values"]["additionalPrometheusRulesMap"]["gpufleet-card-prices"]["groups"][0]["rules"]
    assert {(r["labels"]["cluster"], r["labels"]["gpu"]) for r in prices} == {
        ("dash-central", "l4"),
        ("dash-leaf", "t4"),
    }


def test_a_workload_added_to_the_policy_gets_its_panels(tmp_path: Path) -> None:
    policy = tmp_path / "fleet.yaml"
    policy.write_text(POLICY.replace("  tracker: [l4, t4]", "  tracker: [l4, t4]\n  fitter: [t4]"), encoding="utf-8")
    boards = dashboards.fleet_dashboards(load_fleet(policy, FIXTURES / "fleet" / "workloads"))
    assert "gpufleet-workload-fitter.json" in boards
    assert any(p["title"].startswith("fitter: ") for p in boards["gpufleet-overview.json"]["panels"])
