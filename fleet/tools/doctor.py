"""``python -m fleet doctor --stack NAME``: inspect one live cluster of the fleet, read-only, and print one table.

What it reads (list calls of the official ``kubernetes`` client, nothing else; Prometheus through ``/api/v1/query``):

* each GPU pool's nodes (by the pool's node selector): Ready, and the accelerators they advertise as allocatable;
* the NVIDIA device plugin (``kube-system``, where the platform brings none) and dcgm-exporter (``node-agents``):
  their DaemonSets ready and covering every node of the pools they serve;
* on a leaf, the federation gateway: its Deployment ready and its LoadBalancer given an address;
* every benchmark the policy places here (a Job, or a CronJob and its last Job) and every pool probe (a CronJob of the
  probe workload, fleet/model/probe): the state of its newest Job and, for a pod stuck Pending, why
  (:func:`diagnose_pod`);
* with ``--prometheus URL``: ``up`` of the PodMonitor's targets; on the central stack every leaf's federation
  job ``federate-<leaf>``; on a leaf, with ``--central-prometheus URL``, the central's job for this leaf. Without a
  URL those rows are skipped and say which ``kubectl port-forward`` opens it (the Prometheus of a cluster is not
  reachable from outside it but through the mTLS gateway).

Every row is (what, state, problem, likely fix). Exit 0 when no row has a problem (skipped rows are not problems),
1 otherwise (the API server unreachable too), 2 on bad input: flags, an unknown stack, an unusable kubeconfig, no
``pulumi`` to fetch one.

The messages matched below come from upstream sources, named beside each one.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import urllib3
from kubernetes.client import (
    ApiClient,
    AppsV1Api,
    BatchV1Api,
    Configuration,
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
from kubernetes.config import new_client_from_config
from kubernetes.config.config_exception import ConfigException

from fleet.model import pod_contract
from fleet.model.catalogue import Taint, load_catalogue
from fleet.model.clouds import cloud_rules
from fleet.model.clouds.rules import DoctorContext
from fleet.model.errors import InputError, Problem
from fleet.model.placement import describe, pod_requests
from fleet.model.probe_phases import PHASE_MEANING, PHASE_RECORD, PHASES
from fleet.model.prometheus import FEDERATE_JOB_PREFIX
from fleet.model.quantity import parse_quantity
from fleet.model.sharing import DEVICE_PLUGIN_CONFIG_LABEL
from fleet.model.spec import ROOT, Cluster, Fleet, GpuPool, load_fleet
from fleet.tools.checks.kubeconfig_checks import check_kubeconfig
from fleet.tools.doctor_queues import queue_rows_for

# Where the infra stack puts things (components/kubernetes/infra.py: MONITORING_NS, NODE_AGENTS_NS, RELEASE; the
# Helm release names of the device plugin and dcgm-exporter; components/kubernetes/gateway.py: GATEWAY_NAME). Kept
# here as data so the doctor does not import the Pulumi components; tests/tools/test_doctor.py holds them equal.
MONITORING_NS = "monitoring"
NODE_AGENTS_NS = "node-agents"
DEVICE_PLUGIN_NS = "kube-system"
# Release "nvidia-device-plugin" of chart nvidia-device-plugin: its DaemonSet is named by the chart's fullname, which
# is the release name when it contains the chart name, and labelled app.kubernetes.io/instance=<release>
# (NVIDIA/k8s-device-plugin v0.17.1, deployments/helm/nvidia-device-plugin/templates/_helpers.tpl and
# daemonset-device-plugin.yml).
DEVICE_PLUGIN = "nvidia-device-plugin"
# Release "dcgm-exporter" of chart dcgm-exporter: the same naming (NVIDIA/dcgm-exporter 4.2.3-4.1.1,
# deployment/templates/_helpers.tpl and daemonset.yaml).
EXPORTER = "dcgm-exporter"
GATEWAY = "federation-gateway"
# kube-prometheus-stack names its Prometheus Service `<fullname>-prometheus` on port 9090, fullname being
# fullnameOverride (infra.py sets RELEASE = "kps") (prometheus-community/helm-charts kube-prometheus-stack-79.5.0,
# charts/kube-prometheus-stack/templates/prometheus/service.yaml, _helpers.tpl, values.yaml prometheus.service.port).
PROMETHEUS_SERVICE = "kps-prometheus"
PROMETHEUS_PORT = 9090
# The fleet's PodMonitors (namespace, name): the benchmark and probe pods' (components/kubernetes/benchmark.py) and
# the GitLab runners' (components/kubernetes/runners.py), with what serves the metrics in their pods. The operator
# labels every target of a PodMonitor without spec.jobLabel with job="<namespace>/<name>" (prometheus-operator
# v0.86.2, pkg/prometheus/promcfg.go generatePodMonitorConfig: the relabeling with target_label "job" and replacement
# fmt.Sprintf("%s/%s", m.GetNamespace(), m.GetName())).
POD_MONITORS = (
    (pod_contract.BENCHMARK_NAMESPACE, "gpu-fleet-benchmarks"),
    (pod_contract.RUNNER_NAMESPACE, pod_contract.RUNNER_POD_MONITOR),
)
# What must listen in a pod of each PodMonitor, and the container to read the logs of.
MONITOR_SERVERS = {
    "gpu-fleet-benchmarks": (f"mtail on port {pod_contract.METRICS_PORT_NAME} ({pod_contract.METRICS_PORT})", "mtail"),
    pod_contract.RUNNER_POD_MONITOR: ("the runner on port metrics (9252, the chart's metrics.enabled)", ""),
}
FLEET_PARTS = (pod_contract.BENCHMARK_PART_OF,)
PART_OF = "app.kubernetes.io/part-of"
PART_OF_SELECTOR = f"{PART_OF} in ({','.join(FLEET_PARTS)})"

# A pod this young may simply not have been looked at by the scheduler or the autoscaler yet.
GRACE_SECONDS = 120
# A node this young may still be installing its driver and device plugin, so advertise no accelerator yet.
NEW_NODE_SECONDS = 600
EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2

# --- upstream strings the diagnosis matches -------------------------------------------------------------------------
# kube-scheduler records PodScheduled=False with reason "Unschedulable" and the FitError message
# "0/N nodes are available: <count> <reason>, ..." (kubernetes/kubernetes pkg/scheduler/framework/types.go FitError).
UNSCHEDULABLE = "Unschedulable"
# TaintToleration: "node(s) had untolerated taint(s)" since kubernetes/kubernetes#134740 (cherry-picked to 1.34 by
# #135023); "node(s) had untolerated taint {key: value}" before it (pkg/scheduler/framework/plugins/tainttoleration/
# taint_toleration.go at 0f7becbc); "node(s) had taint(s) that the pod didn't tolerate" in older releases.
TAINT_PATTERN = re.compile(r"untolerated taint|didn't tolerate")
# NodeResourcesFit: fmt.Sprintf("Insufficient %v", rName) for extended resources, "Insufficient cpu"/"memory"
# (kubernetes/kubernetes pkg/scheduler/framework/plugins/noderesources/fit.go fitsRequest).
INSUFFICIENT_PATTERN = re.compile(r"Insufficient ([A-Za-z0-9](?:[A-Za-z0-9./_-]*[A-Za-z0-9])?)")
# The scheduler's whole message (kubernetes/kubernetes v1.34 pkg/scheduler/framework/types.go FitError.Error()):
# "0/<nodes> nodes are available: " + "<count> <reason>" per reason, sort.Strings'ed, joined with ", ", then "."; then
# " " + the PostFilter message, which DefaultPreemption writes as "preemption: 0/<nodes> nodes are available: <count>
# No preemption victims found for incoming pod, <count> Preemption is not helpful for scheduling."
# (pkg/scheduler/framework/preemption/preemption.go). A pod too big for its machine on a pool with a free card reads
# "... 1 Insufficient cpu, 1 Insufficient memory, 1 Insufficient nvidia.com/gpu, ...": every resource short on some
# node is named, so the accelerator alone does not say the cards are all taken.
# Taints the node lifecycle controller owns (k8s.io/api core/v1 well_known_taints.go TaintNodeUnreachable,
# TaintNodeNotReady; pkg/controller/nodelifecycle): it sets them when a kubelet stops reporting and removes them itself
# when it reports again. Never a user's to remove.
NODE_CONTROLLER_TAINTS = {
    "node.kubernetes.io/unreachable": "unreachable (its kubelet stopped reporting: a reclaimed spot VM, a failed one)",
    "node.kubernetes.io/not-ready": "not ready (its kubelet reports NotReady)",
}
# NodeAffinity: ErrReasonPod = "node(s) didn't match Pod's node affinity/selector" (kubernetes/kubernetes
# pkg/scheduler/framework/plugins/nodeaffinity/node_affinity.go at 5ae369a0).
SELECTOR_PATTERN = re.compile(r"didn't match Pod's node affinity")
# cluster-autoscaler events on the pod: reason "NotTriggerScaleUp", message "pod didn't trigger scale-up: <count>
# <reason>, ..." (scheduler predicate reasons of each rejected node group, or a skipped group's reason such as "max
# node group size reached"), or "max total nodes in cluster reached"; reason "TriggeredScaleUp", message "pod
# triggered scale-up: [{<group> <current>-><new> (max: <max>)}]" (kubernetes/autoscaler cluster-autoscaler-1.34.2,
# cluster-autoscaler/processors/status/eventing_scale_up_processor.go, core/scaleup/orchestrator/skippedreasons.go,
# processors/nodegroupset/nodegroup_set_processor.go ScaleUpInfo.String).
NOT_TRIGGERED = "NotTriggerScaleUp"
TRIGGERED = "TriggeredScaleUp"
MAX_SIZE_PATTERN = re.compile(r"max node group size reached|max total nodes in cluster reached|max cluster .* reached")
# Container waiting reasons of an image that cannot be pulled (kubernetes/kubernetes pkg/kubelet/images/types.go:
# ErrImagePullBackOff, ErrImagePull, ErrInvalidImageName).
IMAGE_PULL_REASONS = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName")
# Waiting reasons of a container on its way up: not a problem.
STARTING_REASONS = ("ContainerCreating", "PodInitializing")
# The Job controller's event when it cannot create a pod: reason "FailedCreate", message "Error creating: <err>"
# (kubernetes/kubernetes pkg/controller/controller_utils.go, FailedCreatePodReason); the quota admission plugin's
# error: "exceeded quota: <name>, requested: <r>, used: <u>, limited: <l>" (plugin/pkg/admission/resourcequota/
# controller.go).
FAILED_CREATE = "FailedCreate"
QUOTA_PATTERN = re.compile(r"exceeded quota: ([^,]+), requested: ([^,]+(?:,[^,:]+=[^,]+)*), used: .*?limited: (\S+)")


@dataclass(frozen=True)
class Row:
    """One line of the table: what was checked, what was seen, and when something is wrong, the problem and its
    likely fix. ``skipped``: not checked (not a problem, but shown)."""

    what: str
    state: str
    problem: str = ""
    fix: str = ""
    skipped: bool = False

    @property
    def status(self) -> str:
        """``FAIL``, ``skip`` or ``ok``."""
        return "FAIL" if self.problem else "skip" if self.skipped else "ok"


@dataclass(frozen=True)
class Diagnosis:
    """Why a pod does not run: the cause and its likely fix. ``waiting``: a normal wait (a node is being added, the
    pod is starting), not a problem."""

    cause: str
    fix: str = ""
    waiting: bool = False


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
    """The API server did not answer, or refused the credentials: the message says which and what to check."""


# --- small helpers --------------------------------------------------------------------------------------------------


def _labels(obj: Any) -> dict[str, str]:
    return dict((obj.metadata.labels if obj.metadata else None) or {})


def _matches(labels: dict[str, str], selector: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def _quantity(value: Any) -> int:
    """A Kubernetes quantity as a whole count (accelerators are counted in units, ``"4"``, or ``"1k"``); 0 when
    absent or not a quantity."""
    try:
        return int(parse_quantity(str(value))) if value is not None else 0
    except ValueError:
        return 0


def _age(when: datetime | None, now: datetime) -> str:
    if when is None:
        return "?"
    seconds = max(0, int((now - when).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _event_time(event: CoreV1Event) -> datetime:
    series = event.series.last_observed_time if event.series else None
    stamp = event.last_timestamp or series or event.event_time or event.first_timestamp
    return stamp or (event.metadata.creation_timestamp if event.metadata else None) or datetime.min.replace(tzinfo=UTC)


def _events_for(events: Sequence[CoreV1Event], kind: str, namespace: str, name: str) -> list[CoreV1Event]:
    """The events about one object, oldest first."""
    found = [
        e
        for e in events
        if e.involved_object
        and e.involved_object.kind == kind
        and e.involved_object.name == name
        and (e.involved_object.namespace or namespace) == namespace
    ]
    return sorted(found, key=_event_time)


def _owner(obj: Any, kind: str) -> str | None:
    for ref in (obj.metadata.owner_references if obj.metadata else None) or []:
        if ref.kind == kind:
            return str(ref.name)
    return None


def _newest(items: Sequence[Any]) -> Any:
    return max(items, key=lambda o: o.metadata.creation_timestamp or datetime.min.replace(tzinfo=UTC))


def _node_ready(node: V1Node) -> bool:
    conditions = (node.status.conditions if node.status else None) or []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


def _allocatable(node: V1Node, resource: str) -> int:
    return _quantity(((node.status.allocatable if node.status else None) or {}).get(resource))


def _capacity(node: V1Node, resource: str) -> int:
    return _quantity(((node.status.capacity if node.status else None) or {}).get(resource))


def pool_nodes(pool: GpuPool, nodes: Sequence[V1Node]) -> list[V1Node]:
    """The nodes of ``pool``: those carrying every label of its node selector; a card's own pool does not count the
    nodes of its sweep pools (fleet/model/sweeps.py) or its CI pool (fleet/model/ci_pools.py), which carry the same
    card label and their size or the CI label (``GpuPool.has_node``)."""
    return [n for n in nodes if pool.has_node(_labels(n))]


def _untolerated(pod: V1Pod, node: V1Node) -> list[Any]:
    """The node's scheduling taints that none of the pod's tolerations tolerates."""
    tolerations = [t.to_dict() for t in (pod.spec.tolerations if pod.spec else None) or []]
    taints = (node.spec.taints if node.spec else None) or []
    return [
        t
        for t in taints
        if t.effect in ("NoSchedule", "NoExecute")
        and not Taint(key=t.key, value=t.value or "", effect=t.effect).tolerated_by(tolerations)
    ]


def _taint_text(taint: Any) -> str:
    return f"{taint.key}={taint.value or ''}:{taint.effect}"


def _selector_text(selector: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(selector.items()))


@dataclass(frozen=True)
class Context:
    """What a diagnosis needs besides the pod: the fleet's view of the cluster, the cluster's nodes and events, and
    how the operator reaches it (for the commands a fix names)."""

    fleet: Fleet
    cluster: Cluster
    stack: str
    snapshot: Snapshot
    kubectl: str
    now: datetime

    def pool_of(self, labels: dict[str, str]) -> GpuPool | None:
        """The pool a fleet pod runs on, from its ``gpu`` label."""
        try:
            return self.cluster.pool(labels.get("gpu", ""))
        except KeyError:
            return None

    def policy_key(self, pool: GpuPool) -> str:
        """Where the pool's settings are in the policy file."""
        return f"clusters.{self.cluster.cloud}.{self.cluster.name}.gpus.{pool.card}"

    @property
    def up(self) -> str:
        """The command that deploys this stack."""
        return f"pulumi up --stack {self.stack}"


