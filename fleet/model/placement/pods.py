"""Placement as a fact of the model: every pod the fleet runs lands on its own pool, and fits a node of it.

Nodes are made from a cluster's pools (labels, taints, the allocatable of the pool's machine from the catalogue,
the accelerators a node advertises); pods are pod specs in Kubernetes API field names, those a stack renders or
those the model predicts (``fleet_pods``: benchmarks, probes, sweep workers, CI jobs). A pod is placed by the
rules of kube-scheduler's filter plugins (kubernetes/kubernetes v1.34, ``pkg/scheduler/framework/plugins``):

- **NodeResourcesFit** (``noderesources/fit.go`` ``fitsRequest``, reason ``Insufficient <resource>``): the pod's
  requests, computed as ``k8s.io/component-helpers/resource`` ``PodRequests`` computes them (``helpers.go``
  ``AggregateContainerRequests``, the KEP-753 rule): app containers summed; each restartable init container
  (``restartPolicy: Always``, a native sidecar) added to that sum and to every later init container; an ordinary
  init container counts with the sidecars started before it, and the pod asks the largest of that and the sum; then
  ``overhead`` added. A container's request defaults to its limit when only the limit is set
  (``pkg/apis/core/v1/defaults.go`` ``SetDefaults_Pod``), as for ``nvidia.com/gpu``.
- **TaintToleration** (``tainttoleration/taint_toleration.go``, reason ``node(s) had untolerated taint {k: v}``):
  every ``NoSchedule`` and ``NoExecute`` taint must be tolerated (``Taint.tolerated_by``).
- **NodeAffinity** (``nodeaffinity/node_affinity.go``, ``ErrReasonPod`` "node(s) didn't match Pod's node
  affinity/selector"): every ``nodeSelector`` label, and one of the required ``nodeSelectorTerms`` (``In``,
  ``NotIn``, ``Exists``, ``DoesNotExist``; ``k8s.io/component-helpers/scheduling/corev1/nodeaffinity``).

A node's own pods are counted first: the fleet's node agents (``fleet/model/placement/node_agents.py``: the node
exporter, the device plugin, dcgm-exporter), whose requests NodeResourcesFit counts like any pod's, so a pool's pods get
the allocatable they leave. Every node carries the labels the kubelet gives itself (``KUBELET_LABELS``).

A pool whose node holds several pods at once (a shared card's slices, or several cards) must take as many of the
pod as it has units: ``copies``. Where a machine's size is not known (a site flavor), only labels and taints count.
The same rules serve ``validate`` and ``plan`` (``placement_problems``, through ``load_fleet``) and the tests, which
also place the pods a plan really renders.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_CEILING, Decimal
from typing import Any

from fleet.model.core import pod_contract
from fleet.model.core.catalogue import Allocatable, Catalogue, load_catalogue
from fleet.model.core.clusters import Cluster
from fleet.model.core.errors import Problem
from fleet.model.core.fleet import Fleet
from fleet.model.core.jobs import Runner, SweepPoint
from fleet.model.core.pools import CARDS_PER_NODE_LABEL, GpuPool
from fleet.model.core.quantity import parse_quantity
from fleet.model.core.taints import Taint
from fleet.model.core.workloads import Workload
from fleet.model.core.yaml_source import YamlDocument
from fleet.model.placement.node_agents import NodeAgent, agents_on

SYSTEM_POOL = "system"
# The labels a kubelet gives its own node: the OS (kubernetes/kubernetes pkg/kubelet/nodestatus, InitialNode:
# ``v1.LabelOSStable: goruntime.GOOS``; staging/src/k8s.io/api/core/v1/well_known_labels.go); every node of the
# fleet is Linux. kube-prometheus-stack's node exporter selects it (prometheus-node-exporter 4.49.1 values.yaml
# nodeSelector ``kubernetes.io/os: linux``). The architecture, also set there, is not known per machine here.
KUBELET_LABELS = {"kubernetes.io/os": "linux"}
# the scheduler's reasons (kubernetes/kubernetes v1.34 pkg/scheduler/framework/plugins)
AFFINITY_REASON = "node(s) didn't match Pod's node affinity/selector"


def taint_reason(taint: Taint) -> str:
    """TaintToleration's reason for one taint: ``node(s) had untolerated taint {key: value}``."""
    return f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}"


def insufficient_reason(resource: str) -> str:
    """NodeResourcesFit's reason: ``Insufficient <resource>``."""
    return f"Insufficient {resource}"


