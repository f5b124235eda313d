"""What the cluster-autoscaler said about a pod (fleet/tools/doctor/autoscaler.py), with the cloud's fix."""

from __future__ import annotations

from fleet.tools.doctor.kube_objects import pool_nodes
from fleet.tools.doctor.messages import NOT_TRIGGERED, TRIGGERED
from tests.tools.doctor.support import leaf_of, pending_row
from tests.tools.doctor.world import event, healthy, make_pending, unschedulable


def test_insufficient_accelerator_with_not_trigger_scale_up_names_the_node_template(fleet, run_doctor):
    cluster = leaf_of(fleet)
    world = healthy(fleet, cluster)
    pool = cluster.pools[-1]  # at zero nodes in the healthy world
    assert not pool_nodes(pool, world.nodes)
    pod = make_pending(
        world,
        fleet,
        cluster,
        pool,
        conditions=unschedulable(
            "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector. preemption: 0/2 nodes are "
            "available: 2 Preemption is not helpful for scheduling."
        ),
    )
    world.events.append(
        event(pod, "FailedScheduling", "0/2 nodes are available: ...", "default-scheduler", "Warning", age=600)
    )
    world.events.append(
        event(
            pod,
            NOT_TRIGGERED,
            f"pod didn't trigger scale-up: 1 Insufficient {pool.resource}, 2 node(s) didn't match Pod's node "
            "affinity/selector",
            "cluster-autoscaler",
        )
    )
    result = run_doctor(world, cluster.name)
    assert result.status == 1
    row = pending_row(result, fleet, cluster, pool)
    assert "FAIL" in row and NOT_TRIGGERED in row
    assert f"node template of pool {pool.name} has no {pool.resource}" in row
    if cluster.cloud == "aws":
        expected = f"k8s.io/cluster-autoscaler/node-template/resources/{pool.resource}={pool.accelerators_per_node}"
        assert expected in row
    assert f"pulumi up --stack {cluster.name}" in row


def test_max_node_group_size_reached_points_at_max_nodes(fleet, run_doctor):
    cluster = leaf_of(fleet)
    world = healthy(fleet, cluster)
    pool = cluster.pools[-1]
    pod = make_pending(
        world, fleet, cluster, pool, conditions=unschedulable("0/2 nodes are available: 2 Insufficient x.")
    )
    world.events.append(
        event(
            pod,
            NOT_TRIGGERED,
            "pod didn't trigger scale-up: 1 max node group size reached",
            "cluster-autoscaler",
        )
    )
    row = pending_row(run_doctor(world, cluster.name), fleet, cluster, pool)
    assert "FAIL" in row and f"maximum of {pool.max_nodes} node(s)" in row
    assert f"max_nodes under clusters.{cluster.cloud}.{cluster.name}.gpus.{pool.card}" in row


def test_triggered_scale_up_is_a_wait_not_a_problem(fleet, run_doctor):
    cluster = leaf_of(fleet)
    world = healthy(fleet, cluster)
    pool = cluster.pools[-1]
    pod = make_pending(
        world,
        fleet,
        cluster,
        pool,
        conditions=unschedulable("0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector."),
    )
    world.events.append(
        event(
            pod,
            NOT_TRIGGERED,
            "pod didn't trigger scale-up: 1 in backoff after failed scale-up",
            "cluster-autoscaler",
            age=300,
        )
    )
    world.events.append(
        event(
            pod,
            TRIGGERED,
            f"pod triggered scale-up: [{{eks-{pool.name} 0->1 (max: {pool.max_nodes})}}]",
            "cluster-autoscaler",
            age=20,
        )
    )
    result = run_doctor(world, cluster.name)
    assert result.status == 0, result.out
    row = pending_row(result, fleet, cluster, pool)
    assert " ok " in row and "waiting for a new node" in row and "0->1" in row


def test_not_trigger_scale_up_for_memory_does_not_blame_the_pools_template(fleet, run_doctor):
    """The autoscaler sums its reasons over every node group: only the pod's own accelerator blames the template."""
    cluster = leaf_of(fleet)
    world = healthy(fleet, cluster)
    pool = cluster.pools[-1]
    pod = make_pending(
        world, fleet, cluster, pool, conditions=unschedulable("0/2 nodes are available: 2 Insufficient memory.")
    )
    world.events.append(
        event(pod, NOT_TRIGGERED, "pod didn't trigger scale-up: 3 Insufficient memory", "cluster-autoscaler")
    )
    row = pending_row(run_doctor(world, cluster.name), fleet, cluster, pool)
    assert "FAIL" in row and "no node group has room for the pod's request of memory" in row
    assert "node template" not in row and "workload.yaml" in row
