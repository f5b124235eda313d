"""GPU accounting in the report: per billing account and pool, the card-hours billed, used, idle and lost to
preemption in the window, and what they cost.

The leaves record cards at each evaluation (fleet/model/billing/accounting.py) and the central federates them every
``monitoring.federation_interval``; the report integrates each record over the window as a subquery at that
resolution: ``sum_over_time(x[window:resolution]) * resolution / 3600`` card-hours. Who pays what: each account pays
the card-hours its workloads used, and the pool's owner (the cluster's account) also pays the idle ones, so the
accounts' costs add up to what the cloud bills. Card-hours lost to preemption are those used by pods that were lost
with their node (``gpufleet:pod_preempted``): already in "used", shown apart.

Over a window of ``HOURLY_FROM`` or more, billed, used and idle come from the central's hourly records
(fleet/model/billing/accounting_hours.py) instead: the sum of the records whose hour lies wholly in the window, plus the
exact integral of the minutes they do not cover (between the window's start and the first such hour, and after the last
record to the window's end). That is the same sum of the same points as the exact integral as long as the central
evaluated its hourly group every hour of the window; an hour whose evaluation was missed (the central down at that
instant), and the hours before the rules were deployed (beyond the window's first hour), count nothing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fleet.model.billing import accounting_hours
from fleet.model.billing.accounting import BILLED, IDLE, POD_USED, PREEMPTED, USED
from fleet.model.core.fleet import Fleet
from fleet.model.core.pools import GpuPool
from fleet.report.costs import PriceEntry, PriceTable
from fleet.report.queries import Window, escape_label_value, time_chunks

BY = "billing_account, cluster, cloud, gpu, pool"
HOURLY_FROM = 3 * 3600  # shorter windows integrate the raw records (a few hundred points a series)
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
    # the subquery's points are at whole multiples of the resolution, each standing for the step before it; a range
    # one millisecond short of the window holds exactly the points in (start, end], whether the range's start is
    # inclusive (Prometheus 2) or not (3), and wherever the window's ends fall between two points (a range half a step
    # short, as before, dropped the first point when the end fell in the first half of a step)
    return f"[{round(window.end * 1000) - round(window.start * 1000) - 1}ms:{int(resolution)}s]"


def accounting_queries(window: Window, resolution: float) -> dict[str, str]:
    """The instant queries at the window's end: billed, used and idle, each in card-hours per (account, cluster, card,
    pool), and ``lost_pods``, the pods lost with their node in the window (whose card-hours :func:`lost_query` adds
    up)."""

    def integral(record: str) -> str:
        if window.seconds >= HOURLY_FROM and accounting_hours.supported(resolution):
            return hourly_integral(window, resolution, record)
        return exact_integral(window, resolution, record)

    lost_pods = f"max by (cluster, namespace, pod) (max_over_time({PREEMPTED}[{int(window.seconds)}s]))"
    return {"billed": integral(BILLED), "used": integral(USED), "idle": integral(IDLE), "lost_pods": lost_pods}


def exact_integral(window: Window, resolution: float, record: str) -> str:
    """The card-hours of ``record`` over the window from its raw samples: one point a ``resolution`` through it."""
    return f"sum by ({BY}) (sum_over_time({record}{_span(window, resolution)})) * {int(resolution)} / 3600"


def hourly_integral(window: Window, resolution: float, record: str) -> str:
    """The card-hours of ``record`` over the window from the central's hourly records: those whose hour lies wholly
    in the window (recorded from an hour after its start to its end), plus the exact integral of the points before
    the first one's hour (in the window's first hour) and after the last one (in its last hour), each part tagged so
    that ``or`` keeps all three before they are added up."""
    end_ms = round(window.end * 1000)
    start_ms = round(window.start * 1000)
    hour = accounting_hours.HOUR
    at_end = f" @ {end_ms / 1000:.3f}"
    whole_hours = f"[{end_ms - start_ms - hour * 1000}ms]{at_end}"  # records from an hour after the start to the end
    covered = f"{accounting_hours.HOUR_END}{whole_hours}"
    first = f"scalar(min_over_time({covered}))"
    last = f"scalar(max_over_time({covered}))"
    span = hour * 1000 - 1  # (t - 1h, t]
    head_at = f" @ {(start_ms + hour * 1000) / 1000:.3f}"
    parts = {
        "hours": f"sum by ({BY}) (sum_over_time({accounting_hours.HOURLY[record]}{whole_hours}))",
        "head": accounting_hours.integral(f"({record} and on () (vector(time()) <= {first} - {hour}))", span,
                                          resolution, head_at),
        "tail": accounting_hours.integral(f"({record} and on () (vector(time()) > {last}))", span, resolution,
                                          at_end),
    }  # fmt: skip
    tagged = " or ".join(f'label_replace({q}, "part", "{name}", "", "")' for name, q in parts.items())
    return f"sum by ({BY}) ({tagged})"


def lost_query(window: Window, resolution: float, lost_pods: list[dict[str, Any]]) -> str | None:
    """The card-hours used by the pods lost with their node (the answer to ``lost_pods``), per (account, cluster, card,
    pool); None when no pod was lost. The subquery reads only those pods' series: over every pod's, it would step
    through the whole window for each run ever recorded (minutes for 180 days of a fleet)."""
    names = sorted({p["metric"].get("pod", "") for p in lost_pods if float(p["value"][1]) > 0} - {""})
    if not names:
        return None
    pods = escape_label_value("|".join(re.escape(n) for n in names))  # a regex in a PromQL string
    selected = f'{POD_USED}{{pod=~"{pods}"}}'
    lost_pods = accounting_queries(window, resolution)["lost_pods"]
    chunks = time_chunks(window, LOST_CHUNK)
    if len(chunks) == 1:
        used = f"sum_over_time({selected}{_span(window, resolution)})"
    else:  # the same points, a chunk at a time (see LOST_CHUNK), added up per series
        parts = [
            f'label_replace(sum_over_time({selected}{_span(c, resolution)} @ {c.end:.3f}), "part", "{i}", "", "")'
            for i, c in enumerate(chunks)
        ]
        used = f"sum without (part) ({' or '.join(parts)})"
    return f"sum by ({BY}) ({used} * on (cluster, namespace, pod) group_left () {lost_pods}) * {int(resolution)} / 3600"


#: The longest subquery of the lost card-hours. Prometheus 2.42 gives each series a subquery selects room for every
#: step of the subquery (``getPointSlice(numSteps)`` per series in the range evaluation, source: prometheus/prometheus
#: promql/engine.go): over 180 days a minute apart, 4 MB a
#: series; at 200 leaves the 5,299 pods lost in 180 days asked for more than the central's 12 GiB and it died
#: (docs/performance.md, run L). A chunk of 14 days selects only the pods that lived in it, with 20,160 steps each.
LOST_CHUNK = 14 * 86400


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
