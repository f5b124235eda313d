"""Stack configuration keys of the ``gpu-fleet`` namespace, read in one place with their defaults."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

NAMESPACE = "gpu-fleet"


@dataclass(frozen=True)
class StackSettings:
    """What a stack's config file says beyond the policy file (site-specific, per stack)."""

    policy_file: str | None
    workloads_dir: str | None
    protect: bool
    stack_reference_prefix: str
    federation_source_ranges: list[str]

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
        )
