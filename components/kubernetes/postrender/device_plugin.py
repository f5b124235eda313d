"""Helm post-renderer of the nvidia-device-plugin release: every container of a pod the chart renders without
resources gets the resources the chart gave the pod's other containers, the plugin's own (the release's
``resources`` value, fleet/model/placement/node_agents.py ``DEVICE_PLUGIN_RESOURCES``).

The chart has no value for them. nvidia-device-plugin 0.17.1 (NVIDIA/k8s-device-plugin v0.17.1, 3c378193,
deployments/helm/nvidia-device-plugin) has one ``resources`` key (values.yaml line 61) and gives it to the plugin's
container alone: templates/daemonset-device-plugin.yml lines 221-224, on ``nvidia-device-plugin-ctr``; its config
manager's ``nvidia-device-plugin-init`` (line 62) and ``nvidia-device-plugin-sidecar`` (line 98), rendered where the
release has a ``config`` (a shared pool: components/kubernetes/gpu_agents.py), get none. The MPS control daemon's
DaemonSet, templates/daemonset-mps-control-daemon.yml, gives it to ``mps-control-daemon-mounts`` (lines 67-70) and
``mps-control-daemon-ctr`` (lines 182-185), not to ``mps-control-daemon-init`` (line 73) or
``mps-control-daemon-sidecar`` (line 110). The same at v0.18.2 and on the default branch (1b826acc, 2026).

What they get, the plugin's own resources, is what NVIDIA's GPU Operator gives the same containers of its own
device plugin and MPS DaemonSets (NVIDIA/gpu-operator a22dbf67, v26.7.0+3, controllers/object_controls.go):
``devicePlugin.resources`` on every container, config-manager sidecar included (TransformDevicePlugin, lines
1567-1573; TransformMPSControlDaemon, lines 1666-1672, and its mounts init container, line 1649) and on the
config-manager init container (transformConfigManagerInitContainer, line 2891, configManagerResourceRequirements).
Upstream suggests no size of its own (the chart's ``resources: {}``, the operator's ``devicePlugin.resources: {}``,
deployments/gpu-operator/values.yaml line 250).

Run as a program (the executable ``nvidia-device-plugin`` beside it): manifests on stdin, the result on stdout, a
message on stderr and status 1 when a pod's containers carry different resources (which to copy is then unclear).
Documents it does not change are passed on byte for byte, the others written as JSON (a YAML document whose every
string is quoted). Only PyYAML and the standard library: it runs as a script, outside the fleet's packages.
"""

from __future__ import annotations

import copy
import json
import re
import sys
from typing import Any

import yaml

# Helm's separator between documents (helm.sh/helm/v3 pkg/releaseutil/manifest.go SplitManifests: a line of ---)
_SEPARATOR = re.compile(r"(^---[ \t]*$)", re.MULTILINE)
# Where each kind that holds a pod template holds it.
_POD_TEMPLATE = {
    "DaemonSet": ("spec", "template"),
    "Deployment": ("spec", "template"),
    "StatefulSet": ("spec", "template"),
    "Job": ("spec", "template"),
}


class PostRenderError(Exception):
    """A pod whose containers' resources cannot be completed."""


def _pod_spec(obj: dict[str, Any]) -> dict[str, Any] | None:
    path = _POD_TEMPLATE.get(str(obj.get("kind")))
    if path is None:
        return None
    node: Any = obj
    for key in (*path, "spec"):
        node = node.get(key) if isinstance(node, dict) else None
    return node if isinstance(node, dict) else None


def fill_resources(obj: dict[str, Any]) -> bool:
    """Give every container and init container of ``obj``'s pod that has no ``resources`` those of the others (all
    alike); whether it changed anything. ``PostRenderError`` where they differ."""
    spec = _pod_spec(obj)
    if spec is None:
        return False
    containers = [c for part in ("initContainers", "containers") for c in spec.get(part) or [] if isinstance(c, dict)]
    missing = [c for c in containers if not c.get("resources")]
    given = {json.dumps(c["resources"], sort_keys=True): c["resources"] for c in containers if c.get("resources")}
    if not missing or not given:
        return False
    if len(given) > 1:
        name = (obj.get("metadata") or {}).get("name")
        raise PostRenderError(
            f"{obj['kind']} {name}: its containers have different resources ({', '.join(sorted(given))}), so "
            f"{[c.get('name') for c in missing]} cannot take theirs"
        )
    (resources,) = given.values()
    for container in missing:
        container["resources"] = copy.deepcopy(resources)
    return True


def _document(text: str) -> str:
    """One document of the stream, its resources completed (its leading comments kept, such as Helm's ``# Source``)
    or, where nothing changes, as it came."""
    if not text.strip():
        return text
    obj = yaml.safe_load(text)
    if not isinstance(obj, dict) or not fill_resources(obj):
        return text
    lines = text.lstrip("\n").splitlines(keepends=True)
    comments = "".join(line for line in lines[: next((i for i, s in enumerate(lines) if not s.startswith("#")), 0)])
    # as JSON, which YAML reads as it is: every string quoted, none read back as a number or a boolean
    return "\n" + comments + json.dumps(obj, indent=2) + "\n"


def post_render(text: str) -> str:
    """The manifests ``text`` (Helm's rendered stream) with every pod's containers' resources completed."""
    parts = _SEPARATOR.split(text)
    return "".join(part if index % 2 else _document(part) for index, part in enumerate(parts))


def main() -> int:
    """stdin to stdout, as Helm runs a post-renderer."""
    try:
        sys.stdout.write(post_render(sys.stdin.read()))
    except (PostRenderError, yaml.YAMLError) as error:
        print(f"nvidia-device-plugin post-renderer: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
