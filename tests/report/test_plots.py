"""fleet/report/plots.py: every value axis of the report's plots starts at zero (bars, time series, and both sides of
the sweep plot), whatever the values; the figures are caught before they are closed."""

from __future__ import annotations

import pytest

from fleet.model.core.workloads import load_workloads
from fleet.report import plots
from fleet.report.model import CardRow, WorkloadSection
from fleet.report.queries import Window, runs_counter, workload_queries
from fleet.report.sweeps import SweepRow
from tests.conftest import FIXTURES

WORKLOAD = next(iter(load_workloads(FIXTURES / "fleet" / "workloads").values()))


@pytest.fixture
def figures(monkeypatch):
    """The figures the plots draw, kept open."""
    kept = []
    close = plots.plt.close
    monkeypatch.setattr(plots.plt, "close", kept.append)
    yield kept
    for fig in kept:
        close(fig)


def section() -> WorkloadSection:
    wl = WORKLOAD
    out = WorkloadSection(wl, workload_queries(wl.spec, Window(0, 600)), runs_counter(wl.spec))
    # values far from zero: an autoscaled axis would start near 1000
    out.rows = [CardRow("c0", "aws", "t", 1000.0), CardRow("c1", "gcp", "u", 1010.0)]
    out.series = {("c0", "aws", "t"): [(0.0, 1000.0), (60.0, 1005.0)], ("c1", "gcp", "u"): [(0.0, 1010.0)]}
    return out


def test_bars_and_time_series_start_at_zero(figures, tmp_path):
    plots.bar_chart(section(), tmp_path / "bars.png")
    plots.series_chart(section(), tmp_path / "series.png")
    assert len(figures) == 2
    for fig in figures:
        (ax,) = fig.axes[:1]
        low, high = ax.get_ylim()
        assert low == 0 and high > 1010


def test_both_sides_of_the_sweep_plot_start_at_zero(figures, tmp_path):
    rows = [SweepRow("c0", "gcp", "l4", n, 5.0, 100.0 / n * 1.1, 0, n / 1.1 if n > 1 else 1.0, 0.9) for n in (1, 2, 4)]
    plots.sweep_chart("sweep", rows, tmp_path / "sweep.png")
    (fig,) = figures
    for ax in fig.axes:
        assert ax.get_yscale() == "linear" and ax.get_ylim()[0] == 0


def fleet_section(clusters: int = 200, gpus: tuple[str, ...] = ("t4", "l4", "a100")) -> WorkloadSection:
    """A section over more cards than a plot draws one by one: per card type a spread, no per-card series."""
    wl = WORKLOAD
    out = WorkloadSection(wl, workload_queries(wl.spec, Window(0, 600)), runs_counter(wl.spec))
    out.rows = [CardRow(f"c{i:03d}", "gcp", g, 1000.0 + i) for i in range(clusters) for g in gpus]
    out.spread = {
        g: {"min": [(0.0, 1000.0), (60.0, 1001.0)], "median": [(0.0, 1100.0), (60.0, 1101.0)],
            "max": [(0.0, 1199.0), (60.0, 1200.0)]}
        for g in gpus
    }  # fmt: skip
    return out


def test_at_fleet_scale_the_plots_draw_each_card_type_once(figures, tmp_path):
    """Over CARDS_PER_PLOT cards, one bar, one dot cloud and one line per card type, no per-card bar, line or legend
    entry (a bar and a legend entry per card took about a minute a workload at 200 clusters); axes from zero."""
    section = fleet_section()
    assert section.at_fleet_scale and len(section.rows) == 600
    plots.bar_chart(section, tmp_path / "bars.png")
    plots.series_chart(section, tmp_path / "series.png")
    bars, series = figures
    (ax,) = bars.axes
    assert len(ax.patches) == 3  # one bar per card type
    assert [t.get_text().split("\n")[0] for t in ax.get_xticklabels()] == ["a100", "l4", "t4"]
    assert sum(len(c.get_offsets()) for c in ax.collections) == 600  # every card still a dot
    assert ax.get_ylim()[0] == 0
    (ax,) = series.axes[:1]
    assert len(ax.get_lines()) == 3 and len(ax.get_legend().get_texts()) == 3
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [f"{g} (200 clusters)" for g in ("a100", "l4", "t4")]
    low, high = ax.get_ylim()
    assert low == 0 and high >= 1200  # the band reaches the highest card


def test_up_to_cards_per_plot_every_card_has_its_bar(figures, tmp_path):
    plots.bar_chart(section(), tmp_path / "bars.png")
    (fig,) = figures
    assert len(fig.axes[0].patches) == 2
