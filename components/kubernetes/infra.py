"""The infra stack every cluster gets, as one component: the fleet's namespaces and their network policies, Kueue
where sweeps or queues need it, Prometheus, the GPU node agents and, on a leaf, the federation gateway.

Deployed through the cluster's Kubernetes provider (``opts.providers``). The central cluster's Prometheus
also federates every other cluster (components/kubernetes/federation.py, gateway.py,
fleet/model/monitoring/prometheus.py). Each part is a module of its own: namespaces.py, namespace_network_policies.py,
prometheus_stack.py, central_monitoring.py, federation.py, gpu_agents.py.
"""

from __future__ import annotations

from typing import Any

import pulumi

from components.kubernetes import dashboards
from components.kubernetes.central_monitoring import alert_secret, grafana_admin, grafana_role
from components.kubernetes.deployment import FLEET_PART_OF
from components.kubernetes.federation import federated_selectors, federation_sources
from components.kubernetes.gateway import FederationEndpoint
from components.kubernetes.gpu_agents import gpu_node_agents
from components.kubernetes.images import helm_release
from components.kubernetes.multikueue import dispatched_kinds, multikueue_settings
from components.kubernetes.namespace_network_policies import namespace_network_policies
from components.kubernetes.namespaces import (
    MONITORING_NS,
    NODE_AGENTS_NS,
    benchmark_limits,
    fleet_namespace,
    fleet_namespaces,
)
from components.kubernetes.operator_rbac import release_rbac
from components.kubernetes.prometheus_stack import PROMETHEUS_URL, RELEASE, prometheus_values
from components.kubernetes.training import (
    BATCH_JOB,
    KUEUE_FRAMEWORKS,
    MANAGER_FRAMEWORKS,
    TrainingOperators,
    kueue_configuration,
    kueue_release,
)
from components.settings import ComponentSettings
from fleet.model.core import pod_contract
from fleet.model.core.clusters import Cluster
from fleet.model.core.fleet import Fleet
from fleet.model.queues.queued_sweeps import manager_watches_trainjobs, runs_trainer


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
        queue_benchmarks: bool = False,
    ):
        """``exporter_values``: the cloud's own dcgm-exporter values (``GpuCluster.gpu_exporter_values``);
        ``queue_benchmarks``: the cluster's Kueue queues its benchmark Jobs (components/kubernetes/benchmark_queue.py),
        so it runs Kueue even without sweeps or the fleet's queues."""
        super().__init__(self.TYPE, f"{cluster.name}-infra", None, opts)
        child = pulumi.ResourceOptions(parent=self)
        name = cluster.name
        sweeps = fleet.sweep_points(cluster)
        # the cluster's part in the fleet's queues: manager, worker or none (components/kubernetes/multikueue.py)
        self.queue_role = fleet.dispatch.role(name) if fleet.dispatch else None
        trains = runs_trainer(fleet, cluster)
        namespaces = {ns: fleet_namespace(name, ns, child) for ns in fleet_namespaces(cluster, fleet, queue_benchmarks)}
        self.namespaces: dict[str, pulumi.Resource] = dict(namespaces)  # the fleet's namespaces here, by name
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
        # time, and the manager dispatches it again (from the queue's first cluster: docs/queues.md). Queued sweep
        # points: the manager dispatches TrainJobs too, and each worker runs them as a sweep cluster does (TrainJob
        # and JobSet)
        # A manager that sweeps its own cards integrates TrainJobs too, and watches them on every worker, which then
        # runs Trainer for its kinds (``manager_watches_trainjobs``); it integrates no JobSet (MANAGER_FRAMEWORKS)
        queued_points = bool(fleet.queued_points()) and self.queue_role is not None
        dispatched = dispatched_kinds(queued_points) if self.queue_role else {}
        watched = manager_watches_trainjobs(fleet) and self.queue_role == "worker"
        runs_trainjobs = bool(sweeps) or watched
        own = MANAGER_FRAMEWORKS if self.queue_role == "manager" else KUEUE_FRAMEWORKS
        # the queued benchmarks are batch Jobs (kueue 0.19.2 integrations.frameworks "batch/job"), in the benchmark
        # namespaces the cluster has
        benchmark_jobs = (BATCH_JOB,) if queue_benchmarks else ()
        frameworks = tuple(dict.fromkeys((*(own if runs_trainjobs else ()), *dispatched, *benchmark_jobs)))
        managed = [pod_contract.BENCHMARK_NAMESPACE]
        if queue_benchmarks and pod_contract.ROOT_BENCHMARK_NAMESPACE in namespaces:
            managed.append(pod_contract.ROOT_BENCHMARK_NAMESPACE)
        kueue_config = kueue_configuration(
            frameworks,
            wait_for_pods_ready=bool(sweeps) or self.queue_role == "worker",
            multikueue=multikueue_settings(fleet.dispatch) if self.queue_role == "manager" and fleet.dispatch else None,
            namespaces=managed,
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
        elif self.queue_role or queue_benchmarks:
            self.kueue = kueue_release(
                cluster, namespaces[pod_contract.KUEUE_NAMESPACE].metadata["name"], kueue_config, child
            )
        monitoring_ns = namespaces[MONITORING_NS].metadata["name"]
        agents_ns = namespaces[NODE_AGENTS_NS].metadata["name"]
        scrape_configs, secrets = (
            federation_sources(cluster, fleet, settings, monitoring_ns, child) if cluster.central else (None, None)
        )
        self.grafana_admin_password: pulumi.Output[str] | None = None
        if cluster.central:
            self.grafana_admin_password = grafana_admin(cluster, settings, monitoring_ns, child)
            grafana_role(cluster, monitoring_ns, child)
            dashboards.dashboard_config_maps(name, fleet, monitoring_ns, child)
        # the release's roles, with the operator's Secret rights in the monitoring namespace only
        before_release = release_rbac(
            f"{name}-kps", RELEASE, monitoring_ns, {"app.kubernetes.io/part-of": FLEET_PART_OF}, child
        )
        if cluster.central:
            before_release.append(alert_secret(cluster, settings, monitoring_ns, child))
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
        gpu_node_agents(cluster, fleet, agents_ns, self.prometheus, child, exporter_values)
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
                certificates=settings.federation_certificates,
            )
        self.register_outputs({"benchmark_namespace": self.benchmark_namespace})
