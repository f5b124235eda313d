"""No test depends on how fast the machine is: a scan of every test module's code (tests/, not the fixtures' own
workload code) for a wait bounded by a number of seconds written in place, for a duration read from the clock and
compared with anything, and for the clock read once at import. A wait ends when what it waits for is there, or at
the one patience of ``tests.e2e.processes.patience()``, an upper bound only a hang reaches; what a test checks is an
order of events or a value between two readings of the clock, never how long something took."""

from __future__ import annotations

import ast

from tests.conftest import ROOT

TESTS = ROOT / "tests"
CLOCKS = {"time.time", "time.monotonic", "time.perf_counter", "datetime.now", "datetime.datetime.now"}


def _is_clock(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and ast.unparse(node.func) in CLOCKS


def _reads_clock(node: ast.AST) -> bool:
    return any(_is_clock(inner) for inner in ast.walk(node))


def _is_seconds(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool)


def speed_problems(source: str, name: str) -> list[str]:
    """Each place in ``source`` (a module's code) where a test would depend on the machine's speed."""
    problems = []
    tree = ast.parse(source)
    for statement in tree.body:
        if isinstance(statement, ast.Assign | ast.AnnAssign) and statement.value and _reads_clock(statement.value):
            problems.append(
                f"{name}:{statement.lineno}: {ast.unparse(statement)}: the clock read once at import, then compared "
                "with code that reads it later: use a fixed instant and give the code under test its clock"
            )
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            if (_is_clock(node.left) and _is_seconds(node.right)) or (_is_clock(node.right) and _is_seconds(node.left)):
                problems.append(
                    f"{name}:{node.lineno}: {ast.unparse(node)}: a wait bounded by seconds written in place: "
                    "use tests.e2e.processes.patience()"
                )
        if isinstance(node, ast.Compare):
            for operand in (node.left, *node.comparators):
                elapsed = [
                    inner
                    for inner in ast.walk(operand)
                    if isinstance(inner, ast.BinOp) and isinstance(inner.op, ast.Sub) and _reads_clock(inner)
                ]
                if elapsed:
                    problems.append(
                        f"{name}:{node.lineno}: {ast.unparse(node)}: a duration read from the clock and compared: "
                        "check an order of events, or a value between two readings of the clock"
                    )
                    break
    return problems


def test_no_test_depends_on_the_machines_speed() -> None:
    modules = [p for p in TESTS.rglob("*.py") if "fixtures" not in p.relative_to(TESTS).parts]
    assert len(modules) > 100
    problems = [
        problem
        for path in sorted(modules)
        for problem in speed_problems(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    ]
    assert problems == []


def test_the_scan_finds_what_made_tests_fail_on_a_loaded_machine() -> None:
    """The first three were in tests/e2e until 2026-11-25 (a wait of a fixed number of seconds, a freshness checked as
    an age, one budget for all the waits of a module), the fourth is an age checked against the real clock, the fifth
    the doctor tests' clock frozen at import (which made `make test` red, issue #28): each is one problem; a wait
    bounded by the patience, and a value between two readings of the clock, are none."""
    found = {
        source: speed_problems(source, "t.py")
        for source in (
            "def t():\n    deadline = time.monotonic() + 60",
            "def t():\n    assert abs(float(r['value'][1]) - time.time()) < 30",
            "def t():\n    while time.monotonic() - fed['start'] < DEADLINE_S: pass",
            "def t():\n    assert (datetime.now(UTC) - created).total_seconds() < 20",
            "NOW = datetime.now(UTC)",
        )
    }
    assert {source: len(problems) for source, problems in found.items()} == dict.fromkeys(found, 1), found
    for fine in (
        "NOW = datetime(2026, 3, 2, 9, 30, tzinfo=UTC)",
        "def t():\n    deadline = time.monotonic() + PATIENCE_S",
        "def t():\n    while time.monotonic() < deadline: pass",
        "def t():\n    assert start <= float(r['value'][1]) <= time.time()",
        "def t():\n    left = max(0.0, deadline - time.monotonic())",
    ):
        assert speed_problems(fine, "t.py") == [], fine
