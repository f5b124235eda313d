"""Fleet-wide queues: one place to submit work, dispatched by Kueue's MultiKueue to an ordered list of clusters.

The policy's ``queues`` section names a **manager** cluster, which holds every queue and runs nothing itself, and
queues, each an ordered list of worker clusters (the first preferred) and the cards, or the accelerator kind, it
serves::

    queues:
      manager: cern-control
      spill: ordered                  # ordered: one more cluster each dispatcher round; all: every cluster at once
      gpu: {clusters: [cern-main, eks-eastus, gke-uscentral1-c], gpus: [t4, v100]}
      tpu: {clusters: [gke-uscentral1-a], kind: tpu}

What Kueue 0.19.2 can and cannot do decides the rules (sources beside each):

* the manager cannot be one of its own workers (kueue keps/693-multikueue "Non-Goals": "the management cluster
  ... cannot be also a worker"); a queue listing it is refused;
* the spill-over is the manager's **dispatcher**, one per Kueue (``Configuration.multiKueue.dispatcherName``,
  apis/config/v1beta2/configuration_types.go), so it is set once for every queue, not per queue;
* a MultiKueueConfig lists at most 20 clusters (its CRD's ``spec.clusters`` maxItems);
* a queue serves one extended resource (``nvidia.com/gpu`` or ``google.com/tpu``...): its manager quota is counted
  in it.

This module has no Pulumi: the shape of the section (``QueuesSettings``), its cross-key checks with located errors
(``check_queues``), and the resolved queues (``Dispatch``) the components and the policy pack read.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import pydantic

from fleet.model import pod_contract
from fleet.model.errors import Problem, did_you_mean
from fleet.model.sweeps import CARDS_PER_NODE_LABEL
from fleet.model.validation import StrictModel

if TYPE_CHECKING:  # spec.py imports this module
    from fleet.model.catalogue import Catalogue
    from fleet.model.spec import Cluster, GpuPool
    from fleet.model.spec_schema import Placement
    from fleet.model.workloads import Workload
    from fleet.model.yaml_source import YamlDocument

# A queue's name is a Kubernetes object name (LocalQueue, ClusterQueue, MultiKueueConfig): a DNS-1123 label.
QUEUE_NAME = re.compile(r"^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$")
# kueue v0.19.2 config/components/crd/bases/kueue.x-k8s.io_multikueueconfigs.yaml: spec.clusters maxItems 20
MAX_WORKERS = 20
SPILL_ORDERED = "ordered"
SPILL_ALL = "all"
# the ServiceAccount the manager acts as on a worker, in Kueue's namespace (upstream's create-multikueue-kubeconfig.sh
# uses multikueue-sa in kueue-system); its rights: components/kubernetes/multikueue.py, the pack's
# queue-worker-least-privilege and fleet/model/can_i.yaml
WORKER_ACCOUNT = "multikueue"
RESERVED = ("manager", "spill")
# Kueue's waits (kueue v0.19.2 pkg/metrics/metrics.go), histograms labelled cluster_queue, priority_class and
# replica_role, whose buckets are 1 s then 2.5 s doubling (generateExponentialBuckets):
# * on the manager, ``kueue_admission_wait_time_seconds``: a workload's creation (or requeue) until its admission,
#   which on the manager is when a worker admitted it (pkg/controller/admissionchecks/multikueue/workload.go turns the
#   MultiKueue check Ready when the remote workload is admitted); 16 buckets, the last finite 40960 s;
# * on a worker, ``kueue_admitted_until_ready_wait_time_seconds``: its admission there until its pods are ready
#   (running), observed once per workload by the job reconciler only where ``waitForPodsReady`` is on
#   (pkg/controller/jobframework/reconciler.go), which every worker sets; 14 buckets, the last finite 10240 s.
#   The workers' leaves scrape it and the central federates it, so the report reads it per worker.
# The manager dispatches batch Jobs by their ``spec.managedBy: kueue.x-k8s.io/multikueue``, which Kueue's Job webhook
# sets there (kueue v0.19.2 pkg/controller/jobframework/defaults.go ApplyDefaultForManagedBy) and MultiKueue's check
# requires, else it rejects the workload: "The owner is not managed by Kueue: Expecting spec.managedBy to be ..."
# (pkg/controller/admissionchecks/multikueue/workload.go, pkg/controller/jobs/job/job_multikueue_adapter.go
# IsJobManagedByKueue). The Job's field is the feature gate JobManagedBy of kube-apiserver and kube-controller-manager
# (KEP-4368, kubernetes/enhancements keps/sig-apps/4368-support-managed-by-for-batch-jobs/kep.yaml: alpha 1.30, beta
# 1.32, stable 1.35; kubernetes v1.36.3 pkg/features/kube_features.go: alpha and off in 1.30, beta and on in 1.32, GA
# and locked on in 1.35); with the gate off the API server drops it on create (pkg/registry/batch/job/strategy.go
# PrepareForCreate), so a manager below 1.32 dispatches no Job. A TrainJob's (and a JobSet's) managedBy is a field of
# its CRD (kubeflow/trainer v2.3.0 pkg/apis/trainer/v1alpha1/trainjob_types.go; jobset v0.12.0 jobset_types.go), which
# no gate drops: they need nothing more.
MANAGED_BY_MIN_KUBERNETES = (1, 32)
ADMISSION_WAIT_METRIC = "kueue_admission_wait_time_seconds"
START_WAIT_METRIC = "kueue_admitted_until_ready_wait_time_seconds"
START_WAIT_SERIES = tuple(f"{START_WAIT_METRIC}_{part}" for part in ("bucket", "sum", "count"))


class QueueSettings(StrictModel):
    """One queue: its worker clusters, most preferred first, and the cards (or accelerator kind) it serves."""

    clusters: list[str] = pydantic.Field(
        description="Worker clusters, most preferred first: Kueue tries them in this order.",
        min_length=1,
        max_length=MAX_WORKERS,
    )
    gpus: list[str] | None = pydantic.Field(
        default=None, description="Cards the queue serves, most preferred first on each cluster."
    )
    kind: str | None = pydantic.Field(
        default=None,
        pattern=r"^[a-z][a-z0-9-]*$",
        description="Instead of gpus: every card of this accelerator kind (gpu, tpu, neuron) its clusters offer.",
    )

    @pydantic.field_validator("clusters", "gpus")
    @classmethod
    def _unique(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and len(set(value)) != len(value):
            twice = sorted({v for v in value if value.count(v) > 1})
            raise ValueError(f"{', '.join(twice)} listed twice: each cluster or card once, in order of preference")
        return value

    @pydantic.model_validator(mode="after")
    def _cards_or_kind(self) -> QueueSettings:
        if (self.gpus is None) == (self.kind is None):
            raise ValueError("give exactly one of gpus (cards, such as [t4, v100]) or kind (such as tpu)")
        if self.gpus is not None and not self.gpus:
            raise ValueError("give at least one card, such as [t4]")
        return self


class QueuesSettings(StrictModel):
    """The policy's ``queues``: the manager, the spill-over, and every other key a queue of that name."""

    model_config = pydantic.ConfigDict(frozen=True, extra="allow")

    manager: str = pydantic.Field(
        description="The cluster that holds the queues and dispatches their jobs; it cannot be a worker of its own."
    )
    spill: Literal["ordered", "all"] = pydantic.Field(
        default=SPILL_ORDERED,
        description=(
            "ordered: Kueue offers a job to one more cluster of its queue every round (5 minutes), first to last; "
            "all: to every cluster at once, the first to admit it runs it."
        ),
    )
    __pydantic_extra__: dict[str, QueueSettings] = pydantic.Field(init=False)  # type: ignore[assignment]

    @property
    def named(self) -> dict[str, QueueSettings]:
        """The queues by name, in the file's order."""
        return dict(self.model_extra or {})


