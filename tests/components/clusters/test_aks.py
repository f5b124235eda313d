"""AKS cluster component under the mock engine: what Azure would receive for each card."""

from __future__ import annotations

import pytest
import yaml
from pulumi.runtime import rpc

from components.clusters.aks import agent_pool_name
from tests.helpers import by_type, one, plan_one

POLICY = """
clusters:
  azure:
    aks-test:
      region: eastus
      central: true
      gpus:
        t4: {}
        a10: {max_nodes: 3}
        a100: {max_nodes: 1, spot: false}
"""
CONFIG = {"azure-native:subscriptionId": "00000000-0000-0000-0000-000000000001"}
POOL = "azure-native:containerservice:AgentPool"
GPU_TAINT = "nvidia.com/gpu=present:NoSchedule"
SPOT_TAINT = "kubernetes.azure.com/scalesetpriority=spot:NoSchedule"


@pytest.fixture(scope="module")
def plan(tmp_path_factory):
    return plan_one(tmp_path_factory.mktemp("aks"), POLICY, "aks-test", CONFIG)


def test_spot_gpu_pool_per_card_scales_from_zero_with_both_taints(plan):
    t4 = one(plan, POOL, "aks-test-gpu-t4").inputs
    assert t4["agentPoolName"] == "gput4"
    assert t4["mode"] == "User"
    assert t4["vmSize"] == "Standard_NC4as_T4_v3"
    assert t4["enableAutoScaling"] is True
    assert (t4["count"], t4["minCount"], t4["maxCount"]) == (0, 0, 4)
    assert t4["scaleSetPriority"] == "Spot"
    assert t4["scaleSetEvictionPolicy"] == "Delete"
    assert t4["spotMaxPrice"] == -1
    assert t4["nodeLabels"] == {"gpu": "t4", "nvidia.com/gpu.present": "true"}
    # Our taint in AKS spelling, plus the spot taint AKS adds itself (declared, so no drift).
    assert t4["nodeTaints"] == [GPU_TAINT, SPOT_TAINT]
    a10 = one(plan, POOL, "aks-test-gpu-a10").inputs
    assert (a10["agentPoolName"], a10["vmSize"], a10["maxCount"]) == ("gpua10", "Standard_NC8ads_A10_v4", 3)
    assert a10["nodeTaints"] == [GPU_TAINT, SPOT_TAINT]


def test_on_demand_pool_has_no_spot_settings_or_spot_taint(plan):
    a100 = one(plan, POOL, "aks-test-gpu-a100").inputs
    assert a100["vmSize"] == "Standard_NC24ads_A100_v4"
    assert a100["scaleSetPriority"] == "Regular"
    assert "scaleSetEvictionPolicy" not in a100 and "spotMaxPrice" not in a100
    assert a100["nodeTaints"] == [GPU_TAINT]
    assert (a100["minCount"], a100["maxCount"]) == (0, 1)


def test_pools_belong_to_the_cluster_and_leave_count_to_the_autoscaler(plan):
    pools = by_type(plan, POOL)
    assert len(pools) == 3
    assert all(p.ignore_changes == ["count"] for p in pools)
    assert all(p.inputs["resourceName"] == "aks-test" and p.inputs["resourceGroupName"] == "aks-test-rg" for p in pools)
    assert all(p.inputs["orchestratorVersion"] == "1.33" for p in pools)


def test_cluster_is_protected_with_identity_oidc_and_an_on_demand_system_pool(plan):
    (cluster,) = by_type(plan, "azure-native:containerservice:ManagedCluster")
    (group,) = by_type(plan, "azure-native:resources:ResourceGroup")
    assert cluster.protect is True and group.protect is True
    inputs = cluster.inputs
    assert inputs["kubernetesVersion"] == "1.33"
    assert inputs["location"] == "eastus"
    assert inputs["dnsPrefix"] == "aks-test"
    assert inputs["identity"] == {"type": "UserAssigned", "userAssignedIdentities": ["aks-test-identity-id"]}
    assert inputs["oidcIssuerProfile"] == {"enabled": True}
    assert inputs["securityProfile"]["workloadIdentity"] == {"enabled": True}
    (system,) = inputs["agentPoolProfiles"]
    assert system["mode"] == "System"
    assert system["vmSize"] == "Standard_D4s_v5"
    assert (system["enableAutoScaling"], system["minCount"], system["maxCount"]) == (True, 1, 3)
    assert "scaleSetPriority" not in system and "nodeTaints" not in system
    assert cluster.ignore_changes == ["agentPoolProfiles[0].count"]


def test_explicit_provider_from_region_and_subscription(plan):
    (provider,) = by_type(plan, "pulumi:providers:azure-native")
    assert provider.inputs["location"] == "eastus"
    assert provider.inputs["subscriptionId"] == CONFIG["azure-native:subscriptionId"]
    azure = [r for r in plan.registrations if r.type.startswith("azure-native:")]
    assert azure and all(r.provider.startswith(provider.urn + "::") for r in azure)


