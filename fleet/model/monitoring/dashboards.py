"""The fleet's Grafana dashboards, built from the model with Grafana's typed SDK (``grafana-foundation-sdk``).

Four kinds, all on the central cluster's Grafana and querying the central Prometheus (every series carries the leaf's
``cluster`` and ``cloud`` labels, kept by federation):

* **overview** (``gpufleet-overview``): per workload its headline result per card and cluster, the best card, and the
  cost per result (the card-hours its pods used, at the card's price, over the results they produced); the pools'
  cards billed, used and idle; each probed pool's time to first accelerator; the alerts firing;
* **one per workload** (``gpufleet-workload-<name>``): every metric it declares over time per card and cluster, and the
  GPU energy its pods drew;
* **scaling** (``gpufleet-scaling``, when a workload sweeps): per sweeping workload, time per epoch, speed-up and
  parallel efficiency at each accelerator count of its sweep, GPU beside TPU;
* **accounting** (``gpufleet-accounting``): card-hours billed, used and idle, and their cost, per billing account.

Every panel filters on the dashboard's variables ``cluster``, ``cloud``, ``gpu`` (and the overview's ``workload``),
whose values are the policy's; "All" is the regular expression ``.*``. Ranges are Grafana's ``$__range`` (the time
picker's span), so a panel's number is the same as the report's over the same window.

Everything here is data: :func:`fleet_dashboards` returns plain dicts (the dashboards' JSON), whose queries
fleet/model/monitoring/grafana.py ``panel_queries`` lists for the tests to evaluate against a real Prometheus.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from grafana_foundation_sdk.builders import stat, statetimeline, table
from grafana_foundation_sdk.models.common import BigValueTextMode
from grafana_foundation_sdk.models.dashboard import ValueMap, ValueMappingResult

from fleet.model.billing.accounting import BILLED, IDLE, USED
from fleet.model.billing.accounts import fleet_accounts
from fleet.model.core.fleet import Fleet
from fleet.model.core.pod_contract import PROBE_METRICS
from fleet.model.core.workloads import MetricSpec, Workload, runs_counter
from fleet.model.monitoring.grafana import Board, bars, grafana_unit, metric_unit, series, target

#: Central recording rule: the price of one card-hour per (cluster, cloud, gpu), what the machine costs per hour over
#: its cards (a shared card's slice pays its part through the used-card records).
CARD_PRICE = "gpufleet:card_price_per_hour"
PRICE_GROUP = "gpufleet-card-prices"

VARIABLES = ("cluster", "cloud", "gpu")
_FILTER = ",".join(f'{v}=~"${v}"' for v in VARIABLES)
_BY = "cluster, cloud, gpu"
_ACCOUNT = 'billing_account=~"$billing_account"'
_WORKLOAD = 'workload=~"$workload"'
_UID = re.compile(r"[^a-z0-9-]+")


def _filter(extra: str = "") -> str:
    return "{" + ",".join(p for p in (extra, _FILTER) if p) + "}"


def _wl(name: str) -> str:
    return f'workload="{name}"'


def _picked(name: str) -> str:
    """The workload's own series while the overview's Workload variable picks it, none otherwise (only the overview
    has that variable: elsewhere Grafana would leave ``$workload`` unreplaced)."""
    return f"{_wl(name)},{_WORKLOAD}"


def _legend() -> str:
    return "{{gpu}} on {{cluster}} ({{cloud}})"


def result_query(workload: Workload) -> str:
    """Per card: the mean over its pods of each pod's last headline value in the range (the report's "result"), for
    the overview (while its Workload variable picks the workload)."""
    head = workload.spec.headline
    matchers = ",".join([_picked(workload.name), *(f'{k}="{v}"' for k, v in sorted(head.match.items()))])
    return f"avg by ({_BY}) (last_over_time({head.metric}{_filter(matchers)}[$__range]))"


def cost_per_result_query(workload: Workload) -> str | None:
    """Per card: what the card-hours the workload's pods used in the range cost, over the results they produced
    (None when the workload counts no results)."""
    counter = runs_counter(workload.spec)
    if counter is None:
        return None
    used = f"{USED}{_filter(_picked(workload.name))}"
    cost = f"sum by ({_BY}) (sum_over_time(({used} * on ({_BY}) group_left () {CARD_PRICE})[$__range:1m])) / 60"
    runs = f"sum by ({_BY}) (max_over_time({counter}{_filter(_picked(workload.name))}[$__range]))"
    return f"({cost}) / ({runs} > 0)"


#: A pool's state in the overview's pool panel: the value its query gives, the word and colour Grafana shows for it.
POOL_STATES = {0: ("at zero", "blue"), 1: ("idle", "orange"), 2: ("busy", "green")}


def pool_state_query() -> str:
    """Per pool (cluster, cloud, card, pool): 2 while a running pod uses one of its cards (busy), 1 while it has nodes
    up and no pod uses them (idle), 0 with no node (at zero). Every pool has a billed series (0 at zero nodes); used
    ones exist only where pods ran, so a pool without them counts none."""
    by = f"{_BY}, pool"
    billed = f"sum by ({by}) ({BILLED}{_filter()})"
    used = f"sum by ({by}) ({USED}{_filter()})"
    return f"({billed} > bool 0) + (({used} > bool 0) or {billed} * 0)"


def _pool_states() -> statetimeline.Panel:
    mapping = ValueMap(
        {str(v): ValueMappingResult(text=word, color=colour) for v, (word, colour) in POOL_STATES.items()}
    )
    return (
        statetimeline.Panel()
        .title("Pools: busy, idle or at zero")
        .description(
            "Per GPU pool over time: busy while a running pod uses one of its cards, idle while it has nodes up that "
            "no pod uses (billed for nothing), at zero with no node."
        )
        .mappings([mapping])
        .min(0)
        .max(2)
        .with_target(target(pool_state_query(), "{{pool}} on {{cluster}}"))
    )


def placed_workloads(fleet: Fleet) -> dict[str, Workload]:
    """The workloads the policy runs somewhere, by name (the workloads folder may hold others)."""
    return {name: fleet.workloads[name] for name in sorted(fleet.placements) if name in fleet.workloads}


def _overview(fleet: Fleet, variables: Mapping[str, Sequence[str]]) -> Board:
    board = Board(
        "gpufleet-overview",
        "GPU fleet: overview",
        "Each workload's result per card and cluster, the best card and the cost per result; the pools' cards billed, "
        "used and idle; time to first accelerator; the alerts firing. Built from policy/fleet.yaml.",
        {**variables, "workload": list(placed_workloads(fleet))},
    )
    for name, workload in placed_workloads(fleet).items():
        head = workload.spec.headline
        board.row(f"{name}: {head.metric} ({head.unit}, {'higher' if head.higher_is_better else 'lower'} is better)")
        result = result_query(workload)
        board.add(
            bars(
                f"{name}: result per card ({head.unit})",
                f"Per card and cluster, the mean of each pod's last {head.metric} in the time range.",
                grafana_unit(head.unit),
                [target(result, _legend(), instant=True)],
            ),
            width=10,
        )
        pick = "topk" if head.higher_is_better else "bottomk"
        board.add(
            stat.Panel()
            .title(f"{name}: best card")
            .description(f"The card with the {'highest' if head.higher_is_better else 'lowest'} result in the range.")
            .with_target(target(f"{pick}(1, {result})", _legend(), instant=True))
            .text_mode(BigValueTextMode.VALUE_AND_NAME)
            .unit(grafana_unit(head.unit)),
            width=4,
        )
        cost = cost_per_result_query(workload)
        if cost is not None:
            board.add(
                bars(
                    f"{name}: cost per result (USD)",
                    "Card-hours the workload's pods used in the range, at the card's price per hour, over the results "
                    "they produced (spot prices for spot pools).",
                    "currencyUSD",
                    [target(cost, _legend(), instant=True)],
                ),
                width=10,
            )
    board.row("Pools")
    board.add(
        series(
            "Cards billed, used and idle",
            "Cards of GPU nodes that are up (billed), requested by running pods of the chosen workloads (used) and "
            "requested by none (idle); a pool at zero nodes counts none.",
            "none",
            [
                target(f"sum({BILLED}{_filter()})", "billed", "A"),
                target(f"sum({USED}{_filter(_WORKLOAD)})", "used", "B"),
                target(f"sum({IDLE}{_filter()})", "idle", "C"),
            ],
        )
    )
    board.add(_pool_states())
    scale_up = PROBE_METRICS[0]
    board.add(
        bars(
            "Time to first accelerator (last probe)",
            "Per probed pool, how long the latest probe pod waited from its creation until it ran on a card.",
            "s",
            [target(f"max by ({_BY}) (last_over_time({scale_up}{_filter()}[$__range]))", _legend(), instant=True)],
        )
    )
    board.row("Alerts")
    board.add(
        table.Panel()
        .title("Alerts firing")
        .description("The central Prometheus' alerts that fire now, by name and cluster.")
        .with_target(target('count by (alertname, cluster, severity) (ALERTS{alertstate="firing"})', "", instant=True)),
        width=24,
    )
    return board


def _metric_expr(workload: Workload, metric: MetricSpec) -> tuple[str, str]:
    selector = f"{{__name__}}{_filter(_wl(workload.name))}"
    if metric.type == "counter":
        rate = selector.replace("{__name__}", metric.name)
        return f"sum by ({_BY}) (rate({rate}[$__rate_interval]))", f"{metric.name}, per second"
    if metric.type == "histogram":
        buckets = selector.replace("{__name__}", f"{metric.name}_bucket")
        expr = f"histogram_quantile(0.5, sum by ({_BY}, le) (rate({buckets}[$__rate_interval])))"
        return expr, f"{metric.name}, median"
    return f"max by ({_BY}) ({selector.replace('{__name__}', metric.name)})", metric.name


def _workload_board(workload: Workload, variables: Mapping[str, Sequence[str]]) -> Board:
    board = Board(
        f"gpufleet-workload-{_UID.sub('-', workload.name.lower())}",
        f"GPU fleet: {workload.name}",
        workload.spec.description.strip(),
        variables,
    )
    board.row("Metrics per card and cluster")
    for metric in workload.spec.metrics:
        expr, title = _metric_expr(workload, metric)
        unit = metric_unit(metric.name, rate=metric.type == "counter")
        board.add(series(title, metric.help, unit, [target(expr, _legend())]))
    board.row("Energy")
    energy = (
        f'sum by ({_BY}) (increase(gpufleet:gpu_energy_joules:sum{{cluster=~"$cluster",cloud=~"$cloud"}}[$__range])'
        f" * on (cluster, namespace, pod) group_left (gpu) group by (cluster, namespace, pod, gpu) "
        f"(last_over_time({workload.spec.headline.metric}{_filter(_wl(workload.name))}[$__range])))"
    )
    board.add(
        bars(
            "GPU energy of the benchmark's pods",
            "Joules the cards drew while the workload's pods ran on them in the range (dcgm-exporter; none where the "
            "cloud exposes no power reading).",
            "joule",
            [target(energy, _legend(), instant=True)],
        ),
        width=24,
    )
    return board


def epoch_seconds_query(workload: Workload, extra: str = "") -> str:
    """Per (card, accelerators): the slowest worker's seconds per epoch over the range, its attempts summed."""
    dist = workload.spec.distributed
    assert dist is not None
    point = f"{_BY}, accelerators"
    sel = _filter(",".join(p for p in (_wl(workload.name), extra) if p))

    def per_worker(metric: str) -> str:
        return f"sum by ({point}, worker) (max_over_time({metric}{sel}[$__range]))"

    return f"max by ({point}) ({per_worker(dist.epoch_seconds)} / {per_worker(dist.epochs)})"


