"""Amazon EKS: a cluster with a system node group, one GPU node group per card and the cluster-autoscaler."""

from __future__ import annotations

import json
import re
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.clusters.autoscaler import NAMESPACE as AUTOSCALER_NAMESPACE
from components.clusters.autoscaler import cluster_autoscaler
from components.clusters.cluster import GpuCluster
from components.clusters.kubeconfig import exec_kubeconfig
from components.clusters.taints import autoscaler_tag_value, upper_effect
from components.kubernetes.images import autoscaler_image
from components.settings import ComponentSettings
from fleet.model.clouds.eks import NODE_TEMPLATE
from fleet.model.spec import Cluster, GpuPool, pool_resource_name

VPC_CIDR = "10.0.0.0/16"
MAX_ZONES = 4  # private /19 subnets at 10.0.0.0, .32, .64, .96; public /24 subnets from 10.0.128.0
GPU_DISK_GIB = 200  # benchmark images are large
DEFAULT_NVIDIA_AMI = "AL2023_x86_64_NVIDIA"  # AL2_x86_64_GPU reached end of support on 2025-11-26
SYSTEM_AMI = "AL2023_x86_64_STANDARD"

AUTOSCALER_SA_NAME = "cluster-autoscaler"
EBS_CSI_SA_NAME = "ebs-csi-controller-sa"  # the add-on's controller service account (aws-ebs-csi-driver docs)

CLUSTER_POLICIES = ["AmazonEKSClusterPolicy"]
# The nodes' own role: no AmazonEKS_CNI_Policy, which the VPC CNI gets through IRSA instead (EKS docs "Configure
# the Amazon VPC CNI plugin to use IRSA"), so no pod that reaches the node's credentials can rewire the network.
NODE_POLICIES = ["AmazonEKSWorkerNodePolicy", "AmazonEC2ContainerRegistryReadOnly"]
CNI_POLICY = "AmazonEKS_CNI_Policy"
CNI_SA_NAME = "aws-node"  # the VPC CNI's service account in kube-system
PREVIEW_USER = "gpu-fleet-previewer"  # the Kubernetes user name of the preview role's access entry
# Every control-plane log type (EKS docs "Send control plane logs to CloudWatch Logs"); kept 90 days.
CONTROL_PLANE_LOGS = ["api", "audit", "authenticator", "controllerManager", "scheduler"]
LOG_RETENTION_DAYS = 90
SYSTEM_DISK_GIB = 50
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


def _partition(region: str) -> str:
    """The AWS partition of a region, without an invoke (aws.get_partition would need a mock answer)."""
    if region.startswith("cn-"):
        return "aws-cn"
    if region.startswith("us-gov-"):
        return "aws-us-gov"
    return "aws"


def _assume_role_policy(service: str) -> str:
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Principal": {"Service": service}, "Action": "sts:AssumeRole"}],
        }
    )