@dataclass(frozen=True)
class Queue:
    """One resolved queue: its workers in order of preference, its cards in order, and the resource they count."""

    name: str
    clusters: tuple[str, ...]
    cards: tuple[str, ...]
    resource: str

    @property
    def cluster_queue(self) -> str:
        """Its ClusterQueue's name (and on the manager its AdmissionCheck's and MultiKueueConfig's): ``queue-<name>``;
        Kueue's metrics label it ``cluster_queue``."""
        return f"queue-{self.name}"

    def pools(self, cluster: Cluster) -> tuple[GpuPool, ...]:
        """The pools of ``cluster`` that serve this queue, in the queue's card order."""
        return tuple(p for card in self.cards for p in cluster.pools if p.card == card)


@dataclass(frozen=True)
class Dispatch:
    """The fleet's queues: the manager, the spill-over mode, and the queues in the file's order."""

    manager: str
    spill: str
    queues: tuple[Queue, ...]

    @property
    def workers(self) -> tuple[str, ...]:
        """Every worker cluster, each once, in the order the queues first name them."""
        return tuple(dict.fromkeys(c for q in self.queues for c in q.clusters))

    def queues_of(self, cluster: str) -> tuple[Queue, ...]:
        """The queues ``cluster`` works for."""
        return tuple(q for q in self.queues if cluster in q.clusters)

    def role(self, cluster: str) -> str | None:
        """``manager``, ``worker`` or None (the cluster takes no part in the queues)."""
        if cluster == self.manager:
            return "manager"
        return "worker" if cluster in self.workers else None


