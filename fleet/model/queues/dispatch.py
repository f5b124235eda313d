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

from collections.abc import Mapping

from fleet.model.core.catalogue import Catalogue
from fleet.model.core.clusters import Cluster
from fleet.model.core.jobs import Dispatch, Queue
from fleet.model.core.pools import GpuPool
from fleet.model.queues.settings import QueueSettings, QueuesSettings


def pool_capacity(pool: GpuPool) -> int:
    """What a pool holds at most of its resource: ``max_nodes`` nodes of ``units_per_node`` (slices counted)."""
    return pool.max_nodes * pool.units_per_node


def quota(queue: Queue, clusters: Mapping[str, Cluster]) -> int:
    """The manager's quota of a queue: what its workers' pools of its cards hold at most, added up."""
    return sum(pool_capacity(p) for name in queue.clusters for p in queue.pools(clusters[name]))


def kind_of(resource: str) -> str:
    """The accelerator kind of an extended resource: ``nvidia.com/gpu`` -> ``gpu``, ``google.com/tpu`` -> ``tpu``."""
    return resource.rsplit("/", 1)[-1]


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
