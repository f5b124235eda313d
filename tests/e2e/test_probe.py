"""The pool probe end to end on this machine: the real files/probe.sh, run as its pod runs it, and the real mtail over
the log it writes (there is no accelerator here, so the NVIDIA check fails and the probe says so; a check that
passes is shown with `true` standing in for nvidia-smi, and only there)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from fleet.model.core.workloads import PROBE_DIR, load_workload
from tests.conftest import require_tool
from tests.e2e.support import one_shot, run_probe

pytestmark = pytest.mark.e2e
PROBE = load_workload(PROBE_DIR)


def probe_metrics(mtail: str, log: Path) -> dict:
    samples = one_shot(mtail, PROBE_DIR / "mtail", log)
    return {k[0]: v for k, v in samples.items() if k[0].startswith("gpufleet_probe_")}


def test_no_accelerator_here_is_a_failed_probe_with_its_wait(tmp_path: Path) -> None:
    mtail = require_tool("mtail")
    log = tmp_path / "probe.log"
    before = int(time.time())
    # scheduled three minutes (and some seconds) before `before`, the same reading: a second ticking between two
    # readings of the clock on a loaded machine would put the wait past the bounds below
    minute = before // 60 - 3
    assert run_probe(log, f"probe-t4-1a2b3c4d-{minute}") == 1
    after = int(time.time())
    got = probe_metrics(mtail, log)
    assert got["gpufleet_probe_success"] == 0
    assert before <= got["gpufleet_probe_last_run_timestamp_seconds"] <= after
    assert got["gpufleet_probe_scaleup_seconds"] == got["gpufleet_probe_last_run_timestamp_seconds"] - minute * 60
    assert 180 <= got["gpufleet_probe_scaleup_seconds"] < 240 + (after - before)
    assert {m.name for m in PROBE.spec.metrics} == set(got)


def test_a_passing_check_and_a_job_started_by_hand(tmp_path: Path) -> None:
    mtail = require_tool("mtail")
    stand_in = tmp_path / "bin"
    stand_in.mkdir()
    (stand_in / "nvidia-smi").symlink_to("/bin/true")
    log = tmp_path / "probe.log"
    # kubectl create job --from=cronjob/...: no scheduled minute in the name, so no scale-up time
    assert run_probe(log, "probe-by-hand", path=f"{stand_in}:/usr/bin:/bin") == 0
    got = probe_metrics(mtail, log)
    assert got["gpufleet_probe_success"] == 1
    assert "gpufleet_probe_scaleup_seconds" not in got
    assert "scheduled=unknown" in log.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    "job_name", ["probe-manual-1", "probe-t4-1a2b3c4d-0000000008", "probe-t4-1a2b3c4d-99999999999"]
)
def test_a_job_name_that_holds_no_recent_scheduled_minute_gives_no_wait(tmp_path: Path, job_name: str) -> None:
    """Made by hand (a name ending in digits, a leading zero, a time in the future): no scale-up time, no crash."""
    mtail = require_tool("mtail")
    log = tmp_path / "probe.log"
    assert run_probe(log, job_name) == 1  # the check fails here (no GPU), and the probe says so: it still reports
    assert "scheduled=unknown" in log.read_text(encoding="utf-8")
    got = probe_metrics(mtail, log)
    assert got["gpufleet_probe_success"] == 0 and "gpufleet_probe_scaleup_seconds" not in got


@pytest.mark.parametrize("accelerator", ["google.com/tpu", "aws.amazon.com/neuron", "example.com/npu"])
def test_other_accelerators_look_for_their_devices(tmp_path: Path, accelerator: str) -> None:
    log = tmp_path / "probe.log"
    minute = int(time.time()) // 60
    assert run_probe(log, f"probe-tpu-v5e-1a2b3c4d-{minute}", accelerator) == 1  # no such device here
    assert f"accelerator={accelerator} scheduled={minute * 60} " in log.read_text(encoding="utf-8")


def test_the_shipped_sample_log_is_a_real_run(tmp_path: Path) -> None:
    mtail = require_tool("mtail")
    got = probe_metrics(mtail, PROBE.sample_log)
    assert got == {
        "gpufleet_probe_success": 0,
        "gpufleet_probe_last_run_timestamp_seconds": 1795500728,
        "gpufleet_probe_scaleup_seconds": 8,
    }
