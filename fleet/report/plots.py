"""The report's plots, drawn with matplotlib on its non-interactive Agg backend (no display needed).

Imported only when a report is written, so the rest of the command line never loads matplotlib.
Both plots are 1000 x 500 pixels; each card keeps one colour in both plots of a workload. Every value axis starts at
zero, so heights and distances compare as they are.

Over more cards than a plot tells apart (``CARDS_PER_PLOT``: a fleet of many clusters), a workload's plots show each
card type (gpu) once, with its spread over the clusters: the bars the median card with every cluster's result as a
dot and a line from the lowest to the highest, the time series the median card with a band from the lowest to the
highest at each step. They draw a few artists per card type, not per card: at 200 clusters of 8 cards, one bar and
one line each (with a legend entry and a value label) took about a minute a workload (docs/performance.md). The table
below each plot keeps every card's numbers.
"""

from __future__ import annotations

import datetime
import itertools
import math
import statistics
import zlib
from pathlib import Path
from typing import TYPE_CHECKING

import matplotlib

matplotlib.use("Agg")

import matplotlib.dates as mdates
import matplotlib.pyplot as plt
from matplotlib.ticker import EngFormatter, ScalarFormatter

from fleet.report.costs import approximate

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from fleet.report.model import WorkloadSection
    from fleet.report.sweeps import SweepRow

SIZE_INCHES = (10.0, 5.0)
DPI = 100


def _colours(cards: list[str]) -> dict[str, tuple[float, float, float, float]]:
    palette = plt.get_cmap("tab10")
    return {card: palette(i % 10) for i, card in enumerate(sorted(cards))}


def _title(section: WorkloadSection, what: str) -> str:
    h = section.workload.spec.headline
    match = ", ".join(f"{k}={v}" for k, v in sorted(h.match.items()))
    better = "higher is better" if h.higher_is_better else "lower is better"
    return f"{section.name}: {h.metric}{f' ({match})' if match else ''} {what} — {better}"


