"""The sweep points of workloads that name a queue: one TrainJob each, declared once on the queues' manager, and the
TrainingRuntime it names, the same on the manager and on every worker that may be given it.

Kueue 0.19.2 dispatches TrainJobs with MultiKueue (pkg/controller/jobs/trainjob/trainjob_multikueue_adapter.go
``SyncJob``): the manager's TrainJob is created on the worker with its name, namespace, labels, annotations and spec,
``managedBy`` cleared (so the worker's Trainer runs it) and Kueue's runtime patch removed (the worker's Kueue adds its
own: the admitted flavor's node labels and tolerations). Kueue's webhook on the manager sets ``managedBy:
kueue.x-k8s.io/multikueue`` (site/content/en/docs/tasks/run/multikueue/trainjob.md), which Trainer v2.3.0 skips
(pkg/controller/trainjob_controller.go ``IsManagedByExternalController``), so nothing runs there. The TrainJob names a
namespaced TrainingRuntime, which "must be installed in the corresponding namespaces on the worker clusters"
(trainjob.md) and on the manager, whose Kueue builds the job's pod sets from it (pkg/controller/jobs/trainjob/
trainjob_controller.go ``getChildJobSet``: ``getRuntimeSpec`` reads it through the manager's own client). Its name is
the hash of its content, so the manager and the workers build it from the same inputs: the manager's cluster (the
registry is the fleet's), no pool's selector or tolerations (the worker's flavor adds them), the affinity that keeps
it on its card and on the pools that hold it (``Fleet.queued_point_affinity``), the driver directories of every such
pool, no ``BENCHMARK_CLUSTER`` and no ``cluster``/``cloud`` pod labels (the federation adds them, as for queued
Jobs), and checkpoints on an ``emptyDir`` (a worker's ``checkpoint_claim`` is its own: a point restarted after a
preemption starts again from its first epoch).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.kubernetes.benchmark import config_map_name, spec_hash
from components.kubernetes.queued_jobs import union_driver_env
from components.kubernetes.sweeps import TRAINER_API, runtime_spec, sweep_pod_spec, trainjob_name, workers_policy
from fleet.model.core import pod_contract
from fleet.model.core.clusters import Cluster
from fleet.model.core.jobs import QueuedPoint, SweepPoint
from fleet.model.core.pools import GpuPool
from fleet.model.queues.queued_sweeps import POINT_LABEL, QUEUE_LABEL


def queued_point_labels(point: QueuedPoint) -> dict[str, str]:
    """The pod labels of a queued point: those the PodMonitor selects and copies (``workload``, ``gpu``); ``cluster``
    and ``cloud`` come with the federation."""
    return {
        "app.kubernetes.io/part-of": pod_contract.BENCHMARK_PART_OF,
        "app.kubernetes.io/name": point.workload.name,
        "workload": point.workload.name,
        "gpu": point.card,
    }


def queued_runtime(
    manager: Cluster, point: QueuedPoint, pools: Sequence[GpuPool], affinity: dict[str, Any]
) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """(name, metadata without namespace, spec) of a queued point's TrainingRuntime, the same on the manager and on
    every worker; ``pools``: the pools that hold it (``QueuedSweeps.pools_of``), ``affinity``:
    ``Fleet.queued_point_affinity``."""
    wl = point.workload
    programs = config_map_name(wl.name, "mtail", wl.mtail_programs)
    files = config_map_name(wl.name, "files", wl.files) if wl.files else None
    builder = dataclasses.replace(manager, checkpoint_claim=None)  # an emptyDir: the workers' claims are their own
    sweep = SweepPoint(wl, pools[0], point.accelerators, point.nodes)
    pod = sweep_pod_spec(builder, sweep, programs, files, driver_env=union_driver_env(pools))
    for container in pod["containers"]:
        container["env"] = [e for e in container["env"] if e["name"] != "BENCHMARK_CLUSTER"]
    pod.pop("nodeSelector", None)
    pod.pop("tolerations", None)
    pod["affinity"] = affinity
    labels = queued_point_labels(point)
    spec = runtime_spec(builder, sweep, programs, files, labels=labels, pod=pod)
    name = trainjob_name(sweep, spec_hash([spec, point.nodes]))
    metadata = {"name": name, "labels": {**labels, QUEUE_LABEL: point.queue.name, POINT_LABEL: str(point.accelerators)}}
    return name, metadata, spec


def queued_trainjob(point: QueuedPoint, runtime: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(metadata without namespace, spec) of a queued point's TrainJob on the manager: its queue's label, its
    runtime, its nodes."""
    metadata = {
        "name": runtime,
        "labels": {**queued_point_labels(point), pod_contract.QUEUE_NAME_LABEL: point.queue.name},
        "annotations": {"pulumi.com/skipAwait": "true"},
    }
    spec = {
        "runtimeRef": {"apiGroup": "trainer.kubeflow.org", "kind": "TrainingRuntime", "name": runtime},
        "trainer": {"numNodes": point.nodes},
    }
    return metadata, spec


