"""The plan as a decision aid (fleet/tools/engine/summary.py) on the tests' own fleet (tests/fixtures/plan): each pool's
price at its maximum from the price table, the totals per stack and for the fleet, the note on a machine that a
one-card job starts whole, the findings grouped once, and ``plan --json``'s added totals. Every expected number is
computed here from the policy and the price table, not copied from the output."""

from __future__ import annotations

import json

import pytest

from fleet.model.billing.prices import PriceTable
from fleet.model.loader import load_fleet
from fleet.report.costs import approximate, load_prices
from fleet.tools.cli import main
from fleet.tools.engine.plan import Finding, StackPlan, plan_fleet
from fleet.tools.engine.summary import (
    PRICE_UNKNOWN,
    fleet_totals,
    pool_costs,
    render_findings,
    render_plan,
    stack_totals,
)
from tests.conftest import FIXTURES

FLEET_DIR = FIXTURES / "plan"
POLICY = FLEET_DIR / "fleet.yaml"
STACKS = FLEET_DIR / "stacks"
WORKLOADS = FIXTURES / "fleet" / "workloads"
ARGS = ["--policy", str(POLICY), "--stacks-dir", str(STACKS), "--workloads-dir", str(WORKLOADS)]


@pytest.fixture(scope="module")
def fleet():
    return load_fleet(POLICY, WORKLOADS)


@pytest.fixture(scope="module")
def plans(fleet):
    return plan_fleet(fleet, POLICY, stacks_dir=STACKS, workloads_dir=WORKLOADS)


@pytest.fixture(scope="module")
def prices():
    return load_prices()


def expected_hourly(cluster, pool, prices):
    """A pool machine's price per hour straight from the price table's entry (spot for spot pools)."""
    accelerator = pool.offer.accelerator_type if pool.offer else ""
    entry = prices.entries.get((cluster.cloud, pool.machine_type, accelerator)) or prices.entries.get(
        (cluster.cloud, pool.machine_type, "")
    )
    if entry is None:
        return None
    return entry.spot if pool.spot else entry.on_demand


def test_each_pool_costs_its_maximum_times_its_machines_price(fleet, plans, prices):
    priced = unpriced = 0
    for plan in plans:
        cluster = fleet.cluster(plan.stack)
        costs = {p.name: p for p in stack_totals(plan, fleet, prices).pool_costs}
        assert {n for n, p in costs.items() if p.card} == {p.name for p in cluster.all_pools}
        for pool in cluster.all_pools:
            shown = costs[pool.name]
            hourly = expected_hourly(cluster, pool, prices)
            assert shown.machine_per_hour == hourly, pool.name
            assert shown.per_hour_at_max == (None if hourly is None else pool.max_nodes * hourly)
            assert shown.cards_at_max == pool.max_nodes * pool.accelerators_per_node
            assert shown.sharing == (pool.sharing.name if pool.sharing else "")
            priced += hourly is not None
            unpriced += hourly is None
    assert priced and unpriced, "the fixture fleet must have pools with and without a price"


def test_the_totals_per_stack_and_for_the_fleet_add_up(fleet, plans, prices):
    totals = [stack_totals(p, fleet, prices) for p in plans]
    for plan, t in zip(plans, totals, strict=True):
        cluster = fleet.cluster(plan.stack)
        assert t.pools == len(cluster.all_pools)
        assert t.cards_at_max == sum(p.max_nodes * p.accelerators_per_node for p in cluster.all_pools)
        assert t.jobs == len(fleet.benchmarks(cluster)) + len(fleet.probes(cluster))
        assert t.runners == len(fleet.runners_of(cluster))
        assert t.sweeps == len(fleet.sweep_points(cluster))
        assert t.resources == len(plan.registrations)
        hourly = [expected_hourly(cluster, p, prices) for p in cluster.all_pools]
        assert t.per_hour_at_max == pytest.approx(
            sum(p.max_nodes * h for p, h in zip(cluster.all_pools, hourly, strict=True) if h is not None)
        )
        assert t.unpriced_pools == sum(h is None for h in hourly)
    whole = fleet_totals(totals)
    assert whole.clusters == len(fleet.clusters)
    assert whole.cards_at_max == sum(t.cards_at_max for t in totals)
    assert whole.per_hour_at_max == pytest.approx(sum(t.per_hour_at_max for t in totals))
    assert whole.sweeps > 0 and whole.runners > 0, "the fixture fleet sweeps and has a runner"

    text = render_plan(plans, fleet, prices)
    last_table = text.split("\n\n")[-2].splitlines()
    assert last_table[0].startswith("totals")
    fleet_row = last_table[-1].split()
    assert fleet_row[:4] == ["fleet", str(whole.clusters), str(whole.pools), str(whole.cards_at_max)]
    assert approximate(whole.per_hour_at_max, 2) in last_table[-1]
    assert f"{whole.unpriced_pools} pool(s) {PRICE_UNKNOWN}" in last_table[-1]


