"""How long the real ``pulumi preview`` of each stack of the shipped fleet takes, cold and warm, beside the offline plan
of the same stack.

The real engine as the real tier runs it (tests/real/engine.py, tests/real/fleet_tier.py): the Pulumi CLI and
Kubernetes provider built from ``receivers/``, the program served inline by the Automation API, a local file
backend, and for each stack a hollow control plane standing in for its cloud (``gpu-fleet:standInKubeconfig``: no
cloud resource, every in-cluster resource previewed against a real API server). A preview of the cloud resources
themselves needs the cloud's credentials (the providers configure themselves against the cloud's API), which a
benchmark has not, so the cloud's part is the stand-in's. Each preview runs with the policy pack, as the pull
requests' previews do (.github/workflows/preview.yml). In the fleet's order (a central reads its leaves' outputs, the
queues' manager its workers'), each stack gets:

- **cold**: its first preview (no state: every resource to create), the first run of the CLI and its plugins for
  that stack;
- **up**: ``pulumi up`` (timed, reported beside), then on a queue worker the token the manager needs and ``up`` again,
  as the real tier does;
- **warm**: ``--warm`` more previews of the deployed stack (no change: what a pull request that touches the stack but
  not its resources costs), the best kept, and one more without the policy pack (the pack's share).

Each preview is split by when the engine's events reached this process: the CLI's start until its prelude, the
program (this process runs it: from its first line to its last registration), the resources' steps (first to last
resource event: the provider's checks and diffs and the pack's per-resource analysis), and the end (the pack's stack
analysis, the summary, the CLI's exit). The offline plan of each stack is timed beside it in this process (best of
``--plans``, imports warm) and as a process (``python -m fleet plan --stack NAME``, imports and the pack included).

Must run in the real tier's network namespace, on built receivers:

    python -m tests.real.isolation .venv/bin/python -m benchmarks.preview_speed [--warm 2] [--json FILE]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pulumi import automation as auto

from benchmarks import tier_cli
from fleet.model.loader import POLICY_FILE, load_fleet, load_fleet_cached
from fleet.tools.engine.plan import plan_fleet, plan_runtime
from tests.real import engine as real_engine
from tests.real import toolchain

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class PreviewTiming:
    """One preview: its wall time and where it went, by when the engine's events reached this process."""

    seconds: float
    until_prelude: float  # the CLI's start, its plugins and backend, until its prelude event
    program: float  # the program's own run (this process serves it), first line to last registration
    resource_steps: float  # first to last resource event
    end: float  # last resource event to the CLI's exit: the pack's stack analysis, the summary
    resources: int
    changes: dict[str, int]


@dataclass
class StackFigures:
    """One stack: its offline plan and its real previews."""

    stack: str
    cloud: str
    resources: int
    plan_seconds: float  # StackPlan.seconds, best of --plans, in this process with imports warm
    plan_process_seconds: float  # python -m fleet plan --stack NAME, a process of its own (the pack included)
    cold: PreviewTiming | None = None
    warm: list[PreviewTiming] = field(default_factory=list)
    warm_without_pack: PreviewTiming | None = None  # one more warm preview, without the policy pack
    up_seconds: float = 0.0


class _Timeline:
    """The arrival time of the engine's events and of the program's start and end, during one operation."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.prelude: float | None = None
        self.resource_events: list[float] = []
        self.program: list[float] = []
        self.resources = 0

    def on_event(self, event: auto.EngineEvent) -> None:
        now = time.perf_counter()
        if event.prelude_event is not None and self.prelude is None:
            self.prelude = now
        if event.resource_pre_event is not None or event.res_outputs_event is not None:
            self.resource_events.append(now)
        if event.resource_pre_event is not None:
            self.resources += 1

    def timing(self, ended: float, changes: dict[str, int]) -> PreviewTiming:
        prelude = self.prelude or self.started
        first = self.resource_events[0] if self.resource_events else ended
        last = self.resource_events[-1] if self.resource_events else ended
        program = self.program[1] - self.program[0] if len(self.program) == 2 else 0.0
        return PreviewTiming(
            seconds=ended - self.started,
            until_prelude=prelude - self.started,
            program=program,
            resource_steps=last - first,
            end=ended - last,
            resources=self.resources,
            changes={op: n for op, n in changes.items() if n},
        )


_CURRENT: list[_Timeline] = []


def _timed_program() -> None:
    """The real tier's inline program, its start and end noted on the current timeline."""
    timeline = _CURRENT[-1] if _CURRENT else None
    if timeline is not None:
        timeline.program.append(time.perf_counter())
    try:
        real_engine._program()
    finally:
        if timeline is not None:
            timeline.program.append(time.perf_counter())