def _amount(resource: str, value: Any) -> int:
    """A quantity as the scheduler compares it: millicores for ``cpu``, whole units (bytes, cards) otherwise."""
    return _amount_of_text(resource, str(value))


@functools.lru_cache(maxsize=4096)
def _amount_of_text(resource: str, text: str) -> int:
    # A fleet of many clusters asks the same few quantities hundreds of thousands of times (every pod on every node).
    number = parse_quantity(text)
    if resource == "cpu":
        number *= 1000
    return int(number.to_integral_value(rounding=ROUND_CEILING))


def container_requests(container: Mapping[str, Any]) -> dict[str, int]:
    """A container's requests; a resource with only a limit requests its limit (the API server's defaulting)."""
    resources = container.get("resources") or {}
    limits = resources.get("limits") or {}
    requests = {**limits, **(resources.get("requests") or {})}
    return {name: _amount(name, value) for name, value in requests.items()}


def _add(into: dict[str, int], more: Mapping[str, int]) -> None:
    for name, value in more.items():
        into[name] = into.get(name, 0) + value


def _max(into: dict[str, int], more: Mapping[str, int]) -> None:
    for name, value in more.items():
        into[name] = max(into.get(name, 0), value)


def pod_requests(spec: Mapping[str, Any]) -> dict[str, int]:
    """What the scheduler asks of a node for this pod spec (k8s.io/component-helpers resource ``PodRequests``)."""
    total: dict[str, int] = {}
    for container in spec.get("containers") or []:
        _add(total, container_requests(container))
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for container in spec.get("initContainers") or []:
        own = container_requests(container)
        if container.get("restartPolicy") == "Always":
            _add(total, own)
            _add(sidecars, own)
            during = dict(sidecars)
        else:
            during = dict(own)
            _add(during, sidecars)
        _max(init_peak, during)
    _max(total, init_peak)
    overhead = spec.get("overhead") or {}
    _add(total, {name: _amount(name, value) for name, value in overhead.items()})
    return total


