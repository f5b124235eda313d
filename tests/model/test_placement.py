"""Placement as a fact of the model (fleet/model/placement/pods.py): a pod's requests counted as the scheduler counts
them, nodes' allocatable by each cloud's published formula, the filter rules, and a policy whose pod fits no node of its
pool refused with the numbers, on fixture fleets of the tests' own."""

from __future__ import annotations

import re
import shutil
import textwrap
from pathlib import Path

import pytest

from fleet.model.core.catalogue import GIB, MIB, load_catalogue
from fleet.model.core.errors import InputError
from fleet.model.core.taints import Taint
from fleet.model.loader import load_fleet
from fleet.model.placement.node_agents import DCGM_EXPORTER, DEVICE_PLUGIN, DEVICE_PLUGIN_CONFIGURED, NODE_EXPORTER
from fleet.model.placement.pods import (
    AFFINITY_REASON,
    Node,
    PodToPlace,
    cluster_nodes,
    fleet_pods,
    insufficient_reason,
    misplaced,
    place,
    pod_requests,
    taint_reason,
)
from tests.conftest import FIXTURES

FIXTURE_POLICY = FIXTURES / "fleet" / "fleet.yaml"
FIXTURE_WORKLOADS = FIXTURES / "fleet" / "workloads"


def container(name: str, cpu: str | None = None, memory: str | None = None, **extra) -> dict:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    return {"name": name, "resources": {"requests": requests}, **extra}


# --- requests: k8s.io/component-helpers resource PodRequests (kubernetes/kubernetes, helpers.go) ---------------------


def test_app_containers_are_summed_and_a_limit_alone_is_the_request():
    spec = {
        "containers": [
            container("a", "500m", "1Gi"),
            {"name": "b", "resources": {"requests": {"cpu": "1"}, "limits": {"memory": "2Gi", "nvidia.com/gpu": "1"}}},
        ]
    }
    assert pod_requests(spec) == {"cpu": 1500, "memory": 3 * GIB, "nvidia.com/gpu": 1}


def test_a_native_sidecar_adds_to_the_sum_and_an_init_container_counts_alone_with_earlier_sidecars():
    # KEP-753: InitContainerUse(i) = sum(sidecars before i) + init container i; pod = max(sum(app) + sum(sidecars),
    # max_i InitContainerUse(i)). Hand-computed: app 1000m + sidecar 200m = 1200m; the late init container 3000m runs
    # beside the sidecar: 3200m, which wins; the early one (before the sidecar) 2000m alone does not.
    spec = {
        "initContainers": [
            container("early", "2"),
            container("sidecar", "200m", "100Mi", restartPolicy="Always"),
            container("late", "3"),
        ],
        "containers": [container("app", "1", "1Gi")],
    }
    assert pod_requests(spec) == {"cpu": 3200, "memory": GIB + 100 * MIB}


def test_pod_overhead_is_added():
    spec = {"containers": [container("app", "1", "1Gi")], "overhead": {"cpu": "250m", "memory": "120Mi"}}
    assert pod_requests(spec) == {"cpu": 1250, "memory": GIB + 120 * MIB}


# --- allocatable: each cloud's formula, hand-computed ---------------------------------------------------------------


def test_gke_allocatable_follows_its_tiers():
    # n1-standard-4: 4 vCPU, 15 GiB. CPU 60 + 10 + 10 = 80m. Memory 25% x 4 + 20% x 4 + 10% x 7 = 2.5 GiB, + 100 MiB.
    alloc = load_catalogue().allocatable("gcp", "n1-standard-4", "1.33")
    assert alloc is not None
    assert alloc.cpu_milli == 3920
    assert alloc.memory_bytes == 15 * GIB - int(2.5 * GIB) - 100 * MIB
    assert alloc.pods == 110


def test_eks_allocatable_reserves_memory_by_max_pods():
    # g4dn.xlarge: 3 ENIs x (10 - 1) + 2 = 29 pods; 11 x 29 + 255 = 574 MiB kube-reserved, + 100 MiB eviction.
    alloc = load_catalogue().allocatable("aws", "g4dn.xlarge", "1.33")
    assert alloc is not None
    assert (alloc.cpu_milli, alloc.pods) == (3920, 29)
    assert alloc.memory_bytes == 16 * GIB - (574 + 100) * MIB


