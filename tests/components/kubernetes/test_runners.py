"""GitLab CI runners under the mock engine (components/kubernetes/runners.py): one gitlab-runner release per
(cluster, card) of the policy's runners section, whose config.toml puts CI jobs on the card's CI pool (a pool of their
own, which no benchmark selects or tolerates) with the card requested, the token only from secret config, the
runners' metrics scraped, and their namespaces fenced."""

from __future__ import annotations

import json
import tomllib

import pytest
import yaml

from components.kubernetes.images import chart
from components.kubernetes.runners import POLL_TIMEOUT_SECONDS, RUNNER_METRICS_PORT
from fleet.model.core import pod_contract
from fleet.model.loader import load_fleet
from fleet.model.placement.pods import PodToPlace, cluster_nodes, place
from fleet.program.stack_config import SECRET_PLACEHOLDER
from fleet.tools.engine.plan import StackPlan
from tests.helpers import by_type, one, plan_one

# An AKS cluster with two GPU runners; both pools are spot, so CI jobs must tolerate AKS's spot taint too.
POLICY = """
registry: registry.example.org/lab
clusters:
  azure:
    aks-ci:
      region: westeurope
      central: true
      gpus: [t4, a100]
runners:
  gitlab_url: https://gitlab.example.org
  clusters:
    aks-ci:
      t4: {concurrency: 3, tags: [cuda, t4]}
      a100: {cpu_limit: 8, memory_limit: 64Gi}
"""
CONFIG = {"azure-native:location": "westeurope", "azure-native:subscriptionId": "11111111-2222-3333-4444-555555555555"}
RELEASE = "kubernetes:helm.sh/v3:Release"
SECRET = "kubernetes:core/v1:Secret"
TOKEN = "glrt-this-must-never-show"


def secure(value: str) -> dict[str, str]:
    return {"secure": f"v1:{value}"}


@pytest.fixture(scope="module")
def plan(tmp_path_factory: pytest.TempPathFactory) -> StackPlan:
    config = {**CONFIG, "gpu-fleet:runnerTokens": {"t4": secure(TOKEN)}}
    return plan_one(tmp_path_factory.mktemp("runners"), POLICY, "aks-ci", config)


def runner_toml(plan: StackPlan, card: str) -> dict:
    release = one(plan, RELEASE, f"aks-ci-gitlab-runner-{card}")
    return tomllib.loads(release.inputs["values"]["runners"]["config"])