def card_points(fleet: Fleet, workload: str) -> dict[str, tuple[int, ...]]:
    """Per card, the accelerator counts the workload's sweep runs on it (per cluster or through a queue): a TPU of
    whole 4-chip hosts lacks the counts between."""
    points: dict[str, set[int]] = {}
    placed = [p for cs in fleet.sweeps.values() for p in cs.points] + list(fleet.queued_sweeps.points)
    for point in placed:
        if point.workload.name == workload:
            points.setdefault(point.card, set()).add(point.accelerators)
    return {card: tuple(sorted(counts)) for card, counts in sorted(points.items())}


def _by_base(points: Mapping[str, tuple[int, ...]]) -> dict[int, list[str]]:
    """The cards by their smallest accelerator count, the point each card's speed-up is measured from."""
    bases: dict[int, list[str]] = {}
    for card, counts in points.items():
        bases.setdefault(counts[0], []).append(card)
    return dict(sorted(bases.items()))


def scaling_queries(workload: Workload, points: Mapping[str, tuple[int, ...]], n: int) -> tuple[str, str] | None:
    """The speed-up and parallel efficiency at ``n`` accelerators, each card measured from its own smallest count
    (as the report does): per group of cards of one smallest count ``b``, the time per epoch at ``b`` over the time
    at ``n``, and that over ``n / b``. None when no card has a smallest count at or below ``n``."""
    speedups, efficiencies = [], []
    at_n = epoch_seconds_query(workload, f'accelerators="{n}"')
    for base, cards in _by_base(points).items():
        if base > n:
            continue
        card_matcher = "|".join(cards)
        at_base = epoch_seconds_query(workload, f'accelerators="{base}",gpu=~"{card_matcher}"')
        speedup = f"({at_base}) / ignoring (accelerators) ({at_n})"
        speedups.append(speedup)
        efficiencies.append(f"({speedup}) / {n / base:g}")
    if not speedups:
        return None
    return " or ".join(f"({q})" for q in speedups), " or ".join(f"({q})" for q in efficiencies)


