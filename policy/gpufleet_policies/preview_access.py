"""The pull-request preview identity holds only what a preview uses: named resources, dry runs only, and none of
the rights ``fleet.model.access.preview_rights.REFUSED`` lists (a Secret's data, logs, proxies, tokens, exec, RBAC and
admission changes), judged over every Role, ClusterRole and binding of the stack as Kubernetes RBAC judges them
(``fleet.model.access.rbac``: wildcards, aggregated ClusterRoles, subresources)."""

from __future__ import annotations

from typing import Any

from pulumi_policy import ReportViolation, StackValidationArgs

from fleet.model.access import preview_rights
from fleet.model.access.rbac import RBAC_GROUP, Rbac, User

from .registry import stack_policy
from .resources import plain

RBAC_TYPE = f"kubernetes:{RBAC_GROUP}/v1:"
VAP_BINDING = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"
VAP = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"


def _previewers(rbac: Rbac) -> list[str]:
    """The user names the fleet's previewer binding names."""
    users = []
    for kind, binding in rbac.bindings:
        if (
            kind in ("ClusterRoleBinding", "RoleBinding")
            and (binding.get("metadata") or {}).get("name") == preview_rights.NAME
        ):
            users += [s.get("name") for s in binding.get("subjects") or [] if s.get("kind") == "User"]
    return list(dict.fromkeys(u for u in users if isinstance(u, str)))


def previewer_problems(objects: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """What the previewer may do beyond a preview, over ``(kind, object)`` pairs of a stack (or a cluster)."""
    rbac = Rbac.of(objects)
    problems = []
    for name in _previewers(rbac):
        user = User(name)
        for kind, binding in rbac.bindings:
            ref = binding.get("roleRef") or {}
            meta = binding.get("metadata") or {}
            known = (
                ref.get("name") in rbac.cluster_roles
                if ref.get("kind") == "ClusterRole"
                else (meta.get("namespace", "default"), ref.get("name")) in rbac.roles
            )
            bound = any(s.get("kind") == "User" and s.get("name") == name for s in binding.get("subjects") or [])
            if bound and not known:
                problems.append(
                    f"{kind} {meta.get('name')!r} binds the preview identity {name!r} to {ref.get('kind')} "
                    f"{ref.get('name')!r}, which this stack does not define, so its rights cannot be checked; bind "
                    f"the preview identity only to the ClusterRoles {preview_rights.NAME!r} and "
                    f"{preview_rights.NAMESPACED_NAME!r}"
                )
        for binding, _, rule in rbac.grants(user):
            for key in ("apiGroups", "resources", "verbs"):
                if "*" in (rule.get(key) or []):
                    problems.append(
                        f"{binding} gives the preview identity {name!r} a rule with {key} '*': name the "
                        f"{key} a preview needs (fleet/model/access/preview_rights.py), as "
                        f"{{apiGroups: [apps], resources: [deployments], verbs: [get, create, update, patch]}}"
                    )
            if rule.get("nonResourceURLs"):
                problems.append(
                    f"{binding} gives the preview identity {name!r} non-resource URLs; a preview needs none"
                )
        for request in preview_rights.REFUSED:
            granted_by = rbac.why_allowed(user, request)
            if granted_by:
                problems.append(
                    f"the preview identity {name!r} may `{request.describe()}` (through {granted_by}); a preview "
                    "must not read Secrets, logs or proxies, mint tokens, exec into pods or change RBAC or admission: "
                    "keep such rights with the deploy identity"
                )
    return problems


@stack_policy(
    "preview-identity-least-privilege",
    "The pull-request preview identity is bound to the resources a preview dry-runs, by name, reads no Secret, log "
    "or proxy, mints no token, execs into no pod, changes no RBAC or admission object, and may only dry-run.",
)
def _validate_preview_identity(args: StackValidationArgs, report: ReportViolation) -> None:
    objects = []
    kinds = set()
    for r in args.resources:
        kinds.add(r.resource_type)
        if r.resource_type.startswith(RBAC_TYPE):
            objects.append((r.resource_type.rsplit(":", 1)[-1], plain(r.props)))
    problems = previewer_problems(objects)
    if _previewers(Rbac.of(objects)) and not {VAP, VAP_BINDING} <= kinds:
        problems.append(
            "the preview identity is bound but the stack has no ValidatingAdmissionPolicy (and binding) refusing "
            "its writes that are not dry runs; build it with components.kubernetes.preview_access"
        )
    for problem in problems:
        report(problem)
