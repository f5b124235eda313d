"""fleet/model/billing/accounting.py: the kube-state-metrics labels the accounting rules join on, the node selector of
each pool, the billing accounts (a cluster's, a workload's own) and a bad account refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet.model.billing.accounting import (
    ACCOUNTING_RULES,
    accounting_rules,
    ksm_label,
    ksm_resource,
    metric_labels_allowlist,
    node_selector,
)
from fleet.model.core.errors import InputError
from fleet.model.loader import load_fleet
from tests.helpers import FIXTURE_WORKLOADS

POLICY = """\
clusters:
  gcp:
    gke-b:
      zone: us-central1-a
      central: true
      billing_account: {account}
      gpus: [l4]
workloads:
  sweeper: {{gpus: [l4], scale: [1, 8], billing_account: ml-team}}
"""


def fleet_of(tmp_path: Path, account: str = "physics"):
    path = tmp_path / "fleet.yaml"
    path.write_text(POLICY.format(account=account), encoding="utf-8")
    return load_fleet(path, FIXTURE_WORKLOADS)


def test_kube_state_metrics_names():
    assert ksm_label("gpu-fleet.io/cards-per-node") == "label_gpu_fleet_io_cards_per_node"
    assert ksm_label("magnum.openstack.org/role") == "label_magnum_openstack_org_role"
    assert ksm_resource("nvidia.com/gpu") == "nvidia_com_gpu" and ksm_resource("google.com/tpu") == "google_com_tpu"


def test_pools_are_told_apart_by_their_selector_and_size(tmp_path):
    fleet = fleet_of(tmp_path)
    cluster = fleet.clusters["gke-b"]
    assert metric_labels_allowlist(cluster) == ["nodes=[gpu,gpu-fleet.io/cards-per-node]", "pods=[workload]"]
    own, sweep = cluster.pool("l4"), cluster.sweep_pools[0]
    assert node_selector(own, cluster) == 'kube_node_labels{label_gpu="l4",label_gpu_fleet_io_cards_per_node=""}'
    assert node_selector(sweep, cluster) == 'kube_node_labels{label_gpu="l4",label_gpu_fleet_io_cards_per_node="8"}'


def test_a_ci_pool_is_told_apart_and_billed_to_its_cluster(tmp_path):
    """A card's CI pool carries its card label too: its own pool and its sweep pools count none of its nodes, and its
    card-hours (billed, used by CI jobs, which have no workload label, idle) go to the cluster's account."""
    path = tmp_path / "fleet.yaml"
    text = POLICY.format(account="physics") + "runners:\n  clusters:\n    gke-b: [l4]\n"
    path.write_text(text, encoding="utf-8")
    fleet = load_fleet(path, FIXTURE_WORKLOADS)
    cluster = fleet.clusters["gke-b"]
    (ci,) = cluster.ci_pools
    assert metric_labels_allowlist(cluster)[0] == "nodes=[gpu,gpu-fleet.io/cards-per-node,gpu-fleet.io/ci]"
    own, sweep = cluster.pool("l4"), cluster.sweep_pools[0]
    assert node_selector(own, cluster) == (
        'kube_node_labels{label_gpu="l4",label_gpu_fleet_io_cards_per_node="",label_gpu_fleet_io_ci=""}'
    )
    assert node_selector(sweep, cluster) == (
        'kube_node_labels{label_gpu="l4",label_gpu_fleet_io_cards_per_node="8",label_gpu_fleet_io_ci=""}'
    )
    assert node_selector(ci, cluster) == (
        'kube_node_labels{label_gpu="l4",label_gpu_fleet_io_cards_per_node="",label_gpu_fleet_io_ci="true"}'
    )
    rules = accounting_rules(cluster, fleet)["groups"][0]["rules"]
    mine = [r for r in rules if r["labels"].get("pool") == "gpu-l4-ci"]
    billed = {
        r["labels"]["billing_account"] for r in mine if r["record"] in ("gpufleet:billed_cards", "gpufleet:idle_cards")
    }
    assert billed == {"physics"}
    used = next(
        r for r in mine if r["record"] == "gpufleet:pod_used_cards" and r["labels"]["billing_account"] == "physics"
    )
    assert 'label_workload!~"sweeper"' in used["expr"]  # a CI job has no workload label: the cluster's account


def test_each_pool_has_its_records_and_a_workload_its_own_account(tmp_path):
    fleet = fleet_of(tmp_path)
    cluster = fleet.clusters["gke-b"]
    assert cluster.billing_account == "physics" and fleet.billing_accounts == {"sweeper": "ml-team"}
    rules = accounting_rules(cluster, fleet, interval="30s")["groups"][0]
    assert rules["interval"] == "30s"
    records = [r["record"] for r in rules["rules"]]
    assert set(records) == set(ACCOUNTING_RULES)
    pods = [r for r in rules["rules"] if r["record"] == "gpufleet:pod_used_cards"]
    assert {(r["labels"]["pool"], r["labels"]["billing_account"]) for r in pods} == {
        (p.name, a) for p in cluster.all_pools for a in ("physics", "ml-team")
    }
    theirs = next(r for r in pods if r["labels"]["billing_account"] == "ml-team")
    assert 'label_workload=~"sweeper"' in theirs["expr"]
    billed = [r for r in rules["rules"] if r["record"] == "gpufleet:billed_cards"]
    assert {r["labels"]["billing_account"] for r in billed} == {"physics"}  # the pool's owner pays its nodes


def test_a_bad_billing_account_is_refused(tmp_path):
    with pytest.raises(InputError, match="billing_account"):
        fleet_of(tmp_path, account="'has spaces'")
