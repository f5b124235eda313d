"""Azure Kubernetes Service: a resource group, a managed cluster with a system pool, and one GPU agent pool per card."""

from __future__ import annotations

import base64
import hashlib
import re
from typing import Any

import pulumi
import pulumi_azure_native as azure_native
import yaml
from pulumi_azure_native import (
    authorization,
    containerservice,
    keyvault,
    managedidentity,
    monitor,
    operationalinsights,
    resources,
)

from components.clusters.cluster import GpuCluster
from components.clusters.taints import aks_taint
from fleet.model.core.clouds.aks import gpu_instance_profile
from fleet.model.core.clusters import Cluster, pool_resource_name
from fleet.model.core.pools import GpuPool

# AKS agent-pool names: lower-case letters and digits, starting with a letter, at most 12 characters
# for Linux pools (6 for Windows). The name is part of every node's name and of the VM scale set's name.
AGENT_POOL_NAME = re.compile(r"^[a-z][a-z0-9]{0,11}$")
SYSTEM_POOL_NAME = "system"
# Built-in role definitions (learn.microsoft.com/azure/role-based-access-control/built-in-roles, Containers and
# Security): the identity running `pulumi up` administers the cluster through Azure RBAC (local accounts are off),
# and the cluster's identity uses the Key Vault key that encrypts its Secrets (AKS docs "Add KMS etcd encryption").
AKS_RBAC_CLUSTER_ADMIN = "b1ff04bb-8a4e-4dc4-8eb5-8693973ce19b"
KEY_VAULT_CRYPTO_USER = "12338af0-0e69-4776-bea7-57ae8d297424"
# Auto-upgrade (AKS docs "Automatically upgrade an AKS cluster": channel "patch" takes the newest patch of the
# cluster's minor version, which the policy keeps; node OS channel "NodeImage" takes weekly node images; values of
# pulumi_azure_native containerservice UpgradeChannel and NodeOSUpgradeChannel). A minor upgrade stays the policy's.
AUTO_UPGRADE = {"upgrade_channel": "patch", "node_os_upgrade_channel": "NodeImage"}
# The control plane's audit log: the resource-log category kube-audit-admin (AKS docs "Monitor AKS", resource logs:
# kube-audit without get and list events, so far smaller), kept in a Log Analytics workspace of the cluster's.
AUDIT_CATEGORY = "kube-audit-admin"
AUDIT_RETENTION_DAYS = 90


def agent_pool_name(card: str, ci: bool = False) -> str:
    """The AKS agent-pool name of ``card``'s pool: ``gpu`` + the card without dashes (``a10`` -> ``gpua10``), and
    ``ci`` after it for the card's CI pool (``gpua10ci``).

    Raises ``ValueError`` naming the rule when the result is not a valid AKS pool name (a card name
    longer than 9 characters, 7 for a CI pool, or with characters other than lower-case letters, digits and dashes).
    """
    name = "gpu" + card.replace("-", "") + ("ci" if ci else "")
    if not AGENT_POOL_NAME.match(name):
        raise ValueError(
            f"card {card!r} gives AKS agent-pool name {name!r}: AKS pool names must be lower-case letters and "
            "digits, start with a letter, and have at most 12 characters ('gpu' + the card without dashes"
            + (" + 'ci' for its CI pool)" if ci else ")")
        )
    return name


def role_definition(subscription_id: pulumi.Input[str], role: str) -> pulumi.Output[str]:
    """The resource id of built-in role ``role`` (a GUID) in the subscription."""
    return pulumi.Output.concat(
        "/subscriptions/", subscription_id, "/providers/Microsoft.Authorization/roleDefinitions/", role
    )


def key_vault_name(cluster: str) -> str:
    """A Key Vault name for the cluster: 3 to 24 letters, digits and dashes, globally unique, so the cluster name
    (cut) and a hash of it."""
    digest = hashlib.sha256(cluster.encode()).hexdigest()[:6]
    return f"{cluster[:15].rstrip('-')}-kv-{digest}"


def azurecli_kubeconfig(text: str) -> str:
    """The cluster-user kubeconfig of an Entra ID cluster (``format=exec``: kubelogin), signing in with the Azure
    CLI's login instead of an interactive device code: what CI (azure/login) and a user's ``az login`` provide
    (kubelogin's ``--login azurecli`` mode; the server id stays the one AKS returned)."""
    config = yaml.safe_load(text)
    for user in config.get("users") or []:
        exec_ = (user.get("user") or {}).get("exec")
        if not exec_:
            continue
        args = list(exec_.get("args") or [])
        server = args[args.index("--server-id") + 1] if "--server-id" in args else None
        if server is None:
            raise ValueError("the AKS kubeconfig's kubelogin arguments have no --server-id")
        exec_["args"] = ["get-token", "--login", "azurecli", "--server-id", server]
    return yaml.safe_dump(config, sort_keys=False)


