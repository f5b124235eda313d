"""Workload credentials (``secret_env``): read from a Secret the stack creates from its secret config, never from a
committed file; a warning names the exact command when the config does not give them."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from fleet.model.core.workloads import load_workloads
from fleet.program.stack_config import SECRET_PLACEHOLDER, load_stack_config
from tests.conftest import FIXTURES
from tests.helpers import by_type, one, plan_one

POLICY = """
clusters:
  gcp:
    gke-test:
      zone: us-central1-c
      central: true
      gpus: [t4]
workloads:
  uploader: [t4]
"""
CONFIG = {"gcp:project": "proj-1"}
# A fixture workload that reads S3-style credentials (tests/fixtures/fleet/workloads/uploader).
FIXTURE_WORKLOADS = FIXTURES / "fleet" / "workloads"
KEYS = ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"]
SECRETS = "gpu-fleet:workloadSecrets"
SECRET_TYPE = "kubernetes:core/v1:Secret"
JOB_TYPE = "kubernetes:batch/v1:Job"


@pytest.fixture
def workloads(tmp_path: Path) -> Path:
    folder = tmp_path / "workloads"
    shutil.copytree(FIXTURE_WORKLOADS / "uploader", folder / "uploader")
    return folder


def secure(**values: str) -> dict[str, dict[str, str]]:
    """What ``pulumi config set --secret --path`` writes: each value encrypted in place."""
    return {k: {"secure": f"v1:{v}"} for k, v in values.items()}


CREDENTIAL_NAME = re.compile(r"(SECRET|PASSWORD|TOKEN|ACCESS_KEY|API_KEY|CREDENTIAL)", re.IGNORECASE)


def test_shipped_workloads_take_every_credential_from_secret_env() -> None:
    """No workload folder of the repository names a credential-like variable under plain ``env``."""
    for name, wl in load_workloads().items():
        plain = [k for k in wl.spec.env if CREDENTIAL_NAME.search(k)]
        assert not plain, f"{name}: {plain} look like credentials: declare them in secret_env"
        assert not set(wl.spec.secret_env) & set(wl.spec.env)


def test_the_job_reads_credentials_from_the_secret(tmp_path: Path, workloads: Path) -> None:
    plan = plan_one(tmp_path, POLICY, "gke-test", CONFIG, workloads_dir=workloads)
    (job,) = by_type(plan, JOB_TYPE)
    env = job.inputs["spec"]["template"]["spec"]["containers"][0]["env"]
    refs = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in env if "secretKeyRef" in e.get("valueFrom", {})}
    assert refs == {k: {"name": "uploader-credentials", "key": k} for k in KEYS}
    assert not [e for e in env if e["name"] in KEYS and "value" in e]


def test_without_config_no_secret_and_a_warning_with_the_command(tmp_path: Path, workloads: Path) -> None:
    plan = plan_one(tmp_path, POLICY, "gke-test", CONFIG, workloads_dir=workloads)
    assert not [r for r in by_type(plan, SECRET_TYPE) if "credentials" in r.name]
    (warning,) = [f.message for f in plan.findings if "credentials" in f.message]
    assert (
        "pulumi config set --stack gke-test --secret --path 'gpu-fleet:workloadSecrets.uploader.AWS_ACCESS_KEY_ID'"
        in warning
    )


def test_secret_config_becomes_a_kubernetes_secret(tmp_path: Path, workloads: Path) -> None:
    config = {**CONFIG, SECRETS: {"uploader": secure(AWS_ACCESS_KEY_ID="a", AWS_SECRET_ACCESS_KEY="b")}}
    plan = plan_one(tmp_path, POLICY, "gke-test", config, workloads_dir=workloads)
    secret = one(plan, SECRET_TYPE, "gke-test-uploader-credentials")
    shown = secret.plain_inputs()
    assert (
        shown["metadata"]["name"] == "uploader-credentials" and shown["metadata"]["namespace"] == "benchmarks-root"
    )  # uploader needs root
    assert shown["stringData"] == {k: "[secret]" for k in KEYS}
    assert SECRET_PLACEHOLDER not in repr(plan.as_dict())
    assert not [f for f in plan.findings if "credentials" in f.message]


def test_plain_text_credentials_are_refused(tmp_path: Path, workloads: Path) -> None:
    config = {**CONFIG, SECRETS: {"uploader": {"AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "b"}}}
    with pytest.raises(Exception, match="holds credentials in plain text"):
        plan_one(tmp_path, POLICY, "gke-test", config, workloads_dir=workloads)


def test_credentials_must_match_secret_env(tmp_path: Path, workloads: Path) -> None:
    config = {**CONFIG, SECRETS: {"uploader": secure(AWS_ACCESS_KEY_ID="a", AWS_REGION="x")}}
    with pytest.raises(Exception, match=r"missing \['AWS_SECRET_ACCESS_KEY'\], not expected \['AWS_REGION'\]"):
        plan_one(tmp_path, POLICY, "gke-test", config, workloads_dir=workloads)


def test_credentials_for_a_workload_not_here_are_reported(tmp_path: Path, workloads: Path) -> None:
    config = {
        **CONFIG,
        SECRETS: {
            "uploader": secure(AWS_ACCESS_KEY_ID="a", AWS_SECRET_ACCESS_KEY="b"),
            "pyhf": secure(TOKEN="t"),
        },
    }
    plan = plan_one(tmp_path, POLICY, "gke-test", config, workloads_dir=workloads)
    assert any("gpu-fleet:workloadSecrets.pyhf is not used" in f.message for f in plan.findings)


def test_nested_encrypted_values_make_the_key_secret(tmp_path: Path) -> None:
    (tmp_path / "Pulumi.s.yaml").write_text(
        "config:\n  gpu-fleet:workloadSecrets:\n    uploader:\n      AWS_ACCESS_KEY_ID:\n        secure: v1:abc\n"
        "  gpu-fleet:plain: {a: [1, {b: c}]}\n",
        encoding="utf-8",
    )
    config, secret_keys = load_stack_config("s", tmp_path)
    assert secret_keys == ["gpu-fleet:workloadSecrets"]
    assert config["gpu-fleet:workloadSecrets"] == f'{{"uploader": {{"AWS_ACCESS_KEY_ID": "{SECRET_PLACEHOLDER}"}}}}'
    assert config["gpu-fleet:plain"] == '{"a": [1, {"b": "c"}]}'
