"""The node groups of an EKS cluster: the on-demand system group and one managed group per card, each with a
launch template of our own, and the node-template tags that let the cluster-autoscaler scale a GPU group up from
zero nodes."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws

from components.clusters.taints import autoscaler_tag_value, upper_effect
from fleet.model.core.clouds.eks import NODE_TEMPLATE
from fleet.model.core.clusters import Cluster, pool_resource_name
from fleet.model.core.pools import GpuPool

GPU_DISK_GIB = 200  # benchmark images are large
DEFAULT_NVIDIA_AMI = "AL2023_x86_64_NVIDIA"  # AL2_x86_64_GPU reached end of support on 2025-11-26
SYSTEM_AMI = "AL2023_x86_64_STANDARD"
SYSTEM_DISK_GIB = 50


def slug(text: str) -> str:
    """A resource-name-safe form of a tag key (``nvidia.com/gpu.present`` -> ``nvidia-com-gpu-present``)."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


@dataclass(frozen=True)
class NodeGroupBase:
    """What every node group of one EKS cluster shares: the cluster, the nodes' role and subnets, the
    cluster-autoscaler's discovery tags, what each group waits for (the role's policies, the VPC CNI) and
    ``child(**options)``, the options of a child of the cluster component with its AWS provider."""

    cluster_name: pulumi.Input[str]
    node_role_arn: pulumi.Input[str]
    subnet_ids: list[pulumi.Input[str]]
    tags: dict[str, str]
    depends_on: list[pulumi.Resource]
    child: Callable[..., pulumi.ResourceOptions]


def system_node_group(cluster: Cluster, base: NodeGroupBase) -> aws.eks.NodeGroup:
    """The system node group: on-demand, AL2023 standard, labelled with what the fleet's services select."""
    return aws.eks.NodeGroup(
        f"{cluster.name}-system",
        cluster_name=base.cluster_name,
        node_group_name="system",
        node_role_arn=base.node_role_arn,
        subnet_ids=base.subnet_ids,
        instance_types=[cluster.system_pool.machine_type],
        capacity_type="ON_DEMAND",
        ami_type=SYSTEM_AMI,
        launch_template=launch_template(f"{cluster.name}-system", SYSTEM_DISK_GIB, base.child),
        scaling_config={
            "min_size": cluster.system_pool.min_nodes,
            "desired_size": cluster.system_pool.min_nodes,
            "max_size": cluster.system_pool.max_nodes,
        },
        labels=cluster.system_selector,  # what the fleet's services select
        tags=base.tags,
        opts=base.child(
            depends_on=[*base.depends_on],
            ignore_changes=["scalingConfig.desiredSize"],
        ),
    )


def gpu_node_group(cluster: Cluster, pool: GpuPool, base: NodeGroupBase) -> aws.eks.NodeGroup:
    """The managed node group of one card's pool: its one instance type, spot or on-demand, the card's AMI family,
    labels and taint, and the node-template tags of its Auto Scaling group."""
    offer = pool.offer
    assert offer is not None  # the policy checks that aws offers every card of an aws cluster
    if offer.ami_type:
        ami_type = offer.ami_type
    elif pool.accelerator.is_nvidia:
        ami_type = DEFAULT_NVIDIA_AMI
    else:
        raise ValueError(
            f"card {pool.card} is not an NVIDIA GPU: set its aws ami_type in fleet/model/core/catalogue.yaml"
        )
    group = aws.eks.NodeGroup(
        pool_resource_name(cluster, pool),
        cluster_name=base.cluster_name,
        node_group_name=pool.name,
        node_role_arn=base.node_role_arn,
        subnet_ids=base.subnet_ids,
        instance_types=[pool.machine_type],  # one type: the autoscaler sizes a group from its first type
        capacity_type="SPOT" if pool.spot else "ON_DEMAND",
        ami_type=ami_type,
        launch_template=launch_template(pool_resource_name(cluster, pool), GPU_DISK_GIB, base.child),
        scaling_config={"min_size": pool.min_nodes, "desired_size": pool.min_nodes, "max_size": pool.max_nodes},
        labels=pool.labels,
        taints=[upper_effect(t) for t in pool.taints],
        tags=base.tags,
        opts=base.child(
            depends_on=[*base.depends_on],
            ignore_changes=["scalingConfig.desiredSize"],
        ),
    )
    node_template_tags(cluster, pool, group, base.child)
    return group


def launch_template(name: str, disk_gib: int, child: Callable[..., pulumi.ResourceOptions]) -> dict[str, Any]:
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
        opts=child(),
    )
    return {"id": template.id, "version": template.latest_version.apply(str)}


def node_template_tags(
    cluster: Cluster, pool: GpuPool, group: aws.eks.NodeGroup, child: Callable[..., pulumi.ResourceOptions]
) -> None:
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
            f"{pool_resource_name(cluster, pool)}-asg-{slug(key.removeprefix(NODE_TEMPLATE + '/'))}",
            autoscaling_group_name=asg_name,  # type: ignore[arg-type]
            tag={"key": key, "value": value, "propagate_at_launch": False},
            opts=child(),
        )
