"""The repository's YAML passes `yamllint --strict` with the repository's .yamllint, in the suite and not only in CI.

.ci/run runs the same command before the tests (a quick failure on a clean checkout); this test makes `make test`
catch a long line or a stale path in .yamllint's ignore list too, so a local run and CI agree.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def test_every_path_yamllint_ignores_exists() -> None:
    config = yaml.safe_load((ROOT / ".yamllint").read_text())
    ignored = config["rules"]["line-length"]["ignore"].split()
    missing = [path for path in ignored if not (ROOT / path).exists()]
    assert not missing, f".yamllint ignores files that do not exist (moved or renamed?): {missing}"


def test_the_repositorys_yaml_passes_yamllint_strict() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "yamllint", "--strict", "-f", "parsable", "."],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, f"yamllint --strict . failed:\n{result.stdout}{result.stderr}"
