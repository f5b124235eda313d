"""Command line of gpu-fleet: ``python -m fleet validate | plan | render | schema | images | report | affected |
doctor | cards``.

Exit status: 0 fine, 1 the plan found mandatory violations or the engine would fail, 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fleet.model.catalogue import CLOUDS
from fleet.model.errors import InputError
from fleet.model.input_files import read_input_text
from fleet.model.loader import POLICY_FILE, ROOT, load_fleet
from fleet.model.spec import Fleet
from fleet.model.workloads import WORKLOADS_DIR
from fleet.program.stack_config import STACKS_DIR

if TYPE_CHECKING:
    from collections.abc import Callable

    from fleet.tools.delivery.image_delivery import ImageJob
    from fleet.tools.engine.plan import StackPlan

SCHEMA_FILE = POLICY_FILE.with_name("fleet.schema.json")
PROJECT_FILE = Path(__file__).resolve().parents[2] / "Pulumi.yaml"
PRICES_FILE = Path(__file__).resolve().parents[1] / "model" / "prices.yaml"  # fleet.model.prices.PRICES_FILE
EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what shells report for a writer whose reader closed the pipe


def _summary(fleet: Fleet) -> str:
    lines = [
        f"{fleet.file}: {len(fleet.clusters)} clusters, {len(fleet.placements)} workloads, "
        f"central: {fleet.central.name}"
    ]
    for c in fleet.clusters.values():
        cards = (
            ", ".join(f"{p.card} ({p.min_nodes}-{p.max_nodes}{' spot' if p.spot else ''})" for p in c.pools)
            or "no cards"
        )
        lines.append(f"  {c.name:<20} {c.cloud:<9} {c.location:<15} {cards}")
        lines.append(f"  {'':<20} runs {len(fleet.benchmarks(c))} benchmark(s), {len(fleet.probes(c))} pool probe(s)")
        if c.ci_pools:
            ci = ", ".join(f"{p.name} ({p.min_nodes}-{p.max_nodes})" for p in c.ci_pools)
            lines.append(f"  {'':<20} CI jobs on {ci}")
    for w, cards in fleet.placements.items():
        lines.append(f"  workload {w}: {', '.join(cards)}")
    return "\n".join(lines)


def _checked_fleet(args: argparse.Namespace, warnings: list[str] | None = None) -> Fleet:
    """The policy, the workload folders and the stack files, all checked: an ``InputError`` with every problem at
    once, else the fleet; warnings and notes are printed once, whatever the number of stacks (into ``warnings``
    instead when given: the plan shows them with its own findings, at the end)."""
    from fleet.tools.checks.stack_checks import check_stacks
    from fleet.tools.checks.workload_checks import check_workloads

    fleet = load_fleet(args.policy, args.workloads_dir)
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
    print(_summary(_checked_fleet(args)))
    return EXIT_OK


def _plan_selected(
    args: argparse.Namespace, what: str, warnings: list[str] | None = None
) -> tuple[Fleet, list[StackPlan]] | int:
    """Check every input and plan ``--stack`` (all by default); an exit status on failure."""
    from fleet.tools.engine.mock_engine import PlanError
    from fleet.tools.engine.plan import plan_fleet

    fleet = _checked_fleet(args, warnings)
    try:
        return fleet, plan_fleet(
            fleet, Path(args.policy).resolve(), args.stack or None, args.stacks_dir, args.workloads_dir
        )
    except PlanError as exc:
        print(f"{what} failed: {exc}", file=sys.stderr)
        return EXIT_FAILED


def _check_output_file(path: Path, flag: str) -> None:
    """An output file's folder must exist and the path must not be a folder: said before any work is done."""
    from fleet.model.errors import Problem
    from fleet.tools.engine.render import source_tree_problem

    if path.is_dir():
        raise InputError([Problem(str(path), 1, flag, "is a folder: give a file name")])
    in_sources = source_tree_problem(path)
    if in_sources:
        raise InputError([Problem(str(path), 1, flag, in_sources)])
    if not path.parent.is_dir():
        raise InputError([Problem(str(path), 1, flag, f"the folder {path.parent} does not exist")])


def cmd_plan(args: argparse.Namespace) -> int:
    """Run the program per stack under the mock engine and show what it would create."""
    from fleet.model.prices import load_prices
    from fleet.tools.engine.summary import render_plan, totals_json

    started = time.perf_counter()
    if args.json is not None:
        _check_output_file(args.json, "--json")
    input_warnings: list[str] = []  # shown once, with the plan's own findings
    planned = _plan_selected(args, "plan", input_warnings)
    if isinstance(planned, int):
        for line in input_warnings:
            print(f"warning: {line}", file=sys.stderr)
        return planned
    fleet, plans = planned
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


