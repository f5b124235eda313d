"""Kubernetes RBAC evaluated on manifests, without a cluster: who may do what, as the API server's RBAC
authorizer decides it.

The rules follow kubernetes/kubernetes ``plugin/pkg/auth/authorizer/rbac/rbac.go`` (``RuleAllows``) and
``pkg/apis/rbac/v1/evaluation_helpers.go``: a verb, an API group or a resource ``*`` matches every one; a rule's
``*`` resource matches every subresource too, ``*/log`` matches the ``log`` subresource of every resource, and
``pods`` matches ``pods`` only (never ``pods/log``); ``resourceNames`` restricts a rule to requests naming one of
them (a ``list``, a ``watch`` of a collection or a ``create`` names none, so such a rule never allows them); a
non-resource URL rule matches its path, or any path under a prefix ending in ``*``. A ClusterRole with an
``aggregationRule`` holds the rules of every ClusterRole whose labels one of its selectors matches
(``pkg/controller/clusterroleaggregation``), transitively. A RoleBinding grants its role's rules in its own
namespace only; a ClusterRoleBinding everywhere. RBAC only adds: there is no deny.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

RBAC_GROUP = "rbac.authorization.k8s.io"
ROLE_KINDS = ("Role", "ClusterRole")
BINDING_KINDS = ("RoleBinding", "ClusterRoleBinding")
AUTHENTICATED = "system:authenticated"


@dataclass(frozen=True)
class Request:
    """One API request as the authorizer sees it: a resource request (``resource`` may be ``pods/log``) or, with
    ``path`` set, a non-resource request. ``namespace`` empty means cluster scope (or all namespaces)."""

    verb: str
    resource: str = ""
    api_group: str = ""
    namespace: str = ""
    name: str = ""
    path: str = ""

    def describe(self) -> str:
        """The request as `kubectl auth can-i` spells it, e.g. ``get pods/log -n monitoring``."""
        if self.path:
            return f"{self.verb} {self.path}"
        what = f"{self.resource}.{self.api_group}" if self.api_group else self.resource
        if self.name:
            what += f"/{self.name}" if "/" not in self.resource else f" (name {self.name})"
        scope = f" -n {self.namespace}" if self.namespace else " (cluster-wide)"
        return f"{self.verb} {what}{scope}"


@dataclass(frozen=True)
class User:
    """Who asks: a user name and its groups (a service account is ``system:serviceaccount:<ns>:<name>`` with the
    groups ``system:serviceaccounts`` and ``system:serviceaccounts:<ns>``)."""

    name: str
    groups: tuple[str, ...] = (AUTHENTICATED,)

    @classmethod
    def service_account(cls, namespace: str, name: str) -> User:
        """The user a service account's token authenticates as."""
        return cls(
            f"system:serviceaccount:{namespace}:{name}",
            ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", AUTHENTICATED),
        )


def _has(values: Iterable[str], wanted: str) -> bool:
    values = list(values or [])
    return "*" in values or wanted in values


def _resource_matches(rule_resources: Iterable[str], resource: str) -> bool:
    """``ResourceMatches``: ``*``, the combined ``resource/subresource``, or ``*/subresource``."""
    subresource = resource.split("/", 1)[1] if "/" in resource else ""
    for r in rule_resources or []:
        if r == "*" or r == resource or (subresource and r == f"*/{subresource}"):
            return True
    return False


def _url_matches(rule_urls: Iterable[str], path: str) -> bool:
    for url in rule_urls or []:
        if url == "*" or url == path or (url.endswith("*") and path.startswith(url[:-1])):
            return True
    return False


def rule_allows(rule: Mapping[str, Any], request: Request) -> bool:
    """Whether one PolicyRule allows the request (``RuleAllows`` / ``NonResourceURLMatches``)."""
    if not _has(rule.get("verbs") or [], request.verb):
        return False
    if request.path:
        return _url_matches(rule.get("nonResourceURLs") or [], request.path)
    if not _has(rule.get("apiGroups") or [], request.api_group):
        return False
    if not _resource_matches(rule.get("resources") or [], request.resource):
        return False
    names = rule.get("resourceNames") or []
    return not names or (bool(request.name) and request.name in names)


