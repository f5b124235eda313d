"""Amazon EKS's identities as data: the AWS managed policies each role gets, the trust policy of a role a service
assumes and of one a Kubernetes service account assumes (IRSA), and what the cluster-autoscaler may do. The SDK calls
that create the roles are in components/clusters/eks.py and eks_irsa.py."""

from __future__ import annotations

import json

CLUSTER_POLICIES = ["AmazonEKSClusterPolicy"]
# The nodes' own role: no AmazonEKS_CNI_Policy, which the VPC CNI gets through IRSA instead (EKS docs "Configure
# the Amazon VPC CNI plugin to use IRSA"), so no pod that reaches the node's credentials can rewire the network.
NODE_POLICIES = ["AmazonEKSWorkerNodePolicy", "AmazonEC2ContainerRegistryReadOnly"]
CNI_POLICY = "AmazonEKS_CNI_Policy"
EBS_CSI_POLICY = "service-role/AmazonEBSCSIDriverPolicy"  # the EBS CSI driver's controller (aws-ebs-csi-driver docs)
# What cluster-autoscaler needs on AWS (autoscaler AWS FAQ, "Full Cluster Autoscaler Features Policy"):
# read everywhere, write only on the ASGs tagged as owned by this cluster.
AUTOSCALER_READ_ACTIONS = [
    "autoscaling:DescribeAutoScalingGroups",
    "autoscaling:DescribeAutoScalingInstances",
    "autoscaling:DescribeLaunchConfigurations",
    "autoscaling:DescribeScalingActivities",
    "autoscaling:DescribeTags",
    "ec2:DescribeImages",
    "ec2:DescribeInstanceTypes",
    "ec2:DescribeLaunchTemplateVersions",
    "ec2:GetInstanceTypesFromInstanceRequirements",
    "eks:DescribeNodegroup",
]
AUTOSCALER_WRITE_ACTIONS = ["autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup"]


def partition(region: str) -> str:
    """The AWS partition of a region, without an invoke (aws.get_partition would need a mock answer)."""
    if region.startswith("cn-"):
        return "aws-cn"
    if region.startswith("us-gov-"):
        return "aws-us-gov"
    return "aws"


def managed_policy_arn(partition: str, policy: str) -> str:
    """The ARN of the AWS managed policy ``policy`` (``AmazonEKSClusterPolicy``, ``service-role/...``)."""
    return f"arn:{partition}:iam::aws:policy/{policy}"


def assume_role_policy(service: str) -> str:
    """The trust policy of a role the AWS ``service`` (``eks.amazonaws.com``) assumes."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Principal": {"Service": service}, "Action": "sts:AssumeRole"}],
        }
    )


def irsa_trust_policy(oidc_arn: str, host: str, namespace: str, service_account: str) -> str:
    """The trust policy of a role that only the Kubernetes service account ``namespace/service_account`` assumes
    (IRSA), through the cluster's IAM OIDC provider ``oidc_arn`` whose issuer is ``host``."""
    subject = f"system:serviceaccount:{namespace}:{service_account}"
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Federated": oidc_arn},
                    "Action": "sts:AssumeRoleWithWebIdentity",
                    "Condition": {"StringEquals": {f"{host}:sub": subject, f"{host}:aud": "sts.amazonaws.com"}},
                }
            ],
        }
    )


