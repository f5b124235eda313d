"""Why the scheduler cannot place a pod (fleet/tools/doctor/scheduling.py): an untolerated taint, the node
controller's taint on a lost node, nodes without the pool's label, a pod too big for its machine, nothing adding
a node."""

from __future__ import annotations

import pytest
from kubernetes import client as k8s

from fleet.tools.doctor.kube_objects import pool_nodes
from fleet.tools.doctor.messages import TRIGGERED
from tests.tools.doctor.support import leaf_of, pending_row, row_of
from tests.tools.doctor.world import ago, event, fit_error, gpu_node, healthy, job_pod, make_pending, unschedulable


def test_an_untolerated_taint_on_the_pools_node_is_named_with_its_fix(fleet, run_doctor):
    cluster = leaf_of(fleet)
    world = healthy(fleet, cluster)
    pool = cluster.pools[0]
    world.nodes[1] = gpu_node(
        pool,
        world.nodes[1].metadata.name,
        taints=[
            *[k8s.V1Taint(key=t.key, value=t.value, effect=t.effect) for t in pool.taints],
            k8s.V1Taint(key="example.com/maintenance", value="true", effect="NoSchedule"),
        ],
    )
    make_pending(
        world,
        fleet,
        cluster,
        pool,
        conditions=unschedulable(
            "0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 1 node(s) had untolerated "
            "taint(s). preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
        ),
    )
    result = run_doctor(world, cluster.name)
    assert result.status == 1
    row = next(
        row_of(result.out, f"benchmark {b.workload.name} on {pool.card}")
        for b in fleet.benchmarks(cluster)
        if b.pool is pool and not b.schedule
    )
    assert "FAIL" in row and "Pending" in row
    assert "example.com/maintenance=true:NoSchedule" in row and world.nodes[1].metadata.name in row
    assert f"spot_taints of {cluster.cloud} in fleet/model/core/catalogue.yaml" in row
    assert f"pulumi up --stack {cluster.name}" in row
    # the fleet's own accelerator taint is tolerated: it is not blamed
    assert all(t.as_string() not in row.split("problem:")[1].split("fix:")[0] for t in pool.taints)


def test_a_pool_at_zero_with_no_autoscaler_event_says_nothing_adds_a_node(fleet, run_doctor):
    cluster = leaf_of(fleet)
    world = healthy(fleet, cluster)
    pool = cluster.pools[-1]
    make_pending(
        world,
        fleet,
        cluster,
        pool,
        conditions=unschedulable("0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector."),
    )
    row = pending_row(run_doctor(world, cluster.name), fleet, cluster, pool)
    assert "FAIL" in row and "nothing is adding a node" in row and "autoscaler" in row
    # a pod this young has simply not been seen by the autoscaler yet
    world = healthy(fleet, cluster)
    make_pending(
        world,
        fleet,
        cluster,
        pool,
        created=ago(20),
        conditions=unschedulable("0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector."),
    )
    result = run_doctor(world, cluster.name)
    assert result.status == 0, result.out


def test_gpu_nodes_without_the_pools_label_are_a_node_selector_mismatch(fleet, run_doctor):
    cluster = leaf_of(fleet)
    world = healthy(fleet, cluster)
    pool = cluster.pools[-1]
    stray = gpu_node(pool, "ip-10-0-3-7", labels={})
    for key in pool.node_selector:
        del stray.metadata.labels[key]
    world.nodes.append(stray)
    make_pending(
        world,
        fleet,
        cluster,
        pool,
        conditions=unschedulable(
            "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector. preemption: 0/3 nodes are "
            "available: 3 Preemption is not helpful for scheduling."
        ),
    )
    result = run_doctor(world, cluster.name)
    assert result.status == 1
    row = pending_row(result, fleet, cluster, pool)
    selector = ",".join(f"{k}={v}" for k, v in sorted(pool.node_selector.items()))
    assert "FAIL" in row and "ip-10-0-3-7" in row and f"not the label {selector}" in row
    assert "puts them back" in row or "label" in row.split("fix:")[1]


