"""IRSA on EKS: IAM roles that one Kubernetes service account assumes through the cluster's IAM OIDC provider, and
the EKS add-ons whose controllers use one (the VPC CNI, the EBS CSI driver). The policy documents are
fleet/model/core/clouds/eks_iam.py."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws

from fleet.model.core.clouds.eks_iam import CNI_POLICY, EBS_CSI_POLICY, irsa_trust_policy, managed_policy_arn

CNI_SA_NAME = "aws-node"  # the VPC CNI's service account in kube-system
EBS_CSI_SA_NAME = "ebs-csi-controller-sa"  # the add-on's controller service account (aws-ebs-csi-driver docs)


@dataclass(frozen=True)
class Irsa:
    """What the IRSA roles and add-ons of one cluster share: the cluster, its OIDC provider (which every role
    trusts) and the issuer's host, the AWS partition, and ``child(**options)``, the options of a child of the cluster
    component with its AWS provider."""

    cluster_name: pulumi.Input[str]
    oidc_provider_arn: pulumi.Input[str]
    issuer_host: pulumi.Input[str]
    partition: str
    child: Callable[..., pulumi.ResourceOptions]
    boundary: pulumi.Input[str]  # the permissions boundary every role carries (eks_iam.BOUNDARY_NAME)


def irsa_role(irsa: Irsa, name: str, namespace: str, service_account: str) -> aws.iam.Role:
    """An IAM role that only the Kubernetes service account ``namespace/service_account`` assumes (IRSA)."""

    def trust(args: list[Any]) -> str:
        oidc_arn, host = args
        return irsa_trust_policy(oidc_arn, host, namespace, service_account)

    return aws.iam.Role(
        name,
        assume_role_policy=pulumi.Output.all(irsa.oidc_provider_arn, irsa.issuer_host).apply(trust),
        permissions_boundary=irsa.boundary,
        opts=irsa.child(),
    )


def irsa_addon(
    irsa: Irsa,
    name: str,
    addon: str,
    service_account: str,
    policy_arn: str,
    configuration: dict[str, Any],
    depends_on: list[pulumi.Resource] | None = None,
    **extra: Any,
) -> aws.eks.Addon:
    """An EKS add-on whose service account (in kube-system) assumes an IRSA role with one managed policy."""
    role = irsa_role(irsa, name, "kube-system", service_account)
    attachment = aws.iam.RolePolicyAttachment(name, role=role.name, policy_arn=policy_arn, opts=irsa.child())
    return aws.eks.Addon(
        name,
        cluster_name=irsa.cluster_name,
        addon_name=addon,
        service_account_role_arn=role.arn,
        configuration_values=json.dumps(configuration),
        opts=irsa.child(depends_on=[attachment, *(depends_on or [])]),
        **extra,
    )


def vpc_cni(irsa: Irsa, cluster: str) -> aws.eks.Addon:
    """The VPC CNI add-on with its own IRSA role (the node role has no CNI policy) and NetworkPolicy
    enforcement on (add-on configuration ``enableNetworkPolicy``, EKS docs "Limit pod traffic with
    Kubernetes network policies"; the network policy agent runs in the aws-node pods)."""
    return irsa_addon(
        irsa,
        f"{cluster}-vpc-cni",
        "vpc-cni",
        CNI_SA_NAME,
        managed_policy_arn(irsa.partition, CNI_POLICY),
        {"enableNetworkPolicy": "true"},
        resolve_conflicts_on_create="OVERWRITE",  # EKS installs a self-managed copy with every cluster
    )


def ebs_csi_driver(irsa: Irsa, cluster: str, system_node_group: pulumi.Resource) -> aws.eks.Addon:
    """The EBS CSI driver add-on with its default StorageClass, for the central Prometheus volume.

    New EKS clusters (1.30+) no longer mark gp2 as default, and volumes need the EBS CSI driver (EKS docs
    "Store Kubernetes volumes with Amazon EBS"); the add-on creates a default class from v1.31.0 on when
    ``defaultStorageClass.enabled`` is set (aws-ebs-csi-driver add-on configuration). Its controller uses IRSA.
    """
    return irsa_addon(
        irsa,
        f"{cluster}-ebs-csi",
        "aws-ebs-csi-driver",
        EBS_CSI_SA_NAME,
        managed_policy_arn(irsa.partition, EBS_CSI_POLICY),
        {"defaultStorageClass": {"enabled": True}},
        depends_on=[system_node_group],
    )
