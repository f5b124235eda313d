"""``validate``, ``plan`` and ``render``: the policy, workloads and stack files checked, then the offline plan of the
selected stacks shown (with the policy pack's findings) or written as files for real tools."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from fleet.model.core.clouds import cloud_rules
from fleet.model.core.errors import InputError
from fleet.model.core.fleet import Fleet
from fleet.model.loader import load_fleet_cached
from fleet.tools.commands import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, check_output_file

if TYPE_CHECKING:
    from fleet.tools.engine.plan import StackPlan


def _summary(fleet: Fleet) -> str:
    lines = [
        f"{fleet.file}: {len(fleet.clusters)} clusters, {len(fleet.placements)} workloads, "
        f"central: {fleet.central.name}"
    ]
    for c in fleet.clusters.values():
        if cloud_rules(c.cloud).builds_pools:
            sizes = {p.card: f"{p.min_nodes}-{p.max_nodes}{' spot' if p.spot else ''}" for p in c.pools}
        else:  # the site's nodes, which the fleet neither creates nor sizes (the plan says the same)
            sizes = {p.card: "the site's nodes" for p in c.pools}
        cards = ", ".join(f"{card} ({size})" for card, size in sizes.items()) or "no cards"
        lines.append(f"  {c.name:<20} {c.cloud:<9} {c.location:<15} {cards}")
        if c.pools and not cloud_rules(c.cloud).builds_pools:  # what the site provides (docs/clouds.md)
            nodes = "; ".join(
                f"{', '.join(f'{k}={v}' for k, v in p.node_selector.items())} and "
                f"{', '.join(t.as_string() for t in p.taints)}"
                for p in c.pools
            )
            lines.append(f"  {'':<20} the site labels and taints its nodes: {nodes} (docs/clouds.md)")
        lines.append(f"  {'':<20} runs {len(fleet.benchmarks(c))} benchmark(s), {len(fleet.probes(c))} pool probe(s)")
        if c.ci_pools:
            ci = ", ".join(f"{p.name} ({p.min_nodes}-{p.max_nodes})" for p in c.ci_pools)
            lines.append(f"  {'':<20} CI jobs on {ci}")
    for w, cards in fleet.placements.items():
        lines.append(f"  workload {w}: {', '.join(cards)}")
    return "\n".join(lines)


def checked_fleet(args: argparse.Namespace, warnings: list[str] | None = None) -> Fleet:
    """The policy, the workload folders and the stack files, all checked: an ``InputError`` with every problem at
    once, else the fleet; warnings and notes are printed once, whatever the number of stacks (into ``warnings``
    instead when given: the plan shows them with its own findings, at the end)."""
    from fleet.tools.checks.stack_checks import check_stacks
    from fleet.tools.checks.workload_checks import check_workloads

    # read afresh, and kept for the programs the plan runs in this process: the policy is parsed once a command
    fleet = load_fleet_cached(args.policy, args.workloads_dir, reload=True)
    stacks = check_stacks(fleet, args.stacks_dir)
    workload_problems, notes = check_workloads(fleet.deployed_workloads)
    found = [*fleet.warnings, *stacks.warnings]
    if warnings is not None and not (stacks.problems or workload_problems):
        warnings.extend(found)
    else:
        for line in found:
            print(f"warning: {line}", file=sys.stderr)
    for line in notes:
        print(f"note: {line}", file=sys.stderr)
    if stacks.problems or workload_problems:
        raise InputError(stacks.problems + workload_problems)
    return fleet


def cmd_validate(args: argparse.Namespace) -> int:
    """Check the policy, catalogue, workloads (their mtail programs too) and stack files; print a summary."""
    print(_summary(checked_fleet(args)))
    return EXIT_OK


def plan_selected(
    args: argparse.Namespace, what: str, warnings: list[str] | None = None
) -> tuple[Fleet, list[StackPlan]] | int:
    """Check every input and plan ``--stack`` (all by default); an exit status on failure."""
    from fleet.tools.engine.mock_engine import PlanError
    from fleet.tools.engine.plan import plan_fleet

    fleet = checked_fleet(args, warnings)
    try:
        return fleet, plan_fleet(
            fleet, Path(args.policy).resolve(), args.stack or None, args.stacks_dir, args.workloads_dir
        )
    except PlanError as exc:
        print(f"{what} failed: {exc}", file=sys.stderr)
        return EXIT_FAILED


def cmd_plan(args: argparse.Namespace) -> int:
    """Run the program per stack under the mock engine and show what it would create."""
    from fleet.model.billing.prices import load_prices
    from fleet.tools.engine.summary import render_plan, totals_json

    started = time.perf_counter()
    if args.json is not None:
        check_output_file(args.json, "--json")
    if args.chart_cache is not None and (refused := _chart_cache_refused(args.chart_cache)):
        print(refused, file=sys.stderr)
        return EXIT_BAD_INPUT
    input_warnings: list[str] = []  # shown once, with the plan's own findings
    planned = plan_selected(args, "plan", input_warnings)
    if isinstance(planned, int):
        for line in input_warnings:
            print(f"warning: {line}", file=sys.stderr)
        return planned
    fleet, plans = planned
    if args.chart_cache is not None:
        _place_chart_pods(fleet, plans, args.chart_cache)
    if not args.no_policy_pack:
        from fleet.tools.engine.analyzer import analyze_plans
        from fleet.tools.engine.plan import PROJECT

        # The CrossGuard pack, started and spoken to exactly as `pulumi preview --policy-pack policy` does.
        found = analyze_plans(
            plans, project=PROJECT, policy_file=Path(args.policy).resolve(), workloads_dir=args.workloads_dir
        )
        for plan in plans:
            plan.findings += found.get(plan.stack, [])
    prices = load_prices(args.prices)
    print(render_plan(plans, fleet, prices, input_warnings))
    total = sum(len(p.registrations) for p in plans)
    mandatory = sum(1 for p in plans for f in p.findings if f.level == "mandatory")
    print(
        f"\n{len(plans)} stack(s), {total} resources, {mandatory} mandatory violation(s), "
        f"{time.perf_counter() - started:.2f} s"
    )
    _note_unpinned_images(fleet)
    if args.json:
        try:
            Path(args.json).write_text(
                json.dumps(
                    {"stacks": [p.as_dict() for p in plans], "totals": totals_json(plans, fleet, prices)},
                    indent=1,
                    default=str,
                ),
                encoding="utf-8",
            )
        except OSError as exc:
            print(f"plan: cannot write {args.json}: {exc.strerror or exc}", file=sys.stderr)
            return EXIT_FAILED
    return EXIT_FAILED if mandatory else EXIT_OK


def _chart_cache_refused(cache: Path) -> str | None:
    """Why ``plan --chart-cache`` cannot render from ``cache`` (checked before any stack is planned), or None."""
    import importlib.util

    if importlib.util.find_spec("helm_python") is None:
        return "plan: --chart-cache needs helm-python-sdk (pip install -r requirements-dev.txt)"
    if not cache.is_dir():
        return f"plan: --chart-cache {cache}: no such folder (`helm pull` the pinned charts into it)"
    return None


def _place_chart_pods(fleet: Fleet, plans: list[StackPlan], cache: Path) -> None:
    """Render every Helm release of ``plans`` from the chart archives in ``cache`` and add a mandatory finding for
    every pod that does not land on its pool (fleet/tools/checks/chart_placement.py)."""
    from fleet.tools.checks.chart_placement import node_agent_problems, placement_problems, stack_pods
    from fleet.tools.checks.charts import ChartCacheError, render_stack_charts, stack_kubernetes_version
    from fleet.tools.engine.plan import Finding

    for plan in plans:
        cluster = fleet.cluster(plan.stack)
        try:
            rendered = render_stack_charts(plan, cache, stack_kubernetes_version(plan, cluster.kubernetes_version))
        except ChartCacheError as exc:
            plan.findings.append(Finding("mandatory", str(exc), policy="chart-placement"))
            continue
        pods = stack_pods(plan, rendered)
        for problem in node_agent_problems(cluster, pods) + placement_problems(cluster, pods):
            plan.findings.append(Finding("mandatory", problem, policy="chart-placement"))


def _note_unpinned_images(fleet: Fleet) -> None:
    """Say once (not per stack) which of the fleet's own images the repository does not pin by digest yet."""
    from fleet.tools.delivery.image_delivery import image_jobs

    unpinned = [job.name for job in image_jobs(fleet.deployed_workloads, fleet.registry) if not job.digest]
    if unpinned:
        print(
            f"note: {len(unpinned)} image(s) the fleet copies or builds are pinned by tag only "
            f"({', '.join(unpinned)}): "
            "run the images workflow (python -m fleet images --push ... --record) and commit the digests it records",
            file=sys.stderr,
        )


def cmd_render(args: argparse.Namespace) -> int:
    """Plan the selected stacks and write their Kubernetes, Helm, Prometheus and gateway files (engine/render.py)."""
    from fleet.tools.engine.render import out_problem, render_stack

    problem = out_problem(args.out)
    if problem:
        print(f"render: {problem}; nothing was rendered", file=sys.stderr)
        return EXIT_BAD_INPUT
    planned = plan_selected(args, "render")
    if isinstance(planned, int):
        return planned
    for plan in planned[1]:
        try:
            written = render_stack(plan, args.out)
        except OSError as exc:
            where = exc.filename or args.out
            print(
                f"render: cannot write {where}: {exc.strerror or exc}; {plan.stack} keeps its old files",
                file=sys.stderr,
            )
            return EXIT_FAILED
        print(f"{plan.stack}: {len(written)} files in {args.out / plan.stack}")
    return EXIT_OK
