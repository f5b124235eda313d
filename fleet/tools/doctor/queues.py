"""The doctor's rows on the manager of the fleet's queues (docs/queues.md): whether each worker is connected, and why
a job waiting on the manager was not dispatched. Read-only: two list calls of Kueue's custom objects.

What it reads, as kueue v0.19.2 writes it:

* each ``MultiKueueCluster``'s condition ``Active`` (apis/kueue/v1beta2/multikueue_types.go
  ``MultiKueueClusterActive``), set by pkg/controller/admissionchecks/multikueue/multikueuecluster.go ``Reconcile``:
  ``True``/``Active`` ("Connected"); ``False`` with ``BadKubeConfig`` (the Secret missing or its ``kubeconfig`` key
  unreadable), ``InsecureKubeConfig`` (a token file, an unchecked certificate or a CA file: ``validateKubeconfig``)
  or ``ClientConnectionFailed`` (the worker's API server unreachable or refusing the token);
* each Workload in the benchmarks namespace neither ``Admitted`` nor ``Finished`` (apis/kueue/v1beta2/
  workload_types.go ``WorkloadAdmitted``, ``WorkloadFinished``): without ``QuotaReserved`` the manager's quota holds
  it (that condition's message says why); with it, its ``status.admissionChecks`` (state ``Pending``, ``Ready``,
  ``Retry`` or ``Rejected``, apis/kueue/v1beta2/admissioncheck_types.go) and their messages, which the MultiKueue
  check fills with what the workers answered.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import urllib3
from kubernetes.client import ApiClient, CustomObjectsApi
from kubernetes.client.exceptions import ApiException

from fleet.model.core import pod_contract
from fleet.model.core.clusters import Cluster
from fleet.model.core.fleet import Fleet

GROUP, VERSION = "kueue.x-k8s.io", "v1beta2"
ACTIVE = "Active"  # multikueue_types.go MultiKueueClusterActive
# multikueuecluster.go loadClientConfig / Reconcile: the reasons of Active=False a kubeconfig Secret can cause
BAD_KUBECONFIG, INSECURE_KUBECONFIG, CONNECTION_FAILED = "BadKubeConfig", "InsecureKubeConfig", "ClientConnectionFailed"
ADMITTED, FINISHED, QUOTA_RESERVED = "Admitted", "Finished", "QuotaReserved"  # workload_types.go
READY = "Ready"  # admissioncheck_types.go CheckStateReady
# the manager's Secret of each worker's kubeconfig (components/kubernetes/multikueue.py kubeconfig_secret_name),
# kept here as data so the doctor does not import the Pulumi components
SECRET_PREFIX = "multikueue-"


@dataclass
class QueueObjects:
    """What the manager's Kueue holds: its MultiKueueClusters and the Workloads of the benchmarks namespace (as the
    API's JSON), or why they could not be read."""

    clusters: list[dict[str, Any]] = field(default_factory=list)
    workloads: list[dict[str, Any]] = field(default_factory=list)
    error: str = ""


def read_queues(api: ApiClient, timeout: float) -> QueueObjects:
    """List the MultiKueueClusters and the benchmarks namespace's Workloads; an error is kept, not raised."""
    custom = CustomObjectsApi(api)
    try:
        clusters = custom.list_cluster_custom_object(GROUP, VERSION, "multikueueclusters", _request_timeout=timeout)
        workloads = custom.list_namespaced_custom_object(
            GROUP, VERSION, pod_contract.BENCHMARK_NAMESPACE, "workloads", _request_timeout=timeout
        )
    except ApiException as exc:
        return QueueObjects(error=f"{exc.status} {exc.reason}")
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        return QueueObjects(error=str(getattr(exc, "reason", None) or exc))
    except ValueError as exc:  # not UTF-8, not JSON
        return QueueObjects(error=f"the answer is not JSON text ({' '.join(str(exc).split())[:200]})")
    lists = [found.get("items", []) if isinstance(found, dict) else None for found in (clusters, workloads)]
    if not all(isinstance(items, list) and all(isinstance(i, dict) for i in items) for items in lists):
        return QueueObjects(error="the answer is not a Kubernetes list (an object with items)")
    return QueueObjects(list(lists[0] or []), list(lists[1] or []))


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == kind), None)


def _is_true(obj: dict[str, Any], kind: str) -> bool:
    found = _condition(obj, kind)
    return found is not None and found.get("status") == "True"


