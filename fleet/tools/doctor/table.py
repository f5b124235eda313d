"""The doctor's output: one row per check (what, state, problem, likely fix), the table they print as, and the exit
status they give."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2
# What a cluster's answers may carry that a terminal acts on: escape sequences (CSI such as colours or cursor moves,
# OSC such as window titles and hyperlinks, and any other ESC pair; ECMA-48), then any other C0 or C1 control
# character and the bidirectional overrides that reorder what is shown (Unicode TR9 explicit formatting)
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]?|\x9b[0-?]*[ -/]*[@-~]")
_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """``text`` as the doctor prints it: escape sequences removed, any other control character a space."""
    return _CONTROLS.sub(" ", _ESCAPES.sub("", str(text)))


@dataclass(frozen=True)
class Row:
    """One line of the table: what was checked, what was seen, and when something is wrong, the problem and its
    likely fix. ``skipped``: not checked (not a problem, but shown)."""

    what: str
    state: str
    problem: str = ""
    fix: str = ""
    skipped: bool = False

    @property
    def status(self) -> str:
        """``FAIL``, ``skip`` or ``ok``."""
        return "FAIL" if self.problem else "skip" if self.skipped else "ok"


def render_table(rows: Sequence[Row], title: str = "") -> str:
    """One table: CHECK, STATUS, STATE; a problem row is followed by its problem and likely fix, indented. What the
    cluster answered is printed without its control characters (``printable``)."""
    rows = [Row(*(printable(v) for v in (r.what, r.state, r.problem, r.fix)), skipped=r.skipped) for r in rows]
    width = min(max([len("CHECK"), *(len(r.what) for r in rows)]), 60)
    lines = [printable(title)] if title else []
    lines.append(f"{'CHECK':<{width}}  {'STATUS':<6}  STATE")
    pad = " " * 4
    for row in rows:
        what = row.what if len(row.what) <= width else row.what[: width - 1] + "…"
        lines.append(f"{what:<{width}}  {row.status:<6}  {row.state}")
        if row.problem:
            lines.append(f"{pad}problem: {row.problem}")
            lines.append(f"{pad}fix: {row.fix or '-'}")
    failed = sum(1 for r in rows if r.problem)
    skipped = sum(1 for r in rows if r.skipped and not r.problem)
    lines.append(f"{len(rows)} check(s): {len(rows) - failed - skipped} ok, {failed} problem(s), {skipped} skipped")
    return "\n".join(lines)


def exit_status(rows: Sequence[Row]) -> int:
    """0 when no row names a problem (skipped rows are not problems), else 1."""
    return EXIT_FAILED if any(r.problem for r in rows) else EXIT_OK