def pool_capacity(pool: GpuPool) -> int:
    """What a pool holds at most of its resource: ``max_nodes`` nodes of ``units_per_node`` (slices counted)."""
    return pool.max_nodes * pool.units_per_node


def quota(queue: Queue, clusters: Mapping[str, Cluster]) -> int:
    """The manager's quota of a queue: what its workers' pools of its cards hold at most, added up."""
    return sum(pool_capacity(p) for name in queue.clusters for p in queue.pools(clusters[name]))


def kind_of(resource: str) -> str:
    """The accelerator kind of an extended resource: ``nvidia.com/gpu`` -> ``gpu``, ``google.com/tpu`` -> ``tpu``."""
    return resource.rsplit("/", 1)[-1]


def check_queues(
    doc: YamlDocument,
    settings: QueuesSettings,
    offered: Mapping[str, tuple[str, frozenset[str]]],
    catalogue: Catalogue,
) -> list[Problem]:
    """Every problem of the ``queues`` section, located. ``offered``: cluster -> (its cloud, the cards it offers)."""
    problems: list[Problem] = []

    def report(path: tuple[object, ...], message: str) -> None:
        problems.append(doc.problem(("queues", *path), message))

    known = ", ".join(offered) or "none"
    manager = settings.manager
    if manager not in offered:
        report(
            ("manager",),
            f"no cluster named {manager!r} (clusters: {known}); example: manager: {next(iter(offered), 'control')}",
        )
    for name, queue in settings.named.items():
        if not QUEUE_NAME.match(name):
            report(
                (name,),
                f"queue name {name!r} must be a DNS-1123 label (lower-case letters, digits and '-', a letter first), "
                "as Kueue's queue objects are named after it; example: gpu",
            )
        if name == pod_contract.BENCHMARK_QUEUE:
            report(
                (name,),
                f"{name!r} is taken by the benchmarks' own LocalQueue on every cluster that runs them "
                "(fleet/model/benchmark_queue.py): pick another name",
            )
        if name == pod_contract.SWEEP_QUEUE or pod_contract.is_sweep_queue(name):
            report(
                (name,),
                f"{name!r} is taken by the scaling sweeps' own LocalQueues ({pod_contract.sweep_queue('<pool>')} on "
                "every cluster that sweeps): pick another name",
            )
        for i, cluster in enumerate(queue.clusters):
            if cluster == manager:
                report(
                    (name, "clusters", i),
                    f"{cluster} is the manager: MultiKueue's manager cannot also be one of its workers (kueue "
                    "keps/693-multikueue); remove it from the list, or make a cluster without accelerators the manager",
                )
            elif cluster not in offered:
                report((name, "clusters", i), f"no cluster named {cluster!r} (clusters: {known})")
        workers = [c for c in queue.clusters if c in offered and c != manager]
        cards = queue_cards(queue, workers, offered, catalogue)
        if queue.gpus is not None:
            resources = set()
            for i, card in enumerate(queue.gpus):
                acc = catalogue.accelerators.get(card)
                if acc is None:
                    report(
                        (name, "gpus", i),
                        f"unknown card {card!r}; the catalogue knows: {', '.join(catalogue.accelerators)}",
                    )
                    continue
                resources.add(acc.resource)
                if workers and not any(card in offered[c][1] for c in workers):
                    report(
                        (name, "gpus", i),
                        f"none of the queue's clusters ({', '.join(workers)}) offers {card}: add it under a cluster's "
                        "gpus, add a cluster that offers it to the queue, or remove the card",
                    )
            if len(resources) > 1:
                report(
                    (name, "gpus"),
                    f"the cards count different resources ({', '.join(sorted(resources))}): one queue serves one kind, "
                    "make a queue per kind (example: tpu: {clusters: [...], kind: tpu})",
                )
        else:
            kinds = sorted({kind_of(a.resource) for a in catalogue.accelerators.values()})
            if queue.kind not in kinds:
                report(
                    (name, "kind"),
                    f"unknown accelerator kind {queue.kind!r}; the catalogue's kinds: {', '.join(kinds)}",
                )
            elif workers and not cards:
                report(
                    (name, "kind"),
                    f"none of the queue's clusters ({', '.join(workers)}) offers a {queue.kind} card: add one that does"
                    "",
                )
        for i, cluster in enumerate(queue.clusters):
            if cluster in workers and cards and not set(cards) & offered[cluster][1]:
                report(
                    (name, "clusters", i),
                    f"{cluster} offers none of the queue's cards ({', '.join(cards)}; it has "
                    f"{', '.join(sorted(offered[cluster][1])) or 'no cards'}): Kueue would never place a job there; "
                    "add one of the cards to the cluster, or remove it from the queue",
                )
    return problems


