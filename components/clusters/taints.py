"""The spellings of one taint the cloud components send: converted here, by the model's rules of each cloud's spelling
(fleet/model/core/clouds/rules.py)."""

from __future__ import annotations

from fleet.model.core.clouds.rules import upper_effect
from fleet.model.core.taints import Taint

__all__ = ["aks_taint", "autoscaler_tag_value", "upper_effect"]


def aks_taint(taint: Taint) -> str:
    """AKS agent-pool spelling: ``key=value:NoSchedule``."""
    return taint.as_string()


def autoscaler_tag_value(taint: Taint) -> str:
    """cluster-autoscaler node-template ASG tag value: ``value:NoSchedule`` (Kubernetes effect spelling)."""
    return f"{taint.value}:{taint.effect}"
