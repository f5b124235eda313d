"""Amazon EKS: a cluster with a system node group, one GPU node group per card and the cluster-autoscaler.

The parts are modules of their own: the network (eks_network.py), the node groups and their node-template tags
(eks_node_groups.py), the IRSA roles and add-ons (eks_irsa.py); the IAM documents are
fleet/model/core/clouds/eks_iam.py.
"""

from __future__ import annotations

import functools
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.clusters.autoscaler import NAMESPACE as AUTOSCALER_NAMESPACE
from components.clusters.autoscaler import cluster_autoscaler
from components.clusters.cluster import GpuCluster
from components.clusters.eks_irsa import Irsa, ebs_csi_driver, irsa_role, vpc_cni
from components.clusters.eks_network import eks_network
from components.clusters.eks_node_groups import NodeGroupBase, gpu_node_group, slug, system_node_group
from components.clusters.kubeconfig import exec_kubeconfig
from components.kubernetes.images import autoscaler_image
from components.settings import ComponentSettings
from fleet.model.core.clouds.eks_iam import (
    CLUSTER_POLICIES,
    NODE_POLICIES,
    assume_role_policy,
    autoscaler_policy,
    boundary_arn,
    managed_policy_arn,
    partition,
)
from fleet.model.core.clusters import Cluster

AUTOSCALER_SA_NAME = "cluster-autoscaler"
PREVIEW_USER = "gpu-fleet-previewer"  # the Kubernetes user name of the preview role's access entry
# Every control-plane log type (EKS docs "Send control plane logs to CloudWatch Logs"); kept 90 days.
CONTROL_PLANE_LOGS = ["api", "audit", "authenticator", "controllerManager", "scheduler"]
LOG_RETENTION_DAYS = 90