def held_by(specs: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """What pods of these specs request of a node together, ``pods`` included (empty: no pod)."""
    total: dict[str, int] = {"pods": len(specs)} if specs else {}
    for spec in specs:
        _add(total, pod_requests(spec))
    return total


def _term_matches(term: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    for expr in term.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def selector_matches(spec: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """NodeAffinity's filter: the nodeSelector, and one required node-affinity term if the pod has any."""
    if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return False
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}).get("nodeSelectorTerms")  # fmt: skip
    return not required or any(_term_matches(t, labels) for t in required)


@dataclass(frozen=True)
class Node:
    """One node of a pool as the scheduler sees it; ``allocatable`` None when its machine's size is not known."""

    pool: str
    machine_type: str
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    allocatable: Mapping[str, int] | None
    how: str = ""  # how the allocatable was computed, with its source
    agents: tuple[NodeAgent, ...] = ()  # the fleet's DaemonSet pods on the node, counted before any other pod

    @functools.cached_property
    def held(self) -> dict[str, int]:
        """What the node agents request of the node, ``pods`` included."""
        return held_by([agent.pod_spec() for agent in self.agents])

    def free(self, resource: str) -> int:
        """The allocatable of ``resource`` the node agents leave to other pods."""
        return (self.allocatable or {}).get(resource, 0) - self.held.get(resource, 0)

    def reasons(self, spec: Mapping[str, Any], copies: int = 1, asked: Mapping[str, int] | None = None) -> list[str]:
        """Why ``copies`` of the pod cannot all run on this node, in the scheduler's words (empty: they fit);
        ``asked``: the pod's :func:`pod_requests`, when the caller has them already."""
        out = []
        if not selector_matches(spec, self.labels):
            out.append(AFFINITY_REASON)
        out += [taint_reason(taint) for taint in self.untolerated(spec)]
        out += [insufficient_reason(r) for r in self.shortfall(spec, copies, asked)]
        return out

    def untolerated(self, spec: Mapping[str, Any]) -> list[Taint]:
        """The node's taints that keep the pod off it (TaintToleration, ``Taint.keeps_off``)."""
        return [t for t in self.taints if t.keeps_off(spec.get("tolerations") or [])]

    def shortfall(self, spec: Mapping[str, Any], copies: int = 1, asked: Mapping[str, int] | None = None) -> list[str]:
        """The resources ``copies`` of the pod ask more of than the node has (none when its size is unknown);
        ``asked``: the pod's :func:`pod_requests`, when the caller has them already."""
        if self.allocatable is None:
            return []
        if asked is None:
            asked = pod_requests(spec)
        short = [r for r, v in sorted(asked.items()) if v * copies > self.free(r) and v > 0]
        if copies > self.allocatable.get("pods", copies) - self.held.get("pods", 0):
            short.append("pods")
        return short


def _spot(pool: GpuPool) -> tuple[dict[str, str], tuple[Taint, ...]]:
    facts = pool.cloud_facts
    return (dict(facts.spot_node_labels), tuple(facts.spot_taints)) if pool.spot else ({}, ())


def _allocatable(cluster: Cluster, machine_type: str, catalogue: Catalogue) -> Allocatable | None:
    return catalogue.allocatable(cluster.cloud, machine_type, cluster.kubernetes_version)


def pool_node(cluster: Cluster, pool: GpuPool, catalogue: Catalogue | None = None) -> Node:
    """A node of ``pool``: its labels (the kubelet's, the pool's, its selector's, the cloud's spot labels), its taints
    (ours and the cloud's spot taints), its allocatable, with the accelerators it advertises (cards x pods per card),
    and the fleet's node agents on it."""
    catalogue = catalogue or load_catalogue()
    spot_labels, spot_taints = _spot(pool)
    alloc = _allocatable(cluster, pool.machine_type, catalogue)
    resources = None if alloc is None else {**alloc.as_resources(), pool.resource: pool.units_per_node}
    return Node(
        pool.name,
        pool.machine_type,
        {**KUBELET_LABELS, **pool.labels, **pool.node_selector, **spot_labels},
        (*pool.taints, *spot_taints),
        resources,
        "" if alloc is None else alloc.how,
        agents_on(cluster, pool),
    )


def system_node(cluster: Cluster, catalogue: Catalogue | None = None) -> Node:
    """A node of the cluster's system pool (on demand, untainted, labelled with the system selector, running the
    node agents every node runs)."""
    alloc = _allocatable(cluster, cluster.system_pool.machine_type, catalogue or load_catalogue())
    resources = None if alloc is None else alloc.as_resources()
    return Node(
        SYSTEM_POOL, cluster.system_pool.machine_type, {**KUBELET_LABELS, **cluster.system_selector}, (), resources,
        "" if alloc is None else alloc.how, agents_on(cluster, None),
    )  # fmt: skip


def cluster_nodes(cluster: Cluster, catalogue: Catalogue | None = None) -> list[Node]:
    """One node of every pool of ``cluster``: the system pool, the card pools and the sweep pools."""
    catalogue = catalogue or load_catalogue()
    return [system_node(cluster, catalogue), *(pool_node(cluster, p, catalogue) for p in cluster.all_pools)]


@dataclass(frozen=True)
class PodToPlace:
    """A pod the fleet runs: its spec, the pool it must land on, how many of it one node must hold at once
    (``copies``), where it comes from in the policy (``where``, a key path) and the fix if it does not fit."""

    what: str
    pool: str
    spec: Mapping[str, Any]
    copies: int = 1
    where: tuple[object, ...] = ()
    fix: str = ""


@dataclass(frozen=True)
class Misplaced:
    """A pod that fits no node of its own pool, or that another pool would take too."""

    pod: PodToPlace
    message: str
    others: tuple[str, ...] = field(default=())


def _cpu(milli: int) -> str:
    return f"{Decimal(milli) / 1000:g}"


def _gib(value: int) -> str:
    return f"{value / 2**30:.2f}Gi"


def describe(resource: str, value: int) -> str:
    """A request or an allocatable as a person reads it: cores, GiB, or the count."""
    return _cpu(value) if resource == "cpu" else _gib(value) if resource == "memory" else str(value)


def _agents_take(node: Node, resource: str) -> str:
    held = node.held.get(resource, 0)
    if not held:
        return ""
    names = ", ".join(a.name for a in node.agents)
    return f" of which the node agents ({names}) take {describe(resource, held)}"


def place(pod: PodToPlace, nodes: Sequence[Node]) -> Misplaced | None:
    """Check that ``pod`` fits a node of its own pool and that no other pool's node admits it."""
    asked = pod_requests(pod.spec)  # once per pod, not once per node
    own = [n for n in nodes if n.pool == pod.pool]
    others = tuple(n.pool for n in nodes if n.pool != pod.pool and not n.reasons(pod.spec, asked=asked))
    if not own:
        return Misplaced(pod, f"{pod.what}: the cluster has no pool {pod.pool}", others)
    node = own[0]
    reasons = node.reasons(pod.spec, pod.copies, asked)
    if reasons:
        short = node.shortfall(pod.spec, pod.copies, asked)
        if short and node.allocatable is not None:
            times = f"{pod.copies} x " if pod.copies > 1 else ""
            numbers = "; ".join(
                f"{r}: asks {times}{describe(r, asked.get(r, 1 if r == 'pods' else 0))}, "
                f"a node has {describe(r, node.allocatable.get(r, 0))}{_agents_take(node, r)}"
                for r in short
            )
            held = f" ({pod.copies} at once: one per {pod.pool} unit)" if pod.copies > 1 else ""
            message = (
                f"{pod.what} does not fit a node of pool {pod.pool} ({node.machine_type}){held}: {numbers} "
                f"(allocatable: {node.how})"
            )
        else:
            message = f"{pod.what} cannot land on pool {pod.pool}: {', '.join(reasons)}"
        return Misplaced(pod, f"{message}; {pod.fix}" if pod.fix else message, others)
    if others:
        return Misplaced(pod, f"{pod.what} would land on pool(s) {', '.join(others)} too, not only on {pod.pool}")
    return None


# --- the pods the model predicts ------------------------------------------------------------------------------------


def own_pool_affinity() -> dict[str, Any]:
    """The node affinity keeping a pod on a card's own pool, off its sweep pools (which carry the card's label too)."""
    off_sweeps = {"key": CARDS_PER_NODE_LABEL, "operator": "DoesNotExist"}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [off_sweeps]}
    ]}}}  # fmt: skip


