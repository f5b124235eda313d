"""Reading a GPU pool back out of the inputs the engine received, whatever the cloud's spelling.

The plan table and the tests use this to show and check what would really be sent to each cloud.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fleet.model import pod_contract
from fleet.model.ci_pools import CI_LABEL

if TYPE_CHECKING:  # only a type here: the policy pack reads registrations without the plan engine
    from fleet.tools.mock_engine import Registration


@dataclass(frozen=True)
class PoolView:
    """One node pool as the engine sees it."""

    type: str
    name: str
    card: str
    machine_type: str
    min_nodes: int | None
    max_nodes: int | None
    spot: bool
    taints: tuple[str, ...]
    labels: dict[str, str]
    ci: bool = False  # a CI pool (fleet/model/ci_pools.py): its CI label, or on Magnum its role gpu-<card>-ci


def _get(d: Any, *path: str, default: Any = None) -> Any:
    for key in path:
        if not isinstance(d, dict) or key not in d:
            return default
        d = d[key]
    return d


def _k8s_taint(key: str, value: str, effect: str) -> str:
    effect = {"NO_SCHEDULE": "NoSchedule", "NO_EXECUTE": "NoExecute", "PREFER_NO_SCHEDULE": "PreferNoSchedule"}.get(
        effect, effect
    )
    return f"{key}={value}:{effect}"


def _gke(r: Registration) -> PoolView:
    cfg = r.inputs.get("nodeConfig", {})
    auto = r.inputs.get("autoscaling", {})
    labels = cfg.get("labels", {})
    return PoolView(
        r.type, r.name, labels.get("gpu", ""), cfg.get("machineType", ""),
        auto.get("totalMinNodeCount"), auto.get("totalMaxNodeCount"), bool(cfg.get("spot")),
        tuple(_k8s_taint(t["key"], t["value"], t["effect"]) for t in cfg.get("taints", [])), labels,
        labels.get(CI_LABEL) == "true",
    )  # fmt: skip


def _eks(r: Registration) -> PoolView:
    labels = r.inputs.get("labels", {})
    scaling = r.inputs.get("scalingConfig", {})
    return PoolView(
        r.type, r.name, labels.get("gpu", ""), ",".join(r.inputs.get("instanceTypes", [])),
        scaling.get("minSize"), scaling.get("maxSize"), r.inputs.get("capacityType") == "SPOT",
        tuple(_k8s_taint(t["key"], t.get("value", ""), t["effect"]) for t in r.inputs.get("taints", [])), labels,
        labels.get(CI_LABEL) == "true",
    )  # fmt: skip


def _aks(r: Registration) -> PoolView:
    labels = r.inputs.get("nodeLabels", {})
    return PoolView(
        r.type, r.name, labels.get("gpu", ""), r.inputs.get("vmSize", ""),
        r.inputs.get("minCount"), r.inputs.get("maxCount"), r.inputs.get("scaleSetPriority") == "Spot",
        tuple(r.inputs.get("nodeTaints", [])), labels, labels.get(CI_LABEL) == "true",
    )  # fmt: skip


def _magnum(r: Registration) -> PoolView:
    labels = r.inputs.get("labels", {})
    role = r.inputs.get("role", "")
    return PoolView(
        r.type, r.name, pod_contract.card_of_pool(role) or "", r.inputs.get("flavorId", ""),
        r.inputs.get("minNodeCount"), r.inputs.get("maxNodeCount"), False, (), labels, pod_contract.is_ci_pool(role),
    )  # fmt: skip


POOL_TYPES: dict[str, Callable[[Registration], PoolView]] = {
    "gcp:container/nodePool:NodePool": _gke,
    "aws:eks/nodeGroup:NodeGroup": _eks,
    "azure-native:containerservice:AgentPool": _aks,
    "openstack:containerinfra/nodeGroup:NodeGroup": _magnum,
}


def pool_views(registrations: list[Registration]) -> list[PoolView]:
    """Every node pool (system and GPU) among the registrations, in their order (the plan lists them by URN)."""
    return [POOL_TYPES[r.type](r) for r in registrations if r.type in POOL_TYPES]