def generated_files() -> dict[Path, str]:
    """Every file generated from the declarations, with the text it must hold: the policy file's JSON Schema,
    Pulumi.yaml's declarations of the stack settings and the reference page (docs/reference.md)."""
    from fleet.model.spec_schema import json_schema
    from fleet.model.stack_settings import project_file_text
    from fleet.tools.reference import REFERENCE_FILE, reference_text

    return {
        SCHEMA_FILE: json.dumps(json_schema(), indent=2, sort_keys=True) + "\n",
        PROJECT_FILE: project_file_text(PROJECT_FILE.read_text(encoding="utf-8")),
        REFERENCE_FILE: reference_text(),
    }


def cmd_schema(args: argparse.Namespace) -> int:
    """Write the files generated from the declarations (``generated_files``), or check that the committed ones are
    current."""
    wanted = generated_files()
    if args.check:
        stale = [
            path
            for path, text in wanted.items()
            if (path.read_text(encoding="utf-8") if path.is_file() else "") != text
        ]
        for path in stale:
            print(f"{path} is out of date: run python -m fleet schema", file=sys.stderr)
        return EXIT_FAILED if stale else EXIT_OK
    for path, text in wanted.items():
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path}")
    return EXIT_OK


def cmd_report(args: argparse.Namespace) -> int:
    """Query the central Prometheus over a window and write the benchmark report (fleet/report/command.py): 0 when the
    report was written, 1 when it could not be made, 2 on bad input."""
    from fleet.report.command import ReportError, ReportRequest, build
    from fleet.report.formatting import utc
    from fleet.report.write import write_report
    from fleet.tools.engine.render import source_tree_problem

    in_sources = source_tree_problem(args.out)
    if in_sources:
        print(f"report: --out {args.out} {in_sources}; no report written", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        report = build(ReportRequest.from_namespace(args))
    except ReportError as exc:
        print(f"report: {exc}; no report written", file=sys.stderr)
        return EXIT_BAD_INPUT if exc.bad_input else EXIT_FAILED
    empty = [s for s in report.sections if not s.has_data]
    swept = [name for name, rows in report.scaling.items() if rows]
    if len(empty) == len(report.sections) and not swept and not report.accounting and not report.queues:
        no_sweep = [f"{name}: no sweep job reported an epoch" for name in report.scaling]
        print(
            f"report: no benchmark data between {utc(report.window.start)} and {utc(report.window.end)} "
            f"for any workload ({'; '.join([*(f'{s.name}: {s.no_data}' for s in empty), *no_sweep])}); "
            "no report written",
            file=sys.stderr,
        )
        return EXIT_FAILED
    for name in sorted(set(report.scaling) - set(swept)):
        print(f"report: warning: {name}: no sweep job reported an epoch in the window", file=sys.stderr)
    for section in empty:
        print(f"report: warning: {section.name}: no data ({section.no_data})", file=sys.stderr)
    plots = 2 * (len(report.sections) - len(empty)) + len(swept)
    print(f"report: drawing {plots} plots and writing the pages into {args.out}", file=sys.stderr)
    try:
        written = write_report(report, args.out)
    except OSError as exc:
        print(f"report: cannot write {exc.filename or args.out}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_FAILED
    cards = sum(len(s.rows) for s in report.sections)
    print(
        f"wrote {written[0]}, {written[1]} and {len(written) - 2} plots: {len(report.sections) - len(empty)} of "
        f"{len(report.sections)} workloads with data, {cards} (workload, card) results"
    )
    return EXIT_OK


def cmd_affected(args: argparse.Namespace) -> int:
    """Print the stacks a change touches, non-central first and central last (fleet/tools/delivery/affected/)."""
    from fleet.tools.delivery import affected as sel

    try:
        if args.all:
            selection = sel.select_all(sel.load_policy_file(args.policy, args.workloads_dir))
        elif args.files is not None:
            old_text = None
            if args.old_policy is not None:
                old_text = read_input_text(args.old_policy, what="old policy")
            new = sel.load_policy_file(args.policy, args.workloads_dir)
            selection = sel.compare(
                args.files, new, old_text, label=str(args.old_policy), old_workloads_dir=args.workloads_dir
            )
        else:
            selection = sel.select_from_git(
                args.base, args.head, repo=args.repo, policy_file=args.policy, workloads_dir=args.workloads_dir
            )
    except sel.GitError as exc:
        print(f"affected: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    sys.stdout.write(sel.render(selection, args.format))
    if args.format != "json":
        sys.stderr.write(sel.explain(selection))
    return EXIT_OK


def cmd_render(args: argparse.Namespace) -> int:
    """Plan the selected stacks and write their Kubernetes, Helm, Prometheus and gateway files (engine/render.py)."""
    from fleet.tools.engine.render import out_problem, render_stack

    problem = out_problem(args.out)
    if problem:
        print(f"render: {problem}; nothing was rendered", file=sys.stderr)
        return EXIT_BAD_INPUT
    planned = _plan_selected(args, "render")
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


def cmd_images(args: argparse.Namespace) -> int:
    """List what the images workflow copies and builds; with --pushed, check the digests it got are recorded."""
    from fleet.model.errors import Problem
    from fleet.model.workloads import load_workloads
    from fleet.tools.delivery.image_delivery import fleet_image_jobs, job_problems, jobs_json

    def read_jobs() -> list[ImageJob]:
        from components.kubernetes.images import reload_images

        reload_images()
        load_workloads.cache_clear()
        return fleet_image_jobs(load_fleet(args.policy, args.workloads_dir))

    # The workloads' images and the pool probe's (fleet/model/probe), in the policy's registry.
    fleet = load_fleet(args.policy, args.workloads_dir)
    jobs = fleet_image_jobs(fleet)
    record = read_jobs if args.record else None
    problems = job_problems(jobs, fleet.registry, fleet.file)
    if problems:
        raise InputError(problems)
    if args.out is not None and not args.push:
        raise InputError([Problem(str(args.out), 1, "--out", "goes with --push (the digests it pushed)")])
    if args.push:
        import subprocess

        if args.out is not None:
            _check_output_file(args.out, "--out")
        from fleet.tools.delivery.image_delivery import push_all

        try:
            pushed = push_all(jobs, args.push)
        except (subprocess.CalledProcessError, OSError, ValueError) as exc:
            print(f"images: push failed: {exc}", file=sys.stderr)
            return EXIT_FAILED
        if args.out:
            try:
                args.out.write_text(json.dumps(pushed, indent=1) + "\n", encoding="utf-8")
            except OSError as exc:
                print(f"images: cannot write {args.out}: {exc.strerror or exc}", file=sys.stderr)
        return _check_pins(jobs, pushed, record)
    if args.record and args.pushed is None:
        raise InputError([Problem("--record", 1, "--record", "goes with --pushed FILE or --push")])
    if args.pushed is None:
        if args.format == "json":
            print(jobs_json(jobs))
        else:
            for job in jobs:
                pin = f"@{job.digest}" if job.digest else " (no digest recorded)"
                print(f"{job.kind:<6} {job.name:<14} {job.source} -> {job.target}{pin}")
        return EXIT_OK
    text = read_input_text(args.pushed, what="pushed digests file")
    try:
        pushed = json.loads(text)
    except ValueError as exc:
        raise InputError([Problem(str(args.pushed), 1, "", f"cannot read the pushed digests: {exc}")]) from None
    if not isinstance(pushed, dict) or not all(isinstance(v, str) for v in pushed.values()):
        raise InputError([Problem(str(args.pushed), 1, "", "must be a JSON object {image: sha256:digest}")])
    return _check_pins(jobs, pushed, record)


def _check_pins(
    jobs: list[ImageJob], pushed: dict[str, str], record: Callable[[], list[ImageJob]] | None = None
) -> int:
    """Exit 1 with what to commit where, unless the repository pins every pushed image by its pushed digest; with
    ``record`` (which reads the jobs again), first write the digests into the files that pin them (to commit)."""
    from fleet.tools.delivery.image_delivery import record_digests, unrecorded_digests

    if record:
        try:
            changed = record_digests(jobs, pushed)
        except (OSError, ValueError) as exc:
            print(f"images: cannot record the digests: {exc}", file=sys.stderr)
            return EXIT_FAILED
        for path in sorted(set(changed)):
            print(f"recorded digests in {path}")
        if changed:
            jobs = record()  # read the files again: what they pin now
    lines = unrecorded_digests(jobs, pushed)
    for line in lines:
        print(line, file=sys.stderr)
    if lines:
        print(f"{len(lines)} image(s) not pinned by the digest just pushed: commit the lines above", file=sys.stderr)
        return EXIT_FAILED
    print(f"all {len(jobs)} image(s) are pinned by the digest in the registry")
    return EXIT_OK


def cmd_cards(args: argparse.Namespace) -> int:
    """Print the catalogue's cards, their machines and prices per hour (fleet/tools/cards.py)."""
    from fleet.model.catalogue import load_catalogue
    from fleet.model.prices import load_prices
    from fleet.tools.cards import card_offers, render_cards

    prices = load_prices(args.prices)
    print(render_cards(card_offers(load_catalogue(), prices, args.cloud, args.card, args.retired), prices))
    return EXIT_OK


def cmd_doctor(args: argparse.Namespace) -> int:
    """Inspect the live cluster of ``--stack``, read-only, and print one table (fleet/tools/doctor/): 0 when all is
    well, 1 with each problem named and its likely fix, 2 on bad input."""
    from fleet.tools.doctor import run

    return run(args)


class _Parser(argparse.ArgumentParser):
    """A parser that never takes an abbreviation for a longer flag: ``--stack`` on a command without it is an error,
    not ``--stacks-dir`` (argparse's ``allow_abbrev``)."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, allow_abbrev=False, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand."""
    parser = _Parser(prog="python -m fleet", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--policy", type=Path, default=POLICY_FILE, help="policy file (default: policy/fleet.yaml)")
        p.add_argument("--stacks-dir", type=Path, default=STACKS_DIR, help=argparse.SUPPRESS)
        p.add_argument("--workloads-dir", type=Path, default=WORKLOADS_DIR, help=argparse.SUPPRESS)

    p = sub.add_parser("validate", help="check the policy file, catalogue and workloads")
    common(p)
    p.set_defaults(func=cmd_validate)
    p = sub.add_parser("plan", help="show what each stack would create (offline, mock engine)")
    common(p)
    p.add_argument("--stack", nargs="+", action="extend", metavar="NAME", help="plan only these stacks (default: all)")
    p.add_argument("--json", type=Path, help="write the whole plan as JSON to this file")
    p.add_argument("--no-policy-pack", action="store_true", help="skip the CrossGuard policy pack (policy/)")
    p.add_argument("--prices", type=Path, default=PRICES_FILE, help=argparse.SUPPRESS)
    p.set_defaults(func=cmd_plan)
    p = sub.add_parser(
        "schema",
        help="write policy/fleet.schema.json, Pulumi.yaml's config block and docs/reference.md (--check: verify they "
        "are current)",
    )
    p.add_argument("--check", action="store_true")
    p.set_defaults(func=cmd_schema)
    p = sub.add_parser("render", help="write each stack's Kubernetes, Helm, Prometheus and gateway files")
    common(p)
    p.add_argument(
        "--stack", nargs="+", action="extend", metavar="NAME", help="render only these stacks (default: all)"
    )
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="writes DIR/<stack>/...")
    p.set_defaults(func=cmd_render)
    p = sub.add_parser("images", help="the images CI copies and builds into the fleet's registry, and their digests")
    common(p)
    p.add_argument("--format", choices=("lines", "json"), default="lines", help="output (default: lines)")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--pushed", type=Path, metavar="FILE", help="JSON {image: digest} a push produced: check pins")
    what.add_argument("--push", choices=("docker", "buildah"), help="copy and build every image (CI), then check pins")
    p.add_argument("--out", type=Path, metavar="FILE", help="with --push: also write the digests as JSON")
    p.add_argument(
        "--record", action="store_true", help="with --pushed or --push: write the digests into the files that pin them"
    )
    p.set_defaults(func=cmd_images)
    p = sub.add_parser("report", help="benchmark report (HTML, Markdown, PNG plots) from the central Prometheus")
    p.add_argument("--prometheus", required=True, metavar="URL", help="base URL, e.g. http://prometheus:9090")
    window = p.add_mutually_exclusive_group()
    window.add_argument("--since", metavar="DURATION", help="window ending now: 90m, 12h, 7d (default 7d)")
    window.add_argument("--start", metavar="TIME", help="window start: RFC 3339 (2026-11-01T08:00:00Z) or Unix time")
    p.add_argument("--end", metavar="TIME", help="window end, with --start (default: now)")
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="writes DIR/index.html, report.md, *.png")
    p.add_argument("--workload", action="append", help="report only this workload (repeatable; default: all)")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds per Prometheus request (default 30)")
    common(p)
    p.add_argument("--prices", type=Path, default=PRICES_FILE, help=argparse.SUPPRESS)
    p.set_defaults(func=cmd_report)
    p = sub.add_parser("cards", help="the catalogue's cards: machines, cards per machine, prices per hour")
    p.add_argument("--cloud", choices=CLOUDS, help="only this cloud's machines")
    p.add_argument("--card", metavar="NAME", help="only this card (t4, a100, tpu-v5e...)")
    p.add_argument("--retired", action="store_true", help="also the retired offers, with their alternatives")
    p.add_argument("--prices", type=Path, default=PRICES_FILE, help=argparse.SUPPRESS)
    p.set_defaults(func=cmd_cards)
    from fleet.tools.delivery.affected import FORMATS

    p = sub.add_parser("affected", help="the stacks a change touches, central last (CI matrices)")
    common(p)
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--base", metavar="REF", help="compare with this commit (from its merge base with --head)")
    what.add_argument("--files", nargs="*", metavar="PATH", help="the changed paths, given explicitly (tests)")
    what.add_argument("--all", action="store_true", help="every stack (drift checks, full deploys)")
    p.add_argument("--head", metavar="REF", help="with --base: the new commit (default: the working tree)")
    p.add_argument("--old-policy", type=Path, metavar="FILE", help="with --files: the policy before the change")
    p.add_argument("--format", choices=FORMATS, default="lines", help="output (default: lines, one stack a line)")
    p.add_argument("--repo", type=Path, default=ROOT, help=argparse.SUPPRESS)
    p.set_defaults(func=cmd_affected)
    p = sub.add_parser("doctor", help="inspect a live cluster read-only: pools, GPU agents, benchmark Jobs, Prometheus")
    common(p)
    p.add_argument("--stack", required=True, metavar="NAME", help="the cluster (and Pulumi stack) to inspect")
    p.add_argument(
        "--kubeconfig", type=Path, metavar="FILE", help="default: pulumi stack output kubeconfig --show-secrets"
    )
    p.add_argument("--prometheus", metavar="URL", help="this cluster's Prometheus, through kubectl port-forward")
    p.add_argument(
        "--central-prometheus", metavar="URL", help="the central Prometheus (default on the central: --prometheus)"
    )
    p.add_argument("--timeout", type=float, default=15.0, help="seconds per request (default 15)")
    p.set_defaults(func=cmd_doctor)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run a subcommand; bad input is reported without a traceback and exits 2, Ctrl-C ends it with one line and 130
    (``argv`` None: the real command line, which also gets the SIGINT handling of ``fleet.tools.interrupts``)."""
    from fleet.tools import interrupts

    if argv is None:
        interrupts.install()
    try:
        args = _parse(build_parser(), argv)
        interrupts.pause_for_tests("command")
        return _run(args)
    except KeyboardInterrupt:
        command = " ".join(["fleet", *(sys.argv[1:2] if argv is None else argv[:1])])
        if argv is None:
            interrupts.leave(command)  # does not return: the engine's threads are not waited for
        print(f"{command}: stopped by Ctrl-C (exit {interrupts.EXIT_INTERRUPTED})", file=sys.stderr)
        return interrupts.EXIT_INTERRUPTED
    except BrokenPipeError:
        # the reader went away (`fleet cards | head`): stop quietly, as a Unix tool ended by SIGPIPE does; stdout
        # goes to /dev/null so the interpreter's last flush does not fail again (Python docs, "Note on SIGPIPE")
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE


def _parse(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """The arguments; an unknown option is an error of its subcommand, with the near miss among its options."""
    from fleet.model.errors import did_you_mean

    args, extra = parser.parse_known_args(argv)
    if extra:
        command = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[args.command]
        options = sorted(
            o for a in command._actions for o in a.option_strings if a.help != argparse.SUPPRESS and o.startswith("--")
        )
        unknown = extra[0]
        if not unknown.startswith("-"):
            command.error(f"unexpected argument {unknown!r}: {args.command} takes options only ({', '.join(options)})")
        near = did_you_mean(unknown.split("=", 1)[0], options)
        command.error(f"{unknown!r} is not an option of {args.command}{near}; its options: {', '.join(options)}")
    return args


def _run(args: argparse.Namespace) -> int:
    try:
        return int(args.func(args))
    except InputError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        consequence = "nothing was checked" if args.func is cmd_doctor else "nothing was planned or deployed"
        print(f"{len(exc.problems)} problem(s) found; {consequence}", file=sys.stderr)
        return EXIT_BAD_INPUT
