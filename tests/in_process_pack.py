"""The policy pack served inside the test process, for mutation testing only (``make mutation``).

mutmut copies the code into ``mutants/``, routes each mutated function through a trampoline chosen by the
``MUTANT_UNDER_TEST`` environment variable, and learns which tests reach a function by recording calls in the test
process. A pack started as the Pulumi CLI starts it (``fleet/tools/engine/analyzer.py``: ``python policy/__main__.py``)
runs the policies in another process, under another module name (``gpufleet_policies.*``, not
``policy.gpufleet_policies.*``): mutmut would never see a test reach a policy, nor switch a policy's mutant on. So
under mutmut, ``PolicyPackSession`` answers from pulumi_policy's own analyzer servicer, built from the same
``POLICIES`` and called with the same requests in this process; everything else in the session is unchanged.
``tests/policy/test_pack.py`` checks both give the same findings.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pulumi_policy import EnforcementLevel
from pulumi_policy.policy import _PolicyAnalyzerServicer

from fleet.tools.engine import analyzer

#: Set by mutmut in every process it runs tests in.
MUTMUT_ENV = "MUTANT_UNDER_TEST"


def under_mutmut() -> bool:
    """Whether the tests run under mutmut (``make mutation``)."""
    return MUTMUT_ENV in os.environ


class _Servicer:
    """The analyzer stub's calls answered by the pack's servicer in this process, with the environment a pack process
    of this session would have (the policy file and workloads the policies read)."""

    def __init__(self, env: dict[str, str]):
        from policy.gpufleet_policies import POLICIES  # the pack as the mutated copy names it

        self._env = env
        self._servicer = _PolicyAnalyzerServicer("gpu-fleet", "0.0.1", POLICIES, EnforcementLevel.MANDATORY)
        self.Analyze = self._call(self._servicer.Analyze)
        self.AnalyzeStack = self._call(self._servicer.AnalyzeStack)
        self.GetAnalyzerInfo = self._call(self._servicer.GetAnalyzerInfo)

    def _call(self, method: Callable[[Any, Any], Any]) -> Callable[..., Any]:
        def call(request: Any, timeout: float | None = None) -> Any:
            with _environment(self._env):
                return method(request, None)

        return call


@contextmanager
def _environment(env: dict[str, str]) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class _Stopped:
    """Stands for the pack process a session in this process does not have."""

    def poll(self) -> int:
        return 0


class InProcessPackSession(analyzer.PolicyPackSession):
    """A ``PolicyPackSession`` whose pack runs in this process (same policies, same requests, same findings)."""

    def __init__(
        self,
        policy_file: Path | str = analyzer.POLICY_FILE,
        project: str = analyzer.PROJECT,
        stack: str = "analysis",
        pack_dir: Path = analyzer.PACK_DIR,
        python: str = "",
        workloads_dir: Path | str = analyzer.WORKLOADS_DIR,
    ):
        env = {
            "PULUMI_PROJECT": project,
            "PULUMI_STACK": stack,
            "PULUMI_DRY_RUN": "true",
            "GPU_FLEET_POLICY": str(Path(policy_file).resolve()),
            "GPU_FLEET_WORKLOADS": str(Path(workloads_dir).resolve()),
        }
        self._proc = _Stopped()  # type: ignore[assignment]
        self._stub = _Servicer(env)
        self.info = self._stub.GetAnalyzerInfo(None)

    def _call(self, method: Callable[..., Any], request: Any) -> Any:
        return method(request)

    def close(self) -> None:
        """Nothing to stop."""


def serve_the_pack_in_process() -> None:
    """Make every ``PolicyPackSession`` of this test process answer in-process (see the module's docstring)."""
    for name in ("__init__", "_call", "close"):
        setattr(analyzer.PolicyPackSession, name, getattr(InProcessPackSession, name))
