"""How a policy joins the pack: a decorator on its check gives it a name, a description and a level."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pulumi_policy import EnforcementLevel, ResourceValidationPolicy, StackValidationPolicy

MANDATORY = EnforcementLevel.MANDATORY
ADVISORY = EnforcementLevel.ADVISORY
# Every policy of the pack, in the order its modules are imported (gpufleet_policies/__init__.py).
POLICIES: list[ResourceValidationPolicy | StackValidationPolicy] = []


def _registering(kind: type, name: str, description: str, level: EnforcementLevel) -> Callable[..., Any]:
    """A decorator that registers its check in POLICIES as a ``kind`` policy."""

    def register(validate: Callable[..., None]) -> Callable[..., None]:
        POLICIES.append(kind(name=name, description=description, validate=validate, enforcement_level=level))
        return validate

    return register


def resource_policy(name: str, description: str, level: EnforcementLevel = MANDATORY) -> Callable[..., Any]:
    """Register the decorated check as the resource policy ``name``."""
    return _registering(ResourceValidationPolicy, name, description, level)


def stack_policy(name: str, description: str, level: EnforcementLevel = MANDATORY) -> Callable[..., Any]:
    """Register the decorated check as the stack policy ``name`` (it sees every resource of the stack)."""
    return _registering(StackValidationPolicy, name, description, level)
