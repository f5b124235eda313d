"""Taints: how a pool keeps pods off its nodes, in Kubernetes spelling, and the taints of the fleet's own pools."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

from fleet.model.core import pod_contract
from fleet.model.core.validation import StrictModel


class Taint(StrictModel):
    """A Kubernetes taint in Kubernetes spelling (effect ``NoSchedule``)."""

    key: str
    value: str
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = "NoSchedule"

    def as_string(self) -> str:
        """``key=value:Effect``, the spelling AKS and kubectl use."""
        return f"{self.key}={self.value}:{self.effect}"

    def toleration(self) -> dict[str, str]:
        """The pod toleration (Kubernetes API, camelCase) that matches this taint exactly."""
        return {"key": self.key, "operator": "Equal", "value": self.value, "effect": self.effect}

    def tolerated_by(self, tolerations: Iterable[Mapping[str, Any]]) -> bool:
        """Whether one of a pod's tolerations (``key``, ``operator``, ``value``, ``effect``; unset or None alike)
        tolerates this taint, as Kubernetes decides it (k8s.io/api core/v1 toleration.go ToleratesTaint): the effect
        and the key match when given, then ``Exists`` matches any value and ``Equal`` (the default) this one."""
        for t in tolerations:
            if t.get("effect") and t["effect"] != self.effect:
                continue
            if t.get("key") and t["key"] != self.key:
                continue
            operator = t.get("operator") or "Equal"
            if operator == "Exists" or (operator == "Equal" and (t.get("value") or "") == self.value):
                return True
        return False

    def keeps_off(self, tolerations: Iterable[Mapping[str, Any]]) -> bool:
        """Whether this taint keeps a pod with these tolerations off its node: TaintToleration filters on
        ``NoSchedule`` and ``NoExecute`` only (a ``PreferNoSchedule`` taint only scores)."""
        return self.effect != "PreferNoSchedule" and not self.tolerated_by(tolerations)


# The taint that keeps every pod but a sweep job off a sweep pool's nodes (fleet/model/sweeps/).
SWEEP_TAINT = Taint(key="gpu-fleet.io/sweep", value="present", effect="NoSchedule")
# The taint that keeps every pod but a CI job off a CI pool's nodes (keyed by the pool's label, pod_contract.CI_LABEL;
# fleet/model/runners/ci_pools.py)
CI_TAINT = Taint(key=pod_contract.CI_LABEL, value="true", effect="NoSchedule")
