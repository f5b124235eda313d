"""Scaling-sweep jobs: one Kubeflow Trainer ``TrainJob`` per sweep point, admitted by Kueue.

Each point gets a namespaced ``TrainingRuntime`` holding the whole pod (the benchmark pod of
components/kubernetes/benchmark.py: log file, mtail sidecar, tolerations, the pool's selector, ``per_node`` cards,
Pod Security ``restricted``), with the ``jax`` policy and ``numNodes`` nodes, and a ``TrainJob`` naming it. Trainer
builds a JobSet of one indexed Job with ``numNodes`` pods (plugins/jobset/jobset.go ``SyncParallelCount`` at
kubeflow/trainer v2.3.0) and sets ``JAX_NUM_PROCESSES``, ``JAX_PROCESS_ID`` and ``JAX_COORDINATOR_ADDRESS`` in the
container named ``node`` of the replicated job marked as the trainer step (plugins/jax/jax.go); the runtime webhook
wants that job to have one replica. The TrainJob carries the LocalQueue label; Kueue's webhook suspends it until the
quota fits every pod (kueue 0.19.2 jobframework), and then patches and resumes it, so Pulumi ignores ``suspend`` and
``runtimePatches``.

Preemption: a failed worker fails its Job, and the JobSet's ``failurePolicy`` (``maxRestarts`` = the workload's
``distributed.restarts``, ``Recreate``) starts all pods again; each pod sees its attempt in the label
``jobset.sigs.k8s.io/restart-attempt`` (kubernetes-sigs/jobset v0.12.0 pkg/constants), passed to the code as
``GPUFLEET_RESTART_ATTEMPT`` and so into every metric line. Worker 0 saves after each epoch under
``GPUFLEET_CHECKPOINT_DIR``: on the cluster's ``checkpoint_claim`` (a ReadWriteMany claim, one subdirectory per job),
which survives the restart, or else on an ``emptyDir``, which does not (recreated pods start from the first epoch).
The workers reach each other on any port (JAX's coordinator, the collectives): a NetworkPolicy per job opens
ingress and egress between the pods of that job only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.kubernetes.benchmark import config_maps, pod_labels, pod_spec, spec_hash
from components.kubernetes.network_policy import network_policy
from fleet.model.core import pod_contract
from fleet.model.core.clusters import Cluster
from fleet.model.core.jobs import SweepPoint, WorkloadJob
from fleet.model.placement.pods import own_pool_affinity

TRAINER_API = "trainer.kubeflow.org/v1alpha1"
# The trainer step's container and replicated job (kubeflow/trainer v2.3.0 pkg/constants Node; the JAX policy's
# coordinator address is <trainjob>-node-0-0.<trainjob>), and the label marking the step.
NODE = "node"
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
RESTART_ATTEMPT_LABEL = "jobset.sigs.k8s.io/restart-attempt"
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"  # the JobSet is named after the TrainJob
# unique per JobSet object (kubernetes-sigs/jobset v0.12.0 api/jobset/v1alpha2 JobSetUIDKey, on every pod): a job
# created again under the same name starts from no checkpoint
JOBSET_UID_LABEL = "jobset.sigs.k8s.io/jobset-uid"
CHECKPOINT_VOLUME = "checkpoints"


def point_name(point: SweepPoint) -> str:
    """The point's TrainJob name before its hash: ``sweep-<workload>-<card>-n<accelerators>`` (a letter first, as the
    TrainJob's name must start with one; workload names may start with a digit)."""
    return f"sweep-{point.workload.name}-{point.card}-n{point.accelerators}"


def trainjob_name(point: SweepPoint, digest: str) -> str:
    """The point's name and the hash of its spec, cut so that JobSet can name every pod of its ``nodes`` within 63
    characters (pod_contract.max_trainjob_name)."""
    keep = pod_contract.max_trainjob_name(point.nodes) - len(digest) - 1
    return f"{point_name(point)[:keep].rstrip('-')}-{digest}"


