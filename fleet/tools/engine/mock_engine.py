"""Pulumi's mock engine made strict: it records what a program registers and fails where the real engine would.

``RecordingMonitor`` keeps every registration (type, name, parent, provider, options, inputs as the engine
receives them) and the stack's exports. ``FleetMocks`` answers resources with plausible computed outputs
from ``mock_outputs.yaml`` and refuses invokes it does not know, so a new invoke is noticed.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import pulumi
import yaml
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import rpc
from pulumi.runtime.mocks import _resolve_callbacks
from pulumi.runtime.proto import resource_pb2
from pulumi.runtime.sync_await import _ensure_event_loop, _sync_await

from fleet.tools.interrupts import pause_for_tests

MOCK_OUTPUTS = Path(__file__).with_name("mock_outputs.yaml")
SECRET = "[secret]"
UNKNOWN = "[unknown]"


class PlanError(Exception):
    """The program did something the real engine would reject (duplicate URN, implicit provider...)."""


@dataclass
class Registration:
    """One resource as the engine received it."""

    urn: str
    type: str
    name: str
    parent: str
    provider: str
    custom: bool
    protect: bool
    ignore_changes: list[str]
    inputs: dict[str, Any]  # secrets kept wrapped (see ``plain_inputs``)
    secret_outputs: list[str] = field(default_factory=list)
    retain_on_delete: bool = False
    dependencies: list[str] = field(default_factory=list)  # URNs of its depends_on (and of its inputs' resources)

    def plain_inputs(self) -> dict[str, Any]:
        """Inputs with every secret value shown as ``[secret]`` (maps and lists keep their shape) and unknowns
        as ``[unknown]``: safe to print."""
        return _redact(self.inputs)


def _as_written(value: Any) -> tuple[Any, bool]:
    """``value`` with whole numbers as integers (they cross the wire as doubles; the program wrote integers),
    and whether it holds an unknown: one walk, since every registration goes through it."""
    if isinstance(value, float) and value.is_integer():
        return int(value), False
    if isinstance(value, dict):
        pairs = [(k, *_as_written(v)) for k, v in value.items()]
        return {k: v for k, v, _ in pairs}, any(u for _, _, u in pairs)
    if isinstance(value, list):
        items = [_as_written(v) for v in value]
        return [v for v, _ in items], any(u for _, u in items)
    return value, value == rpc.UNKNOWN


def _redact(value: Any, secret: bool = False) -> Any:
    """``value`` with secrets replaced by ``[secret]``, keeping the shape: a secret map keeps its keys."""
    if rpc.is_rpc_secret(value):
        return _redact(rpc.unwrap_rpc_secret(value), secret=True)
    if isinstance(value, dict):
        return {k: _redact(v, secret) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact(v, secret) for v in value]
    if secret:
        return SECRET
    if value == rpc.UNKNOWN:
        return UNKNOWN
    return value


@lru_cache(maxsize=1)
def _mock_outputs() -> dict[str, Any]:
    return yaml.safe_load(MOCK_OUTPUTS.read_text(encoding="utf-8"))


def _fill(value: Any, name: str) -> Any:
    if isinstance(value, str):
        return value.replace("{name}", name)
    if isinstance(value, dict):
        return {k: _fill(v, name) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, name) for v in value]
    return value


class FleetMocks(pulumi.runtime.Mocks):
    """Answers resources and invokes like the clouds would, strictly.

    ``stack_outputs`` maps a referenced stack name to its outputs and the names of its secret outputs,
    so a ``StackReference`` sees what the plan of that stack exported.
    """

    def __init__(self, stack_outputs: dict[str, tuple[dict[str, Any], list[str]]] | None = None):
        self.stack_outputs = stack_outputs or {}

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        if args.typ == "pulumi:pulumi:StackReference":
            name = args.inputs.get("name", args.name)
            stack = str(name).rsplit("/", 1)[-1]
            if stack not in self.stack_outputs:
                raise PlanError(f"StackReference to {name!r}: that stack has not been planned (plan it too)")
            outputs, secret_names = self.stack_outputs[stack]
            return name, {"name": name, "outputs": outputs, "secretOutputNames": secret_names}
        # _fill builds new dicts and lists, so the cached answers are never shared or changed
        computed = _fill(_mock_outputs()["resources"].get(args.typ, {}), args.name)
        return f"{args.name}-id", {**args.inputs, **computed}

    def call(self, args: pulumi.runtime.MockCallArgs) -> dict[str, Any]:
        answers = _mock_outputs()["invokes"]
        if args.token not in answers:
            raise PlanError(
                f"invoke {args.token} is not known to the offline plan: add its answer to {MOCK_OUTPUTS.name}"
            )
        return copy.deepcopy(answers[args.token])


# Features the SDK asks the engine about whose answer changes what the plan's program does, answered as the pinned
# Pulumi CLI answers them: pulumi/pulumi pkg/v3 v3.274.0, pkg/resource/deploy/source_eval.go, resmon.supportsFeatureID
# (``case "aliasSpecs": return true``) and resmon.supportedMonitorFeatures (RESOURCE_MONITOR_FEATURE_ALIAS_SPECS).
# With alias specs the SDK sends each alias as declared and the engine derives the alias URNs, so the SDK's own URN
# work for aliases is not needed (fleet/tools/engine/sdk_speedups.py). The stock mock monitor's other answers stand
# (it says no to output values on purpose, so that the mocks see plain inputs).
AS_THE_ENGINE = {"aliasSpecs": resource_pb2.RESOURCE_MONITOR_FEATURE_ALIAS_SPECS}


class RecordingMonitor(pulumi_mocks.MockMonitor):
    """A mock resource monitor that records registrations and rejects what the real engine rejects."""

    def __init__(self, mocks: pulumi.runtime.Mocks):
        super().__init__(mocks)
        self.registrations: dict[str, Registration] = {}
        self.stack_exports: dict[str, Any] = {}
        self.problems: list[str] = []

    def SupportsFeature(self, request: Any) -> Any:  # noqa: N802 (gRPC method name)
        """The stock mock's answer, but the features of ``AS_THE_ENGINE`` answered as the pinned CLI does."""
        if request.id in AS_THE_ENGINE:
            return resource_pb2.SupportsFeatureResponse(hasSupport=True)
        return super().SupportsFeature(request)

    def GetDeploymentInfo(self, request: Any) -> Any:  # noqa: N802
        """The stock mock's deployment info, with the features of ``AS_THE_ENGINE`` supported as by the pinned CLI."""
        info = super().GetDeploymentInfo(request)
        missing = [f for f in AS_THE_ENGINE.values() if f not in info.supportedFeatures]
        info.supportedFeatures.extend(missing)
        return info

    def RegisterResource(self, request: Any) -> Any:  # noqa: N802 (gRPC method name)
        """Record the registration and answer it like ``MockMonitor`` does, decoding the inputs only once
        (the stock monitor decodes them again, which is a tenth of a large plan's time)."""
        urn = self.make_urn(request.parent, request.type, request.name)
        if request.type == "pulumi:pulumi:Stack":
            return resource_pb2.RegisterResourceResponse(urn=urn)
        _ensure_event_loop()  # deserialising resource references needs a loop on this thread
        pause_for_tests("engine")  # a test interrupts the plan here, with the engine's threads running
        inputs = rpc.deserialize_properties(request.object, keep_unknowns=True)
        recorded, has_unknown = _as_written(inputs)
        if urn in self.registrations:
            # The real engine fails the update on a duplicate URN; the stock mocks accept it silently.
            self.problems.append(f"duplicate resource URN {urn}")
        self.registrations[urn] = Registration(
            urn=urn,
            type=request.type,
            name=request.name,
            parent=request.parent,
            provider=request.provider,
            custom=bool(request.custom),
            protect=bool(request.protect),
            ignore_changes=list(request.ignoreChanges),
            inputs=recorded,
            secret_outputs=list(request.additionalSecretOutputs),
            retain_on_delete=bool(request.retainOnDelete),
            dependencies=list(request.dependencies),
        )
        if has_unknown:
            inputs = rpc.deserialize_properties(request.object)  # the mocks see unknowns dropped, as stock
        resource_args = pulumi.runtime.MockResourceArgs(
            typ=request.type,
            name=request.name,
            inputs=inputs,
            provider=request.provider,
            resource_id=request.importId,
            custom=request.custom or False,
            transforms=_resolve_callbacks(request.transforms),
        )
        id_, state = self.mocks.new_resource(resource_args)
        state_proto = _sync_await(rpc.serialize_properties(state, {}))
        self.resources[urn] = pulumi_mocks.MockMonitor.ResourceRegistration(urn, id_, state)
        return resource_pb2.RegisterResourceResponse(urn=urn, id=id_, object=state_proto)

    def ReadResource(self, request: Any) -> Any:  # noqa: N802
        urn = self.make_urn(request.parent, request.type, request.name)
        self.registrations[urn] = Registration(
            urn=urn,
            type=request.type,
            name=request.name,
            parent=request.parent,
            provider=request.provider,
            custom=True,
            protect=False,
            ignore_changes=[],
            inputs=_as_written(rpc.deserialize_properties(request.properties, keep_unknowns=True))[0],
        )
        return super().ReadResource(request)

    def RegisterResourceOutputs(self, request: Any) -> Any:  # noqa: N802
        if "::pulumi:pulumi:Stack::" in request.urn:
            self.stack_exports = rpc.deserialize_properties(request.outputs, keep_unknowns=True)
        return super().RegisterResourceOutputs(request)

    def check(self) -> list[str]:
        """What the real engine (with ``pulumi:disable-default-providers: ["*"]``) would reject."""
        problems = list(self.problems)
        for reg in self.registrations.values():
            is_provider = reg.type.startswith("pulumi:providers:")
            if reg.custom and not is_provider and not reg.type.startswith("pulumi:pulumi:") and not reg.provider:
                problems.append(f"{reg.urn} uses a default provider: every resource needs an explicit provider")
        return problems
