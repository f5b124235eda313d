"""policy/gpufleet_policies/sharing.py on the fixture fleet's shared pools (fix-gke t4: GKE time-sharing x3, fix-aks
a100: MIG 1g.10gb, fix-eks t4: our device plugin's time-slicing x2); each rule fails once."""

from __future__ import annotations

import copy

import yaml

from tests.policy.support import AKS_POOL, GKE_POOL, assert_violation, check, only, reg

RELEASE = "kubernetes:helm.sh/v3:Release"
TAG = "aws:autoscaling/tag:Tag"
RULES = ("gpu-pool-sharing", "device-plugin-sharing", "device-plugin-requests", "autoscaler-template-units")


def findings_of(session, r):
    return [f for f in check(session, r) if f.policy in RULES]


def test_the_fixture_fleets_sharing_passes(plans, session):
    for stack, type_, name in (
        ("fix-gke", GKE_POOL, "-gpu-t4"),
        ("fix-aks", AKS_POOL, "-gpu-a100"),
        ("fix-eks", RELEASE, "-nvidia-device-plugin"),
        ("fix-aks", RELEASE, "-nvidia-device-plugin"),
        ("fix-eks", TAG, "-gpu-t4-asg-resources-nvidia-com-gpu"),
    ):
        assert not findings_of(session, reg(plans, stack, type_, name)), (stack, name)


def test_a_gke_pool_without_its_time_sharing_is_refused(plans, session):
    pool = reg(plans, "fix-gke", GKE_POOL, "-gpu-t4")
    pool.inputs["nodeConfig"]["guestAccelerators"][0].pop("gpuSharingConfig")
    assert_violation(check(session, pool), "gpu-pool-sharing", "shares its cards as whole cards", "time-slicing-3")
    whole = reg(plans, "fix-gke", GKE_POOL, "-gpu-l4")
    whole.inputs["nodeConfig"]["guestAccelerators"][0]["gpuPartitionSize"] = "1g.5gb"
    assert_violation(check(session, whole), "gpu-pool-sharing", "as mig-1g.5gb", "says whole cards")


def test_an_aks_pool_with_another_mig_profile_is_refused(plans, session):
    pool = reg(plans, "fix-aks", AKS_POOL, "-gpu-a100")
    pool.inputs["gpuInstanceProfile"] = "MIG2g"
    assert_violation(check(session, pool), "gpu-pool-sharing", "MIG profile MIG2g", "MIG profile MIG1g")


def test_a_device_plugin_without_the_pools_configuration_is_refused(plans, session):
    release = reg(plans, "fix-eks", RELEASE, "-nvidia-device-plugin")
    configs = release.inputs["values"]["config"]["map"]
    edited = copy.deepcopy(release)
    config = yaml.safe_load(configs["time-slicing-2"])
    config["sharing"]["timeSlicing"]["resources"][0]["replicas"] = 4
    edited.inputs["values"]["config"]["map"]["time-slicing-2"] = yaml.safe_dump(config)
    assert_violation(check(session, edited), "device-plugin-sharing", "into 4 replicas", "says 2")
    del release.inputs["values"]["config"]["map"]["time-slicing-2"]
    assert_violation(check(session, release), "device-plugin-sharing", "no configuration 'time-slicing-2'")
    aks = reg(plans, "fix-aks", RELEASE, "-nvidia-device-plugin")
    aks.inputs["values"]["config"]["map"]["mig-1g.10gb"] = "version: v1\nflags: {migStrategy: none}\n"
    assert_violation(check(session, aks), "device-plugin-sharing", "migStrategy none, not single")


def test_a_device_plugin_without_its_requests_or_its_post_renderer_is_refused(plans, session):
    release = reg(plans, "fix-eks", RELEASE, "-nvidia-device-plugin")
    edited = copy.deepcopy(release)
    del edited.inputs["postrender"]
    assert_violation(check(session, edited), "device-plugin-requests", "post-renderer None", "would ask nothing")
    del release.inputs["values"]["resources"]["requests"]["memory"]
    assert_violation(check(session, release), "device-plugin-requests", "request no memory")


def test_a_node_template_counting_whole_cards_of_a_sliced_pool_is_refused(plans, session):
    tag = reg(plans, "fix-eks", TAG, "-gpu-t4-asg-resources-nvidia-com-gpu")
    assert tag.inputs["tag"]["value"] == "2"  # one T4, two slices
    tag.inputs["tag"]["value"] = "1"
    assert_violation(check(session, tag), "autoscaler-template-units", "says 1 nvidia.com/gpu", "advertises 2")
    assert not only(findings_of(session, reg(plans, "fix-eks", TAG, "-gpu-a10g-asg-resources-nvidia-com-gpu")), "x")
