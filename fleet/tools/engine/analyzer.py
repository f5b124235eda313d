"""Run the CrossGuard policy pack (policy/) on planned stacks, over the analyzer protocol the Pulumi CLI uses.

The pack is started as ``pulumi preview --policy-pack policy`` starts it (``python policy/__main__.py`` with
``PULUMI_PROJECT``, ``PULUMI_STACK`` and ``PULUMI_DRY_RUN`` in its environment; it prints its port on the first
stdout line), then every registration goes to ``Analyze`` and the whole stack to ``AnalyzeStack``.

Inputs are sent as the engine sends them: secrets in their wire form (``{<sig>: <secret sig>, value: ...}``),
which pulumi_policy unwraps, so a policy checks the real value as it would under ``pulumi preview`` (the
policies never put property values of secrets into messages); unknowns as the unknown sentinel, which makes a
policy that reads them report "can't run policy ... during preview" as an advisory, as the CLI does.

One pack process serves any number of stacks: the policies learn their stack from each URN.
"""

from __future__ import annotations

import os
import selectors
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import empty_pb2, struct_pb2
from pulumi.runtime.proto import analyzer_pb2, analyzer_pb2_grpc

from fleet.model.core.workloads import WORKLOADS_DIR
from fleet.model.loader import POLICY_FILE
from fleet.tools.engine.mock_engine import Registration
from fleet.tools.engine.plan import PROJECT, Finding, StackPlan

ROOT = Path(__file__).resolve().parents[3]
PACK_DIR = ROOT / "policy"
# How long the pack may take to start, and to answer one call, before it is taken as hung: upper bounds a loaded
# machine does not reach (under mutation testing on 2 shared cores, the pack over the shipped fleet took 43 s in all),
# never a measure of speed; a working pack answers in seconds.
START_TIMEOUT = 300.0
CALL_TIMEOUT = 300.0


class AnalyzerError(Exception):
    """The policy pack did not start or failed while analyzing (a policy raised, for instance)."""


def _struct(inputs: dict[str, Any]) -> struct_pb2.Struct:
    s = struct_pb2.Struct()
    s.update(inputs)  # secrets are already in wire form, unknowns are the unknown sentinel string
    return s


def _options(r: Registration) -> analyzer_pb2.AnalyzerResourceOptions:
    return analyzer_pb2.AnalyzerResourceOptions(protect=r.protect, ignoreChanges=r.ignore_changes, parent=r.parent)


def _finding(d: Any, urn: str) -> Finding:
    level = "mandatory" if d.enforcementLevel == analyzer_pb2.MANDATORY else "advisory"
    return Finding(level=level, message=d.message, policy=d.policyName, urn=d.urn or urn)


class PolicyPackSession:
    """A running policy pack; ``analyze(plan)`` as often as needed, then ``close()`` (or use ``with``)."""

    def __init__(
        self,
        policy_file: Path | str = POLICY_FILE,
        project: str = PROJECT,
        stack: str = "analysis",
        pack_dir: Path = PACK_DIR,
        python: str = sys.executable,
        workloads_dir: Path | str = WORKLOADS_DIR,
    ):
        env = {
            **os.environ,
            "PULUMI_PROJECT": project,
            "PULUMI_STACK": stack,
            "PULUMI_DRY_RUN": "true",
            "GPU_FLEET_POLICY": str(Path(policy_file).resolve()),
            "GPU_FLEET_WORKLOADS": str(Path(workloads_dir).resolve()),
        }
        self._stderr = tempfile.TemporaryFile()
        self._proc = subprocess.Popen(
            [python, str(pack_dir / "__main__.py")],
            cwd=pack_dir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
        )
        self._channel: grpc.Channel | None = None
        try:
            port = self._read_port()
            self._channel = grpc.insecure_channel(f"127.0.0.1:{port}")
            grpc.channel_ready_future(self._channel).result(timeout=START_TIMEOUT)
            self._stub = analyzer_pb2_grpc.AnalyzerStub(self._channel)
            self.info = self._stub.GetAnalyzerInfo(empty_pb2.Empty(), timeout=CALL_TIMEOUT)
        except BaseException:
            self.close()
            raise

    def _pack_stderr(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")[-4000:]

    def _read_port(self) -> int:
        assert self._proc.stdout is not None
        sel = selectors.DefaultSelector()
        sel.register(self._proc.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + START_TIMEOUT
        line = b""
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not sel.select(timeout=left):
                raise AnalyzerError(f"policy pack printed no port within {START_TIMEOUT:.0f}s\n{self._pack_stderr()}")
            chunk = os.read(self._proc.stdout.fileno(), 1)
            if not chunk:
                raise AnalyzerError(f"policy pack exited with {self._proc.wait()}:\n{self._pack_stderr()}")
            line += chunk
        sel.close()
        try:
            return int(line.strip())
        except ValueError:
            raise AnalyzerError(f"policy pack printed {line!r} instead of its port\n{self._pack_stderr()}") from None

    def _call(self, method: Any, request: Any) -> Any:
        try:
            return method(request, timeout=CALL_TIMEOUT)
        except grpc.RpcError as e:
            raise AnalyzerError(f"policy pack failed: {e.details()}\n{self._pack_stderr()}") from None  # type: ignore[attr-defined]

    def analyze_registrations(self, registrations: list[Registration], whole_stack: bool = True) -> list[Finding]:
        """Findings for one stack's registrations: one ``Analyze`` each, then one ``AnalyzeStack`` (unless
        ``whole_stack`` is False: the registrations are only part of a stack, so stack policies would misfire)."""
        findings: list[Finding] = []
        resources = []
        for r in registrations:
            props = _struct(r.inputs)
            req = analyzer_pb2.AnalyzeRequest(
                type=r.type, properties=props, urn=r.urn, name=r.name, options=_options(r)
            )
            findings += [_finding(d, r.urn) for d in self._call(self._stub.Analyze, req).diagnostics]
            resources.append(
                analyzer_pb2.AnalyzerResource(
                    type=r.type, properties=props, urn=r.urn, name=r.name, options=_options(r), parent=r.parent
                )
            )
        if not whole_stack:
            return findings
        stack_req = analyzer_pb2.AnalyzeStackRequest(resources=resources)
        findings += [_finding(d, "") for d in self._call(self._stub.AnalyzeStack, stack_req).diagnostics]
        return findings

    def analyze(self, plan: StackPlan) -> list[Finding]:
        """Policy findings of one planned stack."""
        return self.analyze_registrations(plan.registrations)

    def close(self) -> None:
        """Stop the pack process (always; it would otherwise serve forever)."""
        if self._channel is not None:
            self._channel.close()
            self._channel = None
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        if self._proc.stdout is not None:
            self._proc.stdout.close()
        self._stderr.close()

    def __enter__(self) -> PolicyPackSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def analyze_plans(
    plans: Iterable[StackPlan],
    project: str = PROJECT,
    policy_file: Path | str = POLICY_FILE,
    workloads_dir: Path | str = WORKLOADS_DIR,
) -> dict[str, list[Finding]]:
    """Policy findings of each plan (by stack name), with a single pack process."""
    plans = list(plans)
    if not plans:
        return {}
    with PolicyPackSession(policy_file, project, stack=plans[0].stack, workloads_dir=workloads_dir) as session:
        return {p.stack: session.analyze(p) for p in plans}


def analyze(plan: StackPlan, project: str = PROJECT, policy_file: Path | str = POLICY_FILE) -> list[Finding]:
    """Policy findings of one plan (starts and stops a pack process; prefer ``analyze_plans`` for several)."""
    return analyze_plans([plan], project, policy_file)[plan.stack]