def queue_cards(
    queue: QueueSettings,
    workers: list[str],
    offered: Mapping[str, tuple[str, frozenset[str]]],
    catalogue: Catalogue,
) -> tuple[str, ...]:
    """The queue's cards: its ``gpus`` in order, or every catalogue card of its ``kind`` one of its workers offers."""
    if queue.gpus is not None:
        return tuple(queue.gpus)
    have = {card for c in workers for card in offered[c][1]}
    return tuple(
        card for card, acc in catalogue.accelerators.items() if kind_of(acc.resource) == queue.kind and card in have
    )


def resolve(
    settings: QueuesSettings, offered: Mapping[str, tuple[str, frozenset[str]]], catalogue: Catalogue
) -> Dispatch:
    """The checked section, resolved (call only when ``check_queues`` found nothing)."""
    queues = []
    for name, queue in settings.named.items():
        workers = list(queue.clusters)
        cards = queue_cards(queue, workers, offered, catalogue)
        resource = catalogue.accelerators[cards[0]].resource
        queues.append(Queue(name, tuple(workers), cards, resource))
    return Dispatch(settings.manager, settings.spill, tuple(queues))


# --- workloads that name a queue ---------------------------------------------------------------------------------
#
# A workload of the policy may name a queue (``workloads.<name>.queue``): its Jobs are declared once, on the manager,
# one per card of the queue the workload allows, and MultiKueue copies each to the worker that admits it. What
# MultiKueue copies is the Job alone (kueue v0.19.2 pkg/controller/jobs/job/job_multikueue_adapter.go ``SyncJob``:
# a new Job with ``api.CloneObjectMetaForCreation`` of the manager's Job, i.e. its name, namespace, labels and
# annotations, and its spec without the selector, Kueue's managed pod labels and ``managedBy``; then the labels
# ``kueue.x-k8s.io/multikueue-origin`` and ``kueue.x-k8s.io/prebuilt-workload-name``), created in the **same
# namespace** on the worker. So the ConfigMaps, the credentials Secret, the egress policy and the PodMonitor the
# pods need are declared on every worker of the queue by the worker's own stack.


