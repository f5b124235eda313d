"""Fixtures of the policy pack's tests: the fixture fleet's plans and one running pack (fleet/tools/engine/analyzer.py
starts policy/ as the Pulumi CLI does and calls Analyze / AnalyzeStack over gRPC), shared by every test of the
session."""

from __future__ import annotations

import pytest

from fleet.model.loader import load_fleet
from fleet.tools.engine.analyzer import PolicyPackSession
from fleet.tools.engine.mock_engine import Registration
from fleet.tools.engine.plan import StackPlan, plan_fleet
from tests.policy.support import DEPLOYMENT, JOB, POLICY, STACKS, WORKLOADS, reg


@pytest.fixture(scope="session")
def plans() -> dict[str, StackPlan]:
    fleet = load_fleet(POLICY, WORKLOADS)
    return {p.stack: p for p in plan_fleet(fleet, POLICY, stacks_dir=STACKS, workloads_dir=WORKLOADS)}


@pytest.fixture(scope="session")
def session():
    with PolicyPackSession(POLICY, workloads_dir=WORKLOADS) as s:
        yield s


@pytest.fixture
def job(plans) -> Registration:
    return reg(plans, "fix-eks", JOB, "-t4")


@pytest.fixture()
def gateway(plans: dict[str, StackPlan]) -> Registration:
    return reg(plans, "fix-gke", DEPLOYMENT, "-federation-gateway")
