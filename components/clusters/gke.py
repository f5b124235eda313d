"""Google Kubernetes Engine: a zonal or regional cluster, a system pool and one GPU pool per card."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pulumi
import pulumi_gcp as gcp

from components.clusters.cluster import GpuCluster
from components.clusters.kubeconfig import exec_kubeconfig
from components.clusters.taints import upper_effect
from fleet.model.core.clusters import Cluster, pool_resource_name
from fleet.model.core.pools import GpuPool

# Nodes run as the cluster's own service account with only the role GKE documents for node service accounts,
# roles/container.defaultNodeServiceAccount (docs.cloud.google.com/kubernetes-engine/security/configure-node-service-
# accounts; CIS GKE Benchmark v2.0.0, 5.2.1); the cloud-platform scope then grants no more than that role, as the
# hardening guide recommends ("Use least privilege Google service accounts"), instead of the Compute Engine default
# account, which often holds Editor on the project.
OAUTH_SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]
NODE_ROLE = "roles/container.defaultNodeServiceAccount"
# Application-layer secrets encryption: the GKE service agent encrypts Kubernetes Secrets in etcd with this key
# and needs the encrypter/decrypter role on it; the key ring lives in the cluster's region
# (cloud.google.com/kubernetes-engine/docs/how-to/encrypting-secrets).
KMS_ROLE = "roles/cloudkms.cryptoKeyEncrypterDecrypter"
KEY_ROTATION = "7776000s"  # 90 days
# The control plane's range with a private endpoint (RFC 1918, a /28 as GKE asks, unused by the default network).
MASTER_CIDR = "172.16.0.0/28"
# Where GKE's driver installer puts the NVIDIA driver on the host, and where GKE's own GPU pods mount it: the
# defaults of GKE's device plugin (GoogleCloudPlatform/container-engine-accelerators@992db812,
# cmd/nvidia_gpu/nvidia_gpu.go host-path/container-path) and Google's dcgm-exporter manifest
# (GoogleCloudPlatform/prometheus-engine examples/nvidia-dcgm/exporter.yaml).
DRIVER_HOST_PATH = "/home/kubernetes/bin/nvidia"
DRIVER_MOUNT_PATH = "/usr/local/nvidia"
# The dcgm-exporter chart 4.1.1 mounts its counter list this way by default (NVIDIA/dcgm-exporter@4.2.3-4.1.1,
# deployment/values.yaml extraVolumeMounts); setting the list replaces the default, so it is listed again.
DCGM_COUNTERS_MOUNT = {
    "name": "exporter-metrics-volume",
    "mountPath": "/etc/dcgm-exporter/default-counters.csv",
    "subPath": "default-counters.csv",
}


def gcp_region(location: str) -> str:
    """The region of a GKE location (``us-central1-a`` -> ``us-central1``; a region stays as it is)."""
    return location.rsplit("-", 1)[0] if location.count("-") == 2 else location


def node_account_id(cluster: str) -> str:
    """The node service account's id: 6 to 30 characters, lower-case letters, digits and dashes, from a letter."""
    base = cluster[: 30 - len("-nodes")].rstrip("-")
    return f"{base}-nodes"


# The clouds' cluster-autoscaler keeps an unneeded node this long by default (cluster-autoscaler FAQ,
# --scale-down-unneeded-time): a fleet that wants it sooner asks GKE for its utilisation profile.
DEFAULT_SCALE_DOWN = "10m"


def autoscaling_profile(cluster: Cluster) -> str:
    """GKE's autoscaling profile for the policy's ``scale_down_after``: OPTIMIZE_UTILIZATION below GKE's own 10 min."""
    return "OPTIMIZE_UTILIZATION" if int(cluster.scale_down_after[:-1]) < int(DEFAULT_SCALE_DOWN[:-1]) else "BALANCED"


def gpu_sharing(pool: GpuPool) -> dict[str, Any]:
    """The guest accelerator's sharing (pulumi_gcp 10.2.0 NodePoolNodeConfigGuestAcceleratorArgs): time-sharing
    with N clients per GPU, or MIG partitions of the profile's size; GKE's device plugin then advertises each client or
    partition as one nvidia.com/gpu (GKE docs "Time-sharing GPUs on GKE", "Running multi-instance GPUs")."""
    if pool.sharing is None:
        return {}
    if pool.sharing.kind == "mig":
        return {"gpu_partition_size": pool.sharing.profile}
    return {
        "gpu_sharing_config": {"gpu_sharing_strategy": "TIME_SHARING", "max_shared_clients_per_gpu": pool.sharing.units}
    }


