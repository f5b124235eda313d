"""CrossGuard policies of the gpu-fleet: what every stack must look like, checked against policy/fleet.yaml.

The same policies run under ``pulumi preview --policy-pack policy`` and, offline, under ``python -m fleet plan``
(fleet/tools/analyzer.py speaks the analyzer protocol to this pack). Each policy learns its stack from the resource
URN (``urn:pulumi:<stack>::<project>::...``) and reads the fleet from the policy file named by the
``GPU_FLEET_POLICY`` environment variable (default ``policy/fleet.yaml``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)

from fleet.model import pod_contract
from fleet.model.pool_view import POOL_TYPES, PoolView
from fleet.model.spec import POLICY_FILE, Cluster, Fleet, GpuPool, load_fleet_cached
from fleet.model.workloads import WORKLOADS_DIR

POLICY_ENV = "GPU_FLEET_POLICY"
WORKLOADS_ENV = "GPU_FLEET_WORKLOADS"
MAGNUM_POOL = "openstack:containerinfra/nodeGroup:NodeGroup"
BENCHMARK_TYPES = ("kubernetes:batch/v1:Job", "kubernetes:batch/v1:CronJob")
CLUSTER_TYPES = (
    "gcp:container/cluster:Cluster",
    "aws:eks/cluster:Cluster",
    "azure-native:containerservice:ManagedCluster",
    "openstack:containerinfra/cluster:Cluster",
)
# The pod contract the components build to (fleet/model/pod_contract.py, which both import).
PART_OF = pod_contract.BENCHMARK_PART_OF
METRIC_LABELS = pod_contract.METRIC_LABELS
MANDATORY = EnforcementLevel.MANDATORY
ADVISORY = EnforcementLevel.ADVISORY
# Every policy of the pack, registered by the decorators below beside its check (name, description, level).
POLICIES: list[ResourceValidationPolicy | StackValidationPolicy] = []


def _registering(kind: type, name: str, description: str, level: EnforcementLevel) -> Callable[..., Any]:
    """A decorator that registers its check in POLICIES as a ``kind`` policy."""

    def register(validate: Callable[..., None]) -> Callable[..., None]:
        POLICIES.append(kind(name=name, description=description, validate=validate, enforcement_level=level))
        return validate

    return register


def resource_policy(name: str, description: str, level: EnforcementLevel = MANDATORY) -> Callable[..., Any]:
    """Register the decorated check as the resource policy ``name``."""
    return _registering(ResourceValidationPolicy, name, description, level)


def stack_policy(name: str, description: str, level: EnforcementLevel = MANDATORY) -> Callable[..., Any]:
    """Register the decorated check as the stack policy ``name`` (it sees every resource of the stack)."""
    return _registering(StackValidationPolicy, name, description, level)


# --- shared helpers -------------------------------------------------------------------------------------------


def fleet() -> Fleet:
    """The fleet of the policy file (``GPU_FLEET_POLICY`` or policy/fleet.yaml) with its workloads
    (``GPU_FLEET_WORKLOADS`` or workloads/), cached per file version."""
    workloads = os.environ.get(WORKLOADS_ENV)
    return load_fleet_cached(
        Path(os.environ.get(POLICY_ENV) or POLICY_FILE), Path(workloads) if workloads else WORKLOADS_DIR
    )


def stack_of(urn: str) -> str:
    """The stack named in a URN ``urn:pulumi:<stack>::<project>::<type>::<name>``."""
    return urn.split("::", 1)[0].removeprefix("urn:pulumi:")


def cluster_of(urn: str) -> Cluster | None:
    """The cluster of the stack in ``urn``; None when the policy has no such cluster."""
    return fleet().clusters.get(stack_of(urn))


def _plain(value: Any) -> Any:
    """Property proxies as plain dicts/lists, whole numbers as int (numbers cross the wire as doubles)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if hasattr(value, "items"):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)) or (hasattr(value, "__iter__") and not isinstance(value, (str, bytes))):
        return [_plain(v) for v in value]
    return value


# The pod-bearing kinds and where their pod template is (the CronJob's inside its job template).
POD_BEARING = {
    "kubernetes:core/v1:Pod": (),
    "kubernetes:batch/v1:Job": ("spec", "template"),
    "kubernetes:batch/v1:CronJob": ("spec", "jobTemplate", "spec", "template"),
    "kubernetes:apps/v1:Deployment": ("spec", "template"),
    "kubernetes:apps/v1:StatefulSet": ("spec", "template"),
    "kubernetes:apps/v1:DaemonSet": ("spec", "template"),
    "kubernetes:apps/v1:ReplicaSet": ("spec", "template"),
    "kubernetes:core/v1:ReplicationController": ("spec", "template"),
}


