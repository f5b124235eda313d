"""The infra stack every cluster gets: namespaces and quotas, Prometheus, the GPU device plugin and exporter.

Deployed through the cluster's Kubernetes provider (``opts.providers``). The central cluster's Prometheus
also federates every other cluster (components/kubernetes/gateway.py, fleet/model/prometheus.py).
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pulumi_random as random
import yaml

from components.kubernetes import dashboards
from components.kubernetes.deployment import FLEET_PART_OF, app_labels
from components.kubernetes.gateway import GATEWAY_NAME, GATEWAY_PORT, SECRETS_DIR, FederationEndpoint, server_name
from components.kubernetes.images import helm_release, merged
from components.kubernetes.multikueue import dispatched_kinds, multikueue_settings
from components.kubernetes.network_policy import (
    NON_PUBLIC,
    allow_ingress,
    default_deny_egress,
    default_deny_ingress,
    from_namespace,
    internet_block,
    ports,
)
from components.kubernetes.operator_rbac import release_rbac
from components.kubernetes.pod_security import namespace_labels
from components.kubernetes.runners import RUNNER_METRICS_PORT
from components.kubernetes.training import (
    KUEUE_FRAMEWORKS,
    KUEUE_VISIBILITY_PORT,
    TrainingOperators,
    kueue_configuration,
    kueue_release,
)
from components.kubernetes.training import WEBHOOK_PORT as TRAINING_WEBHOOK_PORT
from components.settings import ComponentSettings
from fleet.model import accounting, accounting_hours, pod_contract, probe_phases, prometheus
from fleet.model.queued_sweeps import runs_trainer
from fleet.model.queues import START_WAIT_SERIES
from fleet.model.sharing import Sharing
from fleet.model.spec import Cluster, Fleet

MONITORING_NS = "monitoring"
# Benchmarks whose image cannot run as non-root (workload.yaml `needs_root`): `baseline`, created only when used.
# The node agents: the node exporter (host network, PID namespace and file system) and dcgm-exporter (host
# paths and SYS_ADMIN for profiling metrics) need the `privileged` level, so they live apart from the rest.
NODE_AGENTS_NS = "node-agents"
# GitLab CI runners (components/kubernetes/runners.py), where the policy gives a cluster runners: their managers, and
# the CI jobs they start.
# Kubeflow Trainer with JobSet, and Kueue: their controllers meet `restricted` with the charts' defaults (non-root
# RuntimeDefault pod contexts, no privilege escalation, every capability dropped: kubeflow-trainer 2.3.0
# manager.securityContext, jobset 0.12.0 podSecurityContext/securityContext, kueue 0.19.2
# controllerManager.manager.podSecurityContext/containerSecurityContext).
# Pod Security level of each fleet namespace, and why a namespace enforces less than `restricted`. The monitoring
# pods meet `restricted` with the charts' defaults: the operator gives Prometheus, Alertmanager and the config
# reloader no privilege escalation, no capabilities and a read-only root (prometheus-operator v0.86.2,
# pkg/prometheus/server/statefulset.go, pkg/operator/config_reloader.go, pkg/alertmanager/statefulset.go) under
# the chart's non-root RuntimeDefault pod contexts (kube-prometheus-stack 79.5.0 prometheusSpec/alertmanagerSpec
# securityContext, prometheusOperator and admissionWebhooks securityContexts), as do grafana 10.1.4
# (securityContext, containerSecurityContext) and kube-state-metrics 6.4.1. The operator always passes
# --web.enable-lifecycle to Prometheus (pkg/prometheus/promcfg.go): only the NetworkPolicies keep /-/quit closed.
POD_SECURITY = {
    MONITORING_NS: ("restricted", ""),
    pod_contract.BENCHMARK_NAMESPACE: ("restricted", ""),
    pod_contract.ROOT_BENCHMARK_NAMESPACE: (
        "baseline",
        "benchmark images that run only as root (workload.yaml needs_root)",
    ),
    pod_contract.RUNNER_NAMESPACE: ("restricted", ""),
    pod_contract.TRAINER_NAMESPACE: ("restricted", ""),
    pod_contract.KUEUE_NAMESPACE: ("restricted", ""),
    pod_contract.CI_JOB_NAMESPACE: (
        "baseline",
        "CI jobs run their users' images, many of which run as root; baseline still refuses privileged containers, "
        "host namespaces, host paths and added capabilities",
    ),
    NODE_AGENTS_NS: (
        "privileged",
        "node-exporter reads the host's network, PID namespace and file system; dcgm-exporter mounts the kubelet's "
        "pod-resources socket and needs SYS_ADMIN for profiling metrics",
    ),
}
CRITICAL_PRIORITY = ("system-node-critical", "system-cluster-critical")
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
# The central Grafana's admin credentials: a Secret the chart reads (grafana 10.1.4 values: admin.existingSecret,
# admin.userKey, admin.passwordKey).
GRAFANA_ADMIN_SECRET = "grafana-admin"
GRAFANA_ADMIN_USER = "admin"
# What the offline plan shows for an encrypted gpu-fleet:alertReceiver (it cannot decrypt it).
# The central Alertmanager reads its configuration from a Secret the stack writes, so the receiver (webhook URLs,
# tokens) is that Secret's and the chart's values stay plain for review: alertmanagerSpec.useExistingSecret stops
# the chart from rendering its own, configSecret names ours (kube-prometheus-stack 79.5.0 values.yaml
# alertmanager.alertmanagerSpec, templates/alertmanager/secret.yaml and alertmanager.yaml); the key is
# alertmanager.yaml (prometheus-operator Alertmanager spec.configSecret).
ALERTMANAGER_CONFIG_SECRET = "gpu-fleet-alertmanager-config"
ALERTMANAGER_CONFIG_REF = {"useExistingSecret": True, "configSecret": ALERTMANAGER_CONFIG_SECRET}
# kube-state-metrics 6.4.1's default collectors (values.yaml `collectors`) but secrets.
KSM_COLLECTORS = [
    "certificatesigningrequests", "configmaps", "cronjobs", "daemonsets", "deployments", "endpoints",
    "horizontalpodautoscalers", "ingresses", "jobs", "leases", "limitranges", "mutatingwebhookconfigurations",
    "namespaces", "networkpolicies", "nodes", "persistentvolumeclaims", "persistentvolumes", "poddisruptionbudgets",
    "pods", "replicasets", "replicationcontrollers", "resourcequotas", "services", "statefulsets", "storageclasses",
    "validatingwebhookconfigurations", "volumeattachments",
]  # fmt: skip
OFFLINE_RECEIVER = {"name": "gpu-fleet-alert-receiver", "webhook_configs": [{"url": "https://offline-plan.invalid/"}]}
PROMETHEUS_URL = f"http://{RELEASE}-prometheus.{MONITORING_NS}.svc:9090"
# Clouds whose provider runs the control plane out of the cluster's reach (GKE, EKS, AKS): no scheduler, controller
# manager or etcd pod to scrape, and kube-proxy's metrics stay on the node's loopback. kube-prometheus-stack 79.5.0
# monitors all four by default (values.yaml kubeScheduler, kubeControllerManager, kubeEtcd, kubeProxy .enabled:
# true); ``enabled: false`` drops each one's Service, ServiceMonitor and rule groups (templates/exporters/kube-*/ and
# templates/prometheus/rules-1.14/{kube-scheduler.rules,kubernetes-system-scheduler,kubernetes-system-controller-
# manager,etcd,kubernetes-system-kube-proxy}.yaml are conditioned on them), or their `...Down` alerts fire for ever.
MANAGED_CONTROL_PLANE_CLOUDS = ("gcp", "aws", "azure")
HIDDEN_CONTROL_PLANE = ("kubeScheduler", "kubeControllerManager", "kubeEtcd", "kubeProxy")
# Requests of the monitoring pods (every chart leaves them empty: BestEffort pods are the first evicted from a busy
# system node). Sized modestly for a cluster of a few dozen nodes, from what these components use idle; raise them
# for a bigger cluster. Keys of kube-prometheus-stack 79.5.0 values.yaml (prometheusOperator.resources,
# .admissionWebhooks.patch.resources, .prometheusConfigReloader.resources: the operator passes the latter to every
# config-reloader container, templates/prometheus-operator/deployment.yaml --config-reloader-cpu-request...;
# alertmanager.alertmanagerSpec.resources), grafana 10.1.4 (resources, sidecar.resources), kube-state-metrics 6.4.1
# and prometheus-node-exporter 4.49.1 (resources).
SMALL_REQUESTS = {"requests": {"cpu": "10m", "memory": "32Mi"}}
OPERATOR_REQUESTS = {"requests": {"cpu": "50m", "memory": "128Mi"}}
KSM_REQUESTS = {"requests": {"cpu": "20m", "memory": "128Mi"}}
GRAFANA_REQUESTS = {"requests": {"cpu": "50m", "memory": "192Mi"}}
ALERTMANAGER_REQUESTS = {"requests": {"cpu": "10m", "memory": "64Mi"}}


def gpu_tolerations(cluster: Cluster) -> list[dict[str, str]]:
    """Tolerations for DaemonSets that must run on every GPU node: each accelerator taint and spot taint."""
    seen: dict[str, dict[str, str]] = {}
    for pool in cluster.all_pools:
        for taint in pool.pod_tolerations:
            seen[taint.as_string()] = taint.toleration()
    return list(seen.values())


def device_plugin_config(sharing: Sharing | None) -> dict[str, Any]:
    """One configuration of the NVIDIA device plugin (NVIDIA/k8s-device-plugin v0.17.1 api/config/v1, README "With
    CUDA Time-Slicing"): whole cards, N time slices per card (a pod asking more than one slice is refused, as NVIDIA
    recommends: it would not get more GPU), or the MIG instances of a node, each a ``nvidia.com/gpu`` (single
    strategy, as AKS's MIG pools want)."""
    config: dict[str, Any] = {"version": "v1", "flags": {"migStrategy": "none"}}
    if sharing is not None and sharing.kind == "mig":
        config["flags"]["migStrategy"] = "single"
    elif sharing is not None:
        resources = [{"name": "nvidia.com/gpu", "replicas": sharing.units}]
        config["sharing"] = {"timeSlicing": {"failRequestsGreaterThanOne": True, "resources": resources}}
    return config


def device_plugin_sharing(cluster: Cluster) -> dict[str, Any]:
    """The device plugin chart's ``config`` values where a pool we run the plugin on is shared: one named
    configuration per kind of sharing plus ``default``, which a node takes unless its label
    ``nvidia.com/device-plugin.config`` names another (the chart's config-manager reads it); {} otherwise, so an
    unshared cluster's plugin runs as before."""
    shared = {p.sharing.name: p.sharing for p in cluster.all_pools if p.sharing and p.needs_device_plugin}
    if not shared:
        return {}
    configs = {"default": device_plugin_config(None)}
    configs.update({name: device_plugin_config(sharing) for name, sharing in sorted(shared.items())})
    return {
        "config": {
            "default": "default",
            "map": {name: yaml.safe_dump(config, sort_keys=False) for name, config in configs.items()},
        }
    }


def gpu_node_affinity(cluster: Cluster) -> dict[str, Any]:
    """Node affinity onto any GPU pool of the cluster, from each pool's own selector label.

    Works on every cloud: ``gpu=<card>`` where we label pools, the node-group role on Magnum.
    """
    terms = [
        {
            "matchExpressions": [
                {"key": k, "operator": "In", "values": [v]} for k, v in sorted(pool.node_selector.items())
            ]
        }
        for pool in cluster.all_pools
        if pool.accelerator.is_nvidia
    ]
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}