def test_the_system_pool_row_shows_its_machines_price_outside_the_gpu_totals(fleet, plans, prices):
    """The system pool is priced as its machine (on demand) on its own row; the totals stay the GPU pools' (checked
    above), so pricing it changes no total."""
    priced = 0
    for plan in plans:
        cluster = fleet.cluster(plan.stack)
        for shown in (p for p in stack_totals(plan, fleet, prices).pool_costs if not p.card):
            assert shown.machine_type == cluster.system_pool.machine_type and not shown.spot
            entry = prices.lookup(cluster.cloud, shown.machine_type)
            assert shown.machine_per_hour == (entry.on_demand if entry else None), plan.stack
            assert shown.per_hour_at_max == (None if entry is None else cluster.system_pool.max_nodes * entry.on_demand)
            priced += shown.machine_per_hour is not None
    assert priced, "the fixture fleet must have a system pool whose machine the price table knows"


def _unknown_rows(text: str) -> set[tuple[str, str]]:
    """(stack, pool) of every pool row of the plan's text that says ``price unknown``."""
    out, stack = set(), ""
    for line in text.splitlines():
        if line.startswith("== "):
            stack = line.split()[1]
        elif stack and line.startswith("  ") and not line.startswith("   ") and PRICE_UNKNOWN in line:
            out.add((stack, line.split()[0]))
    return out


def test_the_shipped_fleets_machines_are_all_in_the_price_table(planned_fleets):
    """Every catalogue machine the shipped fleet's pools run on (policy/fleet.yaml with the catalogue) has an entry in
    the price table, and the plan says ``price unknown`` for exactly the pools it cannot price: an entry without a
    price (a site's own flavor, a size the source lists without a price in the cluster's region), or a machine the
    policy chose instead of the catalogue's (``machine_type``), which the table may lack."""
    shipped = next(f for f in planned_fleets if f.name == "sample")
    prices = load_prices()
    without_price = set()
    for stack, plan in shipped.plans.items():
        cluster = shipped.fleet.cluster(stack)
        pools = {p.name: p for p in cluster.all_pools}
        for row in pool_costs(plan, shipped.fleet, prices):
            pool = pools.get(row.name)
            offer = pool.offer if pool is not None else None
            entry = prices.lookup(cluster.cloud, row.machine_type, offer.accelerator_type if offer else "")
            catalogue = offer is not None and row.machine_type in {m.machine_type for m in offer.sizes()}
            assert entry is not None or not catalogue, (
                f"{stack}: pool {row.name} runs on the catalogue's {row.machine_type}, which prices.yaml lacks"
            )
            if entry is None or entry.per_hour(row.spot) is None:
                without_price.add((stack, row.name))
    text = render_plan(list(shipped.plans.values()), shipped.fleet, prices)
    assert _unknown_rows(text) == without_price


def test_a_one_card_job_on_a_machine_of_several_cards_says_what_the_machine_costs(fleet, plans, prices):
    text = render_plan(plans, fleet, prices)
    whole_machines = [
        (cluster, pool)
        for cluster in fleet.clusters.values()
        for pool in cluster.pools
        if pool.accelerators_per_node > 1 and any(b.pool == pool for b in fleet.workload_jobs(cluster))
    ]
    assert whole_machines, "the fixture fleet must have a card whose machine holds several"
    for cluster, pool in whole_machines:
        hourly = expected_hourly(cluster, pool, prices)
        assert hourly is not None, "the fixture's multi-card machine must be priced"
        assert (
            f"note: {pool.name}: a job asking for 1 card(s) starts a whole {pool.machine_type} of "
            f"{pool.accelerators_per_node} cards, {approximate(hourly, 2)} {prices.currency}/h"
        ) in text


