"""Workload Jobs: each (workload, card) pair the policy places on a cluster runs as a Job on that card's pool, and
the pool probe as a CronJob on each probed pool (``fleet.model.core.fleet.WorkloadJob``, ``Fleet.workload_jobs``).

Every pod has the same shape (see fleet/model/core/pod_contract.py):
  1. init container ``prepare-log`` creates the empty log file on a shared ``emptyDir`` (mtail reads a file
     it sees for the first time from its end, so the file must exist before mtail starts);
  2. native sidecar ``mtail`` (an init container with ``restartPolicy: Always``) tails it and serves
     ``/metrics`` on the named port ``mtail``; its startup probe holds the workload back until it listens,
     and it stops by itself when the workload ends, so the Job completes;
  3. the workload appends its output to the log (``tee -a``), then lingers ``LINGER_SECONDS`` so
     Prometheus scrapes the final values at least twice before the pod (and its target) goes away.

Pulumi does not wait for benchmark Jobs: with GPU pools at zero a Job may wait many minutes for a node,
and ``pulumi up`` must not block on it. Jobs carry ``pulumi.com/skipAwait: "true"``; follow them with
kubectl or in Prometheus. Job pod templates are immutable, so a Job's name ends in a hash of its spec:
a changed benchmark becomes a new Job (Pulumi replaces it) instead of a failed update.

Where the cluster's Kueue queues them (``queue``), the Jobs of a card wait their turn: each Job, and each Job a
CronJob starts, names the cluster's benchmark LocalQueue, Kueue creates it suspended and resumes it when its pool has
room (components/kubernetes/benchmark_queue.py, fleet/model/benchmark_queue/).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.kubernetes.benchmark_queue import benchmark_queue
from components.kubernetes.images import image
from components.kubernetes.network_policy import egress_allow_list
from components.kubernetes.pod_monitor import pod_monitor
from components.kubernetes.pod_security import container_security, pod_security
from fleet.model.core import pod_contract
from fleet.model.core.clusters import Cluster
from fleet.model.core.jobs import WorkloadJob
from fleet.model.core.pools import GpuPool
from fleet.model.core.workloads import FILES_MOUNT, Workload

# The label the API server gives a Job's pod template (kubernetes/api batch/v1 types.go JobNameLabel, from 1.27;
# kubernetes/kubernetes pkg/registry/batch/job/strategy.go generateSelector).
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
# Schedules in the policy file are UTC, whatever the controller manager's own zone (CronJob timeZone, GA in 1.27).
CRONJOB_TIME_ZONE = "Etc/UTC"
# The workload's home: a scratch emptyDir, since a non-root user cannot write to the image's / or /root.
HOME_DIR = "/home/benchmark"


# A pool's probe runs in a new pod each time: without its pod and instance labels, every run of a pool's probe
# writes the same series, so "the last run" of a pool is simply the series' last value (the probe's CronJob runs one
# pod at a time: concurrencyPolicy Forbid). Setting a label to "" removes it (Prometheus relabel_config, replace).
PROBE_SERIES_RELABELINGS = [
    {
        "sourceLabels": ["__name__"],
        "regex": "gpufleet_probe_.+",
        "targetLabel": label,
        "replacement": "",
        "action": "replace",
    }
    for label in ("pod", "instance")
]


def _name(*parts: str, limit: int = 63) -> str:
    return "-".join(parts)[:limit].rstrip("-")


def spec_hash(obj: Any) -> str:
    """Eight hex digits that change whenever ``obj`` (a manifest fragment) changes."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:8]


def config_maps(
    cluster: Cluster, workload: Workload, namespace: pulumi.Input[str], opts: pulumi.ResourceOptions
) -> tuple[str, str | None]:
    """The workload's mtail programs and files as immutable ConfigMaps in ``namespace``: their names (files: None
    when it has none)."""
    prefix = f"{cluster.name}-{workload.name}"
    programs, files = dict(workload.mtail_programs), dict(workload.files)
    return (
        hashed_config_map(prefix, workload.name, "mtail", programs, namespace, opts),
        hashed_config_map(prefix, workload.name, "files", files, namespace, opts) if files else None,
    )


def pod_labels(cluster: Cluster, job: WorkloadJob) -> dict[str, str]:
    """Labels every benchmark pod carries; the PodMonitor turns ``pod_contract.METRIC_LABELS`` into metric labels."""
    return {
        "app.kubernetes.io/part-of": pod_contract.BENCHMARK_PART_OF,
        "app.kubernetes.io/name": job.workload.name,
        "workload": job.workload.name,
        "gpu": job.pool.card,
        "cluster": cluster.name,
        "cloud": cluster.cloud,
    }


