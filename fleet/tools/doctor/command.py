"""The ``doctor`` subcommand: check the flags, read the cluster of ``--stack``, gather every row (the API server's, the
queues', Prometheus') and print one table."""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from fleet.model.core.clusters import Cluster
from fleet.model.core.errors import InputError, Problem
from fleet.model.core.fleet import Fleet
from fleet.model.loader import load_fleet
from fleet.tools.doctor.agents import agent_rows
from fleet.tools.doctor.benchmarks import benchmark_rows
from fleet.tools.doctor.bounded_reads import bound_answers
from fleet.tools.doctor.cluster_read import ApiUnreachableError, Snapshot, read_cluster
from fleet.tools.doctor.context import Context
from fleet.tools.doctor.gateway import gateway_rows
from fleet.tools.doctor.kubeconfig import api_client, kubeconfig_file, kubectl_for_stack
from fleet.tools.doctor.pools import pool_rows
from fleet.tools.doctor.prometheus import prometheus_rows
from fleet.tools.doctor.queues import queue_rows_for
from fleet.tools.doctor.table import EXIT_FAILED, Row, exit_status, render_table

# A whole answer of the API server may take this many times --timeout (which bounds each socket read) to arrive.
ANSWER_DEADLINE_FACTOR = 4


def cluster_rows(
    fleet: Fleet, cluster: Cluster, stack: str, snapshot: Snapshot, kubectl: str, now: datetime
) -> list[Row]:
    """Every row the API server's answers give (pools, node agents, gateway, benchmarks, probes)."""
    ctx = Context(fleet, cluster, stack, snapshot, kubectl, now)
    return [*pool_rows(ctx), *agent_rows(ctx), *gateway_rows(ctx), *benchmark_rows(ctx)]


def utc_now() -> datetime:
    """The real clock, ``run``'s default (tests pass a stopped one)."""
    return datetime.now(UTC)


def run(args: Any, out: Any = None, clock: Callable[[], datetime] = utc_now) -> int:
    """The ``doctor`` subcommand: inspect the cluster of ``args.stack`` and print one table; 0, 1 or 2. Ages and
    grace periods are measured from ``clock()``, read once."""
    out = out or sys.stdout
    if not (args.timeout > 0 and math.isfinite(args.timeout)):  # nan and inf passed `<= 0`
        raise InputError(
            [
                Problem(
                    "--timeout",
                    1,
                    "--timeout",
                    f"must be a positive number of seconds, such as 15, not {args.timeout:g}",
                )
            ]
        )
    from fleet.report.prometheus_api import check_base_url

    for flag, value in (("--prometheus", args.prometheus), ("--central-prometheus", args.central_prometheus)):
        if value is not None:
            try:
                check_base_url(value)
            except ValueError as exc:
                raise InputError([Problem(flag, 1, flag, str(exc))]) from None
    fleet = load_fleet(args.policy, args.workloads_dir)
    cluster = fleet.cluster(args.stack, "--stack")
    now = clock()
    kubectl = kubectl_for_stack(cluster.name, args.kubeconfig)
    title = f"{cluster.name} ({cluster.facts.title}{', central' if cluster.central else ''}), {now:%Y-%m-%d %H:%M} UTC"
    with kubeconfig_file(cluster.name, args.kubeconfig) as path:
        api = bound_answers(api_client(path), ANSWER_DEADLINE_FACTOR * args.timeout)
        try:
            try:
                snapshot = read_cluster(api, fleet, cluster, args.timeout)
            except ApiUnreachableError as exc:
                row = Row(
                    "Kubernetes API server",
                    "unreachable",
                    str(exc),
                    exc.fix
                    or f"check the kubeconfig's server and your network (VPN, the cluster's authorized networks); "
                    f"{kubectl} get nodes",
                )
                print(render_table([row], title), file=out)
                return EXIT_FAILED
            queues = [Row(*r) for r in queue_rows_for(fleet, cluster, api, kubectl, args.timeout)]  # on the manager
        finally:
            api.close()
    rows = [Row("Kubernetes API server", f"{api.configuration.host}: {len(snapshot.nodes)} node(s)")]
    rows += cluster_rows(fleet, cluster, cluster.name, snapshot, kubectl, now)
    rows += queues
    rows += prometheus_rows(
        fleet, cluster, cluster.name, args.prometheus, args.central_prometheus, args.timeout, args.kubeconfig
    )
    print(render_table(rows, title), file=out)
    return exit_status(rows)