class GkeCluster(GpuCluster):
    """A GKE Standard cluster with the default pool removed, workload identity, and GPU pools.

    GPU pools get their accelerator from ``guest_accelerators`` with GKE-managed driver installation,
    the card's machine family from the catalogue, spot capacity with ``location_policy: ANY`` (fewer
    preemptions), whole-pool autoscaling bounds, and the GPU taint declared explicitly (GKE adds it on
    its own only in some cases, which would otherwise show up as drift). GKE runs its own device plugin
    and knows each pool's template, so scale-up from zero needs nothing more.
    """

    TYPE = "gpufleet:index:GkeCluster"
    CLOUD = "gcp"

    def _build(self, cluster: Cluster) -> tuple[pulumi.Input[str], dict[str, pulumi.Resource], pulumi.Input[str]]:
        project = pulumi.Config("gcp").require("project")
        self.gcp_provider = gcp.Provider(
            f"{cluster.name}-gcp", project=project, opts=pulumi.ResourceOptions(parent=self)
        )
        child = self.child(self.gcp_provider)
        self.node_account = gcp.serviceaccount.Account(
            f"{cluster.name}-nodes",
            account_id=node_account_id(cluster.name),
            display_name=f"gpu-fleet nodes of {cluster.name}",
            opts=child,
        )
        node_role = gcp.projects.IAMMember(
            f"{cluster.name}-nodes-role", project=project, role=NODE_ROLE, member=self.node_account.member, opts=child
        )
        secrets_key, key_grant = self._secrets_key(cluster, project)
        self.cluster = gcp.container.Cluster(
            cluster.name,
            name=cluster.name,
            location=cluster.location,
            description=cluster.description or None,
            min_master_version=cluster.kubernetes_version,
            release_channel={"channel": "REGULAR"},
            remove_default_node_pool=True,
            initial_node_count=1,
            networking_mode="VPC_NATIVE",
            ip_allocation_policy={},
            workload_identity_config={"workload_pool": f"{project}.svc.id.goog"},
            # Dataplane V2 (eBPF) enforces NetworkPolicy by itself; it is chosen at creation only
            # (cloud.google.com/kubernetes-engine/docs/concepts/dataplane-v2).
            datapath_provider="ADVANCED_DATAPATH",
            database_encryption={"state": "ENCRYPTED", "key_name": secrets_key.id},
            enable_shielded_nodes=True,
            **self._api_access(cluster),
            node_config={"service_account": self.node_account.email, "oauth_scopes": OAUTH_SCOPES},
            deletion_protection=self.settings.protect,  # GKE's own guard follows gpu-fleet:protect too
            # GKE takes no scale-down delay, only a profile: OPTIMIZE_UTILIZATION removes unneeded nodes sooner than
            # BALANCED (GKE docs "Cluster autoscaler", autoscaling profiles); node auto-provisioning stays off.
            cluster_autoscaling={"enabled": False, "autoscaling_profile": autoscaling_profile(cluster)},
            resource_labels={"gpu-fleet-cluster": cluster.name},
            opts=self.protected(
                self.gcp_provider, ignore_changes=["nodeConfig", "initialNodeCount"], depends_on=[node_role, key_grant]
            ),
        )
        self.system_pool = gcp.container.NodePool(
            f"{cluster.name}-system",
            name="system",
            cluster=self.cluster.name,
            location=cluster.location,
            initial_node_count=cluster.system_pool.min_nodes,
            autoscaling={
                "total_min_node_count": cluster.system_pool.min_nodes,
                "total_max_node_count": cluster.system_pool.max_nodes,
                "location_policy": "BALANCED",
            },
            management={"auto_repair": True, "auto_upgrade": True},
            node_config={
                "machine_type": cluster.system_pool.machine_type,
                "service_account": self.node_account.email,
                "oauth_scopes": OAUTH_SCOPES,
                "workload_metadata_config": {"mode": "GKE_METADATA"},
                "shielded_instance_config": {"enable_secure_boot": True, "enable_integrity_monitoring": True},
                "labels": cluster.system_selector,  # what the fleet's services select
            },
            opts=self.child(self.gcp_provider, ignore_changes=["nodeCount", "initialNodeCount"]),
        )
        pools = {pool.key: self._gpu_pool(cluster, pool) for pool in cluster.all_pools}
        kubeconfig = exec_kubeconfig(
            cluster.name,
            self.cluster.endpoint,
            self.cluster.master_auth.cluster_ca_certificate,  # type: ignore[union-attr]
            "gke-gcloud-auth-plugin",
            [],
        )
        return kubeconfig, pools, self.cluster.name

    def _secrets_key(self, cluster: Cluster, project: str) -> tuple[gcp.kms.CryptoKey, pulumi.Resource]:
        """The Cloud KMS key that encrypts the cluster's Secrets, and the grant that lets the project's GKE service
        agent use it (the cluster must wait for both)."""
        region = gcp_region(cluster.location or "")
        ring = gcp.kms.KeyRing(
            f"{cluster.name}-secrets",
            name=f"{cluster.name}-secrets",
            location=region,
            opts=self.protected(self.gcp_provider),  # key rings cannot be deleted; keys only disabled
        )
        key = gcp.kms.CryptoKey(
            f"{cluster.name}-secrets",
            name="kubernetes-secrets",
            key_ring=ring.id,
            rotation_period=KEY_ROTATION,
            opts=self.protected(self.gcp_provider),
        )
        number = gcp.organizations.get_project_output(
            project_id=project, opts=pulumi.InvokeOutputOptions(parent=self, provider=self.gcp_provider)
        ).number
        agent = gcp.kms.CryptoKeyIAMMember(
            f"{cluster.name}-secrets-gke",
            crypto_key_id=key.id,
            role=KMS_ROLE,
            member=pulumi.Output.concat(
                "serviceAccount:service-", number, "@container-engine-robot.iam.gserviceaccount.com"
            ),
            opts=self.child(self.gcp_provider),
        )
        return key, agent

    def _api_access(self, cluster: Cluster) -> dict[str, Any]:
        """Who reaches the control plane and the nodes: the authorised networks of ``gpu-fleet:apiAllowedCidrs``
        (Google's own ranges excluded); private nodes (no public address: internal IPs only, egress to image
        registries through a Cloud NAT) unless the stack opts out with ``gpu-fleet:publicNodes``; and with
        ``gpu-fleet:privateApiEndpoint`` a private endpoint as well. Private nodes need a VPC-native cluster, which
        this one is (cloud.google.com/kubernetes-engine/docs/how-to/legacy/network-isolation)."""
        settings = self.settings
        access: dict[str, Any] = {}
        # authorised networks always, but for a stack that opens its endpoint (gpu-fleet:openApiEndpoint): with no
        # range listed, only the cluster's own network reaches the API (Google's public ranges excluded too)
        if settings.api_allowed_cidrs or settings.private_api_endpoint or not settings.open_api_endpoint:
            access["master_authorized_networks_config"] = {
                "cidr_blocks": [
                    {"cidr_block": c, "display_name": "gpu-fleet:apiAllowedCidrs"} for c in settings.api_allowed_cidrs
                ],
                "gcp_public_cidrs_access_enabled": False,
            }
        if settings.private_api_endpoint or not settings.public_nodes:
            region = gcp_region(cluster.location or "")
            router = gcp.compute.Router(
                f"{cluster.name}-router", region=region, network="default", opts=self.child(self.gcp_provider)
            )
            gcp.compute.RouterNat(
                f"{cluster.name}-nat",
                router=router.name,
                region=region,
                nat_ip_allocate_option="AUTO_ONLY",
                source_subnetwork_ip_ranges_to_nat="ALL_SUBNETWORKS_ALL_IP_RANGES",
                opts=self.child(self.gcp_provider),
            )
            access["private_cluster_config"] = {
                "enable_private_nodes": True,
                "enable_private_endpoint": settings.private_api_endpoint,
                "master_ipv4_cidr_block": MASTER_CIDR,
            }
        return access

    def open_to_control_plane(self, name: str, ports: Sequence[int]) -> pulumi.Resource | None:
        """A private cluster's control plane reaches its nodes on 443 and 10250 only (GKE docs "Creating a private
        cluster", "Adding firewall rules for specific use cases"): a webhook or API service on another port (Kueue's
        9443 and 8082) times out, and the API server refuses what the webhook covers. An ingress rule from the control
        plane's range to the cluster's nodes (by their service account) on exactly those ports. Private nodes are
        the default, so only a cluster whose stack opts into public nodes (and keeps a public endpoint) needs none."""
        if self.stands_in or (self.settings.public_nodes and not self.settings.private_api_endpoint):
            return None
        return gcp.compute.Firewall(
            f"{self.spec.name}-{name}-from-control-plane",
            network="default",
            direction="INGRESS",
            source_ranges=[MASTER_CIDR],
            target_service_accounts=[self.node_account.email],
            allows=[{"protocol": "tcp", "ports": [str(p) for p in sorted(set(ports))]}],
            description=f"gpu-fleet: the control plane of {self.spec.name} reaches {name} on the nodes",
            opts=self.child(self.gcp_provider),
        )

    def gpu_exporter_values(self) -> dict[str, Any]:
        """GKE keeps the driver on the host and does not make the NVIDIA runtime the default: a pod that requests no
        GPU (the exporter) gets no NVML, and the stock chart logs "Cannot init NVML library; err:
        ERROR_LIBRARY_NOT_FOUND" while collecting nothing (NVIDIA/dcgm-exporter issues 484, 59; NVIDIA/gpu-operator
        issue 1532). As Google's own manifest does: mount the driver directory, point the loader at its libraries,
        run privileged to reach the devices, and name GPUs by device so pod labels resolve (dcgm-exporter 342)."""
        return {
            "extraHostVolumes": [{"name": "nvidia-install-dir-host", "hostPath": DRIVER_HOST_PATH}],
            "extraVolumeMounts": [
                DCGM_COUNTERS_MOUNT,
                {"name": "nvidia-install-dir-host", "mountPath": DRIVER_MOUNT_PATH, "readOnly": True},
            ],
            "extraEnv": [
                {"name": "LD_LIBRARY_PATH", "value": f"{DRIVER_MOUNT_PATH}/lib64"},
                {"name": "DCGM_EXPORTER_KUBERNETES_GPU_ID_TYPE", "value": "device-name"},
            ],
            "securityContext": {"privileged": True},
        }

    def _gpu_pool(self, cluster: Cluster, pool: GpuPool) -> gcp.container.NodePool:
        offer = pool.offer
        assert offer is not None  # the policy checks that gcp offers every card of a gcp cluster
        accelerators = (
            [
                {
                    "type": offer.accelerator_type,
                    "count": pool.accelerators_per_node,
                    "gpu_driver_installation_config": {"gpu_driver_version": "LATEST"},
                    **gpu_sharing(pool),
                }
            ]
            if offer.accelerator_type
            else []  # machine types such as ct5lp-hightpu-4t carry their accelerator
        )
        return gcp.container.NodePool(
            pool_resource_name(cluster, pool),
            name=pool.name,
            cluster=self.cluster.name,
            location=cluster.location,
            initial_node_count=pool.min_nodes,
            autoscaling={
                "total_min_node_count": pool.min_nodes,
                "total_max_node_count": pool.max_nodes,
                "location_policy": "ANY" if pool.spot else "BALANCED",
            },
            management={"auto_repair": True, "auto_upgrade": True},
            node_config={
                "machine_type": pool.machine_type,
                "spot": pool.spot,
                "guest_accelerators": accelerators,
                "labels": pool.labels,
                "taints": [upper_effect(t) for t in pool.taints],
                "service_account": self.node_account.email,
                "oauth_scopes": OAUTH_SCOPES,
                "workload_metadata_config": {"mode": "GKE_METADATA"},
                "disk_size_gb": 200,  # benchmark images are large
                "disk_type": "pd-ssd",
            },
            opts=self.child(self.gcp_provider, ignore_changes=["nodeCount", "initialNodeCount"]),
        )