def driver_exports(driver_env: Mapping[str, str]) -> str:
    """Shell that appends the pool's driver directories to the image's own ``LD_LIBRARY_PATH`` and ``PATH`` (a
    container's env would replace the image's values; the shell keeps them)."""
    return "".join(f'export {k}="${{{k}:+${k}:}}{v}"; ' for k, v in sorted(driver_env.items()))


def workload_script(driver_env: Mapping[str, str] | None = None) -> str:
    """The shell wrapper of the workload container: the driver's directories where the cloud does not set them, then
    tee output to the shared log, keep the exit code, linger."""
    log_var = '"$BENCHMARK_LOG"'
    linger = pod_contract.LINGER_SECONDS
    return (
        driver_exports(driver_env or {}) + f'{{ "$@"; echo $? > {log_var}.rc; }} 2>&1 | tee -a {log_var}; '
        f'rc=$(cat {log_var}.rc); echo "benchmark finished with exit code $rc; lingering {linger}s"; '
        f"sleep {linger}; exit $rc"
    )


def pod_spec(
    cluster: Cluster,
    job: WorkloadJob,
    programs_cm: str,
    files_cm: str | None,
    *,
    accelerators: int | None = None,
    extra_env: Sequence[dict[str, Any]] = (),
    extra_volumes: Sequence[tuple[dict[str, Any], dict[str, Any]]] = (),
    container_name: str = "workload",
    driver_env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The pod spec of one workload Job (Kubernetes API field names). A sweep job's pods
    (components/kubernetes/sweeps.py) take ``accelerators`` cards each instead of the workload's own count, more
    variables and (volume, mount) pairs, and the container name their operator wants. A Job dispatched by the fleet's
    queues (components/kubernetes/queued_jobs.py) adds the driver directories of every pool it may run on
    (``driver_env``)."""
    spec = job.workload.spec
    pool = job.pool
    log_file = pod_contract.log_file(spec.name)
    resources = spec.resources
    env = [{"name": k, "value": v} for k, v in sorted(spec.env.items())]
    env += [
        {"name": k, "valueFrom": {"secretKeyRef": {"name": job.workload.credentials_secret, "key": k}}}
        for k in spec.secret_env
    ]
    env += [
        {"name": "HOME", "value": HOME_DIR},
        {"name": "BENCHMARK_LOG", "value": log_file},
        {"name": "BENCHMARK_CLUSTER", "value": cluster.name},
        {"name": "BENCHMARK_GPU", "value": pool.card},
    ]
    if "accelerator" in spec.fleet_env:
        env.append({"name": "BENCHMARK_ACCELERATOR", "value": pool.resource})
    # a CronJob's Job carries its scheduled minute in its name (fleet/model/probes/probe)
    if "job_name" in spec.fleet_env:
        job_label = f"metadata.labels['{JOB_NAME_LABEL}']"
        env.append({"name": "BENCHMARK_JOB_NAME", "valueFrom": {"fieldRef": {"fieldPath": job_label}}})
    env += extra_env
    mounts = [{"name": "logs", "mountPath": pod_contract.LOG_DIR}, {"name": "home", "mountPath": HOME_DIR}]
    volumes: list[dict[str, Any]] = [
        {"name": "logs", "emptyDir": {}},
        {"name": "home", "emptyDir": {}},
        {"name": "mtail-programs", "configMap": {"name": programs_cm}},
    ]
    if files_cm:
        mounts.append({"name": "files", "mountPath": FILES_MOUNT, "readOnly": True})
        volumes.append({"name": "files", "configMap": {"name": files_cm}})
    for vol in spec.volumes:
        mounts.append({"name": vol.name, "mountPath": vol.mount_path, "readOnly": vol.read_only})
        if vol.claim_name:
            volumes.append(
                {"name": vol.name, "persistentVolumeClaim": {"claimName": vol.claim_name, "readOnly": vol.read_only}}
            )
        else:
            volumes.append({"name": vol.name, "emptyDir": {"sizeLimit": vol.size_limit} if vol.size_limit else {}})
    for volume, mount in extra_volumes:
        volumes.append(volume)
        mounts.append(mount)
    return {
        "restartPolicy": "Never",
        "nodeSelector": pool.node_selector,
        "tolerations": [t.toleration() for t in pool.pod_tolerations],
        # Benchmarks never talk to the Kubernetes API: no token in the pod.
        "automountServiceAccountToken": False,
        "securityContext": pod_security(None if spec.needs_root else spec.run_as_user),
        "initContainers": [
            {
                "name": "prepare-log",
                "image": image("busybox", cluster.registry),
                "command": ["sh", "-c", f"touch {log_file}"],
                "volumeMounts": [{"name": "logs", "mountPath": pod_contract.LOG_DIR}],
                "resources": pod_contract.PREPARE_LOG_RESOURCES,
                "securityContext": container_security(),
            },
            {
                "name": "mtail",
                "image": image("mtail", cluster.registry),
                "restartPolicy": "Always",
                "args": pod_contract.mtail_args(logs=log_file),
                "ports": [{"name": pod_contract.METRICS_PORT_NAME, "containerPort": pod_contract.METRICS_PORT}],
                "startupProbe": {
                    "tcpSocket": {"port": pod_contract.METRICS_PORT_NAME},
                    "periodSeconds": 1,
                    "failureThreshold": 60,
                },
                "volumeMounts": [
                    {"name": "logs", "mountPath": pod_contract.LOG_DIR, "readOnly": True},
                    {"name": "mtail-programs", "mountPath": pod_contract.PROGRAMS_DIR, "readOnly": True},
                ],
                "resources": pod_contract.MTAIL_RESOURCES,
                "securityContext": container_security(),
            },
        ],
        "containers": [
            {
                "name": container_name,
                "image": spec.image,
                "command": [
                    "/bin/sh",
                    "-c",
                    workload_script(pool.driver_env if driver_env is None else driver_env),
                    "benchmark",
                    *spec.command,
                    *spec.args,
                ],
                "env": env,
                "resources": {
                    "requests": {"cpu": resources.cpu_request, "memory": resources.memory_request},
                    "limits": {
                        "cpu": resources.cpu_limit,
                        "memory": resources.memory_limit,
                        pool.resource: str(accelerators or spec.accelerators),
                    },
                },
                "volumeMounts": mounts,
                # The workload may write beside its image (caches, outputs in its working directory).
                "securityContext": container_security(read_only_root=False),
            }
        ],
        "volumes": volumes,
    }


def config_map_name(workload: str, kind: str, data: Mapping[str, str]) -> str:
    """The name of a workload's ConfigMap of ``kind`` (``mtail``, ``files``): its content's hash, the same on every
    cluster."""
    return _name(workload, kind, spec_hash(dict(data)))


def hashed_config_map(
    resource_prefix: str,
    workload: str,
    kind: str,
    data: dict[str, str],
    namespace: pulumi.Input[str],
    opts: pulumi.ResourceOptions,
) -> str:
    """An immutable ConfigMap named by its content's hash (changed content makes a new one); returns its name."""
    name = config_map_name(workload, kind, data)
    k8s.core.v1.ConfigMap(
        f"{resource_prefix}-{kind}",
        metadata={
            "name": name,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/part-of": pod_contract.BENCHMARK_PART_OF},
        },
        data=data,
        immutable=True,
        opts=opts,
    )
    return name


class WorkloadJobs(pulumi.ComponentResource):
    """The workload Jobs of one cluster (CronJobs when they have a schedule): the benchmarks and the pool probes, plus
    their PodMonitor.

    Inherits the cluster's Kubernetes provider through ``opts.providers`` and ``parent=self``.
    """

    TYPE = "gpufleet:index:BenchmarkJobs"  # the type token of the URNs of deployed stacks: unchanged

    def __init__(
        self,
        cluster: Cluster,
        workload_jobs: list[WorkloadJob],
        namespace: pulumi.Input[str],
        opts: pulumi.ResourceOptions | None = None,
        credentials: Mapping[str, Mapping[str, str]] | None = None,
        root_namespace: pulumi.Input[str] | None = None,
        sweeping: Sequence[Workload] = (),
        dispatched: Sequence[Workload] = (),
        queue: Sequence[GpuPool] = (),
    ):
        """``root_namespace``: where the benchmarks of workloads that need root run (``needs_root``). ``sweeping``: the
        workloads of the cluster's sweep jobs (components/kubernetes/sweeps.py), whose credentials Secret and egress
        policy are made here too, like any benchmark's. ``dispatched``: the workloads whose Jobs the fleet's queues may
        give this worker (MultiKueue copies only the Job): their ConfigMaps, credentials Secret and egress policy are
        made here, and the PodMonitor scrapes their pods as any benchmark's. ``queue``: the card pools of the
        cluster's benchmark queue (``benchmark_queue.queued_pools``), whose Kueue then runs the Jobs in turn; none:
        they all start at once (a cluster whose Kubernetes is too old for Kueue)."""
        super().__init__(self.TYPE, f"{cluster.name}-benchmarks", None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.jobs: dict[tuple[str, str], pulumi.Resource] = {}
        maps: dict[str, tuple[str, str | None]] = {}
        workloads = {j.workload.name: j.workload for j in workload_jobs}
        workloads.update({wl.name: wl for wl in sweeping})
        workloads.update({wl.name: wl for wl in dispatched})
        homes: dict[str, pulumi.Input[str]] = {}
        for wl in workloads.values():
            if wl.spec.needs_root and root_namespace is None:
                raise ValueError(
                    f"{cluster.name}: {wl.name} needs root, but the cluster has no "
                    f"{pod_contract.ROOT_BENCHMARK_NAMESPACE}"
                )
            homes[wl.name] = root_namespace if wl.spec.needs_root else namespace  # type: ignore[assignment]
        secrets = self._credentials(cluster, list(workloads.values()), credentials or {}, homes, child)
        self.secrets = secrets
        for wl in workloads.values():
            if wl.spec.egress:
                egress_allow_list(
                    f"{cluster.name}-{wl.name}-egress",
                    f"egress-{wl.name}",
                    homes[wl.name],
                    {"app.kubernetes.io/part-of": pod_contract.BENCHMARK_PART_OF, "workload": wl.name},
                    [(rule.cidr, rule.ports) for rule in wl.spec.egress],
                    child,
                )
        for wl in dispatched:  # the pods of a dispatched Job name the same content-hashed ConfigMaps on every worker
            maps[wl.name] = config_maps(cluster, wl, homes[wl.name], child)
        self.queued = bool(queue) and bool(workload_jobs)
        local_queues: list[pulumi.Resource] = []
        if self.queued:
            used = {
                pod_contract.ROOT_BENCHMARK_NAMESPACE
                if j.workload.spec.needs_root
                else pod_contract.BENCHMARK_NAMESPACE
                for j in workload_jobs
            }
            places = [(pod_contract.BENCHMARK_NAMESPACE, namespace)]
            if pod_contract.ROOT_BENCHMARK_NAMESPACE in used and root_namespace is not None:
                places.append((pod_contract.ROOT_BENCHMARK_NAMESPACE, root_namespace))
            local_queues = benchmark_queue(cluster, queue, places, child)
        for job in workload_jobs:
            wl = job.workload
            home = homes[wl.name]
            if wl.name not in maps:
                maps[wl.name] = config_maps(cluster, wl, home, child)
            # a Job naming a LocalQueue that does not exist yet would wait as inadmissible: the queue first
            job_opts = pulumi.ResourceOptions(
                parent=self, depends_on=[*([secrets[wl.name]] if wl.name in secrets else []), *local_queues] or None
            )
            programs_cm, files_cm = maps[wl.name]
            key = (wl.name, job.pool.card)
            self.jobs[key] = self._job(cluster, job, home, programs_cm, files_cm, job_opts)
        both = [namespace, root_namespace] if any(wl.spec.needs_root for wl in workloads.values()) else None
        self.pod_monitor = pod_monitor(
            f"{cluster.name}-benchmark-podmonitor",
            "gpu-fleet-benchmarks",
            namespace,
            {"app.kubernetes.io/part-of": pod_contract.BENCHMARK_PART_OF},
            pod_contract.METRICS_PORT_NAME,
            pod_contract.METRIC_LABELS,
            child,
            namespaces=both,
            metricRelabelings=PROBE_SERIES_RELABELINGS,
        )
        self.register_outputs({"jobs": {f"{w}/{c}": j.metadata["name"] for (w, c), j in self.jobs.items()}})  # type: ignore[attr-defined]

    def _credentials(
        self,
        cluster: Cluster,
        workloads: list[Workload],
        credentials: Mapping[str, Mapping[str, str]],
        homes: Mapping[str, pulumi.Input[str]],
        opts: pulumi.ResourceOptions,
    ) -> dict[str, pulumi.Resource]:
        """The ``<workload>-credentials`` Secret of each workload here with ``secret_env``, from the stack's secret
        config ``gpu-fleet:workloadSecrets``; a warning for each one the config leaves to the operator."""
        needing = {w.name: w for w in workloads if w.spec.secret_env}
        secrets: dict[str, pulumi.Resource] = {}
        for name in sorted(set(credentials) - set(needing)):
            pulumi.log.warn(f"{cluster.name}: gpu-fleet:workloadSecrets.{name} is not used: no benchmark here needs it")
        for name, wl in sorted(needing.items()):
            wanted = wl.spec.secret_env
            if name not in credentials:
                pulumi.log.warn(
                    f"{cluster.name}: {name}'s pods wait for their credentials ({', '.join(wanted)}): "
                    f"pulumi config set --stack {cluster.name} --secret --path "
                    f"'gpu-fleet:workloadSecrets.{name}.{wanted[0]}' <value>, and so on"
                )
                continue
            given = credentials[name]
            if set(given) != set(wanted):
                missing, unknown = sorted(set(wanted) - set(given)), sorted(set(given) - set(wanted))
                raise ValueError(
                    f"gpu-fleet:workloadSecrets.{name} must set exactly {', '.join(wanted)} "
                    f"(the secret_env of {name}/workload.yaml): missing {missing}, not expected {unknown}"
                )
            secrets[name] = k8s.core.v1.Secret(
                f"{cluster.name}-{name}-credentials",
                metadata={
                    "name": wl.credentials_secret,
                    "namespace": homes[name],
                    "labels": {"app.kubernetes.io/part-of": pod_contract.BENCHMARK_PART_OF, "workload": name},
                },
                type="Opaque",
                string_data={k: pulumi.Output.secret(given[k]) for k in wanted},
                opts=opts,
            )
        return secrets

    def _job(
        self,
        cluster: Cluster,
        job: WorkloadJob,
        namespace: pulumi.Input[str],
        programs_cm: str,
        files_cm: str | None,
        opts: pulumi.ResourceOptions,
    ) -> pulumi.Resource:
        spec = job.workload.spec
        labels = pod_labels(cluster, job)
        template = {"metadata": {"labels": labels}, "spec": pod_spec(cluster, job, programs_cm, files_cm)}
        queue = {pod_contract.QUEUE_NAME_LABEL: pod_contract.BENCHMARK_QUEUE} if self.queued else {}
        job_spec = {
            "backoffLimit": spec.backoff_limit,
            "activeDeadlineSeconds": pod_contract.active_deadline_seconds(spec.timeout_seconds),
            "template": template,
        }
        # The Jobs a CronJob starts are Kubernetes' own: they may expire. A Job that Pulumi manages must not:
        # once the TTL controller deleted it, `pulumi up --refresh` would see it gone and create (and run) it again.
        scheduled_spec = {**job_spec, "ttlSecondsAfterFinished": spec.ttl_seconds_after_finished}
        # the name follows what the object holds: a one-off Job's spec, or the CronJob's template and schedule. A Job's
        # queue is part of it: Kueue refuses a queue-name label added to a Job that is not suspended, as every Job that
        # ran is (kueue v0.19.2 pkg/controller/jobframework/validation.go validateUpdateForQueueName), so a Job that
        # starts queueing is a new Job. A CronJob takes the label in place: only the Jobs it starts next carry it.
        hashed = [scheduled_spec, job.schedule] if job.schedule else [job_spec, queue] if queue else job_spec
        name = _name(spec.name, job.pool.card, spec_hash(hashed))
        metadata = {
            "name": name,
            "namespace": namespace,
            "labels": labels if job.schedule else {**labels, **queue},
            "annotations": {"pulumi.com/skipAwait": "true"},
        }
        resource_name = f"{cluster.name}-{spec.name}-{job.pool.card}"
        if job.schedule:
            return k8s.batch.v1.CronJob(
                resource_name,
                metadata=metadata,
                spec={
                    "schedule": job.schedule,
                    "timeZone": CRONJOB_TIME_ZONE,
                    "concurrencyPolicy": "Forbid",
                    "startingDeadlineSeconds": 3600,
                    "successfulJobsHistoryLimit": 3,
                    "failedJobsHistoryLimit": 3,
                    # Kueue's webhook suspends each Job the CronJob starts, as it carries the label (kueue v0.19.2
                    # site/content/en/docs/tasks/run/run_cronjobs.md: the label in jobTemplate.metadata, no suspend)
                    "jobTemplate": {"metadata": {"labels": {**labels, **queue}}, "spec": scheduled_spec},
                },
                opts=opts,
            )
        # Kueue's webhook creates the Job suspended and Kueue resumes it on admission: ``spec.suspend`` is Kueue's, so
        # Pulumi neither sets it (an update would then suspend a running Job again, or conflict with Kueue's change)
        # nor diffs it
        queued = pulumi.ResourceOptions(ignore_changes=["spec.suspend"]) if queue else None
        return k8s.batch.v1.Job(
            resource_name, metadata=metadata, spec=job_spec, opts=pulumi.ResourceOptions.merge(opts, queued)
        )
