"""policy/gpufleet_policies/ci_runners.py: the CI jobs of a GitLab runner run on its card's CI pool, request the card
and are limited, and no benchmark tolerates the CI taint or selects the CI label; each rule fails once on the fixture
fleet's own runners (fix-eks t4, fix-aks t4 with AKS spot) and its benchmarks."""

from __future__ import annotations

import copy
import tomllib
from collections.abc import Callable
from typing import Any

import pytest
import tomli_w

from fleet.model.core import pod_contract
from tests.policy.support import CRONJOB, DEPLOYMENT, JOB, assert_violation, check, reg

DAEMONSET = "kubernetes:apps/v1:DaemonSet"

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
        (
            lambda r: r["kubernetes"].pop("node_selector"),
            f"must select the t4 CI pool gpu-t4-ci (gpu=t4, {pod_contract.CI_LABEL}=true)",
        ),
        (lambda r: r["kubernetes"].update(node_selector={"gpu": "a10"}), "must select the t4 CI pool"),
        # the card's own pool, where the benchmarks run, is not the CI pool
        (lambda r: r["kubernetes"].update(node_selector={"gpu": "t4"}), "must select the t4 CI pool"),
        (
            lambda r: r["kubernetes"]["node_tolerations"].pop(f"{pod_contract.CI_LABEL}=true"),
            f"lacks {pod_contract.CI_LABEL}=true:NoSchedule of the gpu-t4-ci pool",
        ),
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
    assert_violation(check(session, other), "ci-runner-placement", "'h100'", "no runner")
    broken = copy.deepcopy(release)
    broken.inputs["values"]["runners"]["config"] = "[[runners]\n"
    assert_violation(check(session, broken), "ci-runner-placement", "runners.config is not TOML")


def _benchmark(plans, stack: str) -> Any:
    """A benchmark Job (or CronJob) of ``stack`` that runs on a GPU pool."""
    for r in plans[stack].registrations:
        if r.type in (JOB, CRONJOB) and "gpu" in str(r.inputs.get("metadata", {}).get("labels", {})):
            return copy.deepcopy(r)
    raise LookupError(stack)


def _pod(job: Any) -> dict[str, Any]:
    spec = job.inputs["spec"]
    template = spec["jobTemplate"]["spec"]["template"] if job.type == CRONJOB else spec["template"]
    return template["spec"]


@pytest.mark.parametrize(
    ("toleration", "fragment"),
    [
        ({"key": pod_contract.CI_LABEL, "operator": "Equal", "value": "true", "effect": "NoSchedule"}, "tolerates"),
        ({"key": pod_contract.CI_LABEL, "operator": "Exists"}, "tolerates"),
        ({"operator": "Exists"}, "tolerates"),  # every taint, the CI taint among them
    ],
)
def test_a_benchmark_never_tolerates_the_ci_taint(plans, session, toleration, fragment):
    job = _benchmark(plans, "fix-eks")
    assert not [f for f in check(session, job) if f.policy == "ci-runner-placement"]
    _pod(job).setdefault("tolerations", []).append(toleration)
    assert_violation(check(session, job), "ci-runner-placement", fragment, f"{pod_contract.CI_LABEL}=true:NoSchedule")


def test_a_benchmark_never_selects_the_ci_label(plans, session):
    job = _benchmark(plans, "fix-gke")
    _pod(job)["nodeSelector"][pod_contract.CI_LABEL] = "true"
    assert_violation(check(session, job), "ci-runner-placement", f"selects {pod_contract.CI_LABEL}")


def test_a_node_agent_may_tolerate_the_ci_taint(plans, session):
    """The device plugin and dcgm-exporter must run on CI nodes too (they advertise and watch the cards): a DaemonSet
    that tolerates every taint passes, the same pod as a Deployment does not."""
    job = _benchmark(plans, "fix-eks")
    pod = {"metadata": {"labels": {}}, "spec": {**_pod(job), "tolerations": [{"operator": "Exists"}]}}
    daemon = copy.deepcopy(job)
    daemon.type, daemon.urn = DAEMONSET, job.urn.replace(job.type, DAEMONSET)
    daemon.inputs = {"metadata": job.inputs["metadata"], "spec": {"template": pod}}
    assert not [f for f in check(session, daemon) if f.policy == "ci-runner-placement"]
    deployment = copy.deepcopy(daemon)
    deployment.type, deployment.urn = DEPLOYMENT, job.urn.replace(job.type, DEPLOYMENT)
    assert_violation(check(session, deployment), "ci-runner-placement", "tolerates")
