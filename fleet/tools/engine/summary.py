"""Human-readable plan output, a decision aid: per stack its pools with what each costs per hour at its maximum,
then the findings of every stack grouped once, then the totals per stack and for the fleet.

Prices come from the dated price table (fleet/model/prices.yaml, fleet/model/billing/prices.py): a pool's
machine at its spot price when the pool is spot, else on-demand; a machine the table does not price says so, never a
guess.
"""

from __future__ import annotations

import re
import textwrap
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from fleet.model.billing.accounts import pool_accounts
from fleet.model.billing.prices import PriceTable, pool_machine
from fleet.model.core.clouds import cloud_rules
from fleet.model.core.clouds.pool_view import pool_views
from fleet.model.core.clouds.rules import PoolView
from fleet.model.core.clusters import Cluster
from fleet.model.core.fleet import Fleet
from fleet.model.core.pools import CARDS_PER_NODE_LABEL, GpuPool
from fleet.report.costs import approximate
from fleet.tools.engine.plan import Finding, StackPlan

PRICE_UNKNOWN = "price unknown"
WIDTH = 118  # wrap the resource lines at this width


def json_money(amount: float | None) -> float | None:
    """An amount per hour for ``plan --json``: the sum of the price table's prices without the float noise of adding
    them (``0.5700000000000001``), to a millionth of the currency."""
    return None if amount is None else round(amount, 6)


@dataclass(frozen=True)
class PoolCost:
    """One node pool of a stack as the plan shows it: what the engine receives, what the policy says about it, and
    what it costs per hour at its maximum (None: the price table does not know the machine)."""

    name: str  # the pool's name without the cluster's prefix (gpu-t4, gpu-l4-x8, system)
    card: str  # empty for the system pool
    machine_type: str
    cards_per_machine: int  # 0 for the system pool
    min_nodes: int
    max_nodes: int
    spot: bool
    sharing: str = ""  # time-slicing-2, mig-1g.10gb; empty: whole cards
    runner: int = 0  # CI jobs the pool's GitLab runner takes at once (0: no runner)
    accounts: tuple[str, ...] = ()  # billing accounts of its GPU time, the cluster's first
    machine_per_hour: float | None = None
    smallest_request: int = 0  # the fewest cards a job on the pool asks for (0: no job)

    @property
    def per_hour_at_max(self) -> float | None:
        """``max_nodes`` x the machine's price per hour."""
        return None if self.machine_per_hour is None else self.max_nodes * self.machine_per_hour

    @property
    def cards_at_max(self) -> int:
        """Cards the pool holds at its maximum."""
        return self.max_nodes * self.cards_per_machine

    def as_dict(self) -> dict[str, Any]:
        """JSON form used in ``plan --json`` (``totals``)."""
        return {**asdict(self), "accounts": list(self.accounts), "per_hour_at_max": json_money(self.per_hour_at_max)}


