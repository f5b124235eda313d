"""The spellings of one taint: Kubernetes, EKS, GKE, AKS and cluster-autoscaler tags, converted in one place."""

from __future__ import annotations

from fleet.model.catalogue import Taint

_UPPER_EFFECT = {"NoSchedule": "NO_SCHEDULE", "PreferNoSchedule": "PREFER_NO_SCHEDULE", "NoExecute": "NO_EXECUTE"}


def upper_effect(taint: Taint) -> dict[str, str]:
    """EKS node-group and GKE node-config spelling: ``{key, value, effect: NO_SCHEDULE}``."""
    return {"key": taint.key, "value": taint.value, "effect": _UPPER_EFFECT[taint.effect]}


def aks_taint(taint: Taint) -> str:
    """AKS agent-pool spelling: ``key=value:NoSchedule``."""
    return taint.as_string()


def autoscaler_tag_value(taint: Taint) -> str:
    """cluster-autoscaler node-template ASG tag value: ``value:NoSchedule`` (Kubernetes effect spelling)."""
    return f"{taint.value}:{taint.effect}"


def toleration(taint: Taint) -> dict[str, str]:
    """The pod toleration (Kubernetes API, camelCase) that matches ``taint`` exactly."""
    return {"key": taint.key, "operator": "Equal", "value": taint.value, "effect": taint.effect}
