"""The fleet's Grafana dashboards on the central cluster: one ConfigMap per dashboard for the chart's sidecar.

The dashboards are built from the model (fleet/model/monitoring/dashboards.py); this module hands them to Grafana the
way the pinned chart collects them: ConfigMaps labelled ``grafana_dashboard: "1"`` (kube-prometheus-stack 79.5.0
values.yaml ``grafana.sidecar.dashboards.label``/``labelValue``) in the monitoring namespace, each annotated with its
folder (grafana 10.1.4 values.yaml ``sidecar.dashboards.folderAnnotation`` and ``provider.foldersFromFilesStructure``).
"""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.kubernetes.deployment import FLEET_PART_OF
from fleet.model.billing.prices import card_prices, load_prices
from fleet.model.core.fleet import Fleet
from fleet.model.monitoring import dashboards, grafana


def grafana_values(fleet: Fleet) -> dict[str, Any]:
    """The central Grafana's values for the dashboards: the sidecar reads the fleet's folder annotation and puts each
    dashboard in its folder, and the Prometheus datasource keeps the uid every panel names.

    The datasource's scrape interval is the federation interval: the leaves' series reach the central once a
    ``federation_interval``, and Grafana's ``$__rate_interval`` is max($__interval + scrape interval, 4 x scrape
    interval) of the datasource's (grafana/grafana#77234); with the chart's default, the central's own 30 s scrape, a
    rate over a short time range would hold one federated sample and show nothing. kube-prometheus-stack 79.5.0
    templates/grafana/configmaps-datasources.yaml writes ``jsonData.timeInterval`` from
    ``grafana.sidecar.datasources.defaultDatasourceScrapeInterval``, else ``prometheusSpec.scrapeInterval``."""
    return {
        "sidecar": {
            "dashboards": {
                "folderAnnotation": grafana.FOLDER_ANNOTATION,
                "provider": {"foldersFromFilesStructure": True},
            },
            "datasources": {
                "uid": grafana.DATASOURCE_UID,
                "defaultDatasourceScrapeInterval": fleet.monitoring.federation_interval,
            },
        }
    }


def price_rules(fleet: Fleet) -> dict[str, Any] | None:
    """The central's card-price records (fleet/model/monitoring/dashboards.py ``price_rules``), None when no card is
    priced."""
    prices = card_prices(fleet, load_prices())
    return dashboards.price_rules(prices) if prices else None


def dashboard_config_maps(
    prefix: str, fleet: Fleet, namespace: pulumi.Input[str], opts: pulumi.ResourceOptions
) -> list[k8s.core.v1.ConfigMap]:
    """One ConfigMap per dashboard of the fleet, for the central Grafana's sidecar to load."""
    label, value = grafana.SIDECAR_LABEL
    return [
        k8s.core.v1.ConfigMap(
            f"{prefix}-dashboard-{file.removesuffix('.json')}",
            metadata={
                "name": file.removesuffix(".json"),
                "namespace": namespace,
                "labels": {label: value, "app.kubernetes.io/part-of": FLEET_PART_OF},
                "annotations": {grafana.FOLDER_ANNOTATION: grafana.FOLDER},
            },
            data={file: json.dumps(board, sort_keys=True, indent=1)},
            opts=opts,
        )
        for file, board in dashboards.fleet_dashboards(fleet).items()
    ]