def federated_selectors(fleet: Fleet) -> list[str]:
    """What the central pulls from every leaf (and each leaf's gateway lets through): the metrics of every workload
    that runs in the fleet's pods, the GPU aggregates, the accounting records, when the fleet has CI runners theirs,
    when a pool is probed the probes' phases and, when the fleet has queues, the workers' Kueue wait from admission to
    running pods (fleet/model/queues.py ``START_WAIT_METRIC``)."""
    runners = any(fleet.runners.values())
    probed = any(p.probe is not None for c in fleet.clusters.values() for p in c.pools)
    extra = [*accounting.ACCOUNTING_RULES, *(prometheus.RUNNER_SERIES if runners else ())]
    extra += [probe_phases.PHASE_RECORD] if probed else []
    extra += START_WAIT_SERIES if fleet.dispatch else ()
    return prometheus.match_selectors(prometheus.workload_metrics(fleet.deployed_workloads), extra=extra)


def probe_expectations(fleet: Fleet) -> list[prometheus.ProbeExpectation]:
    """Every probed pool of the fleet, for the central's probe alerts."""
    return [
        prometheus.ProbeExpectation(
            c.name, c.cloud, p.card, p.probe.stale_after_seconds, p.probe.scale_up_alert_seconds
        )
        for c in fleet.clusters.values()
        for p in c.pools
        if p.probe is not None
    ]


