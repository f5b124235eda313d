"""``python -m fleet report``: benchmark results from the central Prometheus, as HTML, Markdown and PNG plots.

For each workload (``workloads/<name>/workload.yaml``) the report queries, over one time window, its
headline metric per card (cluster, cloud, gpu), its run counter, and the GPU recording rules of the
benchmark's pods (the queries and what they mean: fleet/report/queries.py), then adds the cost per result
from the dated price table (fleet/report/costs.py). It writes ``DIR/index.html`` (self-contained: the plots are
embedded), ``DIR/report.md`` and the plots as ``DIR/<workload>-bars.png`` and ``DIR/<workload>-timeseries.png``.

Nothing is written when the report would be empty: an unreachable Prometheus, a refused query or a window
in which no workload has data ends the command with a message and a non-zero exit status. A workload
without data while others have some is reported as such (and named on stderr).
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from fleet.model.core.workloads import Workload, load_workloads
from fleet.model.loader import load_fleet
from fleet.report.costs import load_prices
from fleet.report.gather import count_queries, gather
from fleet.report.model import Report
from fleet.report.progress import Progress
from fleet.report.prometheus_api import PrometheusClient, PrometheusError
from fleet.report.queries import window_from
from fleet.report.query_pool import DEFAULT_CONCURRENCY


class ReportError(Exception):
    """The report cannot be made; ``bad_input`` tells a problem with the command line from a failed query."""

    def __init__(self, message: str, bad_input: bool = False):
        super().__init__(message)
        self.bad_input = bad_input


def _select(workloads: dict[str, Workload], names: list[str] | None) -> list[Workload]:
    if not names:
        return list(workloads.values())
    unknown = [n for n in names if n not in workloads]
    if unknown:
        raise ReportError(f"unknown workload(s) {', '.join(unknown)}; known: {', '.join(workloads)}", bad_input=True)
    return [workloads[n] for n in dict.fromkeys(names)]


@dataclass(frozen=True)
class ReportRequest:
    """What a report is asked for: the Prometheus, the window (``since`` or ``start``/``end``), the output folder,
    the per-request timeout, the workloads (None: all), the fleet, workload and price files, and how many queries
    are sent at a time."""

    prometheus: str
    out: Path
    since: str | None
    start: str | None
    end: str | None
    timeout: float
    workload: list[str] | None
    policy: Path
    workloads_dir: Path
    prices: Path | None
    concurrency: int = DEFAULT_CONCURRENCY

    @classmethod
    def from_namespace(cls, args: Any) -> ReportRequest:
        """The request of the ``report`` command line (an ``argparse.Namespace`` with these names; ``concurrency``
        may be left out)."""
        fields = [f.name for f in dataclasses.fields(cls)]
        return cls(**{name: getattr(args, name) for name in fields if hasattr(args, name)})


def build(
    args: ReportRequest, now: float | None = None, stream: TextIO | None = None, budget: float | None = None
) -> Report:
    """Check the command line, query Prometheus and return the gathered report (``ReportError`` otherwise).

    Every request gets ``--timeout`` seconds for its whole answer, and all of them together ``budget`` seconds
    (default: the timeout times the number of requests the report may send), so the report ends in bounded
    time whatever the server does.
    """
    if not (args.timeout > 0 and math.isfinite(args.timeout)):
        raise ReportError(f"--timeout must be a positive number of seconds (got {args.timeout:g})", bad_input=True)
    try:
        window = window_from(now if now is not None else time.time(), args.since, args.start, args.end)
        client = PrometheusClient(args.prometheus, timeout=args.timeout)
    except ValueError as exc:
        raise ReportError(str(exc), bad_input=True) from None
    if args.out.exists() and not args.out.is_dir():
        raise ReportError(f"--out {args.out} exists and is not a directory", bad_input=True)
    workloads = _select(load_workloads(args.workloads_dir), args.workload)
    if not workloads:
        raise ReportError(f"no workload is defined under {args.workloads_dir}", bad_input=True)
    fleet = load_fleet(args.policy, args.workloads_dir)
    prices = load_prices(args.prices)
    progress = Progress(count_queries(workloads, window, fleet), stream)
    client.deadline = time.monotonic() + (budget if budget is not None else progress.total * args.timeout)
    try:
        progress.step(f"connecting to {client.display_url}")
        client.build_info()
        return gather(client, workloads, window, fleet, prices, progress, args.concurrency)
    except PrometheusError as exc:
        raise ReportError(str(exc)) from None
    finally:
        progress.finish()