# --- diagnosis of a pod that does not run ---------------------------------------------------------------------------


def _image_source(pod: V1Pod, container: str, fleet: Fleet) -> str:
    """Where the image of a fleet pod's container is set: the workload's workload.yaml, else the pinned images."""
    name = _labels(pod).get("workload", "")
    workload = fleet.deployed_workloads.get(name)
    if container == "workload" and workload is not None:
        file = workload.folder / "workload.yaml"
        shown = file.relative_to(ROOT) if file.is_relative_to(ROOT) else file
        return f"{shown} (image)"
    return "components/kubernetes/images.yaml"


def _container_diagnoses(pod: V1Pod, ctx: Context) -> list[Diagnosis]:
    status = pod.status
    statuses = [
        *((status.init_container_statuses if status else None) or []),
        *((status.container_statuses if status else None) or []),
    ]
    out = []
    namespace, name = pod.metadata.namespace, pod.metadata.name
    for cs in statuses:
        waiting = cs.state.waiting if cs.state else None
        if waiting is None or not waiting.reason:
            continue
        message = f": {waiting.message}" if waiting.message else ""
        if waiting.reason in IMAGE_PULL_REASONS:
            out.append(
                Diagnosis(
                    f"container {cs.name} cannot pull its image {cs.image} ({waiting.reason}{message})",
                    f"check that the image exists and that the nodes may pull it (docker manifest inspect {cs.image}; "
                    f"registry credentials or the node role's pull permission); it is set in "
                    f"{_image_source(pod, cs.name, ctx.fleet)}, then {ctx.up}",
                )
            )
        elif waiting.reason in STARTING_REASONS:
            out.append(Diagnosis(f"container {cs.name} is starting ({waiting.reason})", waiting=True))
        elif waiting.reason == "CreateContainerConfigError":
            out.append(
                Diagnosis(
                    f"container {cs.name} cannot be configured ({waiting.reason}{message})",
                    "a Secret or ConfigMap it reads is missing: for workload credentials set them with pulumi config "
                    f"set --stack {ctx.stack} --secret --path 'gpu-fleet:workloadSecrets.<workload>.<VAR>' <value> "
                    f"and {ctx.up} (README, Adding a workload)",
                )
            )
        else:
            out.append(
                Diagnosis(
                    f"container {cs.name} is waiting: {waiting.reason}{message}",
                    f"{ctx.kubectl} -n {namespace} describe pod {name}; {ctx.kubectl} -n {namespace} logs {name} "
                    f"-c {cs.name} --previous",
                )
            )
    return out


