"""Alias work as the engine asks for it: the mock engine answers ``aliasSpecs`` as the pinned CLI, the engine receives
the same alias specs with the SDK stand-in as without it, and the stand-in leaves the SDK's alias URNs alone where
an engine wants them."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import Any

import pulumi
import pytest
from google.protobuf import empty_pb2
from pulumi.runtime import settings
from pulumi.runtime.proto import resource_pb2

from fleet.model.loader import POLICY_FILE, load_fleet
from fleet.tools.engine import sdk_speedups
from fleet.tools.engine.mock_engine import FleetMocks, RecordingMonitor
from tests.tools.planning import planned

ALIAS_SPECS = resource_pb2.RESOURCE_MONITOR_FEATURE_ALIAS_SPECS


def test_the_mock_engine_takes_alias_specs_as_the_cli_does() -> None:
    """pulumi/pulumi pkg/v3 v3.274.0 resource/deploy/source_eval.go: ``case "aliasSpecs": return true``."""
    monitor = RecordingMonitor(FleetMocks())
    assert monitor.SupportsFeature(resource_pb2.SupportsFeatureRequest(id="aliasSpecs")).hasSupport
    assert ALIAS_SPECS in monitor.GetDeploymentInfo(empty_pb2.Empty()).supportedFeatures
    # the stock mock's deliberate no stays: the mocks see plain inputs, not Outputs
    assert not monitor.SupportsFeature(resource_pb2.SupportsFeatureRequest(id="outputValues")).hasSupport


def test_the_sdk_reads_alias_urns_only_for_an_engine_without_alias_specs() -> None:
    """The stand-in keeps ``Resource._aliases`` unresolved because the SDK reads it nowhere but in ``all_aliases``
    (its path for engines without alias specs): an SDK that starts reading it elsewhere fails here."""
    package = Path(pulumi.__file__).parent
    readers = sorted(
        f"{path.relative_to(package)}:{number}"
        for path in package.rglob("*.py")
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"\._aliases\b", line) and not re.search(r"self\._aliases\s*(=|\.append)", line)
    )
    assert readers == ["runtime/resource.py:449"], readers
    source = (package / "runtime" / "resource.py").read_text(encoding="utf-8").splitlines()
    assert "for parent_alias in parent._aliases:" in source[448]
    caller = "\n".join(source[:449]).rsplit("\ndef ", 1)[1]
    assert caller.startswith("all_aliases(")


@contextlib.contextmanager
def _monitor_features(features: set[int]) -> Any:
    saved = settings.SETTINGS.monitor_features
    settings.SETTINGS.monitor_features = features
    try:
        yield
    finally:
        settings.SETTINGS.monitor_features = saved


def test_the_stand_in_keeps_the_alias_as_declared_only_where_specs_are_taken() -> None:
    alias = pulumi.Alias(type_="azure-native:containerservice/v20170831:ManagedCluster")
    with _monitor_features({ALIAS_SPECS}):
        assert sdk_speedups.alias_urn_when_read(alias, "c", "t:m:T", None) is alias
    with _monitor_features(set()):
        assert isinstance(sdk_speedups.alias_urn_when_read(alias, "c", "t:m:T", None), pulumi.Output)


class AliasMonitor(RecordingMonitor):
    """Also keeps the aliases the engine receives with each registration."""

    aliases: dict[str, list[bytes]] = {}

    def RegisterResource(self, request: Any) -> Any:  # noqa: N802
        urn = self.make_urn(request.parent, request.type, request.name)
        AliasMonitor.aliases[urn] = [a.SerializeToString(deterministic=True) for a in request.aliases]
        assert not request.aliasURNs, "an engine with alias specs gets no alias URNs"
        return super().RegisterResource(request)


def _aks_stack() -> str:
    fleet = load_fleet(POLICY_FILE)
    stacks = [c.name for c in fleet.clusters.values() if c.cloud == "azure"]
    if not stacks:
        pytest.skip("the fleet has no AKS cluster")
    return stacks[0]


def _plan(stack: str, monkeypatch: pytest.MonkeyPatch, stand_ins: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    AliasMonitor.aliases = {}
    plan = planned(stack, monkeypatch, AliasMonitor, stand_ins)
    return {r.urn: r.plain_inputs() for r in plan.registrations}, dict(AliasMonitor.aliases)


def test_the_engine_receives_the_same_alias_specs_with_the_stand_in(monkeypatch: pytest.MonkeyPatch) -> None:
    stack = _aks_stack()
    (stock, stock_aliases), (fast, fast_aliases) = [_plan(stack, monkeypatch, s) for s in (False, True)]
    assert fast == stock and fast_aliases == stock_aliases
    # the AKS classes declare many aliases (an API version each), and all of them reach the engine
    assert max(len(a) for a in stock_aliases.values()) > 50
