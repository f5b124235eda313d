"""The training operator and gang admission of the scaling sweeps, on clusters that run a sweep only.

- **Kubeflow Trainer** 2.3.0 (chart ``kubeflow-trainer``, with its JobSet 0.12.0 subchart) runs each sweep point as a
  ``TrainJob`` (``trainer.kubeflow.org/v1alpha1``): a JobSet of ``numNodes`` pods, one process per node, with the
  ``jax`` policy's variables (components/kubernetes/sweeps.py). Trainer v2 is the maintained line; the v1 TFJob
  operator is kept on a release branch and Kueue deprecates its TFJob integration (docs/design/scaling-sweeps.md).
- **Kueue** 0.19.2 admits a job only when its quota fits all of its pods, and with ``waitForPodsReady`` evicts and
  requeues a job whose pods are not all running within the scale-up allowance, so a job's workers start together or
  not at all. The quota of each sweep pool is what the pool can hold at most (``max_nodes`` machines), so the
  sweep's points queue and run one after another when a pool is too small for all at once.
- ``blockAdmission`` is **off** (``BLOCK_ADMISSION``): it is one switch for the whole Kueue, and with it the scheduler
  admits nothing, in any ClusterQueue, while any admitted workload of any ClusterQueue is not PodsReady (kueue v0.19.2
  pkg/cache/scheduler/cache.go ``podsReadyForAllAdmittedWorkloads``, pkg/scheduler/scheduler.go; apis/config/v1beta2
  ``WaitForPodsReady.BlockAdmission``, default false): one queued Job waiting for a spot node from zero stopped every
  sweep, benchmark and queued job of its cluster for up to the allowance. What it guarded against, two half-started
  gangs holding each other's nodes, cannot happen within one ClusterQueue (its quota is what the pool holds at its
  maximum, so what it admits fits the pool at its maximum); it can where the pool cannot reach its maximum (a
  stock-out) or two ClusterQueues count one pool (docs/queues.md), and there ``waitForPodsReady`` evicts the jobs
  whose pods are not all running after the allowance and requeues them with a backoff.
- Kueue's ProvisioningRequest admission check is not used: on GKE it needs queued-provisioning (flex-start) node
  pools, which take no Spot VMs, and EKS and AKS have no managed ProvisioningRequest support (docs/sweeps.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import yaml

from components.kubernetes.images import helm_release
from fleet.model.core import pod_contract
from fleet.model.core.clusters import Cluster
from fleet.model.core.jobs import SweepPoint
from fleet.model.core.pools import GpuPool

KUEUE_API = "kueue.x-k8s.io/v1beta2"  # v1beta1 is served but deprecated at 0.19.2 (CRD bases)
# The frameworks Kueue manages here: TrainJob, and the JobSets it creates (kueue 0.19.2 integrations.frameworks).
KUEUE_FRAMEWORKS = ("trainer.kubeflow.org/trainjob", "jobset.x-k8s.io/jobset")
# On the queues' manager, TrainJob alone: Kueue's TrainJob integration follows the JobSets it makes by itself (kueue
# 0.19.2 pkg/controller/jobs/trainjob/trainjob_controller.go, the reconciler ``Owns`` JobSet; its docs, "Run A
# TrainJob", enable the TrainJob integration only), and an integrated JobSet would have the manager watch JobSets
# on every worker (components/kubernetes/multikueue.py ``watched_kinds``)
MANAGER_FRAMEWORKS = ("trainer.kubeflow.org/trainjob",)
# batch Jobs: the queued benchmarks and the fleet's queued Jobs (kueue 0.19.2 integrations.frameworks)
BATCH_JOB = "batch/job"
# The webhook port of all three controllers, which the API server calls (kueue and trainer config webhook.port,
# jobset templates/controller/deployment.yaml containerPort), and Kueue's visibility API server, which the chart
# always registers as an APIService (kueue 0.19.2 templates/visibility/apiservice_v1beta{1,2}.yaml, service.yaml;
# VisibilityOnDemand is on by default): unreachable, it breaks API discovery for kubectl, Helm and namespace deletion.
WEBHOOK_PORT = 9443
KUEUE_VISIBILITY_PORT = 8082
# Kueue gates the sweep jobs by accelerators; CPU and memory must be covered too (a request of a resource the
# ClusterQueue does not cover is not admitted), with quotas no sweep pool reaches: the nodes bound them.
# In the API server's canonical form (apimachinery resource.Quantity: 10000 is stored as "10k"): written "10000", the
# manager's ClusterQueues showed a change in every preview after up (found by the real tier's idle second preview).
UNBOUNDED = {"cpu": "10k", "memory": "100Ti"}
# waitForPodsReady.blockAdmission, off everywhere (the module's docstring)
BLOCK_ADMISSION = False


def namespace_selector(namespaces: Sequence[str]) -> dict[str, Any]:
    """A label selector of the namespaces named ``namespaces`` (by the name label the API server gives every namespace):
    ``matchLabels`` for one, ``In`` for several."""
    if len(namespaces) == 1:
        return {"matchLabels": {"kubernetes.io/metadata.name": namespaces[0]}}
    return {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": list(namespaces)}]}


def kueue_cluster_queue(
    namespace: str | Sequence[str], covered: Sequence[str], flavors: Sequence[tuple[str, dict[str, str]]]
) -> dict[str, Any]:
    """A Kueue ClusterQueue's spec: the jobs of ``namespace`` (or of each namespace named), first in first out as far as
    each fits, covering the ``covered`` resources with ``flavors`` in their order, each (flavor name, its quota by
    resource)."""
    return {
        "namespaceSelector": namespace_selector([namespace] if isinstance(namespace, str) else namespace),
        "queueingStrategy": "BestEffortFIFO",
        "resourceGroups": [
            {
                "coveredResources": sorted(covered),
                "flavors": [
                    {"name": name, "resources": [{"name": r, "nominalQuota": q} for r, q in sorted(quota.items())]}
                    for name, quota in flavors
                ],
            }
        ],
    }


def kueue_configuration(
    frameworks: Sequence[str] = KUEUE_FRAMEWORKS,
    *,
    wait_for_pods_ready: bool = True,
    block_admission: bool = BLOCK_ADMISSION,
    multikueue: dict[str, Any] | None = None,
    namespaces: Sequence[str] = (pod_contract.BENCHMARK_NAMESPACE,),
) -> dict[str, Any]:
    """Kueue's manager configuration (the chart takes it as one YAML string, replacing its default entirely).

    ``frameworks``: the job kinds it manages; ``wait_for_pods_ready``: evict and requeue a job whose pods are not all
    running within the scale-up allowance (``block_admission``: admit nothing anywhere while one admitted job's pods
    are not all running; off, see the module's docstring); ``multikueue``: the MultiKueue section of a queue manager
    (components/kubernetes/multikueue.py); ``namespaces``: where the jobs it manages are (the benchmarks', and the root
    benchmarks' where its Jobs queue)."""
    allowance = f"{pod_contract.SCALE_UP_ALLOWANCE_SECONDS // 60}m"
    config: dict[str, Any] = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "health": {"healthProbeBindAddress": ":8081"},
        "metrics": {"bindAddress": ":8443"},
        "webhook": {"port": WEBHOOK_PORT},
        "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
        # Kueue's Job webhooks (failurePolicy Fail) only where the fleet's jobs go: the chart takes this selector for
        # them (kueue 0.19.2 templates/webhook/manifests.yaml), so Jobs elsewhere never wait on Kueue. Its reconciler
        # also ignores a job outside it, queue-name label or not (kueue v0.19.2 pkg/controller/jobframework/
        # reconciler.go ReconcileGenericJob: "Namespace not opted in for Kueue management"), so a namespace whose
        # benchmarks queue must be in it
        "managedJobsNamespaceSelector": namespace_selector(namespaces),
    }
    if wait_for_pods_ready:
        # all workers running within the scale-up allowance, or the job is evicted and requeued (5 times at most); on
        # a MultiKueue worker the eviction sends the job back to the manager, which dispatches it again from the
        # queue's first cluster (the eviction clears its nomination: kueue v0.19.2 pkg/workload/evict/evict.go)
        config["waitForPodsReady"] = {
            "timeout": allowance,
            "recoveryTimeout": allowance,
            "blockAdmission": block_admission,
            "requeuingStrategy": {"timestamp": "Eviction", "backoffLimitCount": 5, "backoffBaseSeconds": 60},
        }
    if multikueue is not None:
        config["multiKueue"] = multikueue
    config.update(
        {
            "integrations": {"frameworks": list(frameworks)},
            # Kept from the chart's default configuration, which this one replaces as a whole (kueue 0.19.2 values.yaml
            # managerConfig.controllerManagerConfigYaml): the reconcilers' concurrency, and the API client's rate,
            # which is also Kueue's own default (kueue v0.19.2 apis/config/v1beta2/defaults.go lines 44-45). Chosen
            # from the dispatch-rate benchmark (docs/performance.md, "How fast the fleet's queues dispatch"): a
            # worker launched 4.7 pods/s at 300/500, 1.9 at 20/40 and 0.6 at 5/10, and a manager at 5/10 dispatched
            # 0.4 Jobs/s; higher cannot help, dispatch to a worker (1.2 Jobs/s) being bound by the manager's clients
            # to the workers (client-go's 5 QPS, which this setting does not reach: multikueue.py).
            "clientConnection": {"qps": 300, "burst": 500},
            "controller": {
                "groupKindConcurrency": {
                    "Job.batch": 5,
                    "Pod": 5,
                    "Workload.kueue.x-k8s.io": 10,
                    "LocalQueue.kueue.x-k8s.io": 5,
                    "ClusterQueue.kueue.x-k8s.io": 5,
                    "ResourceFlavor.kueue.x-k8s.io": 1,
                }
            },
        }
    )
    return config


def kueue_release(
    cluster: Cluster, namespace: pulumi.Input[str], configuration: dict[str, Any], opts: pulumi.ResourceOptions
) -> pulumi.Resource:
    """Kueue 0.19.2 (chart ``kueue``) on the system pool, with ``configuration`` as its whole manager configuration."""
    return helm_release(
        f"{cluster.name}-kueue",
        "kueue",
        "kueue",
        namespace,
        {
            "controllerManager": {"nodeSelector": cluster.system_selector},
            "managerConfig": {"controllerManagerConfigYaml": yaml.safe_dump(configuration, sort_keys=False)},
        },
        opts,
        registry=cluster.registry,
        timeout=900,
    )


def flavor_name(pool: GpuPool) -> str:
    """The Kueue ResourceFlavor of a pool: its pool name (``gpu-l4``, ``gpu-l4-x8``)."""
    return pool.name


def sweep_pools(points: Sequence[SweepPoint]) -> list[GpuPool]:
    """The pools the points run on, each once, the sweep pools first."""
    seen: dict[str, GpuPool] = {}
    for point in points:
        seen.setdefault(point.pool.name, point.pool)
    return sorted(seen.values(), key=lambda p: not p.sweep)


def cluster_queue_spec(pool: GpuPool, benchmark_namespace: str) -> dict[str, Any]:
    """The ClusterQueue of the sweep points on ``pool``: its flavor alone, its accelerators capped at what it holds.

    One ClusterQueue per pool, not one for all: Kueue matches a flavor on that flavor's own label keys only and, when
    a flavor's quota does not fit, tries the next one whatever the flavor fungibility says (kueue v0.19.2
    pkg/scheduler/flavorassigner/flavorassigner.go: ``checkFlavorForPodSets`` keeps ``flavorLabelKeys :=
    sets.KeySet(flavor.Spec.NodeLabels)``; ``shouldTryNextFlavor`` answers true for ``noFit``). A card's own pool's
    flavor labels ``gpu=<card>`` alone, which the points of its sweep pools match too: in one ClusterQueue, a point
    whose sweep pool is full was admitted on the card pool's flavor, charged to that pool (holding its points back)
    while its pods waited for sweep-pool nodes until ``waitForPodsReady`` evicted it. In a queue of its own pool's
    flavor alone, such a point waits for its own pool."""
    quota = {pool.resource: str(pool.max_nodes * pool.accelerators_per_node), **UNBOUNDED}
    return kueue_cluster_queue(benchmark_namespace, list(quota), [(flavor_name(pool), quota)])


class TrainingOperators(pulumi.ComponentResource):
    """Kubeflow Trainer (with JobSet) and Kueue, plus the sweeps' queue: the flavors, ClusterQueue and LocalQueue (none
    without ``points``: a queues' manager or worker that runs only queued sweep points)."""

    TYPE = "gpufleet:index:TrainingOperators"

    def __init__(
        self,
        cluster: Cluster,
        points: Sequence[SweepPoint],
        namespaces: tuple[pulumi.Input[str], pulumi.Input[str], pulumi.Input[str]],
        opts: pulumi.ResourceOptions | None = None,
        kueue_config: dict[str, Any] | None = None,
    ):
        """``namespaces``: the trainer's, Kueue's and the benchmarks' (where the jobs and their LocalQueue go);
        ``kueue_config``: Kueue's configuration when the cluster also works for the fleet's queues."""
        super().__init__(self.TYPE, f"{cluster.name}-training", None, opts)
        child = pulumi.ResourceOptions(parent=self)
        trainer_ns, kueue_ns, benchmark_ns = namespaces
        system = cluster.system_selector
        self.trainer = helm_release(
            f"{cluster.name}-kubeflow-trainer",
            "kubeflow-trainer",
            "kubeflow-trainer",
            trainer_ns,
            {
                # kubeflow-trainer 2.3.0 values.yaml manager.resources is empty: a modest request (jobset's chart
                # sets its own, 500m and 128Mi)
                "manager": {"nodeSelector": system, "resources": {"requests": {"cpu": "50m", "memory": "128Mi"}}},
                "jobset": {"install": True, "controller": {"nodeSelector": system}},
            },
            child,
            registry=cluster.registry,
            timeout=900,
        )
        self.kueue = kueue_release(cluster, kueue_ns, kueue_config or kueue_configuration(), child)
        after = pulumi.ResourceOptions(parent=self, depends_on=[self.kueue])
        # the sweeps' own queues where the cluster sweeps, one per pool (a worker that only runs queued sweep points
        # has none)
        self.local_queues: list[pulumi.Resource] = []
        if not points:
            self.register_outputs({})
            return
        for pool in sweep_pools(points):
            flavor = k8s.apiextensions.CustomResource(
                f"{cluster.name}-flavor-{pool.name}",
                api_version=KUEUE_API,
                kind="ResourceFlavor",
                metadata={"name": flavor_name(pool), "labels": {"app.kubernetes.io/part-of": "gpu-fleet"}},
                spec={"nodeLabels": pool.node_selector},
                opts=after,
            )
            queue = k8s.apiextensions.CustomResource(
                f"{cluster.name}-cluster-queue-{pool.name}",
                api_version=KUEUE_API,
                kind="ClusterQueue",
                metadata={
                    "name": pod_contract.sweep_cluster_queue(pool.name),
                    "labels": {"app.kubernetes.io/part-of": "gpu-fleet"},
                },
                spec=cluster_queue_spec(pool, pod_contract.BENCHMARK_NAMESPACE),
                opts=pulumi.ResourceOptions(parent=self, depends_on=[self.kueue, flavor]),
            )
            self.local_queues.append(
                k8s.apiextensions.CustomResource(
                    f"{cluster.name}-local-queue-{pool.name}",
                    api_version=KUEUE_API,
                    kind="LocalQueue",
                    metadata={"name": pod_contract.sweep_queue(pool.name), "namespace": benchmark_ns},
                    spec={"clusterQueue": pod_contract.sweep_cluster_queue(pool.name)},
                    opts=pulumi.ResourceOptions(parent=self, depends_on=[self.kueue, queue]),
                )
            )
        self.register_outputs({})
