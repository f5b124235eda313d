"""The network of an EKS cluster: the existing subnets the stack names, or a VPC of its own with private subnets
(nodes, internal load balancers) and public ones (one NAT gateway for egress, internet-facing load balancers)."""

from __future__ import annotations

from collections.abc import Callable

import pulumi
import pulumi_aws as aws

from components.settings import ComponentSettings
from fleet.model.core.clusters import Cluster

VPC_CIDR = "10.0.0.0/16"
MAX_ZONES = 4  # private /19 subnets at 10.0.0.0, .32, .64, .96; public /24 subnets from 10.0.128.0


def eks_network(
    cluster: Cluster, settings: ComponentSettings, child: Callable[..., pulumi.ResourceOptions]
) -> tuple[aws.ec2.Vpc | None, list[pulumi.Input[str]], list[pulumi.Input[str]]]:
    """(the new VPC, private subnet ids, public subnet ids): existing subnets from config (no VPC then), or a new
    VPC in the zones of ``gpu-fleet:availabilityZones``; ``child(**options)``: the options of a child of the cluster
    component, with its AWS provider."""
    existing = settings.subnet_ids
    if existing is not None:
        if not isinstance(existing, list) or not existing or not all(isinstance(s, str) for s in existing):
            raise ValueError(f"{settings.key('subnetIds')} must be a non-empty list of subnet ids")
        return None, list(existing), []
    region = cluster.region or ""
    zones = settings.availability_zones or [f"{region}a", f"{region}b"]
    if not isinstance(zones, list) or not 2 <= len(zones) <= MAX_ZONES:
        raise ValueError(f"{settings.key('availabilityZones')} must list 2 to {MAX_ZONES} zones (EKS needs two)")

    name = cluster.name
    opts = child()
    vpc = aws.ec2.Vpc(
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
                vpc_id=vpc.id,
                availability_zone=zone,
                cidr_block=f"10.0.{i * 32}.0/19",
                tags={"Name": f"{name}-private-{zone}", "kubernetes.io/role/internal-elb": "1", **shared},
                opts=opts,
            )
        )
        public.append(
            aws.ec2.Subnet(
                f"{name}-public-{zone}",
                vpc_id=vpc.id,
                availability_zone=zone,
                cidr_block=f"10.0.{128 + i}.0/24",
                map_public_ip_on_launch=True,
                tags={"Name": f"{name}-public-{zone}", "kubernetes.io/role/elb": "1", **shared},
                opts=opts,
            )
        )
    igw = aws.ec2.InternetGateway(f"{name}-igw", vpc_id=vpc.id, tags={"Name": name}, opts=opts)
    eip = aws.ec2.Eip(f"{name}-nat-eip", domain="vpc", tags={"Name": f"{name}-nat"}, opts=opts)
    # One NAT gateway (not one per zone): egress of benchmark nodes is light, and NAT gateways are billed
    # by the hour. A zone outage of the NAT's zone cuts egress of the other zone's nodes.
    nat = aws.ec2.NatGateway(
        f"{name}-nat",
        allocation_id=eip.id,
        subnet_id=public[0].id,
        tags={"Name": name},
        opts=child(depends_on=[igw]),
    )
    public_rt = aws.ec2.RouteTable(
        f"{name}-public-rt",
        vpc_id=vpc.id,
        routes=[{"cidr_block": "0.0.0.0/0", "gateway_id": igw.id}],
        tags={"Name": f"{name}-public"},
        opts=opts,
    )
    private_rt = aws.ec2.RouteTable(
        f"{name}-private-rt",
        vpc_id=vpc.id,
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
    return vpc, [s.id for s in private], [s.id for s in public]