def timed_preview(stack: auto.Stack, policy_pack: Path | None) -> PreviewTiming:
    """One preview of ``stack`` with the policy pack (none: without), split by its events."""
    timeline = _Timeline()
    _CURRENT.append(timeline)
    output: list[str] = []
    try:
        result = stack.preview(
            policy_packs=[str(policy_pack)] if policy_pack else [],
            on_output=output.append,
            on_event=timeline.on_event,
            color="never",
        )
    except auto.CommandError as exc:
        raise SystemExit(f"preview of {stack.name} failed: {exc}\n{''.join(output)[-8000:]}") from None
    finally:
        _CURRENT.pop()
    return timeline.timing(time.perf_counter(), result.change_summary)


def _timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def offline_plans(repeat: int) -> dict[str, tuple[int, float]]:
    """Each stack's resources and best ``StackPlan.seconds`` over ``repeat`` plans of the whole fleet (after one
    untimed plan for the imports)."""
    fleet = load_fleet_cached(POLICY_FILE, reload=True)
    best: dict[str, tuple[int, float]] = {}
    with plan_runtime():
        plan_fleet(fleet, POLICY_FILE)
        for _ in range(repeat):
            for plan in plan_fleet(fleet, POLICY_FILE):
                seconds = min(plan.seconds, best.get(plan.stack, (0, plan.seconds))[1])
                best[plan.stack] = (len(plan.registrations), seconds)
    return best


def plan_process_seconds(stack: str) -> float:
    """Wall time of ``python -m fleet plan --stack NAME`` in a process of its own (the central's plans its leaves
    too: it reads their outputs)."""
    command = [sys.executable, "-m", "fleet", "plan", "--stack", stack]
    return _timed(lambda: subprocess.run(command, cwd=ROOT, capture_output=True, check=True))


def run(warm: int, plans: int, log: Callable[[str], None]) -> dict[str, Any]:
    """Every figure, as plain data (the ``--json`` form)."""
    from tests.real.fleet_tier import FleetTier, stack_order  # needs the receivers and the namespace

    fleet = load_fleet()
    log(f"offline plans ({plans} timed)...")
    offline = offline_plans(plans)
    figures = {
        name: StackFigures(name, fleet.cluster(name).cloud, offline[name][0], offline[name][1], 0.0)
        for name in stack_order(fleet)
    }
    for name, row in figures.items():
        row.plan_process_seconds = plan_process_seconds(name)
        log(f"{name}: plan {row.plan_seconds:.2f} s in process, {row.plan_process_seconds:.2f} s as a process")
    with tempfile.TemporaryDirectory(prefix="gpu-fleet-preview-") as tmp:
        tier = FleetTier(fleet, Path(tmp))
        try:
            for name, row in figures.items():
                log(f"{name}: starting its hollow control plane...")
                on = tier.on_hollow(name)
                on.stack.workspace.program = _timed_program
                row.cold = timed_preview(on.stack, on.engine.policy_pack)
                log(f"{name}: cold preview {row.cold.seconds:.1f} s")
                row.up_seconds = _timed(lambda on=on: on.stack.up(policy_packs=[str(on.engine.policy_pack)]))
                if fleet.dispatch and fleet.dispatch.role(name) == "worker":
                    _worker_token(on)
                for _ in range(warm):
                    row.warm.append(timed_preview(on.stack, on.engine.policy_pack))
                row.warm_without_pack = timed_preview(on.stack, None)
                log(f"{name}: up {row.up_seconds:.1f} s, warm previews {[round(w.seconds, 1) for w in row.warm]}")
        finally:
            tier.stop()
    return {
        "environment": {
            "python": platform.python_version(),
            "pulumi_cli": str(toolchain.binary("pulumi")),
            "cpus": os.cpu_count(),
            "loadavg_at_end": [round(x, 2) for x in os.getloadavg()],
        },
        "warm_runs": warm,
        "plan_runs": plans,
        "stacks": [asdict(row) for row in figures.values()],
    }


