"""The Grafana dashboards built from the model (fleet/model/monitoring/dashboards.py): what each holds for a fleet of
its own, their form, and the sidecar facts they rely on in the pinned charts. Their queries are evaluated against a real
Prometheus in tests/e2e/test_dashboards.py."""

from __future__ import annotations

import io
import re
import tarfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from grafana_foundation_sdk.models.dashboard import Dashboard

from fleet.model.billing.prices import card_prices, load_prices
from fleet.model.core.fleet import Fleet
from fleet.model.loader import load_fleet
from fleet.model.monitoring import dashboards, grafana
from fleet.tools.checks.charts import CHART_CACHE_ENV
from tests.conftest import FIXTURES, shared_data

POLICY = """\
clusters:
  gcp:
    lab-gke:
      zone: europe-west4-a
      central: true
      billing_account: lab
      gpus: {l4: {}}
  aws:
    lab-eks:
      region: eu-west-1
      gpus: {a10g: {}}
workloads:
  tracker: [l4, a10g]
  uploader: [a10g]
"""


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Fleet:
    policy = tmp_path_factory.mktemp("dash") / "fleet.yaml"
    policy.write_text(POLICY, encoding="utf-8")
    return load_fleet(policy, FIXTURES / "fleet" / "workloads")


@pytest.fixture(scope="module")
def boards(fleet: Fleet) -> dict[str, dict[str, Any]]:
    return dashboards.fleet_dashboards(fleet)


def test_each_workload_of_the_policy_gets_a_dashboard_of_its_metrics(fleet: Fleet, boards: dict[str, Any]) -> None:
    assert set(boards) == {
        "gpufleet-overview.json",
        "gpufleet-accounting.json",
        "gpufleet-workload-tracker.json",
        "gpufleet-workload-uploader.json",
    }  # only the workloads the policy runs; no sweep in this fleet: no scaling dashboard
    for name in ("tracker", "uploader"):
        workload = fleet.workloads[name]
        board = boards[f"gpufleet-workload-{name}.json"]
        titles = [p["title"] for p in board["panels"] if p["type"] != "row"]
        assert len(titles) == len(workload.spec.metrics) + 1  # one per metric, and the energy
        overview = [p["title"] for p in boards["gpufleet-overview.json"]["panels"]]
        assert f"{name}: result per card ({workload.spec.headline.unit})" in overview


def test_the_variables_offer_the_policy_s_clusters_clouds_cards_and_workloads(boards: dict[str, Any]) -> None:
    variables = {v["name"]: v for v in boards["gpufleet-overview.json"]["templating"]["list"]}
    assert set(variables) == {"cluster", "cloud", "gpu", "workload"}
    assert variables["cluster"]["query"] == "lab-eks,lab-gke"
    assert variables["cloud"]["query"] == "aws,gcp"
    assert variables["gpu"]["query"] == "a10g,l4"
    assert variables["workload"]["query"] == "tracker,uploader"
    labels = {"cluster": "Cluster", "cloud": "Cloud", "gpu": "Card", "workload": "Workload"}
    assert {n: v["label"] for n, v in variables.items()} == labels  # words a person reads, not label names
    for v in variables.values():
        assert v["includeAll"] and v["multi"] and v["allValue"] == ".*"
    accounting = {v["name"]: v for v in boards["gpufleet-accounting.json"]["templating"]["list"]}
    assert accounting["billing_account"]["query"] == "default,lab"  # lab-eks bills the default account
    assert accounting["billing_account"]["label"] == "Billing account"


def test_every_panel_queries_the_central_prometheus_and_starts_at_zero(boards: dict[str, Any]) -> None:
    for file, board in boards.items():
        assert board["uid"] + ".json" == file and board["schemaVersion"] == grafana.SCHEMA_VERSION
        panels = board["panels"]
        assert len({p["id"] for p in panels}) == len(panels), file
        for panel in panels:
            assert 0 <= panel["gridPos"]["x"] and panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24, panel["title"]
            if panel["type"] == "row":
                continue
            assert panel["datasource"] == {"type": "prometheus", "uid": grafana.DATASOURCE_UID}
            assert panel["targets"] and panel.get("description"), panel["title"]
            if panel["type"] in ("timeseries", "bargauge"):
                assert panel["fieldConfig"]["defaults"]["min"] == 0, panel["title"]
                assert panel["fieldConfig"]["defaults"]["unit"], panel["title"]
            for target in panel["targets"]:
                for variable in ("$cluster", "$cloud", "$gpu"):
                    if "ALERTS" not in target["expr"]:
                        assert variable in target["expr"], (panel["title"], target["expr"])


