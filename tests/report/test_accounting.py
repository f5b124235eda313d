"""fleet/report/accounting.py on answers written here: card-hours merged per (account, pool), who pays the idle
cards, the machine's price per card, and the integrals' subquery."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

from fleet.model.billing.accounting_hours import HOUR_END, HOURLY
from fleet.model.loader import load_fleet
from fleet.report.accounting import HOURLY_FROM, accounting_queries, accounting_rows, exact_integral, lost_query
from fleet.report.costs import load_prices
from fleet.report.queries import Window

POLICY = """\
clusters:
  aws:
    eks-a:
      region: us-east-1
      central: true
      billing_account: lab
      gpus: {t4: {sharing: {time_slicing: 4}}}
"""


def answer(value: float, account: str, pool: str = "gpu-t4") -> dict:
    labels = {"billing_account": account, "cluster": "eks-a", "cloud": "aws", "gpu": "t4", "pool": pool}
    return {"metric": labels, "value": [0, str(value)]}


def test_queries_integrate_each_record_at_the_resolution():
    queries = accounting_queries(Window(0, 3600), 60)
    assert queries["billed"] == (
        "sum by (billing_account, cluster, cloud, gpu, pool) (sum_over_time(gpufleet:billed_cards[3599999ms:60s]))"
        " * 60 / 3600"
    )
    assert queries["lost_pods"] == "max by (cluster, namespace, pod) (max_over_time(gpufleet:pod_preempted[3600s]))"


def test_the_points_are_those_in_the_window_wherever_its_ends_fall():
    """One millisecond short of the window, whatever its ends: a window ending 10 s past a minute keeps its 60 points
    (a range half a step short dropped the first)."""
    assert "[3599999ms:60s]" in exact_integral(Window(10.5, 3610.5), 60, "x")


def test_long_windows_sum_the_hourly_records_and_integrate_the_edges():
    window = Window(1000.0, 1000.0 + HOURLY_FROM)
    billed = accounting_queries(window, 60)["billed"]
    whole = f"[{(HOURLY_FROM - 3600) * 1000}ms] @ {window.end:.3f}"
    assert f"sum_over_time({HOURLY['gpufleet:billed_cards']}{whole})" in billed
    assert f"scalar(min_over_time({HOUR_END}{whole})) - 3600))[3599999ms:60s] @ 4600.000)" in billed  # the 1st hour
    assert f"scalar(max_over_time({HOUR_END}{whole}))))[3599999ms:60s] @ {window.end:.3f})" in billed  # the last
    assert billed.count("label_replace(") == 3
    # shorter windows, or a resolution that does not divide the hour, integrate the raw records
    assert accounting_queries(Window(0, HOURLY_FROM - 1), 60)["billed"] == exact_integral(
        Window(0, HOURLY_FROM - 1), 60, "gpufleet:billed_cards"
    )
    assert "card_hours" not in accounting_queries(window, 70)["billed"]


def test_lost_card_hours_read_only_the_lost_pods():
    window = Window(0, 3600)
    pods = [
        {"metric": {"cluster": "c", "namespace": "benchmarks", "pod": "p-3"}, "value": [3600, "1"]},
        {"metric": {"cluster": "c", "namespace": "benchmarks", "pod": "p1.x"}, "value": [3600, "1"]},
        {"metric": {"cluster": "c", "namespace": "benchmarks", "pod": "p9"}, "value": [3600, "0"]},
    ]
    query = lost_query(window, 60, pods)
    assert query is not None
    # re.escape's backslashes doubled in the PromQL string literal: the regex is p\-3|p1\.x (sorted)
    assert r'sum_over_time(gpufleet:pod_used_cards{pod=~"p\\-3|p1\\.x"}[3599999ms:60s])' in query
    assert query.endswith(
        "group_left () max by (cluster, namespace, pod) (max_over_time(gpufleet:pod_preempted[3600s]))) * 60 / 3600"
    )
    assert lost_query(window, 60, pods[2:]) is None and lost_query(window, 60, []) is None


def test_a_long_windows_lost_card_hours_read_at_most_14_days_a_subquery():
    """Over 180 days one subquery a minute apart took the central at 200 leaves past its memory (Prometheus gives each
    series room for every step): the window is read in subqueries of at most 14 days whose (start, end] tile it."""
    window = Window(1_000_000.25, 1_000_000.25 + 180 * 86400)
    pods = [{"metric": {"cluster": "c", "namespace": "benchmarks", "pod": "p"}, "value": [0, "1"]}]
    query = lost_query(window, 60, pods)
    assert query is not None
    parts = sorted((round(float(end) * 1000) - int(span) - 1, round(float(end) * 1000))
                   for span, end in re.findall(r"\[(\d+)ms:60s\] @ (\d+\.\d+)", query))  # fmt: skip
    assert len(parts) == 13 and all(end - start <= 14 * 86400 * 1000 for start, end in parts)
    assert parts[0][0] == round(window.start * 1000) and parts[-1][1] == round(window.end * 1000)
    assert all(a[1] == b[0] for a, b in itertools.pairwise(parts))
    assert query.count('pod=~"p"') == 13 and query.startswith("sum by (") and "sum without (part)" in query


def test_the_owner_pays_the_idle_cards_and_every_account_its_use(tmp_path: Path):
    path = tmp_path / "fleet.yaml"
    path.write_text(POLICY, encoding="utf-8")
    fleet = load_fleet(path, tmp_path)
    answers = {
        "billed": [answer(10, "lab")],
        "used": [answer(6, "lab"), answer(2, "other")],
        "idle": [answer(2, "lab")],
        "lost": [answer(1, "other"), answer(0, "nobody")],
    }
    rows = {r.billing_account: r for r in accounting_rows(answers, fleet, load_prices())}
    assert set(rows) == {"lab", "other"}  # an account with nothing at all is left out
    lab, other = rows["lab"], rows["other"]
    assert (lab.billed, lab.used, lab.idle, lab.idle_share) == (10, 6, 2, 0.2)
    assert (other.billed, other.used, other.lost, other.idle_share) == (0, 2, 1, None)
    price = load_prices().lookup("aws", "g4dn.xlarge")
    assert price is not None and price.spot is not None
    assert lab.machine == "g4dn.xlarge" and lab.cards == 1  # the physical card, whatever its time slices
    assert lab.cost == (6 + 2) * price.spot and other.cost == 2 * price.spot
    assert lab.cost + other.cost == 10 * price.spot  # the accounts add up to what the cloud bills


def test_a_pool_the_policy_does_not_know_has_no_cost(tmp_path: Path):
    path = tmp_path / "fleet.yaml"
    path.write_text(POLICY, encoding="utf-8")
    fleet = load_fleet(path, tmp_path)
    (row,) = accounting_rows({"used": [answer(3, "lab", pool="gpu-gone")]}, fleet, load_prices())
    assert row.cost is None and row.machine == ""
