"""``report`` and ``doctor``: the commands that read a running fleet, the central Prometheus for the benchmark
report, a live cluster for the doctor."""

from __future__ import annotations

import argparse
import sys

from fleet.tools.commands import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK


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
    swept = [name for name, rows in report.sweeps.items() if rows]
    if len(empty) == len(report.sections) and not swept and not report.accounting and not report.queues:
        no_sweep = [f"{name}: no sweep job reported an epoch" for name in report.sweeps]
        print(
            f"report: no benchmark data between {utc(report.window.start)} and {utc(report.window.end)} "
            f"for any workload ({'; '.join([*(f'{s.name}: {s.no_data}' for s in empty), *no_sweep])}); "
            "no report written",
            file=sys.stderr,
        )
        return EXIT_FAILED
    for name in sorted(set(report.sweeps) - set(swept)):
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


def cmd_doctor(args: argparse.Namespace) -> int:
    """Inspect the live cluster of ``--stack``, read-only, and print one table (fleet/tools/doctor/): 0 when all is
    well, 1 with each problem named and its likely fix, 2 on bad input."""
    from fleet.tools.doctor import run

    return run(args)
