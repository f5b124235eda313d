"""GPU containers on GKE find the driver GKE's device plugin mounts at /usr/local/nvidia without telling them (no
variable set: GoogleCloudPlatform/container-engine-accelerators @992db812 cmd/nvidia_gpu/nvidia_gpu.go,
pkg/gpu/nvidia/manager.go Envs): benchmark, probe and sweep containers and CI jobs append its lib64 and bin to the
image's own LD_LIBRARY_PATH and PATH; nothing changes where the NVIDIA toolkit sets containers up itself."""

from __future__ import annotations

import shutil
import subprocess
import tomllib

import pytest

from components.kubernetes.benchmark import driver_exports
from fleet.model.core.catalogue import load_catalogue
from fleet.tools.engine.plan import StackPlan
from tests.conftest import FIXTURES
from tests.helpers import by_type, one, plan_one

POLICY = """
clusters:
  gcp:
    gke-drv:
      zone: us-central1-a
      central: true
      gpus: [l4, tpu-v5e]
workloads:
  tracker: [l4]
  sweeper: {gpus: [l4], scale: [1, 2]}
runners:
  clusters:
    gke-drv: [l4, tpu-v5e]
"""
GKE = {"gcp:project": "drv-project", "gcp:zone": "us-central1-a"}
DRIVER = load_catalogue().clouds["gcp"].gpu_driver_dir


@pytest.fixture(scope="module")
def gke(tmp_path_factory: pytest.TempPathFactory) -> StackPlan:
    return plan_one(
        tmp_path_factory.mktemp("drv"), POLICY, "gke-drv", GKE, workloads_dir=FIXTURES / "fleet" / "workloads"
    )


def _commands(plan: StackPlan, resource: str = "nvidia.com/gpu") -> list[str]:
    """The shell wrapper of every benchmark, probe and sweep worker container asking for ``resource``."""
    out = []
    for reg in by_type(plan, "kubernetes:batch/v1:Job") + by_type(plan, "kubernetes:batch/v1:CronJob"):
        spec = reg.inputs["spec"]
        spec = spec["jobTemplate"]["spec"] if "jobTemplate" in spec else spec
        out += [c["command"][2] for c in spec["template"]["spec"]["containers"] if _asks(c, resource)]
    for reg in by_type(plan, "kubernetes:trainer.kubeflow.org/v1alpha1:TrainingRuntime"):
        for job in reg.inputs["spec"]["template"]["spec"]["replicatedJobs"]:
            containers = job["template"]["spec"]["template"]["spec"]["containers"]
            out += [c["command"][2] for c in containers if _asks(c, resource)]
    return out


def _asks(container: dict, resource: str) -> bool:
    return resource in container["resources"].get("limits", {})


def test_gke_is_where_the_driver_is_mounted_unannounced():
    assert DRIVER == "/usr/local/nvidia"
    assert all(not f.gpu_driver_dir for c, f in load_catalogue().clouds.items() if c != "gcp")


def test_every_gpu_container_on_gke_appends_the_drivers_directories(gke):
    commands = _commands(gke)
    assert len(commands) >= 3  # the benchmark, the l4 pool's probe, the sweep points
    for command in commands:
        assert f'export LD_LIBRARY_PATH="${{LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}}{DRIVER}/lib64"' in command
        assert f'export PATH="${{PATH:+$PATH:}}{DRIVER}/bin"' in command
    tpu = _commands(gke, "google.com/tpu")
    assert tpu and not any("LD_LIBRARY_PATH" in c for c in tpu)  # a TPU container loads no NVIDIA driver


@pytest.mark.skipif(shutil.which("sh") is None, reason="needs a POSIX shell")
def test_the_exports_keep_the_images_own_values():
    script = driver_exports({"LD_LIBRARY_PATH": f"{DRIVER}/lib64", "PATH": f"{DRIVER}/bin"})
    env = {"PATH": "/opt/conda/bin:/usr/bin:/bin", "LD_LIBRARY_PATH": "/opt/lib"}
    out = subprocess.run(["/bin/sh", "-c", script + 'echo "$LD_LIBRARY_PATH|$PATH"'], env=env, capture_output=True,
                         text=True, check=True).stdout.strip()  # fmt: skip
    assert out == f"/opt/lib:{DRIVER}/lib64|/opt/conda/bin:/usr/bin:/bin:{DRIVER}/bin"
    unset = subprocess.run(["/bin/sh", "-c", script + 'echo "$LD_LIBRARY_PATH"'], env={"PATH": "/usr/bin:/bin"},
                           capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    assert unset == f"{DRIVER}/lib64"


def test_a_gpu_ci_job_on_gke_gets_the_driver_and_a_tpu_job_nothing(gke):
    def runner(card: str) -> dict:
        release = one(gke, "kubernetes:helm.sh/v3:Release", f"gke-drv-gitlab-runner-{card}")
        (entry,) = tomllib.loads(release.inputs["values"]["runners"]["config"])["runners"]
        return entry

    assert f"{DRIVER}/lib64" in runner("l4")["pre_build_script"] and f"{DRIVER}/bin" in runner("l4")["pre_build_script"]
    assert "pre_build_script" not in runner("tpu-v5e")
