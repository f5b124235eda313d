"""EKS cluster component under the mock engine: what AWS and the cluster would receive for each card."""

from __future__ import annotations

import json

import pytest
from pulumi.runtime import rpc

from fleet.model.core.registry import DEFAULT_REGISTRY
from fleet.model.loader import POLICY_FILE, load_fleet
from fleet.program.stack_config import STACKS_DIR
from fleet.tools.engine.plan import plan_stack
from tests.helpers import by_type, one, plan_one

POLICY = """
clusters:
  aws:
    eks-test:
      region: us-east-1
      central: true
      gpus:
        t4: {}
        v100: {max_nodes: 1, spot: false}
        trn1: {}
"""
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
ASG_TAG = "aws:autoscaling/tag:Tag"
TEMPLATE = "k8s.io/cluster-autoscaler/node-template"
GPU_TAINT = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}]


@pytest.fixture(scope="module")
def plan(tmp_path_factory):
    return plan_one(tmp_path_factory.mktemp("eks"), POLICY, "eks-test")


def asg_tags(plan, card: str) -> dict[str, dict]:
    """The ASG tags of one card's node group, by tag key."""
    tags = [r.inputs for r in by_type(plan, ASG_TAG) if r.name.startswith(f"eks-test-gpu-{card}-asg-")]
    return {t["tag"]["key"]: t for t in tags}


def test_gpu_node_group_per_card_with_type_ami_spot_and_zero_minimum(plan):
    t4 = one(plan, NODE_GROUP, "eks-test-gpu-t4")
    assert t4.inputs["nodeGroupName"] == "gpu-t4"
    assert t4.inputs["instanceTypes"] == ["g4dn.xlarge"]
    assert t4.inputs["amiType"] == "AL2023_x86_64_NVIDIA"
    assert t4.inputs["capacityType"] == "SPOT"
    assert t4.inputs["scalingConfig"] == {"minSize": 0, "desiredSize": 0, "maxSize": 4}  # schema default max
    assert t4.inputs["labels"] == {
        "gpu": "t4",
        "nvidia.com/gpu.present": "true",
        "k8s.amazonaws.com/accelerator": "nvidia-tesla-t4",
    }
    assert t4.inputs["taints"] == GPU_TAINT
    assert "diskSize" not in t4.inputs  # EKS refuses it beside a launch template: the disk is the template's
    (template,) = [r for r in by_type(plan, "aws:ec2/launchTemplate:LaunchTemplate") if r.name == "eks-test-gpu-t4"]
    assert template.inputs["blockDeviceMappings"][0]["ebs"]["volumeSize"] >= 200
    assert t4.inputs["launchTemplate"] == {"id": "eks-test-gpu-t4-id", "version": "1"}
    assert "scalingConfig.desiredSize" in t4.ignore_changes
    assert t4.inputs["tags"] == {
        "k8s.io/cluster-autoscaler/enabled": "true",
        "k8s.io/cluster-autoscaler/eks-test": "owned",
    }


def test_policy_overrides_and_non_nvidia_ami(plan):
    v100 = one(plan, NODE_GROUP, "eks-test-gpu-v100")
    assert v100.inputs["instanceTypes"] == ["p3.2xlarge"]
    assert v100.inputs["capacityType"] == "ON_DEMAND"
    assert v100.inputs["scalingConfig"] == {"minSize": 0, "desiredSize": 0, "maxSize": 1}
    assert v100.inputs["taints"] == GPU_TAINT
    trn1 = one(plan, NODE_GROUP, "eks-test-gpu-trn1")
    assert trn1.inputs["instanceTypes"] == ["trn1.2xlarge"]
    assert trn1.inputs["amiType"] == "AL2023_x86_64_NEURON"
    assert trn1.inputs["labels"] == {"gpu": "trn1"}
    assert trn1.inputs["taints"] == [{"key": "aws.amazon.com/neuron", "value": "present", "effect": "NO_SCHEDULE"}]
    assert all("scalingConfig.desiredSize" in g.ignore_changes for g in by_type(plan, NODE_GROUP))


def test_system_node_group_is_on_demand_untainted_and_labelled(plan):
    groups = by_type(plan, NODE_GROUP)
    assert len(groups) == 4  # system + 3 cards
    system = one(plan, NODE_GROUP, "eks-test-system").inputs
    assert system["capacityType"] == "ON_DEMAND"
    assert system["instanceTypes"] == ["m6i.large"]
    assert system["amiType"] == "AL2023_x86_64_STANDARD"
    assert system["labels"] == {"role": "system"}
    assert system["scalingConfig"] == {"minSize": 1, "desiredSize": 1, "maxSize": 3}
    assert "taints" not in system


