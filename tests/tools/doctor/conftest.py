"""Fixtures of the doctor's tests: the fixture fleet, and ``python -m fleet doctor`` run on a world served on
loopback (tests/tools/doctor/fake_kube_api.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fleet.model.core.fleet import Fleet
from fleet.model.loader import load_fleet
from tests.tools.doctor.fake_kube_api import ApiServer, World, write_kubeconfig
from tests.tools.doctor.support import POLICY, STACKS, WORKLOADS, Result, doctor_at


@pytest.fixture(scope="module")
def fleet() -> Fleet:
    """The tests' own fixture fleet (tests/fixtures/fleet)."""
    return load_fleet(POLICY, WORKLOADS)


@pytest.fixture
def run_doctor(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Iterator[Any]:
    """Run ``python -m fleet doctor`` on a world served on loopback; returns the exit status, output and requests."""

    def run(world: World, stack: str, *extra: str) -> Result:
        with ApiServer(world) as api:
            kubeconfig = write_kubeconfig(tmp_path / "kubeconfig.yaml", api.url)
            status = doctor_at(
                [
                    "doctor",
                    "--policy",
                    str(POLICY),
                    "--workloads-dir",
                    str(WORKLOADS),
                    "--stacks-dir",
                    str(STACKS),
                    "--stack",
                    stack,
                    "--kubeconfig",
                    str(kubeconfig),
                    "--timeout",
                    "5",
                    *extra,
                ]
            )
            captured = capsys.readouterr()
            return Result(status, captured.out, captured.err, list(api.requests))

    yield run
