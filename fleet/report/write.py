"""Writing a gathered report: its plots, ``report.md`` and ``index.html`` into the output folder."""

from __future__ import annotations

from pathlib import Path

from fleet.report.html_page import render_html
from fleet.report.markdown import render_markdown
from fleet.report.model import Report


def write_report(report: Report, out: Path) -> list[Path]:
    """Draw the plots and write index.html, report.md and the PNGs into ``out``; the files written."""
    from fleet.report.plots import bar_chart, series_chart, sweep_chart  # matplotlib only when plotting

    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    names: dict[str, dict[str, str]] = {}
    pngs: dict[str, dict[str, bytes]] = {}
    for section in report.sections:
        if not section.has_data:
            continue
        for kind, draw in (("bars", bar_chart), ("series", series_chart)):
            path = out / f"{section.name}-{'bars' if kind == 'bars' else 'timeseries'}.png"
            draw(section, path)
            names.setdefault(section.name, {})[kind] = path.name
            pngs.setdefault(section.name, {})[kind] = path.read_bytes()
            written.append(path)
    for name, rows in report.sweeps.items():
        if rows:
            path = out / f"{name}-sweep.png"
            sweep_chart(name, rows, path)
            names.setdefault(name, {})["sweep"] = path.name
            pngs.setdefault(name, {})["sweep"] = path.read_bytes()
            written.append(path)
    (out / "report.md").write_text(render_markdown(report, names), encoding="utf-8")
    (out / "index.html").write_text(render_html(report, pngs), encoding="utf-8")
    return [out / "index.html", out / "report.md", *written]