@dataclass
class StackTotals:
    """What one stack (or the whole fleet, summed) would create and cost."""

    name: str
    clusters: int = 1
    pools: int = 0  # GPU pools (sweep pools included); the system pool is not counted
    cards_at_max: int = 0
    jobs: int = 0  # benchmark Jobs and CronJobs, and the pool probes
    runners: int = 0
    sweeps: int = 0  # distributed sweep jobs
    resources: int = 0
    findings: int = 0  # mandatory violations and warnings
    advisory: int = 0
    per_hour_at_max: float = 0.0  # the GPU pools the price table knows
    unpriced_pools: int = 0  # GPU pools it does not
    pool_costs: list[PoolCost] = field(default_factory=list)

    def add(self, other: StackTotals) -> None:
        """Add another stack's totals to these (the fleet's)."""
        for name in ("clusters", "pools", "cards_at_max", "jobs", "runners", "sweeps", "resources", "findings"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.advisory += other.advisory
        self.per_hour_at_max += other.per_hour_at_max
        self.unpriced_pools += other.unpriced_pools

    def as_dict(self) -> dict[str, Any]:
        """JSON form used in ``plan --json`` (``totals``)."""
        out = asdict(self)
        out["per_hour_at_max"] = json_money(self.per_hour_at_max)
        out["pool_costs"] = [p.as_dict() for p in self.pool_costs]
        return out


def _model_pool(cluster: Cluster, view: PoolView) -> GpuPool | None:
    """The policy's pool behind a pool the engine receives (None: the system pool)."""
    if not view.card:
        return None
    return cluster.pool_sized(view.card, view.labels.get(CARDS_PER_NODE_LABEL), ci=view.ci)


def _smallest_request(fleet: Fleet, cluster: Cluster, pool: GpuPool) -> int:
    """The fewest cards one job on ``pool`` asks for: its benchmarks, probe, runner and sweep workers (and the queued
    sweep points the cluster may be given)."""
    asks = [b.workload.spec.accelerators for b in fleet.workload_jobs(cluster) if b.pool == pool]
    asks += [r.accelerators for r in fleet.runners_of(cluster) if r.pool == pool]
    asks += [p.per_node for p in fleet.sweep_points(cluster) if p.pool == pool]
    asks += [p.per_node for p, held in fleet.queued_points_on(cluster) if held == pool]
    return min(asks, default=0)


def pool_costs(plan: StackPlan, fleet: Fleet, prices: PriceTable) -> list[PoolCost]:
    """Every node pool the stack creates, the GPU pools with their sharing, runner, accounts and price."""
    cluster = fleet.cluster(plan.stack)
    out = []
    for view in pool_views(plan.registrations):
        pool = _model_pool(cluster, view)
        short = view.name.removeprefix(f"{cluster.name}-")
        if pool is None:  # the system pool: priced as its machine alone, and left out of the GPU pools' totals
            hourly = prices.hourly(cluster.cloud, view.machine_type, "", view.spot) if view.machine_type else None
            sizes = (view.min_nodes or 0, view.max_nodes or 0)
            out.append(PoolCost(short, "", view.machine_type, 0, *sizes, view.spot, machine_per_hour=hourly))
            continue
        machine = pool_machine(cluster.cloud, pool)
        runner = next((r for r in fleet.runners_of(cluster) if r.pool == pool), None)
        out.append(
            PoolCost(
                short,
                pool.card,
                view.machine_type,
                pool.accelerators_per_node,
                view.min_nodes or 0,
                view.max_nodes or 0,
                view.spot,
                sharing=machine.sharing,
                runner=runner.concurrency if runner else 0,
                accounts=pool_accounts(fleet, cluster, pool),
                machine_per_hour=prices.hourly(cluster.cloud, view.machine_type, machine.accelerator_type, view.spot),
                smallest_request=_smallest_request(fleet, cluster, pool),
            )
        )
    return out


def stack_totals(plan: StackPlan, fleet: Fleet, prices: PriceTable) -> StackTotals:
    """The totals of one planned stack."""
    cluster = fleet.cluster(plan.stack)
    costs = pool_costs(plan, fleet, prices)
    gpu = [p for p in costs if p.card]
    return StackTotals(
        plan.stack,
        pools=len(gpu),
        cards_at_max=sum(p.cards_at_max for p in gpu),
        jobs=len(fleet.workload_jobs(cluster)),
        runners=len(fleet.runners_of(cluster)),
        sweeps=len(fleet.sweep_points(cluster)),
        resources=len(plan.registrations),
        findings=sum(1 for f in plan.findings if f.level != "advisory"),
        advisory=sum(1 for f in plan.findings if f.level == "advisory"),
        per_hour_at_max=sum(p.per_hour_at_max or 0.0 for p in gpu),
        unpriced_pools=sum(1 for p in gpu if p.per_hour_at_max is None),
        pool_costs=costs,
    )


def fleet_totals(totals: list[StackTotals]) -> StackTotals:
    """The stacks' totals summed: the fleet's."""
    out = StackTotals("fleet", clusters=0)
    for t in totals:
        out.add(t)
    return out


def _table(rows: list[list[str]], indent: str = "    ") -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [indent + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]


def money(value: float | None, currency: str = "") -> str:
    """A price per hour to two significant digits (``2.8 USD/h`` with ``currency``), or ``price unknown``."""
    if value is None:
        return PRICE_UNKNOWN
    return f"{approximate(value, 2)} {currency}/h" if currency else approximate(value, 2)


def _counts(label: str, counts: Counter[str]) -> list[str]:
    text = f"{label}: " + ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items()))
    return textwrap.wrap(text, WIDTH, initial_indent="  ", subsequent_indent="    ")


