"""The Jobs of workloads that name a queue (policy: ``workloads.<name>.queue``), declared once on the queues' manager.

Each is a benchmark Job like any other (components/kubernetes/benchmark.py ``pod_spec``: the log init container, the
mtail sidecar, the workload) with three differences, all from how Kueue 0.19.2 dispatches it:

* it carries the LocalQueue's label ``kueue.x-k8s.io/queue-name``; Kueue's Job webhook on the manager suspends it and
  sets ``spec.managedBy: kueue.x-k8s.io/multikueue`` (pkg/controller/jobs/job/job_webhook.go ``Default``:
  ``ApplyDefaultForSuspend``, ``ApplyDefaultForManagedBy``), so it never runs there;
* it names no pool: a worker that admits it adds its flavor's node selector and tolerations to the pods (the flavor of
  the pool of its card). Its card is kept by ``card_affinity`` (fleet/model/queues/, ``Fleet.queued_affinity``),
  which makes Kueue skip the other cards' flavors on every worker;
* it does not know its cluster (no ``BENCHMARK_CLUSTER``, no ``cluster``/``cloud`` pod labels): its metrics get them
  on the central from the federation job of the worker that ran it (fleet/model/monitoring/prometheus.py, the central
  sets ``cluster`` and ``cloud`` on every federated sample), and its shell adds the driver directories of every pool it
  may land on (GKE's ``/usr/local/nvidia``; a directory a cloud lacks is skipped by the loader).

MultiKueue copies the Job alone (its name, namespace, labels, annotations and spec; kueue v0.19.2
pkg/controller/jobs/job/job_multikueue_adapter.go ``SyncJob``) into the same namespace on the worker: the ConfigMaps
it mounts have the same content-hashed names everywhere and are made, with the credentials Secret and the egress
policy, by each worker's own ``WorkloadJobs`` (``dispatched``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.kubernetes.benchmark import _name, config_map_name, pod_spec, spec_hash
from fleet.model.core import pod_contract
from fleet.model.core.clusters import Cluster
from fleet.model.core.jobs import QueuedJob, WorkloadJob
from fleet.model.core.pools import GpuPool

# the fields of a queued Job that Kueue writes on the manager, which Pulumi neither sets nor diffs (as the queued
# TrainJobs' own, components/kubernetes/queued_sweeps.py)
KUEUE_WRITES = ("spec.suspend", "spec.managedBy")


def queued_labels(job: QueuedJob) -> dict[str, str]:
    """The pod labels of a queued Job: those the PodMonitor selects and copies (``workload``, ``gpu``); ``cluster`` and
    ``cloud`` come with the federation."""
    return {
        "app.kubernetes.io/part-of": pod_contract.BENCHMARK_PART_OF,
        "app.kubernetes.io/name": job.workload.name,
        "workload": job.workload.name,
        "gpu": job.card,
    }


def union_driver_env(pools: Sequence[GpuPool]) -> dict[str, str]:
    """The driver directories of every pool, joined per variable (``GpuPool.driver_env``), in a stable order."""
    out: dict[str, list[str]] = {}
    for pool in pools:
        for key, value in pool.driver_env.items():
            if value not in out.setdefault(key, []):
                out[key].append(value)
    return {key: ":".join(values) for key, values in sorted(out.items())}


def queued_pod_spec(
    manager: Cluster,
    job: QueuedJob,
    pools: Sequence[GpuPool],
    affinity: dict[str, Any],
    programs_cm: str,
    files_cm: str | None,
) -> dict[str, Any]:
    """The pod spec of a queued Job: a benchmark pod (its images from the fleet's registry, as the manager has it)
    without ``BENCHMARK_CLUSTER`` or a pool's selector and tolerations (the worker's flavor adds them), kept on its
    card by ``affinity`` (``Fleet.queued_affinity``)."""
    on_first = WorkloadJob(job.workload, pools[0], None)
    spec = pod_spec(manager, on_first, programs_cm, files_cm, driver_env=union_driver_env(pools))
    for container in spec["containers"]:
        container["env"] = [e for e in container["env"] if e["name"] != "BENCHMARK_CLUSTER"]
    spec.pop("nodeSelector")
    spec.pop("tolerations")
    spec["affinity"] = affinity
    return spec


def queued_job_manifest(
    manager: Cluster,
    job: QueuedJob,
    pools: Sequence[GpuPool],
    affinity: dict[str, Any],
    programs_cm: str,
    files_cm: str | None,
) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """(name, metadata without namespace, spec) of a queued Job; its name ends in a hash of its spec."""
    wl = job.workload.spec
    labels = queued_labels(job)
    job_spec = {
        "backoffLimit": wl.backoff_limit,
        "activeDeadlineSeconds": pod_contract.active_deadline_seconds(wl.timeout_seconds),
        "template": {
            "metadata": {"labels": labels},
            "spec": queued_pod_spec(manager, job, pools, affinity, programs_cm, files_cm),
        },
    }
    name = _name(wl.name, job.card, spec_hash(job_spec))
    metadata = {
        "name": name,
        "labels": {**labels, pod_contract.QUEUE_NAME_LABEL: job.queue.name},
        "annotations": {"pulumi.com/skipAwait": "true"},
    }
    return name, metadata, job_spec


class QueuedJobs(pulumi.ComponentResource):
    """The manager's Jobs of the workloads that name a queue: one per (workload, card), each in the benchmarks
    namespace with its queue's label, dispatched by MultiKueue."""

    TYPE = "gpufleet:index:QueuedJobs"

    def __init__(
        self,
        manager: Cluster,
        jobs: Sequence[tuple[QueuedJob, Sequence[GpuPool], dict[str, Any]]],
        namespace: pulumi.Input[str],
        opts: pulumi.ResourceOptions,
    ):
        """``jobs``: each queued Job with the pools it may run on and its affinity (``Fleet.queued_pools``,
        ``Fleet.queued_affinity``)."""
        super().__init__(self.TYPE, f"{manager.name}-queued-jobs", None, opts)
        self.jobs: dict[tuple[str, str], k8s.batch.v1.Job] = {}
        for job, pools, affinity in jobs:
            wl = job.workload
            # the content-hashed names the workers' ConfigMaps have; the manager runs no pod and needs none
            programs = config_map_name(wl.name, "mtail", wl.mtail_programs)
            files = config_map_name(wl.name, "files", wl.files) if wl.files else None
            _, metadata, spec = queued_job_manifest(manager, job, pools, affinity, programs, files)
            self.jobs[(wl.name, job.card)] = k8s.batch.v1.Job(
                f"{manager.name}-{job.queue.name}-{wl.name}-{job.card}",
                metadata={**metadata, "namespace": namespace},
                spec=spec,
                # Kueue's Job webhook on the manager writes both (job_webhook.go ``Default``: suspend, and managedBy
                # kueue.x-k8s.io/multikueue); a refresh must not undo them, and a Job's managedBy is immutable
                # (kubernetes pkg/apis/batch/validation ValidateJobSpecUpdate)
                opts=pulumi.ResourceOptions(parent=self, ignore_changes=list(KUEUE_WRITES)),
            )
        self.register_outputs({"jobs": {f"{w}/{c}": j.metadata["name"] for (w, c), j in self.jobs.items()}})