def _sweeps(fleet: Fleet, variables: Mapping[str, Sequence[str]]) -> Board | None:
    sweeping = [w for n, w in placed_workloads(fleet).items() if n in fleet.sweep_counts]
    if not sweeping:
        return None
    board = Board(
        "gpufleet-scaling",
        "GPU fleet: scaling sweeps",
        "Time per epoch, speed-up and parallel efficiency of each sweeping workload at every accelerator count of its "
        "sweep, per card and cluster (GPU beside TPU).",
        variables,
    )
    for workload in sweeping:
        points = card_points(fleet, workload.name) or {"": tuple(sorted(fleet.sweep_counts[workload.name]))}
        counts = sorted({n for c in points.values() for n in c})
        board.row(f"{workload.name}: sweep of {', '.join(map(str, counts))} accelerators")
        per_epoch = epoch_seconds_query(workload)
        board.add(
            bars(
                f"{workload.name}: seconds per epoch",
                "The slowest worker's time per epoch (the workers step together) at each accelerator count.",
                "s",
                [target(per_epoch, "{{gpu}} on {{cluster}} x{{accelerators}}", instant=True)],
            ),
            width=8,
        )
        speedups, efficiencies = [], []
        for n in counts:
            queries = scaling_queries(workload, points, n)
            if queries is None:
                continue
            ref, legend = chr(ord("A") + len(speedups)), f"{{{{gpu}}}} on {{{{cluster}}}} x{n}"
            speedups.append(target(queries[0], legend, ref, instant=True))
            efficiencies.append(target(queries[1], legend, ref, instant=True))
        bases = ", ".join(f"{b} for {', '.join(cards)}" for b, cards in _by_base(points).items() if all(cards))
        board.add(
            bars(
                f"{workload.name}: speed-up over the smallest count",
                "Each card's time per epoch at its smallest accelerator count"
                + (f" ({bases})" if bases else "")
                + " over its time at each count (linear scaling: the count over the smallest).",
                "none",
                speedups,
            ),
            width=8,
        )
        board.add(
            bars(
                f"{workload.name}: parallel efficiency",
                "Speed-up over the ratio of accelerator counts: 1 is linear scaling.",
                "percentunit",
                efficiencies,
            ),
            width=8,
        )
    return board