def render_stack(plan: StackPlan, fleet: Fleet, prices: PriceTable, totals: StackTotals | None = None) -> str:
    """The plan of one stack as text: its pools with sharing, runner, billing account and price per hour at their
    maximum, a note for each pool whose smallest job starts a whole multi-card machine, and its resources counted by
    type in two lines. Findings are not here: :func:`render_findings` shows every stack's once."""
    cluster = fleet.cluster(plan.stack)
    totals = totals or stack_totals(plan, fleet, prices)
    role = ", central Prometheus" if cluster.central else ""
    lines = [
        f"== {plan.stack} ({cluster.facts.title}, {cluster.location or 'no location'}{role}): "
        f"{len(plan.registrations)} resources, planned in {plan.seconds:.2f} s"
    ]
    currency = prices.currency
    if totals.pool_costs:
        header = ["pool", "card", "machine", "cards", "nodes", "spot", "sharing", "CI runner", "billed to"]
        rows = [[*header, f"{currency}/h a machine", f"{currency}/h at max"]]
        for p in totals.pool_costs:
            rows.append(
                [
                    p.name,
                    p.card or "-",
                    p.machine_type,
                    str(p.cards_per_machine) if p.card else "-",
                    f"{p.min_nodes}-{p.max_nodes}",
                    "yes" if p.spot else "no",
                    p.sharing or "-",
                    f"{p.runner} at once" if p.runner else "-",
                    ", ".join(p.accounts) or "-",
                    money(p.machine_per_hour),
                    money(p.per_hour_at_max),
                ]
            )
        lines += _table(rows, indent="  ")
    elif cluster.pools:  # an existing cluster: the site's nodes of each card, as validate lists them
        cards = ", ".join(
            f"{p.card} ({', '.join(f'{k}={v}' for k, v in p.node_selector.items())})" for p in cluster.pools
        )
        lines.append(f"  no node pools created: the site's own nodes run the jobs (not priced): {cards}")
    else:
        lines.append("  no node pools: the cluster's own nodes run the jobs (not priced)")
    for p in totals.pool_costs:
        if p.card and 0 < p.smallest_request < p.cards_per_machine:
            lines.append(
                f"  note: {p.name}: a job asking for {p.smallest_request} card(s) starts a whole {p.machine_type} of "
                f"{p.cards_per_machine} cards, {money(p.machine_per_hour, currency)}"
            )
    cloud = Counter(r.type.rsplit(":", 1)[-1] for r in plan.registrations if not r.type.startswith("kubernetes:"))
    kinds = Counter(r.type.rsplit(":", 1)[-1] for r in plan.registrations if r.type.startswith("kubernetes:"))
    if cloud:
        lines += _counts("cloud and Pulumi", cloud)
    if kinds:
        lines += _counts("Kubernetes", kinds)
    return "\n".join(lines)


def _named(stack: str) -> re.Pattern[str]:
    """``stack`` as a whole name in a message (not inside a longer name)."""
    return re.compile(rf"(?<![\w.-]){re.escape(stack)}(?![\w-])")


def render_findings(plans: list[StackPlan], input_warnings: Sequence[str] = ()) -> str:
    """Every stack's findings, once each: a message that differs between stacks only by the stack's name is shown
    once, with ``<stack>`` for the name and the stacks it concerns; an advisory policy (which may flag every
    container) as one line with its count and first case (``--json`` keeps every finding). The warnings about the
    inputs (policy, stack files: ``FILE:LINE: key: message``) follow the mandatory findings, marked ``input``."""
    grouped: dict[tuple[str, str, str], list[tuple[str, str]]] = {}
    advisory: dict[str, list[tuple[str, Finding]]] = {}
    for plan in plans:
        for f in plan.findings:
            if f.level == "advisory" and f.policy:
                advisory.setdefault(f.policy, []).append((plan.stack, f))
            else:
                text = _named(plan.stack).sub("<stack>", f.message)
                grouped.setdefault((f.level, f.policy, text), []).append((plan.stack, f.message))
    if not grouped and not advisory and not input_warnings:
        return "Findings: none"
    every = [p.stack for p in plans]
    mandatory, rest = ["Findings"], [f"  [warning] input: {line}" for line in input_warnings]
    order = {"mandatory": 0, "warning": 1}
    for (level, policy, text), found in sorted(grouped.items(), key=lambda kv: order.get(kv[0][0], 2)):
        stacks = list(dict.fromkeys(stack for stack, _ in found))
        if len(stacks) == 1:
            text = found[0][1]
        else:
            text += " (every stack)" if stacks == every else f" (stacks {', '.join(stacks)})"
        (mandatory if level == "mandatory" else rest).append(f"  [{level}] {policy + ': ' if policy else ''}{text}")
    lines = mandatory + rest  # mandatory first, then the inputs' warnings and the program's
    for policy, cases in advisory.items():
        first = cases[0][1].message.splitlines()[-1].strip()
        stacks = len({s for s, _ in cases})
        lines.append(f"  [advisory] {policy}: {len(cases)} finding(s) in {stacks} stack(s), such as: {first}")
    return "\n".join(lines)