def test_a_pod_too_big_for_its_machine_is_named_even_while_a_card_is_free(fleet, run_doctor):
    cluster = leaf_of(fleet)
    world = healthy(fleet, cluster)
    pool = cluster.pools[0]
    have = pool_nodes(pool, world.nodes)
    world.nodes += [gpu_node(pool, f"{pool.name}-node-{n + 1}") for n in range(len(have), pool.max_nodes)]
    # one node's cards are taken by another pod, the other node's card is free: the pod is too big for either
    busy = pool_nodes(pool, world.nodes)[0]
    busy.status.allocatable = {**busy.status.allocatable, pool.resource: "0"}
    pod = make_pending(
        world,
        fleet,
        cluster,
        pool,
        conditions=unschedulable(
            fit_error(
                len(world.nodes),
                {
                    "Insufficient cpu": pool.max_nodes,
                    "Insufficient memory": pool.max_nodes,
                    f"Insufficient {pool.resource}": 1,
                    "node(s) didn't match Pod's node affinity/selector": len(world.nodes) - pool.max_nodes,
                },
            )
        ),
    )
    # the nodes' allocatable is 8 CPU and 61Gi (gpu_node): the pod asks 10 CPU and 64Gi besides its card
    pod.spec.containers[0].resources = k8s.V1ResourceRequirements(
        requests={"cpu": "10", "memory": "64Gi"}, limits={pool.resource: "1"}
    )
    row = pending_row(run_doctor(world, cluster.name), fleet, cluster, pool)
    assert "FAIL" in row
    assert f"more than a node of pool {pool.name}" in row and "cpu 10 > 8" in row and "memory 64.00Gi > 61.00Gi" in row
    assert "never fits" in row and "workloads/" in row and "cpu_request" in row
    assert "are taken" not in row and "raise max_nodes" not in row


def test_a_pod_too_big_for_a_pool_at_zero_is_measured_against_the_machines_allocatable(fleet, run_doctor):
    cluster = next(c for c in fleet.clusters.values() if not c.central and c.cloud in ("gcp", "aws", "azure"))
    world = healthy(fleet, cluster)
    pool = next(p for p in cluster.pools if not pool_nodes(p, world.nodes))
    pod = make_pending(
        world, fleet, cluster, pool,
        conditions=unschedulable(fit_error(len(world.nodes), {"node(s) didn't match Pod's node affinity/selector": 1,
                                                              "Insufficient cpu": len(world.nodes) - 1})),
    )  # fmt: skip
    pod.spec.containers[0].resources = k8s.V1ResourceRequirements(requests={"cpu": "500"}, limits={pool.resource: "1"})
    row = pending_row(run_doctor(world, cluster.name), fleet, cluster, pool)
    assert "cpu 500 > " in row and f"a {pool.machine_type} node's allocatable" in row


@pytest.mark.parametrize(
    "reason",
    [
        "node(s) had untolerated taint {node.kubernetes.io/unreachable: }",  # kubernetes v1.31.2 to v1.34.1
        "node(s) had untolerated taint(s)",  # v1.35.4
    ],
)
def test_an_unreachable_node_is_being_replaced_and_its_taint_is_not_the_users(fleet, run_doctor, reason):
    cluster = leaf_of(fleet)
    world = healthy(fleet, cluster)
    pool = cluster.pools[0]
    lost = pool_nodes(pool, world.nodes)[0]
    # what the node lifecycle controller does to a node whose kubelet stopped reporting
    lost.spec.taints = [
        *lost.spec.taints,
        k8s.V1Taint(key="node.kubernetes.io/unreachable", effect="NoSchedule"),
        k8s.V1Taint(key="node.kubernetes.io/unreachable", effect="NoExecute"),
    ]
    lost.status.conditions = [k8s.V1NodeCondition(type="Ready", status="Unknown", reason="NodeStatusUnknown")]
    others = len(world.nodes) - 1
    make_pending(
        world, fleet, cluster, pool,
        conditions=unschedulable(fit_error(len(world.nodes), {
            reason: 1,
            "node(s) didn't match Pod's node affinity/selector": others,
        })),
    )  # fmt: skip
    row = pending_row(run_doctor(world, cluster.name), fleet, cluster, pool)
    assert lost.metadata.name in row and "unreachable" in row and "being replaced" in row
    assert "node controller owns that taint" in row and "lifts it" in row
    assert "taint nodes" not in row and "unreachable-" not in row


