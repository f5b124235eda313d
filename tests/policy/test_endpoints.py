"""policy/gpufleet_policies/endpoints.py: the API endpoint and LoadBalancers admit listed ranges only; advisory in
previews, mandatory for deploys (policy/deploy-config.json)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import ROOT
from tests.policy.support import check, only, raw, reg

SERVICE = "kubernetes:core/v1:Service"


def _levels(findings, policy):
    return {f.level for f in only(findings, policy)}


def test_a_deploy_makes_both_mandatory():
    config = json.loads((ROOT / "policy" / "deploy-config.json").read_text(encoding="utf-8"))
    for policy in ("federation-source-ranges", "api-allow-list"):
        assert config[policy] == {"enforcementLevel": "mandatory"}


def test_the_gateway_with_its_ranges_passes_and_without_them_is_flagged(plans, session):
    gateway = reg(plans, "fix-gke", SERVICE, "-federation-gateway")
    assert gateway.inputs["spec"]["loadBalancerSourceRanges"] == ["10.10.0.0/16"]
    assert not only(check(session, gateway), "federation-source-ranges")
    for ranges in ([], ["0.0.0.0/0"], ["10.0.0.0/8", "::/0"]):
        gateway.inputs["spec"]["loadBalancerSourceRanges"] = ranges
        findings = check(session, gateway)
        assert _levels(findings, "federation-source-ranges") == {"advisory"}, ranges
        assert "gpu-fleet:federationSourceRanges[0]" in only(findings, "federation-source-ranges")[0].message
    del gateway.inputs["spec"]["loadBalancerSourceRanges"]
    assert only(check(session, gateway), "federation-source-ranges")


def test_a_hand_made_load_balancer_is_flagged_too(session):
    service = raw(SERVICE, "debug", {"metadata": {"name": "debug"}, "spec": {"type": "LoadBalancer", "ports": []}})
    assert only(check(session, service), "federation-source-ranges")
    service.inputs["spec"]["type"] = "ClusterIP"
    assert not only(check(session, service), "federation-source-ranges")


@pytest.mark.parametrize(
    ("stack", "type_", "name", "fenced"),
    [
        (
            "fix-gke",
            "gcp:container/cluster:Cluster",
            "fix-gke",
            {"masterAuthorizedNetworksConfig": {"cidrBlocks": [{"cidrBlock": "192.0.2.0/24"}]}},
        ),
        (
            "fix-gke",
            "gcp:container/cluster:Cluster",
            "fix-gke",
            {"privateClusterConfig": {"enablePrivateEndpoint": True, "enablePrivateNodes": True}},
        ),
        (
            "fix-eks",
            "aws:eks/cluster:Cluster",
            "fix-eks",
            {"vpcConfig": {"endpointPublicAccess": True, "publicAccessCidrs": ["192.0.2.0/24"]}},
        ),
        ("fix-eks", "aws:eks/cluster:Cluster", "fix-eks", {"vpcConfig": {"endpointPublicAccess": False}}),
        (
            "fix-aks",
            "azure-native:containerservice:ManagedCluster",
            "fix-aks",
            {"apiServerAccessProfile": {"authorizedIPRanges": ["192.0.2.0/24"]}},
        ),
        (
            "fix-aks",
            "azure-native:containerservice:ManagedCluster",
            "fix-aks",
            {"apiServerAccessProfile": {"enablePrivateCluster": True}},
        ),
    ],
)
def test_an_open_api_endpoint_is_flagged_until_fenced(plans, session, stack, type_, name, fenced):
    cluster = reg(plans, stack, type_, name)
    # the fixture stacks set no allow-list: EKS and GKE are closed then, unless gpu-fleet:openApiEndpoint opens them
    if stack == "fix-gke":
        assert not only(check(session, cluster), "api-allow-list")
        del cluster.inputs["masterAuthorizedNetworksConfig"]
    elif stack == "fix-eks":
        assert not only(check(session, cluster), "api-allow-list")
        cluster.inputs["vpcConfig"]["endpointPublicAccess"] = True
    findings = check(session, cluster)
    assert _levels(findings, "api-allow-list") == {"advisory"}
    assert "gpu-fleet:apiAllowedCidrs[0]" in only(findings, "api-allow-list")[0].message
    cluster.inputs.update(fenced)
    assert not only(check(session, cluster), "api-allow-list")
    if "vpcConfig" in fenced and fenced["vpcConfig"].get("publicAccessCidrs"):
        cluster.inputs["vpcConfig"]["publicAccessCidrs"] = ["0.0.0.0/0"]  # EKS's own default
        assert only(check(session, cluster), "api-allow-list")


def test_a_magnum_template_is_fenced_by_its_load_balancer_label(plans, session):
    template = reg(plans, "fix-magnum", "openstack:containerinfra/clusterTemplate:ClusterTemplate", "")
    assert only(check(session, template), "api-allow-list")
    template.inputs.setdefault("labels", {})["master_lb_allowed_cidrs"] = "192.0.2.0/24,198.51.100.0/24"
    assert not only(check(session, template), "api-allow-list")