def selector_matches(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """A LabelSelector (``matchLabels`` and ``matchExpressions``: In, NotIn, Exists, DoesNotExist) on labels.
    An empty selector matches everything, as in the aggregation controller."""
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


@dataclass
class Rbac:
    """The RBAC objects of a cluster (or of a plan): roles by namespace and name, and the bindings."""

    roles: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)  # (namespace, name) of Roles
    cluster_roles: dict[str, dict[str, Any]] = field(default_factory=dict)
    bindings: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (kind, object)

    @classmethod
    def of(cls, objects: Iterable[tuple[str, Mapping[str, Any]]]) -> Rbac:
        """Collect ``(kind, object)`` pairs; objects of other kinds are ignored."""
        rbac = cls()
        for kind, obj in objects:
            meta = obj.get("metadata") or {}
            if kind == "ClusterRole":
                rbac.cluster_roles[str(meta.get("name", ""))] = dict(obj)
            elif kind == "Role":
                rbac.roles[(str(meta.get("namespace", "default")), str(meta.get("name", "")))] = dict(obj)
            elif kind in BINDING_KINDS:
                rbac.bindings.append((kind, dict(obj)))
        return rbac

    def cluster_role_rules(self, name: str, _seen: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
        """The rules of a ClusterRole, with those an ``aggregationRule`` gathers (transitively)."""
        role = self.cluster_roles.get(name)
        if role is None or name in _seen:
            return []
        rules = list(role.get("rules") or [])
        aggregation = role.get("aggregationRule") or {}
        for selector in aggregation.get("clusterRoleSelectors") or []:
            for other, candidate in self.cluster_roles.items():
                labels = (candidate.get("metadata") or {}).get("labels") or {}
                if other != name and selector_matches(selector, labels):
                    rules += self.cluster_role_rules(other, _seen | {name})
        return rules

    def _role_rules(self, ref: Mapping[str, Any], namespace: str) -> list[dict[str, Any]]:
        if ref.get("kind") == "ClusterRole":
            return self.cluster_role_rules(str(ref.get("name", "")))
        role = self.roles.get((namespace, str(ref.get("name", ""))))
        return list((role or {}).get("rules") or [])

    @staticmethod
    def _subject_is(subject: Mapping[str, Any], user: User, binding_namespace: str) -> bool:
        kind, name = subject.get("kind"), subject.get("name")
        if kind == "User":
            return name == user.name
        if kind == "Group":
            return name in user.groups
        if kind == "ServiceAccount":
            namespace = subject.get("namespace") or binding_namespace
            return user.name == f"system:serviceaccount:{namespace}:{name}"
        return False

    def grants(self, user: User) -> list[tuple[str, str, dict[str, Any]]]:
        """Every rule the user holds: ``(binding kind/name, namespace it applies in or "" for everywhere, rule)``."""
        found = []
        for kind, binding in self.bindings:
            meta = binding.get("metadata") or {}
            namespace = str(meta.get("namespace", "default")) if kind == "RoleBinding" else ""
            if not any(self._subject_is(s, user, namespace) for s in binding.get("subjects") or []):
                continue
            for rule in self._role_rules(binding.get("roleRef") or {}, namespace):
                found.append((f"{kind}/{meta.get('name', '')}", namespace, rule))
        return found

    def why_allowed(self, user: User, request: Request) -> str | None:
        """The binding that allows the request (``None``: RBAC refuses it)."""
        for binding, namespace, rule in self.grants(user):
            if namespace and (request.path or request.namespace != namespace):
                continue  # a RoleBinding reaches neither cluster scope nor non-resource URLs
            if rule_allows(rule, request):
                return binding
        return None

    def allows(self, user: User, request: Request) -> bool:
        """Whether RBAC allows the request, as the API server would decide it."""
        return self.why_allowed(user, request) is not None
