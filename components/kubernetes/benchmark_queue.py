"""The benchmark queue of a cluster: its benchmark and probe Jobs wait their turn in the cluster's Kueue, a card at a
time as its pool allows (fleet/model/benchmark_queue/ says why).

Upstream facts it relies on:

* **Kubernetes** (kubernetes/kubernetes v1.36.3 pkg/controller/job/job_controller.go; Job ``suspend`` is GA since
  1.24, KEP-2232): the controller creates no pod for a suspended Job (``manageJob``: a suspended Job only has its
  active pods deleted); it sets ``status.startTime`` only when the Job is not suspended ("Job first start") and sets it
  again to the time it is resumed ("Resumed jobs will always reset StartTime ... ActiveDeadlineSeconds is interpreted
  as the number of seconds a Job is continuously active"); ``pastActiveDeadline`` is false while it is suspended. So a
  waiting Job's deadline starts when Kueue admits it.
* **ResourceQuota** (kubernetes v1.36.3 pkg/quota/v1/evaluator/core/pods.go ``QuotaV1Pod``): requests such as
  ``requests.nvidia.com/gpu`` are the pods' (not terminal ones); a Job counts only as an object
  (``count/jobs.batch``). A suspended Job has no pod: it holds none of the benchmark namespace's accelerators.
* **Kueue** v0.19.2, the version the fleet pins: the Job webhook suspends a Job that carries the
  ``kueue.x-k8s.io/queue-name`` label on creation (pkg/controller/jobs/job/job_webhook.go ``Default`` ->
  pkg/controller/jobframework/utils.go ``WorkloadShouldBeSuspended``: "Jobs with queue names ... are default
  suspended"), whatever ``manageJobsWithoutQueueName`` says (that setting, left at its default false, only concerns
  Jobs without the label: the fleet's other Jobs stay Kueue's business nowhere); the webhook and the reconciler act only
  in the namespaces of ``managedJobsNamespaceSelector`` (components/kubernetes/training.py ``kueue_configuration``).
  The Job's pod set is its pod template with its requests as kube-scheduler counts them (pkg/workload/workload.go:
  ``resourcehelpers.PodRequests``, the mtail sidecar included; a limit alone counts as the request,
  pkg/workload/resources.go ``handleLimitsToRequests``). A flavor fits a pod set when the pod's node selector agrees
  with the flavor's own ``nodeLabels`` keys (pkg/scheduler/flavorassigner/flavorassigner.go ``flavorSelector``), so
  each card's Jobs match its pool's flavor alone; on admission Kueue adds the flavor's node labels and tolerations to
  the template (pkg/podset/podset.go ``FromAssignment``, ``Merge``: no conflict, tolerations not repeated) and sets
  ``spec.suspend`` false (pkg/controller/jobs/job/job_controller.go ``RunWithPodSetsInfo``). The flavors here carry the
  pool's node selector, which the pod already has, and no tolerations: the template Pulumi made stays as it is, and
  ``spec.suspend`` is the only field Kueue changes, which Pulumi ignores.
* Each flavor in a resource group lists the group's covered resources, in their order (apis/kueue/v1beta2/
  clusterqueue_types.go ``ResourceGroup``; pkg/webhooks/clusterqueue_webhook.go ``validateFlavorQuotas``): one group
  covers CPU, memory and every accelerator resource of the pools, a flavor holding none of another pool's resource.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.kubernetes.deployment import FLEET_PART_OF
from components.kubernetes.training import KUEUE_API, UNBOUNDED, kueue_cluster_queue
from fleet.model.benchmark_queue.quotas import covered_resources, flavor_quota
from fleet.model.core import pod_contract
from fleet.model.core.clusters import Cluster
from fleet.model.core.pools import GpuPool

LABELS = {"app.kubernetes.io/part-of": FLEET_PART_OF}


def flavor_spec(pool: GpuPool) -> dict[str, Any]:
    """A card pool's flavor: its node selector as node labels, no tolerations (the benchmark pod has the pool's)."""
    return {"nodeLabels": dict(pool.node_selector)}


def cluster_queue_spec(pools: Sequence[GpuPool], namespaces: Sequence[str]) -> dict[str, Any]:
    """The benchmark ClusterQueue: the Jobs of ``namespaces``, a flavor per card pool in the cluster's order, each
    holding what its pool holds of its resource and none of another pool's."""
    accelerators = covered_resources(list(pools))
    flavors = []
    for pool in pools:
        quota = {r: str(flavor_quota(pool)) if r == pool.resource else "0" for r in accelerators}
        flavors.append((pod_contract.benchmark_flavor(pool.name), {**quota, **UNBOUNDED}))
    return kueue_cluster_queue(namespaces, [*accelerators, *UNBOUNDED], flavors)


def benchmark_queue(
    cluster: Cluster,
    pools: Sequence[GpuPool],
    namespaces: Sequence[tuple[str, pulumi.Input[str]]],
    opts: pulumi.ResourceOptions,
) -> list[pulumi.Resource]:
    """The flavors, ClusterQueue and LocalQueues of the cluster's benchmark queue; ``namespaces``: each benchmark
    namespace as (its name, the namespace's output), a LocalQueue in each. Returns the LocalQueues."""
    name = cluster.name
    flavors = [
        k8s.apiextensions.CustomResource(
            f"{name}-benchmark-flavor-{pool.name}",
            api_version=KUEUE_API,
            kind="ResourceFlavor",
            metadata={"name": pod_contract.benchmark_flavor(pool.name), "labels": LABELS},
            spec=flavor_spec(pool),
            opts=opts,
        )
        for pool in pools
    ]
    queue = k8s.apiextensions.CustomResource(
        f"{name}-benchmark-cluster-queue",
        api_version=KUEUE_API,
        kind="ClusterQueue",
        metadata={"name": pod_contract.BENCHMARK_CLUSTER_QUEUE, "labels": LABELS},
        spec=cluster_queue_spec(pools, [ns for ns, _ in namespaces]),
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=flavors)),
    )
    after = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[queue]))
    return [
        k8s.apiextensions.CustomResource(
            f"{name}-benchmark-local-queue" + ("" if ns == pod_contract.BENCHMARK_NAMESPACE else f"-{ns}"),
            api_version=KUEUE_API,
            kind="LocalQueue",
            metadata={"name": pod_contract.BENCHMARK_QUEUE, "namespace": namespace, "labels": LABELS},
            spec={"clusterQueue": pod_contract.BENCHMARK_CLUSTER_QUEUE},
            opts=after,
        )
        for ns, namespace in namespaces
    ]
