"""Magnum cluster component under the mock engine: what OpenStack would receive for each card."""

from __future__ import annotations

import tomllib

import pytest
from pulumi.runtime import rpc

from components.clusters.magnum import (
    GPU_AUTOSCALER,
    UPSTREAM_AUTOSCALER_IMAGE,
    MagnumSettings,
    autoscaler_minor_problem,
    node_selector,
)
from components.clusters.version_tags import tag_minor
from components.kubernetes.images import magnum_autoscaler_image
from fleet.model.core.errors import InputError
from fleet.model.core.registry import DEFAULT_REGISTRY
from tests.helpers import MAGNUM_SITE, by_type, one, plan_one

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
MAGNUM = MAGNUM_SITE
CONFIG = {"openstack:cloud": "cern", "gpu-fleet:magnum": MAGNUM, "gpu-fleet:storageClass": "standard"}
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
    assert [
        f.message for f in plan.findings if not any(k in f.message for k in ("apiAllowedCidrs", "alertReceiver"))
    ] == []


def test_template_labels_are_driver_parameters(plan):
    (template,) = by_type(plan, TEMPLATE)
    t = template.inputs
    assert (t["coe"], t["image"], t["keypairId"]) == ("kubernetes", "fedora-coreos-40", "kp")
    assert (t["externalNetworkId"], t["masterFlavor"], t["flavor"]) == ("ext-net", "m2.medium", "m2.large")
    assert t["networkDriver"] == "calico"
    labels = t["labels"]
    assert all(isinstance(v, str) for v in labels.values())
    assert labels["auto_scaling_enabled"] == "true"
    assert "nvidia_gpu_enabled" not in labels  # not an upstream Magnum label: a site's extraLabels may add it
    assert labels["monitoring_enabled"] == "false"
    assert labels["container_runtime"] == "containerd"
    # the site's tags, never derived from the policy's Kubernetes version
    assert (labels["kube_tag"], labels["autoscaler_tag"]) == ("v1.28.9-rancher1", "v1.28.0")
    assert (labels["min_node_count"], labels["max_node_count"]) == ("1", "3")
    plugins = labels["admission_control_list"].split(",")
    assert "ExtendedResourceToleration" in plugins
    assert {"NodeRestriction", "ServiceAccount", "ResourceQuota", "MutatingAdmissionWebhook"} <= set(plugins)


def test_cluster_is_protected_and_built_from_the_template(plan):
    (cluster,) = by_type(plan, "openstack:containerinfra/cluster:Cluster")
    assert cluster.protect is True
    # node_count belongs to Magnum's autoscaler; the template id never changes in place (the heat driver refuses
    # upgrades), so a new template leaves the cluster where it is
    assert cluster.ignore_changes == ["nodeCount", "clusterTemplateId"]
    (template,) = by_type(plan, TEMPLATE)
    c = cluster.inputs
    assert c["name"] == "os-test"
    assert c["clusterTemplateId"] == f"{template.name}-id"
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
    # besides the one of its Kubernetes, too old for Kueue to queue its probes (test_benchmark_queue.py)
    (warning,) = [
        f for f in plan.findings if f.level == "warning" and "gpu-fleet:" not in f.message and "Kueue" not in f.message
    ]
    assert "gpu-t4" in warning.message and "scale-from-zero" in warning.message
    assert "nvidia.com/gpu" in warning.message


def test_three_masters_get_a_load_balancer(tmp_path):
    plan = plan_one(tmp_path, POLICY, "os-test", {**CONFIG, "gpu-fleet:magnum": {**MAGNUM, "masterCount": 3}})
    (cluster,) = by_type(plan, "openstack:containerinfra/cluster:Cluster")
    assert cluster.inputs["masterCount"] == 3
    assert by_type(plan, TEMPLATE)[0].inputs["masterLbEnabled"] is True


def test_missing_magnum_config_names_the_keys(tmp_path):
    with pytest.raises(InputError, match="missing keypair"):
        plan_one(tmp_path, POLICY, "os-test", {**CONFIG, "gpu-fleet:magnum": {**MAGNUM, "keypair": ""}})


@pytest.mark.parametrize("key", ["kubeTag", "autoscalerTag"])
def test_kube_and_autoscaler_tags_are_required_site_settings(tmp_path, key):
    """No default the driver might not be able to pull: each is named, located, with an example."""
    site = {k: v for k, v in MAGNUM.items() if k != key}
    with pytest.raises(InputError) as caught:
        plan_one(tmp_path, POLICY, "os-test", {**CONFIG, "gpu-fleet:magnum": site})
    (problem,) = caught.value.problems
    assert problem.file.endswith("Pulumi.os-test.yaml") and problem.line > 1
    assert problem.path == f"config.gpu-fleet:magnum.{key}" and f"missing {key}, a site setting" in problem.message
    assert "e.g. v1.28" in problem.message


