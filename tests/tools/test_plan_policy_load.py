"""The offline plan reads the policy once: the command line's load is the one the programs it runs find cached (the
cache knows a file by its resolved path), not a second parse and check of the whole fleet per command."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import fleet.model.loader as loader
from fleet.tools.cli import main
from tests.conftest import FIXTURES

FLEET_DIR = FIXTURES / "plan"
POLICY = FLEET_DIR / "fleet.yaml"
STACKS = FLEET_DIR / "stacks"
WORKLOADS = FIXTURES / "fleet" / "workloads"


@pytest.fixture
def policy_reads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every read of a policy file by the loader, resolved; the cache emptied before and after."""
    reads: list[Path] = []
    real = loader.read_yaml

    def counted(path, *args, **kwargs):  # type: ignore[no-untyped-def]
        reads.append(Path(path).resolve())
        return real(path, *args, **kwargs)

    loader.clear_fleet_cache()
    monkeypatch.setattr(loader, "read_yaml", counted)
    yield reads
    loader.clear_fleet_cache()


def test_plan_parses_the_policy_file_once(policy_reads: list[Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """The policy named relative to the working directory (as a user types it), the program's own absolute path."""
    monkeypatch.chdir(FLEET_DIR)
    args = ["--policy", "fleet.yaml", "--stacks-dir", "stacks", "--workloads-dir", os.path.relpath(WORKLOADS)]
    assert main(["plan", "--no-policy-pack", *args]) == 0
    assert policy_reads == [POLICY.resolve()]


def test_one_entry_per_file_however_it_is_named(policy_reads: list[Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(FLEET_DIR)
    first = loader.load_fleet_cached(Path("fleet.yaml"), Path(os.path.relpath(WORKLOADS)))
    assert loader.load_fleet_cached(POLICY.resolve(), WORKLOADS.resolve()) is first
    assert loader.load_fleet_cached(str(FLEET_DIR / ".." / "plan" / "fleet.yaml"), WORKLOADS) is first
    assert len(policy_reads) == 1


def test_reload_reads_the_files_again(policy_reads: list[Path]) -> None:
    """A command reads afresh (a workload edited between two commands in one process is seen), and its fleet is the
    one the cache then gives."""
    first = loader.load_fleet_cached(POLICY, WORKLOADS)
    again = loader.load_fleet_cached(POLICY, WORKLOADS, reload=True)
    assert again is not first and loader.load_fleet_cached(POLICY, WORKLOADS) is again
    assert len(policy_reads) == 2
