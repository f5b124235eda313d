"""RBAC of every stack as the cluster gets it: the program's own roles and bindings plus those the pinned charts
render with the program's values (helm-python-sdk on the archives of ../shared/charts), evaluated the way
Kubernetes RBAC does (fleet/model/rbac.py). The preview identity stays refused every right it must not hold, and
no chart's service account reads Secrets but the one the docs name."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleet.model import preview_rights
from fleet.model.rbac import BINDING_KINDS, ROLE_KINDS, Rbac, Request, User
from fleet.model.spec import load_fleet
from fleet.tools.plan import StackPlan, plan_fleet
from tests.conftest import FIXTURES, shared_file

FIXTURE = FIXTURES / "fleet"
RELEASE = "kubernetes:helm.sh/v3:Release"
PREVIEWED = "fix-aks"  # its stack file names a preview identity
KUBE_VERSION = "v1.33.0"


@pytest.fixture(scope="module")
def plans() -> dict[str, StackPlan]:
    fleet = load_fleet(FIXTURE / "fleet.yaml", FIXTURE / "workloads")
    plans = plan_fleet(
        fleet, FIXTURE / "fleet.yaml", stacks_dir=FIXTURE / "stacks", workloads_dir=FIXTURE / "workloads"
    )
    return {p.stack: p for p in plans}


def _archive(chart: str, version: str) -> Path:
    return shared_file(f"charts/{chart.rsplit('/', 1)[-1]}-{version}.tgz")


def _render(release: dict[str, Any]) -> list[dict[str, Any]]:
    """The objects a release's chart renders with its values (secrets as ``[secret]``)."""
    helm = pytest.importorskip("helm_python")
    from helm_python import _native  # the render call with a Kubernetes version (shared/charts/README.md)

    opts = {"name": release["name"], "namespace": release["namespace"], "is_install": True,
            "kube_version": KUBE_VERSION, "api_versions": ["monitoring.coreos.com/v1"]}  # fmt: skip
    with helm.Chart.load(str(_archive(release["chart"], release["version"]))) as chart:
        rendered = json.loads(
            _native.call_string("helm_render", chart._raw(), json.dumps(release.get("values") or {}), json.dumps(opts))
        )
    return [
        doc
        for path, text in rendered.items()
        if path.endswith((".yaml", ".yml", ".tpl")) and text
        for doc in yaml.safe_load_all(text)
        if isinstance(doc, dict)
    ]


def cluster_rbac(plan: StackPlan) -> Rbac:
    """Every Role, ClusterRole and binding the stack puts on its cluster: its own and its charts'."""
    objects = [
        (r.type.rsplit(":", 1)[-1], r.plain_inputs())
        for r in plan.registrations
        if r.type.startswith("kubernetes:rbac.authorization.k8s.io/")
    ]
    for r in plan.registrations:
        if r.type == RELEASE:
            release = r.plain_inputs()
            for doc in _render(release):
                if doc.get("kind") in (*ROLE_KINDS, *BINDING_KINDS):
                    doc.setdefault("metadata", {}).setdefault("namespace", release["namespace"])
                    objects.append((doc["kind"], doc))
    return Rbac.of(objects)


@pytest.fixture(scope="module")
def rendered(plans) -> dict[str, Rbac]:
    return {stack: cluster_rbac(plan) for stack, plan in plans.items()}


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