def test_aks_memory_reservation_changed_in_1_29():
    catalogue = load_catalogue()
    new = catalogue.allocatable("azure", "Standard_NC4as_T4_v3", "1.33")
    old = catalogue.allocatable("azure", "Standard_NC4as_T4_v3", "1.28")
    assert new is not None and old is not None
    assert new.cpu_milli == old.cpu_milli == 4000 - 140  # the table's 4-core row
    # 1.29+: min(20 x 250 + 50, 25% of 28 GiB) = 5050 MiB, + 100 MiB
    assert new.memory_bytes == 28 * GIB - 5150 * MIB
    # before: GKE's tiers (1 + 0.8 + 0.8 + 0.72 GiB) + 750 MiB
    assert old.memory_bytes == 28 * GIB - int((1 + 0.8 + 0.8 + 12 * 0.06) * GIB) - 750 * MIB


def test_a_machine_of_unknown_size_is_placed_by_labels_only():
    assert load_catalogue().allocatable("openstack", "g2.xlarge", "1.33") is None


def test_every_available_offer_has_a_known_machine_where_the_cloud_has_a_formula():
    catalogue = load_catalogue()
    for card, acc in catalogue.accelerators.items():
        for cloud, offer in acc.offers.items():
            if offer.status != "available" or catalogue.clouds[cloud].reservations is None:
                continue
            for size in offer.sizes():
                assert catalogue.allocatable(cloud, size.machine_type, "1.33") is not None, (card, cloud, size)


# --- the filters, in the scheduler's words -------------------------------------------------------------------------

GPU_TAINT = Taint(key="nvidia.com/gpu", value="present")


def node(**overrides) -> Node:
    values = {
        "pool": "gpu-t4",
        "machine_type": "m",
        "labels": {"gpu": "t4"},
        "taints": (GPU_TAINT,),
        "allocatable": {"cpu": 3920, "memory": 12 * GIB, "pods": 110, "nvidia.com/gpu": 1},
    }
    return Node(**{**values, **overrides})


GPU_POD = {
    "nodeSelector": {"gpu": "t4"},
    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}],
    "containers": [
        {"name": "w", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"nvidia.com/gpu": "1"}}}
    ],
}


def test_a_fitting_pod_has_no_reason():
    assert node().reasons(GPU_POD) == []


def test_each_filter_gives_the_schedulers_reason():
    unreachable = Taint(key="node.kubernetes.io/unreachable", value="", effect="NoExecute")
    soft = Taint(key="soft", value="x", effect="PreferNoSchedule")  # not a filter
    n = node(labels={"gpu": "l4"}, taints=(GPU_TAINT, unreachable, soft))
    assert n.reasons(GPU_POD) == [AFFINITY_REASON, taint_reason(unreachable)]
    assert taint_reason(unreachable) == "node(s) had untolerated taint {node.kubernetes.io/unreachable: }"
    big = {**GPU_POD, "containers": [container("w", "4", "16Gi")]}
    assert node().reasons(big) == [insufficient_reason("cpu"), insufficient_reason("memory")]


def test_required_node_affinity_terms_are_ored_and_their_expressions_anded():
    spec = {
        **GPU_POD,
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "size", "operator": "DoesNotExist"}]},
            {"matchExpressions": [{"key": "size", "operator": "In", "values": ["8"]}]},
        ]}}},
    }  # fmt: skip
    assert node().reasons(spec) == []
    assert node(labels={"gpu": "t4", "size": "8"}).reasons(spec) == []
    assert node(labels={"gpu": "t4", "size": "2"}).reasons(spec) == [AFFINITY_REASON]


def test_copies_must_fit_one_node_together():
    pod = PodToPlace("two slices", "gpu-t4", {**GPU_POD, "containers": [container("w", "2", "1Gi")]}, copies=2)
    found = place(pod, [node()])
    assert found is not None and "cpu: asks 2 x 2, a node has 3.92" in found.message


def test_a_pod_another_pool_admits_is_misplaced():
    pod = PodToPlace("p", "gpu-t4", GPU_POD)
    twin = node(pool="gpu-t4-x4")  # same labels, no taint of its own
    found = place(pod, [node(), twin])
    assert found is not None and "gpu-t4-x4" in found.message


