"""The Helm post-renderers of the fleet's releases (components/kubernetes/postrender): what the device plugin's does
to a stream of manifests, its executable run as Helm runs it, and the release that names it. The same post-renderer
on the pinned chart's own rendering: tests/tools/test_charts.py."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from components.kubernetes.postrender import DEVICE_PLUGIN_POSTRENDER, POST_RENDERERS
from components.kubernetes.postrender.device_plugin import PostRenderError, fill_resources, post_render
from fleet.model.placement.node_agents import DEVICE_PLUGIN_RESOURCES
from tests.conftest import ROOT
from tests.helpers import MAGNUM_SITE, by_type, plan_one

PLUGIN = {"requests": {"cpu": "10m", "memory": "32Mi"}}
CONFIG_MAP = """---
# Source: nvidia-device-plugin/templates/configmap.yml
apiVersion: v1
kind: ConfigMap
metadata:
  name: nvidia-device-plugin-configs
data:
  default: |-
    version: v1
    flags:
      migStrategy: none
"""
# the shape nvidia-device-plugin 0.17.1 renders with a configuration (templates/daemonset-device-plugin.yml)
DAEMON_SET = """---
# Source: nvidia-device-plugin/templates/daemonset-device-plugin.yml
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: nvidia-device-plugin
  labels:
    app.kubernetes.io/version: "0.17.1"
spec:
  template:
    spec:
      initContainers:
      - image: k8s-device-plugin:v0.17.1
        name: nvidia-device-plugin-init
        env:
        - name: ONESHOT
          value: "true"
      containers:
      - image: k8s-device-plugin:v0.17.1
        name: nvidia-device-plugin-sidecar
      - image: k8s-device-plugin:v0.17.1
        name: nvidia-device-plugin-ctr
        resources:
          requests:
            cpu: 10m
            memory: 32Mi
"""


def _containers(obj: dict) -> dict[str, dict]:
    spec = obj["spec"]["template"]["spec"]
    return {c["name"]: c for c in [*spec.get("initContainers", []), *spec["containers"]]}


def test_the_config_managers_containers_get_the_plugins_resources_and_nothing_else_changes():
    out = post_render(CONFIG_MAP + DAEMON_SET)
    _config_map, daemon_set = yaml.safe_load_all(out)
    assert {name: c.get("resources") for name, c in _containers(daemon_set).items()} == {
        "nvidia-device-plugin-init": PLUGIN,
        "nvidia-device-plugin-sidecar": PLUGIN,
        "nvidia-device-plugin-ctr": PLUGIN,
    }
    # the rest as it was: strings stay strings, the env, the labels; Helm's source comment kept
    before = yaml.safe_load(DAEMON_SET)
    for name, container in _containers(before).items():
        assert {k: v for k, v in _containers(daemon_set)[name].items() if k != "resources"} == {
            k: v for k, v in container.items() if k != "resources"
        }
    assert (
        daemon_set["metadata"] == before["metadata"]
        and daemon_set["metadata"]["labels"]["app.kubernetes.io/version"] == "0.17.1"
    )
    assert "# Source: nvidia-device-plugin/templates/daemonset-device-plugin.yml\n{" in out
    # a document it does not change is passed on byte for byte, and a stream with nothing to do too
    assert out.startswith(CONFIG_MAP)
    assert post_render(CONFIG_MAP) == CONFIG_MAP
    done = post_render(CONFIG_MAP + DAEMON_SET)
    assert post_render(done) == done


def test_a_pod_whose_containers_ask_different_resources_is_refused_and_one_without_any_is_left():
    obj = yaml.safe_load(DAEMON_SET)
    _containers(obj)["nvidia-device-plugin-sidecar"]["resources"] = {"requests": {"cpu": "1"}}
    with pytest.raises(PostRenderError, match=r"DaemonSet nvidia-device-plugin: its containers have different "
                       r"resources .*\['nvidia-device-plugin-init'\] cannot take theirs"):  # fmt: skip
        fill_resources(obj)
    bare = yaml.safe_load(DAEMON_SET)
    del _containers(bare)["nvidia-device-plugin-ctr"]["resources"]
    assert fill_resources(bare) is False  # nothing to copy: the chart tier finds such a pod (no requests)


def _run(stream: str) -> subprocess.CompletedProcess[str]:
    """The executable, as the provider's Helm runs it: by its path from the project's folder, manifests on stdin."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run(
        [DEVICE_PLUGIN_POSTRENDER], input=stream, capture_output=True, text=True, cwd=ROOT, env=env, timeout=60
    )


def test_the_executable_runs_from_the_project_folder_with_the_projects_python():
    """The Release names it by its path from the project's folder (Pulumi.yaml's, where the provider runs); it
    runs the module with the project's virtualenv, the one Pulumi.yaml names."""
    assert (ROOT / "Pulumi.yaml").is_file()
    assert yaml.safe_load((ROOT / "Pulumi.yaml").read_text())["runtime"]["options"]["virtualenv"] == ".venv"
    assert os.access(ROOT / DEVICE_PLUGIN_POSTRENDER, os.X_OK)
    assert set(POST_RENDERERS) == {DEVICE_PLUGIN_POSTRENDER}
    done = _run(CONFIG_MAP + DAEMON_SET)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == post_render(CONFIG_MAP + DAEMON_SET)
    refused = _run(
        DAEMON_SET.replace("name: nvidia-device-plugin-sidecar", "name: s\n        resources: {limits: {cpu: 1}}")
    )
    assert refused.returncode == 1 and refused.stdout == ""
    assert "nvidia-device-plugin post-renderer: DaemonSet nvidia-device-plugin: its containers" in refused.stderr


def test_the_executable_without_the_projects_python_says_what_is_missing(tmp_path: Path):
    """A checkout without its .venv (found by the real tier on a copy of the repository): one line naming the missing
    interpreter and the README's set-up, status 1, nothing on stdout (Helm then fails the release with it)."""
    folder = tmp_path / Path(DEVICE_PLUGIN_POSTRENDER).parent
    shutil.copytree(ROOT / Path(DEVICE_PLUGIN_POSTRENDER).parent, folder)
    done = subprocess.run([str(tmp_path / DEVICE_PLUGIN_POSTRENDER)], input=DAEMON_SET, capture_output=True,
                          text=True, timeout=60, check=False)  # fmt: skip
    assert done.returncode == 1 and done.stdout == ""
    assert "no " in done.stderr and ".venv/bin/python" in done.stderr and "set-up command" in done.stderr


def test_the_device_plugin_release_names_the_post_renderer(tmp_path: Path):
    """Where the fleet runs the device plugin (Magnum brings none), with or without a shared pool: the chart's MPS
    daemon renders either way."""
    policy = "clusters:\n  openstack:\n    os-central:\n      region: site\n      central: true\n      gpus: [t4]\n"
    plan = plan_one(tmp_path, policy, "os-central", {"openstack:cloud": "site", "gpu-fleet:magnum": MAGNUM_SITE,
                                                     "gpu-fleet:storageClass": "cinder-ssd"})  # fmt: skip
    (release,) = [r.inputs for r in by_type(plan, "kubernetes:helm.sh/v3:Release") if "nvidia-device-plugin" in r.name]
    assert release["postrender"] == DEVICE_PLUGIN_POSTRENDER
    assert release["values"]["resources"] == DEVICE_PLUGIN_RESOURCES