def _slug(text: str) -> str:
    """A resource-name-safe form of a tag key (``nvidia.com/gpu.present`` -> ``nvidia-com-gpu-present``)."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


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
        # come here, once ``self.provider`` exists.
        self.autoscaler = self._cluster_autoscaler(cluster)

    # --- cloud resources -------------------------------------------------------------------------------

    def _build(self, cluster: Cluster) -> tuple[pulumi.Input[str], dict[str, pulumi.Resource], pulumi.Input[str]]:
        if not cluster.region:
            raise ValueError(f"EKS cluster {cluster.name} needs a region")
        self.region = cluster.region
        self.partition = _partition(cluster.region)
        self.aws_provider = aws.Provider(
            f"{cluster.name}-aws",
            region=cluster.region,
            default_tags={"tags": {"gpu-fleet-cluster": cluster.name}},
            opts=pulumi.ResourceOptions(parent=self),
        )
        private_subnets, public_subnets = self._network(cluster)

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
        private = self.settings.private_api_endpoint
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
        self.node_subnets = private_subnets
        self.vpc_cni = self._vpc_cni(cluster)
        self.autoscaler_tags = {
            "k8s.io/cluster-autoscaler/enabled": "true",
            f"k8s.io/cluster-autoscaler/{cluster.name}": "owned",
        }

        self.system_node_group = aws.eks.NodeGroup(
            f"{cluster.name}-system",
            cluster_name=self.cluster.name,
            node_group_name="system",
            node_role_arn=self.node_role.arn,
            subnet_ids=private_subnets,
            instance_types=[cluster.system_pool.machine_type],
            capacity_type="ON_DEMAND",
            ami_type=SYSTEM_AMI,
            launch_template=self._launch_template(f"{cluster.name}-system", SYSTEM_DISK_GIB),
            scaling_config={
                "min_size": cluster.system_pool.min_nodes,
                "desired_size": cluster.system_pool.min_nodes,
                "max_size": cluster.system_pool.max_nodes,
            },
            labels=cluster.system_selector,  # what the fleet's services select
            tags=self.autoscaler_tags,
            opts=self.child(
                self.aws_provider,
                depends_on=[*self.node_policies, self.vpc_cni],
                ignore_changes=["scalingConfig.desiredSize"],
            ),
        )
        pools = {pool.key: self._gpu_node_group(cluster, pool) for pool in cluster.all_pools}
        if cluster.central:
            self._ebs_csi_driver(cluster)
        kubeconfig = exec_kubeconfig(
            cluster.name,
            self.cluster.endpoint,
            self.cluster.certificate_authority.data,  # type: ignore[union-attr]
            "aws",
            ["eks", "get-token", "--cluster-name", cluster.name, "--region", cluster.region],
        )
        return kubeconfig, pools, self.cluster.name

    def _network(self, cluster: Cluster) -> tuple[list[pulumi.Input[str]], list[pulumi.Input[str]]]:
        """(private subnet ids, public subnet ids): existing subnets from config, or a new VPC."""
        existing = self.settings.subnet_ids
        if existing is not None:
            if not isinstance(existing, list) or not existing or not all(isinstance(s, str) for s in existing):
                raise ValueError(f"{self.settings.key('subnetIds')} must be a non-empty list of subnet ids")
            return list(existing), []
        region = cluster.region or ""
        zones = self.settings.availability_zones or [f"{region}a", f"{region}b"]
        if not isinstance(zones, list) or not 2 <= len(zones) <= MAX_ZONES:
            raise ValueError(
                f"{self.settings.key('availabilityZones')} must list 2 to {MAX_ZONES} zones (EKS needs two)"
            )

        name = cluster.name
        opts = self.child(self.aws_provider)
        self.vpc = aws.ec2.Vpc(
            f"{name}-vpc",
            cidr_block=VPC_CIDR,
            enable_dns_hostnames=True,
            enable_dns_support=True,
            tags={"Name": name},
            opts=opts,
        )
        shared = {f"kubernetes.io/cluster/{name}": "shared"}
        private, public = [], []
        for i, zone in enumerate(zones):
            private.append(
                aws.ec2.Subnet(
                    f"{name}-private-{zone}",
                    vpc_id=self.vpc.id,
                    availability_zone=zone,
                    cidr_block=f"10.0.{i * 32}.0/19",
                    tags={"Name": f"{name}-private-{zone}", "kubernetes.io/role/internal-elb": "1", **shared},
                    opts=opts,
                )
            )
            public.append(
                aws.ec2.Subnet(
                    f"{name}-public-{zone}",
                    vpc_id=self.vpc.id,
                    availability_zone=zone,
                    cidr_block=f"10.0.{128 + i}.0/24",
                    map_public_ip_on_launch=True,
                    tags={"Name": f"{name}-public-{zone}", "kubernetes.io/role/elb": "1", **shared},
                    opts=opts,
                )
            )
        igw = aws.ec2.InternetGateway(f"{name}-igw", vpc_id=self.vpc.id, tags={"Name": name}, opts=opts)
        eip = aws.ec2.Eip(f"{name}-nat-eip", domain="vpc", tags={"Name": f"{name}-nat"}, opts=opts)
        # One NAT gateway (not one per zone): egress of benchmark nodes is light, and NAT gateways are billed
        # by the hour. A zone outage of the NAT's zone cuts egress of the other zone's nodes.
        nat = aws.ec2.NatGateway(
            f"{name}-nat",
            allocation_id=eip.id,
            subnet_id=public[0].id,
            tags={"Name": name},
            opts=self.child(self.aws_provider, depends_on=[igw]),
        )
        public_rt = aws.ec2.RouteTable(
            f"{name}-public-rt",
            vpc_id=self.vpc.id,
            routes=[{"cidr_block": "0.0.0.0/0", "gateway_id": igw.id}],
            tags={"Name": f"{name}-public"},
            opts=opts,
        )
        private_rt = aws.ec2.RouteTable(
            f"{name}-private-rt",
            vpc_id=self.vpc.id,
            routes=[{"cidr_block": "0.0.0.0/0", "nat_gateway_id": nat.id}],
            tags={"Name": f"{name}-private"},
            opts=opts,
        )
        for zone, subnet in zip(zones, public, strict=True):
            aws.ec2.RouteTableAssociation(
                f"{name}-public-{zone}", subnet_id=subnet.id, route_table_id=public_rt.id, opts=opts
            )
        for zone, subnet in zip(zones, private, strict=True):
            aws.ec2.RouteTableAssociation(
                f"{name}-private-{zone}", subnet_id=subnet.id, route_table_id=private_rt.id, opts=opts
            )
        return [s.id for s in private], [s.id for s in public]

    def _role(self, name: str, service: str, managed_policies: list[str]) -> tuple[aws.iam.Role, list[pulumi.Resource]]:
        """An IAM role that ``service`` assumes, and the attachments of its AWS managed policies."""
        role = aws.iam.Role(name, assume_role_policy=_assume_role_policy(service), opts=self.child(self.aws_provider))
        attachments: list[pulumi.Resource] = [
            aws.iam.RolePolicyAttachment(
                f"{name}-{_slug(policy)}",
                role=role.name,
                policy_arn=f"arn:{self.partition}:iam::aws:policy/{policy}",
                opts=self.child(self.aws_provider),
            )
            for policy in managed_policies
        ]
        return role, attachments

    def _gpu_node_group(self, cluster: Cluster, pool: GpuPool) -> aws.eks.NodeGroup:
        offer = pool.offer
        assert offer is not None  # the policy checks that aws offers every card of an aws cluster
        if offer.ami_type:
            ami_type = offer.ami_type
        elif pool.accelerator.is_nvidia:
            ami_type = DEFAULT_NVIDIA_AMI
        else:
            raise ValueError(
                f"card {pool.card} is not an NVIDIA GPU: set its aws ami_type in fleet/model/catalogue.yaml"
            )
        group = aws.eks.NodeGroup(
            pool_resource_name(cluster, pool),
            cluster_name=self.cluster.name,
            node_group_name=pool.name,
            node_role_arn=self.node_role.arn,
            subnet_ids=self.node_subnets,
            instance_types=[pool.machine_type],  # one type: the autoscaler sizes a group from its first type
            capacity_type="SPOT" if pool.spot else "ON_DEMAND",
            ami_type=ami_type,
            launch_template=self._launch_template(pool_resource_name(cluster, pool), GPU_DISK_GIB),
            scaling_config={"min_size": pool.min_nodes, "desired_size": pool.min_nodes, "max_size": pool.max_nodes},
            labels=pool.labels,
            taints=[upper_effect(t) for t in pool.taints],
            tags=self.autoscaler_tags,
            opts=self.child(
                self.aws_provider,
                depends_on=[*self.node_policies, self.vpc_cni],
                ignore_changes=["scalingConfig.desiredSize"],
            ),
        )
        self._node_template_tags(cluster, pool, group)
        return group

    def _launch_template(self, name: str, disk_gib: int) -> dict[str, Any]:
        """A node group's launch template: IMDSv2 only, with a hop limit of 1 so pods (one network hop further)
        cannot reach the node's instance credentials (EKS best practices, "Restrict access to the instance
        profile assigned to the worker node"), and an encrypted gp3 root volume of ``disk_gib``. It names no
        AMI, instance type or profile: EKS fills those from the node group (EKS docs "Customize managed nodes
        with launch templates"), and the node group's own ``disk_size`` is not allowed beside it."""
        template = aws.ec2.LaunchTemplate(
            name,
            metadata_options={
                "http_endpoint": "enabled",
                "http_tokens": "required",
                "http_put_response_hop_limit": 1,
            },
            block_device_mappings=[
                {
                    "device_name": "/dev/xvda",  # the root device of the AL2023 EKS AMIs
                    "ebs": {"volume_size": disk_gib, "volume_type": "gp3", "encrypted": "true"},
                }
            ],
            update_default_version=True,
            opts=self.child(self.aws_provider),
        )
        return {"id": template.id, "version": template.latest_version.apply(str)}

    def _vpc_cni(self, cluster: Cluster) -> aws.eks.Addon:
        """The VPC CNI add-on with its own IRSA role (the node role has no CNI policy) and NetworkPolicy
        enforcement on (add-on configuration ``enableNetworkPolicy``, EKS docs "Limit pod traffic with
        Kubernetes network policies"; the network policy agent runs in the aws-node pods)."""
        return self._irsa_addon(
            f"{cluster.name}-vpc-cni",
            "vpc-cni",
            CNI_SA_NAME,
            f"arn:{self.partition}:iam::aws:policy/{CNI_POLICY}",
            {"enableNetworkPolicy": "true"},
            resolve_conflicts_on_create="OVERWRITE",  # EKS installs a self-managed copy with every cluster
        )

    def _irsa_addon(
        self,
        name: str,
        addon: str,
        service_account: str,
        policy_arn: str,
        configuration: dict[str, Any],
        depends_on: list[pulumi.Resource] | None = None,
        **extra: Any,
    ) -> aws.eks.Addon:
        """An EKS add-on whose service account (in kube-system) assumes an IRSA role with one managed policy."""
        role = self._irsa_role(name, "kube-system", service_account)
        attachment = aws.iam.RolePolicyAttachment(
            name, role=role.name, policy_arn=policy_arn, opts=self.child(self.aws_provider)
        )
        return aws.eks.Addon(
            name,
            cluster_name=self.cluster.name,
            addon_name=addon,
            service_account_role_arn=role.arn,
            configuration_values=json.dumps(configuration),
            opts=self.child(self.aws_provider, depends_on=[attachment, *(depends_on or [])]),
            **extra,
        )

    def _node_template_tags(self, cluster: Cluster, pool: GpuPool, group: aws.eks.NodeGroup) -> None:
        """Tag the group's ASG with its node template, so the autoscaler can scale it up from zero nodes."""
        labels = dict(pool.labels)
        if pool.spot:
            labels.update(cluster.facts.spot_node_labels)  # EKS labels spot nodes eks.amazonaws.com/capacityType
        template = {f"{NODE_TEMPLATE}/label/{k}": v for k, v in labels.items()}
        template.update({f"{NODE_TEMPLATE}/taint/{t.key}": autoscaler_tag_value(t) for t in pool.taints})
        # what a node advertises: its cards, times the time slices of a shared pool (the tag overrides the instance
        # type's GPU count: kubernetes/autoscaler cluster-autoscaler/cloudprovider/aws aws_manager.go, README)
        template[f"{NODE_TEMPLATE}/resources/{pool.resource}"] = str(pool.units_per_node)
        asg_name = group.resources[0].autoscaling_groups[0].name  # type: ignore[index]
        for key, value in template.items():
            aws.autoscaling.Tag(
                f"{pool_resource_name(cluster, pool)}-asg-{_slug(key.removeprefix(NODE_TEMPLATE + '/'))}",
                autoscaling_group_name=asg_name,  # type: ignore[arg-type]
                tag={"key": key, "value": value, "propagate_at_launch": False},
                opts=self.child(self.aws_provider),
            )

    # --- in-cluster resources -------------------------------------------------------------------------

    def _irsa_role(self, name: str, namespace: str, service_account: str) -> aws.iam.Role:
        """An IAM role that only the Kubernetes service account ``namespace/service_account`` assumes (IRSA)."""
        subject = f"system:serviceaccount:{namespace}:{service_account}"

        def trust(args: list[Any]) -> str:
            oidc_arn, host = args
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

        return aws.iam.Role(
            name,
            assume_role_policy=pulumi.Output.all(self.oidc_provider.arn, self.issuer_host).apply(trust),
            opts=self.child(self.aws_provider),
        )

    def _ebs_csi_driver(self, cluster: Cluster) -> aws.eks.Addon:
        """The EBS CSI driver add-on with its default StorageClass, for the central Prometheus volume.

        New EKS clusters (1.30+) no longer mark gp2 as default, and volumes need the EBS CSI driver (EKS docs
        "Store Kubernetes volumes with Amazon EBS"); the add-on creates a default class from v1.31.0 on when
        ``defaultStorageClass.enabled`` is set (aws-ebs-csi-driver add-on configuration). Its controller uses IRSA.
        """
        return self._irsa_addon(
            f"{cluster.name}-ebs-csi",
            "aws-ebs-csi-driver",
            EBS_CSI_SA_NAME,
            f"arn:{self.partition}:iam::aws:policy/service-role/AmazonEBSCSIDriverPolicy",
            {"defaultStorageClass": {"enabled": True}},
            depends_on=[self.system_node_group],
        )

    def preview_user(self) -> str | None:
        """The preview role reaches the cluster through an access entry of its own, under a fixed user name (no
        access policy: the fleet's RBAC binding and dry-run-only admission policy decide what it may do)."""
        role = self.settings.preview_principal
        if role is None:
            return None
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
        """The central cluster gets the EBS CSI add-on and its default class (``_ebs_csi_driver``)."""
        return cluster.central or super().has_default_storage_class(cluster)

    def _cluster_autoscaler(self, cluster: Cluster) -> k8s.helm.v3.Release:
        """The cluster-autoscaler: an IRSA role and the Helm chart, on the system node group."""
        name = cluster.name
        role = self._irsa_role(f"{name}-cluster-autoscaler", AUTOSCALER_NAMESPACE, AUTOSCALER_SA_NAME)
        policy = aws.iam.RolePolicy(
            f"{name}-cluster-autoscaler",
            role=role.name,
            policy=json.dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [
                        {"Effect": "Allow", "Action": AUTOSCALER_READ_ACTIONS, "Resource": "*"},
                        {
                            "Effect": "Allow",
                            "Action": AUTOSCALER_WRITE_ACTIONS,
                            "Resource": "*",
                            "Condition": {
                                "StringEquals": {f"aws:ResourceTag/k8s.io/cluster-autoscaler/{name}": "owned"}
                            },
                        },
                    ],
                }
            ),
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
