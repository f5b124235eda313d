"""The pack as a whole (policy/gpufleet_policies/): the shipped and fixture fleets pass it, it lists every policy with
a description, and `plan` fails a deliberately broken program."""

from __future__ import annotations

import re
from typing import Any

import pytest
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE, unknown_checking_proxy

from fleet.model.loader import load_fleet
from fleet.tools.engine.analyzer import PolicyPackSession, analyze_plans
from fleet.tools.engine.plan import plan_fleet
from policy.gpufleet_policies.resources import plain, release_chart
from tests.in_process_pack import InProcessPackSession, under_mutmut
from tests.policy.support import PLAN_ARGS, POLICY, SHIPPED, WORKLOADS, issue_job_spec, raw_job

# Advisory in a preview, mandatory in a deploy (policy/deploy-config.json): what a stack file leaves open.
DEPLOY_ONLY = ("api-allow-list", "federation-source-ranges")


def test_shipped_fleet_has_no_findings():
    """Whatever the shipped policy says, the program's plan of it passes the pack (derived from the policy)."""
    plans = {p.stack: p for p in plan_fleet(load_fleet(SHIPPED), SHIPPED)}
    findings = analyze_plans(plans.values(), policy_file=SHIPPED)
    assert set(findings) == set(plans)
    for stack, found in findings.items():
        assert [f for f in found if f.level == "mandatory"] == [], stack
        # no other advisory either; images-by-digest flags only what the repository does not pin by digest yet,
        # api-allow-list and federation-source-ranges what a stack file leaves open (a deploy refuses both)
        assert {f.policy for f in found} <= {"images-by-digest", *DEPLOY_ONLY}, stack
        for f in found:
            if f.policy in DEPLOY_ONLY:
                assert "pulumi config set --stack" in f.message, f.message
                continue
            ref = re.search(r"runs '([^']+)'|\(([^)]+)\) is not pinned", f.message)
            assert ref and "@sha256:" not in (ref.group(1) or ref.group(2)), f.message


def test_fixture_fleet_has_no_findings(plans):
    findings = analyze_plans(plans.values(), policy_file=POLICY, workloads_dir=WORKLOADS)
    assert set(findings) == set(plans)
    for stack, found in findings.items():
        assert [f for f in found if f.level == "mandatory"] == [], stack
        # the fixtures' images have no digest, and their stack files name no API allow-list
        assert {f.policy for f in found} <= {"images-by-digest", *DEPLOY_ONLY}, stack


def test_pack_lists_every_policy_with_a_description(session):
    policies = {p.name: p for p in session.info.policies}
    assert session.info.name == "gpu-fleet"
    assert {
        "gpu-pool-allowed-card",
        "gpu-pool-card-label",
        "gpu-pool-accelerator-taint",
        "gpu-pool-size",
        "gpu-pool-spot",
        "benchmark-allowed-card",
        "benchmark-placement",
        "benchmark-limits",
        "benchmark-mtail-sidecar",
        "benchmark-metric-labels",
        "benchmark-pinned-images",
        "pod-security-restricted",
        "pod-service-account-token",
        "images-by-digest",
        "namespace-pod-security",
        "namespace-default-deny-ingress",
        "namespace-default-deny-egress",
        "iam-role-boundary",
        "benchmark-set-matches-policy",
        "cluster-protected",
        "ci-runner-placement",
        "preview-identity-least-privilege",
        "queue-worker-least-privilege",
        "federation-source-ranges",
        "api-allow-list",
    } <= set(policies)
    assert all(len(p.description) > 30 for p in policies.values())


def test_the_pool_name_contract():
    from fleet.model.core.pod_contract import card_of_pool, pool_name

    assert pool_name("tpu-v5e") == "gpu-tpu-v5e"
    for name, card in (
        ("eks-test-gpu-t4", "t4"),
        ("gpu-tpu-v5e", "tpu-v5e"),  # a Magnum role
        ("aks-test-gpu-tpu-v5e", "tpu-v5e"),
        ("gpu-lab-gpu-a100", "a100"),  # a cluster whose own name has gpu- in it
        ("eks-test-system", None),
    ):
        assert card_of_pool(name) == card, name


def test_pack_process_is_stopped():
    s = PolicyPackSession(POLICY, workloads_dir=WORKLOADS)
    proc = s._proc
    s.close()
    assert proc.poll() is not None


