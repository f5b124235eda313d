"""The report at fleet scale (issue #32): the queries it sends do not grow with the clusters, and over more cards
than a plot draws one by one (``CARDS_PER_PLOT``) it asks for each card type's spread instead of every card's series.
Counted against a fake Prometheus client that answers every query with one series per card of N clusters."""

from __future__ import annotations

import io
import re
import zlib
from typing import Any

import pytest

from fleet.model.core.workloads import load_workloads
from fleet.model.loader import load_fleet
from fleet.model.probes.probe_phases import PHASES
from fleet.report.costs import load_prices
from fleet.report.gather import count_queries, gather
from fleet.report.progress import Progress
from fleet.report.queries import CARDS_PER_PLOT, SPREAD_STATS, Window
from tests.conftest import FIXTURES

FLEET = FIXTURES / "fleet"
GPUS = ("t4", "l4", "a100", "h100", "v100", "p100", "a10g", "l40s")
WINDOW = Window(1_700_000_000.0, 1_700_000_000.0 + 7 * 86400)


def value(promql: str, cluster: str, gpu: str, workload: str = "") -> int:
    """A number that tells the query, the card and the workload apart (so an answer put in the wrong place shows)."""
    return 1 + zlib.crc32(f"{promql}|{cluster}|{gpu}|{workload}".encode()) % 997


class FakeClient:
    """Stands in for ``PrometheusClient``: every query, whatever it asks, is answered with one series per card of
    ``clusters`` clusters of 8 cards (the labels every section reads), and recorded."""

    display_url = "http://fake-prometheus:9090"

    def __init__(self, clusters: int):
        self.cards = [(f"cluster-{i:03d}", g) for i in range(clusters) for g in GPUS]
        self.sent: list[tuple[str, str]] = []

    @property
    def requests(self) -> int:
        """The requests sent, as the real client counts them."""
        return len(self.sent)

    def _metric(self, cluster: str, gpu: str, **extra: str) -> dict[str, str]:
        return {"cluster": cluster, "cloud": "gcp", "gpu": gpu, "namespace": "benchmarks", "pod": f"p-{cluster}-{gpu}",
                "pool": gpu, "billing_account": "acct", "phase": PHASES[0], "cluster_queue": "q", "worker": "0",
                "accelerators": "1", **extra}  # fmt: skip

    def query(self, promql: str, at: float) -> list[dict[str, Any]]:
        self.sent.append(("query", promql))
        if "gpufleet:gpu_" in promql:  # the GPU pair: one series per workload of the query and card, by workload
            workloads = sorted(set(re.findall(r'workload="([^"]+)"', promql)))
            return [
                {"metric": self._metric(c, g, workload=w), "value": [at, str(value(promql, c, g, w))]}
                for w in workloads
                for c, g in self.cards
            ]
        return [{"metric": self._metric(c, g), "value": [at, str(value(promql, c, g))]} for c, g in self.cards]

    def query_samples(self, promql: str, at: float) -> list[dict[str, Any]]:
        self.sent.append(("samples", promql))
        return [{"metric": self._metric(c, g), "values": [[at - 120, "1"], [at - 60, "2"]]} for c, g in self.cards]

    def query_range(self, promql: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
        self.sent.append(("range", promql))
        if "label_replace(" in promql and '"stat"' in promql:  # the spread: per card type and statistic
            return [{"metric": {"gpu": g, "stat": s}, "values": [[start, "1"], [end, "2"]]} for g in GPUS
                    for s in SPREAD_STATS]  # fmt: skip
        return [{"metric": self._metric(c, g), "values": [[start, "1"], [end, "2"]]} for c, g in self.cards]


def gathered(clusters: int, concurrency: int = 4) -> tuple[FakeClient, Any]:
    fleet = load_fleet(FLEET / "fleet.yaml", FLEET / "workloads")
    workloads = list(load_workloads(FLEET / "workloads").values())
    client = FakeClient(clusters)
    progress = Progress(count_queries(workloads, WINDOW, fleet), io.StringIO())
    report = gather(client, workloads, WINDOW, fleet, load_prices(), progress, concurrency)  # type: ignore[arg-type]
    assert progress.done == len(client.sent)  # every query announced once, from whichever thread sent it
    return client, report


@pytest.mark.parametrize("clusters", [1, 3, 200])
def test_the_queries_sent_do_not_grow_with_the_clusters(clusters: int) -> None:
    """The same queries, by kind, for 1 cluster as for 200 (1,600 cards): every query asks across the fleet, grouped
    by cluster and card; only the time series' query changes, one for one, once the cards no longer fit a plot."""
    small, _ = gathered(1)
    client, report = gathered(clusters)
    assert len(client.sent) == len(small.sent)
    assert sorted(k for k, _ in client.sent) == sorted(k for k, _ in small.sent)  # sent side by side: any order
    # the progress total (what the report announces) is what it sends, the first request (build info) aside
    fleet = load_fleet(FLEET / "fleet.yaml", FLEET / "workloads")
    workloads = list(load_workloads(FLEET / "workloads").values())
    assert len(client.sent) == count_queries(workloads, WINDOW, fleet) - 1
    assert report.sections and all(len(s.rows) == 8 * clusters for s in report.sections)


def test_over_more_cards_than_a_plot_draws_the_report_asks_for_each_card_types_spread() -> None:
    clusters = CARDS_PER_PLOT // len(GPUS) + 1  # just over
    client, report = gathered(clusters)
    ranges = [q for kind, q in client.sent if kind == "range"]
    assert ranges and all('"stat", "median"' in q and "quantile by (gpu) (0.5," in q for q in ranges)
    for section in report.sections:
        assert section.at_fleet_scale and not section.series
        assert set(section.spread) == set(GPUS)
        assert all(set(stats) == set(SPREAD_STATS) for stats in section.spread.values())
        assert ("series per card type", section.queries.spread) in section.listing()


def test_up_to_cards_per_plot_every_card_keeps_its_series() -> None:
    clusters = CARDS_PER_PLOT // len(GPUS)  # exactly at the limit
    client, report = gathered(clusters)
    ranges = [q for kind, q in client.sent if kind == "range"]
    assert ranges and not any("label_replace(" in q for q in ranges)
    for section in report.sections:
        assert not section.at_fleet_scale and not section.spread
        assert len(section.series) == len(section.rows) == 8 * clusters
        assert ("series", section.queries.series) in section.listing()


def test_the_report_is_the_same_sent_one_at_a_time_or_several() -> None:
    """Queries sent side by side (fleet/report/query_pool.py) give the report the same rows, in the same order, as
    sent one after the other."""

    def shown(report: Any) -> Any:
        return (
            [(s.name, s.rows, s.spread, s.series, s.no_data) for s in report.sections],
            report.probes,
            report.phases,
            report.runners,
            report.sweeps,
            report.accounting,
            report.queues,
        )

    one_by_one, before = gathered(3, concurrency=1)
    side_by_side, after = gathered(3, concurrency=8)
    assert sorted(one_by_one.sent) == sorted(side_by_side.sent)
    assert shown(before) == shown(after)
    # every answer where it belongs: each row's numbers are its own query's answer for its card (and workload)
    for section in after.sections:
        queries = section.queries
        for row in section.rows:
            card = (row.cluster, row.gpu)
            assert row.result == value(queries.result, *card) and row.best == value(queries.best, *card)
            assert row.pods == value(queries.pods, *card)
            assert row.gpu_utilization == value(queries.gpu_utilization, *card, section.name)
            assert row.gpu_energy_joules == value(queries.gpu_energy, *card, section.name)
