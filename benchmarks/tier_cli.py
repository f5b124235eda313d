"""The command line the benchmarks that run on the real tier share (benchmarks/preview_speed.py,
benchmarks/dispatch_rate.py): ``--json`` and ``--render``, and the refusal to measure outside the tier's network
namespace (tests/real/isolation.py) or without the built receivers (tests/real/toolchain.py)."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.real import toolchain
from tests.real.isolation import INSIDE_ENV, only_loopback


def add_output_options(parser: argparse.ArgumentParser) -> None:
    """``--json FILE`` (every figure written there) and ``--render JSON`` (the tables of an earlier run, no run)."""
    parser.add_argument("--json", type=Path, help="write every figure as JSON to this file")
    parser.add_argument("--render", type=Path, metavar="JSON", help="print the tables of an earlier --json; no run")


def parse(
    parser: argparse.ArgumentParser, argv: list[str] | None, render: Callable[[dict[str, Any]], str]
) -> argparse.Namespace | None:
    """The arguments, once the run may measure; None when ``--render`` printed an earlier run's tables instead. A
    run outside the tier's namespace, or before the receivers are built, is a usage error naming the command."""
    args = parser.parse_args(argv)
    if args.render:
        print(render(json.loads(args.render.read_text(encoding="utf-8"))))
        return None
    if os.environ.get(INSIDE_ENV) != "1" or not only_loopback():
        parser.error("run it in the real tier's namespace: python -m tests.real.isolation <python> -m benchmarks...")
    absent = toolchain.missing()
    if absent:
        parser.error(f"receivers not built ({', '.join(absent)}): python -m tests.real.toolchain build")
    return args


def write_json(path: Path | None, report: dict[str, Any]) -> None:
    """The run's figures to ``path`` (``--json``), when given."""
    if path:
        path.write_text(json.dumps(report, indent=1), encoding="utf-8")