def test_a_result_is_shown_in_its_workloads_unit(fleet: Fleet, boards: dict[str, Any]) -> None:
    """Seconds as seconds, any other unit written after the number (tracker: items/s), a count as a bare number."""
    assert [grafana.grafana_unit(u) for u in ("s", "items/s", "1", "bytes")] == [
        "s",
        "suffix: items/s",
        "none",
        "bytes",
    ]
    panels = {p["title"]: p for p in boards["gpufleet-overview.json"]["panels"]}
    for name in ("tracker", "uploader"):
        unit = fleet.workloads[name].spec.headline.unit
        for title in (f"{name}: result per card ({unit})", f"{name}: best card"):
            assert panels[title]["fieldConfig"]["defaults"]["unit"] == grafana.grafana_unit(unit), title


def test_a_metric_panel_is_in_the_unit_its_name_says(boards: dict[str, Any]) -> None:
    """Prometheus' naming conventions put the base unit in the name: a _seconds gauge in seconds, a _bytes_total
    counter's rate in bytes per second, anything else a bare number."""
    assert grafana.metric_unit("fitter_duration_seconds", rate=False) == "s"
    assert grafana.metric_unit("uploader_bytes_total", rate=True) == "Bps"
    assert grafana.metric_unit("gan3d_jax_epoch_seconds_total", rate=True) == "none"
    assert grafana.metric_unit("tracker_throughput", rate=False) == "none"
    panels = {p["title"]: p for p in boards["gpufleet-workload-uploader.json"]["panels"]}
    assert panels["uploader_bytes_total, per second"]["fieldConfig"]["defaults"]["unit"] == "Bps"


def test_every_variable_a_query_names_is_one_of_its_dashboard(boards: dict[str, Any]) -> None:
    """Grafana leaves an unknown ``$name`` in the query as it is, which as a regular expression matches nothing."""
    for file, board in boards.items():
        defined = {v["name"] for v in board["templating"]["list"]}
        for panel in board["panels"]:
            for target in panel.get("targets", []):
                named = set(re.findall(r"\$(\w+)", target["expr"])) - {"__range", "__rate_interval"}
                assert named <= defined, (file, panel["title"], named - defined)
    overview = {v["name"] for v in boards["gpufleet-overview.json"]["templating"]["list"]}
    assert "workload" in overview and all(
        "workload" not in {v["name"] for v in b["templating"]["list"]} for f, b in boards.items() if "workload-" in f
    )


def test_the_dashboards_read_back_through_grafana_s_own_types(boards: dict[str, Any]) -> None:
    """The SDK's types are generated from Grafana's dashboard schema: a dashboard that reads back unchanged has no
    field the schema lacks."""
    for board in boards.values():
        again = grafana.as_json(Dashboard.from_json(board))
        assert again == board


