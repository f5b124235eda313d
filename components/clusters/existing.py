"""A cluster that already exists (a site's own, or a local kind cluster), joined through its kubeconfig."""

from __future__ import annotations

import pulumi

from components.clusters.cluster import GpuCluster
from fleet.model.core.clusters import Cluster
from fleet.model.core.errors import InputError


class ExistingCluster(GpuCluster):
    """No cloud resources: the Kubernetes provider comes from the ``gpu-fleet:kubeconfig`` secret.

    Set it with ``pulumi config set --secret gpu-fleet:kubeconfig "$(cat kubeconfig.yaml)"``. The policy's
    cards must already exist as node pools labelled ``gpu=<card>`` (and tainted) on the cluster: we only
    schedule onto them.
    """

    TYPE = "gpufleet:index:ExistingCluster"
    CLOUD = "existing"
    CONTROLS_API_ACCESS = False  # someone else runs it

    def _build(self, cluster: Cluster) -> tuple[pulumi.Input[str], dict[str, pulumi.Resource], pulumi.Input[str]]:
        key = self.settings.key("kubeconfig")
        if self.settings.kubeconfig is None:
            # never in plain text in the stack file: it grants access to the whole cluster
            raise InputError(
                [
                    self.settings.config_problem(
                        key, f'required as a secret: pulumi config set --secret {key} "$(cat kubeconfig)"'
                    )
                ]
            )
        return self.settings.kubeconfig, {}, cluster.name
