"""The real tier's network-namespace launcher (tests/real/isolation.py), outside the tier: what runs inside has only
loopback, and a termination of the launcher reaches it as an interrupt, so the tier's finalizers stop its processes."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import ROOT
from tests.e2e.processes import PATIENCE_S, patience, wait_for

pytestmark = pytest.mark.skipif(
    shutil.which("unshare") is None
    or subprocess.run(["unshare", "--net", "true"], capture_output=True, check=False).returncode != 0,
    reason="unshare --net is not possible here (util-linux, and root or user namespaces)",
)

# Inside the namespace: say which interfaces it has, then wait for an interrupt and say so (the tier's pytest does
# its teardown on one).
CHILD = textwrap.dedent(
    """
    import signal, sys
    from pathlib import Path
    from tests.real.isolation import interfaces
    out = Path(sys.argv[1])
    def interrupted(signum, frame):
        out.write_text("interrupted")
        sys.exit(130)
    signal.signal(signal.SIGINT, interrupted)
    out.write_text("ready " + ",".join(interfaces()))
    while True:
        signal.pause()
    """
)


def _launch(tmp_path) -> tuple[subprocess.Popen, object]:
    out = tmp_path / "child"
    command = [sys.executable, "-m", "tests.real.isolation", sys.executable, "-c", CHILD, str(out)]
    return subprocess.Popen(command, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}), out


def _said(path, prefix: str) -> str | None:
    text = path.read_text() if path.is_file() else ""
    return text if text.startswith(prefix) else None


def test_a_terminated_launcher_interrupts_the_tier_inside_and_returns_its_status(tmp_path):
    launcher, out = _launch(tmp_path)
    try:
        said = wait_for("the command inside to start", lambda: _said(out, "ready"), patience(), [])
        assert said == "ready lo"  # a namespace of its own with only loopback
        launcher.send_signal(signal.SIGTERM)  # as a cancelled CI job or `kill` of the make does
        assert launcher.wait(timeout=PATIENCE_S) == 130
        assert out.read_text() == "interrupted"
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