def autoscaler_policy(cluster: str) -> str:
    """The cluster-autoscaler's own policy: read everywhere, scale only the groups tagged as owned by ``cluster``."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {"Effect": "Allow", "Action": AUTOSCALER_READ_ACTIONS, "Resource": "*"},
                {
                    "Effect": "Allow",
                    "Action": AUTOSCALER_WRITE_ACTIONS,
                    "Resource": "*",
                    "Condition": {"StringEquals": {f"aws:ResourceTag/k8s.io/cluster-autoscaler/{cluster}": "owned"}},
                },
            ],
        }
    )


# Every IAM role the fleet creates carries this permissions boundary, and the deploy role may create, change or tag a
# role only with it (``deploy_iam_statements``): a role's effective rights are what both its policies and its
# boundary allow (AWS IAM User Guide, "Permissions boundaries for IAM entities"), so the deploy role cannot make a
# role with any policy and assume it. The operator creates the boundary once (docs/delivery.md, AWS).
BOUNDARY_NAME = "gpu-fleet-boundary"
# What the fleet's roles use, by service: the control plane (AmazonEKSClusterPolicy: EC2, load balancers, KMS, the
# ELB service-linked role), the nodes (AmazonEKSWorkerNodePolicy, AmazonEC2ContainerRegistryReadOnly), the VPC CNI
# (AmazonEKS_CNI_Policy: EC2 network interfaces), the EBS CSI driver (AmazonEBSCSIDriverPolicy: EC2 volumes and
# snapshots, KMS grants) and the cluster-autoscaler (AUTOSCALER_*). No other IAM action, no sts:AssumeRole, no S3.
BOUNDARY_ACTIONS = [
    "autoscaling:*",
    "ec2:*",
    "ecr:BatchCheckLayerAvailability",
    "ecr:BatchGetImage",
    "ecr:DescribeImages",
    "ecr:DescribeRepositories",
    "ecr:GetAuthorizationToken",
    "ecr:GetDownloadUrlForLayer",
    "ecr:GetRepositoryPolicy",
    "ecr:ListImages",
    "eks:Describe*",
    "eks-auth:AssumeRoleForPodIdentity",
    "elasticloadbalancing:*",
    "iam:CreateServiceLinkedRole",
    "kms:CreateGrant",
    "kms:Decrypt",
    "kms:DescribeKey",
    "kms:Encrypt",
    "kms:GenerateDataKeyWithoutPlaintext",
    "kms:ListGrants",
    "kms:ReEncrypt*",
    "kms:RevokeGrant",
]
# The IAM actions by which the deploy role shapes a role of the fleet's; each only with the boundary
ROLE_WRITE_ACTIONS = [
    "iam:AttachRolePolicy",
    "iam:CreateRole",
    "iam:DeleteRolePolicy",
    "iam:DetachRolePolicy",
    "iam:PutRolePermissionsBoundary",
    "iam:PutRolePolicy",
    "iam:TagRole",
    "iam:UpdateAssumeRolePolicy",
]
ROLE_READ_ACTIONS = [
    "iam:DeleteRole",
    "iam:GetRole",
    "iam:GetRolePolicy",
    "iam:ListAttachedRolePolicies",
    "iam:ListInstanceProfilesForRole",
    "iam:ListRolePolicies",
    "iam:PassRole",
]


def boundary_arn(partition: str, account: str) -> str:
    """The ARN of the fleet's permissions boundary in ``account``."""
    return f"arn:{partition}:iam::{account}:policy/{BOUNDARY_NAME}"


def boundary_policy() -> str:
    """The boundary policy's document (``aws iam create-policy --policy-name gpu-fleet-boundary``)."""
    return json.dumps(
        {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": BOUNDARY_ACTIONS, "Resource": "*"}]},
        indent=2,
    )


def deploy_iam_statements(partition: str, account: str) -> list[dict[str, object]]:
    """The IAM part of the deploy role's policy: roles named ``<cluster>-*`` only, written only with the boundary, and
    neither the boundary nor a role's boundary removable."""
    roles = f"arn:{partition}:iam::{account}:role/*-*"
    boundary = boundary_arn(partition, account)
    return [
        {
            "Sid": "FleetRolesOnlyWithTheBoundary",
            "Effect": "Allow",
            "Action": ROLE_WRITE_ACTIONS,
            "Resource": roles,
            "Condition": {"StringEquals": {"iam:PermissionsBoundary": boundary}},
        },
        {"Sid": "FleetRoles", "Effect": "Allow", "Action": ROLE_READ_ACTIONS, "Resource": roles},
        {
            "Sid": "TheBoundaryStays",
            "Effect": "Deny",
            "Action": [
                "iam:CreatePolicyVersion",
                "iam:DeletePolicy",
                "iam:DeletePolicyVersion",
                "iam:DeleteRolePermissionsBoundary",
                "iam:SetDefaultPolicyVersion",
            ],
            "Resource": "*",
        },
        {
            "Sid": "ClusterOidcProviders",
            "Effect": "Allow",
            "Action": [
                "iam:CreateOpenIDConnectProvider",
                "iam:DeleteOpenIDConnectProvider",
                "iam:GetOpenIDConnectProvider",
                "iam:TagOpenIDConnectProvider",
            ],
            "Resource": f"arn:{partition}:iam::{account}:oidc-provider/oidc.eks.*",
        },
    ]