def _scale_up_diagnosis(pod: V1Pod, pool: GpuPool | None, ctx: Context) -> Diagnosis | None:
    """What the cluster-autoscaler last said about the pod, as a diagnosis (None when it said nothing)."""
    events = _events_for(ctx.snapshot.events, "Pod", pod.metadata.namespace, pod.metadata.name)
    return _autoscaler_said(events, pod.metadata.namespace, pod.metadata.name, pool, ctx)


def _autoscaler_said(
    events: Sequence[CoreV1Event], namespace: str, pod_name: str, pool: GpuPool | None, ctx: Context
) -> Diagnosis | None:
    """The cluster-autoscaler's last word among ``events`` (about one pod, oldest first), as a diagnosis."""
    events = [e for e in events if e.reason in (NOT_TRIGGERED, TRIGGERED)]
    if not events:
        return None
    last = events[-1]
    message = (last.message or "").strip()
    if last.reason == TRIGGERED:
        return Diagnosis(f"waiting for a new node ({message})", waiting=True)
    said = message.removeprefix("pod didn't trigger scale-up:").strip() or "no node group can take it"
    cause = f"the cluster-autoscaler will not add a node ({NOT_TRIGGERED}: {said})"
    if pool is None:
        return Diagnosis(cause, f"{ctx.kubectl} -n {namespace} describe pod {pod_name}")
    if MAX_SIZE_PATTERN.search(said):
        return Diagnosis(
            f"pool {pool.name} is at its maximum of {pool.max_nodes} node(s): {cause}",
            f"wait for the pods on it to finish, or raise max_nodes under {ctx.policy_key(pool)} in the policy file "
            f"(now {pool.max_nodes}), then {ctx.up}",
        )
    # The reasons are summed over every node group, so only the pod's own resource blames the pool's template.
    short = set(INSUFFICIENT_PATTERN.findall(said))
    if pool.resource in short:
        return Diagnosis(
            f"the node template of pool {pool.name} has no {pool.resource}: {cause}", _template_fix(pool, ctx)
        )
    if short:
        return Diagnosis(
            f"no node group has room for the pod's request of {', '.join(sorted(short))}: {cause}",
            f"compare the workload's resources (workload.yaml) with the machine of pool {pool.name} "
            f"({pool.machine_type or 'the site machine'}); {ctx.kubectl} -n {namespace} describe pod {pod_name}",
        )
    if TAINT_PATTERN.search(said):
        return Diagnosis(
            f"a node group carries a taint the pod does not tolerate (the message sums every group): {cause}",
            f"{_autoscaler_logs(ctx)}; if the cloud adds that taint to pool {pool.name}, add it to spot_taints of "
            f"{ctx.cluster.cloud} in fleet/model/catalogue.yaml, then {ctx.up}",
        )
    if SELECTOR_PATTERN.search(said):
        return Diagnosis(
            f"no node group of the autoscaler carries the label {_selector_text(pool.node_selector)}: {cause}",
            _label_fix(pool, ctx, []),
        )
    return Diagnosis(
        f"no node group can take the pod: {cause}",
        f"check that pool {pool.name} exists and its autoscaler sees it: {_autoscaler_logs(ctx)}",
    )


def _autoscaler_logs(ctx: Context) -> str:
    """How to read what the cluster's autoscaler thinks (the cloud's rules, fleet/model/clouds/)."""
    return cloud_rules(ctx.cluster.cloud).autoscaler_logs(ctx.kubectl)


def _hint_context(pool: GpuPool, ctx: Context) -> DoctorContext:
    """What the cloud's rules need to word a hint about ``pool``."""
    return DoctorContext(
        stack=ctx.stack,
        kubectl=ctx.kubectl,
        up=ctx.up,
        pool_name=pool.name,
        card=pool.card,
        resource=pool.resource,
        units_per_node=pool.units_per_node,
        machine_type=pool.machine_type,
        policy_key=ctx.policy_key(pool),
        selector=_selector_text(pool.node_selector),
    )


def _template_fix(pool: GpuPool, ctx: Context) -> str:
    """What makes the autoscaler's idea of a new node of ``pool`` include its accelerators, per cloud."""
    return cloud_rules(ctx.cluster.cloud).template_fix(_hint_context(pool, ctx))


def _label_fix(pool: GpuPool, ctx: Context, nodes: Sequence[str]) -> str:
    """What puts ``pool``'s labels back on its nodes, per cloud."""
    return cloud_rules(ctx.cluster.cloud).label_fix(_hint_context(pool, ctx), tuple(nodes))


def _pod_spec(pod: V1Pod) -> dict[str, Any]:
    """The pod's spec in Kubernetes API field names (what fleet/model/placement.py reads)."""
    return ApiClient().sanitize_for_serialization(pod.spec) or {}


def _too_big(
    pod: V1Pod, insufficient: set[str], pool: GpuPool | None, own: Sequence[V1Node], ctx: Context
) -> Diagnosis | None:
    """A pod asking more cpu, memory (or another resource but its accelerator) than an empty node of its pool has: it
    never runs there, whatever the autoscaler adds, even while a card is free. The node's allocatable is read from the
    pool's nodes, or computed from its machine by the catalogue (fleet/model/catalogue.py) when it has none."""
    if pool is None:
        return None
    short = sorted(r for r in insufficient if r != pool.resource)
    if not short:
        return None
    asked = pod_requests(_pod_spec(pod))
    if own:
        offered = {r: max(_quantity_of(r, (n.status.allocatable or {}).get(r)) for n in own) for r in short}
        where = f"the largest allocatable of its {len(own)} node(s)"
    else:
        computed = load_catalogue().allocatable(ctx.cluster.cloud, pool.machine_type, ctx.cluster.kubernetes_version)
        if computed is None:
            return None
        offered = {r: computed.as_resources().get(r, 0) for r in short}
        where = f"a {pool.machine_type} node's allocatable ({computed.how})"
    over = [r for r in short if asked.get(r, 0) > offered[r]]
    if not over:
        return None
    numbers = ", ".join(f"{r} {describe(r, asked.get(r, 0))} > {describe(r, offered[r])}" for r in over)
    workload = _labels(pod).get("workload", "")
    folder = f"workloads/{workload}/workload.yaml" if workload else "the pod's resources"
    return Diagnosis(
        f"the pod asks more than a node of pool {pool.name} ({pool.machine_type}) has: {numbers} ({where}); it never "
        f"fits there, even with a card free",
        f"lower resources.cpu_request / memory_request in {folder} to what the machine gives (python -m fleet validate "
        f"checks every pool), or take {pool.card} off its cards; then {ctx.up}",
    )


def _quantity_of(resource: str, value: Any) -> int:
    """A node's quantity as fleet/model/placement.py counts it: millicores for cpu, units otherwise."""
    if value is None:
        return 0
    number = parse_quantity(str(value))
    return int(number * 1000) if resource == "cpu" else int(number)


