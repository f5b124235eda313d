"""GPU accounting in the report: per billing account and pool, the card-hours billed, used, idle and lost to
preemption in the window, and what they cost.

The leaves record cards at each evaluation (fleet/model/accounting.py) and the central federates them every
``monitoring.federation_interval``; the report integrates each record over the window as a subquery at that
resolution: ``sum_over_time(x[window:resolution]) * resolution / 3600`` card-hours. Who pays what: each account pays
the card-hours its workloads used, and the pool's owner (the cluster's account) also pays the idle ones, so the
accounts' costs add up to what the cloud bills. Card-hours lost to preemption are those used by pods that were lost
with their node (``gpufleet:pod_preempted``): already in "used", shown apart.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fleet.model.accounting import BILLED, IDLE, POD_USED, PREEMPTED, USED
from fleet.model.spec import Fleet, GpuPool
from fleet.report.costs import PriceEntry, PriceTable
from fleet.report.queries import Window, escape_label_value

BY = "billing_account, cluster, cloud, gpu, pool"
KEYS = ("billing_account", "cluster", "cloud", "gpu", "pool")


@dataclass(frozen=True)
class AccountRow:
    """One (account, pool)'s card-hours in the window; ``price`` per machine-hour, ``cards`` per machine."""

    billing_account: str
    cluster: str
    cloud: str
    gpu: str
    pool: str
    billed: float
    used: float
    idle: float
    lost: float
    machine: str = ""
    cards: int = 1
    spot: bool = True
    price: PriceEntry | None = None

    @property
    def idle_share(self) -> float | None:
        """Idle card-hours over billed ones (None where the account owns no nodes of the pool)."""
        return self.idle / self.billed if self.billed else None

    @property
    def cost(self) -> float | None:
        """What the account pays: the card-hours it used and, as the pool's owner, the idle ones, at the machine's
        price per card-hour."""
        hourly = self.price.per_hour(self.spot) if self.price else None
        return None if hourly is None else (self.used + self.idle) * hourly / self.cards


def _span(window: Window, resolution: float) -> str:
    # the subquery's points are at whole multiples of the resolution; a range half a step short of the window holds
    # the same points whether the range's start is inclusive (Prometheus 2) or not (3): one per step, each standing
    # for the step before it
    return f"[{int(window.seconds * 1000 - resolution * 500)}ms:{int(resolution)}s]"


def accounting_queries(window: Window, resolution: float) -> dict[str, str]:
    """The instant queries at the window's end: billed, used and idle, each in card-hours per (account, cluster, card,
    pool), and ``lost_pods``, the pods lost with their node in the window (whose card-hours :func:`lost_query` adds
    up)."""
    hours = f"* {int(resolution)} / 3600"

    def integral(record: str) -> str:
        return f"sum by ({BY}) (sum_over_time({record}{_span(window, resolution)})) {hours}"

    lost_pods = f"max by (cluster, namespace, pod) (max_over_time({PREEMPTED}[{int(window.seconds)}s]))"
    return {"billed": integral(BILLED), "used": integral(USED), "idle": integral(IDLE), "lost_pods": lost_pods}


def lost_query(window: Window, resolution: float, lost_pods: list[dict[str, Any]]) -> str | None:
    """The card-hours used by the pods lost with their node (the answer to ``lost_pods``), per (account, cluster, card,
    pool); None when no pod was lost. The subquery reads only those pods' series: over every pod's, it would step
    through the whole window for each run ever recorded (minutes for 180 days of a fleet)."""
    names = sorted({p["metric"].get("pod", "") for p in lost_pods if float(p["value"][1]) > 0} - {""})
    if not names:
        return None
    pods = escape_label_value("|".join(re.escape(n) for n in names))  # a regex in a PromQL string
    used = f'{POD_USED}{{pod=~"{pods}"}}{_span(window, resolution)}'
    lost_pods = accounting_queries(window, resolution)["lost_pods"]
    return (
        f"sum by ({BY}) (sum_over_time({used}) * on (cluster, namespace, pod) group_left () {lost_pods})"
        f" * {int(resolution)} / 3600"
    )


def _pool(fleet: Fleet | None, cluster: str, name: str) -> GpuPool | None:
    if fleet is None or cluster not in fleet.clusters:
        return None
    return next((p for p in fleet.clusters[cluster].all_pools if p.name == name), None)


def accounting_rows(
    answers: Mapping[str, list[dict[str, Any]]], fleet: Fleet | None, prices: PriceTable
) -> list[AccountRow]:
    """One row per (account, pool) with card-hours in the window, by account, cluster and pool."""
    values: dict[tuple[str, ...], dict[str, float]] = {}
    for name in ("billed", "used", "idle", "lost"):
        for sample in answers.get(name, []):
            key = tuple(sample["metric"].get(k, "") for k in KEYS)
            values.setdefault(key, {})[name] = float(sample["value"][1])
    rows = []
    for key, found in sorted(values.items()):
        if not any(found.values()):
            continue
        account, cluster, cloud, gpu, pool_name = key
        pool = _pool(fleet, cluster, pool_name)
        machine, cards, spot, price = "", 1, True, None
        if pool is not None:
            accelerator = pool.offer.accelerator_type if pool.offer else ""
            machine = pool.machine_type + (f" + {accelerator}" if accelerator else "")
            cards, spot = pool.accelerators_per_node, pool.spot
            price = prices.lookup(cloud, pool.machine_type, accelerator)
        hours = [found.get(name, 0.0) for name in ("billed", "used", "idle", "lost")]
        rows.append(AccountRow(account, cluster, cloud, gpu, pool_name, *hours, machine, cards, spot, price))
    return rows
