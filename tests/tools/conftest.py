"""Session fixtures of the chart and schema tiers: every fleet planned once (the sample, each example, the tests'
own fixture fleet) and every Helm release of every stack rendered once from the chart cache."""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from fleet.model.core.fleet import Fleet
from fleet.model.loader import POLICY_FILE, load_fleet
from fleet.program.stack_config import STACKS_DIR
from fleet.tools.checks.charts import CHART_CACHE_ENV, RenderedRelease, render_stack_charts, stack_kubernetes_version
from fleet.tools.checks.schemas import CRDS_ENV, CrdSchemas, load_crds
from fleet.tools.engine.plan import StackPlan, plan_fleet
from tests.conftest import FIXTURES, REQUIRE_TOOLS_ENV, ROOT, shared_data


@dataclass(frozen=True)
class PlannedFleet:
    """One fleet of the tests, planned: its name (``sample``, ``example:<name>``, ``fixture``) and each stack's plan."""

    name: str
    fleet: Fleet
    plans: dict[str, StackPlan]

    def kubernetes_version(self, stack: str) -> str:
        """The Kubernetes version of the stack's cluster (a Magnum template's kube_tag decides there)."""
        return stack_kubernetes_version(self.plans[stack], self.fleet.cluster(stack).kubernetes_version)


def _fleet_files() -> list[tuple[str, Path, Path, Path | None]]:
    examples = sorted(p.parent for p in (ROOT / "examples").glob("*/fleet.yaml"))
    fixture = FIXTURES / "fleet"
    return [
        ("sample", POLICY_FILE, STACKS_DIR, None),
        *((f"example:{e.name}", e / "fleet.yaml", e / "stacks", None) for e in examples),
        ("fixture", fixture / "fleet.yaml", fixture / "stacks", fixture / "workloads"),
    ]


@pytest.fixture(scope="session")
def planned_fleets() -> list[PlannedFleet]:
    """Every fleet of the tests, each stack planned once a session."""
    out = []
    for name, policy, stacks, workloads in _fleet_files():
        fleet = load_fleet(policy, workloads) if workloads else load_fleet(policy)
        plans = plan_fleet(fleet, policy, stacks_dir=stacks, workloads_dir=workloads)
        out.append(PlannedFleet(name, fleet, {p.stack: p for p in plans}))
    return out


@pytest.fixture(scope="session")
def chart_cache() -> Path:
    """The chart cache (``$GPU_FLEET_CHART_CACHE``, ../shared/charts), with helm-python-sdk to render from it."""
    if importlib.util.find_spec("helm_python") is None:
        reason = "helm-python-sdk is not installed (pip install -r requirements-dev.txt)"
        if os.environ.get(REQUIRE_TOOLS_ENV) == "1":
            pytest.fail(f"{reason}, and {REQUIRE_TOOLS_ENV}=1 requires it")
        pytest.skip(reason)
    return shared_data(CHART_CACHE_ENV, "charts", "the chart cache (the pinned charts' archives)")


@pytest.fixture(scope="session")
def crd_schemas() -> CrdSchemas:
    """The upstream CRDs (``$GPU_FLEET_CRDS``, ../shared/k8s/crds)."""
    return load_crds(shared_data(CRDS_ENV, "k8s/crds", "the upstream CRD files"))


@pytest.fixture(scope="session")
def rendered_charts(
    planned_fleets: list[PlannedFleet], chart_cache: Path
) -> dict[tuple[str, str], list[RenderedRelease]]:
    """(fleet name, stack) -> every Helm release of the stack rendered for its cluster, once a session."""
    return {
        (planned.name, stack): render_stack_charts(plan, chart_cache, planned.kubernetes_version(stack))
        for planned in planned_fleets
        for stack, plan in planned.plans.items()
    }
