"""The doctor's table (fleet/tools/doctor/table.py): ok, FAIL and skip rows, and the exit status."""

from __future__ import annotations

import re

from fleet.tools.doctor.table import Row, exit_status, render_table


def test_the_table_marks_ok_fail_and_skip():
    rows = [
        Row("a", "fine"),
        Row("b", "broken", "it is broken", "mend it"),
        Row("c", "skipped: no URL", skipped=True),
    ]
    text = render_table(rows)
    assert re.search(r"^a\s+ok\s+fine$", text, re.M) and re.search(r"^b\s+FAIL\s+broken$", text, re.M)
    assert "problem: it is broken" in text and "fix: mend it" in text and re.search(r"^c\s+skip\s+", text, re.M)
    assert text.endswith("3 check(s): 1 ok, 1 problem(s), 1 skipped")
    assert exit_status(rows) == 1 and exit_status([rows[0], rows[2]]) == 0


def test_what_a_cluster_answers_reaches_the_terminal_without_control_characters():
    """A pod name, an event message or a condition from a hostile cluster could clear the screen, retitle the
    window, hide text or draw a fake hyperlink: the table prints none of it (ECMA-48 escapes, C0/C1, bidi overrides)."""
    hostile = "pod\x1b[2J\x1b[31mred\x1b[0m\x1b]0;owned\x07\x1b]8;;https://evil\x1b\\link\x1b]8;;\x1b\\\nnext\r\x9b1m\u202eevil"
    table = render_table([Row(hostile, hostile, hostile, hostile)], title=f"title{hostile}")
    assert not [c for c in table if (ord(c) < 32 and c != "\n") or 127 <= ord(c) < 160 or c in "\u202a\u202e\u2066"]
    assert "https://evil" not in table and "owned" not in table
    assert "redlink next" in table  # the text itself stays, on one line
    assert len(table.splitlines()) == 1 + 1 + 1 + 2 + 1  # title, header, the row, its problem and fix, the count