def benchmark_quota(cluster: Cluster) -> dict[str, str]:
    """ResourceQuota of the benchmark namespace: accelerators up to what the card and sweep pools can hold at most
    (not the CI pools, where no benchmark may run)."""
    totals: dict[str, int] = defaultdict(int)
    for pool in cluster.pools + cluster.sweep_pools:
        totals[pool.resource] += pool.max_nodes * pool.units_per_node
    hard = {f"requests.{res}": str(n) for res, n in sorted(totals.items())}
    hard.update({"count/jobs.batch": "200", "count/cronjobs.batch": "50", "pods": "200"})
    return hard


def alertmanager_config(receiver: dict[str, Any] | None) -> dict[str, Any]:
    """The central Alertmanager's configuration: every alert to ``receiver`` (an Alertmanager ``receivers`` entry,
    from ``gpu-fleet:alertReceiver``), the always-firing Watchdog to nobody; with no receiver, every alert to
    nobody, as the chart's default does (kube-prometheus-stack 79.5.0 values.yaml alertmanager.config)."""
    target = receiver["name"] if receiver else "null"
    receivers: list[dict[str, Any]] = [{"name": "null"}]
    if receiver:
        receivers.append(receiver)
    return {
        "route": {
            "group_by": ["alertname", "cluster"],
            "group_wait": "30s",
            "group_interval": "5m",
            "repeat_interval": "12h",
            "receiver": target,
            "routes": [{"receiver": "null", "matchers": ['alertname = "Watchdog"']}],
        },
        "receivers": receivers,
    }