def _pool_at_its_maximum_with_a_free_card(fleet, run_with_fleet_pod_there: bool):
    """Pool t4-like (two units a node) at its maximum: the first node has a unit free but its cpu is taken, the other
    has none free. The pending pod asks 4 CPU, less than a node's allocatable (8): it is not too big, it is short."""
    cluster = leaf_of(fleet)
    world = healthy(fleet, cluster)
    pool = cluster.pools[0]
    have = pool_nodes(pool, world.nodes)
    world.nodes += [gpu_node(pool, f"{pool.name}-node-{n + 1}") for n in range(len(have), pool.max_nodes)]
    free_node, full_node = pool_nodes(pool, world.nodes)[:2]
    assert pool.units_per_node >= 2 and pool.max_nodes == 2
    pod = make_pending(
        world, fleet, cluster, pool,
        conditions=unschedulable(fit_error(len(world.nodes), {
            "Insufficient cpu": 1,
            f"Insufficient {pool.resource}": 1,
            "node(s) didn't match Pod's node affinity/selector": len(world.nodes) - 2,
        }, victims=2)),
    )  # fmt: skip
    pod.spec.containers[0].resources = k8s.V1ResourceRequirements(
        requests={"cpu": "4", "memory": "8Gi"}, limits={pool.resource: "1"}
    )
    # the other node's units are held by a running fleet pod
    holder = next(j for j in world.jobs if j is not world.job_of(pod.metadata.labels["workload"], pool.card))
    held = job_pod(holder, phase="Running", node_name=full_node.metadata.name)
    held.metadata.name = "holder-of-every-unit"
    held.spec.containers[0].resources = k8s.V1ResourceRequirements(
        requests={"cpu": "1"}, limits={pool.resource: str(pool.units_per_node)}
    )
    world.pods.append(held)
    if run_with_fleet_pod_there:
        busy = job_pod(holder, phase="Running", node_name=free_node.metadata.name)
        busy.metadata.name = "cpu-hungry-neighbour"
        busy.spec.containers[0].resources = k8s.V1ResourceRequirements(
            requests={"cpu": "6"}, limits={pool.resource: "1"}
        )
        world.pods.append(busy)
    return world, cluster, pool, free_node


def test_a_free_card_beside_a_busy_neighbour_is_a_wait_not_all_cards_taken(fleet, run_doctor):
    """kube-scheduler v1.33.3 counts each node once per reason: 1 Insufficient nvidia.com/gpu among 2 nodes says one
    node has a unit free; there the pod is short of cpu beside a running pod. Not 'all taken, raise max_nodes'."""
    world, cluster, pool, free_node = _pool_at_its_maximum_with_a_free_card(fleet, run_with_fleet_pod_there=True)
    row = pending_row(run_doctor(world, cluster.name), fleet, cluster, pool)
    assert f"is free on 1 of its 2 node(s) ({free_node.metadata.name})" in row, row
    assert "cpu 4" in row and "1 Insufficient cpu" in row and "cpu-hungry-neighbour" in row
    assert "FAIL" not in row  # a wait: the table shows no fix for it
    assert "are taken" not in row and "raise max_nodes" not in row


def test_a_free_card_the_nodes_own_agents_crowd_out_is_a_problem_with_the_request_to_lower(fleet, run_doctor):
    world, cluster, pool, free_node = _pool_at_its_maximum_with_a_free_card(fleet, run_with_fleet_pod_there=False)
    result = run_doctor(world, cluster.name)
    row = pending_row(result, fleet, cluster, pool)
    assert result.status == 1 and "FAIL" in row
    assert f"is free on 1 of its 2 node(s) ({free_node.metadata.name})" in row
    assert "agents and system pods" in row and f"describe node {free_node.metadata.name}" in row
    assert "cpu_request" in row and "workloads/" in row
    assert "are taken" not in row and "raise max_nodes" not in row


def test_every_card_taken_at_the_pools_maximum_still_says_so(fleet, run_doctor):
    """Both nodes short of the accelerator (2 Insufficient nvidia.com/gpu): the cards are all taken."""
    world, cluster, pool, _ = _pool_at_its_maximum_with_a_free_card(fleet, run_with_fleet_pod_there=True)
    pod = next(p for p in world.pods if p.status.phase == "Pending")
    pod.status.conditions = unschedulable(fit_error(len(world.nodes), {
        "Insufficient cpu": 1,
        f"Insufficient {pool.resource}": 2,
        "node(s) didn't match Pod's node affinity/selector": len(world.nodes) - 2,
    }, victims=2))  # fmt: skip
    row = pending_row(run_doctor(world, cluster.name), fleet, cluster, pool)
    assert f"of pool {pool.name} are taken and it has its maximum" in row and "is free on" not in row


