"""Test helpers: plan a small policy written to a temp dir, and look at what the engine received."""

from __future__ import annotations

import re
import shutil
import textwrap
from pathlib import Path
from typing import Any

import yaml

from fleet.model.loader import load_fleet
from fleet.model.placement.pods import selector_matches
from fleet.tools.engine.mock_engine import Registration
from fleet.tools.engine.plan import StackPlan, plan_stack
from tests.conftest import FIXTURES


def write_policy(tmp_path: Path, policy: str, stack_configs: dict[str, dict[str, Any]]) -> tuple[Path, Path]:
    """Write ``policy`` (YAML text) and one stack file per entry of ``stack_configs``; return both paths."""
    policy_file = tmp_path / "fleet.yaml"
    policy_file.write_text(textwrap.dedent(policy), encoding="utf-8")
    stacks = tmp_path / "stacks"
    stacks.mkdir(exist_ok=True)
    for stack, config in stack_configs.items():
        config = {"pulumi:disable-default-providers": ["*"], **config}
        (stacks / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump({"config": config}), encoding="utf-8")
    return policy_file, stacks


def plan_one(
    tmp_path: Path,
    policy: str,
    stack: str,
    config: dict[str, Any] | None = None,
    workloads_dir: Path | None = None,
    references: dict[str, tuple[dict[str, Any], list[str]]] | None = None,
) -> StackPlan:
    """Plan ``stack`` of a policy given as text, with an empty workloads folder unless one is given."""
    if workloads_dir is None:
        workloads_dir = tmp_path / "no-workloads"
        workloads_dir.mkdir(exist_ok=True)
    policy_file, stacks = write_policy(tmp_path, policy, {stack: config or {}})
    load_fleet(policy_file, workloads_dir)  # fail early, with the located message, on a bad test policy
    return plan_stack(stack, policy_file, stacks, references, workloads_dir)


def by_type(plan: StackPlan, type_: str) -> list[Registration]:
    """Registrations of one resource type."""
    return [r for r in plan.registrations if r.type == type_]


def one(plan: StackPlan, type_: str, name: str) -> Registration:
    """The registration of ``type_`` called ``name`` (fails the test if absent)."""
    found = [r for r in plan.registrations if r.type == type_ and r.name == name]
    assert found, f"no {type_} named {name}; have: {[r.name for r in by_type(plan, type_)]}"
    return found[0]


# The tests' own workloads (tests/fixtures/fleet/workloads), for fixture policies: never the shipped workloads/, which
# a team replaces. `sweeper` is the distributed one (the shipped 3dgan-jax under its own name, with its real sample
# log), `tracker` and `fitter` run on one card, `uploader` has credentials and egress.
FIXTURE_WORKLOADS = FIXTURES / "fleet" / "workloads"

# The required ``gpu-fleet:magnum`` site settings of a fixture Magnum stack (tags as the upstream heat driver has them).
MAGNUM_SITE = {
    "image": "fedora-coreos-40",
    "keypair": "kp",
    "externalNetwork": "ext-net",
    "masterFlavor": "m2.medium",
    "kubeTag": "v1.28.9-rancher1",
    "autoscalerTag": "v1.28.0",
}

# A valid policy of the tests, which the error tests break one way at a time.
GOOD = """\
defaults:
  gpu_pool: {min_nodes: 0, max_nodes: 2, spot: true}
clusters:
  openstack:
    cern-main:
      region: cern
      central: true
      gpus: [t4]
  gcp:
    gke-a:
      zone: us-central1-a
      gpus: [t4, l4]
  aws:
    eks-a:
      region: us-east-1
      gpus:
        t4: {max_nodes: 3}
workloads: {}
"""

# A fleet of the tests: a control cluster without accelerators, GPUs at CERN and on two clouds, TPUs on one.
QUEUED = """\
defaults:
  gpu_pool: {min_nodes: 0, max_nodes: 2, spot: true}
clusters:
  openstack:
    control:
      region: cern
      central: true
    cern-gpu:
      region: cern
      gpus: {t4: {max_nodes: 3}, v100: {}}
  gcp:
    gke-a:
      zone: us-central1-a
      gpus: [t4, tpu-v5e]
  aws:
    eks-a:
      region: us-east-1
      gpus: {t4: {max_nodes: 4}}
workloads: {}
queues:
  manager: control
  spill: ordered
  gpu: {clusters: [cern-gpu, eks-a, gke-a], gpus: [t4, v100]}
  tpu: {clusters: [gke-a], kind: tpu}
"""

