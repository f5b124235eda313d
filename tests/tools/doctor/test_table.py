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
