"""``schema``: the files generated from the declarations, written or checked."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from fleet.model.core.errors import InputError, Problem
from fleet.model.loader import POLICY_FILE
from fleet.tools.commands import EXIT_FAILED, EXIT_OK

SCHEMA_FILE = POLICY_FILE.with_name("fleet.schema.json")
PROJECT_FILE = Path(__file__).resolve().parents[3] / "Pulumi.yaml"


def generated_files() -> dict[Path, str]:
    """Every file generated from the declarations, with the text it must hold: the policy file's JSON Schema,
    Pulumi.yaml's declarations of the stack settings and the reference page (docs/reference.md)."""
    from fleet.model.core.stack_settings import project_file_text
    from fleet.model.policy_file.schema import json_schema
    from fleet.tools.reference import REFERENCE_FILE, reference_text

    return {
        SCHEMA_FILE: json.dumps(json_schema(), indent=2, sort_keys=True) + "\n",
        PROJECT_FILE: project_file_text(PROJECT_FILE.read_text(encoding="utf-8")),
        REFERENCE_FILE: reference_text(),
    }


def cmd_schema(args: argparse.Namespace) -> int:
    """Write the files generated from the declarations (``generated_files``), or check that the committed ones are
    current."""
    wanted = generated_files()
    if args.check:
        stale = [
            path
            for path, text in wanted.items()
            if (path.read_text(encoding="utf-8") if path.is_file() else "") != text
        ]
        for path in stale:
            print(f"{path} is out of date: run python -m fleet schema", file=sys.stderr)
        return EXIT_FAILED if stale else EXIT_OK
    write_all(wanted)
    for path in wanted:
        print(f"wrote {path}")
    return EXIT_OK


def write_all(files: dict[Path, str]) -> None:
    """Write every file or none: each first to a temporary file beside it, then all renamed into place; an
    ``InputError`` naming the file that could not be written (and its temporary files removed) otherwise."""
    written: list[tuple[Path, Path]] = []
    try:
        for path, text in files.items():
            handle, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
            written.append((Path(name), path))
            os.chmod(name, path.stat().st_mode & 0o777 if path.is_file() else 0o644)  # mkstemp's is 0600
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                out.write(text)
                out.flush()
                os.fsync(out.fileno())
    except OSError as exc:
        for temporary, _ in written:
            temporary.unlink(missing_ok=True)
        failed = path  # the file being written when it failed
        raise InputError(
            [Problem(str(failed), 1, "schema", f"cannot write it ({exc.strerror or exc}): nothing was written")]
        ) from None
    for temporary, path in written:
        os.replace(temporary, path)
