"""policy/gpufleet_policies/gpu_pools.py: GPU node pools per cloud, each policy failing once and passing once."""

from __future__ import annotations

import pytest

from fleet.model.core.pod_contract import CI_LABEL
from fleet.model.loader import load_fleet
from fleet.tools.engine.analyzer import PolicyPackSession
from fleet.tools.engine.plan import plan_fleet
from tests.policy.support import (
    AKS_POOL,
    EKS_GROUP,
    GKE_POOL,
    MAGNUM_GROUP,
    POLICY,
    STACKS,
    WORKLOADS,
    assert_violation,
    check,
    reg,
)


def test_gke_pool_without_taint(plans, session):
    r = reg(plans, "fix-gke", GKE_POOL, "gpu-l4")
    assert check(session, r) == []
    r.inputs["nodeConfig"]["taints"] = []
    assert_violation(check(session, r), "gpu-pool-accelerator-taint", "lacks the accelerator taint", urn=r.urn)


def test_a_ci_pool_is_checked_as_the_cards_ci_pool(plans, session):
    """A CI pool is held to the policy's CI pool of its card, not to the card's own pool (whose taints it also
    carries): without its CI taint, benchmarks and probes could land on the CI nodes (mutation testing found a pack
    that compared it with the card's own pool passing the suite)."""
    r = reg(plans, "fix-aks", AKS_POOL, "gpu-t4-ci")
    assert check(session, r) == []
    ci_taint = f"{CI_LABEL}=true:NoSchedule"
    assert ci_taint in r.inputs["nodeTaints"]
    r.inputs["nodeTaints"] = [t for t in r.inputs["nodeTaints"] if t != ci_taint]
    assert_violation(check(session, r), "gpu-pool-accelerator-taint", ci_taint, urn=r.urn)


def test_gke_pool_without_card_label(plans, session):
    r = reg(plans, "fix-gke", GKE_POOL, "gpu-l4")
    del r.inputs["nodeConfig"]["labels"]["gpu"]
    assert_violation(check(session, r), "gpu-pool-card-label", "gpu=l4")


def test_aks_pool_without_taint(plans, session):
    r = reg(plans, "fix-aks", AKS_POOL, "gpu-t4")
    assert check(session, r) == []
    r.inputs["nodeTaints"] = [t for t in r.inputs["nodeTaints"] if "spot" in t]
    assert_violation(check(session, r), "gpu-pool-accelerator-taint")


def test_eks_group_with_min_size_2(plans, session):
    r = reg(plans, "fix-eks", EKS_GROUP, "gpu-t4")
    assert check(session, r) == []
    r.inputs["scalingConfig"]["minSize"] = 2
    assert_violation(check(session, r), "gpu-pool-size", "minimum size 2", "says 0", "scale to zero")


def test_eks_group_on_demand(plans, session):
    r = reg(plans, "fix-eks", EKS_GROUP, "gpu-a10g")
    r.inputs["capacityType"] = "ON_DEMAND"
    assert_violation(check(session, r), "gpu-pool-spot", "on-demand", "asks for spot")


def test_eks_group_for_a_card_the_cluster_lacks(plans, session):
    r = reg(plans, "fix-eks", EKS_GROUP, "gpu-t4")
    r.name = "fix-eks-gpu-h100"
    r.urn = r.urn.removesuffix("gpu-t4") + "gpu-h100"
    r.inputs["labels"]["gpu"] = "h100"
    assert_violation(check(session, r), "gpu-pool-allowed-card", "'h100'", "a10g")


def test_system_pool_is_not_a_gpu_pool(plans, session):
    r = reg(plans, "fix-eks", EKS_GROUP, "system")
    r.inputs["scalingConfig"]["minSize"] = 2
    assert check(session, r) == []


def test_magnum_group_keeps_one_node_unless_opted_in(plans, session):
    r = reg(plans, "fix-magnum", MAGNUM_GROUP, "gpu-v100")
    assert check(session, r) == []  # no labels or taints required on Magnum
    r.inputs["minNodeCount"] = 0
    assert_violation(check(session, r), "gpu-pool-size", "minimum size 0", "min_nodes: 0")


@pytest.fixture(scope="module")
def magnum_ci(tmp_path_factory):
    """The fixture fleet with a runner on its Magnum cluster: that stack's plan (only the Magnum stack) and a pack
    judging by that policy."""
    tmp = tmp_path_factory.mktemp("magnum-ci")
    text = POLICY.read_text(encoding="utf-8")
    assert "runners:\n  clusters:\n" in text
    policy = tmp / "fleet.yaml"
    policy.write_text(text.replace("runners:\n  clusters:\n", "runners:\n  clusters:\n    fix-magnum: [t4]\n"))
    fleet = load_fleet(policy, WORKLOADS)
    (plan,) = plan_fleet(fleet, policy, stacks=["fix-magnum"], stacks_dir=STACKS, workloads_dir=WORKLOADS)
    with PolicyPackSession(policy, workloads_dir=WORKLOADS) as session:
        yield {"fix-magnum": plan}, session


def test_magnum_ci_group_registers_its_nodes_with_the_ci_taint(magnum_ci):
    """A Magnum CI group's nodes register with the CI taint through its kubelet_options label (the heat driver hands
    a group's labels to its kubelet); without it benchmarks could share its nodes."""
    plans, session = magnum_ci
    r = reg(plans, "fix-magnum", MAGNUM_GROUP, "gpu-t4-ci")
    assert check(session, r) == []
    assert r.inputs["mergeLabels"] is True  # the cluster's driver labels stay
    r.inputs["labels"] = {}
    assert_violation(check(session, r), "gpu-pool-accelerator-taint", "gpu-fleet.io/ci=true:NoSchedule", urn=r.urn)