def _scheduling_diagnoses(pod: V1Pod, message: str, pool: GpuPool | None, ctx: Context) -> list[Diagnosis]:
    """Why the scheduler cannot place the pod, from its Unschedulable message, the nodes and the autoscaler."""
    out: list[Diagnosis] = []
    nodes = ctx.snapshot.nodes
    own = pool_nodes(pool, nodes) if pool else []
    if TAINT_PATTERN.search(message) and pool is not None and own:
        tainted = {n.metadata.name: _untolerated(pod, n) for n in own}
        lost = {k: [t for t in v if t.key in NODE_CONTROLLER_TAINTS] for k, v in tainted.items()}
        lost = {k: v for k, v in lost.items() if v}
        for key, why in NODE_CONTROLLER_TAINTS.items():
            gone = sorted(k for k, v in lost.items() if any(t.key == key for t in v))
            if gone:
                out.append(
                    Diagnosis(
                        f"node(s) {', '.join(gone)} of pool {pool.name} are {why}: the node controller owns that "
                        f"taint ({key}) and lifts it when the kubelet reports again; a reclaimed spot node is being "
                        "replaced (the autoscaler adds a node for the pod)",
                        f"if it stays {key.rsplit('/', 1)[-1]}, delete the node ({ctx.kubectl} delete node {gone[0]}) "
                        "so that a new one replaces it",
                        waiting=True,
                    )
                )
        tainted = {k: [t for t in v if t.key not in NODE_CONTROLLER_TAINTS] for k, v in tainted.items()}
        tainted = {k: v for k, v in tainted.items() if v}
        if tainted:
            taints = sorted({_taint_text(t) for ts in tainted.values() for t in ts})
            out.append(
                Diagnosis(
                    f"node(s) {', '.join(sorted(tainted))} of pool {pool.name} carry the taint "
                    f"{', '.join(taints)}, which its pods do not tolerate",
                    f"if the cloud puts that taint on the pool, add it to spot_taints of {ctx.cluster.cloud} in "
                    f"fleet/model/catalogue.yaml (the pods then tolerate it); otherwise remove it "
                    f"({ctx.kubectl} taint nodes <node> {taints[0].split('=')[0]}-); then {ctx.up}",
                )
            )
    if SELECTOR_PATTERN.search(message) and pool is not None:
        wanted = (pod.spec.node_selector if pod.spec else None) or pool.node_selector
        known = [p.node_selector for p in ctx.cluster.all_pools]
        stray = sorted(
            n.metadata.name
            for n in nodes
            if max(_capacity(n, pool.resource), _allocatable(n, pool.resource)) > 0
            and not _matches(_labels(n), wanted)
            and not any(_matches(_labels(n), s) for s in known)
        )
        if stray:
            out.append(
                Diagnosis(
                    f"node(s) {', '.join(stray)} have {pool.resource} but not the label "
                    f"{_selector_text(wanted)} that pool {pool.name}'s pods select",
                    _label_fix(pool, ctx, stray),
                )
            )
    insufficient = {m.group(1) for m in INSUFFICIENT_PATTERN.finditer(message)}
    too_big = _too_big(pod, insufficient, pool, own, ctx)
    if too_big is not None:
        out.append(too_big)
    elif pool is not None and pool.resource in insufficient and own:
        total = sum(_allocatable(n, pool.resource) for n in own)
        if total == 0:
            out.append(
                Diagnosis(
                    f"the {len(own)} node(s) of pool {pool.name} advertise no {pool.resource}",
                    f"see the row of pool {pool.name}: the device plugin must run there",
                )
            )
        elif len(own) >= pool.max_nodes:
            out.append(
                Diagnosis(
                    f"all {total} {pool.resource} of pool {pool.name} are taken and it has its maximum of "
                    f"{pool.max_nodes} node(s)",
                    f"wait for the pods on it to finish, or raise max_nodes under {ctx.policy_key(pool)} in the "
                    f"policy file, then {ctx.up}",
                    waiting=True,
                )
            )
    scale = None if too_big is not None else _scale_up_diagnosis(pod, pool, ctx)
    if scale is not None:
        out.append(scale)
    elif pool is not None and not out and len(own) < pool.max_nodes:
        # the pod needs a new node of its pool (none there, or none that fits) and nothing says one is coming
        created = pod.metadata.creation_timestamp
        where = f"pool {pool.name} has no node" if not own else f"no node of pool {pool.name} can take it"
        if created is not None and (ctx.now - created).total_seconds() < GRACE_SECONDS:
            out.append(Diagnosis(f"{where}; the autoscaler has not answered yet", waiting=True))
        else:
            out.append(
                Diagnosis(
                    f"{where} and no autoscaler event names the pod (no {TRIGGERED} or {NOT_TRIGGERED}): nothing "
                    "is adding a node",
                    f"check that the autoscaler runs and sees pool {pool.name}: {_autoscaler_logs(ctx)}",
                )
            )
    if not out:
        out.append(
            Diagnosis(
                f"unschedulable: {message}",
                f"{ctx.kubectl} -n {pod.metadata.namespace} describe pod {pod.metadata.name}",
            )
        )
    return out


def diagnose_pod(pod: V1Pod, ctx: Context) -> list[Diagnosis]:
    """Why a Pending pod does not run, from its conditions, container states and the events about it.

    * PodScheduled False / Unschedulable: a pool node's taint the pod does not tolerate; GPU nodes without the
      pool's label; the pool's nodes full or advertising no accelerator; and what the cluster-autoscaler said
      (``NotTriggerScaleUp``: at its maximum, a node template without the accelerator, a taint or a label missing
      from every template; ``TriggeredScaleUp``: a node is coming, a wait);
    * a container waiting on its image (``ErrImagePull``, ``ImagePullBackOff``, ``InvalidImageName``) or its
      configuration (a missing Secret).

    Each diagnosis names its likely fix. An empty list: nothing is wrong that the doctor can see.
    """
    labels = _labels(pod)
    pool = ctx.pool_of(labels)
    conditions = (pod.status.conditions if pod.status else None) or []
    scheduled = next((c for c in conditions if c.type == "PodScheduled"), None)
    if scheduled is not None and scheduled.status == "False" and scheduled.reason == UNSCHEDULABLE:
        return _scheduling_diagnoses(pod, scheduled.message or "", pool, ctx)
    found = _container_diagnoses(pod, ctx)
    if found:
        return found
    if scheduled is None or scheduled.status != "True":
        return [Diagnosis("waiting for the scheduler", waiting=True)]
    return []


def _quota_diagnosis(job: V1Job, ctx: Context) -> Diagnosis | None:
    """The Job controller could not create a pod: the namespace's ResourceQuota (or another admission) refused it."""
    events = [
        e
        for e in _events_for(ctx.snapshot.events, "Job", job.metadata.namespace, job.metadata.name)
        if e.reason == FAILED_CREATE
    ]
    if not events:
        return None
    message = (events[-1].message or "").strip()
    namespace = job.metadata.namespace
    quota = QUOTA_PATTERN.search(message)
    if quota:
        name, requested, limited = quota.group(1), quota.group(2), quota.group(3)
        return Diagnosis(
            f"the ResourceQuota {name} refuses its pod (requested {requested}, limit {limited})",
            f"the quota sums max_nodes x accelerators per node over the pools (components/kubernetes/infra.py "
            f"benchmark_quota) and other benchmark pods hold it: wait for them, or raise max_nodes in the policy file "
            f"and {ctx.up}; {ctx.kubectl} -n {namespace} describe resourcequota {name}",
        )
    return Diagnosis(
        f"the Job controller cannot create its pod ({FAILED_CREATE}: {message})",
        f"{ctx.kubectl} -n {namespace} describe job {job.metadata.name}",
    )


# --- rows -----------------------------------------------------------------------------------------------------------


def _node_age(ctx: Context, name: str) -> float:
    """Seconds since the node ``name`` joined (its creation)."""
    node = next(n for n in ctx.snapshot.nodes if n.metadata.name == name)
    created = node.metadata.creation_timestamp
    return (ctx.now - created).total_seconds() if created else float("inf")


