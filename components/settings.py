"""What the components take from a stack's config: a typed, read-only argument the program fills.

Its fields come from the declarations (``fleet.model.core.stack_settings.STACK_SETTINGS``): one field per
``gpu-fleet:*`` setting, named as its ``attribute`` (``stackReferencePrefix`` -> ``stack_reference_prefix``), typed by
its kind and defaulting to what the program uses when the stack does not set it (``unset_value``). A new setting is
declared there and nowhere else. The program (``fleet/program/settings.py``) reads and checks the keys; the components
never read config themselves, so they depend on the model only and the program on them, never the reverse.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import partial
from typing import Any

import pulumi

from fleet.model.core.errors import Problem
from fleet.model.core.stack_settings import STACK_SETTINGS, Kind, StackSetting, unset_value

# The value of each kind of setting as the components receive it (after ``fleet.model.core.stack_settings.parse_value``
# or the program's secret reading); an unset string, string list or secret is None.
KIND_TYPES: dict[Kind, object] = {
    "string": str | None,
    "bool": bool,
    "string-list": list[str] | None,
    "cidr-list": list[str],
    "secret": pulumi.Output[str] | None,
    "secret-map": dict[str, Any],
    "magnum": Any,  # the raw mapping, checked by components/clusters/magnum.py MagnumSettings
}
# Kinds whose values are credentials: kept out of the settings' repr.
SECRET_KINDS: frozenset[Kind] = frozenset({"secret", "secret-map"})


def _unlocated(key: str, message: str, *subpath: object) -> Problem:
    """A config problem with no stack file to point into (components built outside a program run)."""
    return Problem("stack config", 1, key, message)


def _setting_field(setting: StackSetting) -> tuple[str, object, Any]:
    """The dataclass field of one declared setting: (attribute, type, field with its unset value as default)."""
    hidden = setting.kind in SECRET_KINDS
    return (
        setting.attribute,
        KIND_TYPES[setting.kind],
        dataclasses.field(default_factory=partial(unset_value, setting), repr=not hidden),
    )


def _key(self: Any, name: str) -> str:
    """The full config key of the declared setting ``name``: ``gpu-fleet:name`` (KeyError for an undeclared one)."""
    return STACK_SETTINGS[name].key


ComponentSettings = dataclasses.make_dataclass(
    "ComponentSettings",
    [
        *(_setting_field(setting) for setting in STACK_SETTINGS.values()),
        # the text the offline plan gives every secret (no real value): the components tell it from a real value
        ("secret_placeholder", str | None, dataclasses.field(default=None)),
        # locates a problem with config key `ns:name` (optionally a path inside its value) in the stack file
        (
            "config_problem",
            Callable[..., Problem],
            dataclasses.field(default=_unlocated, repr=False, compare=False),
        ),
    ],
    namespace={
        "__module__": __name__,
        "__doc__": "The stack settings the cluster and service components use: one field per declared "
        "``gpu-fleet:*`` setting (``fleet.model.core.stack_settings.STACK_SETTINGS``), the offline plan's secret "
        "placeholder and the stack file locator of config problems.",
        "key": _key,
    },
    frozen=True,
    kw_only=True,
)
