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
