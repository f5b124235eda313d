"""A team's own fleet in place of the sample, as README "Make it your own" says: a copy of the repository whose
policy/fleet.yaml, stacks/ and workloads/ are the lab fleet of tests/fixtures/ownfleet (its own registry, clusters,
cards, workloads, runners, sweep and billing accounts), with pytest run there. Tests that derive every expectation
from the policy and their own fixtures pass on it unchanged; a test welded to the sample fails.

    python -m tests.own_fleet [PYTEST ARGS]    # the whole suite on the lab's fleet (.ci/run does, in CI)

tests/test_own_fleet.py runs the tests that read the shipped fleet this way within the suite.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
OWN_FLEET = ROOT / "tests" / "fixtures" / "ownfleet"
# What a copy of the repository leaves out: the virtualenv, git's data, caches and outputs.
NOT_COPIED = (".venv", ".git", "__pycache__", ".pytest_cache", ".ruff_cache", ".hypothesis", "out", "build")
# Set in the copy's pytest: tests/test_own_fleet.py, the harness, does not run there again.
IN_COPY_ENV = "GPU_FLEET_OWN_FLEET_COPY"


def make_copy(dest: Path) -> Path:
    """Copy the repository to ``dest`` with the lab's fleet in place of the sample's; return ``dest``."""
    shutil.copytree(ROOT, dest, ignore=shutil.ignore_patterns(*NOT_COPIED, "*.egg-info"), symlinks=True)
    if (ROOT / ".venv").is_dir():  # a team's checkout has its environment (the device plugin's post-renderer runs it)
        (dest / ".venv").symlink_to(ROOT / ".venv", target_is_directory=True)
    for sample in ("stacks", "workloads"):
        shutil.rmtree(dest / sample)
        shutil.copytree(OWN_FLEET / sample, dest / sample)
    policy = (OWN_FLEET / "fleet.yaml").read_text(encoding="utf-8")
    schema = "$schema=../../../policy/fleet.schema.json"
    (dest / "policy" / "fleet.yaml").write_text(policy.replace(schema, "$schema=./fleet.schema.json"), "utf-8")
    # README "Make it your own", what to delete: the examples that place workloads the team no longer has
    kept = {p.name for p in (dest / "workloads").iterdir() if (p / "workload.yaml").is_file()}
    for example in sorted((dest / "examples").glob("*/fleet.yaml")):
        placed = set((yaml.safe_load(example.read_text(encoding="utf-8")) or {}).get("workloads") or {})
        if not placed <= kept:
            shutil.rmtree(example.parent)
    # a team's repository is a git repository with its fleet committed (`affected` compares with a base)
    git = ["git", "-c", "user.name=lab", "-c", "user.email=lab@example.org", "-c", "commit.gpgsign=false"]
    for command in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "the lab's fleet"]):
        subprocess.run([*git, *command], cwd=dest, check=True, capture_output=True)
    return dest


def run_pytest(copy: Path, args: list[str], timeout: float | None = None) -> subprocess.CompletedProcess[str]:
    """pytest ``args`` in ``copy`` with this Python, its output captured; the copy's code is what runs."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}  # no xdist worker state
    env[IN_COPY_ENV] = "1"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=copy,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def main(argv: list[str] | None = None) -> int:
    """Copy, swap the fleet, run pytest with ``argv`` (default: the whole suite on two workers); its exit status."""
    args = list(sys.argv[1:] if argv is None else argv) or ["-q", "-n", "2"]
    with tempfile.TemporaryDirectory(prefix="own-fleet-") as tmp:
        copy = make_copy(Path(tmp) / "repo")
        print(f"the lab's fleet (tests/fixtures/ownfleet) in place of the sample, in {copy}", flush=True)
        env = {**os.environ, IN_COPY_ENV: "1"}
        done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=copy, env=env)
        return done.returncode


if __name__ == "__main__":
    sys.exit(main())
