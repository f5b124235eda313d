"""fleet/report/accounting.py on answers written here: card-hours merged per (account, pool), who pays the idle
cards, the machine's price per card, and the integrals' subquery."""

from __future__ import annotations

from pathlib import Path

from fleet.model.spec import load_fleet
from fleet.report.accounting import accounting_queries, accounting_rows, lost_query
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
        "sum by (billing_account, cluster, cloud, gpu, pool) (sum_over_time(gpufleet:billed_cards[3570000ms:60s]))"
        " * 60 / 3600"
    )
    assert queries["lost_pods"] == "max by (cluster, namespace, pod) (max_over_time(gpufleet:pod_preempted[3600s]))"


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
    assert r'sum_over_time(gpufleet:pod_used_cards{pod=~"p\\-3|p1\\.x"}[3570000ms:60s])' in query
    assert query.endswith(
        "group_left () max by (cluster, namespace, pod) (max_over_time(gpufleet:pod_preempted[3600s]))) * 60 / 3600"
    )
    assert lost_query(window, 60, pods[2:]) is None and lost_query(window, 60, []) is None


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