@pytest.mark.parametrize(
    ("kube", "autoscaler", "refused"),
    [
        ("v1.31.5-rancher1", "v1.28.0", True),  # the sample's old mismatch
        ("v1.31.5-rancher1", "v1.31.5", False),
        ("v1.28.9-rancher1", "v1.28.0", False),
        ("v1.28.9", "v1.0", True),  # Magnum Stein's default, from before the CA followed Kubernetes' minors
        ("v1.30.0-rancher1", "v1.31.0", True),  # newer is no better: each CA minor is tested with its own
        ("latest", "v1.28.0", False),  # a tag naming no version: nothing claimed
    ],
)
def test_the_autoscalers_minor_must_be_the_clusters(tmp_path, kube, autoscaler, refused):
    """kubernetes/autoscaler cluster-autoscaler README, "Releases": the CA's minor matches the control plane's."""
    assert (autoscaler_minor_problem(kube, autoscaler) is not None) == refused
    site = {**MAGNUM, "kubeTag": kube, "autoscalerTag": autoscaler}
    if not refused:
        assert MagnumSettings.problems(site) == []
        return
    with pytest.raises(InputError) as caught:
        plan_one(tmp_path, POLICY, "os-test", {**CONFIG, "gpu-fleet:magnum": site})
    (problem,) = caught.value.problems
    assert problem.path == "config.gpu-fleet:magnum.autoscalerTag" and problem.line > 1
    assert f"runs Kubernetes {kube[1:5]}" in problem.message and UPSTREAM_AUTOSCALER_IMAGE in problem.message


def test_tag_minor_reads_kube_and_autoscaler_tags():
    assert tag_minor("v1.31.5-rancher1") == (1, 31)
    assert tag_minor("v1.28.0") == (1, 28)
    assert tag_minor("1.29") == (1, 29)
    assert tag_minor("latest") is None and tag_minor("v1") is None


def test_bad_magnum_settings_are_reported_together(tmp_path):
    site = {**MAGNUM, "masterCount": 2, "colour": "blue", "extraLabels": {"nvidia_gpu_enabled": True}}
    with pytest.raises(InputError) as caught:
        plan_one(tmp_path, POLICY, "os-test", {**CONFIG, "gpu-fleet:magnum": site})
    messages = {p.path: p.message for p in caught.value.problems}
    assert set(messages) == {
        "config.gpu-fleet:magnum.masterCount",
        "config.gpu-fleet:magnum.colour",
        "config.gpu-fleet:magnum.extraLabels",
    }


def test_site_labels_are_merged_into_the_template(tmp_path):
    site = {**MAGNUM, "extraLabels": {"nvidia_gpu_enabled": "true", "cinder_csi_enabled": "true"}}
    plan = plan_one(tmp_path, POLICY, "os-test", {**CONFIG, "gpu-fleet:magnum": site})
    labels = by_type(plan, TEMPLATE)[0].inputs["labels"]
    assert labels["nvidia_gpu_enabled"] == "true" and labels["cinder_csi_enabled"] == "true"


def test_a_changed_template_is_a_new_content_named_template(tmp_path, plan):
    """Magnum refuses to update a template a cluster uses: a policy change must make a new one, retained."""
    (before,) = by_type(plan, TEMPLATE)
    assert before.name == before.inputs["name"] and before.name.startswith("os-test-")
    assert before.retain_on_delete is True
    bigger = POLICY.replace("central: true", "central: true\n      system_pool: {max_nodes: 5}")
    (after,) = by_type(plan_one(tmp_path, bigger, "os-test", CONFIG), TEMPLATE)
    assert after.inputs["labels"]["max_node_count"] == "5"
    assert after.name != before.name  # a new resource (new URN), not an update of the old one
    (tmp_path / "again").mkdir()
    (again,) = by_type(plan_one(tmp_path / "again", POLICY, "os-test", CONFIG), TEMPLATE)
    assert again.name == before.name  # the same content, the same name: no churn


def test_gpu_node_groups_get_their_own_autoscaler(plan):
    """Magnum's own autoscaler scales only default-worker: the fleet's discovers the GPU roles."""
    (release,) = [r for r in by_type(plan, "kubernetes:helm.sh/v3:Release") if r.inputs["name"] == GPU_AUTOSCALER]
    values = release.inputs["values"]
    assert release.inputs["chart"] == "cluster-autoscaler" and release.inputs["namespace"] == "kube-system"
    assert values["cloudProvider"] == "magnum"
    assert values["autoDiscovery"] == {"clusterName": "os-test-id", "roles": ["gpu-t4", "gpu-v100"]}
    assert values["cloudConfigPath"] == "/etc/kubernetes/cloud-config"  # written on masters by the heat driver
    assert values["nodeSelector"] == {"node-role.kubernetes.io/control-plane": ""}
    assert {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"} in values[
        "tolerations"
    ]
    # the site's image and tag (docker.io/openstackmagnum/cluster-autoscaler:v1.28.0), as the fleet's copy
    # (the test's policy names no registry: the default one)
    upstream = "docker.io/openstackmagnum/cluster-autoscaler:v1.28.0"
    assert values["image"] == magnum_autoscaler_image(upstream, DEFAULT_REGISTRY)
    assert values["image"]["repository"].startswith(DEFAULT_REGISTRY + "/") and values["image"]["tag"] == "v1.28.0"
    # beside Magnum's own autoscaler: its own lease and status, or the two would elect one leader between them
    assert values["extraArgs"]["leader-elect-resource-name"] == GPU_AUTOSCALER
    assert values["extraArgs"]["status-config-map-name"] != "cluster-autoscaler-status"
    # ... which the chart's roles do not grant (they name the defaults): granted here, or it never leads
    granted = {(tuple(r["resources"]), tuple(r["resourceNames"])) for r in values["rbac"]["additionalRules"]}
    assert (("leases",), (values["extraArgs"]["leader-elect-resource-name"],)) in granted
    assert (("configmaps",), (values["extraArgs"]["status-config-map-name"],)) in granted
    # min/max come from the node groups, which carry the policy's; discovery needs a maximum on each
    for group in by_type(plan, GROUP):
        assert group.inputs["maxNodeCount"] >= group.inputs["minNodeCount"] >= 1
    assert "pulumi:providers:kubernetes::os-test-k8s::" in release.provider


