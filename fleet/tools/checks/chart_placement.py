"""Every pod a stack's charts and its own infrastructure run, placed on nodes made from its pools by the model's rules
(``fleet/model/placement/pods.py``, kube-scheduler's filters).

The pods are those the charts render (Helm hooks too: the API server admits them like any pod), the Prometheus and
Alertmanager pods the operator makes from the resources the charts render, and the stack's own apps/v1 objects (its
Jobs are benchmarks and probes, which the model predicts and ``validate`` places). What is checked:

- the DaemonSets that land on each node of each pool hold exactly what the model keeps back for its node agents
  (``fleet/model/placement/node_agents.py``), the room ``validate`` and ``plan`` take off every node;
- every other pod fits a system node beside its node agents and lands on no other pool (Magnum's GPU autoscaler: the
  masters, whose flavor's size is not known here);
- the system pool at its ``max_nodes`` holds all of them at once (requests x replicas).

``plan --chart-cache DIR`` runs it on the charts rendered from DIR; the chart tier of the tests on every fleet.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from components.clusters.magnum import CONTROL_PLANE
from fleet.model.core.clouds import cloud_rules
from fleet.model.core.clusters import Cluster
from fleet.model.core.taints import Taint
from fleet.model.placement.pods import (
    KUBELET_LABELS,
    SYSTEM_POOL,
    Node,
    PodToPlace,
    cluster_nodes,
    describe,
    held_by,
    place,
    selector_matches,
)
from fleet.tools.checks.charts import RenderedRelease, pods_of
from fleet.tools.engine.plan import StackPlan
from fleet.tools.engine.render import kubernetes_manifest

CONTROL_PLANE_POOL = "control-plane"
# Pods the operator makes from a custom resource (kube-prometheus-stack's Prometheus and Alertmanager).
OPERATED = ("Prometheus", "Alertmanager", "ThanosRuler", "PrometheusAgent")
# The operator's config reloader beside every operated pod's main container and once more as its init container, both
# with the requests the operator is started with (prometheus-operator v0.86.2 pkg/prometheus/server/statefulset.go
# operatorInitContainers / operatorContainers, pkg/alertmanager/statefulset.go "config-reloader" and
# "init-config-reloader"; kube-prometheus-stack 79.5.0 templates/prometheus-operator/deployment.yaml
# --config-reloader-cpu-request / --config-reloader-memory-request).
_RELOADER_FLAG = re.compile(r"^--config-reloader-(cpu|memory)-request=(.*)$")


@dataclass(frozen=True)
class StackPod:
    """One pod template a stack runs: where it comes from (for messages), its kind, spec and replicas."""

    where: str
    kind: str
    spec: dict[str, Any]
    replicas: int = 1


def operated(rendered: Iterable[RenderedRelease]) -> Iterator[tuple[RenderedRelease, dict[str, Any]]]:
    """The operated resources (Prometheus, Alertmanager ...) the releases render, with their release."""
    for item in rendered:
        for obj in item.objects:
            if obj.get("kind") in OPERATED and obj.get("apiVersion", "").startswith("monitoring.coreos.com/"):
                yield item, obj


def _reloader_requests(rendered: list[RenderedRelease]) -> dict[str, str]:
    found: dict[str, str] = {}
    for item in rendered:
        for obj in item.objects:
            pod = pods_of(obj, item.release.namespace)
            for c in pod.containers() if pod else ():
                for arg in c.get("args") or []:
                    if m := _RELOADER_FLAG.match(str(arg)):
                        found[m[1]] = m[2]
    return {k: v for k, v in found.items() if v not in ("0", "")}


def operated_pod(obj: dict[str, Any], reloader: dict[str, str]) -> dict[str, Any]:
    """The pod spec the operator makes from a Prometheus or Alertmanager resource, as the scheduler counts it."""
    spec = obj["spec"]
    reloader_container = {"resources": {"requests": reloader}}
    return {
        "nodeSelector": spec.get("nodeSelector") or {},
        "tolerations": spec.get("tolerations") or [],
        "affinity": spec.get("affinity") or {},
        "initContainers": [{"name": "init-config-reloader", **reloader_container}],
        "containers": [
            {"name": obj["kind"].lower(), "resources": spec.get("resources") or {}},
            {"name": "config-reloader", **reloader_container},
            *(spec.get("containers") or []),
        ],
    }


def _where(plan: StackPlan, item: RenderedRelease, kind: str, name: str) -> str:
    return f"{plan.stack}: release {item.release.name} ({item.release.archive_name}) {kind} {name}"


def stack_pods(plan: StackPlan, rendered: list[RenderedRelease]) -> list[StackPod]:
    """Every pod template the stack's charts render, the operator makes from them and its own apps/v1 objects run."""
    pods = []
    for item in rendered:
        for obj in item.objects:
            pod = pods_of(obj, item.release.namespace)
            if pod is not None:
                replicas = (obj.get("spec") or {}).get("replicas") or 1
                pods.append(StackPod(_where(plan, item, pod.kind, pod.name), pod.kind, pod.spec, replicas))
    reloader = _reloader_requests(rendered)
    for item, obj in operated(rendered):
        where = _where(plan, item, obj["kind"], obj["metadata"]["name"])
        pods.append(StackPod(where, "StatefulSet", operated_pod(obj, reloader), obj["spec"].get("replicas") or 1))
    for reg in plan.registrations:
        if reg.type.startswith("kubernetes:apps/v1:") and reg.custom:
            manifest = kubernetes_manifest(reg)
            pod = pods_of(manifest)
            if pod is not None:
                where = f"{plan.stack}: {manifest['kind']} {reg.name}"
                pods.append(StackPod(where, pod.kind, pod.spec, manifest["spec"].get("replicas") or 1))
    return pods


