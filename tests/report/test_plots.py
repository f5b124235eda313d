"""fleet/report/plots.py: every value axis of the report's plots starts at zero (bars, time series, and both sides of
the scaling plot), whatever the values; the figures are caught before they are closed."""

from __future__ import annotations

import pytest

from fleet.model.workloads import load_workloads
from fleet.report import plots
from fleet.report.model import CardRow, WorkloadSection
from fleet.report.queries import Window, runs_counter, workload_queries
from fleet.report.scaling import ScalingRow
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


def test_both_sides_of_the_scaling_plot_start_at_zero(figures, tmp_path):
    rows = [
        ScalingRow("c0", "gcp", "l4", n, 5.0, 100.0 / n * 1.1, 0, n / 1.1 if n > 1 else 1.0, 0.9) for n in (1, 2, 4)
    ]
    plots.scaling_chart("sweep", rows, tmp_path / "scaling.png")
    (fig,) = figures
    for ax in fig.axes:
        assert ax.get_yscale() == "linear" and ax.get_ylim()[0] == 0
