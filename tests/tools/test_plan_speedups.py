"""The plan's speed-ups change how fast, never what: the SDK stand-ins answer exactly as the SDK functions they
replace, the engine receives the same registrations (stack traces included), and every registration is awaited
as an RPC instead of through the SDK's output-wave loop."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest
from pulumi import _types
from pulumi import resource as sdk_resource
from pulumi.runtime import resource as runtime_resource

import fleet.tools.engine.plan as fleet_plan
from fleet.model.loader import POLICY_FILE, load_fleet
from fleet.tools.engine import sdk_speedups
from fleet.tools.engine.mock_engine import RecordingMonitor
from tests.tools.planning import planned


@pytest.fixture(scope="module")
def leaf() -> str:
    """A leaf stack of the shipped fleet: the biggest, so the stand-ins see as many resource types as possible."""
    fleet = load_fleet(POLICY_FILE)
    leaves = [c for c in fleet.clusters.values() if not c.central]
    assert leaves, "the shipped fleet needs a cluster besides the central one"
    return max(leaves, key=lambda c: (len(fleet.benchmarks(c)), len(c.pools))).name


class TracingMonitor(RecordingMonitor):
    """Also keeps what the engine receives beside the inputs: the stack trace and source position."""

    traces: dict[str, Any] = {}

    def RegisterResource(self, request: Any) -> Any:  # noqa: N802
        TracingMonitor.traces[self.make_urn(request.parent, request.type, request.name)] = (
            request.stackTrace.SerializeToString(deterministic=True),
            request.sourcePosition.SerializeToString(deterministic=True),
        )
        return super().RegisterResource(request)


def _plan(stack: str, monkeypatch: pytest.MonkeyPatch, sdk: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    """Plan ``stack`` with or without the SDK stand-ins; its registrations and the traces, by URN."""
    TracingMonitor.traces = {}
    plan = planned(stack, monkeypatch, TracingMonitor, sdk)
    registrations = {r.urn: (r.type, r.parent, r.provider, r.plain_inputs()) for r in plan.registrations}
    return registrations, dict(TracingMonitor.traces)


def test_the_engine_receives_the_same_registrations_and_stack_traces(
    leaf: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # from the same line, so that the test's own frame is the same in both traces
    (stock, stock_traces), (fast, fast_traces) = [_plan(leaf, monkeypatch, sdk) for sdk in (False, True)]
    assert fast == stock
    assert fast_traces.keys() == stock_traces.keys() >= stock.keys()  # and the root Stack
    differing = [urn for urn in stock_traces if fast_traces[urn] != stock_traces[urn]]
    assert not differing, differing[:3]
    # the traces are real: resources declared in the program carry frames and a source position in it
    assert sum(1 for trace, position in stock_traces.values() if trace and b"components/" in position) > 10


def test_memoized_type_functions_answer_as_the_sdk(leaf: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every annotation the plan asks about gets the SDK's own answer, and the same answer twice."""
    seen: dict[str, list[Any]] = {name: [] for name in sdk_speedups.MEMOIZED_TYPE_FUNCTIONS}
    originals = {name: getattr(_types, name) for name in sdk_speedups.MEMOIZED_TYPE_FUNCTIONS}
    for name, original in originals.items():

        def recording(argument: Any, name: str = name, original: Any = original) -> Any:
            seen[name].append(argument)
            return original(argument)

        monkeypatch.setattr(_types, name, recording)
    _plan(leaf, monkeypatch, sdk=True)  # the stand-ins wrap the recorders: each distinct argument reaches one once
    for name, arguments in seen.items():
        assert arguments, f"the plan never asked {name}"
        memoized = sdk_speedups._memo_by_identity(originals[name])
        for argument in arguments:
            assert memoized(argument) == originals[name](argument), (name, argument)
            assert memoized(argument) is memoized(argument)
    assert len(seen["unwrap_type"]) == len({id(a) for a in seen["unwrap_type"]})  # one miss per annotation


class _Base:
    def __init__(self, capture: list[Any]) -> None:
        capture.append((sdk_speedups.stack_trace(), runtime_resource._get_stack_trace()))


class _Middle(_Base):
    def __init__(self, capture: list[Any]) -> None:
        super().__init__(capture)


class _Concrete(_Middle):
    def __init__(self, capture: list[Any]) -> None:
        super().__init__(capture)


def _user_code(capture: list[Any]) -> None:
    _Concrete(capture)


def test_stack_trace_is_the_sdks() -> None:
    capture: list[Any] = []
    _user_code(capture)
    fast, stock = capture[0]
    assert fast == stock and len(stock.frames) > 3
    assert stock.frames[0].pc.uri == Path(__file__).as_uri()  # innermost first: the caller of the resource


def test_stack_trace_without_three_inits_is_empty() -> None:
    capture: list[Any] = []
    _Middle(capture)  # two __init__ frames only (this test function is not one)
    fast, stock = capture[0]
    assert fast == stock


def test_stack_trace_frames_without_a_file_uri() -> None:
    """Frames of code with no file (``exec`` of a string) carry no position, as in the SDK."""
    capture: list[Any] = []
    exec(compile("_user_code(capture)", "<generated>", "exec"), {"_user_code": _user_code, "capture": capture})
    fast, stock = capture[0]
    assert fast == stock
    assert any(not frame.HasField("pc") for frame in stock.frames)


def test_stack_trace_defers_to_the_sdk_under_a_traceback_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "tracebacklimit", 4, raising=False)
    capture: list[Any] = []
    _user_code(capture)
    fast, stock = capture[0]
    assert fast == stock


def _sdk_functions() -> list[Any]:
    return [getattr(_types, n) for n in sdk_speedups.MEMOIZED_TYPE_FUNCTIONS] + [
        runtime_resource._get_stack_trace,
        sdk_resource.collapse_alias_to_urn,
    ]


def test_faster_sdk_restores_the_sdk_even_on_error() -> None:
    before = _sdk_functions()
    with pytest.raises(RuntimeError), sdk_speedups.faster_sdk():
        assert runtime_resource._get_stack_trace is sdk_speedups.stack_trace
        assert sdk_resource.collapse_alias_to_urn is sdk_speedups.alias_urn_when_read
        raise RuntimeError("boom")
    assert _sdk_functions() == before


def _output_waves(stack: str, monkeypatch: pytest.MonkeyPatch, dispatch: bool) -> int:
    """How many times the SDK's ``wait_for_rpcs`` waited for a wave of outstanding Outputs while planning."""
    waves = 0
    stock_wait = asyncio.wait

    async def counting_wait(*args: Any, **kwargs: Any) -> Any:
        nonlocal waves
        waves += 1
        return await stock_wait(*args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(asyncio, "wait", counting_wait)
        if not dispatch:
            patch.setattr(fleet_plan, "dispatched", lambda program: program)
        fleet_plan.plan_stack(stack, POLICY_FILE)
    return waves


def test_registrations_are_awaited_as_rpcs_not_output_waves(leaf: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the event-loop turn after the program, the SDK completes the stack through its output-wave loop
    (each wave re-registers every pending Output: quadratic); with it, not once."""
    assert _output_waves(leaf, monkeypatch, dispatch=False) > 10
    assert _output_waves(leaf, monkeypatch, dispatch=True) == 0