# The stack files of QUEUED (Kueue needs Kubernetes 1.29 or newer: fleet/program/stack.py check_kueue_version).
QUEUED_SITE = {**MAGNUM_SITE, "kubeTag": "v1.31.5-rancher1", "autoscalerTag": "v1.31.5"}  # the same minors
# The manager's: a Job's managedBy needs Kubernetes 1.32 (fleet/model/queues/settings.py MANAGED_BY_MIN_KUBERNETES).
MANAGER_SITE = {**MAGNUM_SITE, "kubeTag": "v1.32.6-rancher1", "autoscalerTag": "v1.32.7"}
# Each worker has the manager's token (gpu-fleet:multikueueToken), encrypted: the offline plan reads a placeholder.
WORKER_TOKEN = {"gpu-fleet:multikueueToken": {"secure": "v1:dG9rZW4="}}
QUEUED_STACKS = {
    "control": {"openstack:cloud": "site", "gpu-fleet:storageClass": "standard", "gpu-fleet:magnum": MANAGER_SITE},
    "cern-gpu": {"openstack:cloud": "site", "gpu-fleet:magnum": QUEUED_SITE, **WORKER_TOKEN},
    "gke-a": {"gcp:project": "fixture-project", **WORKER_TOKEN},
    "eks-a": {**WORKER_TOKEN},
}


# The fleet of the benchmark queue tests (tests/components/kubernetes/ and tests/policy/test_benchmark_queue.py):
# a GKE cluster that only benchmarks (no sweep, no queue) on T4s, L4s and TPUs, an AKS cluster sharing its
# T4s by time-slicing, and a Magnum cluster on Kubernetes 1.28 (MAGNUM_SITE), too old for Kueue.
BENCHMARK_QUEUE_POLICY = """
defaults:
  gpu_pool: {max_nodes: 2}
  probe: {schedule: "17 4 * * *"}
clusters:
  gcp:
    gke-bench:
      zone: us-central1-a
      central: true
      gpus: {t4: {max_nodes: 3}, l4: {}, tpu-v5e: {max_nodes: 1}}
  azure:
    aks-bench:
      region: eastus
      gpus: {t4: {sharing: {time_slicing: 2}}}
  openstack:
    cern-old:
      region: cern
      gpus: {t4: {probe: true}}
workloads:
  tracker: all
  fitter: {gpus: [t4], schedule: "0 3 * * 1"}
  uploader: {gpus: [l4]}
"""
BENCHMARK_QUEUE_STACKS = {
    "gke-bench": {"gcp:project": "bench-project"},
    "aks-bench": {"azure-native:subscriptionId": "11111111-2222-3333-4444-555555555555"},
    "cern-old": {"openstack:cloud": "site", "gpu-fleet:magnum": MAGNUM_SITE},
}


# Workloads of QUEUED: tracker (tests/fixtures/fleet) on every card of the gpu queue, loader (the fixture uploader,
# with credentials and egress, without root) on its T4s, and fitter per cluster (a CronJob) on the T4s.
QUEUED_TRACKER = """\
workloads:
  tracker: {gpus: all, queue: gpu}
  loader: {gpus: [t4], queue: gpu}
  fitter: {gpus: [t4], schedule: "0 3 * * 1"}
"""


FIXTURE_WORKLOADS = FIXTURES / "fleet" / "workloads"


def queued_workloads_dir(tmp_path: Path) -> Path:
    """The fixture fleet's workloads, and ``loader``: the uploader (credentials, egress) without root."""
    out = tmp_path / "workloads"
    shutil.copytree(FIXTURE_WORKLOADS, out)
    loader = out / "loader"
    shutil.copytree(out / "uploader", loader)
    text = (loader / "workload.yaml").read_text(encoding="utf-8")
    text = text.replace("name: uploader", "name: loader").replace("needs_root:", "# needs_root:")
    (loader / "workload.yaml").write_text(text.replace("uploader_bytes_total", "loader_bytes_total"), "utf-8")
    for program in (loader / "mtail").iterdir():
        program.write_text(program.read_text(encoding="utf-8").replace("uploader_", "loader_"), "utf-8")
    return out


def queued(workloads: str) -> str:
    """QUEUED with its ``workloads: {}`` replaced by ``workloads``."""
    return QUEUED.replace("workloads: {}\n", textwrap.dedent(workloads))


