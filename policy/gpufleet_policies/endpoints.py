"""What the internet reaches: the Kubernetes API and every LoadBalancer Service (the federation gateway) admit
only listed source ranges. Advisory in previews (a new stack shows what to set); a deploy makes both mandatory
(policy/deploy-config.json), so nothing is deployed open to every address."""

from __future__ import annotations

from typing import Any

from pulumi_policy import ReportViolation, ResourceValidationArgs

from fleet.model.core.clouds import api_endpoint_readers
from fleet.model.core.clouds.rules import open_to_all

from .registry import ADVISORY, resource_policy
from .resources import plain, stack_of, subject

SERVICE = "kubernetes:core/v1:Service"


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
    """Whether a cluster's API endpoint admits every address (None: not a resource that decides it); each cloud's
    rules read their own resource (fleet/model/core/clouds/)."""
    rules = api_endpoint_readers().get(resource_type)
    return None if rules is None else rules.api_open(props)


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
