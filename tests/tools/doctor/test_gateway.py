"""A leaf's federation gateway row (fleet/tools/doctor/gateway.py)."""

from __future__ import annotations

from kubernetes import client as k8s

from tests.tools.doctor.support import leaf_of, row_of
from tests.tools.doctor.world import healthy


def test_a_gateway_without_an_address_is_a_problem_on_a_leaf(fleet, run_doctor):
    cluster = leaf_of(fleet)
    world = healthy(fleet, cluster)
    world.services[0].status = k8s.V1ServiceStatus(load_balancer=k8s.V1LoadBalancerStatus())
    row = row_of(run_doctor(world, cluster.name).out, "federation gateway")
    assert "FAIL" in row and "no address" in row and "describe svc federation-gateway" in row
