"""Kueue's metrics on the queues' manager, which is the central cluster: the central Prometheus scrapes them (a
ServiceMonitor of the chart's metrics Service, the chart's reader ClusterRole bound to the Prometheus' account, and
an ingress rule for the scraper); fleet/report/queues.py reads them (docs/queues.md)."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.kubernetes.deployment import FLEET_PART_OF
from components.kubernetes.network_policy import allow_ingress, ports
from fleet.model.monitoring import prometheus

FLEET_LABELS = {"app.kubernetes.io/part-of": FLEET_PART_OF}
# Kueue's metrics on the manager, as the kueue 0.19.2 chart serves them (release ``kueue``, so its fullname is
# ``kueue``): the Service ``kueue-controller-manager-metrics-service`` (templates/manager/auth_proxy_service.yaml)
# labelled with kueue.metricsService.labels (templates/_helpers.tpl: the selector labels plus
# ``app.kubernetes.io/component: metrics-service``), port ``https`` 8443 (values.yaml metricsService.ports), which
# answers a bearer token allowed ``get`` on the non-resource URL ``/metrics``: the chart's ClusterRole
# ``kueue-metrics-reader`` (templates/rbac/metrics_reader_role.yaml, always rendered). The chart's own
# ServiceMonitor (``enablePrometheus``, templates/prometheus/monitor.yaml) is not used: its Role and RoleBinding
# (templates/prometheus/role.yaml) grant ingresses and pods to kube-prometheus's ``prometheus-k8s`` and
# ``prometheus-operator`` accounts, which kube-prometheus-stack does not have; the endpoint below is the chart's.
KUEUE_METRICS_SERVICE_LABELS = {
    "app.kubernetes.io/name": "kueue",
    "app.kubernetes.io/instance": "kueue",
    "app.kubernetes.io/component": "metrics-service",
}
KUEUE_METRICS_PORT = 8443
#: The ServiceMonitor's name, in Kueue's namespace.
KUEUE_METRICS_MONITOR = "kueue-metrics"
KUEUE_METRICS_READER = "kueue-metrics-reader"
# the manager pod's labels (kueue.selectorLabels), which the ingress rule opens 8443 on
KUEUE_POD_LABELS = {"app.kubernetes.io/name": "kueue", "control-plane": "controller-manager"}


def kueue_metrics_endpoint() -> dict[str, Any]:
    """The ServiceMonitor endpoint of Kueue's metrics, as the kueue 0.19.2 chart's own (templates/prometheus/
    monitor.yaml, values.yaml metrics.serviceMonitor.tlsConfig): HTTPS, the certificate unchecked (Kueue's metrics
    certificate is its own self-signed one). It authenticates with the Prometheus' own ServiceAccount token through
    the ServiceMonitor's scrape class, not the chart's deprecated ``bearerTokenFile``
    (fleet/model/monitoring/prometheus.py ``SERVICE_ACCOUNT_SCRAPE_CLASS``)."""
    return {
        "port": "https",
        "path": "/metrics",
        "scheme": "https",
        "interval": "30s",
        "tlsConfig": {"insecureSkipVerify": True},
    }


def kueue_metrics_scrape(
    cluster: str,
    kueue_namespace: pulumi.Input[str],
    prometheus_account: str,
    monitoring_namespace: str,
    scraper: dict[str, Any],
    opts: pulumi.ResourceOptions,
) -> list[pulumi.Resource]:
    """What lets the central Prometheus scrape Kueue on the manager: a ServiceMonitor of Kueue's metrics Service,
    the chart's ``kueue-metrics-reader`` ClusterRole bound to the Prometheus' ServiceAccount (Kueue checks the
    scraper's token with a SubjectAccessReview), and an ingress rule letting ``scraper`` reach port 8443."""
    monitor = k8s.apiextensions.CustomResource(
        f"{cluster}-kueue-metrics",
        api_version="monitoring.coreos.com/v1",
        kind="ServiceMonitor",
        metadata={"name": KUEUE_METRICS_MONITOR, "namespace": kueue_namespace, "labels": FLEET_LABELS},
        spec={
            "selector": {"matchLabels": dict(KUEUE_METRICS_SERVICE_LABELS)},
            "endpoints": [kueue_metrics_endpoint()],
            # prometheus-operator v0.86.2 ServiceMonitorSpec.ScrapeClassName, JSON ``scrapeClass``
            "scrapeClass": prometheus.SERVICE_ACCOUNT_SCRAPE_CLASS,
        },
        opts=opts,
    )
    binding = k8s.rbac.v1.ClusterRoleBinding(
        f"{cluster}-kueue-metrics-reader",
        metadata={"name": "gpu-fleet-kueue-metrics-reader", "labels": FLEET_LABELS},
        role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": KUEUE_METRICS_READER},
        subjects=[{"kind": "ServiceAccount", "name": prometheus_account, "namespace": monitoring_namespace}],
        opts=opts,
    )
    allow_ingress(
        f"{cluster}-kueue-allow-prometheus",
        "allow-prometheus",
        kueue_namespace,
        KUEUE_POD_LABELS,
        [scraper],
        ports(KUEUE_METRICS_PORT),
        opts,
    )
    return [monitor, binding]