@pytest.mark.parametrize(
    ("key", "value", "said"),
    [
        # kubernetes/autoscaler cluster-autoscaler-1.33.6 utils/taints/taints.go ToBeDeletedTaint (value: a timestamp)
        ("ToBeDeletedByClusterAutoscaler", "1772443800", "being removed by the cluster-autoscaler"),
        # the same file's gkeNodeTerminationHandlerTaint
        ("cloud.google.com/impending-node-termination", "", "being reclaimed"),
    ],
)
def test_a_node_on_its_way_out_is_a_wait_and_its_taint_not_the_users(fleet, run_doctor, key, value, said):
    cluster = leaf_of(fleet)
    world = healthy(fleet, cluster)
    pool = cluster.pools[0]
    leaving = pool_nodes(pool, world.nodes)[0]
    leaving.spec.taints = [*leaving.spec.taints, k8s.V1Taint(key=key, value=value, effect="NoSchedule")]
    make_pending(
        world, fleet, cluster, pool,
        conditions=unschedulable(fit_error(len(world.nodes), {
            f"node(s) had untolerated taint {{{key}: {value}}}": 1,
            "node(s) didn't match Pod's node affinity/selector": len(world.nodes) - 1,
        })),
    )  # fmt: skip
    result = run_doctor(world, cluster.name)
    row = pending_row(result, fleet, cluster, pool)
    assert leaving.metadata.name in row and said in row and "it is not one to remove" in row
    assert "FAIL" not in row and "taint nodes" not in row and "spot_taints" not in row


def test_a_cordoned_node_is_named_with_uncordon_not_a_taint_to_remove(fleet, run_doctor):
    """NodeUnschedulable (kubernetes v1.33.3) runs before TaintToleration: the message says 'node(s) were
    unschedulable'; the node carries node.kubernetes.io/unschedulable, which the node controller sets for a cordon."""
    cluster = leaf_of(fleet)
    world = healthy(fleet, cluster)
    pool = cluster.pools[0]
    cordoned = pool_nodes(pool, world.nodes)[0]
    cordoned.spec.unschedulable = True
    cordoned.spec.taints = [
        *cordoned.spec.taints,
        k8s.V1Taint(key="node.kubernetes.io/unschedulable", effect="NoSchedule"),
    ]
    make_pending(
        world, fleet, cluster, pool,
        conditions=unschedulable(fit_error(len(world.nodes), {
            "node(s) were unschedulable": 1,
            "node(s) didn't match Pod's node affinity/selector": len(world.nodes) - 1,
        })),
    )  # fmt: skip
    result = run_doctor(world, cluster.name)
    row = pending_row(result, fleet, cluster, pool)
    assert result.status == 1 and "FAIL" in row
    assert "cordoned" in row and f"uncordon {cordoned.metadata.name}" in row
    assert "taint nodes" not in row and "spot_taints" not in row


def test_a_free_card_crowded_out_below_the_pools_maximum_waits_for_the_node_the_autoscaler_adds(fleet, run_doctor):
    """One node of a pool of two, its card free and its cpu taken by pods that are not the fleet's (on that node
    only): the cluster-autoscaler, which sizes a new node with the pool's DaemonSets, says TriggeredScaleUp. A wait
    for that node, not 'the node's agents take what is missing on every node: lower the request'."""
    world, cluster, pool, free_node = _pool_at_its_maximum_with_a_free_card(fleet, run_with_fleet_pod_there=False)
    full = next(n for n in pool_nodes(pool, world.nodes) if n is not free_node)
    world.nodes.remove(full)
    world.pods = [p for p in world.pods if p.metadata.name != "holder-of-every-unit"]
    pod = next(p for p in world.pods if p.status.phase == "Pending")
    pod.status.conditions = unschedulable(fit_error(len(world.nodes), {
        "Insufficient cpu": 1,
        "node(s) didn't match Pod's node affinity/selector": len(world.nodes) - 1,
    }, victims=1))  # fmt: skip
    world.events.append(
        event(
            pod,
            TRIGGERED,
            f"pod triggered scale-up: [{{{pool.name} 1->2 (max: {pool.max_nodes})}}]",
            "cluster-autoscaler",
            age=20,
        )
    )
    result = run_doctor(world, cluster.name)
    row = pending_row(result, fleet, cluster, pool)
    assert result.status == 0 and "FAIL" not in row, row
    assert "waiting for a new node" in row and "1->2" in row
    assert "cpu_request" not in row and "on every node" not in row