def test_asg_tags_describe_the_node_template_for_scale_from_zero(plan):
    t4 = asg_tags(plan, "t4")
    values = {k: v["tag"]["value"] for k, v in t4.items()}
    assert values[f"{TEMPLATE}/label/gpu"] == "t4"
    assert values[f"{TEMPLATE}/label/nvidia.com/gpu.present"] == "true"
    assert values[f"{TEMPLATE}/label/k8s.amazonaws.com/accelerator"] == "nvidia-tesla-t4"
    assert values[f"{TEMPLATE}/label/eks.amazonaws.com/capacityType"] == "SPOT"
    assert values[f"{TEMPLATE}/taint/nvidia.com/gpu"] == "present:NoSchedule"
    assert values[f"{TEMPLATE}/resources/nvidia.com/gpu"] == "1"
    assert all(v["tag"]["propagateAtLaunch"] is False for v in t4.values())
    assert {v["autoscalingGroupName"] for v in t4.values()} == {"eks-eks-test-gpu-t4-asg"}

    v100 = {k: v["tag"]["value"] for k, v in asg_tags(plan, "v100").items()}
    assert f"{TEMPLATE}/label/eks.amazonaws.com/capacityType" not in v100  # on-demand group
    assert v100[f"{TEMPLATE}/resources/nvidia.com/gpu"] == "1"

    trn1 = {k: v["tag"]["value"] for k, v in asg_tags(plan, "trn1").items()}
    assert trn1[f"{TEMPLATE}/taint/aws.amazon.com/neuron"] == "present:NoSchedule"
    assert trn1[f"{TEMPLATE}/resources/aws.amazon.com/neuron"] == "1"
    assert not any("nvidia" in key for key in trn1)


def test_cluster_is_protected_with_api_auth_and_oidc(plan):
    (cluster,) = by_type(plan, "aws:eks/cluster:Cluster")
    assert cluster.protect is True
    assert cluster.inputs["name"] == "eks-test"
    assert cluster.inputs["version"] == "1.33"
    assert cluster.inputs["accessConfig"]["authenticationMode"] == "API"
    assert len(cluster.inputs["vpcConfig"]["subnetIds"]) == 4  # private and public in two zones
    (oidc,) = by_type(plan, "aws:iam/openIdConnectProvider:OpenIdConnectProvider")
    assert oidc.inputs["url"].startswith("https://oidc.eks.us-east-1.amazonaws.com/")
    assert oidc.inputs["clientIdLists"] == ["sts.amazonaws.com"]


def test_every_aws_resource_uses_the_explicit_regional_provider(plan):
    (provider,) = by_type(plan, "pulumi:providers:aws")
    assert provider.inputs["region"] == "us-east-1"
    aws_resources = [r for r in plan.registrations if r.type.startswith("aws:")]
    assert aws_resources and all(r.provider.startswith(provider.urn + "::") for r in aws_resources)


def test_network_spans_two_zones_with_tagged_private_subnets_and_nat(plan):
    assert len(by_type(plan, "aws:ec2/vpc:Vpc")) == 1
    assert len(by_type(plan, "aws:ec2/natGateway:NatGateway")) == 1
    private = [r.inputs for r in by_type(plan, "aws:ec2/subnet:Subnet") if "-private-" in r.name]
    assert sorted(s["availabilityZone"] for s in private) == ["us-east-1a", "us-east-1b"]
    for subnet in private:
        assert subnet["tags"]["kubernetes.io/role/internal-elb"] == "1"
        assert subnet["tags"]["kubernetes.io/cluster/eks-test"] == "shared"
    for group in by_type(plan, NODE_GROUP):
        assert group.inputs["subnetIds"] == ["eks-test-private-us-east-1a-id", "eks-test-private-us-east-1b-id"]


def test_node_and_cluster_roles_have_the_eks_managed_policies(plan):
    arns = {r.inputs["policyArn"] for r in by_type(plan, "aws:iam/rolePolicyAttachment:RolePolicyAttachment")}
    assert arns == {
        "arn:aws:iam::aws:policy/AmazonEKSClusterPolicy",
        "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
        "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy",  # on the VPC CNI's own IRSA role
        "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly",
        "arn:aws:iam::aws:policy/service-role/AmazonEBSCSIDriverPolicy",  # the central's EBS CSI driver
    }


