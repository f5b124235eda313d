"""``python -m fleet doctor`` against a Kubernetes API served on 127.0.0.1.

No API server can run here, and no recorded responses of a real cluster exist in this repository: the loopback server
answers ``list`` requests with bodies built from the official ``kubernetes`` client's own typed models (V1NodeList,
V1PodList, CoreV1EventList, V1DaemonSetList, V1DeploymentList, V1ServiceList, V1JobList, V1CronJobList), serialized
with ``ApiClient().sanitize_for_serialization``: the field names and shapes are the API's (the models refuse an object
without its required fields), and the client under test parses them as it parses a real cluster's. The condition and
event messages follow the upstream formats fleet/tools/doctor.py cites beside each pattern.

The cluster is one of the tests' own fixture fleet (tests/fixtures/fleet), and every expectation about pools,
benchmarks and probes is derived from that fleet as loaded. The Prometheus rows against a real Prometheus are in
tests/e2e/test_doctor_prometheus.py.
"""

from __future__ import annotations

import json
import os
import re
import stat
import threading
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s

from fleet.model import pod_contract
from fleet.model.spec import Cluster, Fleet, GpuPool, load_fleet
from fleet.tools import doctor
from fleet.tools.cli import build_parser, main
from tests.conftest import FIXTURES

FLEET_DIR = FIXTURES / "fleet"
POLICY = FLEET_DIR / "fleet.yaml"
WORKLOADS = FLEET_DIR / "workloads"
STACKS = FLEET_DIR / "stacks"
TOKEN = "doctor-test-token"
BASE = ["doctor", "--policy", str(POLICY), "--workloads-dir", str(WORKLOADS), "--stacks-dir", str(STACKS)]
# The clock every doctor run of these tests reads (doctor.run's clock): the objects' ages are measured from it, so a
# test gives the same answer however long after collection it runs.
NOW = datetime(2026, 3, 2, 9, 30, tzinfo=UTC)
SERIALIZER = k8s.ApiClient()


@pytest.fixture(scope="module")
def fleet() -> Fleet:
    return load_fleet(POLICY, WORKLOADS)


def doctor_at(argv: list[str], now: datetime = NOW) -> int:
    """``python -m fleet doctor ...`` as ``main`` runs it, with doctor's clock stopped at ``now``."""
    return doctor.run(build_parser().parse_args(argv), clock=lambda: now)


def leaf_of(fleet: Fleet) -> Cluster:
    """A leaf whose NVIDIA pools need the fleet's device plugin and which runs one-off and scheduled benchmarks."""
    for cluster in fleet.clusters.values():
        benches = fleet.benchmarks(cluster)
        if (
            not cluster.central
            and any(p.needs_device_plugin for p in cluster.pools)
            and any(b.schedule for b in benches)
            and any(not b.schedule for b in benches)
        ):
            return cluster
    raise AssertionError("the fixture fleet has no leaf with scheduled and one-off benchmarks on device-plugin pools")


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


# --- the cluster's objects, as typed models --------------------------------------------------------------------------


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
            containers=[container("workload", f"ghcr.io/gpu-fleet/fixture-{labels['workload']}:1.0.0")],
            init_containers=[container("mtail", "ghcr.io/gpu-fleet/mtail:3.0.8")],
        ),
        status=k8s.V1PodStatus(phase=phase, **status),
    )


@dataclass
class World:
    """Every object the loopback API server lists."""

    nodes: list[k8s.V1Node] = field(default_factory=list)
    daemonsets: list[k8s.V1DaemonSet] = field(default_factory=list)
    deployments: list[k8s.V1Deployment] = field(default_factory=list)
    services: list[k8s.V1Service] = field(default_factory=list)
    jobs: list[k8s.V1Job] = field(default_factory=list)
    cronjobs: list[k8s.V1CronJob] = field(default_factory=list)
    pods: list[k8s.V1Pod] = field(default_factory=list)
    events: list[k8s.CoreV1Event] = field(default_factory=list)

    def job_of(self, workload: str, card: str) -> k8s.V1Job:
        return next(
            j for j in self.jobs if j.metadata.labels.get("workload") == workload and j.metadata.labels["gpu"] == card
        )


def namespace_of(fleet: Fleet, workload: str) -> str:
    root = fleet.deployed_workloads[workload].spec.needs_root
    return pod_contract.ROOT_BENCHMARK_NAMESPACE if root else pod_contract.BENCHMARK_NAMESPACE