def mig_profile(pool: GpuPool) -> dict[str, str]:
    """The agent pool's ``gpu_instance_profile`` argument for a MIG pool (the model's ``gpu_instance_profile``)."""
    profile = gpu_instance_profile(pool)
    return {"gpu_instance_profile": profile} if profile else {}


class AksCluster(GpuCluster):
    """An AKS cluster in its own resource group, with a system pool and one spot GPU pool per card.

    Choices:
      - Explicit ``azure-native`` provider (location from the policy's region, subscription from the
        ``azure-native:subscriptionId`` stack config when set); stacks disable default providers.
      - The resource group and the managed cluster are protected (deleting the group deletes the cluster).
      - A user-assigned identity, the OIDC issuer and workload identity are on, so in-cluster services can get
        Azure tokens without secrets. Secrets are encrypted in etcd with a key of the cluster's own Key Vault
        (KMS), which that identity may use.
      - Entra ID with Azure RBAC and local accounts disabled: there is no admin certificate; the identity that
        runs ``pulumi up`` gets "Azure Kubernetes Service RBAC Cluster Admin" on this cluster only.
      - Azure CNI overlay with the Cilium dataplane, which enforces NetworkPolicy; the API server accepts
        ``gpu-fleet:apiAllowedCidrs`` only, or is private (``gpu-fleet:privateApiEndpoint``).
      - The system pool (mode System, on-demand, autoscaled within the policy's system-pool bounds) is
        the cluster's one inline ``agentPoolProfiles`` entry. It is not tainted ``CriticalAddonsOnly``,
        because the fleet's own services (Prometheus, exporters) run on it. Its ``count`` belongs to the
        autoscaler and is ignored.
      - Each card gets a separate ``AgentPool`` in mode User: the card's VM size, autoscaling from
        ``min_nodes`` (0 by default: AKS's autoscaler knows each pool's VM size, so scale-from-zero works)
        to ``max_nodes``, ``count`` ignored after creation (the autoscaler owns it), node labels from the
        policy (``gpu=<card>`` ...), and our accelerator taint in AKS spelling.
      - Spot pools use ``scale_set_priority=Spot``, ``scale_set_eviction_policy=Delete`` (evicted VMs
        free their quota) and ``spot_max_price=-1`` (pay up to the on-demand price, evicted only for
        capacity). AKS adds ``kubernetes.azure.com/scalesetpriority=spot:NoSchedule`` to spot pools on its
        own; we declare it too (from the catalogue's spot taints), or every refresh would show drift.
      - AKS installs the NVIDIA driver on GPU pools by default but not the device plugin: that comes from
        the Kubernetes side of the fleet. Priority, price, taints and VM size are fixed at creation.
      - Agent-pool names are ``gpu`` + the card without dashes (``gput4``, ``gpua100``), and ``ci`` after it for a
        card's CI pool (``gput4ci``, fleet/model/runners/ci_pools.py): AKS allows only lower-case letters and digits, at
        most 12 characters; a card that does not fit fails the plan.
      - The kubeconfig is the cluster-user credential (``listManagedClusterUserCredentials``, exec format),
        signing in with kubelogin through the Azure CLI's login (``az login``, or azure/login in CI), kept
        secret. The Kubernetes provider is keyed on the cluster name, so a rotated credential does
        not replace it.
    """

    TYPE = "gpufleet:index:AksCluster"
    CLOUD = "azure"

    def _build(self, cluster: Cluster) -> tuple[pulumi.Input[str], dict[str, pulumi.Resource], pulumi.Input[str]]:
        assert cluster.region  # the policy requires a region for azure clusters
        pool_names = self._pool_names(cluster)
        self.azure_provider = azure_native.Provider(
            f"{cluster.name}-azure",
            location=cluster.region,
            subscription_id=pulumi.Config("azure-native").get("subscriptionId"),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.resource_group = resources.ResourceGroup(
            f"{cluster.name}-rg",
            resource_group_name=f"{cluster.name}-rg",
            location=cluster.region,
            tags={"gpu-fleet-cluster": cluster.name},
            opts=self.protected(self.azure_provider),
        )
        client = authorization.get_client_config_output(
            opts=pulumi.InvokeOutputOptions(parent=self, provider=self.azure_provider)
        )
        identity, key_id, key_grant = self._secrets_key(cluster, client)
        system = cluster.system_pool
        self.cluster = containerservice.ManagedCluster(
            cluster.name,
            resource_name_=cluster.name,
            resource_group_name=self.resource_group.name,
            location=cluster.region,
            kubernetes_version=cluster.kubernetes_version,
            dns_prefix=cluster.name,
            enable_rbac=True,
            # Entra ID sign-in with Azure RBAC, and no local accounts: no long-lived admin certificate exists
            # (AKS docs "Disable local accounts"; "Use Azure RBAC for Kubernetes authorization").
            aad_profile={"managed": True, "enable_azure_rbac": True},
            disable_local_accounts=True,
            identity={"type": "UserAssigned", "user_assigned_identities": [identity.id]},
            oidc_issuer_profile={"enabled": True},
            security_profile={
                "workload_identity": {"enabled": True},
                "azure_key_vault_kms": {"enabled": True, "key_id": key_id, "key_vault_network_access": "Public"},
            },
            # Azure CNI overlay with the Cilium dataplane, which enforces NetworkPolicy (AKS docs "Configure Azure
            # CNI Powered by Cilium"; network_policy "cilium" requires network_dataplane "cilium").
            network_profile={
                "network_plugin": "azure",
                "network_plugin_mode": "overlay",
                "network_dataplane": "cilium",
                "network_policy": "cilium",
            },
            api_server_access_profile=self._api_access(),
            **({"auto_upgrade_profile": AUTO_UPGRADE} if self.settings.auto_upgrade else {}),
            # The policy's scale_down_after, in whole minutes as AKS takes it (both default to 10m).
            auto_scaler_profile={
                "scale_down_unneeded_time": cluster.scale_down_after,
                "scale_down_delay_after_add": cluster.scale_down_after,
            },
            agent_pool_profiles=[
                {
                    "name": SYSTEM_POOL_NAME,
                    "mode": "System",
                    "type": "VirtualMachineScaleSets",
                    "os_type": "Linux",
                    "vm_size": system.machine_type,
                    "count": system.min_nodes,
                    "enable_auto_scaling": True,
                    "min_count": system.min_nodes,
                    "max_count": system.max_nodes,
                    "node_labels": cluster.system_selector,  # what the fleet's services select
                }
            ],
            tags={"gpu-fleet-cluster": cluster.name},
            opts=self.protected(
                self.azure_provider, ignore_changes=["agentPoolProfiles[0].count"], depends_on=[key_grant]
            ),
        )
        admin = authorization.RoleAssignment(
            f"{cluster.name}-deployer-admin",
            principal_id=client.object_id,
            role_definition_id=role_definition(client.subscription_id, AKS_RBAC_CLUSTER_ADMIN),
            scope=self.cluster.id,
            description="gpu-fleet: the identity that runs pulumi up manages the cluster's Kubernetes objects",
            opts=self.child(self.azure_provider),
        )
        self.admin_grant = admin
        if self.settings.audit_logs:
            self._audit_log(cluster)
        pools: dict[str, pulumi.Resource] = {
            pool.key: self._gpu_pool(cluster, pool, pool_names[pool.key]) for pool in cluster.all_pools
        }
        credentials = containerservice.list_managed_cluster_user_credentials_output(
            resource_group_name=self.resource_group.name,
            resource_name=self.cluster.name,
            format="exec",
            opts=pulumi.InvokeOutputOptions(parent=self, provider=self.azure_provider, depends_on=[admin]),
        )
        kubeconfig = pulumi.Output.secret(
            credentials.kubeconfigs.apply(
                lambda kcs: azurecli_kubeconfig(base64.b64decode(kcs[0].value).decode("utf-8"))
            )
        )
        return kubeconfig, pools, self.cluster.name

    def _audit_log(self, cluster: Cluster) -> None:
        """The cluster's audit log (kube-audit-admin) to a Log Analytics workspace in its resource group."""
        workspace = operationalinsights.Workspace(
            f"{cluster.name}-logs",
            resource_group_name=self.resource_group.name,
            location=cluster.region,
            retention_in_days=AUDIT_RETENTION_DAYS,
            sku={"name": "PerGB2018"},
            tags={"gpu-fleet-cluster": cluster.name},
            opts=self.child(self.azure_provider),
        )
        monitor.DiagnosticSetting(
            f"{cluster.name}-audit",
            name="gpu-fleet-audit",
            resource_uri=self.cluster.id,
            workspace_id=workspace.id,
            logs=[{"category": AUDIT_CATEGORY, "enabled": True}],
            opts=self.child(self.azure_provider),
        )

    def _api_access(self) -> dict[str, Any]:
        """The API server's allow-list (``gpu-fleet:apiAllowedCidrs``) or a private cluster."""
        if self.settings.private_api_endpoint:
            return {"enable_private_cluster": True}
        if self.settings.api_allowed_cidrs:
            return {"authorized_ip_ranges": self.settings.api_allowed_cidrs}
        return {}

    def _secrets_key(
        self, cluster: Cluster, client: Any
    ) -> tuple[pulumi.Resource, pulumi.Output[str], pulumi.Resource]:
        """The cluster's user-assigned identity, the versioned id of the Key Vault key that encrypts its Secrets
        (KMS etcd encryption), and the grant that lets the identity use the key."""
        child = self.child(self.azure_provider)
        identity = managedidentity.UserAssignedIdentity(
            f"{cluster.name}-identity",
            resource_name_=f"{cluster.name}-identity",
            resource_group_name=self.resource_group.name,
            location=cluster.region,
            opts=child,
        )
        vault = keyvault.Vault(
            f"{cluster.name}-secrets",
            vault_name=key_vault_name(cluster.name),
            resource_group_name=self.resource_group.name,
            location=cluster.region,
            properties={
                "tenant_id": client.tenant_id,
                "sku": {"family": "A", "name": "standard"},
                "enable_rbac_authorization": True,
                "enable_purge_protection": True,
                "soft_delete_retention_in_days": 90,
            },
            opts=self.protected(self.azure_provider),
        )
        key = keyvault.Key(
            f"{cluster.name}-secrets",
            key_name="kubernetes-secrets",
            vault_name=vault.name,
            resource_group_name=self.resource_group.name,
            properties={"kty": "RSA", "key_size": 2048},
            opts=self.protected(self.azure_provider),
        )
        grant = authorization.RoleAssignment(
            f"{cluster.name}-secrets-crypto-user",
            principal_id=identity.principal_id,
            principal_type="ServicePrincipal",
            role_definition_id=role_definition(client.subscription_id, KEY_VAULT_CRYPTO_USER),
            scope=vault.id,
            description="gpu-fleet: the AKS cluster encrypts its Secrets with this vault's key",
            opts=child,
        )
        return identity, key.key_uri_with_version, grant

    @staticmethod
    def _pool_names(cluster: Cluster) -> dict[str, str]:
        """Agent-pool name per pool key (card pools and CI pools), checked for validity and for collisions (``a-10``
        and ``a10``)."""
        names: dict[str, str] = {}
        for pool in cluster.all_pools:
            name = agent_pool_name(pool.card, pool.ci)
            clash = next((key for key, other in names.items() if other == name), None)
            if clash is not None:
                raise ValueError(
                    f"cluster {cluster.name}: pools {clash!r} and {pool.key!r} give the same AKS agent-pool "
                    f"name {name!r}"
                )
            names[pool.key] = name
        return names

    def _gpu_pool(self, cluster: Cluster, pool: GpuPool, name: str) -> containerservice.AgentPool:
        # AKS taints every spot pool itself: declare that taint too, so the pool does not drift.
        spot_taints = cluster.facts.spot_taints if pool.spot else []
        spot = (
            {"scale_set_priority": "Spot", "scale_set_eviction_policy": "Delete", "spot_max_price": -1}
            if pool.spot
            else {"scale_set_priority": "Regular"}
        )
        return containerservice.AgentPool(
            pool_resource_name(cluster, pool),
            agent_pool_name=name,
            resource_group_name=self.resource_group.name,
            resource_name_=self.cluster.name,
            mode="User",
            type="VirtualMachineScaleSets",
            os_type="Linux",
            orchestrator_version=cluster.kubernetes_version,
            vm_size=pool.machine_type,
            count=pool.min_nodes,
            enable_auto_scaling=True,
            min_count=pool.min_nodes,
            max_count=pool.max_nodes,
            node_labels=pool.labels,
            node_taints=[aks_taint(t) for t in (*pool.taints, *spot_taints)],
            tags={"gpu-fleet-cluster": cluster.name, "gpu-fleet-card": pool.card},
            **spot,  # type: ignore[arg-type]
            **mig_profile(pool),
            opts=self.child(self.azure_provider, ignore_changes=["count"]),
        )