def worker_fix(worker: str, reason: str, kubectl: str, kueue_namespace: str) -> str:
    """What to do when the worker's MultiKueueCluster is not Active, by the reason Kueue gave."""
    secret = f"{kubectl} -n {kueue_namespace} get secret {SECRET_PREFIX}{worker}"
    if reason in (BAD_KUBECONFIG, INSECURE_KUBECONFIG):
        return (
            f"the manager's kubeconfig Secret of {worker} is missing or unusable ({secret}): set the worker stack's "
            f"gpu-fleet:multikueueToken (kubectl create token multikueue -n {kueue_namespace} --duration 744h, on "
            f"{worker}), `pulumi up` the worker stack {worker} (it exports multikueue_kubeconfig), then the manager's"
        )
    return (
        f"the manager cannot reach {worker}'s API server or its token is refused: check that {worker} is up, that "
        f"the manager's egress address is in {worker}'s gpu-fleet:apiAllowedCidrs, and the token in {secret} (it "
        f"expires: renew {worker}'s gpu-fleet:multikueueToken and deploy {worker}, then the manager)"
    )


def worker_rows(fleet: Fleet, objects: QueueObjects, kubectl: str) -> list[tuple[str, str, str, str]]:
    """One (what, state, problem, fix) per worker of the policy: its MultiKueueCluster Active, or why not."""
    assert fleet.dispatch is not None
    found = {(c.get("metadata") or {}).get("name"): c for c in objects.clusters}
    rows = []
    for worker in fleet.dispatch.workers:
        what = f"queue worker {worker}"
        cluster = found.get(worker)
        if cluster is None:
            rows.append((what, "no MultiKueueCluster", "the manager does not know this worker", "`pulumi up` the "
                         "manager's stack after the worker's"))  # fmt: skip
            continue
        active = _condition(cluster, ACTIVE) or {}
        reason, message = active.get("reason", ""), active.get("message", "")
        if active.get("status") == "True":
            rows.append((what, f"Active ({message or reason})", "", ""))
        else:
            state = f"not Active: {reason or 'no condition yet'}"
            rows.append((what, state, message or "Kueue has not connected it yet",
                         worker_fix(worker, reason, kubectl, pod_contract.KUEUE_NAMESPACE)))  # fmt: skip
    return rows


def waiting_rows(objects: QueueObjects) -> list[tuple[str, str, str, str]]:
    """One (what, state, problem, fix) per Workload on the manager neither admitted nor finished: why it waits."""
    rows = []
    for wl in objects.workloads:
        if _is_true(wl, ADMITTED) or _is_true(wl, FINISHED):
            continue
        name = (wl.get("metadata") or {}).get("name", "?")
        queue = (wl.get("spec") or {}).get("queueName", "?")
        what = f"queued workload {name} ({queue})"
        if not _is_true(wl, QUOTA_RESERVED):
            reserved = _condition(wl, QUOTA_RESERVED) or {}
            rows.append((what, "waiting for the manager's quota", reserved.get("message", "no quota reserved yet"),
                         "the queue's quota is in use: it waits for running jobs to finish"))  # fmt: skip
            continue
        checks = (wl.get("status") or {}).get("admissionChecks") or []
        pending = [c for c in checks if c.get("state") != READY]
        said = "; ".join(f"{c.get('name')}: {c.get('state')}: {c.get('message', '')}".rstrip(": ") for c in pending)
        rows.append((what, "not dispatched yet", said or "no admission check state yet",
                     "see the queue workers' rows; a Retry or Rejected check names the worker's answer"))  # fmt: skip
    return rows


def manager_rows(
    fleet: Fleet, cluster: Cluster, objects: QueueObjects, kubectl: str
) -> list[tuple[str, str, str, str]]:
    """Every queue row on the manager (nothing on another cluster): the workers, then the waiting workloads."""
    if fleet.dispatch is None or fleet.dispatch.manager != cluster.name:
        return []
    if objects.error:
        return [("queues (Kueue on the manager)", "unreadable", objects.error,
                 "the doctor needs list on multikueueclusters and workloads (kueue.x-k8s.io)")]  # fmt: skip
    return [*worker_rows(fleet, objects, kubectl), *waiting_rows(objects)]


def queue_rows_for(fleet: Fleet, cluster: Cluster, api: ApiClient, kubectl: str, timeout: float) -> Sequence[Any]:
    """The doctor's hook: read and judge the queues when ``cluster`` is the manager, else nothing (no API call)."""
    if fleet.dispatch is None or fleet.dispatch.manager != cluster.name:
        return []
    return manager_rows(fleet, cluster, read_queues(api, timeout), kubectl)
