"""The Pulumi program: one stack builds one cluster of the fleet with everything that runs on it."""

from __future__ import annotations

import sys
from pathlib import Path

import pulumi

from components.clusters.cluster import GpuCluster
from components.clusters.version_tags import tag_minor
from components.kubernetes.benchmark import WorkloadJobs
from components.kubernetes.images import charts_from, missing_chart_archives
from components.kubernetes.infra import ClusterServices
from components.kubernetes.kueue_metrics import kueue_metrics_scrape
from components.kubernetes.multikueue import (
    KUBECONFIG_OUTPUT,
    QueueManager,
    QueueWorker,
    dispatched_kinds,
    watched_kinds,
)
from components.kubernetes.namespaces import MONITORING_NS
from components.kubernetes.network_policy import from_namespace
from components.kubernetes.preview_access import preview_access
from components.kubernetes.prometheus_stack import PROMETHEUS_ACCOUNT, PROMETHEUS_POD_LABELS
from components.kubernetes.queued_jobs import QueuedJobs
from components.kubernetes.queued_sweeps import QueuedSweepJobs, QueuedSweepRuntimes
from components.kubernetes.runners import GitLabRunners
from components.kubernetes.sweeps import SweepJobs
from components.kubernetes.training import KUEUE_VISIBILITY_PORT
from components.kubernetes.training import WEBHOOK_PORT as TRAINING_WEBHOOK_PORT
from fleet.model.benchmark_queue.quotas import queued_pools
from fleet.model.core.clouds import cloud_rules
from fleet.model.core.clusters import Cluster, pool_resource_name
from fleet.model.core.errors import InputError
from fleet.model.core.fleet import Fleet
from fleet.model.core.stack_settings import storage_class_missing
from fleet.model.core.workloads import WORKLOADS_DIR
from fleet.model.core.yaml_source import read_yaml
from fleet.model.loader import POLICY_FILE, load_fleet_cached
from fleet.model.queues.checks import managed_by_problem
from fleet.model.queues.queued_sweeps import manager_watches_trainjobs, queue_quota
from fleet.program.settings import CONFIG_NAMESPACE, OFFLINE_PLAN_KEY, StackSettings, config_problem


def check_storage_class(cluster: Cluster, settings: StackSettings, has_default: bool) -> None:
    """Refuse a central cluster without a default StorageClass whose stack names none (``storage_class_missing``)."""
    missing = storage_class_missing(cluster, settings.storage_class, has_default)
    if missing:
        raise InputError([config_problem(f"{CONFIG_NAMESPACE}:storageClass", missing)])


def check_chart_cache(settings: StackSettings) -> None:
    """Refuse a ``gpu-fleet:chartCache`` that lacks an archive of a pinned chart, naming each."""
    if settings.chart_cache:
        missing = missing_chart_archives(settings.chart_cache)
        if missing:
            raise InputError([config_problem(f"{CONFIG_NAMESPACE}:chartCache", m) for m in missing])


# kubernetes-sigs/kueue v0.19.2 README.md: "Requires Kubernetes 1.29 or newer" (its CRDs use selectableFields)
KUEUE_MIN_KUBERNETES = (1, 29)


def _kubernetes_version(cluster: Cluster, settings: StackSettings) -> tuple[str, dict | None]:
    """The cluster's Kubernetes version as written (on Magnum the stack's ``kubeTag``, elsewhere the policy's
    ``kubernetes_version``), and the stack's Magnum settings when they decide it."""
    from_stack = cloud_rules(cluster.cloud).kubernetes_version_from_stack
    magnum = settings.magnum if from_stack and isinstance(settings.magnum, dict) else None
    return (str(magnum.get("kubeTag", "")) if magnum else cluster.kubernetes_version), magnum


def kueue_supported(cluster: Cluster, settings: StackSettings) -> bool:
    """Whether Kueue can run on the cluster: Kubernetes 1.29 or newer (a version that names no minor: assumed)."""
    minor = tag_minor(_kubernetes_version(cluster, settings)[0])
    return minor is None or minor >= KUEUE_MIN_KUBERNETES


