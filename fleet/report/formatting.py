"""How the report writes its numbers and times: significant digits, whole counts, UTC, a dash for unknown."""

from __future__ import annotations

import datetime
import html
import re

from fleet.report.costs import approximate

MISSING = "—"
# What turns text into Markdown or HTML in report.md (CommonMark: emphasis, code spans, links and images, raw HTML,
# table cells): label values come from Prometheus and are escaped, so a hostile label writes no link, image or tag.
_MARKDOWN = re.compile(r"([\\`*_\[\]|~])")
_PROSE = re.compile(r"([\\*_\[\]|~])")  # prose of the report's own keeps its code spans


def md_text(text: str) -> str:
    """``text`` as literal Markdown: HTML characters as entities, Markdown's own backslash-escaped, one line."""
    return _MARKDOWN.sub(r"\\\1", html.escape(" ".join(str(text).split()), quote=False))


def md_prose(text: str) -> str:
    """A note of the report's own with label values in it: as ``md_text`` but its code spans kept (a backtick in a
    label value then only ends a code span; it opens no link or tag)."""
    return _PROSE.sub(r"\\\1", html.escape(" ".join(str(text).split()), quote=False))


def utc(seconds: float) -> str:
    """A Unix time as ``2026-11-01 08:00:00 UTC``."""
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def span(seconds: float) -> str:
    """A whole duration as its largest exact unit: ``7d``, ``90m``, ``45s``."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"


def fmt(value: float | None, digits: int = 4) -> str:
    """A measured value for the tables: ``digits`` significant digits, or a dash when unknown."""
    return MISSING if value is None else approximate(value, digits)


def fmt_count(value: float | None) -> str:
    """A count (runs, jobs, epochs) as the whole number nearest to it, with thousands separators: Prometheus answers
    in floats, and ``increase()`` extrapolates a counter to the window's edges (4.07 jobs are 4)."""
    if value is None:
        return MISSING
    return f"{round(value):,}"
