"""Grafana on the central cluster as the pinned chart runs it, and the pieces every dashboard of the fleet is built from
with Grafana's typed SDK (``grafana-foundation-sdk``): where the dashboards and the datasource are found, the schema
version written, a dashboard laid out panel by panel, its panels' queries read back
(fleet/model/monitoring/dashboards.py builds the fleet's dashboards from these)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from grafana_foundation_sdk.builders import bargauge, dashboard, prometheus, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.common import DataSourceRef
from grafana_foundation_sdk.models.dashboard import GridPos

#: The central Prometheus' datasource as the chart's datasource sidecar provisions it: kube-prometheus-stack 79.5.0
#: values.yaml ``grafana.sidecar.datasources.uid`` (default ``prometheus``; the fleet sets it explicitly).
DATASOURCE_UID = "prometheus"
DATASOURCE = DataSourceRef(type_val="prometheus", uid=DATASOURCE_UID)
#: The label the chart's dashboard sidecar collects ConfigMaps by (kube-prometheus-stack 79.5.0 values.yaml
#: ``grafana.sidecar.dashboards.label``/``labelValue``) and the annotation naming each one's folder (grafana 10.1.4
#: values.yaml ``sidecar.dashboards.folderAnnotation``, with ``provider.foldersFromFilesStructure``).
SIDECAR_LABEL = ("grafana_dashboard", "1")
FOLDER_ANNOTATION = "grafana_folder"
FOLDER = "GPU fleet"
#: The Grafana the pinned chart runs: kube-prometheus-stack 79.5.0 depends on the grafana chart 10.1.4 (Chart.yaml
#: dependencies), whose appVersion is 12.2.1 (charts/grafana/Chart.yaml in the archive; tests/model/test_dashboards.py
#: reads both).
GRAFANA_VERSION = "12.2.1"
#: Dashboard JSON schema version: what grafana-foundation-sdk writes (its Dashboard model's default). Grafana reads a
#: dashboard of any version from its MIN_VERSION up to its LATEST_VERSION and migrates it to the latest on load
#: (grafana apps/dashboard/pkg/migration/schemaversion/migrations.go; frontend DashboardMigrator.ts). 41 is the V41
#: migration, in Grafana since 12.0; V42 (grafana/grafana#110517, hideFrom.tooltip set where hideFrom.viz is, merged
#: 2025-09) is the last of the v1 dashboard API. So Grafana 12.2.1 reads 41 as its latest or migrates it by V42,
#: which changes nothing here (no panel hides a field). A newer chart must be checked again: the test pins both.
SCHEMA_VERSION = 41
#: What each variable is called above the panels (its name is the series' label).
VARIABLE_LABELS = {
    "cluster": "Cluster",
    "cloud": "Cloud",
    "gpu": "Card",
    "workload": "Workload",
    "billing_account": "Billing account",
}

#: A headline's unit (workload.yaml ``headline.unit``) Grafana knows by an id of its own; any other is shown after
#: the number as written (a custom unit ``suffix:<text>``: grafana-foundation-sdk models/dashboard.py FieldConfig.unit,
#: from Grafana's dashboard schema), and "1" (a plain count) as none.
GRAFANA_UNITS = {"s": "s", "bytes": "bytes", "1": "none"}


def grafana_unit(unit: str) -> str:
    """The Grafana unit that shows a headline's ``unit`` beside its numbers: ``s`` -> seconds, ``items/s`` -> the
    number followed by " items/s"."""
    return GRAFANA_UNITS.get(unit, f"suffix: {unit}")


#: A metric's base unit by the suffix Prometheus' naming conventions give its name (prometheus.io/docs/practices/naming:
#: "should have a suffix describing the unit, in plural form", base units seconds and bytes), as Grafana's unit of
#: the value a panel shows: the metric itself (a gauge, a histogram's quantile) or its rate per second (a counter,
#: whose name ends in _total after the unit).
VALUE_UNITS = {"_seconds": "s", "_bytes": "bytes"}
RATE_UNITS = {"_bytes_total": "Bps"}


def metric_unit(name: str, rate: bool) -> str:
    """The Grafana unit of a panel showing metric ``name`` (its rate per second when ``rate``): seconds of a
    ``_seconds`` gauge, bytes per second of a ``_bytes_total`` counter, a bare number for anything else (a
    ``_seconds_total`` counter's rate is seconds per second)."""
    units = RATE_UNITS if rate else VALUE_UNITS
    return next((unit for suffix, unit in units.items() if name.endswith(suffix)), "none")


@dataclass(frozen=True)
class PanelQuery:
    """One query of one panel: the dashboard's uid, the panel's title, the query's refId and PromQL (with Grafana's
    variables in it) and whether Grafana runs it as an instant query."""

    dashboard: str
    panel: str
    ref: str
    expr: str
    instant: bool


def target(expr: str, legend: str, ref: str = "A", instant: bool = False) -> prometheus.Dataquery:
    """A Prometheus query of a panel: its PromQL, legend and refId, run over the time range or at its end."""
    query = prometheus.Dataquery().expr(expr).legend_format(legend).ref_id(ref)
    return query.instant() if instant else query.range()


class Board:
    """A dashboard under construction: panels laid out left to right, rows full width, ids in order."""

    def __init__(self, uid: str, title: str, description: str, variables: Mapping[str, Sequence[str]]):
        self.uid, self.next_id, self.x, self.y = uid, 1, 0, 0
        self.builder = (
            dashboard.Dashboard(title)
            .uid(uid)
            .description(description)
            .tags(["gpu-fleet"])
            .editable()
            .time("now-7d", "now")
            .refresh("5m")
            .timezone("utc")
        )
        for name, values in variables.items():
            self.builder.with_variable(
                dashboard.CustomVariable(name)
                .label(VARIABLE_LABELS[name])
                .values(",".join(values) if values else "none")
                .multi(True)
                .include_all(True)
                .all_value(".*")
            )

    def row(self, title: str) -> None:
        """A full-width row below what is laid out."""
        if self.x:
            self.x, self.y = 0, self.y + 8
        self.builder.with_row(dashboard.Row(title).id(self.next_id).grid_pos(GridPos(h=1, w=24, x=0, y=self.y)))
        self.next_id, self.y = self.next_id + 1, self.y + 1

    def add(self, panel: Any, width: int = 12, height: int = 8) -> None:
        """A panel to the right of the last, on the next line when it does not fit, on the central datasource."""
        if self.x + width > 24:
            self.x, self.y = 0, self.y + height
        panel.id(self.next_id).datasource(DATASOURCE).grid_pos(GridPos(h=height, w=width, x=self.x, y=self.y))
        self.builder.with_panel(panel)
        self.next_id, self.x = self.next_id + 1, self.x + width

    def json(self) -> dict[str, Any]:
        """The dashboard as Grafana's JSON."""
        return as_json(self.builder.build())


def as_json(board: Any) -> dict[str, Any]:
    """A dashboard of the SDK's types as the JSON Grafana reads (plain dicts)."""
    return json.loads(JSONEncoder(sort_keys=True).encode(board))


def bars(title: str, description: str, unit: str, targets: Iterable[prometheus.Dataquery]) -> bargauge.Panel:
    """A bar gauge from zero in ``unit``."""
    panel = bargauge.Panel().title(title).description(description).unit(unit).min(0)
    for t in targets:
        panel.with_target(t)
    return panel


def series(title: str, description: str, unit: str, targets: Iterable[prometheus.Dataquery]) -> timeseries.Panel:
    """A time series from zero in ``unit``."""
    panel = timeseries.Panel().title(title).description(description).unit(unit).min(0)
    for t in targets:
        panel.with_target(t)
    return panel


def panel_queries(dashboards: Mapping[str, Mapping[str, Any]]) -> list[PanelQuery]:
    """Every query of every panel of ``dashboards`` (their JSON by file name, as fleet/model/monitoring/dashboards.py
    ``fleet_dashboards`` returns them)."""
    return [
        PanelQuery(board["uid"], panel["title"], query["refId"], query["expr"], bool(query.get("instant")))
        for board in dashboards.values()
        for panel in board.get("panels", [])
        for query in panel.get("targets", [])
    ]
