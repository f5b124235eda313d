"""policy/gpufleet_policies/clusters.py: every cloud's cluster is protected."""

from __future__ import annotations

import copy

import pytest

from fleet.model.core.clouds import RULES, cloud_rules
from tests.policy.support import assert_violation, check, only, reg


@pytest.mark.parametrize(
    ("stack", "type_"),
    [
        ("fix-gke", "gcp:container/cluster:Cluster"),
        ("fix-eks", "aws:eks/cluster:Cluster"),
        ("fix-aks", "azure-native:containerservice:ManagedCluster"),
        ("fix-magnum", "openstack:containerinfra/cluster:Cluster"),
    ],
)
def test_unprotected_cluster(plans, session, stack, type_):
    r = reg(plans, stack, type_, stack)
    assert only(check(session, r), "cluster-protected") == []
    r.protect = False
    assert_violation(check(session, r), "cluster-protected", "protect=True", urn=r.urn)


def test_the_types_each_cloud_module_names_are_what_its_component_registers(plans):
    """The pack finds clusters, API allow-lists and node pools by the engine types of fleet/model/core/clouds/: each is
    what that cloud's component really registers in a plan of the fixture fleet."""
    seen = set()
    for plan in plans.values():
        rules = cloud_rules(plan.outputs_for_reference()[0]["cloud"])
        registered = {r.type for r in plan.registrations}
        named = {rules.cluster_type, rules.api_endpoint_type, rules.pool_type} - {""}
        assert named <= registered, plan.stack
        seen.add(rules.name)
    assert {name for name, rules in RULES.items() if rules.builds_pools} <= seen


def test_every_iam_role_carries_the_boundary(plans, session):
    roles = [r for r in plans["fix-eks"].registrations if r.type == "aws:iam/role:Role"]
    assert len(roles) >= 4  # the control plane, the nodes, the VPC CNI, the autoscaler
    for role in roles:
        assert role.inputs["permissionsBoundary"] == "arn:aws:iam::123456789012:policy/gpu-fleet-boundary", role.name
        assert only(check(session, role), "iam-role-boundary") == []
    bare = copy.deepcopy(roles[0])  # the plans are shared: change a copy
    del bare.inputs["permissionsBoundary"]
    assert_violation(check(session, bare), "iam-role-boundary", "gpu-fleet-boundary", urn=bare.urn)
