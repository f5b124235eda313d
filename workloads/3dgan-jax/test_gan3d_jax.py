"""Tests of the 3dgan-jax workload's own code (files/gan3d_jax.py) that need no JAX: its lines are the ones the mtail
program parses, its options are checked, the synthetic showers keep their energy, and the checkpoint round-trips.
The training itself runs in record_sample.py (with JAX), whose output is the shipped sample.log."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fleet.model.core.workloads import FILES_MOUNT, load_workload

HERE = Path(__file__).resolve().parent  # the folder it is in: a copy under another name tests the copy


def load_script():
    """The script as a module; it imports jax only inside its functions' callers, so this works without JAX."""
    spec = importlib.util.spec_from_file_location("gan3d_jax", HERE / "files" / "gan3d_jax.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_script_is_mounted_where_the_command_runs_it() -> None:
    workload = load_workload(HERE)
    assert "gan3d_jax.py" in workload.files
    assert workload.spec.command == ["python3", f"{FILES_MOUNT}/gan3d_jax.py"]


def test_an_epoch_line_carries_what_the_mtail_program_reads() -> None:
    script = load_script()
    text = script.line(
        "epoch", epoch=2, seconds=4.81234, steps=8, d_loss=1.5, g_loss=2.0, accelerators=4, worker=1, attempt="0"
    )
    timing = "gan3d-jax epoch epoch=2 seconds=4.8123 steps=8 d_loss=1.5000 g_loss=2.0000"
    assert text == f"{timing} accelerators=4 worker=1 attempt=0"
    program = (HERE / "mtail" / f"{HERE.name}.mtail").read_text(encoding="utf-8")
    assert "accelerators=(?P<accelerators>" in program and "attempt=(?P<attempt>" in program


@pytest.mark.parametrize("flag", ["--epochs=0", "--samples-per-epoch=0", "--batch-per-device=0"])
def test_bad_options_are_refused_with_a_message(flag: str) -> None:
    run = subprocess.run(
        [sys.executable, str(HERE / "files" / "gan3d_jax.py"), flag], capture_output=True, text=True, timeout=30
    )
    assert run.returncode == 2 and "must be at least 1" in run.stderr and "Traceback" not in run.stderr


def test_synthetic_showers_hold_their_energy() -> None:
    script = load_script()
    images, energy = script.synthetic_showers(np, np.random.default_rng(3), 5)
    assert images.shape == (5, *script.IMAGE, 1) and images.dtype == np.float32
    assert np.allclose(images.sum(axis=(1, 2, 3, 4)), 0.02 * energy, rtol=1e-4)
    assert ((1.0 <= energy) & (energy <= 5.0)).all()


class _Tree:
    """The two tree functions the checkpoint helpers use, for plain dicts of arrays (no JAX here)."""

    class tree:  # noqa: N801 - stands for jax.tree
        @staticmethod
        def leaves(tree):
            return [tree[k] for k in sorted(tree)] if isinstance(tree, dict) else [tree]

        @staticmethod
        def structure(tree):
            keys = sorted(tree)

            class Def:
                num_leaves = len(keys)

            return Def

        @staticmethod
        def unflatten(_, leaves):
            return leaves


def test_a_checkpoint_round_trips_and_is_replaced_atomically(tmp_path: Path) -> None:
    script = load_script()
    params, opt = np.arange(3.0), np.ones(2)
    script.save_checkpoint(np, _Tree, str(tmp_path), 2, params, opt)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.npz"]  # the temporary file was renamed
    with np.load(tmp_path / "checkpoint.npz") as saved:
        assert int(saved["epoch"]) == 2 and len([k for k in saved.files if k.startswith("leaf")]) == 2
    assert script.load_checkpoint(np, _Tree, str(tmp_path / "none"), params, opt) == (0, params, opt)


def test_the_sample_log_is_a_multi_worker_run_with_a_restart() -> None:
    text = load_workload(HERE).sample_log.read_text(encoding="utf-8")
    starts = re.findall(
        r"^gan3d-jax start processes=(\d+) .* accelerators=(\d+) worker=(\d+) attempt=(\d+)$", text, re.M
    )
    assert any(int(processes) > 1 for processes, *_ in starts)
    assert len({accelerators for _, accelerators, *_ in starts}) >= 3
    assert any(attempt != "0" for *_, attempt in starts) and "gan3d-jax resumed epoch=" in text