def healthy(fleet: Fleet, cluster: Cluster) -> World:
    """A cluster where all is well: the first GPU pool has a node (the others are at zero), the node agents run on it,
    every benchmark's Job (or CronJob's last Job) and every probe's last Job completed, the gateway has an address."""
    world = World()
    world.nodes = [system_node(cluster)]
    served: dict[str, list[k8s.V1Node]] = {doctor.DEVICE_PLUGIN: [], doctor.EXPORTER: []}
    for i, pool in enumerate(cluster.pools):
        for n in range(max(pool.min_nodes, 1 if i == 0 else 0)):
            node = gpu_node(pool, f"{pool.name}-node-{n + 1}")
            world.nodes.append(node)
            if pool.needs_device_plugin:
                served[doctor.DEVICE_PLUGIN].append(node)
            if pool.accelerator.is_nvidia:
                served[doctor.EXPORTER].append(node)
    nvidia = [p for p in cluster.pools if p.accelerator.is_nvidia]
    agents = []
    if any(p.needs_device_plugin for p in nvidia):
        agents.append((doctor.DEVICE_PLUGIN, doctor.DEVICE_PLUGIN_NS))
    if nvidia:
        agents.append((doctor.EXPORTER, doctor.NODE_AGENTS_NS))
    for name, namespace in agents:
        ds = daemonset(name, namespace, served[name])
        world.daemonsets.append(ds)
        world.pods += [agent_pod(ds, node) for node in served[name]]
    if not cluster.central:
        labels = {"app.kubernetes.io/name": doctor.GATEWAY, "app.kubernetes.io/part-of": "gpu-fleet"}
        world.deployments.append(
            k8s.V1Deployment(
                metadata=meta(doctor.GATEWAY, doctor.MONITORING_NS, labels),
                spec=k8s.V1DeploymentSpec(
                    replicas=1, selector=k8s.V1LabelSelector(match_labels=labels), template=pod_template(labels)
                ),
                status=k8s.V1DeploymentStatus(replicas=1, ready_replicas=1, available_replicas=1),
            )
        )
        world.services.append(
            k8s.V1Service(
                metadata=meta(doctor.GATEWAY, doctor.MONITORING_NS, labels),
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


# --- the loopback API server ----------------------------------------------------------------------------------------

# path pattern -> (World attribute, list model, list kind, API version)
ROUTES = [
    (re.compile(r"^/api/v1/nodes$"), "nodes", k8s.V1NodeList, "NodeList", "v1"),
    (
        re.compile(r"^/apis/apps/v1/namespaces/([^/]+)/daemonsets$"),
        "daemonsets",
        k8s.V1DaemonSetList,
        "DaemonSetList",
        "apps/v1",
    ),
    (
        re.compile(r"^/apis/apps/v1/namespaces/([^/]+)/deployments$"),
        "deployments",
        k8s.V1DeploymentList,
        "DeploymentList",
        "apps/v1",
    ),
    (re.compile(r"^/api/v1/namespaces/([^/]+)/services$"), "services", k8s.V1ServiceList, "ServiceList", "v1"),
    (re.compile(r"^/apis/batch/v1/namespaces/([^/]+)/jobs$"), "jobs", k8s.V1JobList, "JobList", "batch/v1"),
    (
        re.compile(r"^/apis/batch/v1/namespaces/([^/]+)/cronjobs$"),
        "cronjobs",
        k8s.V1CronJobList,
        "CronJobList",
        "batch/v1",
    ),
    (re.compile(r"^/api/v1/namespaces/([^/]+)/pods$"), "pods", k8s.V1PodList, "PodList", "v1"),
    (re.compile(r"^/api/v1/namespaces/([^/]+)/events$"), "events", k8s.CoreV1EventList, "EventList", "v1"),
]


COLLECTIONS = ("/nodes", "/daemonsets", "/deployments", "/services", "/jobs", "/cronjobs", "/pods", "/events")


def selector_matches(selector: str, labels: dict[str, str]) -> bool:
    """The label selector syntax the doctor sends: ``k=v``, ``k in (a,b)``, ``k``, comma-separated."""
    for term in re.split(r",(?![^()]*\))", selector):
        term = term.strip()
        if not term:
            continue
        inside = re.match(r"^(\S+)\s+in\s+\((.*)\)$", term)
        if inside:
            if labels.get(inside.group(1)) not in [v.strip() for v in inside.group(2).split(",")]:
                return False
        elif "=" in term:
            key, value = term.split("=", 1)
            if labels.get(key.rstrip("=")) != value.lstrip("="):
                return False
        elif term not in labels:
            return False
    return True


class ApiServer:
    """Kubernetes API ``list`` answers on 127.0.0.1 for the objects of a :class:`World`; records every request.

    Anything but GET is refused (405) and recorded, so a test sees that the doctor only reads. Requests without the
    kubeconfig's bearer token get 401, as from a real API server.
    """

    def __init__(self, world: World):
        self.world = world
        self.requests: list[tuple[str, str]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _send(self, code: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                server.requests.append(("GET", self.path))
                if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    self._send(401, status_body(401, "Unauthorized", "Unauthorized"))
                    return
                self._send(*server.answer(self.path))

            def _refuse(self) -> None:
                server.requests.append((self.command, self.path))
                self._send(405, status_body(405, "MethodNotAllowed", "the doctor must only read"))

            def do_POST(self) -> None:
                self._refuse()

            def do_PUT(self) -> None:
                self._refuse()

            def do_PATCH(self) -> None:
                self._refuse()

            def do_DELETE(self) -> None:
                self._refuse()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    def answer(self, raw: str) -> tuple[int, dict[str, Any]]:
        parsed = urllib.parse.urlsplit(raw)
        query = urllib.parse.parse_qs(parsed.query)
        selector = query.get("labelSelector", [""])[0]
        for pattern, attribute, list_model, kind, version in ROUTES:
            match = pattern.match(parsed.path)
            if not match:
                continue
            namespace = match.group(1) if match.groups() else None
            items = [
                o
                for o in getattr(self.world, attribute)
                if (namespace is None or o.metadata.namespace == namespace)
                and selector_matches(selector, o.metadata.labels or {})
            ]
            body = list_model(
                api_version=version, kind=kind, metadata=k8s.V1ListMeta(resource_version="4711"), items=items
            )
            return 200, SERIALIZER.sanitize_for_serialization(body)
        return 404, status_body(404, "NotFound", "the server could not find the requested resource")

    def __enter__(self) -> ApiServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


def status_body(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


def write_kubeconfig(path: Path, server: str) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "loopback", "cluster": {"server": server}}],
                "users": [{"name": "doctor", "user": {"token": TOKEN}}],
                "contexts": [{"name": "loopback", "context": {"cluster": "loopback", "user": "doctor"}}],
                "current-context": "loopback",
            }
        ),
        encoding="utf-8",
    )
    return path


@dataclass
class Result:
    status: int
    out: str
    err: str
    requests: list[tuple[str, str]]


