"""Amazon EKS: the fleet's rules for it (the SDK calls are in components/clusters/eks.py and its eks_*.py parts; the
IAM documents in eks_iam.py)."""

from __future__ import annotations

from typing import Any

from fleet.model.core import pod_contract
from fleet.model.core.clouds.rules import CloudRules, DoctorContext, PoolView, Registration, open_to_all, taint_string

# The Helm release of the fleet's own cluster-autoscaler on EKS (components/clusters/eks.py); the chart labels its
# pods app.kubernetes.io/instance=<release> (kubernetes/autoscaler cluster-autoscaler-chart-9.56.0
# templates/_helpers.tpl).
AUTOSCALER_RELEASE = "cluster-autoscaler"
# The cluster-autoscaler's node template of an Auto Scaling group, from its tags <NODE_TEMPLATE>/label/<key>,
# /taint/<key> and /resources/<resource>, which EKS does not set (kubernetes/autoscaler cluster-autoscaler
# cloudprovider/aws README, aws_manager.go); components/clusters/eks_node_groups.py tags the group of each GPU node
# group with them, one tag resource of NODE_TEMPLATE_TAG_TYPE (pulumi_aws 7.51.1 autoscaling.Tag) per key.
NODE_TEMPLATE = "k8s.io/cluster-autoscaler/node-template"
NODE_TEMPLATE_TAG_TYPE = "aws:autoscaling/tag:Tag"


class Eks(CloudRules):
    """EKS: regional clusters, sweep pools, the fleet's own cluster-autoscaler."""

    name = "aws"
    closes_api_by_default = True  # no listed range: a private endpoint only
    region_example = "us-east-1"
    stack_location_keys = {"aws:region": "region"}
    sweep_pools = True
    # the engine types of pulumi_aws 7.51.1 eks.Cluster and eks.NodeGroup
    cluster_type = api_endpoint_type = "aws:eks/cluster:Cluster"
    pool_type = "aws:eks/nodeGroup:NodeGroup"

    def location_problems(self, region: str | None, zone: str | None) -> list[tuple[tuple[str, ...], str]]:
        """A region, and no zone: EKS clusters span the zones of their region."""
        return self.regional_location_problems(region, zone)

    def read_pool(self, registration: Registration) -> PoolView:
        """A ``NodeGroup``: labels, instanceTypes, scalingConfig, capacityType, taints."""
        inputs = registration.inputs
        labels = inputs.get("labels", {})
        scaling = inputs.get("scalingConfig", {})
        return PoolView(
            registration.type, registration.name, labels.get("gpu", ""), ",".join(inputs.get("instanceTypes", [])),
            scaling.get("minSize"), scaling.get("maxSize"), inputs.get("capacityType") == "SPOT",
            tuple(taint_string(t["key"], t.get("value", ""), t["effect"]) for t in inputs.get("taints", [])), labels,
            labels.get(pod_contract.CI_LABEL) == "true",
        )  # fmt: skip

    def api_open(self, inputs: dict[str, Any]) -> bool:
        """A public endpoint (EKS's default) without ``publicAccessCidrs`` (EKS's default: 0.0.0.0/0), or with it."""
        vpc = inputs.get("vpcConfig") or {}
        return vpc.get("endpointPublicAccess") is not False and open_to_all(vpc.get("publicAccessCidrs"))

    def autoscaler_logs(self, kubectl: str) -> str:
        """The fleet's own autoscaler's logs."""
        return f"{kubectl} -n kube-system logs -l app.kubernetes.io/instance={AUTOSCALER_RELEASE} --tail=100"

    def template_fix(self, ctx: DoctorContext) -> str:
        """The node-template tag of the pool's Auto Scaling group (components/clusters/eks_node_groups.py sets it)."""
        return (
            f"the pool's Auto Scaling group needs the tag {NODE_TEMPLATE}/resources/{ctx.resource}="
            f"{ctx.units_per_node} (components/clusters/eks_node_groups.py sets it): {ctx.up}, then "
            f"{self.autoscaler_logs(ctx.kubectl)}"
        )


RULES = Eks()
