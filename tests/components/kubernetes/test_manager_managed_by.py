"""The queues' manager must keep a Job's ``spec.managedBy`` (fleet/model/queues/ ``MANAGED_BY_MIN_KUBERNETES``):
``validate`` and ``plan`` refuse one below Kubernetes 1.32, located at the Magnum stack's ``kubeTag`` or the policy's
``kubernetes_version``, with the reason and the fix; so does the program itself (``pulumi preview``).

Upstream: KEP-4368's gate JobManagedBy is alpha and off in 1.30, beta and on in 1.32, GA in 1.35 (kubernetes v1.36.3
pkg/features/kube_features.go; kubernetes/enhancements keps/sig-apps/4368-support-managed-by-for-batch-jobs/kep.yaml);
off, kube-apiserver drops the field on create (pkg/registry/batch/job/strategy.go PrepareForCreate) and kueue v0.19.2's
MultiKueue check rejects the workload (pkg/controller/admissionchecks/multikueue/workload.go)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from fleet.model.core.errors import InputError
from fleet.model.loader import load_fleet
from fleet.model.queues.checks import managed_by_problem
from fleet.model.queues.settings import MANAGED_BY_MIN_KUBERNETES
from fleet.tools.cli import main
from fleet.tools.engine.plan import plan_stack
from tests.helpers import QUEUED, QUEUED_SITE, QUEUED_STACKS, write_policy

REPO = Path(__file__).resolve().parents[3]


def _run(command: str, policy: Path, stacks: Path, workloads: Path, capsys) -> tuple[int, str]:
    status = main([command, "--policy", str(policy), "--stacks-dir", str(stacks), "--workloads-dir", str(workloads)])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return status, err


def test_the_gate_is_on_by_default_from_kubernetes_1_32():
    assert MANAGED_BY_MIN_KUBERNETES == (1, 32)
    assert managed_by_problem("m", (1, 32), "1.32") is None and managed_by_problem("m", (1, 35), "1.35") is None
    assert managed_by_problem("m", None, "latest") is None  # a tag naming no version: nothing claimed
    message = managed_by_problem("m", (1, 31), "kubeTag v1.31.5-rancher1")
    assert message and "JobManagedBy" in message and "The owner is not managed by Kueue" in message
    assert "1.32 or newer" in message


def test_a_magnum_manager_below_1_32_is_refused_at_its_kube_tag(tmp_path, capsys):
    stacks_config = {**QUEUED_STACKS, "control": {**QUEUED_STACKS["control"], "gpu-fleet:magnum": QUEUED_SITE}}
    policy, stacks = write_policy(tmp_path, QUEUED, stacks_config)
    (tmp_path / "workloads").mkdir()
    for command in ("validate", "plan"):
        status, err = _run(command, policy, stacks, tmp_path / "workloads", capsys)
        assert status == 2, err
        assert f"{stacks / 'Pulumi.control.yaml'}:" in err
        assert "config.gpu-fleet:magnum.kubeTag: control is the queues' manager" in err
        assert "kubeTag v1.31.5-rancher1" in err and "kubeTag: v1.32.6-rancher1 with autoscalerTag: v1.32.7" in err
    # the workers are not concerned: the copies MultiKueue makes there carry no managedBy (job_multikueue_adapter.go)
    assert "cern-gpu" not in err
    # and the program refuses it too
    with pytest.raises(InputError, match=r"Pulumi.control.yaml:\d+: config.gpu-fleet:magnum.kubeTag: control is the"):
        plan_stack("control", policy, stacks, {}, tmp_path / "workloads")


def test_a_managed_manager_below_1_32_is_refused_at_its_kubernetes_version(tmp_path, capsys):
    example = REPO / "examples" / "queued-clouds"
    if not example.is_dir():  # a team's own fleet deletes the examples that place the sample's workloads (README)
        pytest.skip("examples/queued-clouds is not in this checkout")
    shutil.copytree(example, tmp_path / "fleet")
    policy = tmp_path / "fleet" / "fleet.yaml"
    text = policy.read_text(encoding="utf-8")
    policy.write_text(text.replace("      central: true\n", '      central: true\n      kubernetes_version: "1.31"\n'))
    status, err = _run("validate", policy, tmp_path / "fleet" / "stacks", REPO / "workloads", capsys)
    assert status == 2, err
    assert f"{policy}:" in err and "clusters.gcp.gke-control.kubernetes_version: gke-control is the queues'" in err
    assert 'raise kubernetes_version, such as "1.33"' in err
    # at 1.32 it validates
    policy.write_text(text.replace("      central: true\n", '      central: true\n      kubernetes_version: "1.32"\n'))
    status, err = _run("validate", policy, tmp_path / "fleet" / "stacks", REPO / "workloads", capsys)
    assert status == 0, err


def test_the_shipped_manager_runs_kubernetes_1_32_with_its_autoscaler():
    fleet = load_fleet()
    if fleet.dispatch is None or fleet.clusters[fleet.dispatch.manager].cloud != "openstack":
        return  # the fleet's manager takes its version from the policy, which validate holds to 1.32
    stack = REPO / "stacks" / f"Pulumi.{fleet.dispatch.manager}.yaml"
    magnum = yaml.safe_load(stack.read_text(encoding="utf-8"))["config"]["gpu-fleet:magnum"]
    assert magnum["kubeTag"].startswith("v1.32.") and magnum["autoscalerTag"].startswith("v1.32.")
    images = yaml.safe_load((REPO / "components" / "kubernetes" / "images.yaml").read_text(encoding="utf-8"))
    assert magnum["autoscalerTag"] in images["magnum_autoscaler_images"]
