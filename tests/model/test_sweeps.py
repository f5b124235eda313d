"""Scaling sweeps in the model (fleet/model/sweeps/): where each point runs, the sweep pools it takes, what is
left out, and the policy errors around ``scale``."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

from fleet.model.core.catalogue import Machine, load_catalogue
from fleet.model.core.errors import InputError
from fleet.model.core.pools import CARDS_PER_NODE_LABEL
from fleet.model.core.taints import SWEEP_TAINT
from fleet.model.loader import load_fleet
from fleet.model.sweeps.plan import Placed, place
from tests.helpers import FIXTURE_WORKLOADS

SIZES = [Machine(machine_type=f"m{n}", count=n, source="test") for n in (1, 4, 8)]


@pytest.mark.parametrize(
    ("accelerators", "whole_host", "max_nodes", "expected"),
    [
        (1, False, 2, ("m1", 1)),
        (2, False, 2, ("m4", 1)),  # the smallest machine that holds it
        (4, False, 2, ("m4", 1)),
        (8, False, 2, ("m8", 1)),
        (16, False, 2, ("m8", 2)),  # nodes of the largest machine
        (24, False, 2, None),  # three nodes: above max_nodes
        (12, False, 4, None),  # not a whole number of the largest machine
        (2, True, 2, None),  # a TPU job takes whole machines: no machine of 2
        (4, True, 2, ("m4", 1)),
        (16, True, 4, None),  # multi-host TPU slices are not built
    ],
)
def test_a_point_runs_on_the_fewest_nodes(accelerators, whole_host, max_nodes, expected):
    placed = place(accelerators, SIZES, whole_host, max_nodes)
    if expected is None:
        assert placed is None
    else:
        assert placed == Placed(next(m for m in SIZES if m.machine_type == expected[0]), expected[1])


POLICY = """\
defaults:
  gpu_pool: {{max_nodes: 2}}
clusters:
  gcp:
    gke-sweep:
      zone: us-central1-a
      central: true
      gpus: [l4, t4, tpu-v5e]
      {claim}
  aws:
    eks-sweep:
      region: us-east-1
      gpus: {{l4: {{max_nodes: 1}}}}
workloads:
  sweeper:
    gpus: [l4, tpu-v5e]
    scale: [1, 2, 4, 8, 16]