def test_a_pods_requests_are_counted_once_whatever_the_nodes_it_is_tried_on(monkeypatch):
    # A fleet of many clusters tries every pod on every node of its cluster: counting its requests once per node made
    # loading a 200-cluster policy (the report's start-up) several times slower (docs/performance.md, runs H to J).
    import fleet.model.placement.pods as placement

    counted = []
    real = placement.pod_requests
    monkeypatch.setattr(placement, "pod_requests", lambda spec: counted.append(spec) or real(spec))
    big = PodToPlace("p", "gpu-t4", {**GPU_POD, "containers": [container("w", "4", "16Gi")]})
    nodes = [node(), *(node(pool=f"other-{i}", labels={"gpu": "l4"}) for i in range(5))]
    found = place(big, nodes)
    assert found is not None and "cpu: asks 4, a node has 3.92" in found.message
    assert len(counted) == 1


# --- fixture fleets -------------------------------------------------------------------------------------------------


def test_every_pod_of_the_fixture_fleet_lands_on_its_own_pool_alone():
    fleet = load_fleet(FIXTURE_POLICY, FIXTURE_WORKLOADS)
    placed = 0
    for cluster in fleet.clusters.values():
        pods = fleet_pods(fleet, cluster)
        assert misplaced(pods, cluster_nodes(cluster)) == [], cluster.name
        placed += len(pods)
    kinds = {p.what.split(" ")[0] for c in fleet.clusters.values() for p in fleet_pods(fleet, c)}
    assert placed and {"a", "the"} <= kinds  # CI jobs and probes too, not only benchmarks


def _fixture_copy(tmp_path: Path, workload: str, resources: str) -> tuple[Path, Path]:
    shutil.copytree(FIXTURES / "fleet", tmp_path / "fleet")
    wl = tmp_path / "fleet" / "workloads" / workload / "workload.yaml"
    text, count = re.subn(r"(?m)^resources:.*\n(?:  .*\n)*", textwrap.dedent(resources), wl.read_text())
    assert count == 1
    wl.write_text(text)
    return tmp_path / "fleet" / "fleet.yaml", tmp_path / "fleet" / "workloads"


def test_a_pod_too_big_for_its_machine_is_a_located_error_with_the_numbers(tmp_path):
    policy, workloads = _fixture_copy(
        tmp_path,
        "tracker",
        'resources:\n  cpu_request: "4"\n  memory_request: 16Gi\n  cpu_limit: "8"\n  memory_limit: 32Gi\n',
    )
    with pytest.raises(InputError) as caught:
        load_fleet(policy, workloads)
    text = str(caught.value)
    line = next(i for i, s in enumerate(policy.read_text().splitlines(), 1) if s.startswith("  tracker:"))
    assert f"fleet.yaml:{line}: workloads.tracker: tracker on fix-gke (l4) does not fit a node of pool gpu-l4" in text
    # 4 CPU + the mtail sidecar's 50m against g2-standard-4's 3.92; the fix names the workload's file
    assert "cpu: asks 4.05, a node has 3.92" in text and "memory: asks 16.06Gi" in text
    assert "workloads/tracker/workload.yaml" in text


def test_slices_of_a_shared_card_must_fit_its_node_together(tmp_path):
    # fix-eks time-slices its T4 (g4dn.xlarge, 3.92 CPU) in two: two pods of 2 CPU + 50m each do not fit
    policy, workloads = _fixture_copy(
        tmp_path,
        "tracker",
        'resources:\n  cpu_request: "2"\n  memory_request: 1Gi\n  cpu_limit: "4"\n  memory_limit: 2Gi\n',
    )
    with pytest.raises(InputError) as caught:
        load_fleet(policy, workloads)
    assert "tracker on fix-eks (t4) does not fit a node of pool gpu-t4 (g4dn.xlarge) (2 at once" in str(caught.value)
    assert "cpu: asks 2 x 2.05, a node has 3.92" in str(caught.value)


# --- what a node's own pods hold: the kubelet's labels, the fleet's node agents ------------------------------------


def test_every_node_carries_the_kubelets_os_label_and_runs_the_node_exporter():
    # the node exporter selects kubernetes.io/os: linux (prometheus-node-exporter 4.49.1 values.yaml nodeSelector);
    # without the kubelet's label no node of the model would take it
    fleet = load_fleet(FIXTURE_POLICY, FIXTURE_WORKLOADS)
    exporter = {"nodeSelector": {"kubernetes.io/os": "linux"}, "tolerations": [{"operator": "Exists"}]}
    for cluster in fleet.clusters.values():
        for n in cluster_nodes(cluster):
            assert n.reasons({**exporter, "containers": []}) == [], (cluster.name, n.pool)
            assert NODE_EXPORTER in n.agents, (cluster.name, n.pool)


