"""The fleet's namespaces on every cluster: each with its Pod Security level (and, below `restricted`, the reason),
and the benchmark namespaces' ResourceQuota and LimitRange."""

from __future__ import annotations

from collections import defaultdict

import pulumi
import pulumi_kubernetes as k8s

from components.kubernetes.deployment import FLEET_PART_OF
from components.kubernetes.pod_security import namespace_labels
from fleet.model.core import pod_contract
from fleet.model.core.clusters import Cluster
from fleet.model.core.fleet import Fleet
from fleet.model.queues.queued_sweeps import runs_trainer

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


def fleet_namespaces(cluster: Cluster, fleet: Fleet, queue_benchmarks: bool = False) -> list[str]:
    """The namespaces the fleet makes on ``cluster``: monitoring, node agents and benchmarks always; the root
    benchmarks' where a workload needs root; the runners' and CI jobs' where a runner runs; Trainer's and Kueue's
    where Trainer runs (sweeps, queued sweep points), Kueue's where the fleet's queues reach or the benchmarks queue
    (``queue_benchmarks``)."""
    wanted = [MONITORING_NS, NODE_AGENTS_NS, pod_contract.BENCHMARK_NAMESPACE]
    if any(b.workload.spec.needs_root for b in fleet.benchmarks(cluster)):
        wanted.append(pod_contract.ROOT_BENCHMARK_NAMESPACE)
    if fleet.runners_of(cluster):
        wanted += [pod_contract.RUNNER_NAMESPACE, pod_contract.CI_JOB_NAMESPACE]
    if runs_trainer(fleet, cluster):
        wanted += [pod_contract.TRAINER_NAMESPACE, pod_contract.KUEUE_NAMESPACE]
    elif (fleet.dispatch and fleet.dispatch.role(cluster.name)) or queue_benchmarks:
        wanted.append(pod_contract.KUEUE_NAMESPACE)
    return wanted


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


def benchmark_quota(cluster: Cluster) -> dict[str, str]:
    """ResourceQuota of the benchmark namespace: accelerators up to what the card and sweep pools can hold at most
    (not the CI pools, where no benchmark may run)."""
    totals: dict[str, int] = defaultdict(int)
    for pool in cluster.pools + cluster.sweep_pools:
        totals[pool.resource] += pool.max_nodes * pool.units_per_node
    hard = {f"requests.{res}": str(n) for res, n in sorted(totals.items())}
    hard.update({"count/jobs.batch": "200", "count/cronjobs.batch": "50", "pods": "200"})
    return hard


#: A benchmark namespace's LimitRange for a container: the limits it gets when it names none (a request above one of
#: them is refused: requests must not exceed limits), the requests it gets when it names none, and the most it may have.
CONTAINER_LIMITS = {
    "default": {"cpu": "1", "memory": "1Gi"},
    "defaultRequest": {"cpu": "100m", "memory": "128Mi"},
    "max": {"cpu": "64", "memory": "512Gi"},
}


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
        spec={"limits": [{"type": "Container", **CONTAINER_LIMITS}]},
        opts=opts,
    )
