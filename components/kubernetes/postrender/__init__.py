"""Helm post-renderers of the fleet's releases: a chart's rendered manifests in, the same with what the chart has no
value for out, run by the cluster's Helm after it renders the chart (a ``helm.v3.Release``'s ``postrender``: the
Kubernetes provider renders the chart itself, so no Pulumi transform reaches its objects).

Each is an executable beside its Python module; a release names it by its path from the project's folder
(Pulumi.yaml's), where the provider runs it (the path in the pod contract, which the policy pack reads too).
``POST_RENDERERS`` maps that path to the module's function, which fleet/tools/checks/charts.py applies when it
renders the release offline. nvidia-device-plugin's: its config manager's containers and the MPS daemon's get the
plugin's own resources.
"""

from __future__ import annotations

from collections.abc import Callable

from components.kubernetes.postrender import device_plugin
from fleet.model.core.pod_contract import DEVICE_PLUGIN_POSTRENDER

__all__ = ["DEVICE_PLUGIN_POSTRENDER", "POST_RENDERERS"]

POST_RENDERERS: dict[str, Callable[[str], str]] = {DEVICE_PLUGIN_POSTRENDER: device_plugin.post_render}