def test_each_pool_row_shows_its_runner_and_billing_accounts(fleet, plans, prices):
    for plan in plans:
        cluster = fleet.cluster(plan.stack)
        costs = {p.name: p for p in stack_totals(plan, fleet, prices).pool_costs}
        for runner in fleet.runners_of(cluster):
            assert costs[runner.pool.name].runner == runner.concurrency
        for pool in cluster.all_pools:
            assert costs[pool.name].accounts[0] == cluster.billing_account
    apart = set(fleet.billing_accounts.values())
    assert apart, "the fixture fleet bills a workload apart"
    shown = {a for plan in plans for p in stack_totals(plan, fleet, prices).pool_costs for a in p.accounts}
    assert apart <= shown


def test_findings_are_grouped_once_across_stacks():
    def stack(name: str, *findings: Finding) -> StackPlan:
        return StackPlan(name, [], {}, list(findings))

    shared = "{0}: set it with pulumi config set --stack {0} key value"
    plans = [
        stack("east", Finding("warning", shared.format("east")), Finding("advisory", "case one", "digests")),
        stack("east-2", Finding("warning", shared.format("east-2")), Finding("mandatory", "east-2 is broken", "p")),
        stack("west", Finding("warning", shared.format("west")), Finding("advisory", "case two", "digests")),
    ]
    lines = render_findings(plans).splitlines()
    assert lines[0] == "Findings"
    assert lines[1] == "  [mandatory] p: east-2 is broken"  # mandatory first, a single stack's message as it is
    assert lines[2] == f"  [warning] {shared.format('<stack>')} (every stack)"
    assert lines[3] == "  [advisory] digests: 2 finding(s) in 2 stack(s), such as: case one"
    assert len(lines) == 4
    assert render_findings([stack("east")]) == "Findings: none"
    # the inputs' warnings are shown with the findings, after the mandatory ones, once
    lines = render_findings(plans, ["fleet.yaml:3: clusters.x: a warning"]).splitlines()
    assert lines[1] == "  [mandatory] p: east-2 is broken"
    assert lines[2] == "  [warning] input: fleet.yaml:3: clusters.x: a warning" and len(lines) == 5
    assert render_findings([stack("east")], ["w"]).splitlines() == ["Findings", "  [warning] input: w"]


def test_plan_prints_findings_once_and_ends_with_the_totals_and_json_keeps_its_keys(tmp_path, capsys):
    out = tmp_path / "plan.json"
    assert main(["plan", "--no-policy-pack", *ARGS, "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.count("\nFindings") == 1
    assert "[warning]" not in text.split("\nFindings")[0], "no finding inside a stack's section"
    tail = text.rstrip().split("\n\n")
    assert tail[-3].startswith("totals") and tail[-3].splitlines()[-1].startswith("fleet")
    data = json.loads(out.read_text(encoding="utf-8"))
    assert set(data) == {"stacks", "totals"}
    for stack in data["stacks"]:
        assert set(stack) == {"stack", "resources", "outputs", "findings"}
    assert {s["name"] for s in data["totals"]["stacks"]} == {s["stack"] for s in data["stacks"]}
    assert data["totals"]["fleet"]["cards_at_max"] == sum(s["cards_at_max"] for s in data["totals"]["stacks"])
    assert data["totals"]["currency"] == load_prices().currency
    # amounts to a millionth, without the noise of adding floats (0.5700000000000001 for 3 x 0.19)
    amounts = [s["per_hour_at_max"] for s in data["totals"]["stacks"]] + [
        p["per_hour_at_max"] for s in data["totals"]["stacks"] for p in s["pool_costs"]
    ]
    assert all(a == round(a, 6) for a in amounts if a is not None), amounts


def test_the_plan_says_whose_region_each_price_is_when_it_is_not_the_pools(fleet, plans, prices):
    """The table's prices are the sample's US regions': a fleet in Europe is told whose prices its pools show; with
    every entry's region the pools' own, nothing is said."""
    note = render_plan(plans, fleet, prices).rsplit("Prices: ", 1)[1]
    assert "Each price is the list price of the region its entry names, not the pool's" in note, note
    for stack in ("plan-gke (europe-west4) at us-central1's", "plan-eks (eu-west-1) at us-east-1's"):
        assert stack in note, note
    entries = {key: entry.model_copy(update={"region": ""}) for key, entry in prices.entries.items()}
    local = PriceTable(prices.file, prices.currency, entries)
    assert "Each price" not in render_plan(plans, fleet, local).rsplit("Prices: ", 1)[1]
