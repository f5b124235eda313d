"""Kubernetes clusters are protected against deletion; every IAM role carries the fleet's permissions boundary."""

from __future__ import annotations

from pulumi_policy import ReportViolation, ResourceValidationArgs

from fleet.model.core.clouds import cluster_types
from fleet.model.core.clouds.eks_iam import BOUNDARY_NAME

from .registry import resource_policy

CLUSTER_TYPES = cluster_types()
IAM_ROLE = "aws:iam/role:Role"


@resource_policy(
    "cluster-protected",
    "Kubernetes clusters are protected against deletion.",
)
def _validate_protected(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type in CLUSTER_TYPES and not args.opts.protect:
        report(
            f"cluster {args.name!r} is not protected, so a refactoring or `pulumi destroy` could delete it with "
            "every node pool and benchmark history; register it with ResourceOptions(protect=True)"
        )


@resource_policy(
    "iam-role-boundary",
    "Every IAM role a stack creates carries the fleet's permissions boundary (gpu-fleet-boundary): the deploy role "
    "may create roles only with it, so no role of the fleet can do IAM, assume roles or reach S3.",
)
def _validate_role_boundary(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type != IAM_ROLE:
        return
    boundary = args.props.get("permissionsBoundary")
    if not isinstance(boundary, str) or not boundary.endswith(f":policy/{BOUNDARY_NAME}"):
        report(
            f"IAM role {args.name!r} has no permissions boundary {BOUNDARY_NAME!r} (it has {boundary!r}): set "
            "permissions_boundary=boundary_arn(...) (fleet/model/core/clouds/eks_iam.py); the deploy role may create a "
            "role only with it"
        )
