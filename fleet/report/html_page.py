"""The report as one self-contained HTML page (``DIR/index.html``), the plots embedded as base64 PNG."""

from __future__ import annotations

import base64
import html

from fleet.report.formatting import span, utc
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

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2rem auto;max-width:1100px;
color:#222;padding:0 1rem}h1{font-size:1.6rem}h2{margin-top:2.5rem;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:1rem 0;font-size:.9rem}th,td{border:1px solid #ccc;padding:.3rem .5rem}
th{background:#f3f3f3}td.n{text-align:right;font-variant-numeric:tabular-nums}img{max-width:100%;display:block;
margin:.5rem 0}.nodata{background:#fff4e5;border-left:4px solid #f90;padding:.5rem 1rem}.meta{color:#555}
code,pre{background:#f6f6f6}pre{padding:.5rem;overflow-x:auto;font-size:.8rem}li{margin:.2rem 0}
"""


def _html_table(header: list[str], rows: list[list[str]], numeric_from: int = 4) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="n">{html.escape(c)}</td>' if i >= numeric_from else f"<td>{html.escape(c)}</td>"
            for i, c in enumerate(row)
        )
        + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _inline_code(text: str) -> str:
    """Markdown-ish notes to HTML: `code` spans become <code>, everything else is escaped."""
    parts = text.split("`")
    return "".join(f"<code>{html.escape(p)}</code>" if i % 2 else html.escape(p) for i, p in enumerate(parts))


def render_html(report: Report, pngs: dict[str, dict[str, bytes]]) -> str:
    """The report as one self-contained HTML page (plots embedded as base64 PNG)."""
    currency = report.prices.currency
    esc = html.escape
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8"><title>GPU fleet benchmark report</title>',
        f"<style>{_CSS}</style></head><body>",
        "<h1>GPU fleet benchmark report</h1>",
        f'<p class="meta">Prometheus <code>{esc(report.prometheus)}</code>, window {esc(utc(report.window.start))} '
        f"to {esc(utc(report.window.end))} ({esc(span(round(report.window.seconds)))}), time series step "
        f"{report.step:g} s, generated {esc(utc(report.generated))} with {report.queries_sent} queries.</p>",
        '<h2 id="summary">Summary</h2>',
    ]
    rows = summary_rows(report)
    if rows:
        parts += [_html_table(summary_header(currency), rows, numeric_from=5), f"<p>{esc(SUMMARY_NOTE)}</p>"]
    facts = "".join(f"<li>{_inline_code(f)}</li>" for f in summary_facts(report))
    parts.append(f"<ul>{facts}</ul>" if facts else "")
    for section in report.sections:
        wl = section.workload
        parts += [
            f'<h2 id="{esc(wl.name)}">{esc(wl.name)}</h2>',
            f"<p>{esc(wl.spec.description.strip())}</p>",
            f"<p>Headline: <code>{esc(headline_series(wl))}</code>, {esc(headline_direction(wl))}.</p>",
        ]
        if not section.has_data:
            parts.append(f'<p class="nodata"><strong>No data</strong> in this window: {esc(section.no_data)}.</p>')
            continue
        for kind, alt in (("bars", "per card"), ("series", "over time")):
            data = pngs.get(wl.name, {}).get(kind)
            if data:
                encoded = base64.b64encode(data).decode("ascii")
                parts.append(
                    f'<img alt="{esc(wl.name)}: {esc(wl.spec.headline.metric)} {alt}" '
                    f'src="data:image/png;base64,{encoded}">'
                )
        parts.append(_html_table(table_header(section, currency), table_rows(section)))
        notes = "".join(f"<li>{_inline_code(n)}</li>" for n in section_notes(section, currency))
        parts.append(f"<ul>{notes}</ul>")
    for name, title, header, rows, empty in sweep_sections(report):
        parts.append(f'<h2 id="sweep-{esc(name)}">{esc(title)}</h2>')
        data = pngs.get(name, {}).get("sweep")
        if rows and data:
            encoded = base64.b64encode(data).decode("ascii")
            alt = f"{esc(name)}: time per epoch and speed-up against accelerators"
            parts.append(f'<img alt="{alt}" src="data:image/png;base64,{encoded}">')
        parts.append(_html_table(header, rows) if rows else f"<p>{esc(empty)}</p>")
    for title, header, rows, empty in fleet_tables(report):
        parts.append(f"<h2>{title}</h2>")
        parts.append(_html_table(header, rows, numeric_from=3) if rows else f"<p>{esc(empty)}</p>")
    parts.append("<h2>Prices used</h2>")
    used = prices_used(report)
    if used:
        parts.append(
            _html_table(
                *prices_table(used, currency),
                numeric_from=3,
            )
        )
    else:
        parts.append("<p>No card of this report has a price in the price table, so no cost is shown.</p>")
    parts.append("<h2>How the numbers are made</h2><ul>")
    parts += [f"<li>{_inline_code(m)}</li>" for m in METHOD]
    parts.append("</ul>")
    for section in report.sections:
        lines = [f"{n}: {q}" for n, q in section.listing()]
        summary = f"<summary>Queries for {esc(section.name)}</summary>"
        parts.append(f"<details>{summary}<pre>{esc(chr(10).join(lines))}</pre></details>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
