"""Kubernetes clusters are protected against deletion."""

from __future__ import annotations

from pulumi_policy import ReportViolation, ResourceValidationArgs

from fleet.model.clouds import cluster_types

from .registry import resource_policy

CLUSTER_TYPES = cluster_types()


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
