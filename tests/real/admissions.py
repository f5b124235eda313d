"""What the queues' manager admitted, read from its API server while the tier runs: the truth the report's Queues
table is checked against (tests/real/test_fleet_stacks.py).

Kueue counts ``multikueue_workloads_admitted_total{cluster_queue, cluster}`` when, in one reconcile, the MultiKueue
admission check of a Workload on the manager turns Ready (kueue v0.19.2 pkg/controller/admissionchecks/multikueue/
workload.go: ``!wasReady && acs.State == kueue.CheckStateReady``), the cluster being the worker that admitted it
(``status.clusterName``) and the queue the Workload's ``status.admission.clusterQueue``. ``AdmissionLedger`` watches
the manager's Workloads and counts the same turns, so a job the tests delete afterwards stays counted.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from tests.real.hollow import HollowCluster

WORKLOADS = "/apis/kueue.x-k8s.io/v1beta2/workloads"
READY = "Ready"


def check_state(workload: dict[str, Any], check: str) -> str | None:
    """The state of admission check ``check`` on ``workload`` (None when it has none of that name)."""
    for each in (workload.get("status") or {}).get("admissionChecks") or ():
        if each.get("name") == check:
            return each.get("state")
    return None


@dataclass
class AdmissionLedger:
    """Counts, per (ClusterQueue, worker), the turns of each Workload's MultiKueue check to Ready on ``hollow`` (the
    manager), for the checks named in ``checks`` (the fleet names each queue's check after its ClusterQueue)."""

    hollow: HollowCluster
    checks: frozenset[str]
    admitted: Counter = field(default_factory=Counter)

    def __post_init__(self) -> None:
        self._ready: dict[str, bool] = {}  # Workload uid -> whether its check was Ready when last seen
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"admissions-{self.hollow.name}", daemon=True)

    def start(self) -> AdmissionLedger:
        """Start watching (before the manager's first ``up``, which dispatches the queued workloads it declares)."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop watching."""
        self._stop.set()
        self._thread.join(timeout=30)

    def counts(self) -> dict[tuple[str, str], int]:
        """The admissions so far, per (ClusterQueue, worker)."""
        with self._lock:
            return dict(self.admitted)

    def seen(self, workload: dict[str, Any]) -> None:
        """Take one observed state of a Workload: count it when its check turned Ready since it was last seen."""
        status = workload.get("status") or {}
        queue = (status.get("admission") or {}).get("clusterQueue")
        uid = workload["metadata"]["uid"]
        ready = queue in self.checks and check_state(workload, queue) == READY
        with self._lock:
            if ready and not self._ready.get(uid, False):
                self.admitted[(queue, status.get("clusterName") or "")] += 1
            self._ready[uid] = ready

    def _get(self, query: str, timeout: float):
        return urllib.request.urlopen(
            f"{self.hollow.server}{WORKLOADS}?{query}", context=self.hollow.admin_context(), timeout=timeout
        )

    def _run(self) -> None:
        # list, then watch from the list's version; again from a fresh list when the watch ends (a restart can only
        # miss a Workload that turned Ready and was deleted in between, which the tier's jobs do not do that fast)
        while not self._stop.is_set():
            try:
                with self._get("", timeout=30) as response:
                    listed = json.load(response)
                for workload in listed.get("items") or ():
                    self.seen(workload)
                version = listed["metadata"]["resourceVersion"]
                with self._get(f"watch=1&resourceVersion={version}&timeoutSeconds=300", timeout=330) as response:
                    for line in response:
                        if self._stop.is_set():
                            return
                        event = json.loads(line)
                        if event.get("type") in ("ADDED", "MODIFIED"):
                            self.seen(event["object"])
            except (urllib.error.URLError, OSError, ValueError, KeyError):
                # the Workload API is not there yet (Kueue's CRDs come with the manager's first up), or the watch
                # broke off: list again
                self._stop.wait(1.0)
