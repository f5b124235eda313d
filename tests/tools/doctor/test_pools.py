"""The GPU pools' rows (fleet/tools/doctor/pools.py) and which nodes are a pool's
(fleet/tools/doctor/kube_objects.py pool_nodes)."""

from __future__ import annotations

from fleet.tools.doctor.kube_objects import pool_nodes
from tests.tools.doctor.support import leaf_of, row_of
from tests.tools.doctor.world import ago, gpu_node, healthy


def test_a_node_with_no_allocatable_accelerator_is_a_problem(fleet, run_doctor):
    cluster = leaf_of(fleet)
    world = healthy(fleet, cluster)
    pool = cluster.pools[0]
    world.nodes[1] = gpu_node(pool, world.nodes[1].metadata.name, allocatable=0)
    result = run_doctor(world, cluster.name)
    assert result.status == 1
    row = row_of(result.out, f"pool {pool.name} ")
    assert "FAIL" in row and f"advertise 0 {pool.resource}" in row
    assert world.nodes[1].metadata.name in row and "device plugin" in row


def test_a_node_that_just_joined_without_its_cards_is_a_wait(fleet, run_doctor):
    cluster = leaf_of(fleet)
    world = healthy(fleet, cluster)
    pool = cluster.pools[0]
    name = world.nodes[1].metadata.name
    world.nodes[1] = gpu_node(pool, name, allocatable=0)
    world.nodes[1].metadata.creation_timestamp = ago(120)
    result = run_doctor(world, cluster.name)
    row = row_of(result.out, f"pool {pool.name} ")
    assert result.status == 0 and "ok" in row and f"{name} joined less than 10 min ago" in row


def test_a_cards_pool_does_not_count_its_sweep_pools_nodes(fleet):
    cluster = next(c for c in fleet.clusters.values() if c.sweep_pools)
    sweep = cluster.sweep_pools[0]
    own = cluster.pool(sweep.card)
    nodes = [gpu_node(own, "own-1"), gpu_node(sweep, "sweep-1")]
    assert [n.metadata.name for n in pool_nodes(own, nodes)] == ["own-1"]
    assert [n.metadata.name for n in pool_nodes(sweep, nodes)] == ["sweep-1"]


def test_a_cards_pool_does_not_count_its_ci_pools_nodes(fleet):
    cluster = next(c for c in fleet.clusters.values() if c.ci_pools)
    ci = cluster.ci_pools[0]
    own = cluster.pool(ci.card)
    nodes = [gpu_node(own, "own-1"), gpu_node(ci, "ci-1")]
    assert [n.metadata.name for n in pool_nodes(own, nodes)] == ["own-1"]
    assert [n.metadata.name for n in pool_nodes(ci, nodes)] == ["ci-1"]


def test_a_shared_pools_node_advertising_whole_cards_names_the_plugins_configuration(fleet, run_doctor):
    cluster = fleet.clusters["fix-eks"]  # its t4 pool is time-sliced by our device plugin
    pool = cluster.pool("t4")
    assert pool.sharing is not None and pool.units_per_node == 2 and pool.needs_device_plugin
    world = healthy(fleet, cluster)
    node = next(n for n in world.nodes if n.metadata.name.startswith(pool.name))
    node.status.capacity[pool.resource] = node.status.allocatable[pool.resource] = "1"  # whole cards: unconfigured
    result = run_doctor(world, cluster.name)
    row = row_of(result.out, f"pool {pool.name}")
    assert "advertise fewer nvidia.com/gpu than the pool's 2 (time-slicing-2)" in row
    assert "nvidia.com/device-plugin.config=time-slicing-2" in row
    # the healthy world, whose node advertises its slices, has no such problem
    assert "advertise fewer" not in row_of(run_doctor(healthy(fleet, cluster), cluster.name).out, f"pool {pool.name}")