@pytest.fixture
def run_doctor(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Iterator[Any]:
    """Run ``python -m fleet doctor`` on a world served on loopback; returns the exit status, output and requests."""

    def run(world: World, stack: str, *extra: str) -> Result:
        with ApiServer(world) as api:
            kubeconfig = write_kubeconfig(tmp_path / "kubeconfig.yaml", api.url)
            status = doctor_at(
                [
                    "doctor",
                    "--policy",
                    str(POLICY),
                    "--workloads-dir",
                    str(WORKLOADS),
                    "--stacks-dir",
                    str(STACKS),
                    "--stack",
                    stack,
                    "--kubeconfig",
                    str(kubeconfig),
                    "--timeout",
                    "5",
                    *extra,
                ]
            )
            captured = capsys.readouterr()
            return Result(status, captured.out, captured.err, list(api.requests))

    yield run


def row_of(out: str, start: str) -> str:
    """The table line of the check starting with ``start``, with its problem and fix lines."""
    lines = out.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(start):
            block = [line]
            for follow in lines[i + 1 :]:
                if not follow.startswith(" "):
                    break
                block.append(follow.strip())
            return "\n".join(block)
    raise AssertionError(f"no row starting with {start!r} in:\n{out}")


# --- tests ----------------------------------------------------------------------------------------------------------


def test_a_healthy_leaf_exits_0_and_shows_every_pool_benchmark_and_probe(fleet, run_doctor):
    cluster = leaf_of(fleet)
    result = run_doctor(healthy(fleet, cluster), cluster.name)
    assert result.status == 0, result.out + result.err
    assert "FAIL" not in result.out and "Traceback" not in result.err
    for pool in cluster.all_pools:
        row = row_of(result.out, f"pool {pool.name} ")
        expected = pool.units_per_node if pool is cluster.pools[0] else 0  # a shared card: its slices
        assert f"{expected} {pool.resource} allocatable" in row
    for bench in fleet.benchmarks(cluster):
        row = row_of(result.out, f"benchmark {bench.workload.name} on {bench.pool.card}")
        assert "Complete" in row and " ok " in row
    probed = [p for p in cluster.pools if p.probe is not None]
    for pool in probed:
        assert "Complete" in row_of(result.out, f"probe of pool {pool.name}")
    assert "1/1 ready" in row_of(result.out, "NVIDIA device plugin")
    assert "1/1 ready" in row_of(result.out, "dcgm-exporter")
    assert "203.0.113.10:443" in row_of(result.out, "federation gateway")
    # no Prometheus URL: its rows are skipped, say so, and give the exact port-forward commands
    targets = row_of(result.out, "PodMonitor benchmarks/gpu-fleet-benchmarks: targets up")
    assert " skip " in targets
    assert f"-n monitoring port-forward svc/{doctor.PROMETHEUS_SERVICE} 9090:9090" in targets
    assert "--kubeconfig " in targets
    central = row_of(result.out, f"federation: {fleet.central.name} scrapes {cluster.name}")
    assert f"pulumi stack output kubeconfig --show-secrets --stack {fleet.central.name}" in central
    assert "--central-prometheus http://127.0.0.1:9091" in central
    # read-only: list calls only, every one a GET, none refused
    assert result.requests and all(method == "GET" for method, _ in result.requests)
    # ... and only collections, never one object by name
    assert all(urllib.parse.urlsplit(path).path.endswith(COLLECTIONS) for _, path in result.requests)


def test_the_central_lists_no_gateway_and_one_federation_row_per_leaf(fleet, run_doctor):
    central = fleet.central
    result = run_doctor(healthy(fleet, central), central.name)
    assert result.status == 0, result.out
    assert "federation gateway" not in result.out
    for leaf in (c for c in fleet.clusters.values() if not c.central):
        row = row_of(result.out, f"federation: {central.name} scrapes {leaf.name}")
        assert " skip " in row and "--prometheus http://127.0.0.1:9090" in row


def test_an_untolerated_taint_on_the_pools_node_is_named_with_its_fix(fleet, run_doctor):
    cluster = leaf_of(fleet)
    world = healthy(fleet, cluster)
    pool = cluster.pools[0]
    world.nodes[1] = gpu_node(
        pool,
        world.nodes[1].metadata.name,
        taints=[
            *[k8s.V1Taint(key=t.key, value=t.value, effect=t.effect) for t in pool.taints],
            k8s.V1Taint(key="example.com/maintenance", value="true", effect="NoSchedule"),
        ],
    )
    make_pending(
        world,
        fleet,
        cluster,
        pool,
        conditions=unschedulable(
            "0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 1 node(s) had untolerated "
            "taint(s). preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
        ),
    )
    result = run_doctor(world, cluster.name)
    assert result.status == 1
    row = next(
        row_of(result.out, f"benchmark {b.workload.name} on {pool.card}")
        for b in fleet.benchmarks(cluster)
        if b.pool is pool and not b.schedule
    )
    assert "FAIL" in row and "Pending" in row
    assert "example.com/maintenance=true:NoSchedule" in row and world.nodes[1].metadata.name in row
    assert f"spot_taints of {cluster.cloud} in fleet/model/catalogue.yaml" in row
    assert f"pulumi up --stack {cluster.name}" in row
    # the fleet's own accelerator taint is tolerated: it is not blamed
    assert all(t.as_string() not in row.split("problem:")[1].split("fix:")[0] for t in pool.taints)


def pending_row(result: Result, fleet: Fleet, cluster: Cluster, pool: GpuPool) -> str:
    bench = next(b for b in fleet.benchmarks(cluster) if b.pool is pool and not b.schedule)
    return row_of(result.out, f"benchmark {bench.workload.name} on {pool.card}")


def test_insufficient_accelerator_with_not_trigger_scale_up_names_the_node_template(fleet, run_doctor):
    cluster = leaf_of(fleet)
    world = healthy(fleet, cluster)
    pool = cluster.pools[-1]  # at zero nodes in the healthy world
    assert not doctor.pool_nodes(pool, world.nodes)
    pod = make_pending(
        world,
        fleet,
        cluster,
        pool,
        conditions=unschedulable(
            "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector. preemption: 0/2 nodes are "
            "available: 2 Preemption is not helpful for scheduling."
        ),
    )
    world.events.append(
        event(pod, "FailedScheduling", "0/2 nodes are available: ...", "default-scheduler", "Warning", age=600)
    )
    world.events.append(
        event(
            pod,
            doctor.NOT_TRIGGERED,
            f"pod didn't trigger scale-up: 1 Insufficient {pool.resource}, 2 node(s) didn't match Pod's node "
            "affinity/selector",
            "cluster-autoscaler",
        )
    )
    result = run_doctor(world, cluster.name)
    assert result.status == 1
    row = pending_row(result, fleet, cluster, pool)
    assert "FAIL" in row and doctor.NOT_TRIGGERED in row
    assert f"node template of pool {pool.name} has no {pool.resource}" in row
    if cluster.cloud == "aws":
        expected = f"k8s.io/cluster-autoscaler/node-template/resources/{pool.resource}={pool.accelerators_per_node}"
        assert expected in row
    assert f"pulumi up --stack {cluster.name}" in row


def test_max_node_group_size_reached_points_at_max_nodes(fleet, run_doctor):
    cluster = leaf_of(fleet)
    world = healthy(fleet, cluster)
    pool = cluster.pools[-1]
    pod = make_pending(
        world, fleet, cluster, pool, conditions=unschedulable("0/2 nodes are available: 2 Insufficient x.")
    )
    world.events.append(
        event(
            pod,
            doctor.NOT_TRIGGERED,
            "pod didn't trigger scale-up: 1 max node group size reached",
            "cluster-autoscaler",
        )
    )
    row = pending_row(run_doctor(world, cluster.name), fleet, cluster, pool)
    assert "FAIL" in row and f"maximum of {pool.max_nodes} node(s)" in row
    assert f"max_nodes under clusters.{cluster.cloud}.{cluster.name}.gpus.{pool.card}" in row


def test_triggered_scale_up_is_a_wait_not_a_problem(fleet, run_doctor):
    cluster = leaf_of(fleet)
    world = healthy(fleet, cluster)
    pool = cluster.pools[-1]
    pod = make_pending(
        world,
        fleet,
        cluster,
        pool,
        conditions=unschedulable("0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector."),
    )
    world.events.append(
        event(
            pod,
            doctor.NOT_TRIGGERED,
            "pod didn't trigger scale-up: 1 in backoff after failed scale-up",
            "cluster-autoscaler",
            age=300,
        )
    )
    world.events.append(
        event(
            pod,
            doctor.TRIGGERED,
            f"pod triggered scale-up: [{{eks-{pool.name} 0->1 (max: {pool.max_nodes})}}]",
            "cluster-autoscaler",
            age=20,
        )
    )
    result = run_doctor(world, cluster.name)
    assert result.status == 0, result.out
    row = pending_row(result, fleet, cluster, pool)
    assert " ok " in row and "waiting for a new node" in row and "0->1" in row


def test_a_pool_at_zero_with_no_autoscaler_event_says_nothing_adds_a_node(fleet, run_doctor):
    cluster = leaf_of(fleet)
    world = healthy(fleet, cluster)
    pool = cluster.pools[-1]
    make_pending(
        world,
        fleet,
        cluster,
        pool,
        conditions=unschedulable("0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector."),
    )
    row = pending_row(run_doctor(world, cluster.name), fleet, cluster, pool)
    assert "FAIL" in row and "nothing is adding a node" in row and "autoscaler" in row
    # a pod this young has simply not been seen by the autoscaler yet
    world = healthy(fleet, cluster)
    make_pending(
        world,
        fleet,
        cluster,
        pool,
        created=ago(20),
        conditions=unschedulable("0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector."),
    )
    result = run_doctor(world, cluster.name)
    assert result.status == 0, result.out


def test_gpu_nodes_without_the_pools_label_are_a_node_selector_mismatch(fleet, run_doctor):
    cluster = leaf_of(fleet)
    world = healthy(fleet, cluster)
    pool = cluster.pools[-1]
    stray = gpu_node(pool, "ip-10-0-3-7", labels={})
    for key in pool.node_selector:
        del stray.metadata.labels[key]
    world.nodes.append(stray)
    make_pending(
        world,
        fleet,
        cluster,
        pool,
        conditions=unschedulable(
            "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector. preemption: 0/3 nodes are "
            "available: 3 Preemption is not helpful for scheduling."
        ),
    )
    result = run_doctor(world, cluster.name)
    assert result.status == 1
    row = pending_row(result, fleet, cluster, pool)
    selector = ",".join(f"{k}={v}" for k, v in sorted(pool.node_selector.items()))
    assert "FAIL" in row and "ip-10-0-3-7" in row and f"not the label {selector}" in row
    assert "puts them back" in row or "label" in row.split("fix:")[1]


def test_an_image_that_cannot_be_pulled_names_the_image_and_where_it_is_set(fleet, run_doctor):
    cluster = leaf_of(fleet)
    world = healthy(fleet, cluster)
    pool = cluster.pools[0]
    bench = next(b for b in fleet.benchmarks(cluster) if b.pool is pool and not b.schedule)
    image = bench.workload.spec.image
    make_pending(
        world,
        fleet,
        cluster,
        pool,
        node_name=world.nodes[1].metadata.name,
        conditions=[k8s.V1PodCondition(type="PodScheduled", status="True")],
        container_statuses=[
            k8s.V1ContainerStatus(
                name="workload",
                image=image,
                image_id="",
                ready=False,
                restart_count=0,
                state=k8s.V1ContainerState(
                    waiting=k8s.V1ContainerStateWaiting(
                        reason="ImagePullBackOff", message=f'Back-off pulling image "{image}"'
                    )
                ),
            )
        ],
    )
    result = run_doctor(world, cluster.name)
    assert result.status == 1
    row = pending_row(result, fleet, cluster, pool)
    assert "FAIL" in row and "ImagePullBackOff" in row and image in row
    assert f"workloads/{bench.workload.name}/workload.yaml" in row and f"docker manifest inspect {image}" in row


def test_a_quota_that_refuses_the_pod_is_named_from_the_jobs_failed_create_event(fleet, run_doctor):
    cluster = leaf_of(fleet)
    world = healthy(fleet, cluster)
    pool = cluster.pools[0]
    make_pending(world, fleet, cluster, pool)
    the_job = next(j for j in world.jobs if j.metadata.labels["gpu"] == pool.card and not j.status.succeeded)
    world.pods = [p for p in world.pods if p.metadata.labels.get("job-name") != the_job.metadata.name]
    limit = pool.max_nodes * pool.accelerators_per_node
    world.events.append(
        event(
            the_job,
            doctor.FAILED_CREATE,
            f'Error creating: pods "{the_job.metadata.name}-q8r2m" is forbidden: exceeded quota: benchmarks, '
            f"requested: requests.{pool.resource}=1, used: requests.{pool.resource}={limit}, "
            f"limited: requests.{pool.resource}={limit}",
            "job-controller",
            "Warning",
        )
    )
    result = run_doctor(world, cluster.name)
    assert result.status == 1
    row = pending_row(result, fleet, cluster, pool)
    assert "FAIL" in row and "ResourceQuota benchmarks refuses its pod" in row
    assert f"requests.{pool.resource}={limit}" in row and "describe resourcequota benchmarks" in row


def test_a_device_plugin_pod_not_ready_is_a_problem_with_the_reason(fleet, run_doctor):
    cluster = leaf_of(fleet)
    world = healthy(fleet, cluster)
    node = world.nodes[1]
    ds = next(d for d in world.daemonsets if d.metadata.name == doctor.DEVICE_PLUGIN)
    world.daemonsets[world.daemonsets.index(ds)] = daemonset(ds.metadata.name, ds.metadata.namespace, [node], ready=0)
    world.pods = [p for p in world.pods if p.metadata.labels.get("app.kubernetes.io/instance") != doctor.DEVICE_PLUGIN]
    world.pods.append(agent_pod(ds, node, ("CrashLoopBackOff", "back-off 5m0s restarting failed container")))
    result = run_doctor(world, cluster.name)
    assert result.status == 1
    row = row_of(result.out, "NVIDIA device plugin")
    assert "FAIL" in row and "0/1 ready" in row and "CrashLoopBackOff" in row and node.metadata.name in row


def test_a_missing_exporter_and_one_that_does_not_cover_a_gpu_node_are_problems(fleet, run_doctor):
    cluster = leaf_of(fleet)
    world = healthy(fleet, cluster)
    world.daemonsets = [d for d in world.daemonsets if d.metadata.name != doctor.EXPORTER]
    row = row_of(run_doctor(world, cluster.name).out, "dcgm-exporter")
    assert "FAIL" in row and "no DaemonSet node-agents/dcgm-exporter" in row
    # ready, but with no pod on a second GPU node: its tolerations or affinity miss that pool
    world = healthy(fleet, cluster)
    other = gpu_node(cluster.pools[1], "gpu-second-1")
    world.nodes.append(other)
    result = run_doctor(world, cluster.name)
    assert result.status == 1
    row = row_of(result.out, "dcgm-exporter")
    assert "FAIL" in row and "1/1 ready" in row and "gpu-second-1" in row and "gpu_tolerations" in row


def test_a_node_with_no_allocatable_accelerator_is_a_problem(fleet, run_doctor):
    cluster = leaf_of(fleet)
    world = healthy(fleet, cluster)
    pool = cluster.pools[0]
    world.nodes[1] = gpu_node(pool, world.nodes[1].metadata.name, allocatable=0)
    result = run_doctor(world, cluster.name)
    assert result.status == 1
    row = row_of(result.out, f"pool {pool.name} ")
    assert "FAIL" in row and f"advertise 0 {pool.resource}" in row
    assert world.nodes[1].metadata.name in row and "device plugin" in row


def test_a_gateway_without_an_address_is_a_problem_on_a_leaf(fleet, run_doctor):
    cluster = leaf_of(fleet)
    world = healthy(fleet, cluster)
    world.services[0].status = k8s.V1ServiceStatus(load_balancer=k8s.V1LoadBalancerStatus())
    row = row_of(run_doctor(world, cluster.name).out, "federation gateway")
    assert "FAIL" in row and "no address" in row and "describe svc federation-gateway" in row


def test_a_benchmark_without_its_job_is_not_found(fleet, run_doctor):
    cluster = leaf_of(fleet)
    world = healthy(fleet, cluster)
    bench = next(b for b in fleet.benchmarks(cluster) if not b.schedule)
    world.jobs = [
        j
        for j in world.jobs
        if j.metadata.labels.get("workload") != bench.workload.name or j.metadata.labels["gpu"] != bench.pool.card
    ]
    row = row_of(run_doctor(world, cluster.name).out, f"benchmark {bench.workload.name} on {bench.pool.card}")
    assert "FAIL" in row and "not found" in row and f"pulumi up --stack {cluster.name}" in row


def test_a_failed_benchmark_names_the_exit_code_and_the_logs_command(fleet, run_doctor):
    cluster = leaf_of(fleet)
    world = healthy(fleet, cluster)
    pool = cluster.pools[0]
    bench = next(b for b in fleet.benchmarks(cluster) if b.pool is pool and not b.schedule)
    the_job = world.job_of(bench.workload.name, pool.card)
    the_job.status = k8s.V1JobStatus(
        failed=1,
        start_time=ago(3000),
        conditions=[
            k8s.V1JobCondition(
                type="Failed",
                status="True",
                reason="BackoffLimitExceeded",
                message="Job has reached the specified backoff limit",
            )
        ],
    )
    pod = next(p for p in world.pods if p.metadata.labels.get("job-name") == the_job.metadata.name)
    pod.status = k8s.V1PodStatus(
        phase="Failed",
        container_statuses=[
            k8s.V1ContainerStatus(
                name="workload",
                image=bench.workload.spec.image,
                image_id="",
                ready=False,
                restart_count=0,
                state=k8s.V1ContainerState(terminated=k8s.V1ContainerStateTerminated(exit_code=3, reason="Error")),
            )
        ],
    )
    result = run_doctor(world, cluster.name)
    assert result.status == 1
    row = pending_row(result, fleet, cluster, pool)
    assert "FAIL" in row and "BackoffLimitExceeded" in row and "exited with code 3 (Error)" in row, result.out
    assert f"logs job/{the_job.metadata.name} -c workload" in row


def test_an_unreachable_api_server_exits_1_naming_it(fleet, tmp_path, capsys):
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens there
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig.yaml", f"http://127.0.0.1:{port}")
    cluster = leaf_of(fleet)
    status = main([*BASE, "--stack", cluster.name, "--kubeconfig", str(kubeconfig), "--timeout", "2"])
    captured = capsys.readouterr()
    assert status == 1
    row = row_of(captured.out, "Kubernetes API server")
    assert "FAIL" in row and f"cannot reach the API server at http://127.0.0.1:{port}" in row
    assert "Traceback" not in captured.err


def test_refused_credentials_exit_1(fleet, tmp_path, capsys):
    cluster = leaf_of(fleet)
    with ApiServer(healthy(fleet, cluster)) as api:
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig.yaml", api.url)
        text = kubeconfig.read_text().replace(TOKEN, "wrong-token")
        kubeconfig.write_text(text)
        status = main([*BASE, "--stack", cluster.name, "--kubeconfig", str(kubeconfig)])
    out = capsys.readouterr().out
    assert status == 1 and "refused the credentials (401" in out


def test_bad_kubeconfig_path_and_unknown_stack_exit_2_without_a_traceback(fleet, tmp_path, capsys):
    cluster = leaf_of(fleet)
    missing = tmp_path / "nowhere.yaml"
    base = BASE
    assert main([*base, "--stack", cluster.name, "--kubeconfig", str(missing)]) == 2
    err = capsys.readouterr().err
    assert f"{missing}:1: --kubeconfig: cannot read the kubeconfig: no such file" in err and "Traceback" not in err
    garbage = tmp_path / "garbage.yaml"
    garbage.write_text("apiVersion: v1\nkind: Config\nclusters: []\n")
    assert main([*base, "--stack", cluster.name, "--kubeconfig", str(garbage)]) == 2
    assert f"{garbage}:1: contexts: no context: expected a kubeconfig such as" in capsys.readouterr().err
    assert main([*base, "--stack", "no-such-cluster", "--kubeconfig", str(garbage)]) == 2
    err = capsys.readouterr().err
    assert "no cluster named 'no-such-cluster'" in err and cluster.name in err and "Traceback" not in err
    assert main([*base, "--stack", cluster.name, "--kubeconfig", str(garbage), "--prometheus", "ftp://x"]) == 2
    assert "--prometheus" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["doctor", "--policy", str(POLICY)])  # --stack is required
    assert exc.value.code == 2


