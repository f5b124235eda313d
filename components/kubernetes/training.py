"""The training operator and gang admission of the scaling sweeps, on clusters that run a sweep only.

- **Kubeflow Trainer** 2.3.0 (chart ``kubeflow-trainer``, with its JobSet 0.12.0 subchart) runs each sweep point as a
  ``TrainJob`` (``trainer.kubeflow.org/v1alpha1``): a JobSet of ``numNodes`` pods, one process per node, with the
  ``jax`` policy's variables (components/kubernetes/sweeps.py). Trainer v2 is the maintained line; the v1 TFJob
  operator is kept on a release branch and Kueue deprecates its TFJob integration (docs/design/scaling-sweeps.md).
- **Kueue** 0.19.2 admits a job only when its quota fits all of its pods, and with ``waitForPodsReady`` evicts and
  requeues a job whose pods are not all running within the scale-up allowance, so a job's workers start together or
  not at all; ``blockAdmission`` admits one job at a time until its pods are ready, so two half-started jobs never
  hold each other's nodes. The quota of each sweep pool is what the pool can hold at most (``max_nodes`` machines),
  so the sweep's points queue and run one after another when a pool is too small for all at once.
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
from fleet.model import pod_contract
from fleet.model.spec import Cluster, GpuPool
from fleet.model.sweeps import SweepPoint

KUEUE_API = "kueue.x-k8s.io/v1beta2"  # v1beta1 is served but deprecated at 0.19.2 (CRD bases)
CLUSTER_QUEUE = "gpu-fleet-sweeps"
# The frameworks Kueue manages here: TrainJob, and the JobSets it creates (kueue 0.19.2 integrations.frameworks).
KUEUE_FRAMEWORKS = ("trainer.kubeflow.org/trainjob", "jobset.x-k8s.io/jobset")
# The webhook port of all three controllers, which the API server calls (kueue and trainer config webhook.port,
# jobset templates/controller/deployment.yaml containerPort), and Kueue's visibility API server, which the chart
# always registers as an APIService (kueue 0.19.2 templates/visibility/apiservice_v1beta{1,2}.yaml, service.yaml;
# VisibilityOnDemand is on by default): unreachable, it breaks API discovery for kubectl, Helm and namespace deletion.
WEBHOOK_PORT = 9443
KUEUE_VISIBILITY_PORT = 8082
# Kueue gates the sweep jobs by accelerators; CPU and memory must be covered too (a request of a resource the
# ClusterQueue does not cover is not admitted), with quotas no sweep pool reaches: the nodes bound them.
UNBOUNDED = {"cpu": "10000", "memory": "100Ti"}


def kueue_cluster_queue(
    namespace: str, covered: Sequence[str], flavors: Sequence[tuple[str, dict[str, str]]]
) -> dict[str, Any]:
    """A Kueue ClusterQueue's spec: the jobs of ``namespace``, first in first out as far as each fits, covering the
    ``covered`` resources with ``flavors`` in their order, each (flavor name, its quota by resource)."""
    return {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
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
    block_admission: bool = True,
    multikueue: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Kueue's manager configuration (the chart takes it as one YAML string, replacing its default entirely).

    ``frameworks``: the job kinds it manages; ``wait_for_pods_ready``: evict and requeue a job whose pods are not all
    running within the scale-up allowance (``block_admission``: admit one job at a time until its pods run, as the
    sweeps need); ``multikueue``: the MultiKueue section of a queue manager (components/kubernetes/multikueue.py)."""
    allowance = f"{pod_contract.SCALE_UP_ALLOWANCE_SECONDS // 60}m"
    config: dict[str, Any] = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "health": {"healthProbeBindAddress": ":8081"},
        "metrics": {"bindAddress": ":8443"},
        "webhook": {"port": WEBHOOK_PORT},
        "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
        # Kueue's Job webhooks (failurePolicy Fail) only where sweep jobs go: the chart takes this selector for them
        # (kueue 0.19.2 templates/webhook/manifests.yaml), so Jobs elsewhere never wait on Kueue
        "managedJobsNamespaceSelector": {
            "matchLabels": {"kubernetes.io/metadata.name": pod_contract.BENCHMARK_NAMESPACE}
        },
    }
    if wait_for_pods_ready:
        # all workers running within the scale-up allowance, or the job is evicted and requeued (5 times at most); on
        # a MultiKueue worker the eviction sends the job back to the manager, which offers it to the next cluster
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
            # managerConfig.controllerManagerConfigYaml): the API client's rate (the client library's own default is
            # 20 qps, far too slow for a burst of sweep pods) and the reconcilers' concurrency.
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
    """The pools the points run on, each once: the sweep pools first, each card's own pool last.

    The order is the ClusterQueue's flavor order, and Kueue takes the first flavor that fits, matching the pod's node
    selector and required affinity only on that flavor's own label keys (kueue v0.19.2 pkg/scheduler/flavorassigner
    flavorassigner.go: ``flavorLabelKeys := sets.KeySet(flavor.Spec.NodeLabels)``, ``flavorSelector``). A card's own
    flavor labels only ``gpu=<card>``, which every point of the card matches: listed first, it would take (and charge)
    the points of the sweep pools. A sweep pool's flavor also labels its size, which only its own points match, and
    the card's own points refuse it by their affinity (``DoesNotExist``), so with the own pool last each point gets its
    own pool's flavor."""
    seen: dict[str, GpuPool] = {}
    for point in points:
        seen.setdefault(point.pool.name, point.pool)
    return sorted(seen.values(), key=lambda p: not p.sweep)


def cluster_queue_spec(points: Sequence[SweepPoint], benchmark_namespace: str) -> dict[str, Any]:
    """The ClusterQueue of the sweeps: one flavor per pool, its accelerators capped at what the pool holds."""
    pools = sweep_pools(points)
    resources = sorted({p.resource for p in pools})
    flavors = []
    for pool in pools:
        quota = {r: "0" for r in resources}
        quota[pool.resource] = str(pool.max_nodes * pool.accelerators_per_node)
        flavors.append((flavor_name(pool), {**quota, **UNBOUNDED}))
    return kueue_cluster_queue(benchmark_namespace, [*UNBOUNDED, *resources], flavors)


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
        # the sweeps' own queue where the cluster sweeps (a worker that only runs queued sweep points has none)
        self.local_queue: pulumi.Resource | None = None
        if not points:
            self.register_outputs({})
            return
        for pool in sweep_pools(points):
            k8s.apiextensions.CustomResource(
                f"{cluster.name}-flavor-{pool.name}",
                api_version=KUEUE_API,
                kind="ResourceFlavor",
                metadata={"name": flavor_name(pool), "labels": {"app.kubernetes.io/part-of": "gpu-fleet"}},
                spec={"nodeLabels": pool.node_selector},
                opts=after,
            )
        k8s.apiextensions.CustomResource(
            f"{cluster.name}-cluster-queue",
            api_version=KUEUE_API,
            kind="ClusterQueue",
            metadata={"name": CLUSTER_QUEUE, "labels": {"app.kubernetes.io/part-of": "gpu-fleet"}},
            spec=cluster_queue_spec(points, pod_contract.BENCHMARK_NAMESPACE),
            opts=after,
        )
        self.local_queue = k8s.apiextensions.CustomResource(
            f"{cluster.name}-local-queue",
            api_version=KUEUE_API,
            kind="LocalQueue",
            metadata={"name": pod_contract.SWEEP_QUEUE, "namespace": benchmark_ns},
            spec={"clusterQueue": CLUSTER_QUEUE},
            opts=after,
        )
        self.register_outputs({})