def pool_rows(ctx: Context) -> list[Row]:
    """One row per GPU pool: its nodes, Ready, and the accelerators they advertise."""
    rows = []
    for pool in ctx.cluster.all_pools:
        nodes = pool_nodes(pool, ctx.snapshot.nodes)
        what = f"pool {pool.name} ({_selector_text(pool.node_selector)})"
        total = sum(_allocatable(n, pool.resource) for n in nodes)
        state = (
            f"{len(nodes)} node(s), {total} {pool.resource} allocatable (min {pool.min_nodes}, max {pool.max_nodes})"
        )
        problems, fixes = [], []
        not_ready = sorted(n.metadata.name for n in nodes if not _node_ready(n))
        if not_ready:
            problems.append(f"node(s) {', '.join(not_ready)} not Ready")
            fixes.append(f"{ctx.kubectl} describe node {not_ready[0]} (conditions, kubelet)")
        empty = sorted(n.metadata.name for n in nodes if _node_ready(n) and _allocatable(n, pool.resource) == 0)
        # A node that just joined advertises its cards only once its driver and device plugin are up (GKE installs
        # the driver after the node is Ready): a wait, not yet a problem.
        young = [n for n in empty if _node_age(ctx, n) < NEW_NODE_SECONDS]
        if young:
            state += f"; {', '.join(young)} joined less than {NEW_NODE_SECONDS // 60} min ago"
            empty = [n for n in empty if n not in young]
        if empty:
            problems.append(f"node(s) {', '.join(empty)} advertise 0 {pool.resource}")
            fixes.append(_no_accelerator_fix(pool, ctx, empty[0]))
        unshared = sorted(
            n.metadata.name
            for n in nodes
            if pool.sharing and 0 < _capacity(n, pool.resource) < pool.units_per_node and n.metadata.name not in young
        )
        if unshared:  # the pool is shared, but its nodes advertise whole cards: pods wait for slices that are not there
            problems.append(
                f"node(s) {', '.join(unshared)} advertise fewer {pool.resource} than the pool's "
                f"{pool.units_per_node} ({pool.sharing.name if pool.sharing else ''})"
            )
            fixes.append(_sharing_fix(pool, ctx, unshared[0]))
        if not nodes and pool.min_nodes > 0:
            problems.append(f"no node, though min_nodes is {pool.min_nodes}")
            fixes.append(
                "the node group did not start its nodes: check it in the cloud (quota for "
                f"{pool.machine_type or 'the machine type'}, "
                f"{'spot ' if pool.spot else ''}capacity in {ctx.cluster.location or 'its location'})"
            )
        if not nodes and pool.min_nodes == 0:
            state += "; scaled to zero"
        rows.append(Row(what, state, "; ".join(problems), "; ".join(fixes)))
    return rows


def _sharing_fix(pool: GpuPool, ctx: Context, node: str) -> str:
    """What to look at when a shared pool's node advertises whole cards."""
    assert pool.sharing is not None
    if pool.needs_device_plugin:
        return (
            f"the node must carry {DEVICE_PLUGIN_CONFIG_LABEL}={pool.sharing.name} and the device plugin's "
            f"configuration {pool.sharing.name} ({ctx.kubectl} get node {node} --show-labels; the plugin's "
            f"config-manager log in kube-system); then {ctx.up}"
        )
    return f"the pool's GPU sharing must be {pool.sharing.name} in the cloud (recreate it with {ctx.up})"


def _no_accelerator_fix(pool: GpuPool, ctx: Context, node: str) -> str:
    if pool.needs_device_plugin:
        plugin = [
            p.metadata.name
            for p in ctx.snapshot.agent_pods.get(DEVICE_PLUGIN, [])
            if p.spec and p.spec.node_name == node
        ]
        look = (
            f"{ctx.kubectl} -n {DEVICE_PLUGIN_NS} logs {plugin[0]}"
            if plugin
            else f"it has no pod there: {ctx.kubectl} -n {DEVICE_PLUGIN_NS} get pods -l "
            f"app.kubernetes.io/instance={DEVICE_PLUGIN} -o wide"
        )
        return (
            f"the NVIDIA device plugin on {node} is not running or finds no GPU: {look} (and the driver: "
            f"nvidia-smi on the node)"
        )
    if pool.accelerator.is_nvidia and pool.cloud_facts.provides_device_plugin:
        return (
            f"the platform's GPU driver installer or device plugin has not finished on {node}: {ctx.kubectl} -n "
            f"kube-system get pods --field-selector spec.nodeName={node}"
        )
    return (
        f"the platform's device plugin for {pool.resource} is not ready on {node}: {ctx.kubectl} describe node {node}"
    )


def _daemonset_row(
    what: str, key: str, namespace: str, served: Sequence[GpuPool], ctx: Context, install_note: str
) -> Row:
    ds = ctx.snapshot.daemonsets.get(key)
    if ds is None:
        return Row(
            what,
            "not found",
            f"no DaemonSet {namespace}/{key}",
            f"{install_note}: {ctx.up} installs it (Helm release {key})",
        )
    desired = (ds.status.desired_number_scheduled if ds.status else 0) or 0
    ready = (ds.status.number_ready if ds.status else 0) or 0
    state = f"{ready}/{desired} ready"
    nodes = sorted({n.metadata.name for p in served for n in pool_nodes(p, ctx.snapshot.nodes)})
    pods = ctx.snapshot.agent_pods.get(key, [])
    covered = {p.spec.node_name for p in pods if p.spec and p.spec.node_name}
    problems, fixes = [], []
    if ready < desired:
        unready = [p for p in pods if not _pod_ready(p)]
        details = []
        for p in unready:
            reasons = [d.cause for d in _container_diagnoses(p, ctx)] or [p.status.phase if p.status else "?"]
            details.append(f"{p.metadata.name} on {p.spec.node_name if p.spec else '?'}: {'; '.join(reasons)}")
        problems.append(f"{desired - ready} pod(s) not ready" + (f" ({'; '.join(details)})" if details else ""))
        name = unready[0].metadata.name if unready else f"-l app.kubernetes.io/instance={key}"
        fixes.append(f"{ctx.kubectl} -n {namespace} describe pod {name}; {ctx.kubectl} -n {namespace} logs {name}")
    if pods or not desired:
        missing = [n for n in nodes if n not in covered]
        if missing:
            problems.append(f"no pod on node(s) {', '.join(missing)} of the GPU pools")
            fixes.append(
                f"its tolerations or node affinity do not admit those nodes (components/kubernetes/infra.py "
                f"gpu_tolerations, gpu_node_affinity): {ctx.up}"
            )
    if not nodes:
        state += "; no GPU node now"
    return Row(what, state, "; ".join(problems), "; ".join(fixes))


def _pod_ready(pod: V1Pod) -> bool:
    conditions = (pod.status.conditions if pod.status else None) or []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


def agent_rows(ctx: Context) -> list[Row]:
    """The NVIDIA device plugin where the platform brings none, and dcgm-exporter on the NVIDIA pools."""
    nvidia = [p for p in ctx.cluster.pools if p.accelerator.is_nvidia]
    if not nvidia:
        return []
    rows = []
    plugin = [p for p in nvidia if p.needs_device_plugin]
    what = f"NVIDIA device plugin ({DEVICE_PLUGIN_NS}/{DEVICE_PLUGIN})"
    if plugin:
        rows.append(_daemonset_row(what, DEVICE_PLUGIN, DEVICE_PLUGIN_NS, plugin, ctx, "the fleet installs it here"))
    else:
        rows.append(Row(what, f"not needed: the platform ({ctx.cluster.facts.title}) brings its own"))
    rows.append(
        _daemonset_row(
            f"dcgm-exporter ({NODE_AGENTS_NS}/{EXPORTER})", EXPORTER, NODE_AGENTS_NS, nvidia, ctx, "GPU metrics need it"
        )
    )
    return rows


def gateway_rows(ctx: Context) -> list[Row]:
    """On a leaf: the mTLS federation gateway ready, and its LoadBalancer given an address the central can reach."""
    if ctx.cluster.central:
        return []
    what = f"federation gateway ({MONITORING_NS}/{GATEWAY})"
    deploy = ctx.snapshot.gateway
    if deploy is None:
        return [Row(what, "not found", f"no Deployment {MONITORING_NS}/{GATEWAY}", f"{ctx.up} creates it")]
    ready = (deploy.status.ready_replicas if deploy.status else None) or 0
    wanted = (deploy.spec.replicas if deploy.spec else None) or 1
    state = f"{ready}/{wanted} ready"
    problems, fixes = [], []
    if ready < 1:
        problems.append("no ready replica: the central's scrapes get no answer")
        fixes.append(
            f"{ctx.kubectl} -n {MONITORING_NS} describe deploy {GATEWAY}; "
            f"{ctx.kubectl} -n {MONITORING_NS} logs deploy/{GATEWAY}"
        )
    service = ctx.snapshot.gateway_service
    ingress = (
        service.status.load_balancer.ingress if service and service.status and service.status.load_balancer else None
    ) or []
    if service is None:
        problems.append(f"no Service {MONITORING_NS}/{GATEWAY}")
        fixes.append(f"{ctx.up} creates it")
    elif not ingress:
        problems.append("its LoadBalancer has no address yet: the central has nothing to reach")
        fixes.append(f"{ctx.kubectl} -n {MONITORING_NS} describe svc {GATEWAY} (the cloud's load-balancer events)")
    else:
        address = ingress[0].ip or ingress[0].hostname
        state += f", address {address}:443"
    return [Row(what, state, "; ".join(problems), "; ".join(fixes))]


