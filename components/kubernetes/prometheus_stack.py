"""kube-prometheus-stack on every cluster: the release's name and the pods it labels, the requests of its pods,
and its values for a leaf or for the central Prometheus (Grafana and Alertmanager only there)."""

from __future__ import annotations

from typing import Any

from components.kubernetes import dashboards
from components.kubernetes.central_monitoring import ALERTMANAGER_CONFIG_REF, GRAFANA_ADMIN_SECRET, GRAFANA_ROLE
from components.kubernetes.federation import probe_expectations
from components.kubernetes.images import merged
from components.kubernetes.namespaces import MONITORING_NS, NODE_AGENTS_NS, fleet_namespaces
from fleet.model.billing import accounting, accounting_hours
from fleet.model.core.clouds import cloud_rules
from fleet.model.core.clusters import Cluster
from fleet.model.core.fleet import Fleet
from fleet.model.monitoring import prometheus
from fleet.model.placement.node_agents import NODE_EXPORTER_RESOURCES, SITE_MONITORING_CRDS, runs_node_exporter
from fleet.model.probes import probe_phases

RELEASE = "kps"  # kube-prometheus-stack release name; its Prometheus service is kps-prometheus
# Pods the NetworkPolicies select in the monitoring namespace, as kube-prometheus-stack 79.5.0 labels them: the
# Prometheus pods by the name its Service selects (templates/prometheus/service.yaml), the operator by its component
# label (templates/prometheus-operator/_prometheus-operator.tpl), whose admission webhook the API server calls on
# prometheusOperator.tls.internalPort (values.yaml: 10250).
PROMETHEUS_POD_LABELS = {"app.kubernetes.io/name": "prometheus"}
# the Prometheus' ServiceAccount: fullname + "-prometheus" (kube-prometheus-stack 79.5.0 templates/_helpers.tpl
# kube-prometheus-stack.prometheus.serviceAccountName; fullname is RELEASE by fullnameOverride)
PROMETHEUS_ACCOUNT = f"{RELEASE}-prometheus"
OPERATOR_POD_LABELS = {"app.kubernetes.io/component": "prometheus-operator"}
OPERATOR_WEBHOOK_PORT = 10250
# kube-state-metrics 6.4.1's default collectors (values.yaml `collectors`) but secrets.
KSM_COLLECTORS = [
    "certificatesigningrequests", "configmaps", "cronjobs", "daemonsets", "deployments", "endpoints",
    "horizontalpodautoscalers", "ingresses", "jobs", "leases", "limitranges", "mutatingwebhookconfigurations",
    "namespaces", "networkpolicies", "nodes", "persistentvolumeclaims", "persistentvolumes", "poddisruptionbudgets",
    "pods", "replicasets", "replicationcontrollers", "resourcequotas", "services", "statefulsets", "storageclasses",
    "validatingwebhookconfigurations", "volumeattachments",
]  # fmt: skip
PROMETHEUS_URL = f"http://{RELEASE}-prometheus.{MONITORING_NS}.svc:9090"
# kube-prometheus-stack 79.5.0 monitors the scheduler, controller manager, etcd and kube-proxy by default (values.yaml
# kubeScheduler, kubeControllerManager, kubeEtcd, kubeProxy .enabled: true) through Services selecting their pods;
# ``enabled: false`` drops each one's Service, ServiceMonitor and rule groups (templates/exporters/kube-*/ and
# templates/prometheus/rules-1.14/{kube-scheduler.rules,kubernetes-system-scheduler,kubernetes-system-controller-
# manager,etcd,kubernetes-system-kube-proxy}.yaml are conditioned on them). Where the cloud runs them as no pod the
# cluster's Prometheus reaches (fleet/model/core/clouds: ``control_plane_pods``: GKE, EKS, AKS and Magnum), a monitor
# finds no target and its `...Down` alert fires for ever.
HIDDEN_CONTROL_PLANE = ("kubeScheduler", "kubeControllerManager", "kubeEtcd", "kubeProxy")
# Requests of the monitoring pods (every chart leaves them empty: BestEffort pods are the first evicted from a busy
# system node). Sized modestly for a cluster of a few dozen nodes, from what these components use idle; raise them
# for a bigger cluster. Keys of kube-prometheus-stack 79.5.0 values.yaml (prometheusOperator.resources,
# .admissionWebhooks.patch.resources, .prometheusConfigReloader.resources: the operator passes the latter to every
# config-reloader container, templates/prometheus-operator/deployment.yaml --config-reloader-cpu-request...;
# alertmanager.alertmanagerSpec.resources), grafana 10.1.4 (resources, sidecar.resources) and kube-state-metrics
# 6.4.1 (resources); the node exporter's are the model's (fleet/model/placement/node_agents.py), which counts them on
# every node.
SMALL_REQUESTS = {"requests": {"cpu": "10m", "memory": "32Mi"}}
OPERATOR_REQUESTS = {"requests": {"cpu": "50m", "memory": "128Mi"}}
KSM_REQUESTS = {"requests": {"cpu": "20m", "memory": "128Mi"}}
GRAFANA_REQUESTS = {"requests": {"cpu": "50m", "memory": "192Mi"}}
ALERTMANAGER_REQUESTS = {"requests": {"cpu": "10m", "memory": "64Mi"}}


