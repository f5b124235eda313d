"""What the pull-request preview identity may do inside a cluster: server-side dry runs of the kinds the fleet
registers itself, and nothing for real.

A Pulumi preview dry-runs every Kubernetes object on the server, and the Kubernetes API authorizes a dry run exactly
as the write itself (Pulumi's server-side apply guide, "Prerequisites"; pulumi/pulumi-kubernetes#2213), so RBAC
alone cannot give a preview less than the deploy's verbs. The fleet therefore binds the preview identity to the
verbs a preview uses on the resources the fleet registers, named one by one (``fleet.model.access.preview_rights``: no
Secret, no log, no proxy, no token, no exec, no RBAC or admission object: those preview from the program's inputs),
and adds a ValidatingAdmissionPolicy that refuses every create, update or delete of that identity unless it is a
dry run (``request.dryRun``; admissionregistration.k8s.io/v1, Kubernetes 1.30 and later).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import pulumi
import pulumi_kubernetes as k8s

from fleet.model.access import preview_rights

NAME = preview_rights.NAME


def dry_run_only_expression() -> str:
    """The CEL validation: the request is a dry run."""
    return "has(request.dryRun) && request.dryRun == true"


def user_condition(user: str) -> str:
    """The CEL match condition selecting the preview identity's requests by Kubernetes user name."""
    return f"request.userInfo.username == {json.dumps(user)}"


def preview_access(cluster: str, user: str, namespaces: Sequence[str], opts: pulumi.ResourceOptions) -> None:
    """Bind the Kubernetes user ``user`` (the preview identity as this cluster names it) to dry runs only: the
    cluster-scoped kinds cluster-wide, the namespaced ones in the fleet's ``namespaces`` only."""
    labels = {"app.kubernetes.io/part-of": "gpu-fleet"}
    subjects = [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]
    role = k8s.rbac.v1.ClusterRole(
        f"{cluster}-previewer",
        metadata={"name": NAME, "labels": labels},
        rules=preview_rights.rules(cluster_scoped=True),
        opts=opts,
    )
    namespaced = k8s.rbac.v1.ClusterRole(
        f"{cluster}-previewer-namespaced",
        metadata={"name": preview_rights.NAMESPACED_NAME, "labels": labels},
        rules=preview_rights.rules(cluster_scoped=False),
        opts=opts,
    )
    for namespace in namespaces:
        k8s.rbac.v1.RoleBinding(
            f"{cluster}-previewer-{namespace}",
            metadata={"name": NAME, "namespace": namespace, "labels": labels},
            role_ref={
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": preview_rights.NAMESPACED_NAME,
            },
            subjects=subjects,
            opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[namespaced])),
        )
    k8s.rbac.v1.ClusterRoleBinding(
        f"{cluster}-previewer",
        metadata={"name": NAME, "labels": labels},
        # the name itself, not the role's output, so the pack reads it in a preview of a new cluster too
        role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": NAME},
        subjects=subjects,
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[role])),
    )
    policy = k8s.admissionregistration.v1.ValidatingAdmissionPolicy(
        f"{cluster}-previewer-dry-run-only",
        metadata={"name": f"{NAME}-dry-run-only", "labels": labels},
        spec={
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": ["*"],
                        "apiVersions": ["*"],
                        "operations": ["CREATE", "UPDATE", "DELETE", "CONNECT"],
                        # every resource and subresource; alone, as the API server requires ("if '*/*' is present,
                        # must not specify other resources": kubernetes v1.36.3 pkg/apis/admissionregistration/
                        # validation/validation.go; "*/*" matches a resource itself too, apiserver rules.go Matcher)
                        "resources": ["*/*"],
                    }
                ]
            },
            "matchConditions": [{"name": "preview-identity", "expression": user_condition(user)}],
            "validations": [
                {
                    "expression": dry_run_only_expression(),
                    "message": "the pull-request preview identity may only dry-run (gpu-fleet preview access)",
                    "reason": "Forbidden",
                }
            ],
        },
        opts=opts,
    )
    k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding(
        f"{cluster}-previewer-dry-run-only",
        metadata={"name": f"{NAME}-dry-run-only", "labels": labels},
        spec={"policyName": policy.metadata["name"], "validationActions": ["Deny"]},
        opts=opts,
    )
