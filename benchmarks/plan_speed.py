"""How fast the offline plan is, and how far above the mock engine's own cost.

Generates a synthetic fleet (N clusters x cards x workloads; GKE only, or ``--clouds`` cycling the clusters over
GKE, EKS, AKS, Magnum and existing clusters) in a temp dir, plans every stack with the
project's real code path (``fleet.plan.plan_fleet``, as ``python -m fleet plan`` does) and compares that with
the *floor*: the very same resources (types, names, parents, providers, inputs) registered bare, as plain
``pulumi.CustomResource`` / ``pulumi.ComponentResource`` under Pulumi's stock mock engine, in the same process.

    .venv/bin/python -m benchmarks.plan_speed [--clusters 100] [--clouds gcp] [--cards 8] [--workloads 4]
                                              [--sizes 10,25,50,100] [--repeat 3] [--json FILE]

See benchmarks/README.md for what the figures mean.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pulumi

import fleet.model.loader as fleet_policy
from benchmarks.growth import linearity
from benchmarks.plan_floor import interleaved, run_floor
from benchmarks.plan_memory import measure_memory
from benchmarks.plan_render import render
from benchmarks.synthetic_fleet import (
    CLOUD_NAMES,
    SyntheticFleet,
    _real_workloads,
    cloud_cards,
    cloud_sdk,
    generate_fleet,
)
from fleet.model.core.fleet import Fleet
from fleet.model.core.workloads import WORKLOADS_DIR
from fleet.program.stack_config import STACKS_DIR
from fleet.tools.engine.plan import StackPlan, plan_fleet

ROOT = Path(__file__).resolve().parent.parent
TARGET_RATIO = 1.5


def _fresh_process_caches() -> None:
    """Forget what an earlier run cached, so each run costs what one ``python -m fleet plan`` costs
    (imports stay warm: they are measured once, separately)."""
    fleet_policy.clear_fleet_cache()


def load_policy(synthetic: SyntheticFleet) -> tuple[Fleet, float]:
    """The policy loaded as the CLI loads it before planning (read afresh and kept for the programs), and how long it
    took."""
    started = time.perf_counter()
    fleet = fleet_policy.load_fleet_cached(synthetic.policy_file, synthetic.workloads_dir, reload=True)
    return fleet, time.perf_counter() - started


def run_plan(synthetic: SyntheticFleet, fleet: Fleet) -> tuple[list[StackPlan], float]:
    """Plan every stack with ``plan_fleet``; the plans and the wall time of the whole call."""
    _fresh_process_caches()
    # the CLI's own load, untimed here (``load s``): the programs then find the policy loaded, as under the CLI
    fleet_policy.load_fleet_cached(synthetic.policy_file, synthetic.workloads_dir, reload=True)
    started = time.perf_counter()
    plans = plan_fleet(fleet, synthetic.policy_file, None, synthetic.stacks_dir, synthetic.workloads_dir)
    return plans, time.perf_counter() - started


@dataclass
class StackRow:
    """One stack of one size: resources, best plan and floor time over the repeats, memory."""

    stack: str
    resources: int
    plan_seconds: float  # StackPlan.seconds (min over repeats)
    floor_seconds: float  # bare replay (min over repeats)
    ratio: float
    py_peak_bytes: int | None = None
    py_retained_bytes: int | None = None
    maxrss_kib: int | None = None


@dataclass
class SizeResult:
    """Everything measured at one fleet size."""

    clusters: int
    cards: int
    workloads: int
    stacks: int
    resources: int
    policy_load_seconds: float  # load_fleet as the CLI does before planning (not part of plan_seconds)
    plan_seconds: float  # wall time of plan_fleet (min over repeats)
    plan_stack_sum_seconds: float  # sum of StackPlan.seconds of that run
    plan_outside_stacks_seconds: float  # plan_seconds minus the stacks: stack config, references between stacks
    floor_seconds: float  # wall time of the bare replay of every stack (min over repeats)
    ratio: float  # plan_seconds / floor_seconds
    paired_ratio: float  # the median over repeats of each plan over the floor run right after it (load drifts)
    interleaved_ratio: float  # the median over repeats of the stacks' plans over their floors, stack by stack in turn
    floor_tuned_seconds: float  # the bare replay under the plan's process settings, plan_runtime (min over repeats)
    ratio_tuned: float  # plan_seconds / floor_tuned_seconds: the overhead without the settings' share
    stack_ratio: float  # plan_stack_sum_seconds / floor_seconds
    plan_ms_per_stack: float
    plan_us_per_resource: float
    floor_ms_per_stack: float
    floor_us_per_resource: float
    central_stack: str  # the central stack grows with the fleet (one StackReference and Secret per leaf)
    central_resources: int
    central_plan_seconds: float
    central_floor_seconds: float
    leaf_plan_ms_median: float | None  # StackPlan.seconds of the other stacks (all alike here)
    leaf_floor_ms_median: float | None
    repeats: int
    plan_runs_seconds: list[float]
    floor_runs_seconds: list[float]
    memory: dict[str, Any] = field(default_factory=dict)
    per_stack: list[StackRow] = field(default_factory=list)


def measure_size(
    root: Path,
    clusters: int,
    cards: int,
    workloads: int,
    repeat: int = 3,
    memory: bool = True,
    clouds: Sequence[str] = ("gcp",),
) -> SizeResult:
    """Generate a fleet of ``clusters`` clusters (cycling over ``clouds``) under ``root`` and measure plan, floor
    (and memory) with ``measure_fleet``; the generated files are removed afterwards."""
    synthetic = generate_fleet(root, clusters, cards, workloads, clouds)
    try:
        return measure_fleet(synthetic, cards, workloads, repeat, memory)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def shipped_fleet() -> SyntheticFleet:
    """The shipped fleet (policy/fleet.yaml, stacks/, workloads/) in the shape ``measure_fleet`` takes."""
    fleet = fleet_policy.load_fleet(fleet_policy.POLICY_FILE)
    return SyntheticFleet(
        ROOT,
        fleet_policy.POLICY_FILE,
        STACKS_DIR,
        WORKLOADS_DIR,
        tuple(fleet.clusters),
        tuple(dict.fromkeys(p.card for c in fleet.clusters.values() for p in c.pools)),
        tuple(fleet.workloads),
        "workloads/",
        tuple(dict.fromkeys(c.cloud for c in fleet.clusters.values())),
    )


def measure_fleet(synthetic: SyntheticFleet, cards: int, workloads: int, repeat: int, memory: bool) -> SizeResult:
    """Plan ``synthetic`` and replay its floor ``repeat`` times, plan and floor in turn (and memory once more)."""
    clusters = len(synthetic.clusters)
    fleet, load_seconds = load_policy(synthetic)
    best_plan: tuple[float, list[StackPlan]] | None = None
    plan_runs, floor_runs, floor_tuned_runs, interleaved_runs = [], [], [], []
    stack_plan_min: dict[str, float] = {}
    stack_floor_min: dict[str, float] = {}
    for _ in range(max(1, repeat)):
        gc.collect()
        plans, plan_wall = run_plan(synthetic, fleet)
        plan_runs.append(plan_wall)
        gc.collect()
        floor_seconds, floor_wall = run_floor(plans)
        floor_runs.append(floor_wall)
        gc.collect()
        floor_tuned_runs.append(run_floor(plans, tuned=True)[1])
        gc.collect()
        plan_sum, floor_sum = interleaved(plans, synthetic)
        interleaved_runs.append(plan_sum / floor_sum)
        for plan, floor in zip(plans, floor_seconds, strict=True):
            stack_plan_min[plan.stack] = min(stack_plan_min.get(plan.stack, math.inf), plan.seconds)
            stack_floor_min[plan.stack] = min(stack_floor_min.get(plan.stack, math.inf), floor)
        if best_plan is None or plan_wall < best_plan[0]:
            best_plan = (plan_wall, plans)
        del plans
    assert best_plan is not None
    plan_wall, plans = best_plan
    floor_wall = min(floor_runs)
    rows = [
        StackRow(
            p.stack,
            len(p.registrations),
            stack_plan_min[p.stack],
            stack_floor_min[p.stack],
            stack_plan_min[p.stack] / stack_floor_min[p.stack],
        )
        for p in plans
    ]
    resources = sum(r.resources for r in rows)
    central = next(r for r in rows if r.stack == fleet.central.name)
    leaves = [r for r in rows if r is not central]
    stack_sum = sum(p.seconds for p in plans)
    del plans, best_plan
    mem: dict[str, Any] = {}
    if memory:
        gc.collect()
        mem = measure_memory(synthetic, fleet)
        by_stack = {m.stack: m for m in mem.pop("per_stack")}
        for row in rows:
            m = by_stack[row.stack]
            row.py_peak_bytes, row.py_retained_bytes, row.maxrss_kib = m.peak_above_start, m.retained, m.maxrss_kib
    return SizeResult(
        clusters=clusters,
        cards=cards,
        workloads=workloads,
        stacks=len(rows),
        resources=resources,
        policy_load_seconds=load_seconds,
        plan_seconds=plan_wall,
        plan_stack_sum_seconds=stack_sum,
        plan_outside_stacks_seconds=plan_wall - stack_sum,
        floor_seconds=floor_wall,
        ratio=plan_wall / floor_wall,
        paired_ratio=statistics.median(p / f for p, f in zip(plan_runs, floor_runs, strict=True)),
        interleaved_ratio=statistics.median(interleaved_runs),
        floor_tuned_seconds=min(floor_tuned_runs),
        ratio_tuned=plan_wall / min(floor_tuned_runs),
        stack_ratio=stack_sum / floor_wall,
        plan_ms_per_stack=1e3 * plan_wall / len(rows),
        plan_us_per_resource=1e6 * plan_wall / resources,
        floor_ms_per_stack=1e3 * floor_wall / len(rows),
        floor_us_per_resource=1e6 * floor_wall / resources,
        central_stack=central.stack,
        central_resources=central.resources,
        central_plan_seconds=central.plan_seconds,
        central_floor_seconds=central.floor_seconds,
        leaf_plan_ms_median=1e3 * statistics.median(r.plan_seconds for r in leaves) if leaves else None,
        leaf_floor_ms_median=1e3 * statistics.median(r.floor_seconds for r in leaves) if leaves else None,
        repeats=max(1, repeat),
        plan_runs_seconds=plan_runs,
        floor_runs_seconds=floor_runs,
        memory=mem,
        per_stack=rows,
    )


def warm_up(workdir: Path, cards: int, workloads: int, clouds: Sequence[str] = ("gcp",)) -> float:
    """Plan a fleet of one cluster per cloud (at least 2) once, untimed, so imports (pulumi_gcp, pulumi_aws,
    pulumi_kubernetes...) and first-call costs are not charged to the first measured size; returns how long that
    took."""
    synthetic = generate_fleet(workdir / "warm-up", max(2, len(clouds)), cards, workloads, clouds)
    fleet, _ = load_policy(synthetic)
    started = time.perf_counter()
    plans, _ = run_plan(synthetic, fleet)
    run_floor(plans)
    elapsed = time.perf_counter() - started
    shutil.rmtree(synthetic.root, ignore_errors=True)
    return elapsed


def run_benchmark(
    clusters: int = 100,
    cards: int = 8,
    workloads: int = 4,
    sizes: Sequence[int] = (10, 25, 50, 100),
    repeat: int = 3,
    memory: bool = True,
    log: Callable[[str], None] = lambda _msg: None,
    clouds: Sequence[str] = ("gcp",),
    shipped: bool = False,
) -> dict[str, Any]:
    """Measure every size (``clusters`` included, cycling over ``clouds``), and with ``shipped`` the shipped fleet too;
    return all figures as plain data (the ``--json`` form)."""
    all_sizes = sorted({*sizes, clusters})
    with tempfile.TemporaryDirectory(prefix="gpu-fleet-bench-") as tmp:
        workdir = Path(tmp)
        warm = warm_up(workdir, cards, workloads, clouds)
        log(f"warm-up (imports, first calls): {warm:.2f} s")
        results = []
        for n in all_sizes:
            log(
                f"measuring {n} clusters ({','.join(clouds)}) x {cards} cards x {workloads} workloads"
                f" ({repeat} repeat(s))..."
            )
            results.append(measure_size(workdir / f"fleet-{n}", n, cards, workloads, repeat, memory, clouds))
    shipped_result = None
    if shipped:
        log(f"measuring the shipped fleet ({repeat} repeat(s))...")
        ours = shipped_fleet()
        shipped_result = measure_fleet(ours, len(ours.cards), len(ours.workloads), repeat, memory)
    full = next(r for r in results if r.clusters == clusters)
    real = [w.name for w in _real_workloads()]
    source = "none" if not workloads else f"copies of workloads/{{{','.join(real)}}}" if real else "minimal"
    total_plan = sum(r.plan_seconds for r in results)
    total_floor = sum(r.floor_seconds for r in results)
    return {
        "parameters": {
            "clusters": clusters,
            "cards": cards,
            "clouds": list(clouds),
            "card_names": list(dict.fromkeys(c for cloud in clouds for c in cloud_cards(cloud)[:cards])),
            "card_names_by_cloud": {cloud: cloud_cards(cloud)[:cards] for cloud in clouds},
            "workloads": workloads,
            "workload_source": source,
            "sizes": all_sizes,
            "repeat": repeat,
            "timing": "min over repeats; memory from one extra run under tracemalloc",
        },
        "environment": {
            "python": platform.python_version(),
            "pulumi": pulumi.__version__ if hasattr(pulumi, "__version__") else _dist_version("pulumi"),
            **{sdk: _dist_version(sdk) for cloud in clouds if (sdk := cloud_sdk(cloud))},
            "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(),
        },
        "warm_up_seconds": warm,
        "sizes": [asdict(r) for r in results],
        "shipped": asdict(shipped_result) if shipped_result else None,
        "linearity": {
            "plan": linearity(results, "plan_seconds"),
            "plan_stacks_only": linearity(results, "plan_stack_sum_seconds"),
            "floor": linearity(results, "floor_seconds"),
        },
        "ratio": {
            "full_size": full.ratio,
            "all_sizes": total_plan / total_floor,
            "by_size": {str(r.clusters): r.ratio for r in results},
            "full_size_tuned": full.ratio_tuned,
            "all_sizes_tuned": total_plan / sum(r.floor_tuned_seconds for r in results),
            "by_size_tuned": {str(r.clusters): r.ratio_tuned for r in results},
            "target": TARGET_RATIO,
            "within_target": full.ratio <= TARGET_RATIO,
            "within_target_tuned": full.ratio_tuned <= TARGET_RATIO,
        },
    }


def _dist_version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "?"


def _sizes(text: str) -> list[int]:
    try:
        sizes = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of cluster counts") from None
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError("cluster counts must be positive")
    return sizes


def _clouds(text: str) -> list[str]:
    clouds = [c.strip() for c in text.split(",") if c.strip()]
    unknown = [c for c in clouds if c not in CLOUD_NAMES]
    if not clouds or unknown:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected a comma-separated list of {', '.join(CLOUD_NAMES)}, e.g. gcp,aws,azure"
        )
    return clouds


def build_parser() -> argparse.ArgumentParser:
    """Command line of the benchmark."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.plan_speed", description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=100, help="full fleet size: clusters (default 100)")
    parser.add_argument(
        "--clouds",
        type=_clouds,
        default=["gcp"],
        help=f"clouds the clusters cycle over, the first one's first cluster central: any of "
        f"{','.join(CLOUD_NAMES)} (default gcp: a GKE-only fleet)",
    )
    parser.add_argument(
        "--cards", type=int, default=8, help="cards per cluster, capped at what its cloud offers (default 8)"
    )
    parser.add_argument("--workloads", type=int, default=4, help="synthetic workloads placed on all cards (default 4)")
    parser.add_argument(
        "--sizes",
        type=_sizes,
        default=[10, 25, 50, 100],
        help="cluster counts for the growth fit (default 10,25,50,100)",
    )
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per size; the best is kept (default 3)")
    parser.add_argument("--no-memory", action="store_true", help="skip the extra tracemalloc run per size")
    parser.add_argument("--shipped", action="store_true", help="measure the shipped fleet (policy/fleet.yaml) too")
    parser.add_argument("--stack-rows", type=int, default=None, help="show only this many per-stack rows")
    parser.add_argument("--json", type=Path, help="write every figure as JSON to this file")
    parser.add_argument(
        "--render", type=Path, metavar="JSON", help="print the tables of an earlier run's --json file; measure nothing"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print the tables (and write ``--json``)."""
    args = build_parser().parse_args(argv)
    if args.render:
        print(render(json.loads(args.render.read_text(encoding="utf-8")), args.stack_rows))
        return 0
    if args.clusters < 1 or args.repeat < 1 or args.workloads < 0:
        build_parser().error("--clusters and --repeat must be positive, --workloads not negative")
    most = max(len(cloud_cards(cloud)) for cloud in args.clouds)
    if not 1 <= args.cards <= most:
        build_parser().error(f"--cards must be 1..{most} (the most cards {','.join(args.clouds)} offer)")
    report = run_benchmark(
        args.clusters,
        args.cards,
        args.workloads,
        args.sizes,
        args.repeat,
        not args.no_memory,
        log=lambda msg: print(msg, file=sys.stderr, flush=True),
        clouds=args.clouds,
        shipped=args.shipped,
    )
    print(render(report, args.stack_rows))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
