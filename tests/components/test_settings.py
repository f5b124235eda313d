"""The settings the components take are made from the stack settings' declarations
(fleet/model/core/stack_settings.py)."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from components.settings import KIND_TYPES, SECRET_KINDS, ComponentSettings
from fleet.model.core.stack_settings import STACK_SETTINGS, Kind, StackSetting, unset_value

CONTEXT = {"secret_placeholder", "config_problem"}  # filled by the program, not read from the stack's config


def test_each_declared_setting_is_a_field_and_nothing_else_is():
    fields = [f.name for f in dataclasses.fields(ComponentSettings)]
    assert fields[: len(STACK_SETTINGS)] == [s.attribute for s in STACK_SETTINGS.values()]
    assert set(fields[len(STACK_SETTINGS) :]) == CONTEXT


def test_every_kind_of_setting_has_a_type():
    assert set(KIND_TYPES) == set(typing.get_args(Kind))


@pytest.mark.parametrize("setting", STACK_SETTINGS.values(), ids=lambda s: s.name)
def test_an_unset_setting_is_what_the_program_uses_when_the_stack_does_not_set_it(setting: StackSetting):
    assert getattr(ComponentSettings(), setting.attribute) == unset_value(setting)


def test_defaults_are_the_declared_ones():
    settings = ComponentSettings()
    assert settings.protect is True and settings.stack_reference_prefix == "organization/gpu-fleet"
    assert settings.federation_source_ranges == [] and settings.subnet_ids is None and settings.magnum is None


def test_two_settings_never_share_a_list():
    first, second = ComponentSettings(), ComponentSettings()
    first.api_allowed_cidrs.append("10.0.0.0/8")
    assert second.api_allowed_cidrs == []


def test_credentials_stay_out_of_the_repr():
    secret = [s for s in STACK_SETTINGS.values() if s.kind in SECRET_KINDS]
    assert {s.name for s in secret} >= {"kubeconfig", "workloadSecrets"}
    values = {s.attribute: {"card": "glrt-not-shown"} if s.kind == "secret-map" else "not-shown" for s in secret}
    shown = repr(ComponentSettings(**values))
    assert "not-shown" not in shown and "stack_reference_prefix=" in shown


def test_settings_are_read_only_and_taken_by_keyword():
    settings = ComponentSettings(protect=False)
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.protect = True  # type: ignore[misc]
    with pytest.raises(TypeError):
        ComponentSettings("organization/other")  # type: ignore[misc]


def test_a_key_is_named_in_full_and_only_when_declared():
    assert ComponentSettings().key("subnetIds") == "gpu-fleet:subnetIds"
    with pytest.raises(KeyError):
        ComponentSettings().key("subnetId")


def test_an_unlocated_problem_names_the_key():
    problem = ComponentSettings().config_problem("gpu-fleet:magnum", "must be a mapping")
    assert str(problem) == "stack config:1: gpu-fleet:magnum: must be a mapping"
