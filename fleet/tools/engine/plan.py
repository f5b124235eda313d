"""The offline plan: run the real ``__main__.py`` once per stack under the strict mock engine."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import gc
import logging
import runpy
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
from pulumi.runtime import rpc, settings
from pulumi.runtime.stack import run_in_stack
from pulumi.runtime.sync_await import _sync_await

from fleet.model.core.errors import InputError
from fleet.model.core.fleet import Fleet
from fleet.program.settings import CONFIG_NAMESPACE, OFFLINE_PLAN_KEY, STACK_FILE_KEY
from fleet.program.stack_config import STACKS_DIR, load_stack_config, stack_file
from fleet.tools.engine.mock_engine import FleetMocks, PlanError, RecordingMonitor, Registration
from fleet.tools.engine.sdk_speedups import faster_sdk

ROOT = Path(__file__).resolve().parents[3]
PROGRAM = ROOT / "__main__.py"
PROJECT = "gpu-fleet"
PLAN_GC_THRESHOLD = 20_000  # allocations between young-generation collections while planning (default 700)


@dataclass
class Finding:
    """Something the plan wants a reviewer to see: a warning from the program or a policy violation."""

    level: str  # "warning", "advisory" or "mandatory"
    message: str
    policy: str = ""
    urn: str = ""

    def as_dict(self) -> dict[str, str]:
        """JSON form used in ``plan --json``."""
        return {"level": self.level, "policy": self.policy, "urn": self.urn, "message": self.message}


@dataclass
class StackPlan:
    """What one stack would create."""

    stack: str
    registrations: list[Registration]  # in URN order
    exports: dict[str, Any]
    findings: list[Finding] = field(default_factory=list)
    seconds: float = 0.0

    def outputs_for_reference(self) -> tuple[dict[str, Any], list[str]]:
        """The stack's exports as a ``StackReference`` sees them: plain values plus the secret names."""
        secret = [k for k, v in self.exports.items() if rpc.is_rpc_secret(v)]
        plain = {k: rpc.unwrap_rpc_secret(v) for k, v in self.exports.items()}
        return plain, secret

    def as_dict(self) -> dict[str, Any]:
        """JSON form used in ``plan --json`` (secrets redacted)."""
        return {
            "stack": self.stack,
            "resources": [
                {
                    "urn": r.urn,
                    "type": r.type,
                    "name": r.name,
                    "parent": r.parent,
                    "provider": r.provider,
                    "protect": r.protect,
                    "ignoreChanges": r.ignore_changes,
                    "retainOnDelete": r.retain_on_delete,
                    "inputs": r.plain_inputs(),
                }
                for r in self.registrations
            ],
            "outputs": {k: ("[secret]" if rpc.is_rpc_secret(v) else v) for k, v in self.exports.items()},
            "findings": [f.as_dict() for f in self.findings],
        }