@dataclass(frozen=True)
class QueuedJob:
    """One Job of a workload that names a queue: declared on the manager for one card, run by a worker's pool of it."""

    workload: Workload
    queue: Queue
    card: str

    @property
    def name(self) -> str:
        """``<workload>/<card>``, as the plan and messages name it."""
        return f"{self.workload.name}/{self.card}"


def card_affinity(card: str, pools: Sequence[GpuPool], allowed: Sequence[GpuPool] | None = None) -> dict[str, object]:
    """The required node affinity that keeps a dispatched job on ``card`` whichever worker runs it; ``pools``: every
    pool of the queue's cards on its workers (``Fleet.queue_pools``); ``allowed``: the pools of the card it may run on
    (by default every pool of the card in ``pools``; a queued sweep point names the pool of each worker that holds it).

    The pools of one card carry different selectors (``gpu=<card>`` on GKE, EKS and AKS, the node-group role on
    Magnum), and a worker's ClusterQueue lists a flavor per card of the queue, tried in order, so the job must make
    Kueue skip the other cards' flavors. Kueue matches a flavor on **that flavor's own label keys** only, and a term
    left without any expression matches every flavor (kueue v0.19.2 pkg/scheduler/flavorassigner/flavorassigner.go
    ``checkFlavorForPodSets``, ``flavorSelector``). So each term, one per selector of the allowed pools, names its own
    keys ``In`` their values and every other key the queue's card pools use ``NotIn`` the values of the pools it may not
    run on (the other cards', and for a sweep point its card's pools that cannot hold it, such as Magnum's). A
    flavor of another card fails every term on its own keys, the card's flavor matches its term, and so does a node of
    the card's pool when the pod is scheduled (``NotIn`` holds on a node without the label). A term of a card's own
    pool also wants no sweep-pool size label (``DoesNotExist``): the sweep pools' flavors carry the card's label too,
    and are listed first on a worker that holds queued sweep points.
    """
    chosen = pools if allowed is None else allowed
    own = list(dict.fromkeys(tuple(sorted(p.node_selector.items())) for p in chosen if p.card == card))
    others: dict[str, set[str]] = {}
    for pool in pools:
        if not pool.sweep and (pool.card != card or pool not in chosen):
            for key, value in pool.node_selector.items():
                if key != CARDS_PER_NODE_LABEL:
                    others.setdefault(key, set()).add(value)
    terms = []
    for selector in own:
        mine = dict(selector)
        expressions: list[dict[str, object]] = [{"key": k, "operator": "In", "values": [v]} for k, v in selector]
        if CARDS_PER_NODE_LABEL not in mine:
            expressions.append({"key": CARDS_PER_NODE_LABEL, "operator": "DoesNotExist"})
        expressions += [
            {"key": k, "operator": "NotIn", "values": sorted(values)}
            for k, values in sorted(others.items())
            if k not in mine
        ]
        terms.append({"matchExpressions": expressions})
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}


