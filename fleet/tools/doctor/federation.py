"""The rows of the Prometheus federation: on the central, every leaf's federation job up; on a leaf, the central's job
for it."""

from __future__ import annotations

from fleet.model.core.clusters import Cluster
from fleet.model.core.fleet import Fleet
from fleet.model.monitoring.prometheus import FEDERATE_JOB_PREFIX
from fleet.tools.doctor.names import PROMETHEUS_PORT
from fleet.tools.doctor.prometheus_query import query, unreachable_row
from fleet.tools.doctor.table import Row


def federation_rows(
    fleet: Fleet, cluster: Cluster, url: str | None, timeout: float, forward: str, leaf_fix: str
) -> list[Row]:
    """On the central: every leaf's ``up{job="federate-<leaf>"}`` is 1; on a leaf: the central's job for it.

    0 means the leaf's gateway does not answer or refuses the central's certificate; no series means the central has
    no such job (its stack does not know the leaf yet).
    """
    central = fleet.central
    leaves = [c for c in fleet.clusters.values() if not c.central] if cluster.central else [cluster]
    rows = []
    for leaf in leaves:
        job = f"{FEDERATE_JOB_PREFIX}{leaf.name}"
        what = f"federation: {central.name} scrapes {leaf.name}"
        if url is None:
            flag = "--prometheus" if cluster.central else "--central-prometheus"
            port = PROMETHEUS_PORT if cluster.central else PROMETHEUS_PORT + 1
            rows.append(
                Row(
                    what,
                    f"skipped: no {flag}; open it with: {forward}, then {flag} http://127.0.0.1:{port}",
                    skipped=True,
                )
            )
            continue
        try:
            result = query(url, f'up{{job="{job}"}}', timeout)
        except Exception as exc:
            rows.append(unreachable_row(what, url, exc, forward))
            continue
        if not result:
            rows.append(
                Row(
                    what,
                    f"no job {job}",
                    f"the central Prometheus has no federation job for {leaf.name}",
                    f"deploy the leaf, then the central: pulumi up --stack {leaf.name}, then pulumi up --stack "
                    f"{central.name} (it learns the leaf through a StackReference)",
                )
            )
            continue
        if any(float(r["value"][1]) == 0 for r in result):
            rows.append(
                Row(
                    what,
                    f'up{{job="{job}"}} 0',
                    f"the gateway of {leaf.name} does not answer the central or refuses its certificate",
                    f"python -m fleet doctor --stack {leaf.name} (its gateway row); its "
                    f"gpu-fleet:federationSourceRanges must admit the central's egress; if its certificates changed, "
                    f"{leaf_fix}",
                )
            )
            continue
        rows.append(Row(what, f'up{{job="{job}"}} 1'))
    return rows
