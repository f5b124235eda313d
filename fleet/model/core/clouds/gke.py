"""Google Kubernetes Engine: the fleet's rules for it (the SDK calls are in components/clusters/gke.py)."""

from __future__ import annotations

from typing import Any

from fleet.model.core import pod_contract
from fleet.model.core.clouds.rules import CloudRules, PoolView, Registration, SharedPool, open_to_all, taint_string


class Gke(CloudRules):
    """GKE: zonal or regional clusters, sweep pools, GKE's own autoscaler in the control plane."""

    name = "gcp"
    closes_api_by_default = True  # no listed range: authorised networks with none
    region_example = "us-central1"
    zonal = True
    stack_location_keys = {"gcp:region": "region", "gcp:zone": "zone"}
    sweep_pools = True
    # GKE Standard's cluster DNS is kube-dns, not CoreDNS ("kube-dns is the default DNS provider for Standard
    # clusters", GKE docs concepts/service-discovery): its pods carry k8s-app=kube-dns but serve no metrics on 9153,
    # so kube-prometheus-stack's coreDns target is down for ever and the chart's TargetDown fires
    # (rancher/rancher#28942, helm/charts#13302)
    coredns_pods = False
    # the engine types of pulumi_gcp 10.2.0 container.Cluster and container.NodePool
    cluster_type = api_endpoint_type = "gcp:container/cluster:Cluster"
    pool_type = "gcp:container/nodePool:NodePool"

    def location_problems(self, region: str | None, zone: str | None) -> list[tuple[tuple[str, ...], str]]:
        """A zone (zonal cluster) or a region (regional cluster)."""
        if not (region or zone):
            return [((), "a GKE cluster needs a zone (zonal cluster) or a region (regional cluster)")]
        return []

    def region_of(self, region: str | None, zone: str | None) -> str | None:
        """A zonal cluster's region is its zone's: us-central1-a -> us-central1."""
        if region is None and zone:
            return zone.rsplit("-", 1)[0]
        return region

    def read_pool(self, registration: Registration) -> PoolView:
        """A ``NodePool``: nodeConfig (labels, machineType, spot, taints) and autoscaling (total counts)."""
        cfg = registration.inputs.get("nodeConfig", {})
        auto = registration.inputs.get("autoscaling", {})
        labels = cfg.get("labels", {})
        return PoolView(
            registration.type, registration.name, labels.get("gpu", ""), cfg.get("machineType", ""),
            auto.get("totalMinNodeCount"), auto.get("totalMaxNodeCount"), bool(cfg.get("spot")),
            tuple(taint_string(t["key"], t["value"], t["effect"]) for t in cfg.get("taints", [])), labels,
            labels.get(pod_contract.CI_LABEL) == "true",
        )  # fmt: skip

    def api_open(self, inputs: dict[str, Any]) -> bool:
        """A public endpoint (no ``enablePrivateEndpoint``) without master authorized networks, or with 0.0.0.0/0, or
        open to Google's public ranges. Authorised networks with no range admit no outside address (GKE docs,
        "Add authorized networks for control plane access")."""
        private = (inputs.get("privateClusterConfig") or {}).get("enablePrivateEndpoint") is True
        config = inputs.get("masterAuthorizedNetworksConfig")
        if private:
            return False
        if not isinstance(config, dict):
            return True
        blocks = [b.get("cidrBlock") for b in config.get("cidrBlocks") or []]
        return config.get("gcpPublicCidrsAccessEnabled") is True or (bool(blocks) and open_to_all(blocks))

    def declared_sharing(self, inputs: dict[str, Any]) -> str | None:
        """The guest accelerator's sharing: ``time-slicing-N`` (time-sharing, N clients per GPU), ``mig-PROFILE``
        (its partition size), or '' for whole cards (components/clusters/gke.py gpu_sharing builds it)."""
        accelerators = (inputs.get("nodeConfig") or {}).get("guestAccelerators") or [{}]
        first = accelerators[0] or {}
        if first.get("gpuPartitionSize"):
            return f"mig-{first['gpuPartitionSize']}"
        config = first.get("gpuSharingConfig") or {}
        if config.get("gpuSharingStrategy") == "TIME_SHARING":
            return f"time-slicing-{config.get('maxSharedClientsPerGpu')}"
        return ""

    def pool_sharing(self, pool: SharedPool) -> str:
        """The policy's name of the pool's sharing, which ``declared_sharing`` reads back."""
        return pool.sharing.name if pool.sharing else ""

    def autoscaler_logs(self, kubectl: str) -> str:
        """GKE runs its autoscaler in the control plane."""
        return (
            "gcloud container node-pools describe <pool> (autoscaling) and the cluster's autoscaler events in Logging"
        )


RULES = Gke()
