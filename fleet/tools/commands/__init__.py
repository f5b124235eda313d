"""The command line's commands, a module per command or group (fleet/tools/cli.py parses the arguments and runs
one): what every command shares is here, the exit statuses and the check of an output file."""

from __future__ import annotations

from pathlib import Path

from fleet.model.core.errors import InputError

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


def check_output_file(path: Path, flag: str) -> None:
    """An output file's folder must exist and the path must not be a folder: said before any work is done."""
    from fleet.model.core.errors import Problem
    from fleet.tools.engine.render import source_tree_problem

    if path.is_dir():
        raise InputError([Problem(str(path), 1, flag, "is a folder: give a file name")])
    in_sources = source_tree_problem(path)
    if in_sources:
        raise InputError([Problem(str(path), 1, flag, in_sources)])
    if not path.parent.is_dir():
        raise InputError([Problem(str(path), 1, flag, f"the folder {path.parent} does not exist")])
