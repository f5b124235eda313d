"""`make` decides that .venv is stale by the content of the files it was installed from, not by their times."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT

INPUTS = ("requirements-dev.lock", "pyproject.toml")


def planned(venv: Path) -> str:
    """What `make -n validate` would run with ``venv`` as the virtualenv (nothing is run)."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    done = subprocess.run(
        ["make", "-n", "validate", f"VENV={venv}"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return done.stdout


def test_the_venv_is_stale_when_its_inputs_change_whatever_the_times(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    venv.mkdir()
    stamp = venv / ".installed"
    digest = hashlib.sha256(b"".join((ROOT / name).read_bytes() for name in INPUTS)).hexdigest()
    stamp.write_text(digest + "\n")
    os.utime(stamp, (0, 0))  # older than every input: file times would call it stale
    assert "pip install" not in planned(venv)
    stamp.write_text("0" * 64 + "\n")  # newer than every input, but made from other files
    assert "pip install" in planned(venv)
    stamp.unlink()
    assert "pip install" in planned(venv)