def check_queued_workloads(
    doc: YamlDocument,
    placements: Mapping[str, Placement],
    settings: QueuesSettings | None,
    workloads: Mapping[str, Workload],
    offered: Mapping[str, tuple[str, frozenset[str]]],
    catalogue: Catalogue,
) -> list[Problem]:
    """Every problem of the workloads that name a queue, located at ``workloads.<name>.queue`` (or the card)."""
    problems: list[Problem] = []
    for name, placement in placements.items():
        if placement.queue is None or not placement.enabled:
            continue
        at = ("workloads", name, "queue")

        def report(message: str, path: tuple[object, ...] = at) -> None:
            problems.append(doc.problem(path, message))

        if settings is None:
            report(
                f"{name} names queue {placement.queue!r}, but the policy has no queues section: add one "
                "(docs/queues.md), or remove queue to run the workload on every cluster that offers its cards"
            )
            continue
        queues = settings.named
        if placement.queue not in queues:
            report(
                f"no queue named {placement.queue!r}{did_you_mean(placement.queue, queues)} "
                f"(queues: {', '.join(queues) or 'none'})"
            )
            continue
        if placement.schedule is not None:
            report(
                f"{name} has a schedule (a CronJob) and names a queue: Kueue's MultiKueue dispatches Jobs, and Kueue "
                "v0.19.2 has no CronJob integration (pkg/controller/jobs; MultiKueue's supported job types list none); "
                "remove the schedule to run it once through the queue, or remove queue to run the CronJob per cluster"
            )
        wl = workloads.get(name)
        if wl is not None and wl.spec.needs_root:
            report(
                f"{name} needs root (needs_root in its workload.yaml), so its Jobs live in the "
                f"{pod_contract.ROOT_BENCHMARK_NAMESPACE} namespace, but the queues are only in "
                f"{pod_contract.BENCHMARK_NAMESPACE} on the manager and the workers (MultiKueue creates the Job in "
                "its own namespace on the worker): build its image to run as a user first, or remove queue"
            )
        queue = queues[placement.queue]
        workers = [c for c in queue.clusters if c in offered and c != settings.manager]
        served = queue_cards(queue, workers, offered, catalogue)
        if wl is None:
            continue
        kinds = wl.spec.accelerator_kinds
        if placement.gpus == ["all"]:
            allowed = [c for c, acc in catalogue.accelerators.items() if acc.resource in kinds]
        else:
            allowed = list(placement.gpus)
            for i, card in enumerate(placement.gpus):
                if card in catalogue.accelerators and card not in served:
                    report(
                        f"{card} is not a card of queue {placement.queue} ({', '.join(served)}): a workload that "
                        "names a queue runs only through it; remove the card, or use gpus: all for the queue's cards",
                        ("workloads", name, "gpus", i),
                    )
        if served and not set(served) & set(allowed):
            report(
                f"queue {placement.queue} serves {', '.join(served)}, none of which {name} allows (its cards: "
                f"{', '.join(allowed) or 'none'}): allow one of them, or name another queue"
            )
    return problems


def managed_by_problem(manager: str, minor: tuple[int, int] | None, written: str) -> str | None:
    """Why the queues' manager, running Kubernetes ``minor`` (as ``written``: a version or a Magnum kubeTag), cannot
    dispatch batch Jobs (``MANAGED_BY_MIN_KUBERNETES``), or None (a version that names no minor: assumed able)."""
    if minor is None or minor >= MANAGED_BY_MIN_KUBERNETES:
        return None
    need = ".".join(map(str, MANAGED_BY_MIN_KUBERNETES))
    return (
        f"{manager} is the queues' manager, and Kubernetes {'.'.join(map(str, minor))} ({written}) drops a Job's "
        f"spec.managedBy (feature gate JobManagedBy, KEP-4368: on by default from {need}), so Kueue's MultiKueue "
        'check rejects every Job submitted to a queue ("The owner is not managed by Kueue") and none leaves the '
        f"manager: run Kubernetes {need} or newer there"
    )