def test_kubeconfig_is_the_user_credential_signing_in_through_the_azure_cli_and_secret(plan):
    assert rpc.is_rpc_secret(plan.exports["kubeconfig"])
    config = yaml.safe_load(rpc.unwrap_rpc_secret(plan.exports["kubeconfig"]))
    (user,) = config["users"]
    assert user["user"]["exec"]["command"] == "kubelogin"
    # no device code (nobody to type it in CI): the Azure CLI's login, for AKS's Entra ID server application
    assert user["user"]["exec"]["args"] == [
        "get-token",
        "--login",
        "azurecli",
        "--server-id",
        "6dae42f8-4368-4678-94ff-3960e28e3630",
    ]
    assert config["clusters"][0]["cluster"]["certificate-authority-data"]
    (provider,) = by_type(plan, "pulumi:providers:kubernetes")
    assert rpc.is_rpc_secret(provider.inputs["kubeconfig"])
    assert [
        f.message for f in plan.findings if not any(k in f.message for k in ("apiAllowedCidrs", "alertReceiver"))
    ] == []


def test_hardening_entra_id_no_local_accounts_cilium_and_kms(plan):
    (cluster,) = by_type(plan, "azure-native:containerservice:ManagedCluster")
    inputs = cluster.inputs
    assert inputs["aadProfile"] == {"managed": True, "enableAzureRBAC": True}
    assert inputs["disableLocalAccounts"] is True
    assert inputs["networkProfile"] == {
        "networkPlugin": "azure",
        "networkPluginMode": "overlay",
        "networkDataplane": "cilium",
        "networkPolicy": "cilium",
    }
    kms = inputs["securityProfile"]["azureKeyVaultKms"]
    assert kms["enabled"] is True and "/keys/kubernetes-secrets/" in kms["keyId"]
    (vault,) = by_type(plan, "azure-native:keyvault:Vault")
    assert vault.inputs["properties"]["enableRbacAuthorization"] is True
    assert vault.inputs["properties"]["enablePurgeProtection"] is True
    assert 3 <= len(vault.inputs["vaultName"]) <= 24
    grants = {r.name: r.inputs for r in by_type(plan, "azure-native:authorization:RoleAssignment")}
    assert grants["aks-test-secrets-crypto-user"]["roleDefinitionId"].endswith("/12338af0-0e69-4776-bea7-57ae8d297424")
    assert grants["aks-test-secrets-crypto-user"]["principalId"] == "00000000-0000-0000-0000-000000000004"
    admin = grants["aks-test-deployer-admin"]
    assert admin["roleDefinitionId"].endswith("/b1ff04bb-8a4e-4dc4-8eb5-8693973ce19b")
    assert admin["scope"] == "aks-test-id"  # this cluster only
    assert "apiServerAccessProfile" not in inputs or inputs["apiServerAccessProfile"] == {}


def test_api_server_allow_list_and_private_cluster(tmp_path):
    (tmp_path / "a").mkdir()
    allowed = plan_one(tmp_path / "a", POLICY, "aks-test", {**CONFIG, "gpu-fleet:apiAllowedCidrs": ["192.0.3.0/24"]})
    (cluster,) = by_type(allowed, "azure-native:containerservice:ManagedCluster")
    assert cluster.inputs["apiServerAccessProfile"] == {"authorizedIPRanges": ["192.0.3.0/24"]}
    private = plan_one(tmp_path, POLICY, "aks-test", {**CONFIG, "gpu-fleet:privateApiEndpoint": True})
    (cluster,) = by_type(private, "azure-native:containerservice:ManagedCluster")
    assert cluster.inputs["apiServerAccessProfile"] == {"enablePrivateCluster": True}


def test_agent_pool_names_follow_the_aks_rule():
    assert agent_pool_name("h100") == "gpuh100"
    assert agent_pool_name("tpu-v5e") == "gputpuv5e"
    with pytest.raises(ValueError, match="at most 12 characters"):
        agent_pool_name("rtx-pro-6000x")
    with pytest.raises(ValueError, match="lower-case letters"):
        agent_pool_name("A100")
    # a card's CI pool (fleet/model/runners/ci_pools.py): 'ci' after the card, still within 12 characters
    assert agent_pool_name("a100", ci=True) == "gpua100ci"
    assert agent_pool_name("tpu-v5e", ci=True) == "gputpuv5eci"
    with pytest.raises(ValueError, match="'ci' for its CI pool"):
        agent_pool_name("rtx6000x", ci=True)


def test_audit_log_and_auto_upgrade_by_default(plan):
    cluster = one(plan, "azure-native:containerservice:ManagedCluster", "aks-test").inputs
    assert cluster["autoUpgradeProfile"] == {"upgradeChannel": "patch", "nodeOSUpgradeChannel": "NodeImage"}
    (workspace,) = by_type(plan, "azure-native:operationalinsights:Workspace")
    assert workspace.inputs["retentionInDays"] == 90
    (setting,) = by_type(plan, "azure-native:monitor:DiagnosticSetting")
    assert setting.inputs["logs"] == [{"category": "kube-audit-admin", "enabled": True}]
    assert setting.inputs["resourceUri"] and setting.inputs["workspaceId"]  # the cluster's, the workspace's


def test_a_site_may_opt_out_of_audit_logs_and_auto_upgrade(tmp_path):
    config = {**CONFIG, "gpu-fleet:auditLogs": False, "gpu-fleet:autoUpgrade": "false"}
    bare = plan_one(tmp_path, POLICY, "aks-test", config)
    assert "autoUpgradeProfile" not in one(bare, "azure-native:containerservice:ManagedCluster", "aks-test").inputs
    assert not by_type(bare, "azure-native:monitor:DiagnosticSetting")
    assert not by_type(bare, "azure-native:operationalinsights:Workspace")