def tolerations(pool: GpuPool) -> list[dict[str, str]]:
    """A pool pod's tolerations (Kubernetes spelling): exactly the pool's taints and the cloud's spot taints."""
    return [t.toleration() for t in pool.pod_tolerations]


def benchmark_pod(workload: Workload, pool: GpuPool, accelerators: int | None = None) -> dict[str, Any]:
    """What the scheduler sees of a benchmark (or probe, or sweep worker) pod: the log init container, the mtail
    sidecar, the workload container with its cards, the pool's selector and tolerations (the rest of the pod,
    components/kubernetes/benchmark.py ``pod_spec``, builds on the same pod_contract resources)."""
    res = workload.spec.resources
    return {
        "nodeSelector": pool.node_selector,
        "tolerations": tolerations(pool),
        "initContainers": [
            {"name": "prepare-log", "resources": pod_contract.PREPARE_LOG_RESOURCES},
            {"name": "mtail", "restartPolicy": "Always", "resources": pod_contract.MTAIL_RESOURCES},
        ],
        "containers": [
            {
                "name": "workload",
                "resources": {
                    "requests": {"cpu": res.cpu_request, "memory": res.memory_request},
                    "limits": {
                        "cpu": res.cpu_limit,
                        "memory": res.memory_limit,
                        pool.resource: str(accelerators or workload.spec.accelerators),
                    },
                },
            }
        ],
    }


def sweep_pod(point: SweepPoint) -> dict[str, Any]:
    """A sweep worker's pod as the scheduler sees it: the benchmark pod with ``per_node`` cards, kept off the sweep
    pools when it runs on the card's own pool."""
    spec = benchmark_pod(point.workload, point.pool, accelerators=point.per_node)
    if not point.pool.sweep:
        spec["affinity"] = own_pool_affinity()
    return spec


def runner_job_pod(runner: Runner) -> dict[str, Any]:
    """A CI job's pod as the GitLab runner's Kubernetes executor makes it: the ``build`` container with the runner's
    requests and cards, and the ``helper`` container, which asks nothing unless ``helper_cpu_request`` is set
    (components/kubernetes/runners.py sets none)."""
    pool = runner.pool
    cards = str(runner.accelerators)
    return {
        "nodeSelector": pool.node_selector,
        "tolerations": tolerations(pool),
        "containers": [
            {
                "name": "build",
                "resources": {
                    "requests": {"cpu": runner.cpu_request, "memory": runner.memory_request, pool.resource: cards},
                    "limits": {"cpu": runner.cpu_limit, "memory": runner.memory_limit, pool.resource: cards},
                },
            },
            {"name": "helper"},
        ],
    }