def _pods_of(job: V1Job, pods: Sequence[V1Pod]) -> list[V1Pod]:
    name = job.metadata.name
    return [
        p
        for p in pods
        if p.metadata.namespace == job.metadata.namespace
        and (
            _owner(p, "Job") == name
            or _labels(p).get("batch.kubernetes.io/job-name") == name
            or _labels(p).get("job-name") == name
        )
    ]


def _condition(job: V1Job, kind: str) -> Any:
    for c in (job.status.conditions if job.status else None) or []:
        if c.type == kind and c.status == "True":
            return c
    return None


def _gone_pod_diagnosis(job: V1Job, ctx: Context) -> Diagnosis | None:
    """For a failed Job whose pods are gone: what the cluster-autoscaler said about them (events outlive their pod,
    an hour by default), or None."""
    namespace, prefix = job.metadata.namespace, f"{job.metadata.name}-"
    about = sorted(
        (
            e
            for e in ctx.snapshot.events
            if e.involved_object
            and e.involved_object.kind == "Pod"
            and (e.involved_object.name or "").startswith(prefix)
            and (e.involved_object.namespace or namespace) == namespace
        ),
        key=_event_time,
    )
    if not about:
        return None
    pod_name = about[-1].involved_object.name
    said = _autoscaler_said(about, namespace, pod_name, ctx.pool_of(_labels(job)), ctx)
    if said is None:
        return None
    if said.waiting:  # a node was on its way when the deadline passed
        return Diagnosis(
            f"its pod {pod_name} never ran: {said.cause} when the Job's deadline passed",
            f"the pool scales up slower than the Job's activeDeadlineSeconds allows; {_autoscaler_logs(ctx)}",
        )
    return Diagnosis(f"its pod {pod_name} never ran: {said.cause}", said.fix)


def job_state(job: V1Job, ctx: Context) -> tuple[str, str, str]:
    """The state of one Job as (state, problem, fix): Complete, Running, Failed with why, or Pending with the
    diagnosis of its pod."""
    status = job.status
    namespace, name = job.metadata.namespace, job.metadata.name
    if _condition(job, "Complete") is not None:
        done = status.completion_time if status else None
        return f"Complete {_age(done, ctx.now)} ago", "", ""
    failed = _condition(job, "Failed")
    pods = sorted(_pods_of(job, ctx.snapshot.pods), key=lambda p: p.metadata.creation_timestamp or ctx.now)
    if failed is not None:
        reason = f"{failed.reason}: {failed.message}" if failed.message else str(failed.reason)
        last = pods[-1] if pods else None
        if last is not None and last.status and last.status.phase == "Pending":
            causes = [d for d in diagnose_pod(last, ctx) if not d.waiting]
            if causes:
                return (
                    f"Failed ({failed.reason})",
                    f"Job {name} failed ({reason}) while its pod was Pending: {'; '.join(d.cause for d in causes)}",
                    "; ".join(d.fix for d in causes if d.fix),
                )
        if last is None:  # the Job controller deleted the pod at the deadline: what was said about it remains
            gone = _gone_pod_diagnosis(job, ctx)
            if gone is not None:
                return f"Failed ({failed.reason})", f"Job {name} failed ({reason}): {gone.cause}", gone.fix
        exited = ""
        for cs in (last.status.container_statuses if last and last.status else None) or []:
            ended = cs.state.terminated if cs.state else None
            if cs.name == "workload" and ended is not None:
                exited = f"; the workload exited with code {ended.exit_code} ({ended.reason or 'no reason'})"
        return (
            f"Failed ({failed.reason})",
            f"Job {name} failed: {reason}{exited}",
            f"{ctx.kubectl} -n {namespace} logs job/{name} -c workload; "
            f"{ctx.kubectl} -n {namespace} describe job {name}",
        )
    if job.spec and job.spec.suspend:
        return (
            "Suspended",
            f"Job {name} is suspended",
            f"{ctx.up} (or {ctx.kubectl} -n {namespace} get job {name} -o yaml)",
        )
    active = [p for p in pods if p.status and p.status.phase in ("Pending", "Running")]
    running = [p for p in active if p.status.phase == "Running"]
    if running:
        node = running[-1].spec.node_name if running[-1].spec else "?"
        return f"Running on {node} for {_age(running[-1].status.start_time, ctx.now)}", "", ""
    pending = [p for p in active if p.status.phase == "Pending"]
    if pending:
        pod = pending[-1]
        age = _age(pod.metadata.creation_timestamp, ctx.now)
        diagnoses = diagnose_pod(pod, ctx)
        problems = [d for d in diagnoses if not d.waiting]
        if problems:
            return (
                f"Pending {age} (pod {pod.metadata.name})",
                "; ".join(d.cause for d in problems),
                "; ".join(d.fix for d in problems if d.fix),
            )
        waiting = "; ".join(d.cause for d in diagnoses) or "starting"
        return f"Pending {age}: {waiting}", "", ""
    quota = _quota_diagnosis(job, ctx)
    if quota is not None:
        return f"no pod ({_age(job.metadata.creation_timestamp, ctx.now)})", quota.cause, quota.fix
    return f"starting ({_age(job.metadata.creation_timestamp, ctx.now)})", "", ""


def _cronjob_row(what: str, cronjob: V1CronJob, ctx: Context) -> Row:
    spec = cronjob.spec
    jobs = [j for j in ctx.snapshot.jobs if _owner(j, "CronJob") == cronjob.metadata.name]
    jobs = [j for j in jobs if j.metadata.namespace == cronjob.metadata.namespace]
    schedule = f"schedule '{spec.schedule}'"
    if spec.suspend:
        return Row(
            what,
            f"{schedule}, suspended",
            f"CronJob {cronjob.metadata.name} is suspended",
            f"{ctx.up} restores it",
        )
    if not jobs:
        last = cronjob.status.last_schedule_time if cronjob.status else None
        seen = f"last scheduled {_age(last, ctx.now)} ago, its Job is gone" if last else "not run yet"
        return Row(what, f"{schedule}, {seen}")
    newest = _newest(jobs)
    state, problem, fix = job_state(newest, ctx)
    return Row(what, f"{schedule}; last Job {newest.metadata.name}: {state}", problem, fix)


def benchmark_rows(ctx: Context) -> list[Row]:
    """One row per benchmark the policy places on the cluster (a Job, or a CronJob and its newest Job) and one per
    probed pool (its probe CronJob and newest Job)."""
    rows = []
    snap = ctx.snapshot
    probes = ctx.fleet.probes(ctx.cluster)
    for bench in ctx.fleet.workload_jobs(ctx.cluster):
        workload, card = bench.workload.name, bench.pool.card
        namespace = (
            pod_contract.ROOT_BENCHMARK_NAMESPACE
            if bench.workload.spec.needs_root
            else pod_contract.BENCHMARK_NAMESPACE
        )
        what = f"probe of pool {bench.pool.name}" if bench in probes else f"benchmark {workload} on {card}"
        wanted = {PART_OF: pod_contract.BENCHMARK_PART_OF, "workload": workload, "gpu": card}
        if bench.schedule:
            crons = [c for c in snap.cronjobs if c.metadata.namespace == namespace and _matches(_labels(c), wanted)]
            if not crons:
                rows.append(
                    Row(
                        what,
                        "not found",
                        f"no CronJob in {namespace} with labels {_selector_text(wanted)}",
                        f"{ctx.up} creates it",
                    )
                )
                continue
            rows.append(_cronjob_row(what, _newest(crons), ctx))
            continue
        jobs = [
            j
            for j in snap.jobs
            if j.metadata.namespace == namespace and _matches(_labels(j), wanted) and not _owner(j, "CronJob")
        ]
        if not jobs:
            rows.append(
                Row(
                    what,
                    "not found",
                    f"no Job in {namespace} with labels {_selector_text(wanted)}",
                    f"{ctx.up} creates it",
                )
            )
            continue
        newest = _newest(jobs)
        state, problem, fix = job_state(newest, ctx)
        rows.append(Row(what, f"Job {newest.metadata.name}: {state}", problem, fix))
    return rows


def cluster_rows(
    fleet: Fleet, cluster: Cluster, stack: str, snapshot: Snapshot, kubectl: str, now: datetime
) -> list[Row]:
    """Every row the API server's answers give (pools, node agents, gateway, benchmarks, probes)."""
    ctx = Context(fleet, cluster, stack, snapshot, kubectl, now)
    return [*pool_rows(ctx), *agent_rows(ctx), *gateway_rows(ctx), *benchmark_rows(ctx)]