def test_central_gets_the_ebs_csi_driver_with_a_default_class(plan, tmp_path):
    """EKS 1.30+ marks no class default: the central's Prometheus volume needs the add-on and its class."""
    (addon,) = [a for a in by_type(plan, "aws:eks/addon:Addon") if a.inputs["addonName"] != "vpc-cni"]
    assert addon.inputs["addonName"] == "aws-ebs-csi-driver"
    assert json.loads(addon.inputs["configurationValues"]) == {"defaultStorageClass": {"enabled": True}}
    roles = {r.name: r.inputs for r in by_type(plan, "aws:iam/role:Role")}
    trust = json.loads(roles["eks-test-ebs-csi"]["assumeRolePolicy"])
    (condition,) = [s["Condition"]["StringEquals"] for s in trust["Statement"]]
    assert "system:serviceaccount:kube-system:ebs-csi-controller-sa" in condition.values()
    claim = next(r for r in by_type(plan, "kubernetes:helm.sh/v3:Release") if r.inputs["name"] == "kps").inputs
    assert (
        "storageClassName"
        not in claim["values"]["prometheus"]["prometheusSpec"]["storageSpec"]["volumeClaimTemplate"]["spec"]
    )
    as_leaf = POLICY.replace("central: true", "central: false") + "  existing:\n    lab: {central: true, gpus: []}\n"
    leaf = plan_one(tmp_path, as_leaf, "eks-test")
    assert [a.inputs["addonName"] for a in by_type(leaf, "aws:eks/addon:Addon")] == ["vpc-cni"]


def test_kubeconfig_is_secret_and_uses_aws_eks_get_token(plan):
    assert rpc.is_rpc_secret(plan.exports["kubeconfig"])
    (provider,) = by_type(plan, "pulumi:providers:kubernetes")
    assert rpc.is_rpc_secret(provider.inputs["kubeconfig"])
    kubeconfig = json.loads(rpc.unwrap_rpc_secret(provider.inputs["kubeconfig"]))
    user = kubeconfig["users"][0]["user"]["exec"]
    assert user["command"] == "aws"
    assert user["args"] == ["eks", "get-token", "--cluster-name", "eks-test", "--region", "us-east-1"]
    assert "get-token" in rpc.unwrap_rpc_secret(plan.exports["kubeconfig"])
    assert kubeconfig["clusters"][0]["cluster"]["server"].startswith("https://")


def test_autoscaler_irsa_role_and_policy(plan):
    role = one(plan, "aws:iam/role:Role", "eks-test-cluster-autoscaler").inputs
    trust = json.loads(role["assumeRolePolicy"])["Statement"][0]
    assert trust["Action"] == "sts:AssumeRoleWithWebIdentity"
    assert trust["Principal"]["Federated"].startswith("arn:aws:iam::123456789012:oidc-provider/")
    issuer = "oidc.eks.us-east-1.amazonaws.com/id/EXAMPLE0123456789"
    assert trust["Condition"]["StringEquals"][f"{issuer}:sub"] == "system:serviceaccount:kube-system:cluster-autoscaler"
    policy = one(plan, "aws:iam/rolePolicy:RolePolicy", "eks-test-cluster-autoscaler").inputs
    actions = {a for s in json.loads(policy["policy"])["Statement"] for a in s["Action"]}
    assert {
        "eks:DescribeNodegroup",
        "autoscaling:DescribeAutoScalingGroups",
        "autoscaling:SetDesiredCapacity",
        "autoscaling:TerminateInstanceInAutoScalingGroup",
        "ec2:DescribeLaunchTemplateVersions",
        "ec2:DescribeInstanceTypes",
        "ec2:DescribeImages",
        "ec2:GetInstanceTypesFromInstanceRequirements",
    } <= actions


def test_autoscaler_release_uses_the_cluster_provider_and_a_pinned_chart(plan):
    (release,) = [r for r in by_type(plan, "kubernetes:helm.sh/v3:Release") if r.inputs["name"] == "cluster-autoscaler"]
    (k8s_provider,) = by_type(plan, "pulumi:providers:kubernetes")
    assert release.provider.startswith(k8s_provider.urn + "::")
    inputs = release.inputs
    assert inputs["chart"] == "cluster-autoscaler"
    assert inputs["repositoryOpts"] == {"repo": "https://kubernetes.github.io/autoscaler"}
    assert inputs["version"] and inputs["version"][0].isdigit()
    assert inputs["namespace"] == "kube-system"
    values = inputs["values"]
    assert values["autoDiscovery"] == {"clusterName": "eks-test"}
    assert values["awsRegion"] == "us-east-1"
    assert values["image"]["tag"].startswith("v1.33.")  # the autoscaler matches the control plane's minor
    assert values["image"]["repository"] == f"{DEFAULT_REGISTRY}/cluster-autoscaler"  # the copy in the registry
    sa = values["rbac"]["serviceAccount"]
    assert sa["name"] == "cluster-autoscaler"
    assert (
        sa["annotations"]["eks.amazonaws.com/role-arn"] == "arn:aws:iam::123456789012:role/eks-test-cluster-autoscaler"
    )
    assert values["extraArgs"] == {
        "balance-similar-node-groups": True,
        "skip-nodes-with-system-pods": False,
        "expander": "least-waste",
        "scale-down-unneeded-time": "5m",  # defaults.gpu_pool.scale_down_after
        "scale-down-delay-after-add": "5m",
    }
    assert values["nodeSelector"] == {"role": "system"}