def test_jobs_select_the_node_group_role():
    assert node_selector("t4") == {"magnum.openstack.org/role": "gpu-t4"}


def test_pod_security_admission_and_api_allow_list_on_the_masters_load_balancer(tmp_path):
    plan = plan_one(tmp_path, POLICY, "os-test", {**CONFIG, "gpu-fleet:apiAllowedCidrs": ["188.184.0.0/15"]})
    (template,) = by_type(plan, "openstack:containerinfra/clusterTemplate:ClusterTemplate")
    # the heat driver's --admission-control list enables only what it names: PodSecurity must be in it
    assert "PodSecurity" in template.inputs["labels"]["admission_control_list"].split(",")
    assert template.inputs["labels"]["master_lb_allowed_cidrs"] == "188.184.0.0/15"  # the heat driver
    assert template.inputs["labels"]["api_master_lb_allowed_cidrs"] == "188.184.0.0/15"  # magnum-capi-helm
    assert template.inputs["masterLbEnabled"] is True  # the allow-list lives on the load balancer
    assert template.inputs["networkDriver"] == "calico"  # Calico enforces NetworkPolicy
    assert not [f for f in plan.findings if "apiAllowedCidrs" in f.message]


def test_a_runner_gets_a_ci_node_group_of_its_own_role_which_the_gpu_autoscaler_discovers(tmp_path):
    """Magnum node groups carry no labels of ours: the CI group's role (gpu-<card>-ci, the nodes' role label) is what
    the runner's jobs select; benchmarks select gpu-<card>, so they never land there, and the group's nodes register
    with the CI taint, which only the jobs tolerate."""
    runners = "runners:\n  clusters:\n    os-test:\n      t4: {concurrency: 2}\n"
    plan = plan_one(tmp_path, POLICY + runners, "os-test", CONFIG)
    ci = one(plan, GROUP, "os-test-gpu-t4-ci").inputs
    assert (ci["name"], ci["role"], ci["flavorId"]) == ("gpu-t4-ci", "gpu-t4-ci", "g2.xlarge")
    assert (ci["minNodeCount"], ci["nodeCount"], ci["maxNodeCount"]) == (1, 1, 2)  # no scale-up from zero here
    # its nodes register with the CI taint (the group's kubelet_options), merged with the cluster's labels
    assert ci["labels"] == {"kubelet_options": "--register-with-taints=gpu-fleet.io/ci=true:NoSchedule"}
    assert ci["mergeLabels"] is True
    assert "labels" not in one(plan, GROUP, "os-test-gpu-t4").inputs  # a card's own group: the cluster's labels
    (release,) = [r for r in by_type(plan, "kubernetes:helm.sh/v3:Release") if r.inputs["name"] == GPU_AUTOSCALER]
    assert release.inputs["values"]["autoDiscovery"]["roles"] == ["gpu-t4", "gpu-v100", "gpu-t4-ci"]
    (runner,) = [r for r in by_type(plan, "kubernetes:helm.sh/v3:Release") if r.inputs["name"] == "gitlab-runner-t4"]
    kube = tomllib.loads(runner.inputs["values"]["runners"]["config"])["runners"][0]["kubernetes"]
    assert kube["node_selector"] == {"magnum.openstack.org/role": "gpu-t4-ci"}


def test_a_ci_groups_taint_keeps_the_sites_kubelet_options(tmp_path):
    """The group's kubelet_options label replaces the site's (extraLabels) on its nodes: the site's options stay."""
    runners = "runners:\n  clusters:\n    os-test:\n      t4: {concurrency: 2}\n"
    site = {**MAGNUM, "extraLabels": {"kubelet_options": "--max-pods=60"}}
    plan = plan_one(tmp_path, POLICY + runners, "os-test", {**CONFIG, "gpu-fleet:magnum": site})
    ci = one(plan, GROUP, "os-test-gpu-t4-ci").inputs
    assert ci["labels"] == {"kubelet_options": "--max-pods=60 --register-with-taints=gpu-fleet.io/ci=true:NoSchedule"}