def queues_benchmarks(fleet: Fleet, cluster: Cluster, settings: StackSettings) -> bool:
    """Whether the cluster's benchmark Jobs wait their turn in its Kueue (fleet/model/benchmark_queue/): wherever it
    runs any and Kueue can run. Below Kubernetes 1.29 they start at once, as before, with a warning; sweeps and the
    fleet's queues are refused there instead (``check_kueue_version``)."""
    if not fleet.workload_jobs(cluster):
        return False
    if kueue_supported(cluster, settings):
        return True
    pulumi.log.warn(
        f"{cluster.name}: its benchmark Jobs all start at once instead of waiting their turn per card: that takes "
        f"Kueue, which needs Kubernetes 1.29 or newer (kueue v0.19.2), and the cluster runs "
        f"{_kubernetes_version(cluster, settings)[0]}"
    )
    return False


def check_kueue_version(fleet: Fleet, cluster: Cluster, settings: StackSettings) -> None:
    """Refuse a cluster that runs Kueue for sweeps or the fleet's queues below Kubernetes 1.29: on Magnum the stack's
    ``kubeTag`` decides the version, elsewhere the policy's ``kubernetes_version``."""
    text, magnum = _kubernetes_version(cluster, settings)
    if kueue_supported(cluster, settings):
        return
    message = (
        f"{cluster.name} runs Kueue (scaling sweeps or the fleet's queues), which needs Kubernetes 1.29 or newer "
        f"(kueue v0.19.2), but runs {text}"
    )
    if magnum:
        raise InputError([config_problem(f"{CONFIG_NAMESPACE}:magnum", f"{message}: set a newer kubeTag", "kubeTag")])
    where = ("clusters", cluster.cloud, cluster.name, "kubernetes_version")
    raise InputError([read_yaml(fleet.file).problem(where, f"{message}: raise kubernetes_version")])


def check_manager_version(fleet: Fleet, cluster: Cluster, settings: StackSettings) -> None:
    """Refuse a queues' manager whose Kubernetes drops a Job's ``managedBy`` (fleet/model/queues/
    ``managed_by_problem``; ``validate`` says the same, fleet/tools/checks/stack_checks.py)."""
    text, magnum = _kubernetes_version(cluster, settings)
    problem = managed_by_problem(cluster.name, tag_minor(text), text)
    if problem is None:
        return
    if magnum:
        raise InputError([config_problem(f"{CONFIG_NAMESPACE}:magnum", f"{problem}: set a newer kubeTag", "kubeTag")])
    where = ("clusters", cluster.cloud, cluster.name, "kubernetes_version")
    raise InputError([read_yaml(fleet.file).problem(where, f"{problem}: raise kubernetes_version")])


