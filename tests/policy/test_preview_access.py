"""policy/gpufleet_policies/preview_access.py: the preview identity holds only what a preview uses."""

from __future__ import annotations

import copy

import pytest

from fleet.model.access import preview_rights
from tests.policy.support import assert_violation, only, raw

STACK = "fix-aks"  # its stack file names a preview identity
RBAC = "kubernetes:rbac.authorization.k8s.io/v1:"
POLICY = "preview-identity-least-privilege"


@pytest.fixture
def stack(plans):
    return copy.deepcopy(plans[STACK].registrations)


def _role(registrations):
    (role,) = [
        r
        for r in registrations
        if r.type == RBAC + "ClusterRole" and r.inputs["metadata"]["name"] == preview_rights.NAME
    ]
    return role


def test_the_fleet_previewer_passes(session, stack):
    assert only(session.analyze_registrations(stack), POLICY) == []


def test_the_old_wildcard_role_is_refused(session, stack):
    _role(stack).inputs["rules"] = [
        {"apiGroups": ["", "apps"], "resources": ["*"], "verbs": ["get", "list", "watch", "create", "patch"]},
        {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["*"], "verbs": ["bind", "escalate"]},
    ]
    findings = session.analyze_registrations(stack)
    assert_violation(
        findings,
        POLICY,
        "resources '*'",
        "`get secrets (cluster-wide)`",
        "`get pods/log -n monitoring`",
        "`get nodes/proxy (cluster-wide)`",
        "`create serviceaccounts/token -n monitoring`",
        "`escalate clusterroles.rbac.authorization.k8s.io (cluster-wide)`",
    )


def test_an_aggregated_role_cannot_smuggle_a_right_in(session, stack):
    role = _role(stack)
    role.inputs["aggregationRule"] = {"clusterRoleSelectors": [{"matchLabels": {"gpu-fleet.io/preview": "true"}}]}
    smuggler = raw(
        RBAC + "ClusterRole",
        "logs",
        {
            "metadata": {"name": "logs", "labels": {"gpu-fleet.io/preview": "true"}},
            "rules": [{"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]}],
        },
        stack=STACK,
    )
    assert_violation(session.analyze_registrations([*stack, smuggler]), POLICY, "`get pods/log -n monitoring`")


@pytest.mark.parametrize("role_kind", ["ClusterRole", "Role"])
def test_a_binding_to_a_role_the_stack_does_not_define_is_refused(session, stack, role_kind):
    user = next(
        s["name"]
        for r in stack
        if r.type == RBAC + "ClusterRoleBinding"
        for s in r.inputs["subjects"]
        if s["kind"] != "ServiceAccount"
    )
    kind = "ClusterRoleBinding" if role_kind == "ClusterRole" else "RoleBinding"
    binding = raw(
        RBAC + kind,
        "view",
        {
            "metadata": {"name": "preview-view", "namespace": "monitoring"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": "view"},
            "subjects": [{"kind": "User", "name": user}],
        },
        stack=STACK,
    )
    assert_violation(session.analyze_registrations([*stack, binding]), POLICY, "cannot be checked")


def test_a_previewer_without_the_dry_run_policy_is_refused(session, stack):
    kept = [r for r in stack if "ValidatingAdmissionPolicy" not in r.type]
    assert_violation(session.analyze_registrations(kept), POLICY, "not dry runs")


def test_secret_rights_by_resource_name_are_refused(session, stack):
    _role(stack).inputs["rules"].append(
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"], "resourceNames": ["sh.helm.release.v1.kps.v1"]}
    )
    assert_violation(session.analyze_registrations(stack), POLICY, "sh.helm.release.v1.kps.v1")
    assert preview_rights.NAME in {r.inputs["metadata"]["name"] for r in stack if r.type == RBAC + "ClusterRole"}