def test_one_pinned_release_per_runner_with_the_policys_settings(plan):
    releases = {r.inputs["name"]: r.inputs for r in by_type(plan, RELEASE) if r.inputs["chart"] == "gitlab-runner"}
    assert set(releases) == {"gitlab-runner-t4", "gitlab-runner-a100"}
    pinned = chart("gitlab-runner")
    t4 = releases["gitlab-runner-t4"]
    assert (t4["version"], t4["repositoryOpts"]["repo"]) == (pinned.version, pinned.repo)
    assert t4["namespace"] == "ci-runners"
    values = t4["values"]
    assert values["gitlabUrl"] == "https://gitlab.example.org" and values["concurrent"] == 3
    assert values["runners"]["secret"] == "gitlab-runner-t4" and values["runners"]["jobNamespace"] == "ci-builds"
    assert values["metrics"] == {"enabled": True, "portName": "metrics", "port": RUNNER_METRICS_PORT}
    assert values["podSecurityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    # the runner's image from the fleet's registry, split as the chart joins it (host, then the path in it)
    assert values["image"]["registry"] == "registry.example.org" and values["image"]["image"] == "lab/gitlab-runner"
    assert releases["gitlab-runner-a100"]["values"]["concurrent"] == 2  # the default


@pytest.mark.parametrize("card", ["t4", "a100"])
def test_the_config_toml_parses_and_puts_jobs_on_the_cards_ci_pool_requesting_it(plan, card):
    (runner,) = runner_toml(plan, card)["runners"]
    kube = runner["kubernetes"]
    assert kube["node_selector"] == {"gpu": card, pod_contract.CI_LABEL: "true"}
    assert kube["node_tolerations"] == {
        "nvidia.com/gpu=present": "NoSchedule",
        f"{pod_contract.CI_LABEL}=true": "NoSchedule",  # the CI pool's own taint
        "kubernetes.azure.com/scalesetpriority=spot": "NoSchedule",  # AKS taints its spot pools
    }
    (patch,) = kube["pod_spec"]
    assert patch["patch_type"] == "strategic"
    (build,) = yaml.safe_load(patch["patch"])["containers"]
    assert build["name"] == "build"
    assert build["resources"] == {"requests": {"nvidia.com/gpu": 1}, "limits": {"nvidia.com/gpu": 1}}
    assert runner["feature_flags"] == {pod_contract.ADVANCED_POD_SPEC_FLAG: True} and "environment" not in runner
    assert "pre_build_script" not in runner  # AKS: the NVIDIA toolkit sets the container up
    assert kube["namespace"] == "ci-builds" and kube["privileged"] is False
    assert kube["automount_service_account_token"] is False  # no API token in a CI job
    assert not any(k.endswith("_overwrite_allowed") for k in kube)  # a job cannot pick another service account
    assert kube["poll_timeout"] == POLL_TIMEOUT_SECONDS
    assert (kube["cpu_limit"], kube["memory_limit"]) == (("4", "12Gi") if card == "t4" else ("8", "64Gi"))
    assert (kube["cpu_request"], kube["memory_request"]) == ("1", "4Gi")  # below the limits: the pod fits a node


AGENT_POOL = "azure-native:containerservice:AgentPool"


@pytest.mark.parametrize(
    ("card", "name", "machine", "most"),
    [("t4", "gput4ci", "Standard_NC4as_T4_v3", 3), ("a100", "gpua100ci", "Standard_NC24ads_A100_v4", 2)],
)
def test_each_runner_gets_a_spot_ci_agent_pool_from_zero_sized_for_its_jobs(plan, card, name, machine, most):
    pool = one(plan, AGENT_POOL, f"aks-ci-gpu-{card}-ci").inputs
    assert (pool["agentPoolName"], pool["vmSize"], pool["minCount"], pool["maxCount"]) == (name, machine, 0, most)
    assert pool["scaleSetPriority"] == "Spot" and pool["mode"] == "User"
    assert pool["nodeLabels"]["gpu"] == card and pool["nodeLabels"][pod_contract.CI_LABEL] == "true"
    assert f"{pod_contract.CI_LABEL}=true:NoSchedule" in pool["nodeTaints"]
    # the card's own pool, where benchmarks run, carries neither
    own = one(plan, AGENT_POOL, f"aks-ci-gpu-{card}").inputs
    assert pod_contract.CI_LABEL not in own["nodeLabels"] and not [
        t for t in own["nodeTaints"] if t.startswith(pod_contract.CI_LABEL)
    ]
    assert plan.exports["node_pools"][f"{card}-ci"] == f"aks-ci-gpu-{card}-ci"


def test_a_ci_job_lands_only_on_its_ci_pool_and_a_benchmark_never_there(plan, tmp_path):
    """The job pod as the runner's config.toml makes it, placed by the scheduler's filters on nodes made from every pool
    of the cluster: the CI pool alone takes it; the card's own pool does not (no CI label), nor any other."""
    policy = tmp_path / "fleet.yaml"
    policy.write_text(POLICY, encoding="utf-8")
    (tmp_path / "workloads").mkdir()
    cluster = load_fleet(policy, tmp_path / "workloads").cluster("aks-ci")
    nodes = cluster_nodes(cluster)
    for card in ("t4", "a100"):
        kube = runner_toml(plan, card)["runners"][0]["kubernetes"]
        tolerations = [
            {"key": k.split("=")[0], "operator": "Equal", "value": k.split("=")[1], "effect": e}
            for k, e in kube["node_tolerations"].items()
        ]
        job = {
            "nodeSelector": kube["node_selector"],
            "tolerations": tolerations,
            "containers": [
                {
                    "name": "build",
                    "resources": {
                        "requests": {"cpu": kube["cpu_request"], "memory": kube["memory_request"]},
                        "limits": {"nvidia.com/gpu": 1, "cpu": kube["cpu_limit"], "memory": kube["memory_limit"]},
                    },
                }
            ],
        }
        assert place(PodToPlace("ci job", f"gpu-{card}-ci", job), nodes) is None
        # a pod of the card's own pool (a benchmark: the card's selector and tolerations) lands there alone
        own = cluster.pool(card)
        bench = {
            "nodeSelector": own.node_selector,
            "tolerations": [
                {"key": t.key, "operator": "Equal", "value": t.value, "effect": t.effect} for t in own.pod_tolerations
            ],
            "containers": [{"name": "workload", "resources": {"limits": {"nvidia.com/gpu": 1, "cpu": "1"}}}],
        }
        assert place(PodToPlace("benchmark", f"gpu-{card}", bench), nodes) is None
        (ci_node,) = [n for n in nodes if n.pool == f"gpu-{card}-ci"]
        assert f"node(s) had untolerated taint {{{pod_contract.CI_LABEL}: true}}" in ci_node.reasons(bench)


def test_the_token_is_a_secret_and_appears_nowhere_in_plain_text(plan):
    secret = one(plan, SECRET, "aks-ci-gitlab-runner-t4-token")
    shown = secret.plain_inputs()
    assert shown["metadata"]["name"] == "gitlab-runner-t4" and shown["metadata"]["namespace"] == "ci-runners"
    assert shown["stringData"]["runner-token"] == "[secret]" and set(shown["stringData"]) == {
        "runner-token",
        "runner-registration-token",  # the chart mounts both keys
    }
    text = json.dumps(plan.as_dict(), default=str)
    assert TOKEN not in text and SECRET_PLACEHOLDER not in text
    assert plan.exports["ci_runners"]["t4"]["tags"] == ["cuda", "t4"]


def test_a_runner_without_a_token_gets_no_secret_and_a_warning_with_the_command(plan):
    assert not [r for r in by_type(plan, SECRET) if r.name.endswith("gitlab-runner-a100-token")]
    release = one(plan, RELEASE, "aks-ci-gitlab-runner-a100")
    assert release.inputs["skipAwait"] is True  # its pod waits for the Secret; the deploy does not fail
    (warning,) = [f.message for f in plan.findings if "a100 runner waits for its token" in f.message]
    assert "with the tags gpu-fleet, a100, gpu" in warning
    assert "pulumi config set --stack aks-ci --secret --path 'gpu-fleet:runnerTokens.a100' <glrt-...>" in warning


def test_the_runners_are_scraped_and_their_namespaces_fenced(plan):
    (monitor,) = [r for r in by_type(plan, "kubernetes:monitoring.coreos.com/v1:PodMonitor") if "runners" in r.name]
    assert monitor.inputs["spec"]["podTargetLabels"] == ["gpu", "cluster", "cloud"]
    assert monitor.inputs["spec"]["podMetricsEndpoints"][0]["port"] == "metrics"
    namespaces = {
        r.inputs["metadata"]["name"]: r.inputs["metadata"] for r in by_type(plan, "kubernetes:core/v1:Namespace")
    }
    assert namespaces["ci-runners"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert namespaces["ci-builds"]["labels"]["pod-security.kubernetes.io/enforce"] == "baseline"
    assert "root" in namespaces["ci-builds"]["annotations"]["gpu-fleet.io/pod-security-exception"]
    policies = {
        (r.inputs["metadata"]["namespace"], r.inputs["metadata"]["name"]): r.inputs["spec"]
        for r in by_type(plan, "kubernetes:networking.k8s.io/v1:NetworkPolicy")
    }
    assert ("ci-builds", "default-deny-ingress") in policies and ("ci-runners", "default-deny-ingress") in policies
    allow = policies[("ci-runners", "allow-prometheus")]
    assert allow["ingress"][0]["ports"] == [{"port": RUNNER_METRICS_PORT, "protocol": "TCP"}]


def test_no_runner_no_ci_namespace(tmp_path):
    plan = plan_one(tmp_path, POLICY.split("runners:")[0], "aks-ci", CONFIG)
    names = {r.inputs["metadata"]["name"] for r in by_type(plan, "kubernetes:core/v1:Namespace")}
    assert not names & {"ci-runners", "ci-builds"} and "ci_runners" not in plan.exports


def test_plain_text_tokens_are_refused(tmp_path):
    with pytest.raises(Exception, match="holds credentials in plain text"):
        plan_one(tmp_path, POLICY, "aks-ci", {**CONFIG, "gpu-fleet:runnerTokens": {"t4": TOKEN}})
