"""Fleet-wide queues in the policy file (``queues``): the shape of the section and Kueue's limits behind it
(fleet/model/queues/dispatch.py has the whole story)."""

from __future__ import annotations

import re
from typing import Literal

import pydantic

from fleet.model.core.validation import StrictModel

# A queue's name is a Kubernetes object name (LocalQueue, ClusterQueue, MultiKueueConfig): a DNS-1123 label.
QUEUE_NAME = re.compile(r"^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$")
# kueue v0.19.2 config/components/crd/bases/kueue.x-k8s.io_multikueueconfigs.yaml: spec.clusters maxItems 20
MAX_WORKERS = 20
SPILL_ORDERED = "ordered"
SPILL_ALL = "all"
# the ServiceAccount the manager acts as on a worker, in Kueue's namespace (upstream's create-multikueue-kubeconfig.sh
# uses multikueue-sa in kueue-system); its rights: components/kubernetes/multikueue.py, the pack's
# queue-worker-least-privilege and fleet/model/access/can_i.yaml
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
