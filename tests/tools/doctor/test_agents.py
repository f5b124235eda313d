"""The node agents' rows (fleet/tools/doctor/agents.py): the device plugin and dcgm-exporter."""

from __future__ import annotations

from fleet.tools.doctor.names import DEVICE_PLUGIN, EXPORTER
from tests.tools.doctor.support import leaf_of, row_of
from tests.tools.doctor.world import agent_pod, daemonset, gpu_node, healthy


def test_a_device_plugin_pod_not_ready_is_a_problem_with_the_reason(fleet, run_doctor):
    cluster = leaf_of(fleet)
    world = healthy(fleet, cluster)
    node = world.nodes[1]
    ds = next(d for d in world.daemonsets if d.metadata.name == DEVICE_PLUGIN)
    world.daemonsets[world.daemonsets.index(ds)] = daemonset(ds.metadata.name, ds.metadata.namespace, [node], ready=0)
    world.pods = [p for p in world.pods if p.metadata.labels.get("app.kubernetes.io/instance") != DEVICE_PLUGIN]
    world.pods.append(agent_pod(ds, node, ("CrashLoopBackOff", "back-off 5m0s restarting failed container")))
    result = run_doctor(world, cluster.name)
    assert result.status == 1
    row = row_of(result.out, "NVIDIA device plugin")
    assert "FAIL" in row and "0/1 ready" in row and "CrashLoopBackOff" in row and node.metadata.name in row


def test_a_missing_exporter_and_one_that_does_not_cover_a_gpu_node_are_problems(fleet, run_doctor):
    cluster = leaf_of(fleet)
    world = healthy(fleet, cluster)
    world.daemonsets = [d for d in world.daemonsets if d.metadata.name != EXPORTER]
    row = row_of(run_doctor(world, cluster.name).out, "dcgm-exporter")
    assert "FAIL" in row and "no DaemonSet node-agents/dcgm-exporter" in row
    # ready, but with no pod on a second GPU node: its tolerations or affinity miss that pool
    world = healthy(fleet, cluster)
    other = gpu_node(cluster.pools[1], "gpu-second-1")
    world.nodes.append(other)
    result = run_doctor(world, cluster.name)
    assert result.status == 1
    row = row_of(result.out, "dcgm-exporter")
    assert "FAIL" in row and "1/1 ready" in row and "gpu-second-1" in row and "gpu_tolerations" in row