def parse_alert_receiver(text: str) -> dict[str, Any]:
    """``gpu-fleet:alertReceiver``: one Alertmanager receiver as JSON (``{"name": ..., "slack_configs": [...]}``),
    or ``ValueError`` saying what is wrong (never the value: it holds webhook URLs and tokens)."""
    try:
        receiver = json.loads(text)
    except ValueError:
        raise ValueError(
            "gpu-fleet:alertReceiver is not JSON: set one Alertmanager receiver, such as "
            '{"name": "team", "webhook_configs": [{"url": "https://..."}]}, with pulumi config set --secret'
        ) from None
    if not isinstance(receiver, dict) or not isinstance(receiver.get("name"), str) or not receiver["name"]:
        raise ValueError("gpu-fleet:alertReceiver must be a JSON object with a name and its *_configs")
    if receiver["name"] == "null":
        raise ValueError('gpu-fleet:alertReceiver must not be named "null": that receiver drops alerts')
    if not any(k.endswith("_configs") for k in receiver):
        raise ValueError("gpu-fleet:alertReceiver has no *_configs (webhook_configs, slack_configs, email_configs...)")
    return receiver


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
        # how a ServiceMonitor of ours authenticates with the Prometheus' own token (fleet/model/prometheus.py)
        "scrapeClasses": prometheus.scrape_classes(),
    }
    system = cluster.system_selector
    rules: dict[str, Any] = {"gpufleet-gpu-aggregates": prometheus.leaf_recording_rules()}
    if cluster.all_pools:  # GPU card-hours billed, used and idle per billing account (fleet/model/accounting.py)
        rules[accounting.GROUP] = accounting.accounting_rules(cluster, fleet)
    phases = probe_phases.leaf_rules(cluster)  # time to first accelerator by phase (fleet/model/probe_phases.py)
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
        hours = accounting_hours.hourly_rules(prometheus.duration_seconds(mon.federation_interval))
        if hours is not None:  # the report's card-hours, an hour at a time (fleet/model/accounting_hours.py)
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
        "prometheus-node-exporter": {"namespaceOverride": NODE_AGENTS_NS, "resources": SMALL_REQUESTS},
    }
    if cluster.cloud in MANAGED_CONTROL_PLANE_CLOUDS:
        values.update({component: {"enabled": False} for component in HIDDEN_CONTROL_PLANE})
    if cluster.central:  # the configuration, receiver included, is a Secret of its own (ClusterServices._alert_secret)
        values["alertmanager"]["alertmanagerSpec"].update(ALERTMANAGER_CONFIG_REF)
        values["grafana"]["admin"] = {
            "existingSecret": GRAFANA_ADMIN_SECRET,
            "userKey": "admin-user",
            "passwordKey": "admin-password",
        }
        values["grafana"] = merged(values["grafana"], dashboards.grafana_values())  # keeps the sidecar's requests
        # Grafana's sidecar reads its dashboards and datasources in the monitoring namespace only, with a Role
        # there (grafana 10.1.4 rbac.namespaced: templates/role.yaml; no ClusterRole reading every Secret), instead
        # of kube-prometheus-stack's searchNamespace ALL
        values["grafana"]["rbac"] = {"namespaced": True}
        values["grafana"]["sidecar"]["dashboards"]["searchNamespace"] = MONITORING_NS
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


def fleet_namespaces(cluster: Cluster, fleet: Fleet) -> list[str]:
    """The namespaces the fleet makes on ``cluster``: monitoring, node agents and benchmarks always; the root
    benchmarks' where a workload needs root; the runners' and CI jobs' where a runner runs; Trainer's and Kueue's
    where Trainer runs (sweeps, queued sweep points), Kueue's where the fleet's queues reach."""
    wanted = [MONITORING_NS, NODE_AGENTS_NS, pod_contract.BENCHMARK_NAMESPACE]
    if any(b.workload.spec.needs_root for b in fleet.benchmarks(cluster)):
        wanted.append(pod_contract.ROOT_BENCHMARK_NAMESPACE)
    if fleet.runners_of(cluster):
        wanted += [pod_contract.RUNNER_NAMESPACE, pod_contract.CI_JOB_NAMESPACE]
    if runs_trainer(fleet, cluster):
        wanted += [pod_contract.TRAINER_NAMESPACE, pod_contract.KUEUE_NAMESPACE]
    elif fleet.dispatch and fleet.dispatch.role(cluster.name):
        wanted.append(pod_contract.KUEUE_NAMESPACE)
    return wanted


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


def fleet_namespace(cluster: str, namespace: str, opts: pulumi.ResourceOptions) -> k8s.core.v1.Namespace:
    """A namespace of the fleet with its Pod Security level (``POD_SECURITY``) and, below `restricted`, the reason
    in an annotation."""
    level, reason = POD_SECURITY[namespace]
    return k8s.core.v1.Namespace(
        f"{cluster}-ns-{namespace}",
        metadata={
            "name": namespace,
            "labels": {"app.kubernetes.io/part-of": FLEET_PART_OF, **namespace_labels(level)},
            "annotations": {pod_contract.POD_SECURITY_EXCEPTION: reason} if reason else {},
        },
        opts=opts,
    )


