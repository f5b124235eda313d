"""fleet/model/billing/accounts.py: a cluster's account, a workload's own on every cluster it runs on, each pool's
accounts and every account of the fleet, on a fleet of the test's own."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet.model.billing.accounts import account_of, billed_apart, fleet_accounts, pool_accounts, workload_accounts
from fleet.model.core.fleet import Fleet
from fleet.model.loader import load_fleet
from tests.helpers import FIXTURE_WORKLOADS, queued, queued_workloads_dir

POLICY = """\
clusters:
  gcp:
    gke-a:
      zone: us-central1-a
      central: true
      billing_account: physics
      gpus: [l4, t4]
  aws:
    eks-b:
      region: eu-west-1
      gpus: [t4]
workloads:
  tracker: all
  fitter: {gpus: [t4], billing_account: fitting}
  sweeper: {gpus: [l4], scale: [1, 8], billing_account: ml-team}
"""


@pytest.fixture
def fleet(tmp_path: Path) -> Fleet:
    path = tmp_path / "fleet.yaml"
    path.write_text(POLICY, encoding="utf-8")
    return load_fleet(path, FIXTURE_WORKLOADS)


def test_a_workload_is_billed_to_its_own_account_on_every_cluster_else_to_the_clusters(fleet: Fleet):
    gke, eks = fleet.cluster("gke-a"), fleet.cluster("eks-b")
    assert (gke.billing_account, eks.billing_account) == ("physics", "default")  # default unless the policy names one
    assert fleet.billing_accounts == {"fitter": "fitting", "sweeper": "ml-team"}
    assert [account_of(fleet, c, "fitter") for c in (gke, eks)] == ["fitting", "fitting"]
    assert [account_of(fleet, c, "tracker") for c in (gke, eks)] == ["physics", "default"]


def test_the_accounts_billed_apart_from_a_cluster_are_the_workloads_own(fleet: Fleet, tmp_path: Path):
    assert billed_apart(fleet, fleet.cluster("gke-a")) == {"fitting": ["fitter"], "ml-team": ["sweeper"]}
    # a workload whose own account is its cluster's is not billed apart there
    path = tmp_path / "same.yaml"
    path.write_text(POLICY.replace("billing_account: fitting", "billing_account: physics"), encoding="utf-8")
    same = load_fleet(path, FIXTURE_WORKLOADS)
    assert billed_apart(same, same.cluster("gke-a")) == {"ml-team": ["sweeper"]}
    assert billed_apart(same, same.cluster("eks-b")) == {"ml-team": ["sweeper"], "physics": ["fitter"]}


def test_a_pool_bills_its_cluster_first_then_the_workloads_on_it_billed_apart(fleet: Fleet):
    gke, eks = fleet.cluster("gke-a"), fleet.cluster("eks-b")
    assert pool_accounts(fleet, gke, gke.pool("t4")) == ("physics", "fitting")
    assert pool_accounts(fleet, eks, eks.pool("t4")) == ("default", "fitting")
    # the sweep's points: on the card's own pool (one card) and on a sweep pool of 8 cards a machine
    (sweep_pool,) = gke.sweep_pools
    assert pool_accounts(fleet, gke, sweep_pool) == ("physics", "ml-team")


def test_a_workers_pool_bills_the_queued_sweep_points_it_may_be_given(tmp_path: Path):
    """A sweep on a queue runs its points on whichever worker holds them: each holding pool bills the sweep's account
    after its cluster's (the tests' own queued fleet, tests/helpers.py)."""
    path = tmp_path / "fleet.yaml"
    workloads = "workloads:\n  sweeper: {gpus: [t4], scale: [1, 2], queue: gpu, billing_account: ml-team}\n"
    path.write_text(queued(workloads), encoding="utf-8")
    fleet = load_fleet(path, queued_workloads_dir(tmp_path))
    held = [(cluster, pool) for cluster in fleet.clusters.values() for _, pool in fleet.queued_points_on(cluster)]
    assert held
    for cluster, pool in held:
        assert pool_accounts(fleet, cluster, pool) == (cluster.billing_account, "ml-team"), (cluster.name, pool.name)


def test_the_fleets_accounts_are_every_clusters_and_every_workloads_own(fleet: Fleet):
    assert fleet_accounts(fleet) == ["default", "fitting", "ml-team", "physics"]


def test_only_the_workloads_that_name_an_account_are_billed_apart():
    from fleet.model.policy_file.schema import Placement

    placements = {"a": Placement(gpus=["t4"]), "b": Placement(gpus=["t4"], billing_account="team-b")}
    assert workload_accounts(placements) == {"b": "team-b"}