def test_a_sweep_gets_its_scaling_panels_each_card_measured_from_its_own_smallest_count(tmp_path: Path) -> None:
    """L4s at 2, 4 and 8 cards; the TPU v5e only at 4 and 8 (whole hosts of 1, 4 or 8 chips): the TPU's speed-up and
    efficiency are measured from its 4 chips, not from a count it never runs (evaluated in tests/e2e)."""
    policy = tmp_path / "fleet.yaml"
    policy.write_text(
        "clusters:\n  gcp:\n    sw-gke: {zone: us-central1-a, central: true, gpus: [l4, tpu-v5e]}\n"
        "workloads:\n  sweeper: {gpus: [l4, tpu-v5e], scale: [2, 4, 8]}\n",
        encoding="utf-8",
    )
    fleet = load_fleet(policy, FIXTURES / "fleet" / "workloads")
    assert dashboards.card_points(fleet, "sweeper") == {"l4": (2, 4, 8), "tpu-v5e": (4, 8)}
    board = dashboards.fleet_dashboards(fleet)["gpufleet-scaling.json"]
    efficiency = next(p for p in board["panels"] if p["title"] == "sweeper: parallel efficiency")
    legends = [t["legendFormat"] for t in efficiency["targets"]]
    assert legends == [f"{{{{gpu}}}} on {{{{cluster}}}} x{n}" for n in (2, 4, 8)]
    x2, x4, x8 = (t["expr"] for t in efficiency["targets"])
    assert 'accelerators="2",gpu=~"l4"' in x2 and "tpu-v5e" not in x2  # no TPU job of 2 chips to compare
    for expr, (l4_ratio, tpu_ratio) in ((x4, ("2", "1")), (x8, ("4", "2"))):
        l4, tpu = expr.split(" or ")
        assert 'accelerators="2",gpu=~"l4"' in l4 and l4.endswith(f" / {l4_ratio})")
        assert 'accelerators="4",gpu=~"tpu-v5e"' in tpu and tpu.endswith(f" / {tpu_ratio})")


def test_card_prices_are_the_machine_price_over_its_cards(fleet: Fleet) -> None:
    table = load_prices()
    prices = card_prices(fleet, table)
    for (cluster, cloud, gpu), price in prices.items():
        pool = fleet.clusters[cluster].pool(gpu)
        entry = table.lookup(cloud, pool.machine_type, pool.offer.accelerator_type if pool.offer else "")
        assert entry is not None and price == entry.per_hour(pool.spot) / pool.accelerators_per_node
    rules = dashboards.price_rules(prices)["groups"][0]["rules"]
    assert {(r["labels"]["cluster"], r["labels"]["gpu"]) for r in rules} == {(c, g) for c, _, g in prices}
    assert all(r["record"] == dashboards.CARD_PRICE and r["expr"].startswith("vector(") for r in rules)
    with pytest.raises(ValueError, match="no priced card"):
        dashboards.price_rules({})


def _chart_values(archive: Path, member: str) -> dict[str, Any]:
    with tarfile.open(archive) as tar:
        data = tar.extractfile(member)
        assert data is not None
        return yaml.safe_load(io.TextIOWrapper(data, encoding="utf-8"))


def test_the_schema_version_is_the_sdk_s_for_the_grafana_the_chart_pins(boards: dict[str, Any]) -> None:
    """The pinned chart's Grafana is the one whose schema range was checked (grafana.SCHEMA_VERSION's comment): a
    chart bump fails here until the schema version is checked against the new Grafana."""
    charts = shared_data(CHART_CACHE_ENV, "charts", "the chart cache (the pinned charts' archives)")
    archive = charts / "kube-prometheus-stack-79.5.0.tgz"
    stack = _chart_values(archive, "kube-prometheus-stack/Chart.yaml")
    assert {d["name"]: d["version"] for d in stack["dependencies"]}["grafana"] == "10.1.4"
    chart = _chart_values(archive, "kube-prometheus-stack/charts/grafana/Chart.yaml")
    assert (chart["version"], chart["appVersion"]) == ("10.1.4", grafana.GRAFANA_VERSION)
    assert Dashboard().schema_version == grafana.SCHEMA_VERSION
    assert {b["schemaVersion"] for b in boards.values()} == {grafana.SCHEMA_VERSION}


def test_the_sidecar_facts_are_the_pinned_chart_s() -> None:
    """The label, datasource uid and folder settings the dashboards rely on, read in the pinned charts."""
    charts = shared_data(CHART_CACHE_ENV, "charts", "the chart cache (the pinned charts' archives)")
    archive = charts / "kube-prometheus-stack-79.5.0.tgz"
    stack = _chart_values(archive, "kube-prometheus-stack/values.yaml")["grafana"]["sidecar"]
    assert (stack["dashboards"]["label"], stack["dashboards"]["labelValue"]) == grafana.SIDECAR_LABEL
    assert stack["datasources"]["uid"] == grafana.DATASOURCE_UID
    sidecar = _chart_values(archive, "kube-prometheus-stack/charts/grafana/values.yaml")["sidecar"]["dashboards"]
    assert "folderAnnotation" in sidecar and "foldersFromFilesStructure" in sidecar["provider"]
