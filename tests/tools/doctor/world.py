"""The objects of a cluster as the official client's typed models, built for the doctor's tests: nodes of a pool,
the node agents, the fleet's Jobs, CronJobs and pods, events, and a healthy cluster of the fixture fleet to break."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from kubernetes import client as k8s

from fleet.model.core import pod_contract
from fleet.model.core.clusters import Cluster
from fleet.model.core.fleet import Fleet
from fleet.model.core.pools import GpuPool
from fleet.tools.doctor.names import DEVICE_PLUGIN, DEVICE_PLUGIN_NS, EXPORTER, GATEWAY, MONITORING_NS, NODE_AGENTS_NS
from tests.tools.doctor.fake_kube_api import World

# The clock every doctor run of these tests reads (doctor.run's clock): the objects' ages are measured from it, so a
# test gives the same answer however long after collection it runs.
NOW = datetime(2026, 3, 2, 9, 30, tzinfo=UTC)


def ago(seconds: float) -> datetime:
    return NOW - timedelta(seconds=seconds)


def meta(
    name: str, namespace: str | None = None, labels: dict[str, str] | None = None, **extra: Any
) -> k8s.V1ObjectMeta:
    return k8s.V1ObjectMeta(
        name=name,
        namespace=namespace,
        labels=labels or {},
        uid=f"uid-{namespace}-{name}",
        creation_timestamp=extra.pop("created", ago(3600)),
        **extra,
    )


def owner(kind: str, name: str, api_version: str) -> k8s.V1OwnerReference:
    return k8s.V1OwnerReference(api_version=api_version, kind=kind, name=name, uid=f"uid-{name}", controller=True)


def gpu_node(
    pool: GpuPool, name: str, allocatable: int | None = None, ready: bool = True, **changes: Any
) -> k8s.V1Node:
    """A node of ``pool``: its labels and taints as the fleet declares them, its accelerators allocatable."""
    count = pool.units_per_node if allocatable is None else allocatable  # a shared card advertises its slices
    labels = {**pool.labels, **pool.node_selector, "kubernetes.io/hostname": name, **changes.pop("labels", {})}
    taints = changes.pop("taints", [k8s.V1Taint(key=t.key, value=t.value, effect=t.effect) for t in pool.taints])
    resources = {"cpu": "8", "memory": "61Gi", "pods": "110", pool.resource: str(count)}
    return k8s.V1Node(
        metadata=meta(name, labels=labels),
        spec=k8s.V1NodeSpec(taints=taints),
        status=k8s.V1NodeStatus(
            capacity={**resources, pool.resource: str(pool.units_per_node)},
            allocatable=resources,
            conditions=[k8s.V1NodeCondition(type="Ready", status="True" if ready else "False", reason="KubeletReady")],
        ),
    )


def system_node(cluster: Cluster) -> k8s.V1Node:
    return k8s.V1Node(
        metadata=meta("system-1", labels={**cluster.system_selector, "kubernetes.io/hostname": "system-1"}),
        spec=k8s.V1NodeSpec(),
        status=k8s.V1NodeStatus(
            allocatable={"cpu": "2", "memory": "7Gi", "pods": "29"},
            conditions=[k8s.V1NodeCondition(type="Ready", status="True", reason="KubeletReady")],
        ),
    )


def container(name: str, image: str) -> k8s.V1Container:
    return k8s.V1Container(name=name, image=image)


def pod_template(labels: dict[str, str]) -> k8s.V1PodTemplateSpec:
    return k8s.V1PodTemplateSpec(
        metadata=k8s.V1ObjectMeta(labels=labels),
        spec=k8s.V1PodSpec(containers=[container("main", "registry.example/x:1")], restart_policy="Never"),
    )


def daemonset(name: str, namespace: str, nodes: list[k8s.V1Node], ready: int | None = None) -> k8s.V1DaemonSet:
    labels = {"app.kubernetes.io/name": name, "app.kubernetes.io/instance": name}
    return k8s.V1DaemonSet(
        metadata=meta(name, namespace, labels),
        spec=k8s.V1DaemonSetSpec(selector=k8s.V1LabelSelector(match_labels=labels), template=pod_template(labels)),
        status=k8s.V1DaemonSetStatus(
            current_number_scheduled=len(nodes),
            desired_number_scheduled=len(nodes),
            number_misscheduled=0,
            number_ready=len(nodes) if ready is None else ready,
            number_available=len(nodes) if ready is None else ready,
        ),
    )


def agent_pod(ds: k8s.V1DaemonSet, node: k8s.V1Node, waiting: tuple[str, str] | None = None) -> k8s.V1Pod:
    name = f"{ds.metadata.name}-{node.metadata.name[-5:]}"
    image = f"nvcr.io/nvidia/{ds.metadata.name}:1"
    state = (
        k8s.V1ContainerState(waiting=k8s.V1ContainerStateWaiting(reason=waiting[0], message=waiting[1]))
        if waiting
        else k8s.V1ContainerState(running=k8s.V1ContainerStateRunning(started_at=ago(600)))
    )
    return k8s.V1Pod(
        metadata=meta(
            name,
            ds.metadata.namespace,
            dict(ds.spec.selector.match_labels),
            owner_references=[owner("DaemonSet", ds.metadata.name, "apps/v1")],
        ),
        spec=k8s.V1PodSpec(node_name=node.metadata.name, containers=[container(ds.metadata.name, image)]),
        status=k8s.V1PodStatus(
            phase="Running" if not waiting else "Pending",
            conditions=[k8s.V1PodCondition(type="Ready", status="False" if waiting else "True")],
            container_statuses=[
                k8s.V1ContainerStatus(
                    name=ds.metadata.name,
                    image=image,
                    image_id="",
                    ready=not waiting,
                    restart_count=0,
                    state=state,
                )
            ],
        ),
    )


def fleet_labels(cluster: Cluster, pool: GpuPool, workload: str, part_of: str) -> dict[str, str]:
    """The labels of a benchmark's (or a probe's) Job and pods (components/kubernetes/benchmark.py pod_labels)."""
    return {
        "app.kubernetes.io/part-of": part_of,
        "app.kubernetes.io/name": workload,
        "workload": workload,
        "gpu": pool.card,
        "cluster": cluster.name,
        "cloud": cluster.cloud,
    }


def job(name: str, namespace: str, labels: dict[str, str], complete: bool = True, **extra: Any) -> k8s.V1Job:
    conditions = (
        [k8s.V1JobCondition(type="Complete", status="True", last_transition_time=ago(1200))] if complete else []
    )
    return k8s.V1Job(
        metadata=meta(name, namespace, labels, **extra),
        spec=k8s.V1JobSpec(template=pod_template(labels), backoff_limit=0),
        status=k8s.V1JobStatus(
            succeeded=1 if complete else None,
            active=None if complete else 1,
            start_time=ago(3000),
            completion_time=ago(1200) if complete else None,
            conditions=conditions or None,
        ),
    )


def cronjob(name: str, namespace: str, labels: dict[str, str], schedule: str) -> k8s.V1CronJob:
    return k8s.V1CronJob(
        metadata=meta(name, namespace, labels),
        spec=k8s.V1CronJobSpec(
            schedule=schedule,
            job_template=k8s.V1JobTemplateSpec(
                metadata=k8s.V1ObjectMeta(labels=labels), spec=k8s.V1JobSpec(template=pod_template(labels))
            ),
        ),
        status=k8s.V1CronJobStatus(last_schedule_time=ago(3000), last_successful_time=ago(1200)),
    )


def job_pod(the_job: k8s.V1Job, phase: str = "Succeeded", **status: Any) -> k8s.V1Pod:
    """A pod of ``the_job`` as the Job controller makes it (owner reference, job-name labels)."""
    name = f"{the_job.metadata.name}-x7k2p"
    labels = {
        **the_job.metadata.labels,
        "batch.kubernetes.io/job-name": the_job.metadata.name,
        "job-name": the_job.metadata.name,
    }
    tolerations = status.pop("tolerations", [])
    return k8s.V1Pod(
        metadata=meta(
            name,
            the_job.metadata.namespace,
            labels,
            created=status.pop("created", ago(1800)),
            owner_references=[owner("Job", the_job.metadata.name, "batch/v1")],
        ),
        spec=k8s.V1PodSpec(
            node_name=status.pop("node_name", None),
            node_selector=status.pop("node_selector", None),
            tolerations=tolerations,
            restart_policy="Never",
            containers=[container("workload", f"registry.example.org/lab/fixture-{labels['workload']}:1.0.0")],
            init_containers=[container("mtail", "registry.example.org/lab/mtail:3.0.8")],
        ),
        status=k8s.V1PodStatus(phase=phase, **status),
    )


def namespace_of(fleet: Fleet, workload: str) -> str:
    root = fleet.deployed_workloads[workload].spec.needs_root
    return pod_contract.ROOT_BENCHMARK_NAMESPACE if root else pod_contract.BENCHMARK_NAMESPACE


def healthy(fleet: Fleet, cluster: Cluster) -> World:
    """A cluster where all is well: the first GPU pool has a node (the others are at zero), the node agents run on it,
    every benchmark's Job (or CronJob's last Job) and every probe's last Job completed, the gateway has an address."""
    world = World()
    world.nodes = [system_node(cluster)]
    served: dict[str, list[k8s.V1Node]] = {DEVICE_PLUGIN: [], EXPORTER: []}
    for i, pool in enumerate(cluster.pools):
        for n in range(max(pool.min_nodes, 1 if i == 0 else 0)):
            node = gpu_node(pool, f"{pool.name}-node-{n + 1}")
            world.nodes.append(node)
            if pool.needs_device_plugin:
                served[DEVICE_PLUGIN].append(node)
            if pool.accelerator.is_nvidia:
                served[EXPORTER].append(node)
    nvidia = [p for p in cluster.pools if p.accelerator.is_nvidia]
    agents = []
    if any(p.needs_device_plugin for p in nvidia):
        agents.append((DEVICE_PLUGIN, DEVICE_PLUGIN_NS))
    if nvidia:
        agents.append((EXPORTER, NODE_AGENTS_NS))
    for name, namespace in agents:
        ds = daemonset(name, namespace, served[name])
        world.daemonsets.append(ds)
        world.pods += [agent_pod(ds, node) for node in served[name]]
    if not cluster.central:
        labels = {"app.kubernetes.io/name": GATEWAY, "app.kubernetes.io/part-of": "gpu-fleet"}
        world.deployments.append(
            k8s.V1Deployment(
                metadata=meta(GATEWAY, MONITORING_NS, labels),
                spec=k8s.V1DeploymentSpec(
                    replicas=1, selector=k8s.V1LabelSelector(match_labels=labels), template=pod_template(labels)
                ),
                status=k8s.V1DeploymentStatus(replicas=1, ready_replicas=1, available_replicas=1),
            )
        )
        world.services.append(
            k8s.V1Service(
                metadata=meta(GATEWAY, MONITORING_NS, labels),
                spec=k8s.V1ServiceSpec(type="LoadBalancer", ports=[k8s.V1ServicePort(name="https", port=443)]),
                status=k8s.V1ServiceStatus(
                    load_balancer=k8s.V1LoadBalancerStatus(ingress=[k8s.V1LoadBalancerIngress(ip="203.0.113.10")])
                ),
            )
        )
    for bench in fleet.workload_jobs(cluster):
        namespace = namespace_of(fleet, bench.workload.name)
        labels = fleet_labels(cluster, bench.pool, bench.workload.name, pod_contract.BENCHMARK_PART_OF)
        base = f"{bench.workload.name}-{bench.pool.card}"
        if bench.schedule:
            cron = cronjob(f"{base}-1a2b3c4d", namespace, labels, bench.schedule)
            world.cronjobs.append(cron)
            run = job(
                f"{cron.metadata.name}-29000000",
                namespace,
                labels,
                owner_references=[owner("CronJob", cron.metadata.name, "batch/v1")],
            )
        else:
            run = job(f"{base}-5e6f7a8b", namespace, labels)
        world.jobs.append(run)
        world.pods.append(job_pod(run))
    return world