# --- Prometheus -----------------------------------------------------------------------------------------------------


def port_forward_command(kubectl: str, local_port: int) -> str:
    """The command that opens a cluster's Prometheus (kube-prometheus-stack's Service) on 127.0.0.1:local_port."""
    return f"{kubectl} -n {MONITORING_NS} port-forward svc/{PROMETHEUS_SERVICE} {local_port}:{PROMETHEUS_PORT}"


def kubectl_for_stack(stack: str, kubeconfig: Path | None) -> str:
    """``kubectl`` with the kubeconfig of ``stack``: the given file, else the stack output read in place (bash/zsh
    process substitution: the credentials never touch the disk)."""
    if kubeconfig is not None:
        return f"kubectl --kubeconfig {shlex.quote(str(kubeconfig))}"
    return f"kubectl --kubeconfig <(pulumi stack output kubeconfig --show-secrets --stack {stack})"


def _query(url: str, promql: str, timeout: float) -> list[dict[str, Any]]:
    from fleet.report.prometheus_api import PrometheusClient

    return PrometheusClient(url, timeout=timeout).query(promql, time.time())


def _unreachable_row(what: str, url: str, error: Exception, forward: str) -> Row:
    return Row(
        what,
        "cannot query",
        f"cannot query Prometheus at {url}: {error}",
        f"is the port-forward still running? {forward}",
    )


def pod_monitor_rows(
    url: str | None, timeout: float, forward: str, kubectl: str = "kubectl", runners: int = 0
) -> list[Row]:
    """``up`` of the PodMonitors' targets on this cluster's Prometheus: for benchmarks none is fine (no pod runs),
    for the cluster's ``runners`` (long-lived managers) fewer targets is a problem; any 0 is one."""
    rows = []
    monitors = [m for m in POD_MONITORS if runners or m[1] != pod_contract.RUNNER_POD_MONITOR]
    for monitor_namespace, monitor in monitors:
        job = f"{monitor_namespace}/{monitor}"
        what = f"PodMonitor {job}: targets up"
        if url is None:
            rows.append(
                Row(
                    what,
                    f"skipped: no --prometheus; open it with: {forward}, then --prometheus http://127.0.0.1:{PROMETHEUS_PORT}",
                    skipped=True,
                )
            )
            continue
        try:
            result = _query(url, f'up{{job="{job}"}}', timeout)
        except Exception as exc:  # PrometheusError and a URL that does not parse alike
            rows.append(_unreachable_row(what, url, exc, forward))
            continue
        down_series = [r["metric"] for r in result if float(r["value"][1]) == 0]
        down = sorted(m.get("pod") or m.get("instance", "?") for m in down_series)
        namespace = (down_series[0].get("namespace") if down_series else None) or monitor_namespace
        state = f"{len(result) - len(down)} up, {len(down)} down" if result else "0 targets (no pod runs now)"
        if monitor == pod_contract.RUNNER_POD_MONITOR and len(result) < runners:
            rows.append(
                Row(
                    what,
                    f"{len(result)} of {runners} runner(s) scraped",
                    "a runner of the policy has no running pod: without its token Secret its pod waits",
                    "pulumi config set --stack <stack> --secret --path 'gpu-fleet:runnerTokens.<card>' <glrt-...>, "
                    f"then pulumi up; {kubectl} -n {monitor_namespace} get pods",
                )
            )
            continue
        if down:
            server, logs_of = MONITOR_SERVERS[monitor]
            container = f" -c {logs_of}" if logs_of else ""
            rows.append(
                Row(
                    what,
                    state,
                    f"Prometheus cannot scrape pod(s) {', '.join(down)} (up 0)",
                    f"{server} must listen: {kubectl} -n {namespace} logs {down[0]}{container}; the NetworkPolicy "
                    f"allow-prometheus of its namespace must admit the {MONITORING_NS} namespace",
                )
            )
        else:
            rows.append(Row(what, state))
    return rows


def federation_rows(
    fleet: Fleet, cluster: Cluster, url: str | None, timeout: float, forward: str, leaf_fix: str
) -> list[Row]:
    """On the central: every leaf's ``up{job="federate-<leaf>"}`` is 1; on a leaf: the central's job for it.

    0 means the leaf's gateway does not answer or refuses the central's certificate; no series means the central has
    no such job (its stack does not know the leaf yet).
    """
    central = fleet.central
    leaves = [c for c in fleet.clusters.values() if not c.central] if cluster.central else [cluster]
    rows = []
    for leaf in leaves:
        job = f"{FEDERATE_JOB_PREFIX}{leaf.name}"
        what = f"federation: {central.name} scrapes {leaf.name}"
        if url is None:
            flag = "--prometheus" if cluster.central else "--central-prometheus"
            port = PROMETHEUS_PORT if cluster.central else PROMETHEUS_PORT + 1
            rows.append(
                Row(
                    what,
                    f"skipped: no {flag}; open it with: {forward}, then {flag} http://127.0.0.1:{port}",
                    skipped=True,
                )
            )
            continue
        try:
            result = _query(url, f'up{{job="{job}"}}', timeout)
        except Exception as exc:
            rows.append(_unreachable_row(what, url, exc, forward))
            continue
        if not result:
            rows.append(
                Row(
                    what,
                    f"no job {job}",
                    f"the central Prometheus has no federation job for {leaf.name}",
                    f"deploy the leaf, then the central: pulumi up --stack {leaf.name}, then pulumi up --stack "
                    f"{central.name} (it learns the leaf through a StackReference)",
                )
            )
            continue
        if any(float(r["value"][1]) == 0 for r in result):
            rows.append(
                Row(
                    what,
                    f'up{{job="{job}"}} 0',
                    f"the gateway of {leaf.name} does not answer the central or refuses its certificate",
                    f"python -m fleet doctor --stack {leaf.name} (its gateway row); its "
                    f"gpu-fleet:federationSourceRanges must admit the central's egress; if its certificates changed, "
                    f"{leaf_fix}",
                )
            )
            continue
        rows.append(Row(what, f'up{{job="{job}"}} 1'))
    return rows


def probe_phase_query(cluster: Cluster) -> str:
    """The cluster's own records of its pools' last probe, by phase (fleet/model/probe_phases.py)."""
    return f'{PHASE_RECORD}{{cluster="{cluster.name}"}}'


def probe_phase_rows(cluster: Cluster, results: Sequence[dict[str, Any]]) -> list[Row]:
    """A line per phase of each probed pool's last probe (the answer to :func:`probe_phase_query`): how long it waited
    for a node, the device, its containers and the check; informational, never a problem (ProbeSlowPhase alerts)."""
    seen: dict[tuple[str, str], tuple[float, str]] = {}
    for r in results:
        labels = r["metric"]
        seen[(labels.get("gpu", ""), labels.get("phase", ""))] = (float(r["value"][1]), labels.get("pod", ""))
    rows = []
    for pool in (p for p in cluster.pools if p.probe is not None):
        what = f"last probe of pool {pool.name}"
        if not any(card == pool.card for card, _ in seen):
            rows.append(
                Row(what, "no phases recorded: no probe pod of the pool has been bound to a node", skipped=True)
            )
            continue
        for phase in PHASES:
            seconds, pod = seen.get((pool.card, phase), (None, ""))
            state = "not measured yet" if seconds is None else f"{seconds:g} s in {PHASE_MEANING[phase]} ({pod})"
            rows.append(Row(f"{what}: {phase}", state))
    return rows


def prometheus_rows(
    fleet: Fleet,
    cluster: Cluster,
    stack: str,
    prometheus: str | None,
    central_prometheus: str | None,
    timeout: float,
    kubeconfig: Path | None = None,
) -> list[Row]:
    """The Prometheus rows: this cluster's PodMonitor targets and the federation (skipped without a URL)."""
    kubectl = kubectl_for_stack(stack, kubeconfig)
    here = port_forward_command(kubectl, PROMETHEUS_PORT)
    central = fleet.central
    rows = pod_monitor_rows(prometheus, timeout, here, kubectl, runners=len(fleet.runners_of(cluster)))
    if cluster.central:
        url, forward = central_prometheus or prometheus, here
    else:
        url = central_prometheus
        forward = port_forward_command(kubectl_for_stack(central.name, None), PROMETHEUS_PORT + 1)
    leaf_fix = f"pulumi up --stack {central.name} so the central mounts the new ones"
    if prometheus is not None and any(p.probe is not None for p in cluster.pools):  # time to first accelerator
        try:
            rows += probe_phase_rows(cluster, _query(prometheus, probe_phase_query(cluster), timeout))
        except Exception as exc:
            rows.append(_unreachable_row("probe phases", prometheus, exc, here))
    return rows + federation_rows(fleet, cluster, url, timeout, forward, leaf_fix)


