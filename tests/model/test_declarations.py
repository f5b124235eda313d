"""Each policy field and each stack setting is declared once, with its description and default: the declarations
the JSON Schema, Pulumi.yaml and docs/reference.md are generated from are complete."""

from __future__ import annotations

from typing import Any

import pydantic

from fleet.model.core.stack_settings import STACK_SETTINGS
from fleet.model.core.validation import PATTERN_WORDS, StrictModel
from fleet.model.policy_file import schema as spec_schema


def undescribed(model: type[pydantic.BaseModel], seen: set[type] | None = None) -> list[str]:
    """``Model.field`` of every field without a description, in ``model`` and every model below it."""
    seen = set() if seen is None else seen
    if model in seen:
        return []
    seen.add(model)
    missing = []
    for name, field in model.model_fields.items():
        if not (field.description or "").strip():
            missing.append(f"{model.__name__}.{name}")
        for inner in _models_in(field.annotation):
            missing += undescribed(inner, seen)
    return missing


def _models_in(annotation: Any) -> list[type[pydantic.BaseModel]]:
    """The pydantic models inside a type (``X | None``, ``dict[str, X]``, ``dict[str, dict[str, X]]``)."""
    if isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel):
        return [annotation]
    return [m for arg in getattr(annotation, "__args__", ()) for m in _models_in(arg)]


def test_every_policy_field_has_a_description():
    assert undescribed(spec_schema.FleetFile) == []
    assert len(_all_fields(spec_schema.FleetFile)) > 50


def _all_fields(model: type[pydantic.BaseModel], seen: set[type] | None = None) -> list[str]:
    seen = set() if seen is None else seen
    if model in seen:
        return []
    seen.add(model)
    out = [f"{model.__name__}.{n}" for n in model.model_fields]
    for field in model.model_fields.values():
        for inner in _models_in(field.annotation):
            out += _all_fields(inner, seen)
    return out


def test_the_description_check_can_fail():
    class Inner(StrictModel):
        described: int = pydantic.Field(default=1, description="said")
        silent: int = 2

    class Outer(StrictModel):
        inner: dict[str, Inner | None] = pydantic.Field(default_factory=dict, description="said")

    assert undescribed(Outer) == ["Inner.silent"]


def test_every_pattern_of_the_policy_file_is_said_in_words():
    """A value that misses a pattern gets a message in words with an example (fleet/model/core/validation.py), never a
    regular expression, and the reference page shows the same words."""

    def patterns(node: Any) -> set[str]:
        if isinstance(node, dict):
            own = {node["pattern"]} if isinstance(node.get("pattern"), str) else set()
            return own.union(*(patterns(v) for v in node.values()))
        if isinstance(node, list):
            return set().union(*(patterns(v) for v in node))
        return set()

    found = patterns(spec_schema.json_schema())
    assert found and found <= set(PATTERN_WORDS), found - set(PATTERN_WORDS)


def test_every_stack_setting_is_described_and_typed():
    for name, setting in STACK_SETTINGS.items():
        assert setting.name == name and setting.description.strip(), name
        assert setting.kind != "cidr-list" or setting.ranges_of, name
        assert setting.kind != "secret-map" or setting.each, name
