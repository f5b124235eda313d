"""The hollow control plane itself: it starts in the tier's namespace, its KWOK nodes are the model's, a pod is
bound by the real scheduler and "runs", a Job completes, and nothing outside loopback is reachable."""

from __future__ import annotations

import json
import socket

import pytest

from fleet.model.loader import load_fleet
from tests.e2e.processes import patience, wait_for
from tests.real.hollow import HollowCluster, cluster_node_specs

FLEET = load_fleet()
# a GPU cluster of the shipped fleet, with its first accelerator pool
CLUSTER = next(c for c in FLEET.clusters.values() if c.all_pools)
POOL = CLUSTER.all_pools[0]


@pytest.fixture(scope="module")
def hollow(tmp_path_factory):
    """The hollow cluster of CLUSTER with every node of its pools."""
    cluster = HollowCluster(CLUSTER.name, tmp_path_factory.mktemp("hollow"))
    try:
        cluster.start()
        cluster.add_nodes(cluster_node_specs(CLUSTER))
        yield cluster
    finally:
        cluster.stop()


def test_the_nodes_are_the_pools_at_their_maximum_with_the_models_labels_and_taints(hollow):
    nodes = hollow.get("nodes")["items"]
    expected = {spec.name: spec for spec in cluster_node_specs(CLUSTER)}
    assert {n["metadata"]["name"] for n in nodes} == set(expected)
    for node in nodes:
        spec = expected[node["metadata"]["name"]]
        assert spec.labels.items() <= node["metadata"]["labels"].items()
        assert node["spec"].get("taints", []) == spec.taints
        assert node["status"]["allocatable"] == spec.allocatable


def test_a_job_on_the_gpu_pool_is_scheduled_there_and_completes(hollow):
    pool_specs = [s for s in cluster_node_specs(CLUSTER) if s.pool == POOL.name]
    accelerators = [k for k in pool_specs[0].allocatable if k.endswith(("/gpu", "/tpu"))]
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "probe", "namespace": "default"},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "nodeSelector": {"gpu": pool_specs[0].labels["gpu"]},
                    "tolerations": [{"operator": "Exists"}],
                    "containers": [
                        {
                            "name": "c",
                            "image": "example.invalid/none",
                            "resources": {"limits": {name: "1" for name in accelerators}},
                        }
                    ],
                }
            },
        },
    }
    hollow.kubectl("create", "-f", "-", input=json.dumps(job))

    def completed() -> bool:
        return hollow.get("job", "probe", "-n", "default").get("status", {}).get("succeeded", 0) == 1

    wait_for("the probe Job to complete", completed, patience(), hollow.processes)
    pods = hollow.get("pods", "-n", "default", "-l", "job-name=probe")["items"]
    assert [p["spec"]["nodeName"] for p in pods if p["spec"]["nodeName"] in {s.name for s in pool_specs}] == [
        p["spec"]["nodeName"] for p in pods
    ] and pods


def test_nothing_but_loopback_is_reachable():
    for address in ("10.96.0.1", "10.0.0.1", "192.0.2.1"):
        with socket.socket() as sock:
            sock.settimeout(5)
            assert sock.connect_ex((address, 443)) != 0, address


@pytest.mark.parametrize("name", sorted(n for n, c in FLEET.clusters.items() if c.all_pools))
def test_every_node_of_an_accelerator_pool_advertises_its_cards(name):
    """Also where the catalogue does not know the machine's size (a site's flavor, such as CERN's): a node of unknown
    size stood in by a large one without its cards left every pod of the pool Pending ("Insufficient nvidia.com/gpu",
    found by the tier's queues)."""
    cluster = FLEET.cluster(name)
    specs = cluster_node_specs(cluster)
    for pool in cluster.all_pools:
        counts = {s.allocatable.get(pool.resource) for s in specs if s.pool == pool.name}
        assert counts == {str(pool.units_per_node)}, pool.name