def test_the_pack_in_the_test_process_finds_what_the_pack_process_finds(plans, session):
    """``make mutation`` runs the pack in the test process (tests/in_process_pack.py): it must be the same pack."""
    in_process = InProcessPackSession(POLICY, workloads_dir=WORKLOADS)
    assert {p.name for p in in_process.info.policies} == {p.name for p in session.info.policies}
    broken = raw_job(issue_job_spec())
    for registrations in [*(p.registrations for p in plans.values()), [broken]]:
        found = {(f.level, f.policy, f.urn, f.message) for f in session.analyze_registrations(registrations)}
        assert found == {(f.level, f.policy, f.urn, f.message) for f in in_process.analyze_registrations(registrations)}
    assert any(level == "mandatory" for level, *_ in found)  # the broken Job's findings were compared too


def _broken_plan(capsys: pytest.CaptureFixture[str], stack: str) -> tuple[int, str]:
    """``python -m fleet plan --stack STACK`` in this process (so a patched component is what runs)."""
    from fleet.tools.cli import main

    status = main(["plan", *PLAN_ARGS, "--stack", stack])
    captured = capsys.readouterr()
    return status, captured.out + captured.err


def test_plan_fails_a_program_whose_gpu_pools_lose_their_taint(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import components.clusters.gke

    # The bug: GKE pools declare the accelerator taint as PreferNoSchedule, so other pods may land on GPUs.
    monkeypatch.setattr(
        components.clusters.gke,
        "upper_effect",
        lambda t: {"key": t.key, "value": t.value, "effect": "PREFER_NO_SCHEDULE"},
    )
    status, output = _broken_plan(capsys, "fix-gke")
    assert status == 1, output
    assert "gpu-pool-accelerator-taint" in output and "fix-gke-gpu-t4" in output, output
    pools = load_fleet(POLICY, WORKLOADS).cluster("fix-gke").all_pools
    assert f"{len(pools)} mandatory violation(s)" in output, output  # one per GPU pool


def test_plan_fails_a_program_that_runs_a_workload_on_a_card_the_policy_forbids(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from fleet.model.core.fleet import Fleet
    from fleet.model.core.jobs import WorkloadJob

    if under_mutmut():
        pytest.skip("the patched model would reach the pack too: under mutmut it runs in this process")

    # The bug: benchmarks placed on every card of the cluster, ignoring the policy's list for fitter (no A10).
    def every_card(self: Fleet, cluster: Any) -> list[WorkloadJob]:
        return [
            WorkloadJob(self.workloads[w], pool, self.schedules[w]) for w in self.placements for pool in cluster.pools
        ]

    monkeypatch.setattr(Fleet, "benchmarks", every_card)
    # the bug's extra pods are checked by the pack here, not refused earlier by the model's placement check
    monkeypatch.setattr("fleet.model.loader.placement_problems", lambda fleet, doc: [])
    status, output = _broken_plan(capsys, "fix-aks")
    assert status == 1, output
    assert "benchmark-allowed-card" in output and "benchmark-set-matches-policy" in output, output
    assert "fitter-a10" in output, output


def test_plan_of_the_unbroken_stack_passes(capsys: pytest.CaptureFixture[str]) -> None:
    status, output = _broken_plan(capsys, "fix-gke")
    assert status == 0 and "0 mandatory violation(s)" in output, output


def test_a_policy_reads_what_a_preview_knows_and_not_what_it_cannot():
    # the engine sends a value a preview cannot know as this sentinel (pulumi_policy/proxy.py)
    unknown = UNKNOWN_STRING_VALUE
    props = unknown_checking_proxy(
        {"spec": {"replicas": 1.0, "names": ["a", unknown]}, "status": unknown, "metadata": {"namespace": unknown}}
    )
    assert plain(props) == {"spec": {"replicas": 1, "names": ["a"]}, "metadata": {}}


@pytest.mark.parametrize(
    "chart",
    ["kueue", "oci://ghcr.io/x/kueue", "/charts/kueue-0.19.2.tgz", "kueue-v0.19.2.tgz", "/c/kueue-1.0.0-rc.1.tgz"],
)
def test_a_release_names_its_chart_whether_from_a_repository_or_a_chart_cache(chart):
    assert release_chart({"chart": chart}) == "kueue"
    assert release_chart({"chart": "/c/kube-prometheus-stack-79.5.0.tgz"}) == "kube-prometheus-stack"
