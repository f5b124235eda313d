"""Planning one shipped stack under a recording monitor of a test's own, with or without the SDK stand-ins (the
plan's speed-up tests share it)."""

from __future__ import annotations

import contextlib

import pytest

import fleet.tools.engine.plan as fleet_plan
from fleet.model.loader import POLICY_FILE
from fleet.tools.engine.mock_engine import RecordingMonitor
from fleet.tools.engine.plan import StackPlan


def planned(stack: str, monkeypatch: pytest.MonkeyPatch, monitor: type[RecordingMonitor], sdk: bool) -> StackPlan:
    """The plan of ``stack`` under ``monitor`` (a ``RecordingMonitor`` that keeps more), with or without the SDK
    stand-ins."""
    with monkeypatch.context() as patch:
        patch.setattr(fleet_plan, "RecordingMonitor", monitor)
        if not sdk:
            patch.setattr(fleet_plan, "faster_sdk", contextlib.nullcontext)
        with fleet_plan.plan_runtime():
            return fleet_plan.plan_stack(stack, POLICY_FILE)
