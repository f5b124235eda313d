"""Command line of gpu-fleet: ``fleet validate | plan | cards | render | report | doctor | affected | schema | images``.

Run from the project's virtualenv as ``fleet COMMAND`` (the console script ``pip install -e .`` puts in .venv/bin) or
``python -m fleet COMMAND``.

Exit status: 0 fine, 1 the plan found mandatory violations or the engine would fail, 2 bad input. This module
parses the arguments and runs one command; each command's handler is in fleet/tools/commands/.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from fleet.model.core.catalogue import CLOUDS
from fleet.model.core.errors import InputError
from fleet.model.core.workloads import WORKLOADS_DIR
from fleet.model.loader import POLICY_FILE, ROOT
from fleet.program.stack_config import STACKS_DIR
from fleet.tools.commands import EXIT_BAD_INPUT
from fleet.tools.commands.affected import cmd_affected
from fleet.tools.commands.cards import cmd_cards
from fleet.tools.commands.images import cmd_images
from fleet.tools.commands.live import cmd_doctor, cmd_report
from fleet.tools.commands.planning import cmd_plan, cmd_render, cmd_validate
from fleet.tools.commands.schema import cmd_schema

PRICES_FILE = Path(__file__).resolve().parents[1] / "model" / "prices.yaml"  # fleet.model.billing.prices.PRICES_FILE
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what shells report for a writer whose reader closed the pipe


class _Parser(argparse.ArgumentParser):
    """A parser that never takes an abbreviation for a longer flag: ``--stack`` on a command without it is an error,
    not ``--stacks-dir`` (argparse's ``allow_abbrev``)."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, allow_abbrev=False, **kwargs)


DESCRIPTION = (
    "gpu-fleet: GPU benchmark clusters on many clouds from one policy file (policy/fleet.yaml). Run from the "
    "project's virtualenv, which `make plan` creates: `.venv/bin/fleet COMMAND` (or `source .venv/bin/activate`, then "
    "`fleet COMMAND`), the same as `.venv/bin/python -m fleet COMMAND`; `fleet COMMAND --help` for each command. "
    "Exit status: 0 fine, 1 the command found a problem (a mandatory violation, an unreachable server), 2 bad input, "
    "130 Ctrl-C."
)


def program_name(argv0: str | None = None) -> str:
    """How the command line was started, for its usage lines: ``fleet`` (the console script) or ``python -m fleet``
    (``argv0``: ``sys.argv[0]`` by default)."""
    return "fleet" if Path(sys.argv[0] if argv0 is None else argv0).name == "fleet" else "python -m fleet"


def _path(text: str) -> Path:
    """A path given on the command line; an empty one (``--out ""``, a shell variable left unset) is refused rather
    than taken for the current folder."""
    if not text.strip():
        raise argparse.ArgumentTypeError("is empty: give a path, such as out/ or plan.json")
    return Path(text)


def _concurrency(text: str) -> int:
    """How many queries the report sends at a time: a whole number from 1 to the pool's most."""
    from fleet.report.query_pool import MAX_CONCURRENCY

    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_CONCURRENCY:
        raise argparse.ArgumentTypeError(f"must be a whole number from 1 to {MAX_CONCURRENCY}, such as 4, not {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand."""
    parser = _Parser(prog=program_name(), description=DESCRIPTION)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--policy", type=_path, default=POLICY_FILE, help="policy file (default: policy/fleet.yaml)")
        p.add_argument(
            "--stacks-dir", type=_path, default=STACKS_DIR, metavar="DIR", help="the stack files (default: stacks/)"
        )
        p.add_argument(
            "--workloads-dir",
            type=_path,
            default=WORKLOADS_DIR,
            metavar="DIR",
            help="the workload folders (default: workloads/)",
        )

    p = sub.add_parser("validate", help="check the policy file, catalogue and workloads")
    common(p)
    p.set_defaults(func=cmd_validate)
    p = sub.add_parser("plan", help="show what each stack would create (offline, mock engine)")
    common(p)
    p.add_argument("--stack", nargs="+", action="extend", metavar="NAME", help="plan only these stacks (default: all)")
    p.add_argument("--json", type=_path, help="write the whole plan as JSON to this file")
    p.add_argument("--no-policy-pack", action="store_true", help="skip the CrossGuard policy pack (policy/)")
    p.add_argument(
        "--chart-cache",
        type=_path,
        metavar="DIR",
        help="also render every Helm release from the chart archives in DIR (`helm pull` them there) and place their "
        "pods on the stack's pools (needs helm-python-sdk)",
    )
    p.add_argument("--prices", type=_path, default=PRICES_FILE, help=argparse.SUPPRESS)
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
    p.add_argument("--out", type=_path, required=True, metavar="DIR", help="writes DIR/<stack>/...")
    p.set_defaults(func=cmd_render)
    p = sub.add_parser("images", help="the images CI copies and builds into the fleet's registry, and their digests")
    common(p)
    p.add_argument("--format", choices=("lines", "json"), default="lines", help="output (default: lines)")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--pushed", type=_path, metavar="FILE", help="JSON {image: digest} a push produced: check pins")
    what.add_argument("--push", choices=("docker", "buildah"), help="copy and build every image (CI), then check pins")
    p.add_argument("--out", type=_path, metavar="FILE", help="with --push: also write the digests as JSON")
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
    p.add_argument("--out", type=_path, required=True, metavar="DIR", help="writes DIR/index.html, report.md, *.png")
    p.add_argument("--workload", action="append", help="report only this workload (repeatable; default: all)")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds per Prometheus request (default 30)")
    p.add_argument(
        "--concurrency",
        type=_concurrency,
        default=2,
        metavar="N",
        help="queries sent to Prometheus at a time (default 2; 1 sends them one after the other)",
    )
    common(p)
    p.add_argument("--prices", type=_path, default=PRICES_FILE, help=argparse.SUPPRESS)
    p.set_defaults(func=cmd_report)
    p = sub.add_parser("cards", help="the catalogue's cards: machines, cards per machine, prices per hour")
    p.add_argument("--cloud", choices=CLOUDS, help="only this cloud's machines")
    p.add_argument("--card", metavar="NAME", help="only this card (t4, a100, tpu-v5e...)")
    p.add_argument("--retired", action="store_true", help="also the retired offers, with their alternatives")
    p.add_argument("--prices", type=_path, default=PRICES_FILE, help=argparse.SUPPRESS)
    p.set_defaults(func=cmd_cards)
    from fleet.tools.delivery.affected import FORMATS

    p = sub.add_parser("affected", help="the stacks a change touches, central last (CI matrices)")
    common(p)
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--base", metavar="REF", help="compare with this commit (from its merge base with --head)")
    what.add_argument("--files", nargs="*", metavar="PATH", help="the changed paths, given explicitly (tests)")
    what.add_argument("--all", action="store_true", help="every stack (drift checks, full deploys)")
    p.add_argument("--head", metavar="REF", help="with --base: the new commit (default: the working tree)")
    p.add_argument("--old-policy", type=_path, metavar="FILE", help="with --files: the policy before the change")
    p.add_argument("--format", choices=FORMATS, default="lines", help="output (default: lines, one stack a line)")
    p.add_argument("--repo", type=_path, default=ROOT, help=argparse.SUPPRESS)
    p.set_defaults(func=cmd_affected)
    p = sub.add_parser("doctor", help="inspect a live cluster read-only: pools, GPU agents, benchmark Jobs, Prometheus")
    common(p)
    p.add_argument("--stack", required=True, metavar="NAME", help="the cluster (and Pulumi stack) to inspect")
    p.add_argument(
        "--kubeconfig", type=_path, metavar="FILE", help="default: pulumi stack output kubeconfig --show-secrets"
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
        status = _run(args)
        if interrupts.interrupted():  # a Ctrl-C some library caught and dropped: the command did not finish
            raise KeyboardInterrupt
        if argv is None:
            interrupts.finished(status)
        return status
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
    from fleet.model.core.errors import did_you_mean

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