def fake_pulumi(directory: Path, script: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    exe = directory / "pulumi"
    exe.write_text("#!/bin/sh\n" + script, encoding="utf-8")
    exe.chmod(0o755)
    return directory


def test_the_kubeconfig_comes_from_the_stack_output_in_a_private_file_deleted_afterwards(
    fleet, tmp_path, capsys, monkeypatch
):
    cluster = leaf_of(fleet)
    with ApiServer(healthy(fleet, cluster)) as api:
        kubeconfig = write_kubeconfig(tmp_path / "source.yaml", api.url)
        calls = tmp_path / "calls.txt"
        bin_dir = fake_pulumi(tmp_path / "bin", f'echo "$@" > {calls}\ncat {kubeconfig}\n')
        monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
        scratch = tmp_path / "tmp"
        scratch.mkdir()
        monkeypatch.setattr("tempfile.tempdir", str(scratch))
        modes = []
        real = doctor.new_client_from_config

        def spy(config_file: str, **kwargs: Any) -> Any:
            modes.append(stat.S_IMODE(Path(config_file).stat().st_mode))
            assert kwargs.get("persist_config") is False  # the kubeconfig is never written back
            return real(config_file=config_file, **kwargs)

        monkeypatch.setattr(doctor, "new_client_from_config", spy)
        status = doctor_at([*BASE, "--stack", cluster.name])
    out = capsys.readouterr().out
    assert status == 0, out
    assert calls.read_text().split() == ["stack", "output", "kubeconfig", "--show-secrets", "--stack", cluster.name]
    assert modes == [0o600]
    assert list(scratch.iterdir()) == []  # the temporary kubeconfig is gone
    assert f"--kubeconfig <(pulumi stack output kubeconfig --show-secrets --stack {cluster.name})" in out


def test_pulumi_missing_or_failing_exits_2_with_a_clear_message(fleet, tmp_path, capsys, monkeypatch):
    cluster = leaf_of(fleet)
    base = [*BASE, "--stack", cluster.name]
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    assert main(base) == 2
    err = capsys.readouterr().err
    assert "the Pulumi CLI is not installed" in err and "--kubeconfig FILE" in err and "Traceback" not in err
    bin_dir = fake_pulumi(tmp_path / "bin", f"echo \"error: no stack named '{cluster.name}' found\" >&2\nexit 255\n")
    monkeypatch.setenv("PATH", str(bin_dir))
    assert main(base) == 2
    err = capsys.readouterr().err
    assert "failed (exit 255)" in err and f"no stack named '{cluster.name}' found" in err and "Traceback" not in err


def test_an_unreachable_prometheus_url_is_a_problem(fleet, run_doctor):
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    cluster = leaf_of(fleet)
    result = run_doctor(healthy(fleet, cluster), cluster.name, "--prometheus", f"http://127.0.0.1:{port}")
    assert result.status == 1
    row = row_of(result.out, "PodMonitor benchmarks/gpu-fleet-benchmarks: targets up")
    assert "FAIL" in row and f"cannot query Prometheus at http://127.0.0.1:{port}" in row and "port-forward" in row


def test_the_diagnosis_reads_the_real_message_formats():
    """The patterns match every spelling upstream has used (see the sources in fleet/tools/doctor.py)."""
    for message in (
        "0/3 nodes are available: 3 node(s) had untolerated taint(s).",
        "0/1 nodes are available: 1 node(s) had untolerated taint {nvidia.com/gpu: present}.",
        "0/1 nodes are available: 1 node(s) had taints that the pod didn't tolerate.",
    ):
        assert doctor.TAINT_PATTERN.search(message)
    found = doctor.INSUFFICIENT_PATTERN.findall(
        "0/4 nodes are available: 1 Insufficient cpu, 3 Insufficient nvidia.com/gpu."
    )
    assert found == ["cpu", "nvidia.com/gpu"]
    assert doctor.SELECTOR_PATTERN.search("2 node(s) didn't match Pod's node affinity/selector")
    quota = doctor.QUOTA_PATTERN.search(
        'pods "x" is forbidden: exceeded quota: benchmarks, requested: requests.nvidia.com/gpu=1, '
        "used: requests.nvidia.com/gpu=4, limited: requests.nvidia.com/gpu=4"
    )
    assert quota and quota.group(1) == "benchmarks" and quota.group(3) == "requests.nvidia.com/gpu=4"
    assert doctor.MAX_SIZE_PATTERN.search("max node group size reached")
    assert doctor.MAX_SIZE_PATTERN.search("max total nodes in cluster reached")


def test_the_names_the_doctor_looks_for_are_those_the_stack_creates(fleet):
    """The release names, namespaces, Services and labels the doctor reads are what the program deploys: plan a leaf
    of the fixture fleet under the mock engine and find each one."""
    from components.kubernetes import gateway, infra
    from fleet.tools.engine.plan import plan_stack

    cluster = leaf_of(fleet)
    plan = plan_stack(cluster.name, POLICY, STACKS, None, WORKLOADS)
    releases = {
        (r.inputs["name"], r.inputs["namespace"])
        for r in plan.registrations
        if r.type == "kubernetes:helm.sh/v3:Release"
    }
    assert (doctor.DEVICE_PLUGIN, doctor.DEVICE_PLUGIN_NS) in releases
    assert (doctor.EXPORTER, doctor.NODE_AGENTS_NS) in releases
    assert (infra.RELEASE, doctor.MONITORING_NS) in releases
    assert (infra.MONITORING_NS, infra.NODE_AGENTS_NS, gateway.GATEWAY_NAME) == (
        doctor.MONITORING_NS,
        doctor.NODE_AGENTS_NS,
        doctor.GATEWAY,
    )
    kps = next(r.inputs for r in plan.registrations if r.type.endswith("Release") and r.inputs["name"] == infra.RELEASE)
    assert f"{kps['values']['fullnameOverride']}-prometheus" == doctor.PROMETHEUS_SERVICE
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for r in plan.registrations:
        by_kind.setdefault(r.type.rsplit(":", 1)[-1], []).append(r.inputs)
    assert {(m["metadata"]["name"], m["metadata"]["namespace"]) for m in by_kind["Deployment"]} >= {
        (doctor.GATEWAY, doctor.MONITORING_NS)
    }
    monitors = {(m["metadata"]["namespace"], m["metadata"]["name"]) for m in by_kind["PodMonitor"]}
    assert doctor.POD_MONITORS[0] in monitors
    assert monitors <= set(doctor.POD_MONITORS) and set(doctor.MONITOR_SERVERS) == {n for _, n in doctor.POD_MONITORS}
    # every benchmark's Job or CronJob carries the labels the doctor matches
    objects = by_kind.get("Job", []) + by_kind.get("CronJob", [])
    assert fleet.probes(cluster)  # the fixture's leaf probes its pools
    for bench in fleet.workload_jobs(cluster):
        wanted = {
            doctor.PART_OF: pod_contract.BENCHMARK_PART_OF,
            "workload": bench.workload.name,
            "gpu": bench.pool.card,
        }
        assert any(wanted.items() <= o["metadata"]["labels"].items() for o in objects), wanted


def test_the_table_marks_ok_fail_and_skip():
    rows = [
        doctor.Row("a", "fine"),
        doctor.Row("b", "broken", "it is broken", "mend it"),
        doctor.Row("c", "skipped: no URL", skipped=True),
    ]
    text = doctor.render_table(rows)
    assert re.search(r"^a\s+ok\s+fine$", text, re.M) and re.search(r"^b\s+FAIL\s+broken$", text, re.M)
    assert "problem: it is broken" in text and "fix: mend it" in text and re.search(r"^c\s+skip\s+", text, re.M)
    assert text.endswith("3 check(s): 1 ok, 1 problem(s), 1 skipped")
    assert doctor.exit_status(rows) == 1 and doctor.exit_status([rows[0], rows[2]]) == 0


def test_not_trigger_scale_up_for_memory_does_not_blame_the_pools_template(fleet, run_doctor):
    """The autoscaler sums its reasons over every node group: only the pod's own accelerator blames the template."""
    cluster = leaf_of(fleet)
    world = healthy(fleet, cluster)
    pool = cluster.pools[-1]
    pod = make_pending(
        world, fleet, cluster, pool, conditions=unschedulable("0/2 nodes are available: 2 Insufficient memory.")
    )
    world.events.append(
        event(pod, doctor.NOT_TRIGGERED, "pod didn't trigger scale-up: 3 Insufficient memory", "cluster-autoscaler")
    )
    row = pending_row(run_doctor(world, cluster.name), fleet, cluster, pool)
    assert "FAIL" in row and "no node group has room for the pod's request of memory" in row
    assert "node template" not in row and "workload.yaml" in row


def test_a_probe_whose_pod_never_got_a_node_says_why_after_its_deadline(fleet, run_doctor):
    """At the deadline the Job controller deletes the Pending pod; the autoscaler's events about it remain."""
    cluster = leaf_of(fleet)
    world = healthy(fleet, cluster)
    pool = cluster.pools[-1]
    run = next(
        j for j in world.jobs if j.metadata.labels["workload"] == "probe" and j.metadata.labels["gpu"] == pool.card
    )
    run.status = k8s.V1JobStatus(
        failed=1,
        start_time=ago(4000),
        conditions=[
            k8s.V1JobCondition(
                type="Failed",
                status="True",
                reason="DeadlineExceeded",
                message="Job was active longer than specified deadline",
            )
        ],
    )
    gone = job_pod(run, phase="Pending")
    world.pods = [p for p in world.pods if p.metadata.labels.get("job-name") != run.metadata.name]
    world.events.append(
        event(
            gone,
            doctor.NOT_TRIGGERED,
            f"pod didn't trigger scale-up: 1 Insufficient {pool.resource}, 2 node(s) didn't match Pod's node "
            "affinity/selector",
            "cluster-autoscaler",
        )
    )
    result = run_doctor(world, cluster.name)
    assert result.status == 1
    row = row_of(result.out, f"probe of pool {pool.name}")
    assert "FAIL" in row and "DeadlineExceeded" in row and f"its pod {gone.metadata.name} never ran" in row
    assert f"node template of pool {pool.name} has no {pool.resource}" in row and "logs job/" not in row


def test_a_node_that_just_joined_without_its_cards_is_a_wait(fleet, run_doctor):
    cluster = leaf_of(fleet)
    world = healthy(fleet, cluster)
    pool = cluster.pools[0]
    name = world.nodes[1].metadata.name
    world.nodes[1] = gpu_node(pool, name, allocatable=0)
    world.nodes[1].metadata.creation_timestamp = ago(120)
    result = run_doctor(world, cluster.name)
    row = row_of(result.out, f"pool {pool.name} ")
    assert result.status == 0 and "ok" in row and f"{name} joined less than 10 min ago" in row


def test_a_cards_pool_does_not_count_its_sweep_pools_nodes(fleet):
    cluster = next(c for c in fleet.clusters.values() if c.sweep_pools)
    sweep = cluster.sweep_pools[0]
    own = cluster.pool(sweep.card)
    nodes = [gpu_node(own, "own-1"), gpu_node(sweep, "sweep-1")]
    assert [n.metadata.name for n in doctor.pool_nodes(own, nodes)] == ["own-1"]
    assert [n.metadata.name for n in doctor.pool_nodes(sweep, nodes)] == ["sweep-1"]


def test_a_cards_pool_does_not_count_its_ci_pools_nodes(fleet):
    cluster = next(c for c in fleet.clusters.values() if c.ci_pools)
    ci = cluster.ci_pools[0]
    own = cluster.pool(ci.card)
    nodes = [gpu_node(own, "own-1"), gpu_node(ci, "ci-1")]
    assert [n.metadata.name for n in doctor.pool_nodes(own, nodes)] == ["own-1"]
    assert [n.metadata.name for n in doctor.pool_nodes(ci, nodes)] == ["ci-1"]


def test_a_shared_pools_node_advertising_whole_cards_names_the_plugins_configuration(fleet, run_doctor):
    cluster = fleet.clusters["fix-eks"]  # its t4 pool is time-sliced by our device plugin
    pool = cluster.pool("t4")
    assert pool.sharing is not None and pool.units_per_node == 2 and pool.needs_device_plugin
    world = healthy(fleet, cluster)
    node = next(n for n in world.nodes if n.metadata.name.startswith(pool.name))
    node.status.capacity[pool.resource] = node.status.allocatable[pool.resource] = "1"  # whole cards: unconfigured
    result = run_doctor(world, cluster.name)
    row = row_of(result.out, f"pool {pool.name}")
    assert "advertise fewer nvidia.com/gpu than the pool's 2 (time-slicing-2)" in row
    assert "nvidia.com/device-plugin.config=time-slicing-2" in row
    # the healthy world, whose node advertises its slices, has no such problem
    assert "advertise fewer" not in row_of(run_doctor(healthy(fleet, cluster), cluster.name).out, f"pool {pool.name}")


# --- the scheduler's own words --------------------------------------------------------------------------------------


def fit_error(total: int, reasons: dict[str, int], victims: int = 0) -> str:
    """A FailedScheduling message as kube-scheduler v1.34 writes it (pkg/scheduler/framework/types.go FitError.Error():
    "0/N nodes are available: " + "<count> <reason>" sort.Strings'ed and joined with ", " + "."; then " " + the
    PostFilter message, DefaultPreemption's "preemption: 0/N nodes are available: ..." in the same format)."""

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


def test_fit_error_is_formatted_as_the_scheduler_formats_it():
    # the example of issue 34, byte for byte
    assert (
        fit_error(5, {"Insufficient cpu": 1, "node(s) had untolerated taint {nvidia.com/gpu: present}": 2,
                      "node(s) didn't match Pod's node affinity/selector": 2}, victims=1)
        == "0/5 nodes are available: 1 Insufficient cpu, 2 node(s) didn't match Pod's node affinity/selector, 2 "
        "node(s) had untolerated taint {nvidia.com/gpu: present}. preemption: 0/5 nodes are available: 1 No "
        "preemption victims found for incoming pod, 4 Preemption is not helpful for scheduling."
    )  # fmt: skip


def test_a_pod_too_big_for_its_machine_is_named_even_while_a_card_is_free(fleet, run_doctor):
    cluster = leaf_of(fleet)
    world = healthy(fleet, cluster)
    pool = cluster.pools[0]
    have = doctor.pool_nodes(pool, world.nodes)
    world.nodes += [gpu_node(pool, f"{pool.name}-node-{n + 1}") for n in range(len(have), pool.max_nodes)]
    # one node's cards are taken by another pod, the other node's card is free: the pod is too big for either
    busy = doctor.pool_nodes(pool, world.nodes)[0]
    busy.status.allocatable = {**busy.status.allocatable, pool.resource: "0"}
    pod = make_pending(
        world,
        fleet,
        cluster,
        pool,
        conditions=unschedulable(
            fit_error(
                len(world.nodes),
                {
                    "Insufficient cpu": pool.max_nodes,
                    "Insufficient memory": pool.max_nodes,
                    f"Insufficient {pool.resource}": 1,
                    "node(s) didn't match Pod's node affinity/selector": len(world.nodes) - pool.max_nodes,
                },
            )
        ),
    )
    # the nodes' allocatable is 8 CPU and 61Gi (gpu_node): the pod asks 10 CPU and 64Gi besides its card
    pod.spec.containers[0].resources = k8s.V1ResourceRequirements(
        requests={"cpu": "10", "memory": "64Gi"}, limits={pool.resource: "1"}
    )
    row = pending_row(run_doctor(world, cluster.name), fleet, cluster, pool)
    assert "FAIL" in row
    assert f"more than a node of pool {pool.name}" in row and "cpu 10 > 8" in row and "memory 64.00Gi > 61.00Gi" in row
    assert "never fits" in row and "workloads/" in row and "cpu_request" in row
    assert "are taken" not in row and "raise max_nodes" not in row


def test_a_pod_too_big_for_a_pool_at_zero_is_measured_against_the_machines_allocatable(fleet, run_doctor):
    cluster = next(c for c in fleet.clusters.values() if not c.central and c.cloud in ("gcp", "aws", "azure"))
    world = healthy(fleet, cluster)
    pool = next(p for p in cluster.pools if not doctor.pool_nodes(p, world.nodes))
    pod = make_pending(
        world, fleet, cluster, pool,
        conditions=unschedulable(fit_error(len(world.nodes), {"node(s) didn't match Pod's node affinity/selector": 1,
                                                              "Insufficient cpu": len(world.nodes) - 1})),
    )  # fmt: skip
    pod.spec.containers[0].resources = k8s.V1ResourceRequirements(requests={"cpu": "500"}, limits={pool.resource: "1"})
    row = pending_row(run_doctor(world, cluster.name), fleet, cluster, pool)
    assert "cpu 500 > " in row and f"a {pool.machine_type} node's allocatable" in row


def test_an_unreachable_node_is_being_replaced_and_its_taint_is_not_the_users(fleet, run_doctor):
    cluster = leaf_of(fleet)
    world = healthy(fleet, cluster)
    pool = cluster.pools[0]
    lost = doctor.pool_nodes(pool, world.nodes)[0]
    # what the node lifecycle controller does to a node whose kubelet stopped reporting
    lost.spec.taints = [
        *lost.spec.taints,
        k8s.V1Taint(key="node.kubernetes.io/unreachable", effect="NoSchedule"),
        k8s.V1Taint(key="node.kubernetes.io/unreachable", effect="NoExecute"),
    ]
    lost.status.conditions = [k8s.V1NodeCondition(type="Ready", status="Unknown", reason="NodeStatusUnknown")]
    others = len(world.nodes) - 1
    make_pending(
        world, fleet, cluster, pool,
        conditions=unschedulable(fit_error(len(world.nodes), {
            "node(s) had untolerated taint {node.kubernetes.io/unreachable: }": 1,
            "node(s) didn't match Pod's node affinity/selector": others,
        })),
    )  # fmt: skip
    row = pending_row(run_doctor(world, cluster.name), fleet, cluster, pool)
    assert lost.metadata.name in row and "unreachable" in row and "being replaced" in row
    assert "node controller owns that taint" in row and "lifts it" in row
    assert "taint nodes" not in row and "unreachable-" not in row
