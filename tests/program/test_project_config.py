"""Pulumi.yaml declares the gpu-fleet stack settings as Pulumi's project schema allows, and every stack file of the
repository (shipped, examples, fixtures) holds values of the declared types, so `pulumi` accepts both."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from fleet.model.core.stack_settings import (
    CONFIG_NAMESPACE,
    PULUMI_TYPES,
    STACK_SETTINGS,
    StackSetting,
    project_config,
    project_file_text,
)
from tests.conftest import ROOT

PROJECT = yaml.safe_load((ROOT / "Pulumi.yaml").read_text(encoding="utf-8"))
# pulumi/pulumi sdk/go/common/workspace/project.json ($defs simpleConfigType, configTypeDeclaration)
SIMPLE_TYPES = {"string", "integer", "boolean", "array"}
DECLARATION_KEYS = {"type", "items", "description", "secret", "default"}
STACK_FILES = sorted(
    [
        *ROOT.glob("stacks/Pulumi.*.yaml"),
        *ROOT.glob("examples/*/stacks/Pulumi.*.yaml"),
        *ROOT.glob("tests/**/Pulumi.*.yaml"),
    ]
)


def valid_value(declared: dict[str, Any], value: Any) -> bool:
    """Pulumi's ValidateConfigValue (sdk/go/common/workspace/project.go): strings, "true"/"false" or bools,
    integers, and arrays whose items validate."""
    kind = declared["type"]
    if isinstance(value, dict) and set(value) == {"secure"}:
        return declared.get("secret", False) or kind == "string"
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool) or value in ("true", "false")
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, list) and all(valid_value(declared["items"], item) for item in value)


def missing_required(project: dict[str, Any], stack_config: dict[str, Any]) -> list[str]:
    """The keys the Pulumi CLI refuses a stack for: declared in the project's own namespace with neither a default
    nor a value, and not set by the stack (pulumi/pulumi pkg/v3 v3.274.0 workspace/config.go
    validateStackConfigAndApplyProjectConfig, "Stack '...' is missing configuration values")."""
    return sorted(
        key
        for key, declared in (project.get("config") or {}).items()
        if key.split(":", 1)[0] == project["name"]
        and "default" not in declared
        and "value" not in declared
        and key not in stack_config
    )


def test_pulumi_yaml_declares_every_setting_with_a_default_it_can_type():
    declared = PROJECT["config"]
    assert declared == project_config()
    typed = {n for n, s in STACK_SETTINGS.items() if s.kind in PULUMI_TYPES and s.default is not None}
    assert set(declared) == {f"{CONFIG_NAMESPACE}:{name}" for name in typed}
    assert {"stackReferencePrefix", "protect"} <= typed
    for key, declaration in declared.items():
        assert key.startswith(f"{PROJECT['name']}:"), key  # only project keys may declare a type
        assert set(declaration) <= DECLARATION_KEYS and declaration["type"] in SIMPLE_TYPES, key
        assert declaration["description"], key
        if declaration["type"] == "array":
            assert declaration["items"]["type"] in SIMPLE_TYPES, key
        if "default" in declaration:
            assert valid_value(declaration, declaration["default"]), key


def test_the_cli_finds_no_required_setting_missing_in_a_stack_with_none_set():
    assert missing_required(PROJECT, {}) == []
    required = {"name": "p", "config": {"p:token": {"type": "string"}, "p:tier": {"type": "string", "default": "x"}}}
    assert missing_required(required, {}) == ["p:token"]  # the rule itself, as the CLI applies it
    assert missing_required(required, {"p:token": "t"}) == []


@pytest.mark.parametrize("stack_file", STACK_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_stack_file_holds_values_of_the_declared_types(stack_file: Path):
    config = (yaml.safe_load(stack_file.read_text(encoding="utf-8")) or {}).get("config") or {}
    for key, value in config.items():
        declared = PROJECT["config"].get(key)
        if declared is not None:
            assert valid_value(declared, value), f"{stack_file}: {key}: {value!r} is not a {declared['type']}"


def test_the_type_check_can_fail():
    assert not valid_value({"type": "array", "items": {"type": "string"}}, "10.0.0.0/8")
    assert not valid_value({"type": "boolean"}, "yes")
    declared = StackSetting("x", "bool", "", default=True).declaration()
    assert declared == {"type": "boolean", "description": "", "default": True}


def test_a_stale_pulumi_yaml_is_rewritten_whole():
    current = (ROOT / "Pulumi.yaml").read_text(encoding="utf-8")
    assert project_file_text(current) == current
    edited = current.replace("default: organization/gpu-fleet", "default: someone/else")
    assert project_file_text(edited) == current