def sweep_pod_spec(
    cluster: Cluster,
    point: SweepPoint,
    programs_cm: str,
    files_cm: str | None,
    driver_env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """One worker's pod: the benchmark pod with ``per_node`` cards, the sweep's variables and its checkpoints
    (``driver_env``: a queued point's driver directories of every pool it may run on, components/kubernetes/
    queued_sweeps.py)."""
    distributed = point.workload.spec.distributed
    assert distributed is not None  # the policy takes a scale only for distributed workloads
    attempt = f"metadata.labels['{RESTART_ATTEMPT_LABEL}']"
    env = [{"name": k, "value": v} for k, v in sorted(distributed.env_by_kind.get(point.pool.resource, {}).items())]
    env.append({"name": "GPUFLEET_RESTART_ATTEMPT", "valueFrom": {"fieldRef": {"fieldPath": attempt}}})
    env.append({"name": "GPUFLEET_ACCELERATORS", "value": str(point.accelerators)})  # the point, in the metrics
    volumes: list[tuple[dict[str, Any], dict[str, Any]]] = []
    if distributed.checkpoint_dir:
        env.append({"name": "GPUFLEET_CHECKPOINT_DIR", "value": distributed.checkpoint_dir})
        source: dict[str, Any] = (
            {"persistentVolumeClaim": {"claimName": cluster.checkpoint_claim}}
            if cluster.checkpoint_claim
            else {"emptyDir": {}}
        )
        mount = {"name": CHECKPOINT_VOLUME, "mountPath": distributed.checkpoint_dir}
        if cluster.checkpoint_claim:
            mount["subPathExpr"] = "$(GPUFLEET_JOBSET)"  # one directory per JobSet object
            jobset = f"metadata.labels['{JOBSET_UID_LABEL}']"
            env.append({"name": "GPUFLEET_JOBSET", "valueFrom": {"fieldRef": {"fieldPath": jobset}}})
        volumes.append(({"name": CHECKPOINT_VOLUME, **source}, mount))
    job = WorkloadJob(point.workload, point.pool, None)
    spec = pod_spec(
        cluster,
        job,
        programs_cm,
        files_cm,
        accelerators=point.per_node,
        extra_env=env,
        extra_volumes=volumes,
        container_name=NODE,
        driver_env=driver_env,
    )
    if not point.pool.sweep:
        # the card's own pool: its selector (gpu=<card>) also matches the sweep pools' nodes and Kueue flavors, which
        # carry the card label too; Kueue matches a pod's required node affinity against each flavor's labels, so this
        # keeps the job on (and its quota in) the card's own pool
        spec["affinity"] = own_pool_affinity()
    return spec


def runtime_spec(
    cluster: Cluster,
    point: SweepPoint,
    programs_cm: str,
    files_cm: str | None,
    *,
    labels: Mapping[str, str] | None = None,
    pod: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The point's TrainingRuntime: the ``jax`` policy on ``nodes`` nodes, one indexed Job of worker pods, restarts.
    A queued point (components/kubernetes/queued_sweeps.py) gives its own pod labels and worker pod."""
    distributed = point.workload.spec.distributed
    assert distributed is not None
    job = WorkloadJob(point.workload, point.pool, None)
    labels = dict(labels) if labels is not None else pod_labels(cluster, job)
    return {
        "mlPolicy": {"numNodes": point.nodes, distributed.framework: {}},
        "template": {
            "metadata": {"labels": labels},
            "spec": {
                "failurePolicy": {"maxRestarts": distributed.restarts, "restartStrategy": "Recreate"},
                "replicatedJobs": [
                    {
                        "name": NODE,
                        "replicas": 1,
                        "template": {
                            "metadata": {"labels": {ANCESTOR_LABEL: "trainer"}},
                            "spec": {
                                "backoffLimit": 0,  # a failed worker fails the job: the JobSet restarts all
                                "activeDeadlineSeconds": pod_contract.active_deadline_seconds(
                                    point.workload.spec.timeout_seconds
                                ),
                                "template": {
                                    "metadata": {"labels": labels},
                                    "spec": pod or sweep_pod_spec(cluster, point, programs_cm, files_cm),
                                },
                            },
                        },
                    }
                ],
            },
        },
    }


class SweepJobs(pulumi.ComponentResource):
    """The TrainJobs of one cluster's sweep points, with their runtimes and NetworkPolicies."""

    TYPE = "gpufleet:index:SweepJobs"

    def __init__(
        self,
        cluster: Cluster,
        points: Sequence[SweepPoint],
        namespace: pulumi.Input[str],
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__(self.TYPE, f"{cluster.name}-sweeps", None, opts)
        child = pulumi.ResourceOptions(parent=self)
        maps: dict[str, tuple[str, str | None]] = {}
        self.jobs: dict[tuple[str, str, int], pulumi.Resource] = {}
        for point in points:
            wl = point.workload
            if wl.name not in maps:
                maps[wl.name] = config_maps(cluster, wl, namespace, child)
            spec = runtime_spec(cluster, point, *maps[wl.name])
            queue = pod_contract.sweep_queue(point.pool.name)
            # runtime and job are immutable in the parts that matter: a changed point is a new pair. Its queue is one:
            # Kueue refuses a new queue-name label on a TrainJob that is not suspended, one admitted or finished
            # (kueue v0.19.2 pkg/controller/jobframework/validation.go validateUpdateForQueueName, which the TrainJob
            # webhook runs), so a label patched in place would fail `pulumi up`
            name = trainjob_name(point, spec_hash([spec, point.nodes, queue]))
            labels = pod_labels(cluster, WorkloadJob(wl, point.pool, None))
            resource = f"{cluster.name}-{wl.name}-{point.card}-n{point.accelerators}"
            runtime = k8s.apiextensions.CustomResource(
                f"{resource}-runtime",
                api_version=TRAINER_API,
                kind="TrainingRuntime",
                metadata={"name": name, "namespace": namespace, "labels": labels},
                spec=spec,
                opts=child,
            )
            self.jobs[(wl.name, point.card, point.accelerators)] = k8s.apiextensions.CustomResource(
                resource,
                api_version=TRAINER_API,
                kind="TrainJob",
                metadata={
                    "name": name,
                    "namespace": namespace,
                    "labels": {**labels, pod_contract.QUEUE_NAME_LABEL: queue},
                    "annotations": {"pulumi.com/skipAwait": "true"},
                },
                spec={
                    "runtimeRef": {"apiGroup": "trainer.kubeflow.org", "kind": "TrainingRuntime", "name": name},
                    "trainer": {"numNodes": point.nodes},
                },
                opts=pulumi.ResourceOptions(
                    parent=self, depends_on=[runtime], ignore_changes=["spec.suspend", "spec.runtimePatches"]
                ),
            )
            workers_policy(resource, name, namespace, child)
        self.register_outputs({})


def workers_policy(resource: str, name: str, namespace: pulumi.Input[str], opts: pulumi.ResourceOptions) -> None:
    """The NetworkPolicy letting the pods of the TrainJob ``name`` (its JobSet's) reach each other, and no one else."""
    peers = [{"podSelector": {"matchLabels": {JOBSET_NAME_LABEL: name}}}]
    network_policy(
        f"{resource}-workers",
        f"{name}-workers"[:63].rstrip("-"),
        namespace,
        {
            "podSelector": {"matchLabels": {JOBSET_NAME_LABEL: name}},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"from": peers}],
            "egress": [{"to": peers}],
        },
        opts,
    )