def leaf_retention_size(storage: str) -> str:
    """The leaf Prometheus' ``retentionSize`` for an emptyDir of ``storage`` (``10Gi``): 80% of it, in Prometheus'
    base-2 units (prometheus docs/storage.md: "Units supported: B, KB, MB, GB ... Based on powers-of-2"; the WAL and
    head chunks count towards it), so it deletes old blocks before the kubelet evicts the pod for exceeding the
    volume's size limit."""
    gib = int(storage.removesuffix("Gi"))
    return f"{gib * 1024 * 8 // 10}MB"


def prometheus_values(
    cluster: Cluster,
    fleet: Fleet,
    scrape_configs: Any = None,
    secrets: list[str] | None = None,
    storage_class: str | None = None,
) -> dict[str, Any]:
    """kube-prometheus-stack values for a leaf or (with scrape configs) the central Prometheus.

    Every pod of the release but the node exporter runs on the system pool (``cluster.system_selector``): on
    Magnum GPU nodes carry no taint, and Prometheus with its volume must not pin a GPU node up. The central's
    volume uses ``storage_class`` (``gpu-fleet:storageClass``), or the cluster's default class when None.
    The value keys are those of kube-prometheus-stack 79.5.0 (charts/kube-prometheus-stack/values.yaml at tag
    kube-prometheus-stack-79.5.0) and its subcharts grafana and kube-state-metrics 6.4.1.

    A leaf's Prometheus keeps its TSDB in an emptyDir bounded to ``monitoring.leaf_storage`` and deletes its oldest
    blocks at 80% of it (``retentionSize``), so a week of data never fills the system node's disk and gets the pod
    evicted: the central federates what the fleet keeps every ``federation_interval``, so a rescheduled leaf loses
    only its own local history; and a volume would leave Prometheus Pending wherever the cluster has no default
    StorageClass (EKS leaves get no EBS CSI driver, Magnum and existing clusters have none).
    """
    mon = fleet.monitoring
    selectors_nil = {
        f"{kind}SelectorNilUsesHelmValues": False
        for kind in ("podMonitor", "serviceMonitor", "rule", "probe", "scrapeConfig")
    }
    spec: dict[str, Any] = {
        "externalLabels": prometheus.leaf_external_labels(cluster.name, cluster.cloud)
        if not cluster.central
        else {"fleet_role": "central"},
        "scrapeInterval": mon.scrape_interval,
        "retention": mon.central_retention if cluster.central else mon.leaf_retention,
        **selectors_nil,
        "resources": {"requests": {"cpu": "200m", "memory": "1Gi"}},
        # how a ServiceMonitor of ours authenticates with the Prometheus' own token
        # (fleet/model/monitoring/prometheus.py)
        "scrapeClasses": prometheus.scrape_classes(),
    }
    system = cluster.system_selector
    rules: dict[str, Any] = {"gpufleet-gpu-aggregates": prometheus.leaf_recording_rules()}
    # GPU card-hours billed, used and idle per billing account (fleet/model/billing/accounting.py)
    if cluster.all_pools:
        rules[accounting.GROUP] = accounting.accounting_rules(cluster, fleet)
    phases = probe_phases.leaf_rules(cluster)  # time to first accelerator by phase (fleet/model/probes/probe_phases.py)
    if phases is not None:
        rules[probe_phases.GROUP] = phases
    if cluster.central:
        claim: dict[str, Any] = {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": mon.central_storage}},
        }
        if storage_class:
            claim["storageClassName"] = storage_class
        spec["storageSpec"] = {"volumeClaimTemplate": {"spec": claim}}
    else:
        spec["storageSpec"] = {"emptyDir": {"sizeLimit": mon.leaf_storage}}
        spec["retentionSize"] = leaf_retention_size(mon.leaf_storage)
    if cluster.central:
        spec["additionalScrapeConfigs"] = scrape_configs or []
        spec["secrets"] = secrets or []
        metrics = prometheus.workload_metrics(fleet.workloads)
        rules["gpufleet-federation-alerts"] = prometheus.central_alert_rules(
            metrics, scrape_timeout=prometheus.federation_timeout(mon.federation_interval)
        )
        probed = probe_expectations(fleet)
        if probed:
            rules["gpufleet-probe-alerts"] = prometheus.probe_alert_rules(probed)
            runs = probe_phases.settled_run_rules(prometheus.duration_seconds(mon.federation_interval))
            if runs is not None:  # each finished run's phases, for the report's long windows
                rules[probe_phases.RUNS_GROUP] = runs
        hours = accounting_hours.hourly_rules(prometheus.duration_seconds(mon.federation_interval))
        if hours is not None:  # the report's card-hours, an hour at a time (fleet/model/billing/accounting_hours.py)
            rules[accounting_hours.GROUP] = hours
        prices = dashboards.price_rules(fleet)  # what the dashboards' cost panels join on
        if prices:
            rules["gpufleet-card-prices"] = prices
    values: dict[str, Any] = {
        "fullnameOverride": RELEASE,
        "prometheus": {"prometheusSpec": spec},
        "additionalPrometheusRulesMap": rules,
        "alertmanager": {"enabled": cluster.central, "alertmanagerSpec": {"resources": ALERTMANAGER_REQUESTS}},
        # testFramework: the chart's `helm test` Pod (docker.io/bats/bats, root, no securityContext: grafana 10.1.4
        # values.yaml testFramework, templates/tests/test.yaml) is not the fleet's image and breaks the monitoring
        # namespace's `restricted` level.
        "grafana": {
            "enabled": cluster.central,
            "testFramework": {"enabled": False},
            "resources": GRAFANA_REQUESTS,
            "sidecar": {"resources": SMALL_REQUESTS},
        },
        # The release's roles are the fleet's (components/kubernetes/operator_rbac.py): the chart's own would give
        # the operator every Secret of the cluster, and this switch is the only one that drops them.
        "global": {"rbac": {"create": False}},
        "prometheusOperator": {
            **operator_scope(cluster, fleet),
            "resources": OPERATOR_REQUESTS,
            "admissionWebhooks": {"patch": {"resources": SMALL_REQUESTS}},
            "prometheusConfigReloader": {"resources": SMALL_REQUESTS},
        },
        "kube-state-metrics": {"resources": KSM_REQUESTS},
        # The node exporter needs the host's network, PID namespace and root: it runs with the other node agents.
        # its requests are what the model counts on every node (fleet/model/placement/node_agents.py)
        "prometheus-node-exporter": {"namespaceOverride": NODE_AGENTS_NS, "resources": NODE_EXPORTER_RESOURCES},
    }
    # what an existing cluster's site already runs (policy: site_provides): kube-prometheus-stack 79.5.0 installs
    # neither its node exporter (Chart.yaml: the prometheus-node-exporter dependency's condition nodeExporter.enabled)
    # nor the operator's CRDs (values.yaml crds.enabled, the crds dependency's condition) then
    if not runs_node_exporter(cluster):
        values["nodeExporter"] = {"enabled": False}
    if SITE_MONITORING_CRDS in cluster.site_provides:
        values["crds"] = {"enabled": False}
    rules = cloud_rules(cluster.cloud)
    if not rules.control_plane_pods:
        values.update({component: {"enabled": False} for component in HIDDEN_CONTROL_PLANE})
    if not rules.coredns_pods:  # kube-prometheus-stack 79.5.0 values.yaml coreDns.enabled drops its Service and monitor
        values["coreDns"] = {"enabled": False}
    # on the central, the configuration, receiver included, is a Secret of its own (central_monitoring.alert_secret)
    if cluster.central:
        values["alertmanager"]["alertmanagerSpec"].update(ALERTMANAGER_CONFIG_REF)
        values["grafana"]["admin"] = {
            "existingSecret": GRAFANA_ADMIN_SECRET,
            "userKey": "admin-user",
            "passwordKey": "admin-password",
        }
        values["grafana"] = merged(values["grafana"], dashboards.grafana_values(fleet))  # keeps the sidecar's requests
        # Grafana's sidecar reads its dashboards and datasources in the monitoring namespace only, with a Role
        # there (grafana 10.1.4 rbac.namespaced: templates/role.yaml; no ClusterRole reading every Secret), instead
        # of kube-prometheus-stack's searchNamespace ALL; and ConfigMaps only: the chart's Role gives configmaps AND
        # secrets whenever a sidecar is on (role.yaml), which would read every leaf's federation key, the alert
        # receiver and the admin password in monitoring, so the release binds the fleet's own Role instead
        # (rbac.useExistingRole: rolebinding.yaml names it, role.yaml is skipped) and each sidecar watches ConfigMaps
        # only (sidecar.<kind>.resource, default "both"); the dashboards and kube-prometheus-stack's datasource are
        # ConfigMaps (central_monitoring.GRAFANA_ROLE)
        values["grafana"]["rbac"] = {"namespaced": True, "useExistingRole": GRAFANA_ROLE}
        values["grafana"]["sidecar"]["dashboards"]["searchNamespace"] = MONITORING_NS
        values["grafana"]["sidecar"]["dashboards"]["resource"] = "configmap"
        values["grafana"]["sidecar"].setdefault("datasources", {})["resource"] = "configmap"
    if system:
        spec["nodeSelector"] = system
        values["alertmanager"]["alertmanagerSpec"]["nodeSelector"] = system
        values["grafana"]["nodeSelector"] = system
        values["prometheusOperator"]["nodeSelector"] = system
        values["prometheusOperator"]["admissionWebhooks"]["patch"]["nodeSelector"] = system
        values["kube-state-metrics"]["nodeSelector"] = system
    # kube-state-metrics without the secrets collector: its ClusterRole then has no list/watch on Secrets (the
    # subchart's templates/role.yaml grants a resource only for a listed collector); nothing of the fleet or the
    # chart's rules and dashboards reads kube_secret_*
    values["kube-state-metrics"]["collectors"] = KSM_COLLECTORS
    if cluster.all_pools:  # the node and pod labels the accounting rules join on
        ksm = values.setdefault("kube-state-metrics", {})
        ksm["metricLabelsAllowlist"] = accounting.metric_labels_allowlist(cluster)
    return values


def operator_scope(cluster: Cluster, fleet: Fleet) -> dict[str, Any]:
    """kube-prometheus-stack 79.5.0 ``prometheusOperator`` values that scope the operator to the fleet: it finds
    monitors and rules in the fleet's namespaces only (``namespaces`` -> ``--namespaces``), and its Prometheus,
    Alertmanager and their ConfigMaps, Secrets and StatefulSets in the monitoring namespace only (the
    ``--*-instance-namespaces`` flags: templates/prometheus-operator/deployment.yaml), where its Role grants them
    (components/kubernetes/operator_rbac.py)."""
    others = [ns for ns in fleet_namespaces(cluster, fleet) if ns != MONITORING_NS]
    mine = [MONITORING_NS]
    return {
        "namespaces": {"releaseNamespace": True, "additional": others},
        "prometheusInstanceNamespaces": mine,
        "alertmanagerInstanceNamespaces": mine,
        "alertmanagerConfigNamespaces": mine,
        "thanosRulerInstanceNamespaces": mine,
    }
