"""The report as Markdown (``DIR/report.md``), the plots linked as files beside it."""

from __future__ import annotations

from fleet.report.formatting import md_prose, md_text, span, utc
from fleet.report.method import METHOD, SUMMARY_NOTE
from fleet.report.model import Report
from fleet.report.summary import summary_facts, summary_header, summary_rows
from fleet.report.tables import (
    fleet_tables,
    headline_direction,
    headline_series,
    prices_table,
    prices_used,
    section_notes,
    sweep_sections,
    table_header,
    table_rows,
)


def _markdown_table(header: list[str], rows: list[list[str]], numeric: range | None = None) -> str:
    """A Markdown table; the ``numeric`` columns (default: from the fifth on) are right-aligned."""

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(md_text(c) for c in cells) + " |"

    numeric = numeric if numeric is not None else range(4, len(header))
    align = ["---:" if i in numeric else "---" for i in range(len(header))]
    return "\n".join([line(header), "| " + " | ".join(align) + " |", *(line(r) for r in rows)])


def render_markdown(report: Report, images: dict[str, dict[str, str]]) -> str:
    """The report as Markdown; ``images`` maps workload -> {"bars": file, "series": file} (relative paths)."""
    currency = report.prices.currency
    out = [
        "# GPU fleet benchmark report",
        "",
        f"Prometheus {report.prometheus}, window {utc(report.window.start)} to {utc(report.window.end)} "
        f"({span(round(report.window.seconds))}), time series step {report.step:g} s, "
        f"generated {utc(report.generated)} with {report.queries_sent} queries.",
        "",
        "## Summary",
        "",
    ]
    rows = summary_rows(report)
    if rows:
        out += [_markdown_table(summary_header(currency), rows, numeric=range(5, 6)), "", SUMMARY_NOTE, ""]
    out += [f"- {md_prose(fact)}" for fact in summary_facts(report)] + [""]
    for section in report.sections:
        wl = section.workload
        headline = f"Headline: `{headline_series(wl)}`, {headline_direction(wl)}."
        out += [f"## {wl.name}", "", wl.spec.description.strip(), "", headline, ""]
        if not section.has_data:
            out += [f"**No data** in this window: {md_prose(section.no_data)}.", ""]
            continue
        files = images.get(wl.name, {})
        for kind, alt in (("bars", "per card"), ("series", "over time")):
            if kind in files:
                out += [f"![{wl.name}: {wl.spec.headline.metric} {alt}]({files[kind]})", ""]
        out += [_markdown_table(table_header(section, currency), table_rows(section)), ""]
        out += [f"- {md_prose(note)}" for note in section_notes(section, currency)] + [""]
    for name, title, header, rows, empty in sweep_sections(report):
        out += [f"## {title}", ""]
        if rows and "sweep" in images.get(name, {}):
            out += [f"![{name}: time per epoch and speed-up against accelerators]({images[name]['sweep']})", ""]
        out += [_markdown_table(header, rows) if rows else empty, ""]
    for title, header, rows, empty in fleet_tables(report):
        table = _markdown_table(header, rows, numeric=range(3, len(header))) if rows else empty
        out += [f"## {title}", "", table, ""]
    out += ["## Prices used", ""]
    used = prices_used(report)
    if used:
        out.append(
            _markdown_table(
                *prices_table(used, currency),
                numeric=range(3, 5),
            )
        )
    else:
        out.append("No card of this report has a price in the price table, so no cost is shown.")
    out += ["", "## How the numbers are made", ""] + [f"- {m}" for m in METHOD] + [""]
    for section in report.sections:
        out += [f"Queries for {section.name}:", "", "```promql"]
        out += [f"{name}: {q}" for name, q in section.listing()] + ["```", ""]
    return "\n".join(out)
