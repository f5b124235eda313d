"""What the internet reaches: the Kubernetes API and every LoadBalancer Service (the federation gateway) admit
only listed source ranges. Advisory in previews (a new stack shows what to set); a deploy makes both mandatory
(policy/deploy-config.json), so nothing is deployed open to every address."""

from __future__ import annotations

import ipaddress
from typing import Any

from pulumi_policy import ReportViolation, ResourceValidationArgs

from .registry import ADVISORY, resource_policy
from .resources import plain, stack_of, subject

SERVICE = "kubernetes:core/v1:Service"
MAGNUM_TEMPLATE = "openstack:containerinfra/clusterTemplate:ClusterTemplate"
MAGNUM_CIDRS_LABEL = "master_lb_allowed_cidrs"


def open_to_all(ranges: Any) -> bool:
    """Whether a list of source ranges is missing, empty or admits every address."""
    if not isinstance(ranges, list) or not ranges:
        return True
    for cidr in ranges:
        try:
            if ipaddress.ip_network(str(cidr), strict=False).prefixlen == 0:
                return True
        except ValueError:
            continue  # the stack settings report malformed ranges
    return False


@resource_policy(
    "federation-source-ranges",
    "A LoadBalancer Service (the federation gateway) admits only listed source ranges "
    "(gpu-fleet:federationSourceRanges), not every address; mandatory for deploys.",
    ADVISORY,
)
def _validate_load_balancer(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type != SERVICE:
        return
    spec = plain(args.props).get("spec") or {}
    if spec.get("type") == "LoadBalancer" and open_to_all(spec.get("loadBalancerSourceRanges")):
        report(
            f"{subject(args)} is a LoadBalancer open to every address: set the central cluster's egress ranges with "
            f"pulumi config set --stack {stack_of(args.urn)} --path 'gpu-fleet:federationSourceRanges[0]' <CIDR>"
        )


def _api_open(resource_type: str, props: dict[str, Any]) -> bool | None:
    """Whether a cluster's API endpoint admits every address (None: not a resource that decides it)."""
    if resource_type == "gcp:container/cluster:Cluster":
        private = (props.get("privateClusterConfig") or {}).get("enablePrivateEndpoint") is True
        blocks = [
            b.get("cidrBlock") for b in (props.get("masterAuthorizedNetworksConfig") or {}).get("cidrBlocks") or []
        ]
        return not private and open_to_all(blocks)
    if resource_type == "aws:eks/cluster:Cluster":
        vpc = props.get("vpcConfig") or {}
        return vpc.get("endpointPublicAccess") is not False and open_to_all(vpc.get("publicAccessCidrs"))
    if resource_type == "azure-native:containerservice:ManagedCluster":
        access = props.get("apiServerAccessProfile") or {}
        return access.get("enablePrivateCluster") is not True and open_to_all(access.get("authorizedIPRanges"))
    if resource_type == MAGNUM_TEMPLATE:
        cidrs = str((props.get("labels") or {}).get(MAGNUM_CIDRS_LABEL) or "")
        return open_to_all([c for c in cidrs.split(",") if c])
    return None


@resource_policy(
    "api-allow-list",
    "A cluster's Kubernetes API endpoint is private or admits only gpu-fleet:apiAllowedCidrs; mandatory for deploys.",
    ADVISORY,
)
def _validate_api_endpoint(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if _api_open(args.resource_type, plain(args.props)):
        stack = stack_of(args.urn)
        report(
            f"{subject(args)}: the Kubernetes API endpoint admits every address; set the ranges of the people and "
            f"runners that run kubectl and pulumi with pulumi config set --stack {stack} --path "
            "'gpu-fleet:apiAllowedCidrs[0]' <CIDR> (or gpu-fleet:privateApiEndpoint true where the cloud offers it)"
        )