"""


def fleet_of(tmp_path: Path, policy: str):
    path = tmp_path / "fleet.yaml"
    path.write_text(textwrap.dedent(policy), encoding="utf-8")
    return load_fleet(path, FIXTURE_WORKLOADS)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    return fleet_of(tmp_path_factory.mktemp("sweeps"), POLICY.format(claim="checkpoint_claim: sweep-checkpoints"))


def test_each_point_has_its_machine_and_node_count(fleet):
    gke = fleet.clusters["gke-sweep"]
    got = {(p.card, p.accelerators): (p.pool.machine_type, p.nodes, p.per_node) for p in fleet.sweep_points(gke)}
    assert got == {
        ("l4", 1): ("g2-standard-4", 1, 1),
        ("l4", 2): ("g2-standard-24", 1, 2),
        ("l4", 4): ("g2-standard-48", 1, 4),
        ("l4", 8): ("g2-standard-96", 1, 8),
        ("l4", 16): ("g2-standard-96", 2, 8),
        ("tpu-v5e", 1): ("ct5lp-hightpu-1t", 1, 1),
        ("tpu-v5e", 4): ("ct5lp-hightpu-4t", 1, 4),
        ("tpu-v5e", 8): ("ct5lp-hightpu-8t", 1, 8),
    }
    # t4 is not in the sweep's cards, so it gets no sweep pool and no point
    assert not [p for p in fleet.sweep_points(gke) if p.card == "t4"]


def test_sweep_pools_are_sized_for_their_largest_point_and_fenced(fleet):
    gke = fleet.clusters["gke-sweep"]
    pools = {p.name: p for p in gke.sweep_pools}
    assert set(pools) == {"gpu-l4-x2", "gpu-l4-x4", "gpu-l4-x8", "gpu-tpu-v5e-x1", "gpu-tpu-v5e-x8"}
    x8 = pools["gpu-l4-x8"]
    assert (x8.min_nodes, x8.max_nodes, x8.accelerators_per_node, x8.spot, x8.probe) == (0, 2, 8, True, None)
    # each sweep pool grows only as far as its largest point needs, not to its card pool's max_nodes (2)
    assert {n: p.max_nodes for n, p in pools.items()} == {
        "gpu-l4-x2": 1, "gpu-l4-x4": 1, "gpu-l4-x8": 2, "gpu-tpu-v5e-x1": 1, "gpu-tpu-v5e-x8": 1
    }  # fmt: skip
    assert x8.labels[CARDS_PER_NODE_LABEL] == "8" and x8.node_selector == {"gpu": "l4", CARDS_PER_NODE_LABEL: "8"}
    assert SWEEP_TAINT in x8.taints and SWEEP_TAINT in x8.pod_tolerations
    # the card's own pool is untouched: benchmarks, probes and runners never tolerate the sweep taint
    own = gke.pool("l4")
    assert SWEEP_TAINT not in own.taints and CARDS_PER_NODE_LABEL not in own.node_selector
    assert gke.all_pools == gke.pools + gke.sweep_pools
    # every point's pool is one of the cluster's pools, with the same values
    assert all(p.pool in gke.all_pools for p in fleet.sweep_points(gke))


def test_a_sweep_pool_scales_from_zero_when_its_cards_pool_keeps_a_node(tmp_path):
    """A sweep pool of eight cards kept at one node would cost a machine all day: it starts at 0 whatever the card's
    own pool keeps (the fixture above starts every pool at 0, where a sweep pool copying its card's minimum looks
    right; mutation testing found that)."""
    policy = POLICY.format(claim="").replace("gpu_pool: {max_nodes: 2}", "gpu_pool: {max_nodes: 2, min_nodes: 1}")
    gke = fleet_of(tmp_path, policy).clusters["gke-sweep"]
    assert gke.pool("l4").min_nodes == 1
    assert gke.sweep_pools and {p.min_nodes for p in gke.sweep_pools} == {0}


def test_points_the_pools_cannot_reach_are_left_out_with_a_warning(fleet):
    eks = fleet.clusters["eks-sweep"]
    assert sorted(p.accelerators for p in fleet.sweep_points(eks)) == [1, 2, 4, 8]  # 16: two g6.48xlarge > max 1
    left = [w for w in fleet.warnings if "leaves out" in w]
    assert any("eks-sweep leaves out the point 16 on l4" in w and "max_nodes 1" in w for w in left)
    assert any("gke-sweep leaves out the point 2 on tpu-v5e" in w and "whole machines" in w for w in left)
    # the checkpoint claim is set on the GKE cluster, not on the EKS one
    claims = [w for w in fleet.warnings if "checkpoint_claim" in w]
    assert len(claims) == 1 and "eks-sweep" in claims[0]


def test_a_sweeping_workload_runs_no_single_card_benchmark(fleet):
    for cluster in fleet.clusters.values():
        assert all(b.workload.name != "sweeper" for b in fleet.benchmarks(cluster))


def test_catalogue_machines_are_distinct_sizes_on_sweep_clouds_only():
    catalogue = load_catalogue()
    for card, acc in catalogue.accelerators.items():
        for cloud, offer in acc.offers.items():
            counts = [m.count for m in offer.sizes()]
            assert len(set(counts)) == len(counts), (card, cloud)
            assert not offer.machines or cloud in ("gcp", "aws"), (card, cloud)
    assert catalogue.accelerators["tpu-v5e"].whole_host
    assert not catalogue.accelerators["l4"].whole_host


@pytest.mark.parametrize(
    ("placement", "message"),
    [
        ("tracker: {gpus: [l4], scale: [1, 2]}", "a sweep needs `distributed` in tracker/workload.yaml"),
        ("sweeper: {gpus: [l4], scale: [2, 1]}", "smallest first"),
        ("sweeper: {gpus: [l4], scale: [1, 1]}", "smallest first"),
        ("sweeper: {gpus: [l4], scale: [0, 2]}", "a point is a total accelerator count"),
        ("sweeper: {gpus: [l4], scale: []}", "give at least one accelerator count"),
        ("sweeper: {gpus: [l4], scale: [1], schedule: '0 3 * * *'}", "remove schedule, or scale"),
    ],
)
def test_bad_scale_is_refused_with_its_location(tmp_path, placement, message):
    policy = POLICY.format(claim="").split("workloads:")[0] + f"workloads:\n  {placement}\n"
    with pytest.raises(InputError) as err:
        fleet_of(tmp_path, policy)
    text = str(err.value)
    assert message in text and "fleet.yaml:" in text and "workloads." in text


def test_a_bad_checkpoint_claim_name_is_refused(tmp_path):
    with pytest.raises(InputError, match="checkpoint_claim"):
        fleet_of(tmp_path, POLICY.format(claim="checkpoint_claim: Not_A_Name"))


def test_a_workload_that_needs_root_cannot_sweep(tmp_path):
    workloads = tmp_path / "workloads"
    shutil.copytree(FIXTURE_WORKLOADS / "sweeper", workloads / "sweeper")
    spec = workloads / "sweeper" / "workload.yaml"
    spec.write_text(spec.read_text(encoding="utf-8") + "needs_root: writes beside its image\n", encoding="utf-8")
    path = tmp_path / "fleet.yaml"
    path.write_text(POLICY.format(claim=""), encoding="utf-8")
    with pytest.raises(InputError, match=r"needs root .* Pod Security `restricted`"):
        load_fleet(path, workloads)


def test_left_out_points_say_why(tmp_path):
    fleet = fleet_of(tmp_path, POLICY.format(claim="").replace("[1, 2, 4, 8, 16]", "[1, 12, 24]"))
    text = "\n".join(fleet.warnings)
    assert "the point 12 on l4: machines of 1/2/4/8 cards, not a whole number of 8-card machines" in text
    assert "the point 24 on l4: machines of 1/2/4/8 cards, 3 nodes, above max_nodes 2" in text