def build(fleet: Fleet, stack: str, settings: StackSettings) -> GpuCluster:
    """Declare every resource of the stack ``stack`` (a cluster name) and export its outputs."""
    cluster = fleet.cluster(stack)
    component_class = GpuCluster.for_cloud(cluster.cloud)
    check_storage_class(cluster, settings, component_class.has_default_storage_class(cluster))
    component = component_class(cluster, settings)
    needs_kueue = bool(fleet.sweep_points(cluster)) or bool(fleet.dispatch and fleet.dispatch.role(cluster.name))
    if needs_kueue:
        check_kueue_version(fleet, cluster, settings)
    if fleet.dispatch is not None and fleet.dispatch.manager == cluster.name:
        check_manager_version(fleet, cluster, settings)
    queue_benchmarks = queues_benchmarks(fleet, cluster, settings)
    kueue_runs = needs_kueue or queue_benchmarks
    if kueue_runs:
        # the control plane calls Kueue's and the trainer's webhooks and Kueue's visibility API on their pods: opened
        # (where the cloud's network closes them) before anything in the cluster, which depends on the component
        component.open_to_control_plane("sweep-webhooks", [TRAINING_WEBHOOK_PORT, KUEUE_VISIBILITY_PORT])
    on_cluster = pulumi.ResourceOptions(providers=[component.provider], depends_on=[component])
    infra = ClusterServices(
        cluster,
        fleet,
        settings,
        opts=on_cluster,
        exporter_values=component.gpu_exporter_values(),
        queue_benchmarks=queue_benchmarks,
    )
    preview = component.preview_user()
    if preview:
        preview_access(
            cluster.name,
            preview,
            list(infra.namespaces),
            # after the namespaces its RoleBindings live in
            pulumi.ResourceOptions(
                parent=infra, provider=component.provider, depends_on=list(infra.namespaces.values())
            ),
        )
    sweeps = fleet.sweep_points(cluster)
    # Kueue's Job webhooks (failurePolicy Fail) cover the benchmarks' namespace where it runs (training.py
    # managedJobsNamespaceSelector): a Job created before its webhook answers is refused, so Jobs come after Kueue
    kueue = [infra.kueue] if infra.kueue is not None else []
    manager = queues(fleet, cluster, component, infra, settings)
    if manager is not None and fleet.queued_jobs():
        # after the LocalQueues: a Job naming a queue that does not exist yet would wait as inadmissible
        QueuedJobs(
            cluster,
            [(job, fleet.queued_pools(job), fleet.queued_affinity(job)) for job in fleet.queued_jobs()],
            infra.benchmark_namespace,
            pulumi.ResourceOptions(providers=[component.provider], depends_on=[infra.prometheus, *kueue, manager]),
        )
    if manager is not None and fleet.queued_points():
        # after the LocalQueues, and after Trainer (its CRDs and webhooks) and Kueue's TrainJob webhook
        QueuedSweepJobs(
            cluster,
            [(p, fleet.queued_sweeps.pools_of(p), fleet.queued_point_affinity(p)) for p in fleet.queued_points()],
            infra.benchmark_namespace,
            pulumi.ResourceOptions(
                providers=[component.provider],
                depends_on=[*kueue, manager, *([infra.training.trainer] if infra.training else [])],
            ),
        )
    held = fleet.queued_points_on(cluster)
    workload_jobs = WorkloadJobs(
        cluster,
        fleet.workload_jobs(cluster),
        infra.benchmark_namespace,
        opts=pulumi.ResourceOptions(providers=[component.provider], depends_on=[infra.prometheus, *kueue]),
        credentials=settings.workload_secrets,
        root_namespace=infra.root_benchmark_namespace,
        queue=queued_pools(fleet, cluster) if queue_benchmarks else (),
        sweeping=list({p.workload.name: p.workload for p in sweeps}.values()),
        dispatched=list(
            {
                **{j.workload.name: j.workload for j in fleet.dispatched_to(cluster)},
                **{p.workload.name: p.workload for p, _ in held},
            }.values()
        ),
    )
    if held and fleet.dispatch is not None and infra.training is not None:
        # the runtimes the TrainJobs MultiKueue may copy here name, the manager's own
        QueuedSweepRuntimes(
            cluster,
            fleet.clusters[fleet.dispatch.manager],
            [(p, fleet.queued_sweeps.pools_of(p), fleet.queued_point_affinity(p)) for p, _ in held],
            infra.benchmark_namespace,
            pulumi.ResourceOptions(
                providers=[component.provider],
                depends_on=[infra.prometheus, infra.training.trainer, *workload_jobs.secrets.values()],
            ),
        )
    if sweeps and infra.training is not None:
        SweepJobs(
            cluster,
            sweeps,
            infra.benchmark_namespace,
            opts=pulumi.ResourceOptions(
                providers=[component.provider],
                depends_on=[
                    infra.prometheus,
                    infra.training.trainer,
                    *infra.training.local_queues,
                    *workload_jobs.secrets.values(),
                ],
            ),
        )  # fmt: skip
    runners = fleet.runners_of(cluster)
    if runners and infra.ci_namespaces is not None:
        GitLabRunners(
            cluster,
            runners,
            infra.ci_namespaces,
            settings.runner_tokens,
            opts=pulumi.ResourceOptions(providers=[component.provider], depends_on=[infra.prometheus]),
        )
        pulumi.export("ci_runners", {r.pool.card: {"tags": list(r.tags), "gitlab": r.gitlab_url} for r in runners})
    pulumi.export("cluster", cluster.name)
    pulumi.export("cloud", cluster.cloud)
    pulumi.export("location", cluster.location)
    pulumi.export("central", cluster.central)
    pulumi.export("node_pools", {pool.key: pool_resource_name(cluster, pool) for pool in cluster.all_pools})
    pulumi.export("kubeconfig", component.kubeconfig)
    if preview:  # the Kubernetes user the pull-request preview identity has here (docs/security.md)
        pulumi.export("preview_user", preview)
    if cluster.central:
        pulumi.export("grafana_admin_password", infra.grafana_admin_password)
    if infra.federation is not None:
        pulumi.export("federation_address", infra.federation.address)
        pulumi.export("federation_server_name", infra.federation.server_name)
        pulumi.export("federation_ca", infra.federation.ca_pem)
        pulumi.export("federation_client_cert", infra.federation.client_cert)
        pulumi.export("federation_client_key", infra.federation.client_key)
    return component


