"""The infra stack every cluster gets: namespaces and quotas, Prometheus, the GPU device plugin and exporter.

Deployed through the cluster's Kubernetes provider (``opts.providers``). The central cluster's Prometheus
also federates every other cluster (components/federation.py, fleet/federation.py).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.deployment import PART_OF
from components.federation import SECRETS_DIR, FederationEndpoint, server_name
from components.images import helm_release
from components.taints import toleration
from fleet import federation
from fleet.policy import Cluster, Fleet
from fleet.settings import StackSettings

MONITORING_NS = "monitoring"
BENCHMARK_NS = "benchmarks"
CRITICAL_PRIORITY = ("system-node-critical", "system-cluster-critical")
RELEASE = "kps"  # kube-prometheus-stack release name; its Prometheus service is kps-prometheus
PROMETHEUS_URL = f"http://{RELEASE}-prometheus.{MONITORING_NS}.svc:9090"


def gpu_tolerations(cluster: Cluster) -> list[dict[str, str]]:
    """Tolerations for DaemonSets that must run on every GPU node: each accelerator taint and spot taint."""
    seen: dict[str, dict[str, str]] = {}
    for pool in cluster.pools:
        for taint in pool.pod_tolerations:
            seen[taint.as_string()] = toleration(taint)
    return list(seen.values())


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
        for pool in cluster.pools
        if pool.accelerator.is_nvidia
    ]
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}


def benchmark_quota(cluster: Cluster) -> dict[str, str]:
    """ResourceQuota of the benchmark namespace: accelerators up to what the pools can hold at most."""
    totals: dict[str, int] = defaultdict(int)
    for pool in cluster.pools:
        totals[pool.resource] += pool.max_nodes * pool.accelerators_per_node
    hard = {f"requests.{res}": str(n) for res, n in sorted(totals.items())}
    hard.update({"count/jobs.batch": "200", "count/cronjobs.batch": "50", "pods": "200"})
    return hard


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
    """
    mon = fleet.monitoring
    selectors_nil = {
        f"{kind}SelectorNilUsesHelmValues": False
        for kind in ("podMonitor", "serviceMonitor", "rule", "probe", "scrapeConfig")
    }
    spec: dict[str, Any] = {
        "externalLabels": federation.leaf_external_labels(cluster.name, cluster.cloud)
        if not cluster.central
        else {"fleet_role": "central"},
        "scrapeInterval": mon.scrape_interval,
        "retention": mon.central_retention if cluster.central else mon.leaf_retention,
        **selectors_nil,
        "resources": {"requests": {"cpu": "200m", "memory": "1Gi"}},
    }
    system = cluster.system_selector
    rules: dict[str, Any] = {"gpufleet-gpu-aggregates": federation.leaf_recording_rules()}
    if cluster.central:
        claim: dict[str, Any] = {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": mon.central_storage}},
        }
        if storage_class:
            claim["storageClassName"] = storage_class
        spec["storageSpec"] = {"volumeClaimTemplate": {"spec": claim}}
        spec["additionalScrapeConfigs"] = scrape_configs or []
        spec["secrets"] = secrets or []
        metrics = federation.workload_metrics(fleet.workloads)
        rules["gpufleet-federation-alerts"] = federation.central_alert_rules(metrics)
    values: dict[str, Any] = {
        "fullnameOverride": RELEASE,
        "prometheus": {"prometheusSpec": spec},
        "additionalPrometheusRulesMap": rules,
        "alertmanager": {"enabled": cluster.central},
        "grafana": {"enabled": cluster.central},
    }
    if system:
        spec["nodeSelector"] = system
        values["alertmanager"]["alertmanagerSpec"] = {"nodeSelector": system}
        values["grafana"]["nodeSelector"] = system
        values["prometheusOperator"] = {
            "nodeSelector": system,
            "admissionWebhooks": {"patch": {"nodeSelector": system}},
        }
        values["kube-state-metrics"] = {"nodeSelector": system}
    return values


