"""Shared test fixtures: external tools that skip locally but must be present in CI."""

from __future__ import annotations

import os
import shutil
import signal
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: The tests' own data; fixtures/fleet is a small fleet of every cloud with its own workloads.
FIXTURES = ROOT / "tests" / "fixtures"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

REQUIRE_TOOLS_ENV = "GPU_FLEET_REQUIRE_TOOLS"


def require_tool(name: str) -> str:
    """Path of an external tool; skips the test locally when it is missing, fails when CI requires tools."""
    path = shutil.which(name)
    if path:
        return path
    reason = f"{name} is not installed (apt-get install -y prometheus mtail nginx-light)"
    if os.environ.get(REQUIRE_TOOLS_ENV) == "1":
        pytest.fail(f"{reason}, and {REQUIRE_TOOLS_ENV}=1 requires it")
    pytest.skip(reason)


#: Upstream data the tests read (charts, CRDs): ../shared beside the checkout, or GPU_FLEET_SHARED.
SHARED_ENV = "GPU_FLEET_SHARED"


def shared_data(env: str, relative: str, what: str) -> Path:
    """A folder of the shared upstream data (charts, CRDs): ``$env``, else ``../shared/<relative>`` beside the
    repository (or under ``$GPU_FLEET_SHARED``), else ``/work/shared/<relative>`` (a git worktree's ``..`` is not
    the checkout's); skips the test locally when it is missing, fails when CI requires tools (``.ci/run`` exports
    ``env``)."""
    configured = os.environ.get(env)
    shared = Path(os.environ.get(SHARED_ENV, ROOT.parent / "shared"))
    candidates = [Path(configured)] if configured else [shared / relative, Path("/work/shared") / relative]
    for path in candidates:
        if path.is_dir() and any(path.iterdir()):
            return path
    reason = f"{what} not found (looked in {', '.join(map(str, candidates))}; set {env})"
    if os.environ.get(REQUIRE_TOOLS_ENV) == "1":
        pytest.fail(f"{reason}, and {REQUIRE_TOOLS_ENV}=1 requires it")
    pytest.skip(reason)


def pytest_configure(config: pytest.Config) -> None:
    """Under mutmut (``make mutation``) the policy pack answers in the test process, where mutmut sees it
    (tests/in_process_pack.py says why). A suite started with SIGINT ignored (in the background of a shell script,
    under nohup, by some CI runners) would hand that on to every command it runs, and the tests that interrupt one
    would wait for it in vain: Python keeps an ignored SIGINT ignored (no KeyboardInterrupt), and so does exec. With
    a handler here, the commands start with the default, as from a terminal."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    from tests.in_process_pack import serve_the_pack_in_process, under_mutmut

    if under_mutmut():
        serve_the_pack_in_process()
