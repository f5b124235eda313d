"""Benchmark pods (Jobs and CronJobs that request an accelerator): on an allowed card, on its pool, limited, with the
mtail sidecar and the labels the PodMonitor reads, on pinned images; and Pulumi's Jobs are never deleted by a TTL."""

from __future__ import annotations

from typing import Any

from pulumi_policy import ReportViolation, ResourceValidationArgs

from fleet.model.core import pod_contract
from fleet.model.core.jobs import QueuedJob, QueuedPoint
from fleet.model.core.pools import CARDS_PER_NODE_LABEL, GpuPool
from fleet.model.queues.queued_sweeps import POINT_LABEL, QUEUE_LABEL

from .registry import resource_policy
from .resources import TRAINING_RUNTIME, all_containers, cluster_of, fleet, no_cluster, plain, pod_template, stack_of

JOB_TYPES = ("kubernetes:batch/v1:Job", "kubernetes:batch/v1:CronJob")
# a sweep job's workers are benchmark pods too (their TrainingRuntime holds the pod template)
BENCHMARK_TYPES = (*JOB_TYPES, TRAINING_RUNTIME)
# The pod contract the components build to (fleet/model/core/pod_contract.py, which both import).
QUEUED_METRIC_LABELS = ("workload", "gpu")


def _accelerator_resources() -> set[str]:
    names = {"nvidia.com/gpu", "amd.com/gpu"}
    for cluster in fleet().clusters.values():
        names.update(p.resource for p in cluster.pools)
    return names


def _benchmark(args: ResourceValidationArgs) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]] | None:
    """(job spec, pod template, pod spec) of a Job/CronJob whose pods request an accelerator; else None."""
    if args.resource_type not in BENCHMARK_TYPES:
        return None
    job_spec, template = pod_template(plain(args.props), args.resource_type)
    pod = template.get("spec") or {}
    wanted = _accelerator_resources()
    for c in all_containers(pod):
        res = c.get("resources") or {}
        if any(k in wanted for part in ("limits", "requests") for k in (res.get(part) or {})):
            return job_spec, template, pod
    return None


def _expected_pool(args: ResourceValidationArgs, template: dict[str, Any]) -> GpuPool | None:
    """The pool of the pod's card: the card's own pool, or the sweep pool of the size its selector names."""
    cluster = cluster_of(args.urn)
    card = ((template.get("metadata") or {}).get("labels") or {}).get("gpu", "")
    if cluster is None:
        return None
    return cluster.pool_sized(card, ((template.get("spec") or {}).get("nodeSelector") or {}).get(CARDS_PER_NODE_LABEL))


def _queued(args: ResourceValidationArgs, template: dict[str, Any]) -> QueuedJob | QueuedPoint | None:
    """The queued Job (fleet/model/queues/) a Job of the queues' manager declares, labelled with its queue, for a
    workload that names it, on one of its cards; or the queued sweep point (fleet/model/queues/queued_sweeps.py) whose
    TrainingRuntime the manager or a worker that holds it declares; None for any other resource."""
    dispatch = fleet().dispatch
    if dispatch is not None and args.resource_type == TRAINING_RUNTIME:
        props = plain(args.props)
        queue = ((props.get("metadata") or {}).get("labels") or {}).get(QUEUE_LABEL)
        labels = (template.get("metadata") or {}).get("labels") or {}
        nodes = ((props.get("spec") or {}).get("mlPolicy") or {}).get("numNodes")
        size = ((props.get("metadata") or {}).get("labels") or {}).get(POINT_LABEL)
        stack = stack_of(args.urn)
        return next(
            (
                p
                for p in fleet().queued_points()
                if (p.workload.name, p.card, p.queue.name, p.nodes, str(p.accelerators))
                == (labels.get("workload"), labels.get("gpu"), queue, nodes, size)
                and (
                    stack == dispatch.manager
                    or any(q == p for q, _ in fleet().queued_points_on(fleet().cluster(stack)))
                )
            ),
            None,
        )
    if dispatch is None or stack_of(args.urn) != dispatch.manager or args.resource_type != JOB_TYPES[0]:
        return None
    queue = ((plain(args.props).get("metadata") or {}).get("labels") or {}).get(pod_contract.QUEUE_NAME_LABEL)
    labels = (template.get("metadata") or {}).get("labels") or {}
    key = (labels.get("workload"), labels.get("gpu"), queue)
    return next((j for j in fleet().queued_jobs() if (j.workload.name, j.card, j.queue.name) == key), None)


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
        report(no_cluster(stack))
        return
    if _queued(args, template) is not None:  # a card of its queue the workload allows: no pool of the manager's
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


@resource_policy(
    "benchmark-placement",
    "Benchmark pods that request an accelerator select their card's pool and tolerate its taints.",
)
def _validate_bench_placement(args: ResourceValidationArgs, report: ReportViolation) -> None:
    found = _benchmark(args)
    if not found:
        return
    _, template, pod = found
    queued = _queued(args, template)
    if queued is not None:
        want = (
            fleet().queued_point_affinity(queued)
            if hasattr(queued, "accelerators")  # a QueuedPoint (the pack's session may load its class apart)
            else fleet().queued_affinity(queued)
        )
        if pod.get("nodeSelector") or pod.get("tolerations") or pod.get("affinity") != want:
            report(
                f"queued benchmark {args.name!r} must name no pool (the worker that admits it adds its flavor's node "
                f"selector and tolerations) and keep its card {queued.card} by the affinity Fleet.queued_affinity "
                "or, for a sweep point, Fleet.queued_point_affinity (fleet/model/queues/ card_affinity); build it "
                "with components/kubernetes/queued_jobs.py or queued_sweeps.py"
            )
        return
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
    missing = [t.as_string() for t in pool.pod_tolerations if not t.tolerated_by(tolerations)]
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
    # a queued Job does not know its cluster: federation gives its metrics the worker's cluster and cloud
    wanted = QUEUED_METRIC_LABELS if _queued(args, template) is not None else pod_contract.METRIC_LABELS
    missing = [k for k in (*wanted, "app.kubernetes.io/part-of") if not labels.get(k)]
    if missing:
        report(
            f"the pod template of benchmark {args.name!r} lacks the label(s) {', '.join(missing)}; the PodMonitor "
            "selects pods by app.kubernetes.io/part-of and turns workload/gpu/cluster/cloud into metric labels. "
            "Use components/benchmark.pod_labels"
        )
        return
    cluster = cluster_of(args.urn)
    if labels.get("app.kubernetes.io/part-of") != pod_contract.BENCHMARK_PART_OF:
        report(f"benchmark {args.name!r} has app.kubernetes.io/part-of={labels['app.kubernetes.io/part-of']!r}; "
               f"the PodMonitor selects {pod_contract.BENCHMARK_PART_OF!r}")  # fmt: skip
    if wanted == QUEUED_METRIC_LABELS:
        return
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
    spec = plain(args.props).get("spec") or {}
    if spec.get("ttlSecondsAfterFinished") is not None:
        report(
            f"Job {args.name!r} sets ttlSecondsAfterFinished: Kubernetes deletes it after it finishes, and the next "
            "`pulumi up --refresh` creates it again and reruns it; remove the TTL (a CronJob's jobTemplate may keep "
            "one: those Jobs are not Pulumi's)"
        )


# --- (d) every pod: Pod Security `restricted`, no API token, images by digest ---------------------------------------
