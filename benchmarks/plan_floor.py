"""The plan benchmark's floor: the resources a plan recorded, registered again bare (generic ``CustomResource``,
``ComponentResource`` and ``ProviderResource``) under Pulumi's stock mock engine, as the least the engine needs for
them (benchmarks/README.md)."""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Sequence
from typing import Any

import pulumi
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import rpc, settings
from pulumi.runtime.stack import run_in_stack
from pulumi.runtime.sync_await import _sync_await

import fleet.tools.engine.plan as fleet_plan
from fleet.tools.engine.mock_engine import Registration
from fleet.tools.engine.plan import PROJECT, StackPlan, dispatched, plan_runtime


class EchoMocks(pulumi.runtime.Mocks):
    """The least a mock can do: a resource's outputs are its inputs; no invoke is expected."""

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        return f"{args.name}-id", args.inputs

    def call(self, args: pulumi.runtime.MockCallArgs) -> dict[str, Any]:
        return {}


def _bare(value: Any) -> Any:
    """A recorded input value as a program would pass it: secrets as ``Output.secret``, the rest plain."""
    if rpc.is_rpc_secret(value):
        return pulumi.Output.secret(_bare(rpc.unwrap_rpc_secret(value)))
    if isinstance(value, dict):
        return {k: _bare(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_bare(v) for v in value]
    return value


PROVIDER_PREFIX = "pulumi:providers:"
STACK_REFERENCE = "pulumi:pulumi:StackReference"


def _parents_first(registrations: Sequence[Registration]) -> list[Registration]:
    """``registrations`` (in URN order, as a plan lists them) reordered so that a resource's parent and provider
    come before it, as a program must declare them."""
    by_urn = {r.urn: r for r in registrations}
    ordered: list[Registration] = []
    placed: set[str] = set()

    def place(reg: Registration) -> None:
        if reg.urn in placed:
            return
        placed.add(reg.urn)
        for needed in (reg.parent, reg.provider.rsplit("::", 1)[0] if reg.provider else ""):
            if needed in by_urn:
                place(by_urn[needed])
        ordered.append(reg)

    for reg in registrations:
        place(reg)
    return ordered


def _register_bare(registrations: Sequence[Registration], exports: dict[str, Any]) -> None:
    """Declare every recorded resource again with the generic SDK classes, each after its parent and provider."""
    by_urn: dict[str, pulumi.Resource] = {}
    for reg in _parents_first(registrations):
        provider = by_urn.get(reg.provider.rsplit("::", 1)[0]) if reg.provider else None
        opts = pulumi.ResourceOptions(
            parent=by_urn.get(reg.parent),  # None for the stack's direct children: the root stack
            provider=provider,  # type: ignore[arg-type]
            protect=reg.protect or None,
            ignore_changes=reg.ignore_changes or None,
            # A StackReference is read, not registered (ReadResource with its stack name as the id).
            id=reg.inputs.get("name", reg.name) if reg.type == STACK_REFERENCE else None,
        )
        props = _bare(reg.inputs)
        res: pulumi.Resource
        if reg.type.startswith(PROVIDER_PREFIX):
            res = pulumi.ProviderResource(reg.type[len(PROVIDER_PREFIX) :], reg.name, props, opts)
        elif reg.custom:
            res = pulumi.CustomResource(reg.type, reg.name, props, opts)
        else:
            component = pulumi.ComponentResource(reg.type, reg.name, props, opts)
            component.register_outputs({})
            res = component
        by_urn[reg.urn] = res
    for key, value in exports.items():
        pulumi.export(key, _bare(value))


def replay_bare(stack: str, plan: StackPlan) -> tuple[float, set[str]]:
    """Register ``plan``'s resources bare in a fresh context, set up as ``fleet.plan.plan_stack`` does;
    the wall time and the URNs the engine received."""
    mocks = EchoMocks()
    monitor = pulumi_mocks.MockMonitor(mocks)

    def run() -> None:
        settings.ROOT.set(monitor)  # type: ignore[arg-type]
        pulumi.runtime.set_mocks(mocks, project=PROJECT, stack=stack, preview=False, monitor=monitor)
        settings.ROOT.set(None)
        _sync_await(run_in_stack(dispatched(lambda: _register_bare(plan.registrations, plan.exports))))

    started = time.perf_counter()
    contextvars.copy_context().run(run)
    elapsed = time.perf_counter() - started
    return elapsed, set(monitor.resources)


def run_floor(plans: Sequence[StackPlan], tuned: bool = False) -> tuple[list[float], float]:
    """The floor of every stack; per-stack seconds and the wall time of all of them.

    ``tuned`` replays under the plan's own process settings (``fleet.plan.plan_runtime``: the raised collector
    threshold and the SDK stand-ins); by default the stock interpreter and SDK, as a bare Pulumi program runs.
    Fails if the bare replay did not reach the engine with exactly the plan's URNs (then it would not be the
    same resources).
    """
    seconds = []
    started = time.perf_counter()
    with plan_runtime() if tuned else contextlib.nullcontext():
        for plan in plans:
            elapsed, urns = replay_bare(plan.stack, plan)
            expected = {r.urn for r in plan.registrations}
            if urns != expected:
                missing, extra = sorted(expected - urns)[:3], sorted(urns - expected)[:3]
                raise RuntimeError(f"floor of {plan.stack} registered other URNs: missing {missing}, extra {extra}")
            seconds.append(elapsed)
    return seconds, time.perf_counter() - started


def interleaved(plans: Sequence[StackPlan], synthetic: Any) -> tuple[float, float]:
    """Each stack planned again (under the plan's runtime, its references from ``plans``) and, right after, its floor
    replayed: the sums of both over the fleet. Plan and floor of a stack run seconds apart, so a change in the
    machine's load between the two is small."""
    references = {p.stack: p.outputs_for_reference() for p in plans}
    plan_sum = floor_sum = 0.0
    for plan in plans:
        with plan_runtime():
            again = fleet_plan.plan_stack(
                plan.stack, synthetic.policy_file, synthetic.stacks_dir, references, synthetic.workloads_dir
            )
        plan_sum += again.seconds
        floor_sum += replay_bare(plan.stack, plan)[0]
    return plan_sum, floor_sum
