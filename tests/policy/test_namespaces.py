"""policy/gpufleet_policies/namespaces.py: Pod Security levels of namespaces and default-deny ingress."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from fleet.tools.engine.mock_engine import Registration
from tests.policy.support import NAMESPACE, NETWORK_POLICY, assert_violation, check, only, raw


def test_namespace_levels(plans, session):
    namespaces = {r.inputs["metadata"]["name"]: r for r in plans["fix-gke"].registrations if r.type == NAMESPACE}
    for r in namespaces.values():
        assert not only(check(session, r), "namespace-pod-security"), r.name
    bench = copy.deepcopy(namespaces["benchmarks"])
    bench.inputs["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] = "baseline"
    assert_violation(check(session, bench), "namespace-pod-security", "must enforce restricted")
    del bench.inputs["metadata"]["labels"]["pod-security.kubernetes.io/enforce"]
    assert_violation(check(session, bench), "namespace-pod-security", "has no Pod Security level")
    agents = copy.deepcopy(namespaces["node-agents"])
    agents.inputs["metadata"]["annotations"] = {}
    assert_violation(check(session, agents), "namespace-pod-security", "privileged' without saying why")


def test_every_namespace_denies_ingress_by_default(plans, session):
    stack = plans["fix-gke"].registrations
    assert not only(session.analyze_registrations(list(stack)), "namespace-default-deny-ingress")
    without = [
        r
        for r in stack
        if not (
            r.type == NETWORK_POLICY
            and r.inputs["metadata"]["name"] == "default-deny-ingress"
            and r.inputs["metadata"]["namespace"] == "node-agents"
        )
    ]
    assert_violation(
        session.analyze_registrations(without), "namespace-default-deny-ingress", "'node-agents'", "podSelector {}"
    )
    # an "allow" policy is not a default deny
    opened = copy.deepcopy(without)
    for r in opened:
        if r.type == NETWORK_POLICY and r.inputs["metadata"]["namespace"] == "node-agents":
            r.inputs["spec"]["podSelector"] = {}
    assert_violation(session.analyze_registrations(opened), "namespace-default-deny-ingress", "'node-agents'")


def test_namespace_levels_of_the_benchmark_namespaces(plans, session):
    (bench,) = [r for r in plans["fix-gke"].registrations if r.type == NAMESPACE and r.name.endswith("benchmarks")]
    root = copy.deepcopy(bench)
    root.inputs["metadata"]["name"] = "benchmarks-root"
    labels = root.inputs["metadata"]["labels"]
    for level in ("baseline", "restricted"):
        labels["pod-security.kubernetes.io/enforce"] = level
        assert not only(check(session, root), "namespace-pod-security"), level
    labels["pod-security.kubernetes.io/enforce"] = "privileged"
    root.inputs["metadata"]["annotations"] = {"gpu-fleet.io/pod-security-exception": "it is easier"}
    assert_violation(check(session, root), "namespace-pod-security", "'benchmarks-root'", "restricted or baseline")
    labels["pod-security.kubernetes.io/enforce"] = "root"  # not a Pod Security level
    assert_violation(check(session, root), "namespace-pod-security", "has no Pod Security level")


def test_a_privileged_namespace_needs_a_reason(plans, session):
    (agents,) = [r for r in plans["fix-gke"].registrations if r.type == NAMESPACE and r.name.endswith("node-agents")]
    reason = agents.inputs["metadata"]["annotations"]["gpu-fleet.io/pod-security-exception"]
    assert reason.strip() and not only(check(session, agents), "namespace-pod-security")
    tools = copy.deepcopy(agents)
    tools.inputs["metadata"]["name"] = "tools"
    tools.inputs["metadata"]["annotations"] = {"gpu-fleet.io/pod-security-exception": "  "}
    assert_violation(check(session, tools), "namespace-pod-security", "'tools'", "gpu-fleet.io/pod-security-exception")
    tools.inputs["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] = "baseline"
    assert not only(check(session, tools), "namespace-pod-security")


def tools_stack(policy_spec: dict[str, Any] | None, namespace: str = "tools") -> list[Registration]:
    """A namespace `tools` and (unless None) one NetworkPolicy with ``policy_spec`` in ``namespace``."""
    regs = [
        raw(
            NAMESPACE,
            "tools",
            {"metadata": {"name": "tools", "labels": {"pod-security.kubernetes.io/enforce": "restricted"}}},
        )
    ]
    if policy_spec is not None:
        regs.append(
            raw(
                NETWORK_POLICY,
                "tools-deny",
                {"metadata": {"name": "deny", "namespace": namespace}, "spec": policy_spec},
            )
        )
    return regs


@pytest.mark.parametrize(
    "spec",
    [
        {"podSelector": {}, "policyTypes": ["Ingress"]},
        {"podSelector": {"matchLabels": {}}, "policyTypes": ["Ingress", "Egress"], "ingress": []},
        {"policyTypes": ["Ingress"]},  # no podSelector: every pod
    ],
)
def test_a_default_deny_ingress_policy(session, spec):
    assert not only(session.analyze_registrations(tools_stack(spec)), "namespace-default-deny-ingress")


@pytest.mark.parametrize(
    ("spec", "namespace"),
    [
        (None, "tools"),  # none at all
        ({"podSelector": {}, "policyTypes": ["Ingress"]}, "default"),  # in another namespace
        ({"podSelector": {"matchLabels": {"app": "web"}}, "policyTypes": ["Ingress"]}, "tools"),  # some pods only
        (
            {"podSelector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]}, "policyTypes": ["Ingress"]},
            "tools",
        ),
        ({"podSelector": {}, "policyTypes": ["Egress"]}, "tools"),  # egress only
        ({"podSelector": {}, "policyTypes": ["Ingress"], "ingress": [{}]}, "tools"),  # allows everything
    ],
)
def test_no_default_deny_ingress(session, spec, namespace):
    findings = session.analyze_registrations(tools_stack(spec, namespace))
    assert_violation(findings, "namespace-default-deny-ingress", "namespace 'tools'", "podSelector {}", "Ingress")


def test_every_namespace_denies_egress_by_default_and_never_opens_a_credentials_address(plans, session):
    rule = "namespace-default-deny-egress"
    stack = plans["fix-gke"].registrations
    assert not only(session.analyze_registrations(list(stack)), rule)
    changed = copy.deepcopy(list(stack))
    changed = [
        r
        for r in changed
        if not (
            r.type == NETWORK_POLICY
            and r.inputs["metadata"]["name"] == "default-deny-egress"
            and r.inputs["metadata"]["namespace"] == "kueue-system"
        )
    ]
    monitoring = next(
        r
        for r in changed
        if r.type == NETWORK_POLICY
        and r.inputs["metadata"]["name"] == "default-deny-egress"
        and r.inputs["metadata"]["namespace"] == "monitoring"
    )
    monitoring.inputs["spec"]["egress"].append({"to": [{"ipBlock": {"cidr": "169.254.0.0/16"}}]})
    findings = only(session.analyze_registrations(changed), rule)
    messages = " | ".join(f.message for f in findings)
    assert "namespace 'kueue-system' has no default-deny egress" in messages
    assert "169.254.0.0/16 without excepting 169.254.169.254/32" in messages