def refused_by_validate(tmp_path: Path, capsys, text: str, *expected: str) -> str:
    """``validate`` of ``text`` exits 2 and prints each of ``expected`` (with its line), with no traceback."""
    from fleet.tools.cli import main

    policy = tmp_path / "fleet.yaml"
    policy.write_text(text, encoding="utf-8")
    (tmp_path / "stacks").mkdir(exist_ok=True)
    folder = queued_workloads_dir(tmp_path)
    code = main(["validate", "--policy", str(policy), "--stacks-dir", str(tmp_path / "stacks"), "--workloads-dir",
                 str(folder)])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    for fragment in expected:
        assert fragment in err, f"{fragment!r} not in:\n{err}"
    return err


def kueue_flavor(pod: dict, flavors: list[tuple[str, dict[str, str]]]) -> str | None:
    """The first flavor Kueue 0.19.2 finds for the pod (pkg/scheduler/flavorassigner/flavorassigner.go
    ``checkFlavorForPodSets``: only the flavor's own label keys count, and a term left without an expression matches
    any flavor)."""
    for name, labels in flavors:
        keys = set(labels)
        spec: dict = {"nodeSelector": {k: v for k, v in (pod.get("nodeSelector") or {}).items() if k in keys}}
        required = ((pod.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        ) or {}  # fmt: skip
        terms = required.get("nodeSelectorTerms") or []
        kept = [{"matchExpressions": [e for e in t["matchExpressions"] if e["key"] in keys]} for t in terms]
        if kept and all(t["matchExpressions"] for t in kept):
            spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": kept}}}  # fmt: skip
        if selector_matches(spec, labels):
            return name
    return None


# What a Grafana panel's PromQL reads, and whether the central Prometheus gets it
# (fleet/model/monitoring/dashboards.py).
_PROMQL_KEYWORDS = {"by", "on", "ignoring", "group_left", "group_right", "without", "bool", "and", "or", "unless"}
_PROMQL_KEYWORDS |= {"offset"}


def promql_metric_names(expr: str) -> set[str]:
    """The series a PromQL query reads: the names left once strings, label matchers, ranges, grouping clauses,
    function names, keywords and numbers are taken out."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    text = re.sub(r"\{[^}]*\}", "", text)
    text = re.sub(r"\[[^\]]*\]", "", text)
    text = re.sub(r"\b(by|on|ignoring|without|group_left|group_right)\s*\([^)]*\)", " ", text)
    functions = set(re.findall(r"([A-Za-z_][A-Za-z0-9_]*)\s*\(", text))
    names = set(re.findall(r"(?<![0-9.])\b[A-Za-z_:][A-Za-z0-9_:]*\b(?!\s*\()", text))
    return {n for n in names if n not in _PROMQL_KEYWORDS and not re.fullmatch(r"[0-9.e]+", n)} - functions


def kps_values(plan: StackPlan) -> dict[str, Any]:
    """The values of the stack's kube-prometheus-stack release as the engine received them."""
    (release,) = [
        r for r in by_type(plan, "kubernetes:helm.sh/v3:Release") if r.inputs["name"] == "kps"
    ]  # fmt: skip
    return release.inputs["values"]


def recorded_series(plan: StackPlan) -> set[str]:
    """Every series the stack's Prometheus records (``record:`` of its rule groups)."""
    groups = kps_values(plan).get("additionalPrometheusRulesMap", {}).values()
    return {r["record"] for g in groups for group in g["groups"] for r in group["rules"] if "record" in r}


def central_series(plans: dict[str, StackPlan], central: str) -> set[str]:
    """The series the central Prometheus holds for every cluster of the fleet: what every one of its federation jobs
    pulls (``match[]``), what it records itself and no leaf records (a leaf's own records reach it only federated),
    and Prometheus' own ``ALERTS``. ``plans``: the central's and every leaf's (a fleet of one cluster federates
    nothing and is refused)."""
    values = kps_values(plans[central])
    jobs = values["prometheus"]["prometheusSpec"].get("additionalScrapeConfigs") or []
    if not jobs:
        raise ValueError(f"{central} federates no leaf")
    leaf_records = set().union(*(recorded_series(p) for name, p in plans.items() if name != central))
    federated = set.intersection(*(set(j["params"]["match[]"]) for j in jobs))
    return federated | (recorded_series(plans[central]) - leaf_records) | {"ALERTS"}


def panels_on_missing_series(boards: dict[str, dict[str, Any]], available: set[str]) -> list[tuple[str, str, str]]:
    """(dashboard, panel, metric) for every metric a panel's query reads that is not in ``available``."""
    from fleet.model.monitoring.grafana import panel_queries

    return sorted(
        (q.dashboard, q.panel, name)
        for q in panel_queries(boards)
        for name in promql_metric_names(q.expr)
        if name not in available
    )