class InfraStack(pulumi.ComponentResource):
    """Infra services of one cluster. ``benchmark_namespace`` is where the benchmark Jobs go."""

    TYPE = "gpufleet:index:InfraStack"

    def __init__(
        self,
        cluster: Cluster,
        fleet: Fleet,
        settings: StackSettings,
        opts: pulumi.ResourceOptions | None = None,
        exporter_values: dict[str, Any] | None = None,
    ):
        """``exporter_values``: the cloud's own dcgm-exporter values (``GpuCluster.gpu_exporter_values``)."""
        super().__init__(self.TYPE, f"{cluster.name}-infra", None, opts)
        child = pulumi.ResourceOptions(parent=self)
        name = cluster.name
        namespaces = {
            ns: k8s.core.v1.Namespace(
                f"{name}-ns-{ns}",
                metadata={"name": ns, "labels": {"app.kubernetes.io/part-of": PART_OF}},
                opts=child,
            )
            for ns in (MONITORING_NS, BENCHMARK_NS)
        }
        self.benchmark_namespace = namespaces[BENCHMARK_NS].metadata["name"]
        k8s.core.v1.ResourceQuota(
            f"{name}-benchmark-quota",
            metadata={"name": "benchmarks", "namespace": self.benchmark_namespace},
            spec={"hard": benchmark_quota(cluster)},
            opts=child,
        )
        k8s.core.v1.LimitRange(
            f"{name}-benchmark-limits",
            metadata={"name": "benchmarks", "namespace": self.benchmark_namespace},
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
            opts=child,
        )
        monitoring_ns = namespaces[MONITORING_NS].metadata["name"]
        scrape_configs, secrets = (
            self._federation_sources(cluster, fleet, settings, monitoring_ns, child)
            if cluster.central
            else (None, None)
        )
        self.prometheus = helm_release(
            f"{name}-prometheus",
            "kube-prometheus-stack",
            RELEASE,
            monitoring_ns,
            prometheus_values(cluster, fleet, scrape_configs, secrets, settings.storage_class),
            child,
            timeout=900,
        )
        nvidia_pools = [p for p in cluster.pools if p.accelerator.is_nvidia]
        tolerations = gpu_tolerations(cluster)
        if any(p.needs_device_plugin for p in cluster.pools):
            helm_release(
                f"{name}-nvidia-device-plugin",
                "nvidia-device-plugin",
                "nvidia-device-plugin",
                "kube-system",
                {"tolerations": tolerations, "affinity": gpu_node_affinity(cluster)},
                child,
            )
        if nvidia_pools:
            # The chart gives its pods priorityClassName system-node-critical (it cannot be unset: the template
            # defaults an empty value to it; NVIDIA/dcgm-exporter@4.2.3-4.1.1 deployment/templates/daemonset.yaml).
            # GKE admits pods of that class only in namespaces with a matching ResourceQuota (its own is in
            # kube-system: gcp-critical-pods; openservicemesh/osm#4408, open-policy-agent/gatekeeper#1120), so the
            # monitoring namespace gets one, sized to one exporter per GPU node at most.
            critical = k8s.core.v1.ResourceQuota(
                f"{name}-monitoring-critical-pods",
                metadata={"name": "critical-pods", "namespace": monitoring_ns},
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
                monitoring_ns,
                {
                    "tolerations": tolerations,
                    "affinity": gpu_node_affinity(cluster),
                    "serviceMonitor": {
                        "enabled": True,
                        "honorLabels": True,
                        "interval": fleet.monitoring.scrape_interval,
                    },
                    **(exporter_values or {}),
                },
                pulumi.ResourceOptions(parent=self, depends_on=[self.prometheus, critical]),
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
                federation.match_selectors(federation.workload_metrics(fleet.workloads)),
                opts=child,
                node_selector=cluster.system_selector,
            )
        self.register_outputs({"benchmark_namespace": self.benchmark_namespace})

    def _federation_sources(
        self,
        cluster: Cluster,
        fleet: Fleet,
        settings: StackSettings,
        namespace: pulumi.Input[str],
        child: pulumi.ResourceOptions,
    ) -> tuple[list[pulumi.Output[dict[str, Any]]], list[str]]:
        """One Secret and one federation scrape job per other cluster, learned through its stack's outputs."""
        selectors = federation.match_selectors(federation.workload_metrics(fleet.workloads))
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
                target = federation.FederationTarget(
                    cluster=leaf.name,
                    cloud=leaf.cloud,
                    address=address,
                    server_name=server_name(leaf.name),
                    ca_file=f"{files}/ca.crt",
                    cert_file=f"{files}/tls.crt",
                    key_file=f"{files}/tls.key",
                )
                return federation.federation_scrape_config(
                    target, selectors, interval=fleet.monitoring.federation_interval
                )

            jobs.append(ref.require_output("federation_address").apply(job))
        # The list itself, not Output.all(*jobs): all() would unwrap every job deeply again, one Output per
        # nested value (tens of thousands in a large fleet); the engine resolves each job where it stands.
        return jobs, secrets