def test_existing_subnets_create_no_network(tmp_path):
    config = {"gpu-fleet:subnetIds": ["subnet-0aaa", "subnet-0bbb"]}
    plan = plan_one(tmp_path, POLICY, "eks-test", config)
    assert not [r for r in plan.registrations if r.type.startswith("aws:ec2/") and "launchTemplate" not in r.type]
    (cluster,) = by_type(plan, "aws:eks/cluster:Cluster")
    assert cluster.inputs["vpcConfig"]["subnetIds"] == ["subnet-0aaa", "subnet-0bbb"]
    assert all(g.inputs["subnetIds"] == ["subnet-0aaa", "subnet-0bbb"] for g in by_type(plan, NODE_GROUP))


def test_zones_from_stack_config(tmp_path):
    config = {"gpu-fleet:availabilityZones": ["us-east-1b", "us-east-1c", "us-east-1d"]}
    plan = plan_one(tmp_path, POLICY, "eks-test", config)
    zones = sorted(
        r.inputs["availabilityZone"] for r in by_type(plan, "aws:ec2/subnet:Subnet") if "-private-" in r.name
    )
    assert zones == ["us-east-1b", "us-east-1c", "us-east-1d"]


def test_unprotected_stack(tmp_path):
    plan = plan_one(tmp_path, POLICY, "eks-test", {"gpu-fleet:protect": False})
    (cluster,) = by_type(plan, "aws:eks/cluster:Cluster")
    assert cluster.protect is False


def test_shipped_eks_stacks_plan_under_the_strict_engine():
    """Every EKS cluster of the shipped policy (none is fine): its node groups are the system one and its cards'."""
    fleet = load_fleet(POLICY_FILE)
    for cluster in (c for c in fleet.clusters.values() if c.cloud == "aws"):
        plan = plan_stack(cluster.name, POLICY_FILE, STACKS_DIR)
        groups = {g.inputs["nodeGroupName"] for g in by_type(plan, NODE_GROUP)}
        assert groups == {"system"} | {pool.name for pool in cluster.all_pools}
        releases = {r.inputs["name"] for r in by_type(plan, "kubernetes:helm.sh/v3:Release")}
        assert "cluster-autoscaler" in releases
        # the AL2023 NVIDIA AMI has no device plugin
        assert ("nvidia-device-plugin" in releases) == any(p.accelerator.is_nvidia for p in cluster.pools)


def test_hardening_logs_encryption_metadata_and_cni_through_irsa(plan):
    (cluster,) = by_type(plan, "aws:eks/cluster:Cluster")
    assert cluster.inputs["enabledClusterLogTypes"] == [
        "api",
        "audit",
        "authenticator",
        "controllerManager",
        "scheduler",
    ]
    (log_group,) = by_type(plan, "aws:cloudwatch/logGroup:LogGroup")
    assert log_group.inputs["name"] == "/aws/eks/eks-test/cluster" and log_group.inputs["retentionInDays"] == 90
    encryption = cluster.inputs["encryptionConfig"]
    assert encryption["resources"] == ["secrets"] and encryption["provider"]["keyArn"].endswith("/eks-test-secrets")
    (key,) = by_type(plan, "aws:kms/key:Key")
    assert key.inputs["enableKeyRotation"] is True
    templates = by_type(plan, "aws:ec2/launchTemplate:LaunchTemplate")
    assert len(templates) == len(by_type(plan, NODE_GROUP))  # every node group, the system one too
    for template in templates:
        assert template.inputs["metadataOptions"] == {
            "httpEndpoint": "enabled",
            "httpTokens": "required",
            "httpPutResponseHopLimit": 1,
        }
    # the node role cannot manage ENIs: the CNI's own role can, assumed only by kube-system/aws-node
    node_policies = {
        r.inputs["policyArn"]
        for r in by_type(plan, "aws:iam/rolePolicyAttachment:RolePolicyAttachment")
        if r.name.startswith("eks-test-node-role")
    }
    assert "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy" not in node_policies
    (cni,) = [a for a in by_type(plan, "aws:eks/addon:Addon") if a.inputs["addonName"] == "vpc-cni"]
    assert json.loads(cni.inputs["configurationValues"]) == {"enableNetworkPolicy": "true"}
    roles = {r.name: r.inputs for r in by_type(plan, "aws:iam/role:Role")}
    trust = json.loads(roles["eks-test-vpc-cni"]["assumeRolePolicy"])
    condition = trust["Statement"][0]["Condition"]["StringEquals"]
    assert "system:serviceaccount:kube-system:aws-node" in condition.values()