# --- reading the cluster --------------------------------------------------------------------------------------------


def _named(items: Sequence[Any], name: str) -> Any:
    return next((i for i in items if i.metadata and i.metadata.name == name), None)


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
        if any(p.needs_device_plugin for p in nvidia):
            agents.append((DEVICE_PLUGIN, DEVICE_PLUGIN_NS))
        if nvidia:
            agents.append((EXPORTER, NODE_AGENTS_NS))
        for name, namespace in agents:
            selector = f"app.kubernetes.io/instance={name}"
            found = apps.list_namespaced_daemon_set(namespace, label_selector=selector, _request_timeout=timeout)
            snap.daemonsets[name] = _named(found.items, name)
            pods = core.list_namespaced_pod(namespace, label_selector=selector, _request_timeout=timeout).items
            snap.agent_pods[name] = [p for p in pods if _owner(p, "DaemonSet") in (None, name)]
        if not cluster.central:
            selector = f"app.kubernetes.io/name={GATEWAY}"
            deployments = apps.list_namespaced_deployment(
                MONITORING_NS, label_selector=selector, _request_timeout=timeout
            )
            snap.gateway = _named(deployments.items, GATEWAY)
            services = core.list_namespaced_service(MONITORING_NS, label_selector=selector, _request_timeout=timeout)
            snap.gateway_service = _named(services.items, GATEWAY)
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
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise ApiUnreachableError(f"cannot reach the API server at {server}: {reason}") from None
    snap.jobs = [j for j in snap.jobs if _labels(j).get(PART_OF) in FLEET_PARTS]
    snap.cronjobs = [c for c in snap.cronjobs if _labels(c).get(PART_OF) in FLEET_PARTS]
    snap.pods = [p for p in snap.pods if _labels(p).get(PART_OF) in FLEET_PARTS]
    return snap


@contextmanager
def kubeconfig_file(stack: str, given: Path | None, timeout: float = 120.0) -> Iterator[Path]:
    """The kubeconfig to use: ``given``, else ``pulumi stack output kubeconfig --show-secrets --stack <stack>`` in a
    private temporary file (mode 0600), deleted afterwards. ``InputError`` when neither can be had."""
    if given is not None:
        if not given.is_file() or not os.access(given, os.R_OK):
            why = "no such file" if not given.exists() else "not a readable file"
            raise InputError([Problem(str(given), 1, "--kubeconfig", f"cannot read the kubeconfig: {why}")])
        yield given
        return
    pulumi = shutil.which("pulumi")
    command = ["pulumi", "stack", "output", "kubeconfig", "--show-secrets", "--stack", stack]
    shown = " ".join(command)
    if pulumi is None:
        raise InputError(
            [
                Problem(
                    "pulumi",
                    1,
                    "--stack",
                    f"the Pulumi CLI is not installed, so `{shown}` cannot run: install it "
                    "(https://www.pulumi.com/docs/install/) or give --kubeconfig FILE",
                )
            ]
        )
    try:
        done = subprocess.run(
            [pulumi, *command[1:]], capture_output=True, text=True, timeout=timeout, cwd=ROOT, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InputError([Problem("pulumi", 1, "--stack", f"`{shown}` did not run: {exc}")]) from None
    if done.returncode != 0 or not done.stdout.strip():
        said = " ".join((done.stderr or done.stdout or "no output").split())[-300:]
        raise InputError(
            [
                Problem(
                    "pulumi",
                    1,
                    "--stack",
                    f"`{shown}` failed (exit {done.returncode}): {said}; log in to the stack's backend (pulumi "
                    "login), or give --kubeconfig FILE",
                )
            ]
        )
    handle, name = tempfile.mkstemp(prefix="gpu-fleet-kubeconfig-", suffix=".yaml")  # created with mode 0600
    path = Path(name)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(done.stdout)
        os.chmod(path, 0o600)
        yield path
    finally:
        path.unlink(missing_ok=True)


def api_client(path: Path) -> ApiClient:
    """An API client from a kubeconfig file, which is never written back; ``InputError`` if it is unusable."""
    check_kubeconfig(path)  # bounded, and each problem at its line: the client would fail with a traceback
    configuration = Configuration()
    configuration.retries = 1
    try:
        return new_client_from_config(config_file=str(path), persist_config=False, client_configuration=configuration)
    except (ConfigException, OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        message = " ".join(str(exc).split())[:300] or type(exc).__name__
        raise InputError([Problem(str(path), 1, "--kubeconfig", f"not a usable kubeconfig: {message}")]) from None


# --- the table ------------------------------------------------------------------------------------------------------


def render_table(rows: Sequence[Row], title: str = "") -> str:
    """One table: CHECK, STATUS, STATE; a problem row is followed by its problem and likely fix, indented."""
    width = min(max([len("CHECK"), *(len(r.what) for r in rows)]), 60)
    lines = [title] if title else []
    lines.append(f"{'CHECK':<{width}}  {'STATUS':<6}  STATE")
    pad = " " * 4
    for row in rows:
        what = row.what if len(row.what) <= width else row.what[: width - 1] + "…"
        lines.append(f"{what:<{width}}  {row.status:<6}  {row.state}")
        if row.problem:
            lines.append(f"{pad}problem: {row.problem}")
            lines.append(f"{pad}fix: {row.fix or '-'}")
    failed = sum(1 for r in rows if r.problem)
    skipped = sum(1 for r in rows if r.skipped and not r.problem)
    lines.append(f"{len(rows)} check(s): {len(rows) - failed - skipped} ok, {failed} problem(s), {skipped} skipped")
    return "\n".join(lines)


def exit_status(rows: Sequence[Row]) -> int:
    """0 when no row names a problem (skipped rows are not problems), else 1."""
    return EXIT_FAILED if any(r.problem for r in rows) else EXIT_OK


def utc_now() -> datetime:
    """The real clock, ``run``'s default (tests pass a stopped one)."""
    return datetime.now(UTC)


def run(args: Any, out: Any = None, clock: Callable[[], datetime] = utc_now) -> int:
    """The ``doctor`` subcommand: inspect the cluster of ``args.stack`` and print one table; 0, 1 or 2. Ages and
    grace periods are measured from ``clock()``, read once."""
    out = out or sys.stdout
    if args.timeout <= 0:
        raise InputError(
            [Problem("--timeout", 1, "--timeout", f"must be a positive number of seconds, not {args.timeout:g}")]
        )
    from fleet.report.prometheus_api import check_base_url

    for flag, value in (("--prometheus", args.prometheus), ("--central-prometheus", args.central_prometheus)):
        if value is not None:
            try:
                check_base_url(value)
            except ValueError as exc:
                raise InputError([Problem(flag, 1, flag, str(exc))]) from None
    fleet = load_fleet(args.policy, args.workloads_dir)
    cluster = fleet.cluster(args.stack)
    now = clock()
    kubectl = kubectl_for_stack(cluster.name, args.kubeconfig)
    title = f"{cluster.name} ({cluster.facts.title}{', central' if cluster.central else ''}), {now:%Y-%m-%d %H:%M} UTC"
    with kubeconfig_file(cluster.name, args.kubeconfig) as path:
        api = api_client(path)
        try:
            try:
                snapshot = read_cluster(api, fleet, cluster, args.timeout)
            except ApiUnreachableError as exc:
                row = Row(
                    "Kubernetes API server",
                    "unreachable",
                    str(exc),
                    f"check the kubeconfig's server and your network (VPN, the cluster's authorized networks); "
                    f"{kubectl} get nodes",
                )
                print(render_table([row], title), file=out)
                return EXIT_FAILED
            queues = [Row(*r) for r in queue_rows_for(fleet, cluster, api, kubectl, args.timeout)]  # on the manager
        finally:
            api.close()
    rows = [Row("Kubernetes API server", f"{api.configuration.host}: {len(snapshot.nodes)} node(s)")]
    rows += cluster_rows(fleet, cluster, cluster.name, snapshot, kubectl, now)
    rows += queues
    rows += prometheus_rows(
        fleet, cluster, cluster.name, args.prometheus, args.central_prometheus, args.timeout, args.kubeconfig
    )
    print(render_table(rows, title), file=out)
    return exit_status(rows)