def _worker_token(on: Any) -> None:
    """A queue worker's token for the manager, as docs/queues.md has the operator make it, then ``up`` again."""
    from fleet.model.pod_contract import KUEUE_NAMESPACE

    from components.kubernetes.multikueue import TOKEN_MAX_DAYS, TOKEN_SETTING
    from fleet.model.queues.settings import WORKER_ACCOUNT

    duration = f"{TOKEN_MAX_DAYS * 24}h"
    token = on.hollow.kubectl("create", "token", WORKER_ACCOUNT, "-n", KUEUE_NAMESPACE, "--duration", duration)
    on.stack.set_config(TOKEN_SETTING, auto.ConfigValue(token.stdout.strip(), secret=True))
    on.stack.up(policy_packs=[str(on.engine.policy_pack)])


def render(report: dict[str, Any]) -> str:
    """The per-stack table (Markdown) and the phases of the warm previews."""
    lines = [
        "| stack | cloud | resources: plan / preview | offline plan s | plan process s | preview cold s "
        "| preview warm s "
        "| warm / plan process | warm without the pack s | up s |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in report["stacks"]:
        warm = min(w["seconds"] for w in s["warm"]) if s["warm"] else float("nan")
        cold = s["cold"]["seconds"] if s["cold"] else float("nan")
        bare = s["warm_without_pack"]["seconds"] if s.get("warm_without_pack") else float("nan")
        previewed = s["cold"]["resources"] if s["cold"] else "-"
        lines.append(
            f"| {s['stack']} | {s['cloud']} | {s['resources']} / {previewed} | {s['plan_seconds']:.2f} | "
            f"{s['plan_process_seconds']:.1f} | {cold:.1f} | {warm:.1f} | {warm / s['plan_process_seconds']:.1f} | "
            f"{bare:.1f} | {s['up_seconds']:.1f} |"
        )
    lines += [
        "",
        "Where a preview's time goes (s; cold / best warm): CLI start to prelude, the program, the resources' steps, "
        "the end",
        "",
        "| stack | until prelude | program | resource steps | end |",
        "|---|---:|---:|---:|---:|",
    ]
    for s in report["stacks"]:
        if not s["cold"] or not s["warm"]:
            continue
        best = min(s["warm"], key=lambda w: w["seconds"])
        cells = [f"{s['cold'][k]:.1f} / {best[k]:.1f}" for k in ("until_prelude", "program", "resource_steps", "end")]
        lines.append(f"| {s['stack']} | " + " | ".join(cells) + " |")
    totals = [min(w["seconds"] for w in s["warm"]) for s in report["stacks"] if s["warm"]]
    if totals:
        lines += ["", f"median warm preview {statistics.median(totals):.1f} s over {len(totals)} stacks"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Measure (inside the real tier's namespace) and print the tables; ``--render`` prints an earlier ``--json``."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.preview_speed", description=__doc__.splitlines()[0])
    parser.add_argument("--warm", type=int, default=2, help="warm previews per stack after up; best kept (default 2)")
    parser.add_argument("--plans", type=int, default=2, help="timed offline plans of the fleet; best kept (default 2)")
    tier_cli.add_output_options(parser)
    args = tier_cli.parse(parser, argv, render)
    if args is None:
        return 0
    report = run(args.warm, args.plans, log=lambda msg: print(msg, file=sys.stderr, flush=True))
    print(render(report))
    tier_cli.write_json(args.json, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
