"""GPU sharing in the model (policy: a pool's ``sharing``): pods per card, the labels that select the device plugin's
configuration, and every combination the clouds or cards cannot do refused with its location."""

from __future__ import annotations

import re
import shutil
import textwrap
from pathlib import Path

import pytest

from fleet.model.core.card_sharing import DEVICE_PLUGIN_CONFIG_LABEL, SHARING_LABEL, Sharing
from fleet.model.core.catalogue import load_catalogue
from fleet.model.core.errors import InputError
from fleet.model.loader import load_fleet
from tests.conftest import FIXTURES
from tests.helpers import FIXTURE_WORKLOADS

POLICY = """\
clusters:
  azure:
    aks-s:
      region: eastus
      central: true
      gpus:
        t4: {{sharing: {{time_slicing: 4}}}}
        a100: {{sharing: {{mig: 2g.20gb}}, max_nodes: 3}}
  gcp:
    gke-s:
      zone: us-central1-a
      gpus:
        a100: {{sharing: {{mig: 1g.5gb}}}}
        l4: {l4}
workloads:
  sweeper: {{gpus: [l4], scale: [1, 2]}}
"""


def fleet_of(tmp_path: Path, policy: str):
    path = tmp_path / "fleet.yaml"
    path.write_text(textwrap.dedent(policy), encoding="utf-8")
    return load_fleet(path, FIXTURE_WORKLOADS)


def test_pods_per_card_come_from_the_slices_or_the_profile(tmp_path):
    fleet = fleet_of(tmp_path, POLICY.format(l4="{sharing: {time_slicing: 3}}"))
    aks, gke = fleet.clusters["aks-s"], fleet.clusters["gke-s"]
    profiles = load_catalogue().accelerators["a100"].offers
    assert aks.pool("t4").sharing == Sharing("time-slicing", 4) and aks.pool("t4").units_per_node == 4
    assert aks.pool("a100").sharing == Sharing("mig", profiles["azure"].mig_profiles["2g.20gb"], "2g.20gb")
    assert gke.pool("a100").units_per_node == profiles["gcp"].mig_profiles["1g.5gb"] == 7
    # our device plugin (AKS) picks its configuration by node label; GKE's own plugin needs none
    assert aks.pool("t4").labels[DEVICE_PLUGIN_CONFIG_LABEL] == "time-slicing-4"
    assert aks.pool("t4").labels[SHARING_LABEL] == "time-slicing-4"
    assert DEVICE_PLUGIN_CONFIG_LABEL not in gke.pool("a100").labels
    assert gke.pool("a100").labels[SHARING_LABEL] == "mig-1g.5gb"


def test_a_shared_pool_runs_no_sweep_point_and_its_sweep_pools_are_whole(tmp_path):
    fleet = fleet_of(tmp_path, POLICY.format(l4="{sharing: {time_slicing: 3}}"))
    gke = fleet.clusters["gke-s"]
    points = {p.accelerators: p.pool for p in fleet.sweep_points(gke)}
    assert set(points) == {2} and points[2].sharing is None  # 1 would be a time slice of the shared pool
    assert any("leaves out the point 1 on l4: the l4 pool is shared (time-slicing-3)" in w for w in fleet.warnings)


@pytest.mark.parametrize(
    ("l4", "extra", "message"),
    [
        (
            "{sharing: {mig: 1g.5gb}}",
            "",
            "l4 on gcp has no MIG profile 1g.5gb (its profiles: none: the card has no MIG)",
        ),
        ("{sharing: {time_slicing: 1}}", "", "time_slicing: expected 2 or more, not 1"),
        ("{sharing: {time_slicing: 49}}", "", "time_slicing: expected at most 48, not 49"),
        ("{sharing: {time_slicing: 2, mig: 1g.5gb}}", "", "give exactly one of time_slicing"),
        ("{sharing: {}}", "", "give exactly one of time_slicing"),
        ("{sharing: {mig: 1G.5GB}}", "", "expected a mig profile such as 1g.5gb, not"),
        (
            "{}",
            "  aws:\n    eks-s:\n      region: us-east-1\n      gpus: {a10g: {sharing: {mig: 1g.5gb}}}\n",
            "Amazon EKS cannot partition GPUs into MIG instances itself; use time_slicing",
        ),
        (
            "{}",
            "  openstack:\n    mag-s:\n      region: site\n      gpus: {t4: {sharing: {time_slicing: 2}}}\n",
            "OpenStack Magnum (CERN) pools cannot be time-sliced",
        ),
        (
            "{}",
            "  existing:\n    lab-s:\n      gpus: {a100: {sharing: {time_slicing: 2}}}\n",
            "an existing cluster's nodes are not the fleet's to configure",
        ),
        (
            "{}",
            "  aws:\n    eks-s:\n      region: us-east-1\n      gpus: {trn1: {sharing: {time_slicing: 2}}}\n",
            "only NVIDIA GPUs are shared",
        ),
    ],
)
def test_sharing_that_cannot_be_built_is_refused(tmp_path, l4, extra, message):
    policy = POLICY.format(l4=l4).replace("workloads:", extra + "workloads:")
    with pytest.raises(InputError) as err:
        fleet_of(tmp_path, policy)
    text = str(err.value).lower()
    assert message.lower() in text and "fleet.yaml:" in text and "sharing" in text


def test_a_pod_asking_for_more_than_one_slice_is_refused(tmp_path):
    workloads = tmp_path / "workloads"
    shutil.copytree(FIXTURES / "fleet" / "workloads" / "fitter", workloads / "wide")
    spec = workloads / "wide" / "workload.yaml"
    text = re.sub(r"(?m)^name: fitter$", "name: wide", spec.read_text(encoding="utf-8"))
    spec.write_text(
        re.sub(r"(?m)^accelerators: \d+$", "accelerators: 2", text)
        if "accelerators:" in text
        else text + "accelerators: 2\n",
        encoding="utf-8",
    )
    policy = tmp_path / "fleet.yaml"
    base = "clusters:\n  aws:\n    eks-w:\n      region: us-east-1\n      central: true\n      gpus: {g6: {}}\n"
    # p4d.24xlarge holds 8 A100: two fit a node, but not two slices
    sliced = base.replace("{g6: {}}", "{a100: {sharing: {time_slicing: 2}}}")
    policy.write_text(sliced + "workloads:\n  wide: [a100]\n", encoding="utf-8")
    with pytest.raises(InputError, match="a pod gets one slice at most"):
        load_fleet(policy, workloads)
    # `all` leaves the sliced pool out instead
    policy.write_text(sliced + "workloads:\n  wide: all\n", encoding="utf-8")
    assert not load_fleet(policy, workloads).benchmarks(load_fleet(policy, workloads).clusters["eks-w"])
    runners = "runners:\n  clusters:\n    eks-w:\n      a100: {accelerators: 2}\n"
    policy.write_text(sliced + runners, encoding="utf-8")
    # a runner's CI jobs run on a pool of their own, of whole cards: two cards each, four jobs a node
    (runner,) = load_fleet(policy, workloads).runners_of(load_fleet(policy, workloads).clusters["eks-w"])
    assert runner.pool.ci and runner.pool.sharing is None and runner.pool.units_per_node == 8