def _with_gaps(points: list[tuple[float, float]]) -> tuple[list[datetime.datetime], list[float]]:
    """Times (UTC) and values, with a NaN wherever samples are over 3 typical steps apart, so that the
    line breaks between runs instead of joining them."""
    if len(points) < 2:
        return [datetime.datetime.fromtimestamp(t, datetime.UTC) for t, _ in points], [v for _, v in points]
    gaps = sorted(b[0] - a[0] for a, b in itertools.pairwise(points))
    limit = 3 * gaps[len(gaps) // 2]
    times, values = [], []
    for i, (t, v) in enumerate(points):
        if i and t - points[i - 1][0] > limit:
            times.append(datetime.datetime.fromtimestamp((t + points[i - 1][0]) / 2, datetime.UTC))
            values.append(math.nan)
        times.append(datetime.datetime.fromtimestamp(t, datetime.UTC))
        values.append(v)
    return times, values


def _large_numbers_readable(ax: Axes, largest: float) -> None:
    """Ticks like 60M rather than an offset of 1e7 for large values; small values keep plain ticks (an SI
    prefix such as "m" would read as minutes next to a unit in seconds)."""
    if abs(largest) >= 10_000:
        ax.yaxis.set_major_formatter(EngFormatter(sep=""))


def _from_zero(ax: Axes, smallest: float = 0.0) -> None:
    """Start the value axis at zero (or below, for a negative value), so heights compare as they are."""
    ax.set_ylim(bottom=min(0.0, smallest))


def bar_chart(section: WorkloadSection, path: Path) -> None:
    """Headline result per card, bars grouped by cluster (and cloud), each bar labelled with its value; at fleet scale,
    per card type (:func:`spread_bar_chart`)."""
    if section.at_fleet_scale:
        spread_bar_chart(section, path)
        return
    unit = section.workload.spec.headline.unit
    groups = sorted({(r.cluster, r.cloud) for r in section.rows})
    colours = _colours([r.gpu for r in section.rows])
    fig, ax = plt.subplots(figsize=SIZE_INCHES, dpi=DPI)
    width = 0.8 / max(1, max(sum(1 for r in section.rows if (r.cluster, r.cloud) == g) for g in groups))
    labelled: set[str] = set()
    for x, group in enumerate(groups):
        rows = sorted((r for r in section.rows if (r.cluster, r.cloud) == group), key=lambda r: r.gpu)
        for i, row in enumerate(rows):
            offset = (i - (len(rows) - 1) / 2) * width
            bar = ax.bar(
                x + offset,
                row.result,
                width * 0.9,
                color=colours[row.gpu],
                label=row.gpu if row.gpu not in labelled else None,
            )
            labelled.add(row.gpu)
            ax.bar_label(bar, labels=[approximate(row.result, 3)], padding=2, fontsize=8)
    ax.set_xticks(range(len(groups)), [f"{cluster}\n({cloud})" for cluster, cloud in groups])
    _large_numbers_readable(ax, max(r.result for r in section.rows))
    ax.set_ylabel(unit)
    ax.set_title(_title(section, "per card"), fontsize=10)
    ax.margins(y=0.15)
    _from_zero(ax, min(r.result for r in section.rows))
    ax.legend(title="card", fontsize=8, title_fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def series_chart(section: WorkloadSection, path: Path) -> None:
    """The headline of every card over the window (UTC), one line per (card, cluster); at fleet scale, per card type
    (:func:`spread_series_chart`)."""
    if section.at_fleet_scale:
        spread_series_chart(section, path)
        return
    unit = section.workload.spec.headline.unit
    colours = _colours(sorted({gpu for _, _, gpu in section.series}))
    styles = ["-", "--", ":", "-."]
    clusters = sorted({cluster for cluster, _, _ in section.series})
    fig, ax = plt.subplots(figsize=SIZE_INCHES, dpi=DPI)
    for (cluster, cloud, gpu), points in sorted(section.series.items()):
        times, values = _with_gaps(points)
        ax.plot(
            times,
            values,
            linestyle=styles[clusters.index(cluster) % len(styles)],
            marker="." if len(points) < 200 else None,
            color=colours[gpu],
            label=f"{gpu} @ {cluster} ({cloud})",
        )
    if not section.series:
        ax.text(0.5, 0.5, "no samples in the window", ha="center", va="center", transform=ax.transAxes)
    locator = mdates.AutoDateLocator(tz=datetime.UTC)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator, tz=datetime.UTC))
    ax.set_xlabel("time (UTC)")
    _large_numbers_readable(ax, max((v for points in section.series.values() for _, v in points), default=0))
    ax.set_ylabel(unit)
    _from_zero(ax, min((v for points in section.series.values() for _, v in points), default=0.0))
    ax.set_title(_title(section, "over time"), fontsize=10)
    if section.series:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def _spread_of(section: WorkloadSection) -> dict[str, list[tuple[str, float]]]:
    """Per card type, its cards' (cluster, result) in cluster order."""
    out: dict[str, list[tuple[str, float]]] = {}
    for r in sorted(section.rows, key=lambda r: (r.gpu, r.cluster, r.cloud)):
        out.setdefault(r.gpu, []).append((r.cluster, r.result))
    return out


def _jitter(name: str) -> float:
    """A fixed offset in [-0.25, 0.25] from a cluster's name, so that its dot keeps its place from report to report
    and the dots of a card type spread over the bar's width."""
    return zlib.crc32(name.encode()) % 1001 / 2000 - 0.25


