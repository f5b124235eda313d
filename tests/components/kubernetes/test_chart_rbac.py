"""RBAC of every stack as the cluster gets it: the program's own roles and bindings plus those the pinned charts
render with the program's values (helm-python-sdk on the archives of ../shared/charts), evaluated the way
Kubernetes RBAC does (fleet/model/rbac.py). The preview identity stays refused every right it must not hold, and
no chart's service account reads Secrets but the one the docs name."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from fleet.model import preview_rights
from fleet.model.rbac import BINDING_KINDS, ROLE_KINDS, Rbac, Request, User
from fleet.model.spec import load_fleet
from fleet.tools.checks.charts import CHART_CACHE_ENV, render_stack_charts, stack_kubernetes_version
from fleet.tools.engine.plan import StackPlan, plan_fleet
from tests.conftest import FIXTURES, REQUIRE_TOOLS_ENV, shared_data

FIXTURE = FIXTURES / "fleet"
PREVIEWED = "fix-aks"  # its stack file names a preview identity


@pytest.fixture(scope="module")
def plans() -> dict[str, StackPlan]:
    fleet = load_fleet(FIXTURE / "fleet.yaml", FIXTURE / "workloads")
    plans = plan_fleet(
        fleet, FIXTURE / "fleet.yaml", stacks_dir=FIXTURE / "stacks", workloads_dir=FIXTURE / "workloads"
    )
    return {p.stack: p for p in plans}


@pytest.fixture(scope="module")
def chart_cache() -> Path:
    """The pinned charts' archives, with helm-python-sdk to render them (as tests/tools/conftest.py's)."""
    if importlib.util.find_spec("helm_python") is None:
        reason = "helm-python-sdk is not installed (pip install -r requirements-dev.txt)"
        if os.environ.get(REQUIRE_TOOLS_ENV) == "1":
            pytest.fail(f"{reason}, and {REQUIRE_TOOLS_ENV}=1 requires it")
        pytest.skip(reason)
    return shared_data(CHART_CACHE_ENV, "charts", "the chart cache (the pinned charts' archives)")


def cluster_rbac(plan: StackPlan, cache: Path, version: str) -> Rbac:
    """Every Role, ClusterRole and binding the stack puts on its cluster: its own and its charts' (rendered by
    fleet/tools/checks/charts.py for the cluster's Kubernetes version)."""
    objects = [
        (r.type.rsplit(":", 1)[-1], r.plain_inputs())
        for r in plan.registrations
        if r.type.startswith("kubernetes:rbac.authorization.k8s.io/")
    ]
    for rendered in render_stack_charts(plan, cache, stack_kubernetes_version(plan, version)):
        for obj in rendered.objects:
            if obj.get("kind") in (*ROLE_KINDS, *BINDING_KINDS):
                obj.setdefault("metadata", {}).setdefault("namespace", rendered.release.namespace)
                objects.append((obj["kind"], obj))
    return Rbac.of(objects)


@pytest.fixture(scope="module")
def rendered(plans, chart_cache) -> dict[str, Rbac]:
    fleet = load_fleet(FIXTURE / "fleet.yaml", FIXTURE / "workloads")
    return {
        stack: cluster_rbac(plan, chart_cache, fleet.cluster(stack).kubernetes_version) for stack, plan in plans.items()
    }


def test_the_charts_render_roles(rendered):
    for stack, rbac in rendered.items():
        assert {"kps-operator", "kps-prometheus", "kps-kube-state-metrics"} <= set(rbac.cluster_roles), stack


@pytest.mark.parametrize("request_", preview_rights.REFUSED, ids=lambda r: r.describe())
def test_the_preview_identity_is_refused_with_the_charts_roles_too(plans, rendered, request_):
    (binding,) = [r for r in plans[PREVIEWED].registrations if r.type.endswith(":ClusterRoleBinding")]
    (subject,) = binding.inputs["subjects"]
    assert rendered[PREVIEWED].why_allowed(User(subject["name"]), request_) is None


def _secret_readers(rbac: Rbac) -> set[str]:
    """The service accounts bound anywhere that may list Secrets of every namespace."""
    accounts = {
        (s.get("namespace") or b["metadata"].get("namespace"), s["name"])
        for _, b in rbac.bindings
        for s in b.get("subjects") or []
        if s.get("kind") == "ServiceAccount"
    }
    return {
        f"{ns}/{name}"
        for ns, name in accounts
        if rbac.allows(User.service_account(ns, name), Request("list", "secrets"))
    }


def test_only_the_prometheus_operator_reads_secrets_cluster_wide(rendered):
    """kube-state-metrics runs without its secrets collector; the operator's ClusterRole keeps `*` on Secrets
    (kube-prometheus-stack 79.5.0 cannot make it namespaced: docs/security.md, "Chart RBAC"). A chart that starts
    reading Secrets cluster-wide fails here."""
    for stack, rbac in rendered.items():
        readers = _secret_readers(rbac)
        assert "monitoring/kps-operator" in readers, (stack, readers)
        assert not any("kube-state-metrics" in r for r in readers), (stack, readers)
        assert readers - {"monitoring/kps-operator"} <= ALLOWED_SECRET_READERS, (stack, sorted(readers))


# Cluster-wide Secret readers the charts need, each with its reason (checked against the rendered roles above).
ALLOWED_SECRET_READERS = {
    # kubeflow-trainer 2.3.0 templates/rbac/clusterrole.yaml: configmaps and secrets, create/get/list/watch/...: the
    # controller makes the Secrets of the TrainJobs it runs (MPI's SSH keys) in any namespace
    "kubeflow-system/kubeflow-trainer-controller-manager",
}
