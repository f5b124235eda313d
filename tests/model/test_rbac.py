"""fleet/model/access/rbac.py: Kubernetes RBAC decided on manifests as the API server's authorizer decides it."""

from __future__ import annotations

import pytest

from fleet.model.access.rbac import Rbac, Request, User, rule_allows, selector_matches

ALICE = User("alice")


def _rbac(*rules, kind="ClusterRoleBinding", namespace="team", subject=None) -> Rbac:
    binding = {  # both kinds of binding may name a ClusterRole
        "metadata": {"name": "b", "namespace": namespace},
        "roleRef": {"kind": "ClusterRole", "name": "r"},
        "subjects": [subject or {"kind": "User", "name": "alice"}],
    }
    return Rbac.of([("ClusterRole", {"metadata": {"name": "r"}, "rules": list(rules)}), (kind, binding)])


@pytest.mark.parametrize(
    ("rule", "request_", "allowed"),
    [
        ({"apiGroups": [""], "resources": ["*"], "verbs": ["get"]}, Request("get", "secrets"), True),
        ({"apiGroups": [""], "resources": ["*"], "verbs": ["get"]}, Request("get", "pods/log"), True),
        ({"apiGroups": [""], "resources": ["*"], "verbs": ["get"]}, Request("get", "nodes/proxy"), True),
        ({"apiGroups": ["*"], "resources": ["secrets"], "verbs": ["*"]}, Request("watch", "secrets"), True),
        ({"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}, Request("get", "pods/log"), False),
        ({"apiGroups": [""], "resources": ["*/log"], "verbs": ["get"]}, Request("get", "pods/log"), True),
        ({"apiGroups": [""], "resources": ["*/log"], "verbs": ["get"]}, Request("get", "pods"), False),
        ({"apiGroups": ["apps"], "resources": ["*"], "verbs": ["get"]}, Request("get", "secrets"), False),
        ({"apiGroups": [""], "resources": ["secrets"], "verbs": ["list"]}, Request("get", "secrets"), False),
        (
            {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"], "resourceNames": ["a"]},
            Request("get", "secrets", name="a"),
            True,
        ),
        (
            {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"], "resourceNames": ["a"]},
            Request("get", "secrets", name="b"),
            False,
        ),
        (
            {"apiGroups": [""], "resources": ["secrets"], "verbs": ["list"], "resourceNames": ["a"]},
            Request("list", "secrets"),
            False,
        ),  # a list names no object
        ({"nonResourceURLs": ["/logs/*"], "verbs": ["get"]}, Request("get", path="/logs/kube.log"), True),
        ({"nonResourceURLs": ["/metrics"], "verbs": ["get"]}, Request("get", path="/logs/"), False),
        ({"nonResourceURLs": ["*"], "verbs": ["get"]}, Request("get", path="/logs/"), True),
        ({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}, Request("get", path="/logs/"), False),
    ],
)
def test_one_rule(rule, request_, allowed):
    assert rule_allows(rule, request_) is allowed


def test_a_cluster_role_binding_reaches_every_namespace_and_the_cluster_scope():
    rbac = _rbac({"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]})
    assert rbac.allows(ALICE, Request("get", "secrets", namespace="kube-system"))
    assert rbac.allows(ALICE, Request("get", "secrets"))
    assert not rbac.allows(User("bob"), Request("get", "secrets"))


def test_a_role_binding_reaches_its_namespace_only():
    rbac = _rbac({"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}, kind="RoleBinding")
    assert rbac.allows(ALICE, Request("get", "secrets", namespace="team"))
    assert not rbac.allows(ALICE, Request("get", "secrets", namespace="other"))
    assert not rbac.allows(ALICE, Request("get", "secrets"))  # cluster scope


def test_groups_and_service_accounts_are_subjects():
    rule = {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}
    request = Request("get", "pods", namespace="ci")
    everyone = _rbac(rule, subject={"kind": "Group", "name": "system:authenticated"})
    assert everyone.allows(ALICE, request)
    sa = _rbac(rule, kind="RoleBinding", namespace="ci", subject={"kind": "ServiceAccount", "name": "runner"})
    assert sa.allows(User.service_account("ci", "runner"), request)
    assert not sa.allows(User.service_account("other", "runner"), request)


def test_an_aggregated_cluster_role_holds_the_rules_of_the_roles_it_selects():
    selected = {
        "metadata": {"name": "extra", "labels": {"aggregate-to-r": "true"}},
        "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}],
    }
    nested = {
        "metadata": {"name": "deeper", "labels": {"aggregate-to-extra": "yes"}},
        "rules": [{"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create"]}],
    }
    aggregator = {
        "metadata": {"name": "r"},
        "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"aggregate-to-r": "true"}}]},
        "rules": [],
    }
    selected["aggregationRule"] = {
        "clusterRoleSelectors": [{"matchExpressions": [{"key": "aggregate-to-extra", "operator": "Exists"}]}]
    }
    binding = {
        "metadata": {"name": "b"},
        "roleRef": {"kind": "ClusterRole", "name": "r"},
        "subjects": [{"kind": "User", "name": "alice"}],
    }
    rbac = Rbac.of(
        [
            ("ClusterRole", aggregator),
            ("ClusterRole", selected),
            ("ClusterRole", nested),
            ("ClusterRoleBinding", binding),
        ]
    )
    assert rbac.allows(ALICE, Request("get", "secrets"))
    assert rbac.allows(ALICE, Request("create", "pods/exec", namespace="x"))
    assert rbac.why_allowed(ALICE, Request("get", "secrets")) == "ClusterRoleBinding/b"
    selected["metadata"]["labels"] = {"aggregate-to-r": "no"}
    assert not Rbac.of(
        [("ClusterRole", aggregator), ("ClusterRole", selected), ("ClusterRoleBinding", binding)]
    ).allows(ALICE, Request("get", "secrets"))


@pytest.mark.parametrize(
    ("selector", "matches"),
    [
        ({}, True),
        ({"matchLabels": {"a": "1"}}, True),
        ({"matchLabels": {"a": "2"}}, False),
        ({"matchExpressions": [{"key": "a", "operator": "In", "values": ["1", "2"]}]}, True),
        ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}, False),
        ({"matchExpressions": [{"key": "b", "operator": "NotIn", "values": ["1"]}]}, True),
        ({"matchExpressions": [{"key": "b", "operator": "Exists"}]}, False),
        ({"matchExpressions": [{"key": "b", "operator": "DoesNotExist"}]}, True),
    ],
)
def test_label_selectors(selector, matches):
    assert selector_matches(selector, {"a": "1"}) is matches


def test_a_binding_to_a_role_it_cannot_see_grants_nothing_here():
    binding = {
        "metadata": {"name": "b"},
        "roleRef": {"kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "User", "name": "alice"}],
    }
    assert not Rbac.of([("ClusterRoleBinding", binding)]).allows(ALICE, Request("get", "pods"))