def control_plane_node() -> Node:
    """Magnum's masters, where the GPU autoscaler runs: the control-plane label and taint (components/clusters/
    magnum.py CONTROL_PLANE), the master flavor's size not known."""
    taint = Taint(key=CONTROL_PLANE, value="")
    return Node(CONTROL_PLANE_POOL, "master", {**KUBELET_LABELS, CONTROL_PLANE: ""}, (taint,), None)


def node_agent_problems(cluster: Cluster, pods: list[StackPod]) -> list[str]:
    """Where the DaemonSets landing on a node of a pool hold other than the model's node agents, or overfill it."""
    problems = []
    daemons = [p for p in pods if p.kind == "DaemonSet"]
    for node in cluster_nodes(cluster):
        on_node = [p for p in daemons if selector_matches(p.spec, node.labels) and not node.untolerated(p.spec)]
        held = held_by([p.spec for p in on_node])
        if held != node.held:
            problems.append(
                f"{cluster.name} pool {node.pool}: the DaemonSets {[p.where for p in on_node]} hold {held}, the model "
                f"counts {node.held} (fleet/model/placement/node_agents.py)"
            )
        if node.allocatable is not None and any(node.free(r) < 0 for r in node.held):
            problems.append(f"{cluster.name} pool {node.pool}: the node agents {node.held} overfill it")
    return problems


def placement_problems(cluster: Cluster, pods: list[StackPod]) -> list[str]:
    """Where a pod but the node agents fits no system node (or lands on another pool), and where the system pool at
    its maximum cannot hold them all."""
    masters = [control_plane_node()] if cloud_rules(cluster.cloud).control_plane_nodes else []
    nodes = [*cluster_nodes(cluster), *masters]
    system = next(n for n in nodes if n.pool == SYSTEM_POOL)
    problems, on_system = [], []
    for pod in pods:
        if pod.kind == "DaemonSet":
            continue
        pool = CONTROL_PLANE_POOL if CONTROL_PLANE in (pod.spec.get("nodeSelector") or {}) else SYSTEM_POOL
        found = place(PodToPlace(pod.where, pool, pod.spec), nodes)
        if found is not None:
            problems.append(found.message)
        if pool == SYSTEM_POOL:
            on_system += [pod.spec] * pod.replicas
    total = held_by(on_system)
    if system.allocatable is not None:
        room = cluster.system_pool.max_nodes
        for resource, amount in sorted(total.items()):
            if amount > room * system.free(resource):
                problems.append(
                    f"{cluster.name}: the system pool's pods ask {describe(resource, amount)} of {resource}, its "
                    f"{room} node(s) of {system.machine_type} have {describe(resource, room * system.free(resource))} "
                    "beside the node agents: raise system_pool max_nodes or take a larger machine_type"
                )
    return problems
