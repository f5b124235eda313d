"""Reading a cluster: everything the doctor's checks need, with list calls of the official ``kubernetes`` client
only, into one :class:`Snapshot`."""

from __future__ import annotations

from dataclasses import dataclass, field

import urllib3
from kubernetes.client import (
    ApiClient,
    AppsV1Api,
    BatchV1Api,
    CoreV1Api,
    CoreV1Event,
    V1CronJob,
    V1DaemonSet,
    V1Deployment,
    V1Job,
    V1Node,
    V1Pod,
    V1Service,
)
from kubernetes.client.exceptions import ApiException

from fleet.model.core import pod_contract
from fleet.model.core.clusters import Cluster
from fleet.model.core.fleet import Fleet
from fleet.model.placement.node_agents import runs_device_plugin, runs_gpu_exporter
from fleet.tools.doctor.bounded_reads import AnswerError
from fleet.tools.doctor.kube_objects import labels_of, named, owner_of
from fleet.tools.doctor.names import (
    DEVICE_PLUGIN,
    DEVICE_PLUGIN_NS,
    EXPORTER,
    FLEET_PARTS,
    GATEWAY,
    MONITORING_NS,
    NODE_AGENTS_NS,
    PART_OF,
    PART_OF_SELECTOR,
)


@dataclass
class Snapshot:
    """What the doctor read from the API server (all of it from list calls)."""

    nodes: list[V1Node] = field(default_factory=list)
    daemonsets: dict[str, V1DaemonSet | None] = field(default_factory=dict)  # DEVICE_PLUGIN / EXPORTER
    agent_pods: dict[str, list[V1Pod]] = field(default_factory=dict)
    gateway: V1Deployment | None = None
    gateway_service: V1Service | None = None
    jobs: list[V1Job] = field(default_factory=list)
    cronjobs: list[V1CronJob] = field(default_factory=list)
    pods: list[V1Pod] = field(default_factory=list)
    events: list[CoreV1Event] = field(default_factory=list)


class ApiUnreachableError(Exception):
    """The API server did not answer, or refused the credentials: the message says which and what to check;
    ``fix``, when the network is not the likely cause, what to do instead."""

    def __init__(self, message: str, fix: str | None = None) -> None:
        super().__init__(message)
        self.fix = fix


NOT_AN_API_SERVER = "check that the kubeconfig's server is the cluster's API server: kubectl get --raw /version"


def read_cluster(api: ApiClient, fleet: Fleet, cluster: Cluster, timeout: float) -> Snapshot:
    """Everything the checks need, with list calls only; ``ApiUnreachableError`` when the API server does not
    answer or refuses the credentials."""
    core, apps, batch = CoreV1Api(api), AppsV1Api(api), BatchV1Api(api)
    server = api.configuration.host
    snap = Snapshot()
    try:
        snap.nodes = list(core.list_node(_request_timeout=timeout).items)
        nvidia = [p for p in cluster.pools if p.accelerator.is_nvidia]
        agents = []
        if runs_device_plugin(cluster):
            agents.append((DEVICE_PLUGIN, DEVICE_PLUGIN_NS))
        if nvidia and runs_gpu_exporter(cluster):
            agents.append((EXPORTER, NODE_AGENTS_NS))
        for name, namespace in agents:
            selector = f"app.kubernetes.io/instance={name}"
            found = apps.list_namespaced_daemon_set(namespace, label_selector=selector, _request_timeout=timeout)
            snap.daemonsets[name] = named(found.items, name)
            pods = core.list_namespaced_pod(namespace, label_selector=selector, _request_timeout=timeout).items
            snap.agent_pods[name] = [p for p in pods if owner_of(p, "DaemonSet") in (None, name)]
        if not cluster.central:
            selector = f"app.kubernetes.io/name={GATEWAY}"
            deployments = apps.list_namespaced_deployment(
                MONITORING_NS, label_selector=selector, _request_timeout=timeout
            )
            snap.gateway = named(deployments.items, GATEWAY)
            services = core.list_namespaced_service(MONITORING_NS, label_selector=selector, _request_timeout=timeout)
            snap.gateway_service = named(services.items, GATEWAY)
        namespaces = [pod_contract.BENCHMARK_NAMESPACE]
        if any(b.workload.spec.needs_root for b in fleet.benchmarks(cluster)):
            namespaces.append(pod_contract.ROOT_BENCHMARK_NAMESPACE)
        for ns in namespaces:
            snap.jobs += batch.list_namespaced_job(ns, label_selector=PART_OF_SELECTOR, _request_timeout=timeout).items
            snap.cronjobs += batch.list_namespaced_cron_job(
                ns, label_selector=PART_OF_SELECTOR, _request_timeout=timeout
            ).items
            snap.pods += core.list_namespaced_pod(ns, label_selector=PART_OF_SELECTOR, _request_timeout=timeout).items
            snap.events += core.list_namespaced_event(ns, _request_timeout=timeout).items
    except ApiException as exc:
        if exc.status in (401, 403):
            raise ApiUnreachableError(
                f"the API server at {server} refused the credentials ({exc.status} {exc.reason}): the doctor needs "
                "get/list on nodes, pods, events, daemonsets, deployments, services, jobs and cronjobs"
            ) from None
        raise ApiUnreachableError(f"the API server at {server} answered {exc.status} {exc.reason}") from None
    except AnswerError as exc:
        raise ApiUnreachableError(f"the API server at {server} {exc}", NOT_AN_API_SERVER) from None
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise ApiUnreachableError(f"cannot reach the API server at {server}: {reason}") from None
    except UnicodeDecodeError as exc:  # the client decodes every answer as UTF-8 (or its charset) first
        raise ApiUnreachableError(
            f"the API server at {server} answered bytes that are not text ({exc.reason} at byte {exc.start}): is "
            "the kubeconfig's server a Kubernetes API server?",
            NOT_AN_API_SERVER,
        ) from None
    except (ValueError, TypeError, AttributeError, KeyError) as exc:  # the client's models refuse the answer's shape
        said = " ".join(str(exc).split())[:200] or type(exc).__name__
        raise ApiUnreachableError(
            f"the API server at {server} answered something that is not a Kubernetes list ({said}): is the "
            "kubeconfig's server a Kubernetes API server?",
            NOT_AN_API_SERVER,
        ) from None
    snap.jobs = [j for j in snap.jobs if labels_of(j).get(PART_OF) in FLEET_PARTS]
    snap.cronjobs = [c for c in snap.cronjobs if labels_of(c).get(PART_OF) in FLEET_PARTS]
    snap.pods = [p for p in snap.pods if labels_of(p).get(PART_OF) in FLEET_PARTS]
    return snap