def queues(
    fleet: Fleet, cluster: Cluster, component: GpuCluster, infra: ClusterServices, settings: StackSettings
) -> QueueManager | None:
    """The cluster's part in the fleet's queues: the manager's MultiKueue objects, reading each worker's kubeconfig from
    its stack, or a worker's queues and the manager's identity, whose kubeconfig it exports as a secret. Returns the
    manager's component on the manager."""
    if fleet.dispatch is None or infra.queue_role is None or infra.kueue is None or infra.kueue_namespace is None:
        return None
    opts = pulumi.ResourceOptions(providers=[component.provider], depends_on=[infra.kueue])
    # the cluster's Prometheus scrapes its Kueue: on the manager (the central) the dispatch and admission metrics, on
    # a worker the wait from admission to running pods, which the central federates (docs/queues.md)
    kueue_metrics_scrape(
        cluster.name,
        infra.kueue_namespace,
        PROMETHEUS_ACCOUNT,
        MONITORING_NS,
        from_namespace(MONITORING_NS, PROMETHEUS_POD_LABELS),
        opts,
    )
    if infra.queue_role == "manager":
        return QueueManager(
            cluster,
            fleet.dispatch,
            fleet.clusters,
            infra.kueue_namespace,
            infra.benchmark_namespace,
            settings.stack_reference_prefix,
            opts,
            quotas={q.name: queue_quota(fleet, q) for q in fleet.dispatch.queues},
        )
    elif infra.queue_role == "worker":
        queues_here = fleet.dispatch.queues_of(cluster.name)
        worker = QueueWorker(
            cluster,
            queues_here,
            infra.kueue_namespace,
            infra.benchmark_namespace,
            component.kubeconfig,
            opts,
            sweep_pools={q.name: fleet.queued_sweeps.sweep_pools_of(q.name, cluster.name) for q in queues_here},
            kinds=dispatched_kinds(bool(fleet.queued_points())),
            watched=watched_kinds(manager_watches_trainjobs(fleet)),
            token=settings.multikueue_token,
            placeholder=settings.secret_placeholder,
        )
        if worker.kubeconfig is not None:
            pulumi.export(KUBECONFIG_OUTPUT, worker.kubeconfig)
    return None


def main() -> None:
    """Entry point of ``__main__.py``: load the policy, then build the current stack's cluster.

    Bad input (the policy, a workload, the stack's config) stops the program before it declares anything. Under
    ``pulumi up`` the problems are printed and the run fails without a traceback; under the offline plan the
    ``InputError`` goes up to the command line, which reports it the same way as any other bad input.
    """
    try:
        settings = StackSettings.read()
        policy = Path(settings.policy_file) if settings.policy_file else POLICY_FILE
        fleet = load_fleet_cached(policy, Path(settings.workloads_dir) if settings.workloads_dir else WORKLOADS_DIR)
        check_chart_cache(settings)
        with charts_from(settings.chart_cache):
            build(fleet, pulumi.get_stack(), settings)
    except InputError as exc:
        if pulumi.Config(CONFIG_NAMESPACE).get_bool(OFFLINE_PLAN_KEY):
            raise
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        raise pulumi.RunError(f"{len(exc.problems)} problem(s) in the input; nothing was deployed") from None
