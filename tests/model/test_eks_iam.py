"""EKS's IAM documents as data (fleet/model/clouds/eks_iam.py), without Pulumi: the partition of a region, managed
policy ARNs, the trust of an IRSA role and what the cluster-autoscaler may write."""

from __future__ import annotations

import json

import pytest

from fleet.model.clouds import eks_iam


@pytest.mark.parametrize(
    ("region", "partition"), [("us-east-1", "aws"), ("cn-north-1", "aws-cn"), ("us-gov-west-1", "aws-us-gov")]
)
def test_the_partition_comes_from_the_region(region: str, partition: str) -> None:
    assert eks_iam.partition(region) == partition
    assert eks_iam.managed_policy_arn(partition, eks_iam.CNI_POLICY) == (
        f"arn:{partition}:iam::aws:policy/AmazonEKS_CNI_Policy"
    )


def test_an_irsa_role_trusts_one_service_account_for_sts_only() -> None:
    (statement,) = json.loads(eks_iam.irsa_trust_policy("arn:oidc", "oidc.example/id/X", "kube-system", "aws-node"))[
        "Statement"
    ]
    assert statement["Principal"] == {"Federated": "arn:oidc"}
    assert statement["Action"] == "sts:AssumeRoleWithWebIdentity"
    assert statement["Condition"] == {
        "StringEquals": {
            "oidc.example/id/X:sub": "system:serviceaccount:kube-system:aws-node",
            "oidc.example/id/X:aud": "sts.amazonaws.com",
        }
    }


def test_the_autoscaler_writes_only_on_its_own_clusters_groups() -> None:
    read, write = json.loads(eks_iam.autoscaler_policy("eks-a"))["Statement"]
    assert "Condition" not in read and not any(a in read["Action"] for a in eks_iam.AUTOSCALER_WRITE_ACTIONS)
    assert write["Action"] == eks_iam.AUTOSCALER_WRITE_ACTIONS
    assert write["Condition"] == {"StringEquals": {"aws:ResourceTag/k8s.io/cluster-autoscaler/eks-a": "owned"}}


def test_the_node_role_has_no_cni_policy() -> None:
    """The VPC CNI gets its policy through IRSA, never through the nodes' role."""
    assert eks_iam.CNI_POLICY not in eks_iam.NODE_POLICIES
