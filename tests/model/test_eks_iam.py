"""EKS's IAM documents as data (fleet/model/core/clouds/eks_iam.py), without Pulumi: the partition of a region, managed
policy ARNs, the trust of an IRSA role and what the cluster-autoscaler may write."""

from __future__ import annotations

import json

import pytest

from fleet.model.core.clouds import eks_iam


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


def test_the_deploy_role_shapes_roles_only_with_the_boundary_which_stays():
    import json

    from fleet.model.core.clouds.eks_iam import BOUNDARY_ACTIONS, boundary_policy, deploy_iam_statements

    statements = {s["Sid"]: s for s in deploy_iam_statements("aws", "123456789012")}
    boundary = "arn:aws:iam::123456789012:policy/gpu-fleet-boundary"
    writes = statements["FleetRolesOnlyWithTheBoundary"]
    assert {"iam:CreateRole", "iam:AttachRolePolicy", "iam:PutRolePolicy"} <= set(writes["Action"])
    assert writes["Condition"] == {"StringEquals": {"iam:PermissionsBoundary": boundary}}
    # no write action is allowed without that condition anywhere else
    unconditioned = {
        a for s in statements.values() if s["Effect"] == "Allow" and "Condition" not in s for a in s["Action"]
    }
    assert not unconditioned & set(writes["Action"])
    assert "iam:DeleteRolePermissionsBoundary" in statements["TheBoundaryStays"]["Action"]
    # the boundary gives no IAM but the ELB service-linked role, no sts, no s3
    allowed = json.loads(boundary_policy())["Statement"][0]["Action"]
    assert allowed == BOUNDARY_ACTIONS
    assert [a for a in allowed if a.startswith("iam:")] == ["iam:CreateServiceLinkedRole"]
    assert not [a for a in allowed if a.startswith(("sts:", "s3:", "*"))]