def benchmark_limits(prefix: str, cluster: Cluster, namespace: pulumi.Input[str], opts: pulumi.ResourceOptions) -> None:
    """The ResourceQuota and LimitRange of a benchmark namespace."""
    k8s.core.v1.ResourceQuota(
        f"{prefix}-quota",
        metadata={"name": "benchmarks", "namespace": namespace},
        spec={"hard": benchmark_quota(cluster)},
        opts=opts,
    )
    k8s.core.v1.LimitRange(
        f"{prefix}-limits",
        metadata={"name": "benchmarks", "namespace": namespace},
        spec={
            "limits": [
                {
                    "type": "Container",
                    "default": {"cpu": "1", "memory": "1Gi"},
                    "defaultRequest": {"cpu": "100m", "memory": "128Mi"},
                    "max": {"cpu": "64", "memory": "512Gi"},
                }
            ]
        },
        opts=opts,
    )


def namespace_network_policies(
    cluster: str, leaf: bool, namespaces: dict[str, pulumi.Input[str]], opts: pulumi.ResourceOptions
) -> None:
    """Default-deny ingress in every fleet namespace, then what the fleet needs:

    * monitoring: its pods reach each other (Prometheus, the operator, Grafana, kube-state-metrics, the gateway);
      the API server reaches the operator's admission webhook; on a leaf, the federation gateway accepts the
      central Prometheus (its LoadBalancer admits only ``federationSourceRanges``; mTLS decides who gets in).
      Nothing else reaches the leaf Prometheus, whose lifecycle API the operator enables.
    * node agents and benchmarks: scraped by the monitoring namespace's Prometheus only;
    * benchmark pods open connections to DNS only, plus what their workload declares (``WorkloadJobs``).
    """
    monitoring = namespaces[MONITORING_NS]
    for ns, name in namespaces.items():
        default_deny_ingress(f"{cluster}-{ns}", name, opts)
    allow_ingress(
        f"{cluster}-monitoring-allow-namespace",
        "allow-same-namespace",
        monitoring,
        None,
        [{"podSelector": {}}],
        None,
        opts,
    )
    allow_ingress(
        f"{cluster}-monitoring-allow-operator-webhook",
        "allow-operator-webhook",
        monitoring,
        OPERATOR_POD_LABELS,
        None,
        ports(OPERATOR_WEBHOOK_PORT),
        opts,
    )
    if leaf:
        allow_ingress(
            f"{cluster}-monitoring-allow-federation",
            "allow-federation-gateway",
            monitoring,
            app_labels(GATEWAY_NAME),
            None,
            ports(GATEWAY_PORT),
            opts,
        )
    scraper = [from_namespace(MONITORING_NS, PROMETHEUS_POD_LABELS)]
    allow_ingress(
        f"{cluster}-node-agents-allow-prometheus",
        "allow-prometheus",
        namespaces[NODE_AGENTS_NS],
        None,
        scraper,
        None,
        opts,
    )
    if pod_contract.RUNNER_NAMESPACE in namespaces:  # the runner managers' metrics (components/kubernetes/runners.py)
        allow_ingress(
            f"{cluster}-{pod_contract.RUNNER_NAMESPACE}-allow-prometheus",
            "allow-prometheus",
            namespaces[pod_contract.RUNNER_NAMESPACE],
            {"app.kubernetes.io/part-of": pod_contract.RUNNER_PART_OF},
            scraper,
            ports(RUNNER_METRICS_PORT),
            opts,
        )
    # the API server calls the controllers' admission webhooks, and Kueue's visibility API
    for ns, numbers in (
        (pod_contract.TRAINER_NAMESPACE, (TRAINING_WEBHOOK_PORT,)),
        (pod_contract.KUEUE_NAMESPACE, (TRAINING_WEBHOOK_PORT, KUEUE_VISIBILITY_PORT)),
    ):
        if ns in namespaces:
            allow_ingress(
                f"{cluster}-{ns}-allow-webhooks",
                "allow-webhooks",
                namespaces[ns],
                None,
                None,
                ports(*numbers),
                opts,
            )
    for ns in (pod_contract.BENCHMARK_NAMESPACE, pod_contract.ROOT_BENCHMARK_NAMESPACE):
        if ns not in namespaces:
            continue
        allow_ingress(
            f"{cluster}-{ns}-allow-prometheus",
            "allow-prometheus",
            namespaces[ns],
            {"app.kubernetes.io/part-of": pod_contract.BENCHMARK_PART_OF},
            scraper,
            ports(pod_contract.METRICS_PORT),
            opts,
        )
        default_deny_egress(f"{cluster}-{ns}-default-deny-egress", namespaces[ns], opts)
    if (
        pod_contract.CI_JOB_NAMESPACE in namespaces
    ):  # CI jobs: HTTPS to the internet (GitLab, registries), never inside the cluster
        https = {"to": [{"ipBlock": internet_block("0.0.0.0/0", NON_PUBLIC)}], "ports": ports(443)}
        default_deny_egress(
            f"{cluster}-{pod_contract.CI_JOB_NAMESPACE}-default-deny-egress",
            namespaces[pod_contract.CI_JOB_NAMESPACE],
            opts,
            https,
        )


