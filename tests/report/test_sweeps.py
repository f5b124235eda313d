"""fleet/report/sweeps.py on answers written here: time per epoch is the slowest worker's, a point's pods and restart
attempts add up, speed-ups and efficiencies are against the smallest point, costs use the policy's sweep point."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet.model.core.workloads import load_workloads
from fleet.model.loader import load_fleet
from fleet.report.costs import load_prices
from fleet.report.queries import Window
from fleet.report.sweeps import sweep_queries, sweep_rows
from tests.helpers import FIXTURE_WORKLOADS

WORKLOAD = load_workloads(FIXTURE_WORKLOADS)["sweeper"]
POLICY = """\
clusters:
  gcp:
    gke-r:
      zone: us-central1-a
      central: true
      gpus: [l4]
workloads:
  sweeper: {gpus: [l4], scale: [1, 2, 8]}
"""


def sample(n: int, worker: int, attempt: int, value: float, pod: str = "p") -> dict:
    labels = {"cluster": "gke-r", "cloud": "gcp", "gpu": "l4", "accelerators": str(n), "worker": str(worker)}
    return {
        "metric": {**labels, "attempt": str(attempt), "pod": f"{pod}-{n}-{worker}-{attempt}"},
        "value": [0, str(value)],
    }


@pytest.fixture
def fleet(tmp_path: Path):
    path = tmp_path / "fleet.yaml"
    path.write_text(POLICY, encoding="utf-8")
    return load_fleet(path, FIXTURE_WORKLOADS)


def test_queries_keep_each_pod_apart():
    for query in sweep_queries(WORKLOAD, Window(0, 3600)).values():
        assert "pod" in query.split("max by (", 1)[1].split(")", 1)[0]
        assert 'workload="sweeper"' in query and "[3600s]" in query


def test_rows_add_attempts_and_pods_and_compare_with_the_smallest_point(fleet):
    seconds = [
        sample(1, 0, 0, 300.0),  # 3 epochs of 100 s
        sample(2, 0, 0, 50.0),  # attempt 0: 1 epoch of 50 s, then a restart
        sample(2, 0, 1, 110.0),  # attempt 1: 2 epochs of 55 s
        sample(2, 1, 0, 52.0),
        sample(2, 1, 1, 104.0),
        sample(8, 0, 0, 40.0),  # a Kueue re-admission: two pods of the same attempt, 2 epochs each
        sample(8, 0, 0, 40.0, pod="q"),
    ]
    epochs = [
        sample(1, 0, 0, 3),
        sample(2, 0, 0, 1),
        sample(2, 0, 1, 2),
        sample(2, 1, 0, 1),
        sample(2, 1, 1, 2),
        sample(8, 0, 0, 2),
        sample(8, 0, 0, 2, pod="q"),
    ]
    rows = {
        r.accelerators: r for r in sweep_rows(WORKLOAD, {"seconds": seconds, "epochs": epochs}, fleet, load_prices())
    }
    assert rows[1].seconds_per_epoch == 100.0 and rows[1].speedup == 1.0 and rows[1].restarts == 0
    # worker 0: 160 s over 3 epochs; worker 1: 156 s over 3: the slower sets the pace
    assert rows[2].seconds_per_epoch == pytest.approx(160 / 3) and rows[2].epochs == 3 and rows[2].restarts == 1
    assert rows[2].speedup == pytest.approx(100 / (160 / 3))
    assert rows[2].efficiency == pytest.approx(rows[2].speedup / 2)
    assert rows[8].epochs == 4 and rows[8].seconds_per_epoch == 20.0  # both pods counted, not the larger
    assert rows[8].efficiency == pytest.approx(5.0 / 8)
    # machines and costs from the policy's sweep points: 8 L4 on one g2-standard-96
    assert (rows[8].machine, rows[8].nodes) == ("g2-standard-96 + nvidia-l4", 1)
    price = load_prices().lookup("gcp", "g2-standard-96", "nvidia-l4")
    assert price is not None and rows[8].cost_per_epoch == pytest.approx(20.0 / 3600 * price.spot)


def test_a_point_the_policy_does_not_have_gets_no_machine_or_cost(fleet):
    answers = {
        "seconds": [sample(1, 0, 0, 10.0), sample(4, 0, 0, 5.0)],
        "epochs": [sample(1, 0, 0, 1), sample(4, 0, 0, 1)],
    }
    rows = {r.accelerators: r for r in sweep_rows(WORKLOAD, answers, fleet, load_prices())}
    assert rows[4].machine is None and rows[4].cost_per_epoch is None and rows[4].speedup == 2.0