def event(
    about: k8s.V1Pod | k8s.V1Job, reason: str, message: str, component: str, kind: str = "Normal", age: float = 30
) -> k8s.CoreV1Event:
    """An event about a pod or a Job, as the core/v1 API lists it."""
    obj_kind = "Pod" if isinstance(about, k8s.V1Pod) else "Job"
    namespace = about.metadata.namespace
    return k8s.CoreV1Event(
        metadata=meta(f"{about.metadata.name}.{abs(hash((reason, message))) % 10**12:x}", namespace),
        involved_object=k8s.V1ObjectReference(
            kind=obj_kind,
            namespace=namespace,
            name=about.metadata.name,
            uid=about.metadata.uid,
            api_version="v1" if obj_kind == "Pod" else "batch/v1",
        ),
        reason=reason,
        message=message,
        type=kind,
        source=k8s.V1EventSource(component=component),
        first_timestamp=ago(age + 60),
        last_timestamp=ago(age),
        count=3,
    )


def make_pending(world: World, fleet: Fleet, cluster: Cluster, pool: GpuPool, **status: Any) -> k8s.V1Pod:
    """Turn the one-off benchmark Job of ``pool`` into a running Job whose only pod is Pending with ``status``."""
    bench = next(b for b in fleet.benchmarks(cluster) if b.pool is pool and not b.schedule)
    the_job = world.job_of(bench.workload.name, pool.card)
    pending = job(the_job.metadata.name, the_job.metadata.namespace, dict(the_job.metadata.labels), complete=False)
    world.jobs[world.jobs.index(the_job)] = pending
    world.pods = [p for p in world.pods if p.metadata.labels.get("job-name") != the_job.metadata.name]
    tolerations = [
        k8s.V1Toleration(key=t.key, operator="Equal", value=t.value, effect=t.effect) for t in pool.pod_tolerations
    ]
    pod = job_pod(
        pending,
        phase="Pending",
        tolerations=tolerations,
        node_selector=dict(pool.node_selector),
        created=status.pop("created", ago(900)),
        **status,
    )
    world.pods.append(pod)
    return pod


