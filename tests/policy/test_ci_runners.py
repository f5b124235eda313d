"""policy/gpufleet_policies/ci_runners.py: the CI jobs of a GitLab runner run on its card's pool, request the card
and are limited; each rule fails once on the fixture fleet's own runners (fix-eks t4, fix-aks t4 with AKS spot)."""

from __future__ import annotations

import copy
import tomllib
from collections.abc import Callable
from typing import Any

import pytest
import tomli_w

from tests.policy.support import assert_violation, check, reg

RELEASE = "kubernetes:helm.sh/v3:Release"


def runner_release(plans, stack: str) -> Any:
    return reg(plans, stack, RELEASE, "gitlab-runner-t4")


def edit(release: Any, change: Callable[[dict[str, Any]], None]) -> Any:
    """A copy of ``release`` whose runners.config TOML went through ``change`` (on the first [[runners]])."""
    edited = copy.deepcopy(release)
    config = tomllib.loads(edited.inputs["values"]["runners"]["config"])
    change(config["runners"][0])
    edited.inputs["values"]["runners"]["config"] = tomli_w.dumps(config)
    return edited


@pytest.mark.parametrize("stack", ["fix-eks", "fix-aks"])
def test_the_fleets_runners_pass(plans, session, stack):
    assert not [f for f in check(session, runner_release(plans, stack)) if f.policy == "ci-runner-placement"]


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        (lambda r: r["kubernetes"].pop("node_selector"), "must select the t4 pool (gpu=t4)"),
        (lambda r: r["kubernetes"].update(node_selector={"gpu": "a10"}), "must select the t4 pool"),
        (
            lambda r: r["kubernetes"]["node_tolerations"].pop("kubernetes.azure.com/scalesetpriority=spot"),
            "lacks kubernetes.azure.com/scalesetpriority=spot:NoSchedule",
        ),
        (lambda r: r["kubernetes"].pop("pod_spec"), "requests no nvidia.com/gpu"),
        (lambda r: r["kubernetes"]["pod_spec"][0].update(patch_type="merge"), "requests no nvidia.com/gpu"),
        (lambda r: r.pop("feature_flags"), "FF_USE_ADVANCED_POD_SPEC_CONFIGURATION = true in [runners.feature_flags]"),
        (
            lambda r: [r.pop("feature_flags"), r.update(environment=["FF_USE_ADVANCED_POD_SPEC_CONFIGURATION=true"])],
            "a CI job's own variables can turn off",
        ),
        (lambda r: r["kubernetes"].pop("memory_limit"), "no memory_limit"),
        (lambda r: r["kubernetes"].update(privileged=True), "privileged is true"),
        (lambda r: r["kubernetes"].pop("automount_service_account_token"), "automount_service_account_token"),
        (lambda r: r["kubernetes"].update(automount_service_account_token=True), "automount_service_account_token"),
        (lambda r: r["kubernetes"].update(service_account_overwrite_allowed=".*"), "service_account_overwrite"),
    ],
)
def test_each_rule_fails(plans, session, change, fragment):
    release = edit(runner_release(plans, "fix-aks"), change)
    assert_violation(check(session, release), "ci-runner-placement", "Release 'fix-aks-gitlab-runner-t4'", fragment)


def test_a_runner_for_a_card_the_cluster_lacks_and_a_broken_config(plans, session):
    release = runner_release(plans, "fix-eks")
    other = copy.deepcopy(release)
    other.inputs["values"]["podLabels"]["gpu"] = "h100"
    assert_violation(check(session, other), "ci-runner-placement", "'h100'", "does not offer")
    broken = copy.deepcopy(release)
    broken.inputs["values"]["runners"]["config"] = "[[runners]\n"
    assert_violation(check(session, broken), "ci-runner-placement", "runners.config is not TOML")