def card_hours_query(record: str, by: str = "billing_account") -> str:
    """Card-hours of an accounting record in the range, per ``by``, at one evaluation a minute."""
    return f"sum by ({by}) (sum_over_time({record}{_filter(_ACCOUNT)}[$__range:1m])) / 60"


def _accounting(variables: Mapping[str, Sequence[str]], accounts: Sequence[str]) -> Board:
    board = Board(
        "gpufleet-accounting",
        "GPU fleet: accounting",
        "Card-hours billed (nodes up), used (pods' requests) and idle per billing account, and what they cost at the "
        "cards' prices: each account pays what its workloads used, the pool's owner also the idle cards.",
        {**variables, "billing_account": accounts},
    )
    board.row("Card-hours in the time range")
    targets = [
        target(card_hours_query(record), f"{{{{billing_account}}}} {what}", ref, instant=True)
        for ref, record, what in (("A", BILLED, "billed"), ("B", USED, "used"), ("C", IDLE, "idle"))
    ]
    board.add(bars("Card-hours per billing account", "Billed, used and idle card-hours.", "h", targets))
    # used series carry their workload, idle ones do not: `or` keeps both, each at its card's price
    priced = " or ".join(f"({r}{_filter(_ACCOUNT)} * on ({_BY}) group_left () {CARD_PRICE})" for r in (USED, IDLE))
    cost = f"sum by (billing_account) (sum_over_time(({priced})[$__range:1m])) / 60"
    board.add(
        bars(
            "Cost per billing account (USD)",
            "Used card-hours, and for a pool's owner the idle ones, at the card's price per hour.",
            "currencyUSD",
            [target(cost, "{{billing_account}}", instant=True)],
        )
    )
    board.row("Cards over time")
    board.add(
        series(
            "Idle cards per pool",
            "Cards billed but not requested by a running pod.",
            "none",
            [target(f"sum by (cluster, pool) ({IDLE}{_filter(_ACCOUNT)})", "{{pool}} on {{cluster}}")],
        ),
        width=24,
    )
    return board


