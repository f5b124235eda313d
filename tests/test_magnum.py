"""Magnum cluster component under the mock engine: what OpenStack would receive for each card."""

from __future__ import annotations

import pytest
from pulumi.runtime import rpc

from components.magnum import node_selector
from tests.helpers import by_type, one, plan_one

POLICY = """
clusters:
  openstack:
    os-test:
      region: cern
      central: true
      gpus:
        t4: {max_nodes: 3}
        v100: {}
"""
OPT_IN_ZERO = """
clusters:
  openstack:
    os-test:
      region: cern
      central: true
      gpus:
        t4: {min_nodes: 0, max_nodes: 2}
        v100: {}
"""
MAGNUM = {"image": "fedora-coreos-40", "keypair": "kp", "externalNetwork": "ext-net", "masterFlavor": "m2.medium"}
CONFIG = {"openstack:cloud": "cern", "gpu-fleet:magnum": MAGNUM}
GROUP = "openstack:containerinfra/nodeGroup:NodeGroup"
TEMPLATE = "openstack:containerinfra/clusterTemplate:ClusterTemplate"


@pytest.fixture(scope="module")
def plan(tmp_path_factory):
    return plan_one(tmp_path_factory.mktemp("magnum"), POLICY, "os-test", CONFIG)


def test_node_group_per_card_with_flavor_role_and_min_one_by_default(plan):
    t4 = one(plan, GROUP, "os-test-gpu-t4").inputs
    assert t4["name"] == "gpu-t4"
    assert t4["flavorId"] == "g2.xlarge"
    assert t4["role"] == "gpu-t4"
    assert (t4["minNodeCount"], t4["nodeCount"], t4["maxNodeCount"]) == (1, 1, 3)
    v100 = one(plan, GROUP, "os-test-gpu-v100").inputs
    assert (v100["name"], v100["flavorId"], v100["role"]) == ("gpu-v100", "g1.xlarge", "gpu-v100")
    assert v100["minNodeCount"] == 1 and v100["nodeCount"] == 1
    groups = by_type(plan, GROUP)
    assert len(groups) == 2
    assert all(g.ignore_changes == ["nodeCount"] for g in groups)
    assert all(g.inputs["clusterId"] == "os-test-id" for g in groups)
    assert plan.findings == []


def test_template_labels_are_driver_parameters(plan):
    (template,) = by_type(plan, TEMPLATE)
    t = template.inputs
    assert (t["coe"], t["image"], t["keypairId"]) == ("kubernetes", "fedora-coreos-40", "kp")
    assert (t["externalNetworkId"], t["masterFlavor"], t["flavor"]) == ("ext-net", "m2.medium", "m2.large")
    assert t["networkDriver"] == "calico"
    labels = t["labels"]
    assert all(isinstance(v, str) for v in labels.values())
    assert labels["auto_scaling_enabled"] == "true"
    assert labels["nvidia_gpu_enabled"] == "true"
    assert labels["monitoring_enabled"] == "false"
    assert labels["container_runtime"] == "containerd"
    assert (labels["kube_tag"], labels["autoscaler_tag"]) == ("v1.33.0", "v1.33.0")
    assert (labels["min_node_count"], labels["max_node_count"]) == ("1", "3")
    plugins = labels["admission_control_list"].split(",")
    assert "ExtendedResourceToleration" in plugins
    assert {"NodeRestriction", "ServiceAccount", "ResourceQuota", "MutatingAdmissionWebhook"} <= set(plugins)


def test_cluster_is_protected_and_built_from_the_template(plan):
    (cluster,) = by_type(plan, "openstack:containerinfra/cluster:Cluster")
    assert cluster.protect is True
    assert cluster.ignore_changes == ["nodeCount"]
    c = cluster.inputs
    assert c["name"] == "os-test"
    assert c["clusterTemplateId"] == "os-test-template-id"
    assert (c["masterCount"], c["nodeCount"], c["mergeLabels"]) == (1, 1, True)


def test_explicit_provider_from_cloud_and_region(plan):
    (provider,) = by_type(plan, "pulumi:providers:openstack")
    assert (provider.inputs["cloud"], provider.inputs["region"]) == ("cern", "cern")
    resources = [r for r in plan.registrations if r.type.startswith("openstack:")]
    assert len(resources) == 4 and all(r.provider.startswith(provider.urn + "::") for r in resources)


def test_kubeconfig_is_the_raw_config_and_secret(plan):
    assert rpc.is_rpc_secret(plan.exports["kubeconfig"])
    assert "https://192.0.2.10:6443" in rpc.unwrap_rpc_secret(plan.exports["kubeconfig"])
    (provider,) = by_type(plan, "pulumi:providers:kubernetes")
    assert rpc.is_rpc_secret(provider.inputs["kubeconfig"])


def test_min_zero_is_an_explicit_opt_in_that_warns(tmp_path):
    plan = plan_one(tmp_path, OPT_IN_ZERO, "os-test", CONFIG)
    t4 = one(plan, GROUP, "os-test-gpu-t4").inputs
    # Starts with one node (within [min, max]) so the autoscaler sees a real GPU node before scaling to 0.
    assert (t4["minNodeCount"], t4["nodeCount"], t4["maxNodeCount"]) == (0, 1, 2)
    assert one(plan, GROUP, "os-test-gpu-v100").inputs["minNodeCount"] == 1
    (warning,) = [f for f in plan.findings if f.level == "warning"]
    assert "gpu-t4" in warning.message and "scale-from-zero" in warning.message
    assert "nvidia.com/gpu" in warning.message


def test_three_masters_get_a_load_balancer(tmp_path):
    plan = plan_one(tmp_path, POLICY, "os-test", {**CONFIG, "gpu-fleet:magnum": {**MAGNUM, "masterCount": 3}})
    (cluster,) = by_type(plan, "openstack:containerinfra/cluster:Cluster")
    assert cluster.inputs["masterCount"] == 3
    assert by_type(plan, TEMPLATE)[0].inputs["masterLbEnabled"] is True


def test_missing_magnum_config_names_the_keys(tmp_path):
    with pytest.raises(Exception, match="missing keypair"):
        plan_one(tmp_path, POLICY, "os-test", {**CONFIG, "gpu-fleet:magnum": {**MAGNUM, "keypair": ""}})


def test_jobs_select_the_node_group_role():
    assert node_selector("t4") == {"magnum.openstack.org/role": "gpu-t4"}