def test_api_endpoint_allow_list_and_private_endpoint(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "p").mkdir()
    allowed = plan_one(tmp_path / "a", POLICY, "eks-test", {"gpu-fleet:apiAllowedCidrs": ["192.0.3.0/24"]})
    (cluster,) = by_type(allowed, "aws:eks/cluster:Cluster")
    assert cluster.inputs["vpcConfig"]["publicAccessCidrs"] == ["192.0.3.0/24"]
    assert cluster.inputs["vpcConfig"]["endpointPublicAccess"] is True
    assert not [f for f in allowed.findings if "apiAllowedCidrs" in f.message]
    private = plan_one(tmp_path / "p", POLICY, "eks-test", {"gpu-fleet:privateApiEndpoint": True})
    (cluster,) = by_type(private, "aws:eks/cluster:Cluster")
    assert cluster.inputs["vpcConfig"]["endpointPublicAccess"] is False
    assert cluster.inputs["vpcConfig"]["endpointPrivateAccess"] is True
    # without either, the endpoint is private (EKS's own default is public to 0.0.0.0/0), and the plan says so
    (tmp_path / "d").mkdir()
    default = plan_one(tmp_path / "d", POLICY, "eks-test")
    (cluster,) = by_type(default, "aws:eks/cluster:Cluster")
    assert cluster.inputs["vpcConfig"]["endpointPublicAccess"] is False
    assert [f for f in default.findings if "admits no outside address" in f.message]
    # opened only when the stack says so
    opened = plan_one(tmp_path, POLICY, "eks-test", {"gpu-fleet:openApiEndpoint": True})
    (cluster,) = by_type(opened, "aws:eks/cluster:Cluster")
    assert cluster.inputs["vpcConfig"]["endpointPublicAccess"] is True
    assert "publicAccessCidrs" not in cluster.inputs["vpcConfig"]
    assert [f for f in opened.findings if "accepts connections from any address" in f.message]


def test_a_runner_gets_a_ci_node_group_whose_asg_carries_the_ci_label_and_taint(tmp_path):
    """A CI node group scales from zero like any other: its ASG's node template names the CI label and taint, so the
    autoscaler knows a pending CI job fits a new node of it (and a benchmark does not)."""
    runners = "runners:\n  clusters:\n    eks-test:\n      t4: {concurrency: 3}\n"
    plan = plan_one(tmp_path, POLICY + runners, "eks-test")
    ci = one(plan, NODE_GROUP, "eks-test-gpu-t4-ci").inputs
    assert ci["nodeGroupName"] == "gpu-t4-ci" and ci["instanceTypes"] == ["g4dn.xlarge"]
    assert ci["capacityType"] == "SPOT" and ci["scalingConfig"] == {"minSize": 0, "desiredSize": 0, "maxSize": 3}
    assert ci["labels"]["gpu-fleet.io/ci"] == "true" and ci["labels"]["gpu"] == "t4"
    # pulumi_aws eks NodeGroupTaint: key, value, effect NO_SCHEDULE
    assert ci["taints"] == [*GPU_TAINT, {"key": "gpu-fleet.io/ci", "value": "true", "effect": "NO_SCHEDULE"}]
    tags = asg_tags(plan, "t4-ci")
    assert tags[f"{TEMPLATE}/label/gpu-fleet.io/ci"]["tag"]["value"] == "true"
    assert tags[f"{TEMPLATE}/taint/gpu-fleet.io/ci"]["tag"]["value"] == "true:NoSchedule"
    assert tags[f"{TEMPLATE}/resources/nvidia.com/gpu"]["tag"]["value"] == "1"
    assert "gpu-fleet.io/ci" not in one(plan, NODE_GROUP, "eks-test-gpu-t4").inputs["labels"]
    assert f"{TEMPLATE}/taint/gpu-fleet.io/ci" not in asg_tags(plan, "t4")  # the card's own group: no CI tag
