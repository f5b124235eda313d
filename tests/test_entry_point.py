"""How the commands are run: the ``fleet`` console script ``pip install -e .`` provides (pyproject.toml), and
``python -m fleet`` outside the virtualenv, which says where to run it instead of a traceback."""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys
import tomllib

import pytest

from tests.conftest import ROOT

# Makes importing ``blocked`` fail as it does where it is not installed (the scripts below define ``blocked`` first).
BLOCK_IMPORT = """
from importlib.abc import MetaPathFinder

class Missing(MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] == blocked:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Missing())
"""

# Runs ``python -m fleet ARGS`` in a Python where importing ``blocked`` fails.
BLOCKED_RUN = (
    """
import runpy, sys
blocked = sys.argv.pop(1)
"""
    + BLOCK_IMPORT
    + """
sys.argv[0] = "fleet"
runpy.run_module("fleet", run_name="__main__", alter_sys=True)
"""
)


def _run_without(blocked: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", BLOCKED_RUN, blocked, *args], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


# Runs ``fleet ARGS`` as the console script pip writes into .venv/bin does (``from MODULE import FUNCTION``, then
# ``sys.exit(FUNCTION())``), with importing ``blocked`` failing.
BLOCKED_SCRIPT = (
    """
import sys
blocked, entry = sys.argv.pop(1), sys.argv.pop(1)
"""
    + BLOCK_IMPORT
    + """
sys.argv[0] = "/project/.venv/bin/fleet"
module, _, function = entry.partition(":")
sys.exit(getattr(__import__(module, fromlist=[function]), function)())
"""
)


def _console_script_entry() -> str:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return project["project"]["scripts"]["fleet"]


def test_the_console_script_is_the_same_entry_as_python_m_fleet():
    module, _, function = _console_script_entry().partition(":")
    import fleet.__main__

    assert getattr(importlib.import_module(module), function) is fleet.__main__.run


def test_the_console_script_runs_the_command_line(monkeypatch):
    import fleet.tools.cli

    monkeypatch.setattr(fleet.tools.cli, "main", lambda: 7)
    module, _, function = _console_script_entry().partition(":")
    assert getattr(importlib.import_module(module), function)() == 7


def test_the_console_script_without_a_dependency_is_one_line_naming_itself():
    done = subprocess.run(
        [sys.executable, "-c", BLOCKED_SCRIPT, "pydantic", _console_script_entry(), "validate"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("fleet: 'pydantic' is not installed") and ".venv/bin/fleet plan" in line


def test_a_missing_dependency_is_one_line_naming_the_virtualenv():
    done = _run_without("pydantic", "validate")
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "'pydantic' is not installed" in lines[0]
    assert ".venv/bin/fleet plan" in lines[0] and "make plan" in lines[0]


def test_a_missing_module_of_our_own_is_a_bug_and_says_so():
    done = _run_without("components", "validate")
    assert done.returncode == 1 and "Traceback" in done.stderr and "ModuleNotFoundError" in done.stderr


def test_the_usage_names_the_command_as_it_was_run(monkeypatch, capsys):
    """``.venv/bin/fleet --help`` says ``usage: fleet``, ``python -m fleet --help`` says ``usage: python -m fleet``."""
    from fleet.tools.cli import build_parser

    for argv0, prog in (("/repo/.venv/bin/fleet", "fleet"), ("/repo/fleet/__main__.py", "python -m fleet")):
        monkeypatch.setattr(sys, "argv", [argv0, "plan", "--help"])
        assert build_parser().format_usage().startswith(f"usage: {prog} [-h]")
        with pytest.raises(SystemExit):
            build_parser().parse_args(["plan", "--help"])
        assert capsys.readouterr().out.startswith(f"usage: {prog} plan [-h]")


def test_the_help_says_how_to_run_the_commands_and_names_every_one():
    from fleet.tools.cli import build_parser

    parser = build_parser()
    text = " ".join(parser.format_help().split())
    assert ".venv/bin/fleet COMMAND" in text and ".venv/bin/python -m fleet COMMAND" in text and "make plan" in text
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    module_doc = sys.modules["fleet.tools.cli"].__doc__.splitlines()[0]
    assert module_doc.endswith("``.") and all(f" {name}" in module_doc for name in commands), module_doc