class EksCluster(GpuCluster):
    """An EKS cluster built from plain ``pulumi_aws`` resources (no ``pulumi_eks``, which is opaque under mocks).

    Choices:
      - An explicit ``aws.Provider`` for the policy's region; every child uses it.
      - Network: a VPC with private subnets (nodes, internal load balancers) and public subnets (one NAT
        gateway for egress, internet-facing load balancers) in the zones of ``gpu-fleet:availabilityZones``
        (default ``<region>a``, ``<region>b``), or the existing subnets of ``gpu-fleet:subnetIds``, in which
        case no network is created (tag those subnets for EKS yourself).
      - Authentication mode ``API`` (access entries, no aws-auth ConfigMap); the identity running
        ``pulumi up`` becomes cluster admin. An IAM OIDC provider enables IRSA.
      - A system node group (on-demand, AL2023 standard, ``role=system``) for the cluster-autoscaler and
        other infra services.
      - One managed node group per card with a single instance type (the autoscaler sizes a group from its
        first type), spot or on-demand from the policy, the card's AMI family (``AL2023_x86_64_NVIDIA``
        unless the catalogue says otherwise, e.g. Neuron for Trainium), min and desired size from the policy
        (0 by default), the card's labels and its taint in EKS spelling (``NO_SCHEDULE``), a 200 GiB disk,
        and ``ignore_changes`` on the desired size, which the autoscaler owns.
      - Scale from zero: EKS has no autoscaler and does not copy node-group labels and taints to the Auto
        Scaling group, so each GPU group's ASG is tagged with its node template (labels, taints in Kubernetes
        spelling, the extended resource count), and the cluster-autoscaler Helm chart runs with IRSA,
        auto-discovering the groups tagged ``k8s.io/cluster-autoscaler/enabled`` and ``.../<cluster>``.
      - The AL2023 NVIDIA AMI ships driver and container toolkit but no device plugin: the NVIDIA device
        plugin is installed by the in-cluster layer, not here.
    """

    TYPE = "gpufleet:index:EksCluster"
    CLOUD = "aws"

    def __init__(self, cluster: Cluster, settings: ComponentSettings, opts: pulumi.ResourceOptions | None = None):
        super().__init__(cluster, settings, opts)
        # The base class creates the Kubernetes provider after ``_build`` returns: in-cluster resources
        # come here, once ``self.provider`` exists. A stand-in has no node groups to scale.
        self.autoscaler = None if self.stands_in else self._cluster_autoscaler(cluster)

    # --- cloud resources -------------------------------------------------------------------------------

    def _build(self, cluster: Cluster) -> tuple[pulumi.Input[str], dict[str, pulumi.Resource], pulumi.Input[str]]:
        if not cluster.region:
            raise ValueError(f"EKS cluster {cluster.name} needs a region")
        self.region = cluster.region
        self.partition = partition(cluster.region)
        self.aws_provider = aws.Provider(
            f"{cluster.name}-aws",
            region=cluster.region,
            default_tags={"tags": {"gpu-fleet-cluster": cluster.name}},
            opts=pulumi.ResourceOptions(parent=self),
        )
        child = functools.partial(self.child, self.aws_provider)
        # every role of the stack carries the fleet's boundary: the deploy role may create roles only with it
        account = aws.get_caller_identity_output(
            opts=pulumi.InvokeOutputOptions(parent=self, provider=self.aws_provider)
        ).account_id
        self.boundary: pulumi.Output[str] = account.apply(lambda a: boundary_arn(self.partition, a))
        vpc, private_subnets, public_subnets = eks_network(cluster, self.settings, child)
        if vpc is not None:
            self.vpc = vpc

        cluster_role, cluster_policies = self._role(
            f"{cluster.name}-cluster-role", "eks.amazonaws.com", CLUSTER_POLICIES
        )
        self.node_role, self.node_policies = self._role(f"{cluster.name}-node-role", "ec2.amazonaws.com", NODE_POLICIES)
        # The control plane's log group, created first so its retention is ours (EKS would create it unbounded).
        logs = aws.cloudwatch.LogGroup(
            f"{cluster.name}-control-plane",
            name=f"/aws/eks/{cluster.name}/cluster",
            retention_in_days=LOG_RETENTION_DAYS,
            opts=self.child(self.aws_provider),
        )
        # Envelope encryption of Kubernetes Secrets with a key of the cluster's own (EKS docs "Encrypt Kubernetes
        # secrets with KMS on existing clusters"; the key cannot be changed or removed later).
        secrets_key = aws.kms.Key(
            f"{cluster.name}-secrets",
            description=f"gpu-fleet: Kubernetes Secrets of EKS cluster {cluster.name}",
            enable_key_rotation=True,
            deletion_window_in_days=30,
            opts=self.protected(self.aws_provider),
        )
        # the public endpoint only for listed ranges, or when the stack opens it (gpu-fleet:openApiEndpoint): by
        # default the API is reachable from inside the VPC only (EKS's own default is public to 0.0.0.0/0)
        settings = self.settings
        private = settings.private_api_endpoint or not (settings.api_allowed_cidrs or settings.open_api_endpoint)
        vpc_config: dict[str, Any] = {
            "subnet_ids": [*private_subnets, *public_subnets],
            "endpoint_private_access": True,
            "endpoint_public_access": not private,
        }
        if self.settings.api_allowed_cidrs and not private:
            vpc_config["public_access_cidrs"] = self.settings.api_allowed_cidrs
        self.cluster = aws.eks.Cluster(
            cluster.name,
            name=cluster.name,
            role_arn=cluster_role.arn,
            version=cluster.kubernetes_version,
            vpc_config=vpc_config,
            access_config={"authentication_mode": "API", "bootstrap_cluster_creator_admin_permissions": True},
            enabled_cluster_log_types=CONTROL_PLANE_LOGS,
            encryption_config={"provider": {"key_arn": secrets_key.arn}, "resources": ["secrets"]},
            deletion_protection=self.settings.protect,
            opts=self.protected(self.aws_provider, depends_on=[*cluster_policies, logs]),
        )
        issuer = self.cluster.identities[0].oidcs[0].issuer  # type: ignore[index]
        self.oidc_provider = aws.iam.OpenIdConnectProvider(
            f"{cluster.name}-oidc",
            url=issuer,  # type: ignore[arg-type]
            client_id_lists=["sts.amazonaws.com"],
            opts=self.child(self.aws_provider),
        )
        self.issuer_host = pulumi.Output.from_input(issuer).apply(lambda url: str(url).removeprefix("https://"))
        self.irsa = Irsa(
            self.cluster.name, self.oidc_provider.arn, self.issuer_host, self.partition, child, self.boundary
        )
        self.vpc_cni = vpc_cni(self.irsa, cluster.name)
        self.autoscaler_tags = {
            "k8s.io/cluster-autoscaler/enabled": "true",
            f"k8s.io/cluster-autoscaler/{cluster.name}": "owned",
        }
        base = NodeGroupBase(
            self.cluster.name,
            self.node_role.arn,
            private_subnets,
            self.autoscaler_tags,
            [*self.node_policies, self.vpc_cni],
            child,
        )
        self.system_node_group = system_node_group(cluster, base)
        pools = {pool.key: gpu_node_group(cluster, pool, base) for pool in cluster.all_pools}
        if cluster.central:
            ebs_csi_driver(self.irsa, cluster.name, self.system_node_group)
        kubeconfig = exec_kubeconfig(
            cluster.name,
            self.cluster.endpoint,
            self.cluster.certificate_authority.data,  # type: ignore[union-attr]
            "aws",
            ["eks", "get-token", "--cluster-name", cluster.name, "--region", cluster.region],
        )
        return kubeconfig, pools, self.cluster.name

    def _role(self, name: str, service: str, managed_policies: list[str]) -> tuple[aws.iam.Role, list[pulumi.Resource]]:
        """An IAM role that ``service`` assumes, and the attachments of its AWS managed policies."""
        role = aws.iam.Role(
            name,
            assume_role_policy=assume_role_policy(service),
            permissions_boundary=self.boundary,
            opts=self.child(self.aws_provider),
        )
        attachments: list[pulumi.Resource] = [
            aws.iam.RolePolicyAttachment(
                f"{name}-{slug(policy)}",
                role=role.name,
                policy_arn=managed_policy_arn(self.partition, policy),
                opts=self.child(self.aws_provider),
            )
            for policy in managed_policies
        ]
        return role, attachments

    def preview_user(self) -> str | None:
        """The preview role reaches the cluster through an access entry of its own, under a fixed user name (no
        access policy: the fleet's RBAC binding and dry-run-only admission policy decide what it may do)."""
        role = self.settings.preview_principal
        if role is None:
            return None
        if self.stands_in:  # no access entry: the stand-in's API server knows the user by this name
            return PREVIEW_USER
        if not role.startswith("arn:"):
            raise ValueError(f"gpu-fleet:previewPrincipal of an EKS stack must be the preview role's ARN, not {role!r}")
        aws.eks.AccessEntry(
            f"{self.spec.name}-previewer",
            cluster_name=self.cluster.name,
            principal_arn=role,
            type="STANDARD",
            user_name=PREVIEW_USER,
            opts=self.child(self.aws_provider),
        )
        return PREVIEW_USER

    @classmethod
    def has_default_storage_class(cls, cluster: Cluster) -> bool:
        """The central cluster gets the EBS CSI add-on and its default class (``eks_irsa.ebs_csi_driver``)."""
        return cluster.central or super().has_default_storage_class(cluster)

    def _cluster_autoscaler(self, cluster: Cluster) -> k8s.helm.v3.Release:
        """The cluster-autoscaler: an IRSA role and the Helm chart, on the system node group."""
        name = cluster.name
        role = irsa_role(self.irsa, f"{name}-cluster-autoscaler", AUTOSCALER_NAMESPACE, AUTOSCALER_SA_NAME)
        policy = aws.iam.RolePolicy(
            f"{name}-cluster-autoscaler",
            role=role.name,
            policy=autoscaler_policy(name),
            opts=self.child(self.aws_provider),
        )
        minor = ".".join(cluster.kubernetes_version.split(".")[:2])
        values = {
            "cloudProvider": "aws",
            "awsRegion": self.region,
            "autoDiscovery": {"clusterName": name},
            # must match the control plane's minor (autoscaler README): images.yaml autoscaler_images
            "image": autoscaler_image(minor, cluster.registry),
            "rbac": {
                "serviceAccount": {
                    "create": True,
                    "name": AUTOSCALER_SA_NAME,
                    "annotations": {"eks.amazonaws.com/role-arn": role.arn},
                }
            },
            "nodeSelector": cluster.system_selector,
        }
        return cluster_autoscaler(
            f"{name}-cluster-autoscaler",
            AUTOSCALER_SA_NAME,
            values,
            pulumi.ResourceOptions(parent=self, provider=self.provider, depends_on=[self.system_node_group, policy]),
            scale_down_after=cluster.scale_down_after,
            registry=cluster.registry,
        )
