"""RBAC of every stack as the cluster gets it: the program's own roles and bindings plus those the pinned charts
render with the program's values (helm-python-sdk on the archives of ../shared/charts), evaluated the way
Kubernetes RBAC does (fleet/model/access/rbac.py). The preview identity stays refused every right it must not hold, and
no chart's service account reads Secrets cluster-wide but the one the docs name."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
from pathlib import Path

import pytest

from components.kubernetes.central_monitoring import GRAFANA_ROLE
from fleet.model.access import preview_rights
from fleet.model.access.rbac import BINDING_KINDS, ROLE_KINDS, Rbac, Request, User
from fleet.model.loader import load_fleet
from fleet.tools.checks.charts import (
    CHART_CACHE_ENV,
    helm_releases,
    kube_version,
    render_release,
    render_stack_charts,
    stack_kubernetes_version,
)
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
    (subject,) = [
        s
        for r in plans[PREVIEWED].registrations
        if r.type.endswith(":ClusterRoleBinding")
        for s in r.inputs["subjects"]
        if s["kind"] != "ServiceAccount"
    ]
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


def test_no_monitoring_identity_reads_secrets_cluster_wide(rendered):
    """kube-state-metrics runs without its secrets collector, and the Prometheus Operator's Secret rights are a Role
    of the monitoring namespace (components/kubernetes/operator_rbac.py): it reads and writes the Secrets of its
    Prometheus and Alertmanager there, and no Secret of a benchmark (which may hold cloud keys) or of any other
    namespace. A chart that starts reading Secrets cluster-wide fails here."""
    for stack, rbac in rendered.items():
        readers = _secret_readers(rbac)
        assert readers <= ALLOWED_SECRET_READERS, (stack, sorted(readers))
        operator = User.service_account("monitoring", "kps-operator")
        assert rbac.allows(operator, Request("list", "secrets", namespace="monitoring")), stack
        assert rbac.allows(operator, Request("create", "configmaps", namespace="monitoring")), stack
        for verb in ("get", "list", "watch", "create", "update", "delete"):
            for namespace in ("", "benchmarks", "kube-system", "ci-builds"):
                request = Request(verb, "secrets", namespace=namespace)
                assert rbac.why_allowed(operator, request) is None, (stack, request.describe())


def _operator_args(plan: StackPlan, cache: Path, version: str) -> list[str]:
    (kps,) = [r for r in render_stack_charts(plan, cache, version) if r.release.name == "kps"]
    (deployment,) = [o for o in kps.objects if o["kind"] == "Deployment" and o["metadata"]["name"] == "kps-operator"]
    return deployment["spec"]["template"]["spec"]["containers"][0]["args"]


def test_the_operator_watches_every_monitor_of_the_fleet_and_runs_prometheus_in_monitoring_only(plans, chart_cache):
    """The operator finds monitors and rules only in the namespaces of ``--namespaces``: every ServiceMonitor,
    PodMonitor and PrometheusRule of the stack (its own and its charts') is in one of them, and Prometheus and
    Alertmanager in the monitoring namespace, the only one where it holds Secrets (``--*-instance-namespaces``)."""
    fleet = load_fleet(FIXTURE / "fleet.yaml", FIXTURE / "workloads")
    for stack, plan in plans.items():
        version = stack_kubernetes_version(plan, fleet.cluster(stack).kubernetes_version)
        args = dict(a.removeprefix("--").split("=", 1) for a in _operator_args(plan, chart_cache, version) if "=" in a)
        watched = set(args["namespaces"].split(","))
        for flag in ("prometheus", "alertmanager", "alertmanager-config", "thanos-ruler"):
            key = f"{flag}-instance-namespaces" if flag != "alertmanager-config" else "alertmanager-config-namespaces"
            assert args[key] == "monitoring", (stack, key)
        monitors = [
            (obj["kind"], obj["metadata"].get("namespace") or rendered.release.namespace)
            for rendered in render_stack_charts(plan, chart_cache, version)
            for obj in rendered.objects
            if str(obj.get("apiVersion", "")).startswith("monitoring.coreos.com/")
        ]
        monitors += [
            (r.type.rsplit(":", 1)[-1], r.plain_inputs()["metadata"]["namespace"])
            for r in plan.registrations
            if r.type.startswith("kubernetes:monitoring.coreos.com/")
        ]
        assert monitors, stack
        for kind, namespace in monitors:
            assert namespace in watched, (stack, kind, namespace, sorted(watched))
            if kind in ("Prometheus", "Alertmanager"):
                assert namespace == "monitoring", (stack, kind, namespace)


def test_the_fleets_roles_for_the_chart_are_the_charts_own_but_the_operators_secrets(plans, chart_cache):
    """The release runs with ``global.rbac.create: false`` and the fleet declares its roles
    (components/kubernetes/operator_rbac.py): rendered with the chart's own roles, the rules are the same, except
    that the operator's configmaps/secrets rule is a Role of the monitoring namespace. A chart upgrade that changes
    a rule fails here until the fleet's copy follows."""
    plan = plans["fix-gke"]
    fleet = load_fleet(FIXTURE / "fleet.yaml", FIXTURE / "workloads")
    version = stack_kubernetes_version(plan, fleet.cluster("fix-gke").kubernetes_version)
    (kps,) = [r for r in helm_releases(plan) if r.name == "kps"]
    assert kps.values["global"]["rbac"]["create"] is False
    chart_own = dataclasses.replace(kps, values={**kps.values, "global": {"rbac": {"create": True}}})
    charts = render_release(chart_own, chart_cache, kube_version(version))
    theirs = {(o["kind"], o["metadata"]["name"]): o for o in charts.objects if o["kind"] in (*ROLE_KINDS,)}
    ours = {
        (r.type.rsplit(":", 1)[-1], r.plain_inputs()["metadata"]["name"]): r.plain_inputs()
        for r in plan.registrations
        if r.type.endswith((":ClusterRole", ":Role")) and r.plain_inputs()["metadata"]["name"].startswith("kps-")
    }
    moved = {"apiGroups": [""], "resources": ["configmaps", "secrets"], "verbs": ["*"]}
    assert theirs[("ClusterRole", "kps-operator")]["rules"] == [
        *ours[("ClusterRole", "kps-operator")]["rules"][:2],
        moved,
        *ours[("ClusterRole", "kps-operator")]["rules"][2:],
    ]
    assert ours[("Role", "kps-operator")]["rules"] == [moved]
    for key in (("ClusterRole", "kps-prometheus"), ("ClusterRole", "kps-admission"), ("Role", "kps-admission")):
        assert ours[key]["rules"] == theirs[key]["rules"], key
    chart_roles = {k for k in theirs if k[1].startswith(("kps-operator", "kps-prometheus", "kps-admission"))}
    assert chart_roles == {k for k in ours} - {("Role", "kps-operator")}


# Cluster-wide Secret readers the charts need, each with its reason (checked against the rendered roles above).
ALLOWED_SECRET_READERS = {
    # kubeflow-trainer 2.3.0 templates/rbac/clusterrole.yaml: configmaps and secrets, create/get/list/watch/...: the
    # controller makes the Secrets of the TrainJobs it runs (MPI's SSH keys) in any namespace
    "kubeflow-system/kubeflow-trainer-controller-manager",
}


def test_the_central_grafana_reads_configmaps_and_no_secret(plans, rendered):
    """Grafana 10.1.4's chart Role gives configmaps and secrets to its sidecars; the fleet binds a Role of its own with
    ConfigMaps only (components/kubernetes/central_monitoring.py GRAFANA_ROLE), and the sidecars watch ConfigMaps."""
    centrals = [
        s
        for s, p in plans.items()
        if any(
            r.inputs.get("metadata", {}).get("name") == GRAFANA_ROLE
            for r in p.registrations
            if r.type.endswith(":Role")
        )
    ]
    assert centrals
    for stack in centrals:
        rbac = rendered[stack]
        grafana = User.service_account("monitoring", "kps-grafana")
        assert rbac.allows(grafana, Request("list", "configmaps", namespace="monitoring")), stack
        for verb in ("get", "list", "watch"):
            assert not rbac.allows(grafana, Request(verb, "secrets", namespace="monitoring")), (stack, verb)
        (release,) = [
            r.inputs
            for r in plans[stack].registrations
            if r.type == "kubernetes:helm.sh/v3:Release" and r.inputs["chart"] == "kube-prometheus-stack"
        ]
        sidecar = release["values"]["grafana"]["sidecar"]
        assert sidecar["dashboards"]["resource"] == sidecar["datasources"]["resource"] == "configmap"
