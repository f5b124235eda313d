"""What a diagnosis says (:class:`Diagnosis`) and what it is made from besides the object it diagnoses
(:class:`Context`: the fleet's view of the cluster, what was read from it, and how the operator reaches it)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from fleet.model.core.clusters import Cluster
from fleet.model.core.fleet import Fleet
from fleet.model.core.pools import GpuPool
from fleet.tools.doctor.cluster_read import Snapshot


@dataclass(frozen=True)
class Diagnosis:
    """Why a pod does not run: the cause and its likely fix. ``waiting``: a normal wait (a node is being added, the
    pod is starting), not a problem."""

    cause: str
    fix: str = ""
    waiting: bool = False


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