def render_totals(totals: list[StackTotals], currency: str) -> str:
    """The totals table: one row per stack and one for the fleet."""
    header = ["totals", "clusters", "GPU pools", "cards at max", "jobs", "runners", "sweeps", "resources"]
    header += ["findings", "advisory", f"GPU pools at max ({currency}/h)"]
    rows = [header]
    for t in [*totals, fleet_totals(totals)] if len(totals) > 1 else totals:
        cost = approximate(t.per_hour_at_max, 2) if t.pools > t.unpriced_pools else PRICE_UNKNOWN if t.pools else "-"
        if t.unpriced_pools and t.pools > t.unpriced_pools:
            cost += f" + {t.unpriced_pools} pool(s) {PRICE_UNKNOWN}"
        counts = [t.clusters, t.pools, t.cards_at_max, t.jobs, t.runners, t.sweeps, t.resources, t.findings]
        rows.append([t.name, *map(str, counts), str(t.advisory), cost])
    return "\n".join(_table(rows, indent=""))


def render_plan(plans: list[StackPlan], fleet: Fleet, prices: PriceTable, input_warnings: Sequence[str] = ()) -> str:
    """The whole plan as text: each stack, the findings (the inputs' warnings with them) grouped once, the totals
    last."""
    totals = [stack_totals(p, fleet, prices) for p in plans]
    parts = [render_stack(p, fleet, prices, t) for p, t in zip(plans, totals, strict=True)]
    parts.append(render_findings(plans, input_warnings))
    parts.append(render_totals(totals, prices.currency))
    parts.append(
        f"Prices: {prices.file}, spot for spot pools, else on-demand ({prices.currency}, approximate, dated per "
        "entry); jobs: benchmarks and pool probes. The GPU pools at max are an upper bound: pools scale from their "
        f"minimum.{elsewhere_note(plans, fleet, prices)}"
    )
    return "\n\n".join(parts)


def elsewhere_note(plans: list[StackPlan], fleet: Fleet, prices: PriceTable) -> str:
    """A sentence naming the stacks whose pools are priced with another region's prices (the table holds one region
    per machine, most of them the US list prices of the sample's regions), or nothing when every price is local."""
    elsewhere: dict[str, set[str]] = {}
    for plan in plans:
        cluster = fleet.cluster(plan.stack)
        rules = cloud_rules(cluster.cloud)
        if not rules.builds_pools:
            continue
        here = rules.region_of(cluster.region, cluster.zone)
        for view in pool_views(plan.registrations):
            pool = _model_pool(cluster, view)
            accelerator = pool_machine(cluster.cloud, pool).accelerator_type if pool else ""
            entry = prices.lookup(cluster.cloud, view.machine_type, accelerator) if view.machine_type else None
            if entry is not None and entry.region and entry.region != here:
                elsewhere.setdefault(f"{cluster.name} ({here})", set()).add(entry.region)
    if not elsewhere:
        return ""
    said = "; ".join(f"{stack} at {', '.join(sorted(regions))}'s" for stack, regions in sorted(elsewhere.items()))
    return (
        f" Each price is the list price of the region its entry names, not the pool's, and prices differ by region: "
        f"{said}."
    )


def totals_json(plans: list[StackPlan], fleet: Fleet, prices: PriceTable) -> dict[str, Any]:
    """The totals for ``plan --json``: per stack (with each pool's cost) and for the fleet."""
    totals = [stack_totals(p, fleet, prices) for p in plans]
    return {
        "currency": prices.currency,
        "prices": prices.file,
        "stacks": [t.as_dict() for t in totals],
        "fleet": {k: v for k, v in fleet_totals(totals).as_dict().items() if k != "pool_costs"},
    }
