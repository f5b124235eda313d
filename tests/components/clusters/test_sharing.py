"""GPU sharing under the mock engine, one cloud at a time: GKE's guest accelerator time-sharing and MIG partitions,
AKS's MIG profile, and where we run the NVIDIA device plugin (EKS, AKS) its per-node configurations and the EKS
autoscaler template counting time slices; the benchmark quota counts what the nodes advertise."""

from __future__ import annotations

import pytest
import yaml

from fleet.model.core.card_sharing import DEVICE_PLUGIN_CONFIG_LABEL
from fleet.tools.engine.plan import StackPlan
from tests.helpers import by_type, plan_one

POLICY = """
clusters:
  gcp:
    gke-sh:
      zone: us-central1-a
      gpus:
        t4: {sharing: {time_slicing: 5}}
        a100: {sharing: {mig: 3g.20gb}, max_nodes: 3}
  azure:
    aks-sh:
      region: westeurope
      gpus:
        t4: {sharing: {time_slicing: 2}}
        a100: {sharing: {mig: 2g.20gb}}
  aws:
    eks-sh:
      region: us-east-1
      central: true
      gpus:
        t4: {sharing: {time_slicing: 3}}
        l4: {}
"""
CONFIG = {
    "gke-sh": {"gcp:project": "sharing", "gcp:zone": "us-central1-a"},
    "aks-sh": {
        "azure-native:location": "westeurope",
        "azure-native:subscriptionId": "11111111-2222-3333-4444-555555555555",
    },
}
RELEASE = "kubernetes:helm.sh/v3:Release"


@pytest.fixture(scope="module")
def plans(tmp_path_factory: pytest.TempPathFactory) -> dict[str, StackPlan]:
    return {s: plan_one(tmp_path_factory.mktemp(s), POLICY, s, c) for s, c in CONFIG.items()}


def plugin_configs(plan: StackPlan) -> dict[str, dict]:
    (release,) = [r for r in by_type(plan, RELEASE) if r.inputs["name"] == "nvidia-device-plugin"]
    config = release.inputs["values"]["config"]
    assert config["default"] == "default"
    return {name: yaml.safe_load(text) for name, text in config["map"].items()}


def quota(plan: StackPlan) -> dict[str, str]:
    (found,) = [
        r for r in by_type(plan, "kubernetes:core/v1:ResourceQuota") if r.inputs["metadata"]["name"] == "benchmarks"
    ]
    return found.inputs["spec"]["hard"]


def test_gke_pools_share_with_gkes_own_settings(plans):
    pools = {
        r.inputs["name"]: r.inputs["nodeConfig"] for r in by_type(plans["gke-sh"], "gcp:container/nodePool:NodePool")
    }
    t4 = pools["gpu-t4"]["guestAccelerators"][0]
    assert t4["gpuSharingConfig"] == {"gpuSharingStrategy": "TIME_SHARING", "maxSharedClientsPerGpu": 5}
    assert pools["gpu-a100"]["guestAccelerators"][0]["gpuPartitionSize"] == "3g.20gb"
    assert pools["gpu-t4"]["labels"]["gpu-fleet.io/sharing"] == "time-slicing-5"
    assert DEVICE_PLUGIN_CONFIG_LABEL not in pools["gpu-t4"]["labels"]  # GKE runs its own plugin
    assert not [r for r in by_type(plans["gke-sh"], RELEASE) if r.inputs["name"] == "nvidia-device-plugin"]
    # 4 nodes (the default max_nodes) x 1 T4 x 5 clients, 3 nodes x 1 A100 x 2 partitions of 3g.20gb
    assert quota(plans["gke-sh"])["requests.nvidia.com/gpu"] == str(4 * 5 + 3 * 2)


def test_aks_pools_take_the_mig_profile_and_our_plugins_configuration(plans):
    pools = {
        r.inputs["agentPoolName"]: r.inputs for r in by_type(plans["aks-sh"], "azure-native:containerservice:AgentPool")
    }
    assert pools["gpua100"]["gpuInstanceProfile"] == "MIG2g"
    assert "gpuInstanceProfile" not in pools["gput4"]
    assert pools["gput4"]["nodeLabels"][DEVICE_PLUGIN_CONFIG_LABEL] == "time-slicing-2"
    assert pools["gpua100"]["nodeLabels"][DEVICE_PLUGIN_CONFIG_LABEL] == "mig-2g.20gb"
    configs = plugin_configs(plans["aks-sh"])
    assert configs["default"] == {"version": "v1", "flags": {"migStrategy": "none"}}
    assert configs["mig-2g.20gb"]["flags"]["migStrategy"] == "single"
    slicing = configs["time-slicing-2"]["sharing"]["timeSlicing"]
    assert slicing == {"failRequestsGreaterThanOne": True, "resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}


def test_eks_counts_time_slices_in_the_autoscaler_template(tmp_path):
    policy = POLICY.replace("central: true", "central: false").replace("gke-sh:", "gke-sh:\n      central: true")
    plan = plan_one(tmp_path, policy, "eks-sh", {"aws:region": "us-east-1"})
    tags = {r.name: r.inputs["tag"] for r in by_type(plan, "aws:autoscaling/tag:Tag")}
    assert tags["eks-sh-gpu-t4-asg-resources-nvidia-com-gpu"]["value"] == "3"
    assert tags["eks-sh-gpu-l4-asg-resources-nvidia-com-gpu"]["value"] == "1"
    assert tags["eks-sh-gpu-t4-asg-label-nvidia-com-device-plugin-config"]["value"] == "time-slicing-3"
    assert set(plugin_configs(plan)) == {"default", "time-slicing-3"}


def test_each_time_sliced_pool_advertises_its_own_number_of_slices(tmp_path):
    """Our device plugin's configuration gives each time-sliced pool the replicas its policy says, not one number for
    all: a pool of 4 slices whose nodes advertised 2 would leave half its pods Pending."""
    policy = "clusters:\n  aws:\n    eks-ts:\n      region: us-east-1\n      central: true\n      gpus:\n"
    policy += "        t4: {sharing: {time_slicing: 3}}\n        a10g: {sharing: {time_slicing: 4}}\n"
    plan = plan_one(tmp_path, policy, "eks-ts", {"aws:region": "us-east-1"})
    configs = plugin_configs(plan)
    assert set(configs) == {"default", "time-slicing-3", "time-slicing-4"}
    for slices in (3, 4):
        sharing = configs[f"time-slicing-{slices}"]["sharing"]["timeSlicing"]
        assert sharing["resources"] == [{"name": "nvidia.com/gpu", "replicas": slices}]
    tags = {r.name: r.inputs["tag"]["value"] for r in by_type(plan, "aws:autoscaling/tag:Tag")}
    assert tags["eks-ts-gpu-t4-asg-label-nvidia-com-device-plugin-config"] == "time-slicing-3"
    assert tags["eks-ts-gpu-a10g-asg-label-nvidia-com-device-plugin-config"] == "time-slicing-4"
    assert quota(plan)["requests.nvidia.com/gpu"] == str(4 * 1 * 3 + 4 * 1 * 4)  # max_nodes x cards x slices


def test_an_unshared_cluster_keeps_its_plugin_unconfigured(tmp_path):
    policy = "clusters:\n  aws:\n    eks-w:\n      region: us-east-1\n      central: true\n      gpus: [t4]\n"
    plan = plan_one(tmp_path, policy, "eks-w", {"aws:region": "us-east-1"})
    (release,) = [r for r in by_type(plan, RELEASE) if r.inputs["name"] == "nvidia-device-plugin"]
    assert "config" not in release.inputs["values"]