def spread_bar_chart(section: WorkloadSection, path: Path) -> None:
    """Per card type, a bar at its median card's result (labelled), a dot for every card (cluster) and a line from the
    lowest to the highest."""
    unit = section.workload.spec.headline.unit
    results = _spread_of(section)
    gpus = sorted(results)
    colours = _colours(gpus)
    fig, ax = plt.subplots(figsize=SIZE_INCHES, dpi=DPI)
    for x, gpu in enumerate(gpus):
        values = [v for _, v in results[gpu]]
        median = statistics.median(values)
        bar = ax.bar(x, median, 0.6, color=colours[gpu], alpha=0.55)
        ax.bar_label(
            bar,
            labels=[approximate(median, 3)],
            padding=2,
            fontsize=8,
            zorder=4,
            bbox={"boxstyle": "round,pad=0.15", "facecolor": "white", "edgecolor": "none", "alpha": 0.8},
        )
        ax.scatter([x + _jitter(cluster) for cluster, _ in results[gpu]], values, s=6, color=colours[gpu],
                   edgecolors="black", linewidths=0.3, zorder=3)  # fmt: skip
        ax.plot([x, x], [min(values), max(values)], color="black", linewidth=1, zorder=2)
    ax.set_xticks(range(len(gpus)), [f"{gpu}\n({len(results[gpu])} clusters)" for gpu in gpus])
    everything = [v for pairs in results.values() for _, v in pairs]
    _large_numbers_readable(ax, max(everything))
    ax.set_ylabel(unit)
    clusters = len({r.cluster for r in section.rows})
    ax.set_title(_title(section, f"per card over {clusters} clusters (bar: median; dots: each cluster)"), fontsize=10)
    ax.margins(y=0.15)
    _from_zero(ax, min(everything))
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def spread_series_chart(section: WorkloadSection, path: Path) -> None:
    """Per card type over the window (UTC): its median card's headline as a line, and a band from its lowest to its
    highest card at each step."""
    unit = section.workload.spec.headline.unit
    colours = _colours(sorted(section.spread))
    counts = {gpu: len(values) for gpu, values in _spread_of(section).items()}
    fig, ax = plt.subplots(figsize=SIZE_INCHES, dpi=DPI)
    values_seen: list[float] = []
    for gpu, stats in sorted(section.spread.items()):
        median = stats.get("median", [])
        low, high = dict(stats.get("min", [])), dict(stats.get("max", []))
        times, values = _with_gaps(median)  # the gaps fall where the median's do: the same times
        _, lows = _with_gaps([(t, low.get(t, v)) for t, v in median])
        _, highs = _with_gaps([(t, high.get(t, v)) for t, v in median])
        ax.fill_between(times, lows, highs, color=colours[gpu], alpha=0.2, linewidth=0)
        ax.plot(times, values, color=colours[gpu], marker="." if len(median) < 200 else None,
                label=f"{gpu} ({counts.get(gpu, 0)} clusters)")  # fmt: skip
        values_seen += [v for v in (*lows, *highs) if not math.isnan(v)]
    if not section.spread:
        ax.text(0.5, 0.5, "no samples in the window", ha="center", va="center", transform=ax.transAxes)
    locator = mdates.AutoDateLocator(tz=datetime.UTC)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator, tz=datetime.UTC))
    ax.set_xlabel("time (UTC)")
    _large_numbers_readable(ax, max(values_seen, default=0))
    ax.set_ylabel(unit)
    _from_zero(ax, min(values_seen, default=0.0))
    ax.set_title(_title(section, "over time per card (line: median cluster; band: lowest to highest)"), fontsize=10)
    if section.spread:
        ax.legend(title="card", fontsize=8, title_fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def sweep_chart(workload: str, rows: list[SweepRow], path: Path) -> None:
    """Time per epoch (left) and speed-up (right) against the job's accelerator count, one line per (card, cluster),
    GPUs and TPUs on the same axes, each with its ideal (linear) line dashed from its smallest point."""
    colours = _colours(sorted({f"{r.gpu} @ {r.cluster}" for r in rows}))  # one colour per line: a card on two clusters
    fig, (left, right) = plt.subplots(1, 2, figsize=SIZE_INCHES, dpi=DPI)
    lines: dict[tuple[str, str, str], list[SweepRow]] = {}
    for r in rows:
        lines.setdefault((r.cluster, r.cloud, r.gpu), []).append(r)
    for (cluster, cloud, gpu), points in sorted(lines.items()):
        points.sort(key=lambda r: r.accelerators)
        counts = [r.accelerators for r in points]
        base = points[0]
        label = f"{gpu} @ {cluster} ({cloud})"
        colour = colours[f"{gpu} @ {cluster}"]
        left.plot(counts, [r.seconds_per_epoch for r in points], marker="o", color=colour, label=label)
        ideal = [base.seconds_per_epoch * base.accelerators / n for n in counts]
        left.plot(counts, ideal, "--", color=colour, alpha=0.5)
        right.plot(counts, [r.speedup for r in points], marker="o", color=colour, label=label)
        right.plot(counts, [n / base.accelerators for n in counts], "--", color=colour, alpha=0.5)
    for ax, what in ((left, "time per epoch (s)"), (right, "speed-up over the smallest point")):
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(ScalarFormatter())  # 1, 2, 4 rather than powers of two
        ax.set_xlabel("accelerators in the job")
        ax.set_ylabel(what)
        _from_zero(ax)  # linear from zero: the time per epoch falls and the speed-up rises as they really do
        ax.grid(alpha=0.3, which="both")
    left.set_title(f"{workload}: time per epoch (dashed: ideal)", fontsize=10)
    right.set_title(f"{workload}: speed-up (dashed: linear)", fontsize=10)
    right.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
