"""The report over more cards than a plot draws one by one (``CARDS_PER_PLOT``), against a real Prometheus holding an
hour of a headline metric whose values are known (fleet/report/queries.py ``spread``, fleet/report/plots.py).

13 clusters each run the fixture workload ``fitter`` on two cards (26 cards, over the 24 a plot draws one by one):
on ``t4`` cluster i reports 100 + i all hour, so at every step the lowest card is 100, the median 106 and the highest
112; on ``l4`` it reports 50 + 2i from minute 30 only, so the l4 spread (50, 62, 74) starts half-way and holds
nothing before. The table keeps all 26 cards with their own results."""

from __future__ import annotations

import io
import time
from pathlib import Path
from typing import Any

import pytest

from fleet.model.core.workloads import load_workloads
from fleet.report.costs import load_prices
from fleet.report.gather import gather
from fleet.report.progress import Progress
from fleet.report.prometheus_api import PrometheusClient
from fleet.report.queries import CARDS_PER_PLOT, Window
from fleet.report.write import write_report
from tests.conftest import FIXTURES, require_tool
from tests.e2e.processes import PATIENCE_S, Prometheus, patience, wait_for
from tests.e2e.support import blocks_from_openmetrics, markdown_tables, png_size

pytestmark = pytest.mark.e2e

CLUSTERS = 13
STEP = 60
WORKLOADS = FIXTURES / "fleet" / "workloads"
# card -> (value of cluster i, first minute with samples)
CARDS = {"t4": (lambda i: 100 + i, 0), "l4": (lambda i: 50 + 2 * i, 30)}
EXPECTED = {"t4": {"min": 100, "median": 106, "max": 112}, "l4": {"min": 50, "median": 62, "max": 74}}


def openmetrics(start: int) -> str:
    """The headline of every card, a sample a minute from its first minute to minute 60."""
    lines = ["# TYPE fitter_duration_seconds gauge"]
    for gpu, (value, first) in CARDS.items():
        for i in range(CLUSTERS):
            labels = (f'cloud="gcp",cluster="fleet-{i:02d}",gpu="{gpu}",namespace="benchmarks",'
                      f'pod="fitter-{gpu}-{i}",workload="fitter"')  # fmt: skip
            lines += [f"fitter_duration_seconds{{{labels}}} {value(i)} {start + k * STEP}" for k in range(first, 61)]
    return "\n".join([*lines, "# EOF"]) + "\n"


@pytest.fixture(scope="module")
def fleet_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    promtool, prometheus_exe = require_tool("promtool"), require_tool("prometheus")
    tmp = tmp_path_factory.mktemp("fleet-scale")
    start = (int(time.time()) // 3600 - 4) * 3600  # an hour, whole, four hours ago: only the loaded blocks hold it
    blocks_from_openmetrics(promtool, openmetrics(start), tmp)
    prometheus = Prometheus(prometheus_exe, tmp / "prometheus", {"global": {"scrape_interval": "15s"}})
    try:
        wait_for("prometheus to be ready", prometheus.ready, patience(), [prometheus])
        client = PrometheusClient(prometheus.url, timeout=PATIENCE_S)
        window = Window(start, start + 3600)
        workloads = [load_workloads(WORKLOADS)["fitter"]]
        report = gather(client, workloads, window, None, load_prices(), Progress(100, io.StringIO()))
    finally:
        prometheus.stop()
    files = write_report(report, tmp / "out")
    return {"report": report, "start": start, "files": files, "out": tmp / "out"}


def test_the_spread_per_card_type_holds_the_lowest_median_and_highest_card(fleet_report: dict[str, Any]) -> None:
    (section,) = fleet_report["report"].sections
    assert len(section.rows) == 2 * CLUSTERS > CARDS_PER_PLOT and section.at_fleet_scale
    assert not section.series and set(section.spread) == set(EXPECTED)
    for gpu, stats in EXPECTED.items():
        for stat, value in stats.items():
            points = section.spread[gpu][stat]
            assert points and {v for _, v in points} == {value}, (gpu, stat)
    # l4 begins half-way: nothing before its first sample
    first_l4 = min(t for t, _ in section.spread["l4"]["median"])
    assert first_l4 >= fleet_report["start"] + 30 * STEP > min(t for t, _ in section.spread["t4"]["median"])


def test_the_table_keeps_every_card_and_the_plots_are_drawn(fleet_report: dict[str, Any]) -> None:
    (section,) = fleet_report["report"].sections
    results = {(r.cluster, r.gpu): r.result for r in section.rows}
    assert results == {
        (f"fleet-{i:02d}", gpu): float(value(i)) for gpu, (value, _) in CARDS.items() for i in range(CLUSTERS)
    }
    out: Path = fleet_report["out"]
    for kind in ("bars", "timeseries"):
        assert png_size((out / f"fitter-{kind}.png").read_bytes()) == (1000, 500)
    markdown = (out / "report.md").read_text(encoding="utf-8")
    assert f"series per card type: {section.queries.spread}" in markdown
    assert len(markdown_tables(markdown)["fitter"]) == 2 * CLUSTERS