def copies_on(pool: GpuPool, spec: Mapping[str, Any]) -> int:
    """How many of the pod one node of ``pool`` must hold at once: its accelerator units over the pod's share."""
    asked = pod_requests(spec).get(pool.resource, 0)
    return max(1, pool.units_per_node // asked) if asked else 1


def _workload_fix(workload: Workload, pool: GpuPool, cluster: Cluster) -> str:
    folder = f"workloads/{workload.name}/workload.yaml"
    return (
        f"lower resources.cpu_request / memory_request in {folder} if the workload runs with less, or take "
        f"{pool.card} off its cards on {cluster.cloud}"
        + (" (or share the card between fewer pods: sharing)" if pool.sharing else "")
    )


def fleet_pods(fleet: Fleet, cluster: Cluster) -> list[PodToPlace]:
    """Every pod the model predicts on ``cluster``: benchmarks and probes, sweep workers (and the queued ones it may
    be given), CI jobs."""
    pods = []
    for bench in fleet.benchmarks(cluster):
        spec = benchmark_pod(bench.workload, bench.pool)
        pods.append(
            PodToPlace(
                f"{bench.workload.name} on {cluster.name} ({bench.pool.card})", bench.pool.name, spec,
                copies_on(bench.pool, spec), ("workloads", bench.workload.name),
                _workload_fix(bench.workload, bench.pool, cluster),
            )
        )  # fmt: skip
    for job in fleet.queued_jobs():
        pools = fleet.queued_pools(job)
        for pool in (p for p in pools if p in cluster.pools and cluster.name in job.queue.clusters):
            # as the worker runs it once Kueue admitted it there: the flavor's selector and tolerations added
            spec = {**benchmark_pod(job.workload, pool), "affinity": fleet.queued_affinity(job)}
            pods.append(
                PodToPlace(
                    f"{job.workload.name} from queue {job.queue.name} on {cluster.name} ({pool.card})", pool.name,
                    spec, copies_on(pool, spec), ("workloads", job.workload.name, "queue"),
                    _workload_fix(job.workload, pool, cluster),
                )
            )  # fmt: skip
    for bench in fleet.probes(cluster):
        spec = benchmark_pod(bench.workload, bench.pool)
        pods.append(
            PodToPlace(
                f"the probe of {cluster.name} pool {bench.pool.name}", bench.pool.name, spec, 1,
                ("clusters", cluster.cloud, cluster.name, "gpus", bench.pool.card),
                "the probe's requests (fleet/model/probes/probe/workload.yaml) must fit the smallest machine",
            )
        )  # fmt: skip
    for point in fleet.sweep_points(cluster):
        spec = sweep_pod(point)
        pods.append(
            PodToPlace(
                f"{point.workload.name} sweep point n{point.accelerators} on {cluster.name} ({point.card})",
                point.pool.name, spec, copies_on(point.pool, spec), ("workloads", point.workload.name, "scale"),
                f"lower resources.cpu_request / memory_request in workloads/{point.workload.name}/workload.yaml",
            )
        )  # fmt: skip
    for point, pool in fleet.queued_points_on(cluster):
        # as the worker runs it once Kueue admitted it on the pool's flavor: its selector and tolerations added
        spec = {
            **benchmark_pod(point.workload, pool, accelerators=point.per_node),
            "affinity": fleet.queued_point_affinity(point),
        }
        pods.append(
            PodToPlace(
                f"{point.workload.name} sweep point n{point.accelerators} from queue {point.queue.name} on "
                f"{cluster.name} ({point.card})", pool.name, spec, copies_on(pool, spec),
                ("workloads", point.workload.name, "scale"),
                f"lower resources.cpu_request / memory_request in workloads/{point.workload.name}/workload.yaml",
            )
        )  # fmt: skip
    for runner in fleet.runners_of(cluster):
        spec = runner_job_pod(runner)
        pods.append(
            PodToPlace(
                f"a CI job of {runner.name} on {cluster.name}", runner.pool.name, spec, copies_on(runner.pool, spec),
                ("runners", "clusters", cluster.name, runner.pool.card),
                "lower cpu_request / memory_request of the runner in the policy file",
            )
        )  # fmt: skip
    return pods


def misplaced(pods: Iterable[PodToPlace], nodes: Sequence[Node]) -> list[Misplaced]:
    """The pods that do not land on their own pool alone."""
    return [m for m in (place(p, nodes) for p in pods) if m is not None]


def placement_problems(fleet: Fleet, doc: YamlDocument) -> list[Problem]:
    """Every predicted pod of every cluster that fits no node of its pool, or lands elsewhere, as a located problem
    (``validate`` and ``plan`` refuse the policy with it)."""
    catalogue = load_catalogue()
    problems = []
    for cluster in fleet.clusters.values():
        nodes = cluster_nodes(cluster, catalogue)
        for found in misplaced(fleet_pods(fleet, cluster), nodes):
            problems.append(doc.problem(found.pod.where, found.message))
    return problems