def unschedulable(message: str) -> list[k8s.V1PodCondition]:
    return [
        k8s.V1PodCondition(
            type="PodScheduled", status="False", reason="Unschedulable", message=message, last_transition_time=ago(800)
        )
    ]


def fit_error(total: int, reasons: dict[str, int], victims: int = 0) -> str:
    """A FailedScheduling message as kube-scheduler v1.33.3 writes it, the fleet's default Kubernetes (pkg/scheduler/
    framework/types.go FitError.Error(), the same at v1.31.2, v1.34.1 and v1.35.4: "0/N nodes are available: " +
    "<count> <reason>" sort.Strings'ed and joined with ", " + "."; then " " + the PostFilter message,
    DefaultPreemption's "preemption: " + a FitError of its own: ``victims`` nodes it tried, "No preemption victims
    found for incoming pod", the rest "Preemption is not helpful for scheduling"; framework/preemption/preemption.go
    Preempt)."""

    def histogram(counts: dict[str, int]) -> str:
        return ", ".join(sorted(f"{v} {k}" for k, v in counts.items() if v))

    preemption = {
        "No preemption victims found for incoming pod": victims,
        "Preemption is not helpful for scheduling": total - victims,
    }
    return (
        f"0/{total} nodes are available: {histogram(reasons)}. "
        f"preemption: 0/{total} nodes are available: {histogram(preemption)}."
    )
