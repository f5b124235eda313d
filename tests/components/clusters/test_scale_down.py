"""Fast scale-down of GPU pools, from one policy value (defaults.gpu_pool.scale_down_after), on every cloud that
allows it: GKE's autoscaling profile, AKS's autoscaler profile, the cluster-autoscaler we run on EKS and Magnum."""

from __future__ import annotations

import pytest

from fleet.model.loader import load_fleet
from fleet.tools.engine.plan import StackPlan, plan_fleet
from tests.conftest import FIXTURES
from tests.helpers import GOOD, by_type, plan_one

FLEET = FIXTURES / "fleet"
RELEASE = "kubernetes:helm.sh/v3:Release"


@pytest.fixture(scope="module")
def plans() -> dict[str, StackPlan]:
    fleet = load_fleet(FLEET / "fleet.yaml", FLEET / "workloads")
    found = plan_fleet(fleet, FLEET / "fleet.yaml", stacks_dir=FLEET / "stacks", workloads_dir=FLEET / "workloads")
    return {p.stack: p for p in found}


def autoscaler_args(plan: StackPlan) -> list[dict]:
    return [
        r.inputs["values"]["extraArgs"] for r in by_type(plan, RELEASE) if r.inputs["chart"] == "cluster-autoscaler"
    ]


def test_the_default_is_five_minutes_on_every_cloud_that_takes_a_time(plans):
    fleet = load_fleet(FLEET / "fleet.yaml", FLEET / "workloads")
    assert {c.scale_down_after for c in fleet.clusters.values()} == {"5m"}
    (aks,) = by_type(plans["fix-aks"], "azure-native:containerservice:ManagedCluster")
    assert aks.inputs["autoScalerProfile"] == {"scaleDownUnneededTime": "5m", "scaleDownDelayAfterAdd": "5m"}
    for stack in ("fix-eks", "fix-magnum"):
        (args,) = autoscaler_args(plans[stack])
        assert args["scale-down-unneeded-time"] == "5m" and args["scale-down-delay-after-add"] == "5m", stack
    (gke,) = by_type(plans["fix-gke"], "gcp:container/cluster:Cluster")
    assert gke.inputs["clusterAutoscaling"] == {"enabled": False, "autoscalingProfile": "OPTIMIZE_UTILIZATION"}


def test_gke_keeps_its_balanced_profile_when_the_policy_waits_as_long_as_the_default(tmp_path):
    policy = GOOD.replace("spot: true}", "spot: true, scale_down_after: 10m}").split("  openstack:")[0]
    policy += "  gcp:\n    gke-a:\n      zone: us-central1-a\n      central: true\n      gpus: [t4]\n"
    plan = plan_one(tmp_path, policy, "gke-a", {"gcp:project": "proj-1"})
    (gke,) = by_type(plan, "gcp:container/cluster:Cluster")
    assert gke.inputs["clusterAutoscaling"]["autoscalingProfile"] == "BALANCED"


@pytest.mark.parametrize("value", ["30s", "1h", "0m", "5", "10 m"])
def test_scale_down_after_is_whole_minutes(tmp_path, value):
    from fleet.model.core.errors import InputError

    policy = tmp_path / "fleet.yaml"
    policy.write_text(GOOD.replace("spot: true}", f"spot: true, scale_down_after: '{value}'}}"), encoding="utf-8")
    (tmp_path / "w").mkdir()
    with pytest.raises(InputError) as caught:
        load_fleet(policy, tmp_path / "w")
    assert "defaults.gpu_pool.scale_down_after" in str(caught.value.problems[0])
