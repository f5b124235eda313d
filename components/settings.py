"""What the components take from a stack's config: a typed, read-only argument the program fills.

The program (``fleet/program/settings.py``) reads and checks the ``gpu-fleet:*`` keys; the components never read
config themselves, so they depend on the model only and the program on them, never the reverse.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pulumi

from fleet.model.errors import Problem


def _unlocated(key: str, message: str, *subpath: object) -> Problem:
    """A config problem with no stack file to point into (components built outside a program run)."""
    return Problem("stack config", 1, key, message)


@dataclass(frozen=True)
class ComponentSettings:
    """The stack settings the cluster and service components use (see ``fleet.program.settings.StackSettings``)."""

    # the stack config namespace: `<config_namespace>:<key>` names a key in messages
    config_namespace: str
    protect: bool = True
    stack_reference_prefix: str = "organization/gpu-fleet"
    federation_source_ranges: list[str] = field(default_factory=list)
    # StorageClass of the central Prometheus volume; None: the cluster's default class
    storage_class: str | None = None
    api_allowed_cidrs: list[str] = field(default_factory=list)
    private_api_endpoint: bool = False
    public_nodes: bool = False
    audit_logs: bool = True
    auto_upgrade: bool = True
    preview_principal: str | None = None
    # cloud-specific keys, checked by their cluster component
    subnet_ids: Any = None
    availability_zones: Any = None
    magnum: Any = None
    kubeconfig: pulumi.Output[str] | None = field(default=None, repr=False)
    grafana_admin_password: pulumi.Output[str] | None = field(default=None, repr=False)
    alert_receiver: pulumi.Output[str] | None = field(default=None, repr=False)
    # the text the offline plan gives every secret (no real value): the components tell it from a real value
    secret_placeholder: str | None = None
    # locates a problem with config key `ns:name` (optionally a path inside its value) in the stack file
    config_problem: Callable[..., Problem] = field(default=_unlocated, repr=False, compare=False)

    def key(self, name: str) -> str:
        """The full config key of ``name``: ``gpu-fleet:name``."""
        return f"{self.config_namespace}:{name}"
