"""A cluster that already exists (a site's own, or a local kind cluster), joined through its kubeconfig."""

from __future__ import annotations

import pulumi

from components.cluster import GpuCluster
from fleet.policy import Cluster
from fleet.settings import NAMESPACE


class ExistingCluster(GpuCluster):
    """No cloud resources: the Kubernetes provider comes from the ``gpu-fleet:kubeconfig`` secret.

    Set it with ``pulumi config set --secret gpu-fleet:kubeconfig "$(cat kubeconfig.yaml)"``. The policy's
    cards must already exist as node pools labelled ``gpu=<card>`` (and tainted) on the cluster: we only
    schedule onto them.
    """

    TYPE = "gpufleet:index:ExistingCluster"
    CLOUD = "existing"

    def _build(self, cluster: Cluster) -> tuple[pulumi.Input[str], dict[str, pulumi.Resource], pulumi.Input[str]]:
        kubeconfig = pulumi.Config(NAMESPACE).require_secret("kubeconfig")
        return kubeconfig, {}, cluster.name
