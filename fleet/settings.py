"""Stack configuration keys of the ``gpu-fleet`` namespace, read in one place with their defaults."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pulumi
from pulumi.runtime.config import is_config_secret

NAMESPACE = "gpu-fleet"


@dataclass(frozen=True)
class StackSettings:
    """What a stack's config file says beyond the policy file (site-specific, per stack)."""

    policy_file: str | None
    workloads_dir: str | None
    protect: bool
    stack_reference_prefix: str
    federation_source_ranges: list[str]
    # workload -> {environment variable: credential}; read from secret config only, never printed
    workload_secrets: dict[str, dict[str, str]] = field(default_factory=dict, repr=False)

    @staticmethod
    def read() -> StackSettings:
        """Read the ``gpu-fleet:*`` keys of the current stack."""
        cfg = pulumi.Config(NAMESPACE)
        return StackSettings(
            policy_file=cfg.get("policyFile"),
            workloads_dir=cfg.get("workloadsDir"),
            protect=cfg.get_bool("protect") is not False,
            stack_reference_prefix=cfg.get("stackReferencePrefix") or "organization/gpu-fleet",
            federation_source_ranges=cfg.get_object("federationSourceRanges") or [],
            workload_secrets=_workload_secrets(cfg.get_object(WORKLOAD_SECRETS)),
        )


WORKLOAD_SECRETS = "workloadSecrets"


def _workload_secrets(value: Any) -> dict[str, dict[str, str]]:
    """``gpu-fleet:workloadSecrets``, checked: a secret mapping of workload -> {variable: value}."""
    key = f"{NAMESPACE}:{WORKLOAD_SECRETS}"
    if value is None:
        return {}
    if not is_config_secret(key):
        raise ValueError(
            f"{key} holds credentials in plain text in the stack file: remove it and set each value with "
            f"pulumi config set --secret --path '{key}.<workload>.<VARIABLE>' <value>"
        )
    if not isinstance(value, dict) or not all(
        isinstance(vars_, dict) and all(isinstance(v, str) for v in vars_.values()) for vars_ in value.values()
    ):
        raise ValueError(f"{key} must map each workload to {{VARIABLE: value}} (strings)")
    return {str(w): {str(k): v for k, v in vars_.items()} for w, vars_ in value.items()}
