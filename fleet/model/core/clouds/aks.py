"""Azure Kubernetes Service: the fleet's rules for it (the SDK calls are in components/clusters/aks.py)."""

from __future__ import annotations

from typing import Any

from fleet.model.core import pod_contract
from fleet.model.core.clouds.rules import CloudRules, PoolView, Registration, SharedPool, open_to_all


def gpu_instance_profile(pool: SharedPool) -> str:
    """The agent pool's ``gpu_instance_profile`` for a MIG pool: MIG<slices>g of the profile (``2g.20gb`` ->
    ``MIG2g``; pulumi_azure_native containerservice GPUInstanceProfile MIG1g ... MIG7g); fixed once the pool exists
    (MicrosoftDocs/azure-aks-docs articles/aks/gpu-multi-instance.md). '' for a pool without MIG."""
    if pool.sharing is None or pool.sharing.kind != "mig":
        return ""
    return f"MIG{pool.sharing.profile.split('g.', 1)[0]}g"


class Aks(CloudRules):
    """AKS: regional clusters, AKS's own autoscaler."""

    name = "azure"
    region_example = "eastus"
    stack_location_keys = {"azure-native:location": "region"}
    # the engine types of pulumi_azure_native 3.29.0 containerservice.ManagedCluster and AgentPool
    cluster_type = api_endpoint_type = "azure-native:containerservice:ManagedCluster"
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

    def api_open(self, inputs: dict[str, Any]) -> bool:
        """A public endpoint (no ``enablePrivateCluster``) without ``authorizedIPRanges``, or with 0.0.0.0/0."""
        access = inputs.get("apiServerAccessProfile") or {}
        return access.get("enablePrivateCluster") is not True and open_to_all(access.get("authorizedIPRanges"))

    def declared_sharing(self, inputs: dict[str, Any]) -> str | None:
        """An agent pool declares MIG only (``gpuInstanceProfile``); time slices come from our device plugin."""
        profile = inputs.get("gpuInstanceProfile") or ""
        return f"MIG profile {profile}" if profile else ""

    def pool_sharing(self, pool: SharedPool) -> str:
        """The MIG profile of a MIG pool (``gpu_instance_profile``); '' for any other."""
        profile = gpu_instance_profile(pool)
        return f"MIG profile {profile}" if profile else ""

    def autoscaler_logs(self, kubectl: str) -> str:
        """AKS runs its autoscaler in the control plane."""
        return "az aks nodepool show --name <pool> (enableAutoScaling, minCount, maxCount)"


RULES = Aks()
