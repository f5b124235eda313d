"""The checks of the policy's queues and of the workloads that name one, each problem located in the file."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from fleet.model.core import pod_contract
from fleet.model.core.catalogue import Catalogue
from fleet.model.core.errors import Problem, did_you_mean
from fleet.model.core.workloads import Workload
from fleet.model.core.yaml_source import YamlDocument
from fleet.model.queues.dispatch import kind_of, queue_cards
from fleet.model.queues.settings import MANAGED_BY_MIN_KUBERNETES, QUEUE_NAME, QueuesSettings


class QueuedPlacement(Protocol):
    """What the queue checks read of a workload's placement in the policy file
    (``fleet.model.policy_file.schema.Placement``)."""

    @property
    def gpus(self) -> Sequence[str]:
        """The cards it allows, or ``["all"]``."""
        ...

    @property
    def schedule(self) -> str | None:
        """Its cron schedule, if any."""
        ...

    @property
    def enabled(self) -> bool:
        """False: none of its jobs is deployed."""
        ...

    @property
    def queue(self) -> str | None:
        """The queue it names, if any."""
        ...


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
                "(fleet/model/benchmark_queue/): pick another name",
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


def check_queued_workloads(
    doc: YamlDocument,
    placements: Mapping[str, QueuedPlacement],
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