def test_nvidia_pools_hold_the_device_plugin_only_where_the_fleet_installs_it():
    fleet = load_fleet(FIXTURE_POLICY, FIXTURE_WORKLOADS)
    gke, magnum = fleet.cluster("fix-gke"), fleet.cluster("fix-magnum")
    gke_t4, magnum_t4 = (next(n for n in cluster_nodes(c) if n.pool == "gpu-t4") for c in (gke, magnum))
    assert gke_t4.agents == (NODE_EXPORTER, DCGM_EXPORTER)  # GKE brings its own device plugin
    assert magnum_t4.agents == (NODE_EXPORTER, DEVICE_PLUGIN, DCGM_EXPORTER)
    # 10m + 10m + 50m, 32 + 32 + 128 MiB, three pods
    assert magnum_t4.held == {"cpu": 70, "memory": 192 * MIB, "pods": 3}


def test_a_shared_pool_of_our_device_plugin_holds_its_config_manager_too():
    """fix-eks time-slices its T4s through our device plugin: the release has a configuration, so the plugin's pod
    runs the config manager's sidecar beside it (and its init container first), each with the plugin's resources
    (components/kubernetes/postrender/device_plugin.py): every NVIDIA node of the cluster holds them, shared or not."""
    eks = load_fleet(FIXTURE_POLICY, FIXTURE_WORKLOADS).cluster("fix-eks")
    for node in (n for n in cluster_nodes(eks) if n.pool != "system"):
        assert node.agents == (NODE_EXPORTER, DEVICE_PLUGIN_CONFIGURED, DCGM_EXPORTER), node.pool
        # 10m + (10m + 10m: the plugin and its sidecar; the init container's 10m before them) + 50m, three pods
        assert node.held == {"cpu": 80, "memory": 224 * MIB, "pods": 3}, node.pool
        assert node.allocatable and node.free("cpu") == node.allocatable["cpu"] - 80
    assert DEVICE_PLUGIN_CONFIGURED.pod_spec()["initContainers"] == [
        {"name": "nvidia-device-plugin-init", "resources": DEVICE_PLUGIN.resources}
    ]


def test_a_pod_that_fits_the_allocatable_but_not_beside_the_node_agents_is_refused(tmp_path):
    # fix-gke's L4 pool is g2-standard-4: 3.92 CPU allocatable, of which the node exporter and dcgm-exporter take
    # 60m. A pod of 3.85 CPU + the mtail sidecar's 50m = 3.9 fits the allocatable, not what the agents leave (3.86).
    policy, workloads = _fixture_copy(
        tmp_path,
        "tracker",
        'resources:\n  cpu_request: "3.85"\n  memory_request: 1Gi\n  cpu_limit: "4"\n  memory_limit: 2Gi\n',
    )
    with pytest.raises(InputError) as caught:
        load_fleet(policy, workloads)
    text = str(caught.value)
    assert (
        "tracker on fix-gke (l4) does not fit a node of pool gpu-l4 (g2-standard-4): cpu: asks 3.9, a node has 3.92 "
        "of which the node agents (prometheus-node-exporter, dcgm-exporter) take 0.06"
    ) in text


@pytest.mark.parametrize("command", [["validate"], ["plan", "--no-policy-pack"]])
def test_validate_and_plan_refuse_a_pod_too_big_for_its_pool_with_the_numbers_and_exit_2(tmp_path, capsys, command):
    from fleet.tools.cli import main

    policy, workloads = _fixture_copy(
        tmp_path,
        "tracker",
        'resources:\n  cpu_request: "3.85"\n  memory_request: 1Gi\n  cpu_limit: "4"\n  memory_limit: 2Gi\n',
    )
    stacks = ["--stacks-dir", str(policy.parent / "stacks"), "--workloads-dir", str(workloads)]
    assert main([*command, "--policy", str(policy), *stacks]) == 2
    err = capsys.readouterr().err
    assert (
        "workloads.tracker: tracker on fix-gke (l4) does not fit a node of pool gpu-l4 (g2-standard-4): cpu: asks"
        in err
    )
    assert "lower resources.cpu_request / memory_request in workloads/tracker/workload.yaml" in err
    assert "Traceback" not in err
