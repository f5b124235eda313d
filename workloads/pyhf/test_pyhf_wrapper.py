"""Tests of the pyhf workload's own code (files/timed_fit.py, the timing wrapper): they live in the workload's
folder, so a fleet that drops the workload drops its tests with it. They read the folder they are in (``HERE``), so a
copy of the folder under another name tests the copy."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from fleet.model.core.workloads import FILES_MOUNT, load_workload

HERE = Path(__file__).resolve().parent


def load_timed_fit():
    """The wrapper as a module; it imports pyhf only inside main(), so this works without pyhf."""
    path = HERE / "files" / "timed_fit.py"
    spec = importlib.util.spec_from_file_location("timed_fit", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_pyhf_wrapper_is_mounted_where_the_command_runs_it() -> None:
    workload = load_workload(HERE)
    assert "timed_fit.py" in workload.files
    assert workload.spec.command == ["python3", f"{FILES_MOUNT}/timed_fit.py"]
    compile(workload.files["timed_fit.py"], "timed_fit.py", "exec")


def test_pyhf_wrapper_prints_the_line_the_program_parses() -> None:
    timed_fit = load_timed_fit()
    assert timed_fit.fit_line("fit", "jax", 0.41234, 0.052301) == (
        "pyhf fit backend=jax duration_seconds=0.4123 cls_obs=0.052301"
    )
    assert timed_fit.fit_line("warmup", "numpy", 7.5, 1.5e-05).startswith("pyhf warmup backend=numpy ")
    sample = (HERE / "sample.log").read_text(encoding="utf-8")
    fits = [line for line in sample.splitlines() if line.startswith("pyhf fit ")]
    args = timed_fit.parse_args(load_workload(HERE).spec.args)
    assert len(fits) == args.fits
    assert args.backend == "jax"


def test_pyhf_wrapper_builds_a_deterministic_spectrum() -> None:
    signal, background, uncertainty, observed = load_timed_fit().synthetic_spectrum(200)
    assert len(signal) == len(background) == len(uncertainty) == len(observed) == 200
    assert max(signal) == pytest.approx(25.0, rel=1e-3)
    assert observed == [float(round(b)) for b in background]


def test_pyhf_wrapper_rejects_nonsense_counts() -> None:
    with pytest.raises(SystemExit):
        load_timed_fit().parse_args(["--fits", "0"])