def pod_template(props: dict[str, Any], resource_type: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(owner spec, pod template) of a pod-bearing resource: the spec that holds the template (a Job's, a CronJob's
    job template's, a Deployment's, ...; {} for a Pod) and the template itself (``metadata``, ``spec``; a Pod is its
    own template). ({}, {}) for a resource that bears no pods."""
    path = POD_BEARING.get(resource_type)
    if path is None:
        return {}, {}
    owner: Any = {}
    node: Any = props
    for key in path:
        owner, node = node, (node or {}).get(key) or {}
    return (owner if path else {}), node


def _no_cluster(stack: str) -> str:
    known = ", ".join(fleet().clusters)
    return (
        f"stack {stack!r} is not a cluster of {fleet().file} (known: {known}); "
        "add the cluster to the policy file or select one of its stacks"
    )


# --- (a) GPU node pools ---------------------------------------------------------------------------------------


def _pool(args: ResourceValidationArgs) -> tuple[PoolView, str] | None:
    """The pool view and card of a GPU pool (card from its labels/role, else from its ``-gpu-<card>`` name)."""
    if args.resource_type not in POOL_TYPES:
        return None
    reg = SimpleNamespace(type=args.resource_type, name=args.name, inputs=_plain(args.props))
    view = POOL_TYPES[args.resource_type](reg)  # type: ignore[arg-type]
    card = view.card or pod_contract.card_of_pool(args.name) or ""
    return (view, card) if card else None


def _policy_pool(args: ResourceValidationArgs, report: ReportViolation) -> tuple[PoolView, GpuPool] | None:
    """The pool and what the policy file says about it; None (nothing to check) for system pools or unknown cards."""
    found = _pool(args)
    if not found:
        return None
    view, card = found
    cluster = cluster_of(args.urn)
    if cluster is None:
        return None  # reported by gpu-pool-allowed-card
    try:
        return view, cluster.pool(card)
    except KeyError:
        return None  # reported by gpu-pool-allowed-card


@resource_policy(
    "gpu-pool-allowed-card",
    "GPU node pools exist only for cards the policy file gives the stack's cluster.",
)
def _validate_allowed_card(args: ResourceValidationArgs, report: ReportViolation) -> None:
    found = _pool(args)
    if not found:
        return
    _, card = found
    stack = stack_of(args.urn)
    cluster = cluster_of(args.urn)
    if cluster is None:
        report(_no_cluster(stack))
        return
    cards = [p.card for p in cluster.pools]
    if card not in cards:
        report(
            f"pool {args.name!r} is for card {card!r}, which {fleet().file} does not give cluster {stack!r} "
            f"(its cards: {', '.join(cards) or 'none'}); add {card} to the cluster's gpus in the policy file "
            "or remove the pool"
        )


@resource_policy(
    "gpu-pool-card-label",
    "GPU node pools carry the gpu=<card> node label (and the card's other node labels) pods select them by.",
)
def _validate_card_label(args: ResourceValidationArgs, report: ReportViolation) -> None:
    found = _policy_pool(args, report)
    if not found or args.resource_type == MAGNUM_POOL:  # Magnum node groups cannot set Kubernetes labels
        return
    view, pool = found
    missing = {k: v for k, v in pool.labels.items() if view.labels.get(k) != v}
    if missing:
        want = ", ".join(f"{k}={v}" for k, v in missing.items())
        report(
            f"pool {args.name!r} lacks the node label(s) {want}; benchmark pods select their card by these labels. "
            "Create the pool with GpuPool.labels (components/*.py) instead of hand-written labels"
        )


@resource_policy(
    "gpu-pool-accelerator-taint",
    "GPU node pools carry the accelerator taint, so only pods that ask for the card land on them.",
)
def _validate_taint(args: ResourceValidationArgs, report: ReportViolation) -> None:
    found = _policy_pool(args, report)
    if not found or args.resource_type == MAGNUM_POOL:  # Magnum node groups cannot declare taints
        return
    view, pool = found
    missing = [t.as_string() for t in pool.taints if t.as_string() not in view.taints]
    if missing:
        report(
            f"pool {args.name!r} lacks the accelerator taint {', '.join(missing)}, so ordinary pods could land on "
            "(and keep alive) expensive GPU nodes; declare GpuPool.taints on the pool (components/clusters/taints.py "
            "spells them per cloud)"
        )


@resource_policy(
    "gpu-pool-size",
    "GPU node pools have the policy file's minimum (0, so idle pools cost nothing; Magnum 1 unless "
    "opted into 0) and maximum size.",
)
def _validate_size(args: ResourceValidationArgs, report: ReportViolation) -> None:
    found = _policy_pool(args, report)
    if not found:
        return
    view, pool = found
    if view.min_nodes != pool.min_nodes:
        why = (
            "Magnum cannot scale a GPU node group up from zero, so it keeps 1 node unless the policy file sets "
            "min_nodes: 0 explicitly"
            if args.resource_type == MAGNUM_POOL
            else "idle GPU pools must scale to zero so they cost nothing"
        )
        report(
            f"pool {args.name!r} has minimum size {view.min_nodes}, the policy file says {pool.min_nodes} ({why}); "
            "take the size from GpuPool.min_nodes, or change min_nodes in the policy file"
        )
    if view.max_nodes != pool.max_nodes:
        report(
            f"pool {args.name!r} has maximum size {view.max_nodes}, the policy file says {pool.max_nodes}; "
            "take the size from GpuPool.max_nodes, or change max_nodes in the policy file"
        )


@resource_policy(
    "gpu-pool-spot",
    "GPU node pools use spot capacity unless the policy file says otherwise.",
)
def _validate_spot(args: ResourceValidationArgs, report: ReportViolation) -> None:
    found = _policy_pool(args, report)
    if not found or args.resource_type == MAGNUM_POOL:  # no spot capacity on Magnum
        return
    view, pool = found
    if view.spot != pool.spot:
        want = "spot" if pool.spot else "on-demand"
        have = "spot" if view.spot else "on-demand"
        report(
            f"pool {args.name!r} uses {have} capacity but the policy file asks for {want}; take it from GpuPool.spot, "
            "or set spot for this card in the policy file"
        )


# --- (b) benchmark pods ---------------------------------------------------------------------------------------


def _accelerator_resources() -> set[str]:
    names = {"nvidia.com/gpu", "amd.com/gpu"}
    for cluster in fleet().clusters.values():
        names.update(p.resource for p in cluster.pools)
    return names


def _benchmark(args: ResourceValidationArgs) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]] | None:
    """(job spec, pod template, pod spec) of a Job/CronJob whose pods request an accelerator; else None."""
    if args.resource_type not in BENCHMARK_TYPES:
        return None
    job_spec, template = pod_template(_plain(args.props), args.resource_type)
    pod = template.get("spec") or {}
    wanted = _accelerator_resources()
    for c in all_containers(pod):
        res = c.get("resources") or {}
        if any(k in wanted for part in ("limits", "requests") for k in (res.get(part) or {})):
            return job_spec, template, pod
    return None


def _expected_pool(args: ResourceValidationArgs, template: dict[str, Any]) -> GpuPool | None:
    cluster = cluster_of(args.urn)
    card = ((template.get("metadata") or {}).get("labels") or {}).get("gpu", "")
    if cluster is None:
        return None
    try:
        return cluster.pool(card)
    except KeyError:
        return None


@resource_policy(
    "benchmark-allowed-card",
    "Benchmark pods run only on cards the policy file gives the cluster and allows for the workload.",
)
def _validate_bench_card(args: ResourceValidationArgs, report: ReportViolation) -> None:
    found = _benchmark(args)
    if not found:
        return
    _, template, _ = found
    labels = (template.get("metadata") or {}).get("labels") or {}
    stack = stack_of(args.urn)
    cluster = cluster_of(args.urn)
    if cluster is None:
        report(_no_cluster(stack))
        return
    card, workload = labels.get("gpu", ""), labels.get("workload", "")
    cards = [p.card for p in cluster.pools]
    if card not in cards:
        report(
            f"benchmark {args.name!r} runs on card {card!r}, which {fleet().file} does not give cluster {stack!r} "
            f"(its cards: {', '.join(cards) or 'none'}); its pods would stay Pending. Add the card to the cluster "
            "or drop the benchmark"
        )
    elif workload in fleet().placements and card not in fleet().placements[workload]:
        report(
            f"benchmark {args.name!r} runs workload {workload!r} on card {card!r}, which the policy file's "
            f"workloads section does not allow for it; allow the card for the workload or drop the benchmark"
        )


def _tolerates(tolerations: list[dict[str, Any]], key: str, value: str, effect: str) -> bool:
    for t in tolerations:
        if t.get("effect") not in (None, "", effect):
            continue
        if t.get("operator") == "Exists" and t.get("key") in (None, "", key):
            return True
        if t.get("key") == key and t.get("value", "") == value and t.get("operator", "Equal") == "Equal":
            return True
    return False


@resource_policy(
    "benchmark-placement",
    "Benchmark pods that request an accelerator select their card's pool and tolerate its taints.",
)
def _validate_bench_placement(args: ResourceValidationArgs, report: ReportViolation) -> None:
    found = _benchmark(args)
    if not found:
        return
    _, template, pod = found
    selector = pod.get("nodeSelector") or {}
    pool = _expected_pool(args, template)
    if not selector:
        report(
            f"benchmark {args.name!r} requests an accelerator but has no nodeSelector, so the scheduler may pick "
            "any GPU pool (or none); set nodeSelector to GpuPool.node_selector"
        )
    elif pool is not None and any(selector.get(k) != v for k, v in pool.node_selector.items()):
        want = ", ".join(f"{k}={v}" for k, v in pool.node_selector.items())
        report(f"benchmark {args.name!r} does not select the {pool.card} pool ({want}); use GpuPool.node_selector")
    if pool is None:
        return
    tolerations = list(pod.get("tolerations") or [])
    missing = [t.as_string() for t in pool.pod_tolerations if not _tolerates(tolerations, t.key, t.value, t.effect)]
    if missing:
        report(
            f"benchmark {args.name!r} does not tolerate {', '.join(missing)} of the {pool.card} pool, so it can "
            "never schedule there; add tolerations from GpuPool.pod_tolerations (components/taints.toleration)"
        )


@resource_policy(
    "benchmark-limits",
    "Benchmark containers have cpu and memory limits and the Job has an activeDeadlineSeconds.",
)
def _validate_bench_limits(args: ResourceValidationArgs, report: ReportViolation) -> None:
    found = _benchmark(args)
    if not found:
        return
    job_spec, _, pod = found
    for c in all_containers(pod):
        limits = (c.get("resources") or {}).get("limits") or {}
        missing = [k for k in ("cpu", "memory") if not limits.get(k)]
        if missing:
            report(
                f"container {c.get('name')!r} of benchmark {args.name!r} has no {' or '.join(missing)} limit; "
                "set resources.limits so a runaway benchmark cannot starve the node (workload spec resources)"
            )
    if not job_spec.get("activeDeadlineSeconds"):
        report(
            f"benchmark {args.name!r} has no activeDeadlineSeconds, so a hung run keeps a GPU node alive forever; "
            "set it (components/kubernetes/benchmark.py derives it from the workload timeout)"
        )


@resource_policy(
    "benchmark-mtail-sidecar",
    "Benchmark pods run the mtail native sidecar that exports their results to Prometheus.",
)
def _validate_bench_sidecar(args: ResourceValidationArgs, report: ReportViolation) -> None:
    found = _benchmark(args)
    if not found:
        return
    _, _, pod = found
    mtail = [c for c in pod.get("initContainers") or [] if c.get("name") == "mtail"]
    if not mtail or mtail[0].get("restartPolicy") != "Always":
        report(
            f"benchmark {args.name!r} lacks the mtail native sidecar (init container 'mtail' with "
            "restartPolicy: Always), so its results never reach Prometheus; build the pod with "
            "components/benchmark.pod_spec"
        )
        return
    ports = [p.get("name") for p in mtail[0].get("ports") or []]
    if pod_contract.METRICS_PORT_NAME not in ports:
        report(
            f"the mtail sidecar of benchmark {args.name!r} has no port named {pod_contract.METRICS_PORT_NAME!r}, "
            "which the PodMonitor scrapes; add it"
        )


@resource_policy(
    "benchmark-metric-labels",
    "Benchmark pods carry the labels the PodMonitor selects and turns into metric labels.",
)
def _validate_bench_labels(args: ResourceValidationArgs, report: ReportViolation) -> None:
    found = _benchmark(args)
    if not found:
        return
    _, template, _ = found
    labels = (template.get("metadata") or {}).get("labels") or {}
    missing = [k for k in (*METRIC_LABELS, "app.kubernetes.io/part-of") if not labels.get(k)]
    if missing:
        report(
            f"the pod template of benchmark {args.name!r} lacks the label(s) {', '.join(missing)}; the PodMonitor "
            "selects pods by app.kubernetes.io/part-of and turns workload/gpu/cluster/cloud into metric labels. "
            "Use components/benchmark.pod_labels"
        )
        return
    cluster = cluster_of(args.urn)
    if labels.get("app.kubernetes.io/part-of") != PART_OF:
        report(f"benchmark {args.name!r} has app.kubernetes.io/part-of={labels['app.kubernetes.io/part-of']!r}; "
               f"the PodMonitor selects {PART_OF!r}")  # fmt: skip
    if cluster is not None and (labels["cluster"], labels["cloud"]) != (cluster.name, cluster.cloud):
        report(
            f"benchmark {args.name!r} is labelled cluster={labels['cluster']}, cloud={labels['cloud']} but runs "
            f"on {cluster.name} ({cluster.cloud}); its metrics would be attributed to the wrong cluster"
        )


def _image_problem(ref: str) -> str | None:
    if not ref:
        return "has no image"
    if "@" in ref:
        return None  # pinned by digest
    last = ref.rsplit("/", 1)[-1]
    if ":" not in last:
        return f"uses untagged image {ref!r} (which means :latest)"
    if last.rsplit(":", 1)[1] == "latest":
        return f"uses {ref!r}"
    return None


@resource_policy(
    "benchmark-pinned-images",
    "Benchmark containers use pinned images (a version tag or digest, never :latest or untagged).",
)
def _validate_bench_images(args: ResourceValidationArgs, report: ReportViolation) -> None:
    found = _benchmark(args)
    if not found:
        return
    _, _, pod = found
    for c in all_containers(pod):
        problem = _image_problem(c.get("image") or "")
        if problem:
            report(
                f"container {c.get('name')!r} of benchmark {args.name!r} {problem}; results must be reproducible, "
                "so pin a version tag or digest (components/kubernetes/images.yaml, or the workload's image)"
            )


@resource_policy(
    "job-not-deleted-by-ttl",
    "Jobs that Pulumi manages set no ttlSecondsAfterFinished, so a refresh never recreates and reruns them.",
)
def _validate_job_kept(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if not args.resource_type.endswith("batch/v1:Job"):
        return
    spec = _plain(args.props).get("spec") or {}
    if spec.get("ttlSecondsAfterFinished") is not None:
        report(
            f"Job {args.name!r} sets ttlSecondsAfterFinished: Kubernetes deletes it after it finishes, and the next "
            "`pulumi up --refresh` creates it again and reruns it; remove the TTL (a CronJob's jobTemplate may keep "
            "one: those Jobs are not Pulumi's)"
        )


# --- (d) every pod: Pod Security `restricted`, no API token, images by digest ---------------------------------------

# Pod Security Standards, `restricted` (kubernetes.io/docs/concepts/security/pod-security-standards): the volume
# types it allows, the one capability a container may add, the seccomp profiles it accepts.
RESTRICTED_VOLUMES = {
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
}
ALLOWED_CAPABILITY = "NET_BIND_SERVICE"
SECCOMP_OK = {"RuntimeDefault", "Localhost"}
ROOT_NAMESPACE = pod_contract.ROOT_BENCHMARK_NAMESPACE
BENCHMARK_NAMESPACE = pod_contract.BENCHMARK_NAMESPACE
LEVEL_LABEL = f"{pod_contract.POD_SECURITY_LABEL_PREFIX}/enforce"
EXCEPTION_ANNOTATION = pod_contract.POD_SECURITY_EXCEPTION
# name[:tag]@sha256:<64 hex>, as the images workflow records it (the readable tag kept beside the digest).
DIGEST_REF = re.compile(r"[^@\s]+@sha256:[0-9a-f]{64}")
HELM_RELEASE = "kubernetes:helm.sh/v3:Release"


def pod_of(args: ResourceValidationArgs) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(pod metadata, pod spec) of any pod-bearing resource; None for other resources."""
    if args.resource_type not in POD_BEARING:
        return None
    _, template = pod_template(_plain(args.props), args.resource_type)
    return template.get("metadata") or {}, template.get("spec") or {}


def all_containers(pod: dict[str, Any]) -> list[dict[str, Any]]:
    """Init, regular and ephemeral containers of a pod spec."""
    return [*(pod.get("initContainers") or []), *(pod.get("containers") or []), *(pod.get("ephemeralContainers") or [])]


def _root_allowed(args: ResourceValidationArgs, labels: dict[str, Any]) -> bool:
    """Whether this is a benchmark of a workload that declares it needs root (``needs_root``)."""
    if labels.get("app.kubernetes.io/part-of") != PART_OF:
        return False
    workload = fleet().workloads.get(str(labels.get("workload", "")))
    return bool(workload and workload.spec.needs_root)


def subject(args: ResourceValidationArgs) -> str:
    """How a message names the resource: its kind and name (``Job 'fix-eks-debug'``)."""
    return f"{args.resource_type.rsplit(':', 1)[-1]} {args.name!r}"


def _container_problems(c: dict[str, Any], pod_ctx: dict[str, Any], may_run_as_root: bool) -> list[str]:
    """What keeps one container from the `restricted` level, each as `field: what to set`."""
    ctx = c.get("securityContext") or {}
    problems = []
    if ctx.get("privileged"):
        problems.append("securityContext.privileged is true: remove it (or set it false)")
    if ctx.get("allowPrivilegeEscalation") is not False:
        problems.append(
            "securityContext.allowPrivilegeEscalation must be false: set it explicitly (unset counts as true)"
        )
    caps = ctx.get("capabilities") or {}
    if "ALL" not in (caps.get("drop") or []):
        problems.append("securityContext.capabilities.drop must contain ALL: set capabilities.drop: [ALL]")
    added = sorted(set(caps.get("add") or []) - {ALLOWED_CAPABILITY})
    if added:
        problems.append(
            f"securityContext.capabilities.add {added}: only {ALLOWED_CAPABILITY} may be added; remove the others"
        )
    own_seccomp = (ctx.get("seccompProfile") or {}).get("type")
    if own_seccomp and own_seccomp not in SECCOMP_OK:
        problems.append(f"securityContext.seccompProfile.type is {own_seccomp}: set RuntimeDefault (or Localhost)")
    elif not own_seccomp and not (pod_ctx.get("seccompProfile") or {}).get("type"):
        problems.append(
            "seccompProfile.type is unset: set seccompProfile.type: RuntimeDefault in the pod's or the container's "
            "securityContext"
        )
    if not may_run_as_root:
        if ctx.get("runAsNonRoot") is False:
            problems.append("securityContext.runAsNonRoot is false: runAsNonRoot must be true, set it true")
        elif ctx.get("runAsNonRoot") is None and pod_ctx.get("runAsNonRoot") is None:
            problems.append(
                "runAsNonRoot must be true: set runAsNonRoot: true in the pod's or the container's securityContext"
            )
        if ctx.get("runAsUser") == 0:
            problems.append("securityContext.runAsUser is 0 (root): set a non-root uid (the workload's run_as_user)")
    for port in c.get("ports") or []:
        if port.get("hostPort"):
            problems.append(
                f"ports: port {port.get('containerPort')} has hostPort {port['hostPort']}: remove hostPort "
                "(reach the pod through a Service)"
            )
    return problems


def _pod_problems(pod: dict[str, Any], may_run_as_root: bool) -> list[str]:
    """What keeps the pod spec itself (not its containers) from the `restricted` level."""
    ctx = pod.get("securityContext") or {}
    problems = []
    seccomp = (ctx.get("seccompProfile") or {}).get("type")
    if seccomp and seccomp not in SECCOMP_OK:
        problems.append(f"pod securityContext.seccompProfile is {seccomp}: set type RuntimeDefault (or Localhost)")
    if not may_run_as_root:
        if ctx.get("runAsNonRoot") is False:
            problems.append("pod securityContext.runAsNonRoot is false: runAsNonRoot must be true, set it true")
        if ctx.get("runAsUser") == 0:
            problems.append(
                "pod securityContext.runAsUser is 0 (root): set a non-root uid (the workload's run_as_user)"
            )
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(key):
            problems.append(f"{key} is true: remove it (or set it false), the pod must not share the node's namespaces")
    for volume in pod.get("volumes") or []:
        kinds = sorted(set(volume) - {"name"})
        if kinds and not set(kinds) <= RESTRICTED_VOLUMES:
            problems.append(
                f"volume {volume.get('name')!r} is of type {', '.join(kinds)}: use one of "
                f"{', '.join(sorted(RESTRICTED_VOLUMES))} (hostPath reaches the node's files)"
            )
    return problems


@resource_policy(
    "pod-security-restricted",
    "Every pod (Pod, Job, CronJob, Deployment, StatefulSet, DaemonSet, ReplicaSet, ReplicationController), GPU or "
    "not, meets Pod Security `restricted`: not privileged, allowPrivilegeEscalation false, capabilities.drop ALL "
    "(only NET_BIND_SERVICE added), RuntimeDefault or Localhost seccomp, non-root (root only for a benchmark whose "
    "workload declares needs_root, and then in benchmarks-root), no host namespaces, host ports or hostPath.",
)
def _validate_pod_security(args: ResourceValidationArgs, report: ReportViolation) -> None:
    found = pod_of(args)
    if not found:
        return
    metadata, pod = found
    labels = metadata.get("labels") or {}
    namespace = ((_plain(args.props).get("metadata") or {}).get("namespace")) or "default"
    may_run_as_root = _root_allowed(args, labels)
    if may_run_as_root and namespace != ROOT_NAMESPACE:
        report(
            f"{subject(args)}: runs the root-needing workload {labels.get('workload')!r} (needs_root) in namespace "
            f"{namespace!r}: it belongs in {ROOT_NAMESPACE!r}, the one namespace that admits root (baseline); set "
            f"metadata.namespace: {ROOT_NAMESPACE}"
        )
    for problem in _pod_problems(pod, may_run_as_root):
        report(f"{subject(args)}: {problem}")
    for c in all_containers(pod):
        for problem in _container_problems(c, pod.get("securityContext") or {}, may_run_as_root):
            report(f"{subject(args)}: container {c.get('name')!r}: {problem}")


@resource_policy(
    "pod-service-account-token",
    "Every pod sets automountServiceAccountToken: false, unless it runs under a service account of its own "
    "(serviceAccountName other than default), which it has because it needs the Kubernetes API.",
)
def _validate_service_account_token(args: ResourceValidationArgs, report: ReportViolation) -> None:
    found = pod_of(args)
    if not found:
        return
    _, pod = found
    account = pod.get("serviceAccountName") or "default"
    if account == "default" and pod.get("automountServiceAccountToken") is not False:
        report(
            f"{subject(args)}: the pod mounts the default service account's API token: set "
            "automountServiceAccountToken: false (a pod that needs the API gets a service account of its own)"
        )


def release_images(values: Any, path: str = "") -> list[tuple[str, dict[str, Any]]]:
    """The image blocks (mappings with a ``repository``) in a Helm release's values, with their dotted paths."""
    found: list[tuple[str, dict[str, Any]]] = []
    if isinstance(values, dict):
        if isinstance(values.get("repository"), str):
            found.append((path, values))
        for key, value in values.items():
            found += release_images(value, f"{path}.{key}" if path else str(key))
    return found


def _block_pinned(block: dict[str, Any]) -> bool:
    digest = str(block.get("sha") or block.get("digest") or "")
    return bool(digest) or "@sha256:" in str(block.get("tag") or "")


@resource_policy(
    "images-by-digest",
    "Every container image, and every image a Helm release's values set, is pinned by digest "
    "(advisory in previews; deploys make it mandatory).",
    ADVISORY,
)
def _validate_digests(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type == HELM_RELEASE:
        values = _plain(args.props).get("values") or {}
        for path, block in release_images(values):
            if not _block_pinned(block):
                report(
                    f"{subject(args)}: chart image {path} ({block.get('repository')}:{block.get('tag')}) is not pinned "
                    "by digest: record it (python -m fleet images --push ... --record; "
                    "components/kubernetes/images.yaml)"
                )
        return
    found = pod_of(args)
    if not found:
        return
    _, pod = found
    for c in all_containers(pod):
        ref = c.get("image") or ""
        if not DIGEST_REF.fullmatch(ref):
            report(
                f"{subject(args)}: container {c.get('name')!r} runs {ref!r}, not pinned by digest "
                "(name[:tag]@sha256:<64 hex>): record the digests (python -m fleet images --push ... --record "
                "writes them into components/kubernetes/images.yaml and the workload's workload.yaml) and commit them"
            )


@resource_policy(
    "namespace-pod-security",
    "Namespaces carry a Pod Security level: restricted for benchmarks, privileged only with a stated reason.",
)
def _validate_namespace_level(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type != "kubernetes:core/v1:Namespace":
        return
    metadata = _plain(args.props).get("metadata") or {}
    name = metadata.get("name") or args.name
    level = (metadata.get("labels") or {}).get(LEVEL_LABEL)
    if level not in ("restricted", "baseline", "privileged"):
        report(f"namespace {name!r} has no Pod Security level: label it {LEVEL_LABEL}: restricted (or baseline)")
        return
    wanted = {BENCHMARK_NAMESPACE: ("restricted",), ROOT_NAMESPACE: ("restricted", "baseline")}.get(name)
    if wanted and level not in wanted:
        report(f"namespace {name!r} enforces {level!r}: it must enforce {' or '.join(wanted)}")
    reason = ((metadata.get("annotations") or {}).get(EXCEPTION_ANNOTATION) or "").strip()
    if level == "privileged" and not reason:
        report(
            f"namespace {name!r} enforces 'privileged' without saying why: annotate it {EXCEPTION_ANNOTATION} with "
            "the pods that need it, or enforce restricted"
        )


def _is_default_deny_ingress(props: dict[str, Any]) -> bool:
    spec = props.get("spec") or {}
    selector = spec.get("podSelector") or {}
    return (
        not selector.get("matchLabels")
        and not selector.get("matchExpressions")
        and "Ingress" in (spec.get("policyTypes") or [])
        and not spec.get("ingress")
    )


@stack_policy(
    "namespace-default-deny-ingress",
    "Every namespace the stack creates denies ingress by default (a NetworkPolicy with an empty pod "
    "selector and no ingress rule).",
)
def _validate_default_deny(args: StackValidationArgs, report: ReportViolation) -> None:
    namespaces: set[str] = set()
    denied: set[str] = set()
    for r in args.resources:
        props = _plain(r.props)
        metadata = props.get("metadata") or {}
        if r.resource_type == "kubernetes:core/v1:Namespace":
            namespaces.add(metadata.get("name") or r.name)
        elif r.resource_type == "kubernetes:networking.k8s.io/v1:NetworkPolicy" and _is_default_deny_ingress(props):
            denied.add(metadata.get("namespace") or "")
    for ns in sorted(namespaces - denied):
        report(
            f"namespace {ns!r} has no default-deny ingress NetworkPolicy: add one with podSelector {{}} and "
            "policyTypes [Ingress] (components/kubernetes/network_policy.py default_deny_ingress), then allow what is "
            "needed"
        )


# --- (c) the stack's benchmarks are exactly the policy's -------------------------------------------------------


@stack_policy(
    "benchmark-set-matches-policy",
    "The stack's benchmark Jobs/CronJobs are exactly the policy file's (workload x card) placements for the cluster.",
)
def _validate_benchmark_set(args: StackValidationArgs, report: ReportViolation) -> None:
    resources = list(args.resources)
    if not resources:
        return
    stack = stack_of(resources[0].urn)
    cluster = cluster_of(resources[0].urn)
    if cluster is None:
        report(_no_cluster(stack))
        return
    expected = {(b.workload.name, b.pool.card): b for b in fleet().benchmarks(cluster)}
    found: dict[tuple[str, str], Any] = {}
    for r in resources:
        if r.resource_type not in BENCHMARK_TYPES:
            continue
        _, template = pod_template(_plain(r.props), r.resource_type)
        labels = (template.get("metadata") or {}).get("labels") or {}
        if labels.get("app.kubernetes.io/part-of") != PART_OF and "workload" not in labels:
            continue
        key = (labels.get("workload", ""), labels.get("gpu", ""))
        if key in found:
            report(f"benchmark {key[0]} on {key[1]} is defined twice ({found[key].name}, {r.name}); keep one", r.urn)
        found[key] = r
    for key in sorted(set(expected) - set(found)):
        report(
            f"the policy file places workload {key[0]} on card {key[1]} of {stack}, but the stack has no "
            "benchmark Job/CronJob for it; create it with BenchmarkJobs(fleet.benchmarks(cluster))"
        )
    for key in sorted(set(found) - set(expected)):
        report(
            f"benchmark {found[key].name} runs workload {key[0]} on card {key[1]}, which the policy file does not "
            f"place on {stack}; remove it or add the placement to the policy file",
            found[key].urn,
        )
    for key in sorted(set(found) & set(expected)):
        kind = "CronJob" if expected[key].schedule else "Job"
        if not found[key].resource_type.endswith(":" + kind):
            report(
                f"benchmark {found[key].name} should be a {kind} (the policy file "
                f"{'gives' if expected[key].schedule else 'gives no'} schedule for {key[0]})",
                found[key].urn,
            )


# --- (d) clusters are protected -------------------------------------------------------------------------------


@resource_policy(
    "cluster-protected",
    "Kubernetes clusters are protected against deletion.",
)
def _validate_protected(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type in CLUSTER_TYPES and not args.opts.protect:
        report(
            f"cluster {args.name!r} is not protected, so a refactoring or `pulumi destroy` could delete it with "
            "every node pool and benchmark history; register it with ResourceOptions(protect=True)"
        )
