"""policy/gpufleet_policies/clusters.py: every cloud's cluster is protected."""

from __future__ import annotations

import pytest

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
