"""Pod Security: the levels the fleet's namespaces enforce and the security contexts its own pods carry.

The checks are the Kubernetes Pod Security Standards (kubernetes.io/docs/concepts/security/pod-security-standards):
`restricted` asks every container for ``allowPrivilegeEscalation: false``, ``capabilities.drop: [ALL]``,
``runAsNonRoot: true`` (no ``runAsUser: 0``) and a ``RuntimeDefault`` or ``Localhost`` seccomp profile; `baseline`
forbids privileged containers, host namespaces, host ports, hostPath volumes and added capabilities beyond its
default set; `privileged` allows anything. The namespace labels are ``pod-security.kubernetes.io/<mode>``.
The policy pack (policy/gpufleet_policies/) checks every pod-bearing resource against the same rules.
"""

from __future__ import annotations

from typing import Any

from fleet.model.core import pod_contract

LEVELS = ("restricted", "baseline", "privileged")


def namespace_labels(level: str) -> dict[str, str]:
    """The Pod Security labels of a namespace enforcing ``level``: it also warns and audits against `restricted`,
    so anything short of it shows up in ``kubectl`` warnings and the audit log."""
    if level not in LEVELS:
        raise ValueError(f"unknown Pod Security level {level!r}: one of {', '.join(LEVELS)}")
    return {
        f"{pod_contract.POD_SECURITY_LABEL_PREFIX}/enforce": level,
        f"{pod_contract.POD_SECURITY_LABEL_PREFIX}/enforce-version": "latest",
        f"{pod_contract.POD_SECURITY_LABEL_PREFIX}/warn": "restricted",
        f"{pod_contract.POD_SECURITY_LABEL_PREFIX}/audit": "restricted",
    }


def container_security(read_only_root: bool = True) -> dict[str, Any]:
    """A container's securityContext at the `restricted` level: no privilege escalation, no capability, and a
    read-only root file system unless the process must write beside its image (``read_only_root=False``)."""
    return {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "readOnlyRootFilesystem": read_only_root,
    }


def pod_security(run_as_user: int | None) -> dict[str, Any]:
    """A pod's securityContext: the runtime's default seccomp profile, and (``run_as_user`` given) that non-root
    user and group, also owning the pod's volumes. ``None`` keeps the image's own user, for an image documented to
    need root (it then runs in a `baseline` namespace)."""
    context: dict[str, Any] = {"seccompProfile": {"type": "RuntimeDefault"}}
    if run_as_user is not None:
        if run_as_user < 1:
            raise ValueError(f"run_as_user must be a non-root uid, not {run_as_user}")
        context.update(
            {"runAsNonRoot": True, "runAsUser": run_as_user, "runAsGroup": run_as_user, "fsGroup": run_as_user}
        )
    return context
