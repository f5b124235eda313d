"""Billing: which account each card-hour of the fleet goes to.

A cluster's GPU time is billed to its ``billing_account`` (policy: ``clusters.<cloud>.<name>.billing_account``,
``default`` unless given); a workload that names an account of its own (policy: ``workloads.<name>.billing_account``)
is billed to it on every cluster it runs on; a pool's idle time and its CI jobs stay on the cluster's account, whose
owner keeps the pool. The accounting rules (fleet/model/billing/accounting.py) label their records by these accounts,
the plan shows each pool's (fleet/tools/engine/summary.py), the dashboards offer them as a variable
(fleet/model/monitoring/dashboards.py) and the report's accounting section sums card-hours per account
(fleet/report/accounting.py, docs/accounting.md)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from fleet.model.core.clusters import Cluster
from fleet.model.core.fleet import Fleet
from fleet.model.core.pools import GpuPool

# A billing account as a Prometheus label value and a name people type: letters, digits, - _ .
BILLING_ACCOUNT = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$"
DEFAULT_BILLING_ACCOUNT = "default"


class Billed(Protocol):
    """What billing reads of a workload's placement in the policy file
    (``fleet.model.policy_file.schema.Placement``)."""

    @property
    def billing_account(self) -> str | None:
        """The workload's own account, or None: its cluster's."""
        ...


def workload_accounts(workloads: Mapping[str, Billed]) -> dict[str, str]:
    """The workloads of the policy file billed to an account of their own, and that account."""
    return {name: p.billing_account for name, p in workloads.items() if p.billing_account}


def account_of(fleet: Fleet, cluster: Cluster, workload: str) -> str:
    """The account ``workload``'s GPU time on ``cluster`` is billed to: its own, else the cluster's."""
    return fleet.billing_accounts.get(workload, cluster.billing_account)


def billed_apart(fleet: Fleet, cluster: Cluster) -> dict[str, list[str]]:
    """The accounts other than ``cluster``'s that workloads are billed to, each with its workloads (in name order),
    in the order their first workload comes by name."""
    accounts: dict[str, list[str]] = {}
    for workload, account in sorted(fleet.billing_accounts.items()):
        if account != cluster.billing_account:
            accounts.setdefault(account, []).append(workload)
    return accounts


def pool_accounts(fleet: Fleet, cluster: Cluster, pool: GpuPool) -> tuple[str, ...]:
    """The accounts billed for ``pool``'s GPU time: the cluster's first (its nodes, idle time and CI jobs), then those
    of the workloads on the pool billed apart (its jobs, sweep points and the queued sweep points it may be given), by
    name."""
    on_pool = [job.workload.name for job in fleet.workload_jobs(cluster) if job.pool == pool]
    on_pool += [point.workload.name for point in fleet.sweep_points(cluster) if point.pool == pool]
    on_pool += [point.workload.name for point, held in fleet.queued_points_on(cluster) if held == pool]
    apart = sorted({fleet.billing_accounts[w] for w in on_pool if w in fleet.billing_accounts})
    return tuple(dict.fromkeys([cluster.billing_account, *apart]))


def fleet_accounts(fleet: Fleet) -> list[str]:
    """Every account the fleet's GPU time may be billed to, by name: each cluster's and each workload's own."""
    clusters = {c.billing_account for c in fleet.clusters.values() if c.billing_account}
    return sorted(clusters | set(fleet.billing_accounts.values()))