class _WarningCollector(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def dispatched(program: Callable[[], object]) -> Callable[[], Awaitable[None]]:
    """``program`` followed by one turn of the event loop, for ``run_in_stack``.

    A registration joins the SDK's list of outstanding RPCs only when its task first runs, which is after the
    program returns. ``wait_for_rpcs`` awaits that list one RPC at a time, then waits for every outstanding
    Output with ``asyncio.wait(FIRST_COMPLETED)`` in a loop that re-registers all the pending ones at each wave of
    completions. Without the turn the list is still empty when the SDK first looks, so a whole stack completes
    through that second loop: work proportional to pending Outputs times waves, quadratic in the stack's size.
    With it every registration is awaited in the first loop. The resources registered are the same.
    """

    async def run() -> None:
        program()
        await asyncio.sleep(0)

    return run


def plan_stack(
    stack: str,
    policy_file: Path,
    stacks_dir: Path = STACKS_DIR,
    references: dict[str, tuple[dict[str, Any], list[str]]] | None = None,
    workloads_dir: Path | None = None,
) -> StackPlan:
    """Run the program for ``stack`` under the mocks and return what it registered.

    Raises ``PlanError`` where the real engine would fail (duplicate URNs, default providers, unknown
    invokes) and lets program errors through.
    """
    config, secret_keys = load_stack_config(stack, stacks_dir)
    config = {
        **config,
        "gpu-fleet:policyFile": str(policy_file),
        f"{CONFIG_NAMESPACE}:{STACK_FILE_KEY}": str(stack_file(stack, stacks_dir)),
        f"{CONFIG_NAMESPACE}:{OFFLINE_PLAN_KEY}": "true",
    }
    if workloads_dir is not None:
        config["gpu-fleet:workloadsDir"] = str(workloads_dir)
    mocks = FleetMocks(references)
    monitor = RecordingMonitor(mocks)
    logger = logging.getLogger(f"gpu-fleet.plan.{stack}")
    logger.propagate = False
    collector = _WarningCollector()
    logger.handlers = [collector]

    def run() -> None:
        pulumi.runtime.set_all_config(config, secret_keys)
        # set_mocks creates a root stack when none is active; run_in_stack creates the real one, as the
        # language host does, so keep set_mocks from making its own.
        settings.ROOT.set(monitor)  # type: ignore[arg-type]
        pulumi.runtime.set_mocks(mocks, project=PROJECT, stack=stack, preview=False, monitor=monitor, logger=logger)
        settings.ROOT.set(None)
        _sync_await(run_in_stack(dispatched(lambda: runpy.run_path(str(PROGRAM), run_name="__main__"))))

    started = time.perf_counter()
    contextvars.copy_context().run(run)
    problems = monitor.check()
    if problems:
        raise PlanError(f"stack {stack}: " + "; ".join(problems))
    # The engine receives registrations in whatever order their inputs resolve (RPCs run on a thread pool);
    # URN order makes every listing and `plan --json` the same from run to run.
    registrations = sorted(monitor.registrations.values(), key=lambda r: r.urn)
    plan = StackPlan(stack, registrations, monitor.stack_exports)
    plan.findings = [Finding("warning", m) for m in collector.messages]
    plan.seconds = time.perf_counter() - started
    return plan


@contextlib.contextmanager
def plan_runtime() -> Iterator[None]:
    """The process settings a plan runs under, restored afterwards.

    A plan allocates millions of short-lived objects that all stay reachable until its stack ends, so the default
    collector runs full passes again and again for nothing (a third of a 100-stack plan's time): the
    young-generation threshold is raised to ``PLAN_GC_THRESHOLD``. And the SDK's uncached type introspection and
    stack-trace capture are replaced by equivalent faster ones (``fleet.tools.engine.sdk_speedups``).
    """
    thresholds = gc.get_threshold()
    gc.set_threshold(PLAN_GC_THRESHOLD, *thresholds[1:])
    try:
        with faster_sdk():
            yield
    finally:
        gc.set_threshold(*thresholds)


def plan_fleet(
    fleet: Fleet,
    policy_file: Path,
    stacks: list[str] | None = None,
    stacks_dir: Path = STACKS_DIR,
    workloads_dir: Path | None = None,
) -> list[StackPlan]:
    """Plan the selected stacks (all clusters by default); the central stack runs last so its stack
    references see the other stacks' planned outputs."""
    selected = stacks or list(fleet.clusters)
    unknown = [fleet.no_cluster(name, "--stack") for name in selected if name not in fleet.clusters]
    if unknown:  # every name given that the policy does not have, at once
        raise InputError(unknown)
    central = fleet.central.name
    leaves = [s for s in fleet.clusters if s != central]
    plans: dict[str, StackPlan] = {}
    order = [s for s in leaves if s in selected or central in selected] + ([central] if central in selected else [])
    with plan_runtime():
        for name in order:
            refs = {n: p.outputs_for_reference() for n, p in plans.items()}
            plans[name] = plan_stack(name, policy_file, stacks_dir, refs, workloads_dir)
    return [plans[s] for s in order if s in selected]