def fleet_dashboards(fleet: Fleet) -> dict[str, dict[str, Any]]:
    """Every dashboard of the fleet as Grafana JSON, by file name (``<uid>.json``)."""
    pools = [(c, p) for c in fleet.clusters.values() for p in c.all_pools]
    variables = {
        "cluster": sorted({c.name for c, _ in pools}),
        "cloud": sorted({c.cloud for c, _ in pools}),
        "gpu": sorted({p.card for _, p in pools}),
    }
    accounts = fleet_accounts(fleet)
    boards = [
        _overview(fleet, variables),
        *(_workload_board(w, variables) for w in placed_workloads(fleet).values()),
        _sweeps(fleet, variables),
        _accounting(variables, accounts),
    ]
    return {f"{b.uid}.json": b.json() for b in boards if b is not None}


def price_rules(prices: Mapping[tuple[str, str, str], float]) -> dict[str, Any]:
    """The central's card-price records: per (cluster, cloud, gpu) its price per card-hour, a rule group of
    ``vector()`` constants like the probe expectations (what the dashboards' cost panels join on)."""
    if not prices:
        raise ValueError("no priced card: leave the price rules out")
    rules = [
        {
            "record": CARD_PRICE,
            "expr": f"vector({price!r})",
            "labels": {"cluster": cluster, "cloud": cloud, "gpu": gpu},
        }
        for (cluster, cloud, gpu), price in sorted(prices.items())
    ]
    return {"groups": [{"name": PRICE_GROUP, "rules": rules}]}