class ClusterServices(pulumi.ComponentResource):
    """The services every cluster of the fleet runs (monitoring, GPU operator, Kueue, gateway...): a component of
    the stack, not a stack. ``benchmark_namespace`` is where the benchmark Jobs go."""

    # The type token keeps its first name: it is part of every child's URN, so renaming it would replace every
    # deployed resource of the component.
    TYPE = "gpufleet:index:InfraStack"

    def __init__(
        self,
        cluster: Cluster,
        fleet: Fleet,
        settings: ComponentSettings,
        opts: pulumi.ResourceOptions | None = None,
        exporter_values: dict[str, Any] | None = None,
    ):
        """``exporter_values``: the cloud's own dcgm-exporter values (``GpuCluster.gpu_exporter_values``)."""
        super().__init__(self.TYPE, f"{cluster.name}-infra", None, opts)
        child = pulumi.ResourceOptions(parent=self)
        name = cluster.name
        sweeps = fleet.sweep_points(cluster)
        # the cluster's part in the fleet's queues: manager, worker or none (components/kubernetes/multikueue.py)
        self.queue_role = fleet.dispatch.role(name) if fleet.dispatch else None
        trains = runs_trainer(fleet, cluster)
        namespaces = {ns: fleet_namespace(name, ns, child) for ns in fleet_namespaces(cluster, fleet)}
        # where the GitLab runners and their CI jobs go (None: the cluster has no runner)
        self.ci_namespaces: tuple[pulumi.Output[str], pulumi.Output[str]] | None = (
            (
                namespaces[pod_contract.RUNNER_NAMESPACE].metadata["name"],
                namespaces[pod_contract.CI_JOB_NAMESPACE].metadata["name"],
            )
            if pod_contract.RUNNER_NAMESPACE in namespaces
            else None
        )
        self.benchmark_namespace = namespaces[pod_contract.BENCHMARK_NAMESPACE].metadata["name"]
        self.root_benchmark_namespace = (
            namespaces[pod_contract.ROOT_BENCHMARK_NAMESPACE].metadata["name"]
            if pod_contract.ROOT_BENCHMARK_NAMESPACE in namespaces
            else None
        )
        namespace_network_policies(
            name, not cluster.central, {ns: r.metadata["name"] for ns, r in namespaces.items()}, child
        )
        for ns in (pod_contract.BENCHMARK_NAMESPACE, pod_contract.ROOT_BENCHMARK_NAMESPACE):
            if ns in namespaces:
                suffix = "benchmark" if ns == pod_contract.BENCHMARK_NAMESPACE else "benchmark-root"
                benchmark_limits(f"{name}-{suffix}", cluster, namespaces[ns].metadata["name"], child)
        # Kueue where sweeps run or the fleet's queues reach (None elsewhere): the sweeps' TrainJobs and JobSets, the
        # dispatched batch Jobs on a queue's manager and workers; a worker evicts a job whose pods do not all run in
        # time, and the manager gives it to the next cluster. Queued sweep points: the manager dispatches TrainJobs
        # too, and each worker runs them as a sweep cluster does (TrainJob and JobSet, one admission at a time)
        queued_points = bool(fleet.queued_points()) and self.queue_role is not None
        dispatched = dispatched_kinds(queued_points) if self.queue_role else {}
        runs_trainjobs = bool(sweeps) or (queued_points and self.queue_role == "worker")
        frameworks = tuple(dict.fromkeys((*(KUEUE_FRAMEWORKS if runs_trainjobs else ()), *dispatched)))
        kueue_config = kueue_configuration(
            frameworks,
            wait_for_pods_ready=bool(sweeps) or self.queue_role == "worker",
            block_admission=runs_trainjobs,
            multikueue=multikueue_settings(fleet.dispatch) if self.queue_role == "manager" and fleet.dispatch else None,
        )
        self.kueue_namespace = (
            namespaces[pod_contract.KUEUE_NAMESPACE].metadata["name"]
            if pod_contract.KUEUE_NAMESPACE in namespaces
            else None
        )
        # the training operator and gang admission of the scaling sweeps (None: the cluster runs no sweep)
        self.training: TrainingOperators | None = None
        self.kueue: pulumi.Resource | None = None
        if trains:
            self.training = TrainingOperators(
                cluster,
                sweeps,
                (
                    namespaces[pod_contract.TRAINER_NAMESPACE].metadata["name"],
                    namespaces[pod_contract.KUEUE_NAMESPACE].metadata["name"],
                    self.benchmark_namespace,
                ),
                opts=child,
                kueue_config=kueue_config,
            )
            self.kueue = self.training.kueue
        elif self.queue_role:
            self.kueue = kueue_release(
                cluster, namespaces[pod_contract.KUEUE_NAMESPACE].metadata["name"], kueue_config, child
            )
        monitoring_ns = namespaces[MONITORING_NS].metadata["name"]
        agents_ns = namespaces[NODE_AGENTS_NS].metadata["name"]
        scrape_configs, secrets = (
            self._federation_sources(cluster, fleet, settings, monitoring_ns, child)
            if cluster.central
            else (None, None)
        )
        self.grafana_admin_password: pulumi.Output[str] | None = None
        if cluster.central:
            self.grafana_admin_password = self._grafana_admin(cluster, settings, monitoring_ns, child)
            dashboards.dashboard_config_maps(name, fleet, monitoring_ns, child)
        # the release's roles, with the operator's Secret rights in the monitoring namespace only
        before_release = release_rbac(
            f"{name}-kps", RELEASE, monitoring_ns, {"app.kubernetes.io/part-of": FLEET_PART_OF}, child
        )
        if cluster.central:
            before_release.append(self._alert_secret(cluster, settings, monitoring_ns, child))
        self.prometheus = helm_release(
            f"{name}-prometheus",
            "kube-prometheus-stack",
            RELEASE,
            monitoring_ns,
            prometheus_values(cluster, fleet, scrape_configs, secrets, settings.storage_class),
            pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=before_release)),
            registry=cluster.registry,
            timeout=900,
        )
        nvidia_pools = [p for p in cluster.all_pools if p.accelerator.is_nvidia]
        tolerations = gpu_tolerations(cluster)
        if any(p.needs_device_plugin for p in cluster.all_pools):
            helm_release(
                f"{name}-nvidia-device-plugin",
                "nvidia-device-plugin",
                "nvidia-device-plugin",
                "kube-system",
                {
                    "tolerations": tolerations,
                    "affinity": gpu_node_affinity(cluster),
                    # the plugin's container (nvidia-device-plugin 0.17.1 values.yaml resources; the template gives
                    # the config manager's init and sidecar containers none, templates/daemonset-device-plugin.yml)
                    "resources": SMALL_REQUESTS,
                    **device_plugin_sharing(cluster),
                },
                child,
                registry=cluster.registry,
            )
        if nvidia_pools:
            # The chart gives its pods priorityClassName system-node-critical (it cannot be unset: the template
            # defaults an empty value to it; NVIDIA/dcgm-exporter@4.2.3-4.1.1 deployment/templates/daemonset.yaml).
            # GKE admits pods of that class only in namespaces with a matching ResourceQuota (its own is in
            # kube-system: gcp-critical-pods; openservicemesh/osm#4408, open-policy-agent/gatekeeper#1120), so the
            # node agents' namespace gets one, sized to one exporter per GPU node at most.
            critical = k8s.core.v1.ResourceQuota(
                f"{name}-node-agents-critical-pods",
                metadata={"name": "critical-pods", "namespace": agents_ns},
                spec={
                    "hard": {"pods": str(sum(p.max_nodes for p in nvidia_pools))},
                    "scopeSelector": {
                        "matchExpressions": [
                            {"operator": "In", "scopeName": "PriorityClass", "values": list(CRITICAL_PRIORITY)}
                        ]
                    },
                },
                opts=child,
            )
            helm_release(
                f"{name}-dcgm-exporter",
                "dcgm-exporter",
                "dcgm-exporter",
                agents_ns,
                {
                    "tolerations": tolerations,
                    "affinity": gpu_node_affinity(cluster),
                    # dcgm-exporter 4.1.1 values.yaml resources (empty; its comment suggests 100m and 128Mi)
                    "resources": {"requests": {"cpu": "50m", "memory": "128Mi"}},
                    "serviceMonitor": {
                        "enabled": True,
                        "honorLabels": True,
                        "interval": fleet.monitoring.scrape_interval,
                    },
                    **(exporter_values or {}),
                },
                pulumi.ResourceOptions(parent=self, depends_on=[self.prometheus, critical]),
                registry=cluster.registry,
            )
        self.federation: FederationEndpoint | None = None
        if not cluster.central:
            if not settings.federation_source_ranges:
                pulumi.log.warn(
                    f"{name}: gpu-fleet:federationSourceRanges is not set: the federation endpoint accepts "
                    "connections from any address (mTLS still required). Admit only the central cluster's egress: "
                    f"pulumi config set --stack {name} --path 'gpu-fleet:federationSourceRanges[0]' <CIDR>"
                )
            self.federation = FederationEndpoint(
                name,
                monitoring_ns,
                PROMETHEUS_URL,
                settings.federation_source_ranges,
                federated_selectors(fleet),
                opts=child,
                node_selector=cluster.system_selector,
                registry=cluster.registry,
            )
        self.register_outputs({"benchmark_namespace": self.benchmark_namespace})

    @staticmethod
    def _alert_config(cluster: Cluster, settings: ComponentSettings) -> Any:
        """The central Alertmanager's configuration from the secret ``gpu-fleet:alertReceiver`` (kept secret), or
        the default with a warning: without a receiver, FederatedClusterDown and the benchmark alerts reach no one."""
        if settings.alert_receiver is None:
            pulumi.log.warn(
                f"{cluster.name}: gpu-fleet:alertReceiver is not set: alerts such as FederatedClusterDown reach no "
                "one. Set one Alertmanager receiver as JSON: pulumi config set --secret gpu-fleet:alertReceiver "
                '\'{"name": "team", "webhook_configs": [{"url": "https://..."}]}\''
            )
            return None

        def config(text: str) -> dict[str, Any]:
            # offline, the encrypted value cannot be read: a stand-in receiver shows where it goes
            receiver = OFFLINE_RECEIVER if text == settings.secret_placeholder else parse_alert_receiver(text)
            return alertmanager_config(receiver)

        return settings.alert_receiver.apply(config)

    def _alert_secret(
        self, cluster: Cluster, settings: ComponentSettings, namespace: pulumi.Input[str], opts: pulumi.ResourceOptions
    ) -> k8s.core.v1.Secret:
        """The central Alertmanager's configuration (receiver included) as a Secret of its own."""
        config = self._alert_config(cluster, settings)
        text = (
            pulumi.Output.secret(config).apply(prometheus.to_yaml)
            if config is not None
            else prometheus.to_yaml(alertmanager_config(None))
        )
        return k8s.core.v1.Secret(
            f"{cluster.name}-alertmanager-config",
            metadata={"name": ALERTMANAGER_CONFIG_SECRET, "namespace": namespace},
            type="Opaque",
            string_data={"alertmanager.yaml": text},
            opts=opts,
        )

    @staticmethod
    def _grafana_admin(
        cluster: Cluster, settings: ComponentSettings, namespace: pulumi.Input[str], opts: pulumi.ResourceOptions
    ) -> pulumi.Output[str]:
        """The Secret with the central Grafana's admin password: ``gpu-fleet:grafanaAdminPassword``, or one
        generated and kept in the stack's state (exported as the secret ``grafana_admin_password``)."""
        password = settings.grafana_admin_password
        if password is None:
            generator = random.Provider(f"{cluster.name}-random", opts=pulumi.ResourceOptions(parent=opts.parent))
            password = random.RandomPassword(
                f"{cluster.name}-grafana-admin",
                length=32,
                special=False,
                opts=pulumi.ResourceOptions(parent=opts.parent, provider=generator),
            ).result
        k8s.core.v1.Secret(
            f"{cluster.name}-grafana-admin",
            metadata={"name": GRAFANA_ADMIN_SECRET, "namespace": namespace},
            type="Opaque",
            string_data={"admin-user": GRAFANA_ADMIN_USER, "admin-password": pulumi.Output.secret(password)},
            opts=opts,
        )
        return pulumi.Output.secret(password)

    def _federation_sources(
        self,
        cluster: Cluster,
        fleet: Fleet,
        settings: ComponentSettings,
        namespace: pulumi.Input[str],
        child: pulumi.ResourceOptions,
    ) -> tuple[list[pulumi.Output[dict[str, Any]]], list[str]]:
        """One Secret and one federation scrape job per other cluster, learned through its stack's outputs."""
        selectors = federated_selectors(fleet)
        jobs = []
        secrets = []
        for leaf in fleet.clusters.values():
            if leaf.central:
                continue
            ref = pulumi.StackReference(f"{settings.stack_reference_prefix}/{leaf.name}", opts=child)
            secret_name = f"federation-{leaf.name}"
            k8s.core.v1.Secret(
                f"{cluster.name}-federation-{leaf.name}",
                metadata={"name": secret_name, "namespace": namespace},
                type="Opaque",
                string_data={
                    "ca.crt": ref.require_output("federation_ca"),
                    "tls.crt": ref.require_output("federation_client_cert"),
                    "tls.key": ref.require_output("federation_client_key"),
                },
                opts=child,
            )
            secrets.append(secret_name)
            files = f"{SECRETS_DIR}/{secret_name}"

            def job(address: str, leaf: Cluster = leaf, files: str = files) -> dict[str, Any]:
                target = prometheus.FederationTarget(
                    cluster=leaf.name,
                    cloud=leaf.cloud,
                    address=address,
                    server_name=server_name(leaf.name),
                    ca_file=f"{files}/ca.crt",
                    cert_file=f"{files}/tls.crt",
                    key_file=f"{files}/tls.key",
                )
                interval = fleet.monitoring.federation_interval
                return prometheus.federation_scrape_config(
                    target, selectors, interval=interval, timeout=prometheus.federation_timeout(interval)
                )

            jobs.append(ref.require_output("federation_address").apply(job))
        # The list itself, not Output.all(*jobs): all() would unwrap every job deeply again, one Output per
        # nested value (tens of thousands in a large fleet); the engine resolves each job where it stands.
        return jobs, secrets