def point_resource(cluster: Cluster, point: QueuedPoint) -> str:
    """The Pulumi name of a point's resources on ``cluster``."""
    return f"{cluster.name}-{point.queue.name}-{point.workload.name}-{point.card}-n{point.accelerators}"


class QueuedSweepJobs(pulumi.ComponentResource):
    """The manager's TrainJobs of the queued sweep points, one per point, each with its TrainingRuntime, labelled with
    its queue and dispatched by MultiKueue."""

    TYPE = "gpufleet:index:QueuedSweepJobs"

    def __init__(
        self,
        manager: Cluster,
        points: Sequence[tuple[QueuedPoint, Sequence[GpuPool], dict[str, Any]]],
        namespace: pulumi.Input[str],
        opts: pulumi.ResourceOptions,
    ):
        """``points``: each queued point with the pools that hold it and its affinity (``QueuedSweeps.pools_of``,
        ``Fleet.queued_point_affinity``)."""
        super().__init__(self.TYPE, f"{manager.name}-queued-sweeps", None, opts)
        self.jobs: dict[str, pulumi.Resource] = {}
        for point, pools, affinity in points:
            name, metadata, spec = queued_runtime(manager, point, pools, affinity)
            resource = point_resource(manager, point)
            runtime = k8s.apiextensions.CustomResource(
                f"{resource}-runtime",
                api_version=TRAINER_API,
                kind="TrainingRuntime",
                metadata={**metadata, "namespace": namespace},
                spec=spec,
                opts=pulumi.ResourceOptions(parent=self),
            )
            job_metadata, job_spec = queued_trainjob(point, name)
            self.jobs[point.name] = k8s.apiextensions.CustomResource(
                resource,
                api_version=TRAINER_API,
                kind="TrainJob",
                metadata={**job_metadata, "namespace": namespace},
                spec=job_spec,
                opts=pulumi.ResourceOptions(
                    parent=self,
                    depends_on=[runtime],
                    # Kueue's webhook sets managedBy and suspends it; MultiKueue copies the worker's status back
                    ignore_changes=["spec.suspend", "spec.runtimePatches", "spec.managedBy"],
                ),
            )
        self.register_outputs({})


class QueuedSweepRuntimes(pulumi.ComponentResource):
    """A worker's side of the queued sweep points it may be given: each point's TrainingRuntime (the manager's, same
    name and content) and the NetworkPolicy letting the point's pods reach each other. The workload's ConfigMaps,
    credentials and egress come from the worker's ``WorkloadJobs`` (``dispatched``)."""

    TYPE = "gpufleet:index:QueuedSweepRuntimes"

    def __init__(
        self,
        worker: Cluster,
        manager: Cluster,
        points: Sequence[tuple[QueuedPoint, Sequence[GpuPool], dict[str, Any]]],
        namespace: pulumi.Input[str],
        opts: pulumi.ResourceOptions,
    ):
        """``points``: as ``QueuedSweepJobs`` takes them, for the points this worker holds."""
        super().__init__(self.TYPE, f"{worker.name}-queued-sweep-runtimes", None, opts)
        child = pulumi.ResourceOptions(parent=self)
        for point, pools, affinity in points:
            name, metadata, spec = queued_runtime(manager, point, pools, affinity)
            resource = point_resource(worker, point)
            k8s.apiextensions.CustomResource(
                f"{resource}-runtime",
                api_version=TRAINER_API,
                kind="TrainingRuntime",
                metadata={**metadata, "namespace": namespace},
                spec=spec,
                opts=child,
            )
            workers_policy(resource, name, namespace, child)
        self.register_outputs({})
