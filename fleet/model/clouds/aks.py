"""Azure Kubernetes Service: the fleet's rules for it (the SDK calls are in components/clusters/aks.py)."""

from __future__ import annotations

from fleet.model import pod_contract
from fleet.model.clouds.rules import CloudRules, PoolView, Registration


class Aks(CloudRules):
    """AKS: regional clusters, AKS's own autoscaler."""

    name = "azure"
    region_example = "eastus"
    stack_location_keys = {"azure-native:location": "region"}
    pool_type = "azure-native:containerservice:AgentPool"

    def location_problems(self, region: str | None, zone: str | None) -> list[tuple[tuple[str, ...], str]]:
        """A region, and no zone: AKS clusters span the zones of their region."""
        return self.regional_location_problems(region, zone)

    def read_pool(self, registration: Registration) -> PoolView:
        """An ``AgentPool``: nodeLabels, vmSize, min/maxCount, scaleSetPriority, nodeTaints (key=value:Effect)."""
        inputs = registration.inputs
        labels = inputs.get("nodeLabels", {})
        return PoolView(
            registration.type, registration.name, labels.get("gpu", ""), inputs.get("vmSize", ""),
            inputs.get("minCount"), inputs.get("maxCount"), inputs.get("scaleSetPriority") == "Spot",
            tuple(inputs.get("nodeTaints", [])), labels, labels.get(pod_contract.CI_LABEL) == "true",
        )  # fmt: skip

    def autoscaler_logs(self, kubectl: str) -> str:
        """AKS runs its autoscaler in the control plane."""
        return "az aks nodepool show --name <pool> (enableAutoScaling, minCount, maxCount)"


RULES = Aks()
