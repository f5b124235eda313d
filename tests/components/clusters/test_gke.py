"""GKE cluster component under the mock engine: what GKE would receive for each card."""

from __future__ import annotations

from pulumi.runtime import rpc

from components.clusters.gke import MASTER_CIDR
from components.kubernetes.training import KUEUE_VISIBILITY_PORT, WEBHOOK_PORT
from tests.conftest import FIXTURES
from tests.helpers import by_type, one, plan_one

POLICY = """
clusters:
  gcp:
    gke-test:
      zone: us-central1-c
      central: true
      gpus:
        t4: {}
        a100: {max_nodes: 3, spot: false}
        tpu-v5e: {max_nodes: 1}
"""
CONFIG = {"gcp:project": "proj-1"}
FIREWALL = "gcp:compute/firewall:Firewall"


def test_gpu_pool_per_card_with_taint_label_spot_and_zero_minimum(tmp_path):
    plan = plan_one(tmp_path, POLICY, "gke-test", CONFIG)
    t4 = one(plan, "gcp:container/nodePool:NodePool", "gke-test-gpu-t4").inputs
    assert t4["name"] == "gpu-t4"
    assert t4["nodeConfig"]["machineType"] == "n1-standard-4"
    assert t4["nodeConfig"]["guestAccelerators"] == [
        {"type": "nvidia-tesla-t4", "count": 1, "gpuDriverInstallationConfig": {"gpuDriverVersion": "LATEST"}}
    ]
    assert t4["nodeConfig"]["labels"] == {"gpu": "t4", "nvidia.com/gpu.present": "true"}
    assert t4["nodeConfig"]["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}]
    assert t4["nodeConfig"]["spot"] is True
    assert t4["autoscaling"] == {"totalMinNodeCount": 0, "totalMaxNodeCount": 4, "locationPolicy": "ANY"}
    assert t4["initialNodeCount"] == 0


def test_policy_overrides_and_machine_family_per_card(tmp_path):
    plan = plan_one(tmp_path, POLICY, "gke-test", CONFIG)
    a100 = one(plan, "gcp:container/nodePool:NodePool", "gke-test-gpu-a100").inputs
    assert a100["nodeConfig"]["machineType"] == "a2-highgpu-1g"
    assert a100["nodeConfig"]["spot"] is False
    assert a100["autoscaling"]["locationPolicy"] == "BALANCED"
    assert a100["autoscaling"]["totalMaxNodeCount"] == 3


def test_non_nvidia_accelerator_is_data_only(tmp_path):
    plan = plan_one(tmp_path, POLICY, "gke-test", CONFIG)
    tpu = one(plan, "gcp:container/nodePool:NodePool", "gke-test-gpu-tpu-v5e").inputs
    assert tpu["nodeConfig"]["machineType"] == "ct5lp-hightpu-4t"
    assert tpu["nodeConfig"].get("guestAccelerators", []) == []
    assert tpu["nodeConfig"]["taints"] == [{"key": "google.com/tpu", "value": "present", "effect": "NO_SCHEDULE"}]
    assert "nvidia.com/gpu.present" not in tpu["nodeConfig"]["labels"]


def test_cluster_is_protected_without_default_pool_and_with_workload_identity(tmp_path):
    plan = plan_one(tmp_path, POLICY, "gke-test", CONFIG)
    (cluster,) = by_type(plan, "gcp:container/cluster:Cluster")
    assert cluster.protect is True
    assert cluster.inputs["removeDefaultNodePool"] is True
    assert cluster.inputs["location"] == "us-central1-c"
    assert cluster.inputs["workloadIdentityConfig"] == {"workloadPool": "proj-1.svc.id.goog"}
    pools = by_type(plan, "gcp:container/nodePool:NodePool")
    assert len(pools) == 4  # system + 3 cards
    assert all("nodeCount" in p.ignore_changes for p in pools)
    system = one(plan, "gcp:container/nodePool:NodePool", "gke-test-system").inputs
    assert "taints" not in system["nodeConfig"] and system["nodeConfig"]["machineType"] == "e2-standard-4"


def test_kubeconfig_is_secret_and_uses_the_gke_auth_plugin(tmp_path):
    plan = plan_one(tmp_path, POLICY, "gke-test", CONFIG)
    assert rpc.is_rpc_secret(plan.exports["kubeconfig"])
    (provider,) = by_type(plan, "pulumi:providers:kubernetes")
    assert rpc.is_rpc_secret(provider.inputs["kubeconfig"])
    assert "gke-gcloud-auth-plugin" in rpc.unwrap_rpc_secret(provider.inputs["kubeconfig"])


def test_gke_deletion_protection_follows_the_protect_setting(tmp_path):
    """GKE refuses to delete a cluster with deletion_protection; it must follow gpu-fleet:protect like Pulumi's."""
    (tmp_path / "on").mkdir()
    (tmp_path / "off").mkdir()
    (guarded,) = by_type(plan_one(tmp_path / "on", POLICY, "gke-test", CONFIG), "gcp:container/cluster:Cluster")
    assert guarded.protect is True and guarded.inputs["deletionProtection"] is True
    opted_out = plan_one(tmp_path / "off", POLICY, "gke-test", {**CONFIG, "gpu-fleet:protect": False})
    (cluster,) = by_type(opted_out, "gcp:container/cluster:Cluster")
    assert cluster.protect is False and cluster.inputs["deletionProtection"] is False


def test_hardening_node_account_dataplane_v2_and_secrets_key(tmp_path):
    plan = plan_one(tmp_path, POLICY, "gke-test", CONFIG)
    cluster = one(plan, "gcp:container/cluster:Cluster", "gke-test").inputs
    assert cluster["datapathProvider"] == "ADVANCED_DATAPATH"  # enforces NetworkPolicy
    assert "networkPolicy" not in cluster  # Dataplane V2 refuses the Calico add-on beside it
    (account,) = by_type(plan, "gcp:serviceaccount/account:Account")
    (grant,) = by_type(plan, "gcp:projects/iAMMember:IAMMember")
    assert grant.inputs["role"] == "roles/container.defaultNodeServiceAccount"
    assert grant.inputs["member"] == f"serviceAccount:{account.name}@proj-1.iam.gserviceaccount.com"
    for pool in by_type(plan, "gcp:container/nodePool:NodePool"):
        assert pool.inputs["nodeConfig"]["serviceAccount"] == f"{account.name}@proj-1.iam.gserviceaccount.com"
    assert cluster["nodeConfig"]["serviceAccount"].startswith(account.name)  # not the Compute Engine default
    (key,) = by_type(plan, "gcp:kms/cryptoKey:CryptoKey")
    (ring,) = by_type(plan, "gcp:kms/keyRing:KeyRing")
    assert ring.inputs["location"] == "us-central1"  # the zone's region, as GKE requires
    assert cluster["databaseEncryption"] == {"state": "ENCRYPTED", "keyName": f"{key.name}-id"}
    (agent,) = by_type(plan, "gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember")
    assert (
        agent.inputs["member"] == "serviceAccount:service-123456789012@container-engine-robot.iam.gserviceaccount.com"
    )
    assert agent.inputs["role"] == "roles/cloudkms.cryptoKeyEncrypterDecrypter"
    # no range listed: authorised networks with none, no outside address reaches the API (issue 44); a warning says so
    assert cluster["masterAuthorizedNetworksConfig"] == {"cidrBlocks": [], "gcpPublicCidrsAccessEnabled": False}
    assert [f for f in plan.findings if "admits no outside address" in f.message]


def test_an_api_endpoint_open_to_every_address_only_when_the_stack_says_so(tmp_path):
    opened = plan_one(tmp_path, POLICY, "gke-test", {**CONFIG, "gpu-fleet:openApiEndpoint": True})
    cluster = one(opened, "gcp:container/cluster:Cluster", "gke-test").inputs
    assert "masterAuthorizedNetworksConfig" not in cluster
    assert [f for f in opened.findings if "accepts connections from any address" in f.message]


def test_api_allow_list_and_private_endpoint(tmp_path):
    (tmp_path / "a").mkdir()
    allowed = plan_one(tmp_path / "a", POLICY, "gke-test", {**CONFIG, "gpu-fleet:apiAllowedCidrs": ["192.0.3.0/24"]})
    cluster = one(allowed, "gcp:container/cluster:Cluster", "gke-test").inputs
    assert cluster["masterAuthorizedNetworksConfig"] == {
        "cidrBlocks": [{"cidrBlock": "192.0.3.0/24", "displayName": "gpu-fleet:apiAllowedCidrs"}],
        "gcpPublicCidrsAccessEnabled": False,
    }
    # private nodes by default (no public address), the endpoint public behind its allow-list, egress by Cloud NAT
    assert cluster["privateClusterConfig"] == {
        "enablePrivateNodes": True,
        "enablePrivateEndpoint": False,
        "masterIpv4CidrBlock": "172.16.0.0/28",
    }
    assert len(by_type(allowed, "gcp:compute/routerNat:RouterNat")) == 1
    private = plan_one(tmp_path, POLICY, "gke-test", {**CONFIG, "gpu-fleet:privateApiEndpoint": True})
    cluster = one(private, "gcp:container/cluster:Cluster", "gke-test").inputs
    assert cluster["privateClusterConfig"]["enablePrivateEndpoint"] is True
    assert cluster["privateClusterConfig"]["enablePrivateNodes"] is True
    (nat,) = by_type(private, "gcp:compute/routerNat:RouterNat")  # private nodes still pull images
    assert nat.inputs["region"] == "us-central1"


SWEEP_POLICY = """
clusters:
  gcp:
    gke-test:
      zone: us-central1-a
      central: true
      gpus: [l4]
workloads:
  sweeper: {gpus: [l4], scale: [1, 2]}
"""


# POLICY without its pools' probes: nothing on the cluster for Kueue to queue
BARE = POLICY.replace("t4: {}", "t4: {probe: false}").replace("spot: false}", "spot: false, probe: false}")
BARE = BARE.replace("{max_nodes: 1}", "{max_nodes: 1, probe: false}")


def test_a_private_cluster_that_runs_sweeps_lets_its_control_plane_reach_the_webhooks(tmp_path):
    workloads = FIXTURES / "fleet" / "workloads"
    private = {**CONFIG, "gpu-fleet:privateApiEndpoint": True}
    plans = {}
    for name, policy, config in (
        ("swept", SWEEP_POLICY, private),
        ("default", SWEEP_POLICY, CONFIG),  # private nodes by default: the same rule
        (
            "public",
            SWEEP_POLICY,
            {**CONFIG, "gpu-fleet:publicNodes": True},
        ),  # a public control plane reaches every port
        ("unswept", POLICY, private),  # Kueue for its benchmark queue (the pools' probes): the same rule
        ("bare", BARE, private),  # no benchmark, probe or sweep: no Kueue, no webhook to reach
    ):
        (tmp_path / name).mkdir()
        plans[name] = plan_one(tmp_path / name, policy, "gke-test", config, workloads_dir=workloads)
    assert not by_type(plans["public"], FIREWALL) and not by_type(plans["bare"], FIREWALL)
    assert len(by_type(plans["default"], FIREWALL)) == len(by_type(plans["unswept"], FIREWALL)) == 1
    (rule,) = by_type(plans["swept"], FIREWALL)
    inputs = rule.inputs
    assert inputs["direction"] == "INGRESS" and inputs["sourceRanges"] == [MASTER_CIDR]
    assert inputs["allows"] == [{"protocol": "tcp", "ports": sorted([str(KUEUE_VISIBILITY_PORT), str(WEBHOOK_PORT)])}]
    # only the cluster's own nodes, by their service account (no network-wide rule)
    assert len(inputs["targetServiceAccounts"]) == 1 and "targetTags" not in inputs
    assert rule.parent == one(plans["swept"], "gpufleet:index:GkeCluster", "gke-test").urn


def test_public_nodes_only_when_the_stack_opts_out(tmp_path):
    public = plan_one(tmp_path, POLICY, "gke-test", {**CONFIG, "gpu-fleet:publicNodes": True})
    cluster = one(public, "gcp:container/cluster:Cluster", "gke-test").inputs
    assert "privateClusterConfig" not in cluster
    assert not by_type(public, "gcp:compute/routerNat:RouterNat")


def test_a_runner_gets_a_ci_pool_of_the_cards_machine_spot_from_zero_labelled_and_tainted(tmp_path):
    """The a100 pool is on demand and its max 3; its CI pool is spot, from 0, sized for 3 one-card jobs at once."""
    runners = "runners:\n  clusters:\n    gke-test:\n      a100: {concurrency: 3}\n"
    plan = plan_one(tmp_path, POLICY + runners, "gke-test", CONFIG)
    ci = one(plan, "gcp:container/nodePool:NodePool", "gke-test-gpu-a100-ci").inputs
    own = one(plan, "gcp:container/nodePool:NodePool", "gke-test-gpu-a100").inputs
    assert ci["name"] == "gpu-a100-ci"
    assert ci["nodeConfig"]["machineType"] == own["nodeConfig"]["machineType"] == "a2-highgpu-1g"
    assert ci["nodeConfig"]["guestAccelerators"] == own["nodeConfig"]["guestAccelerators"]
    assert ci["nodeConfig"]["spot"] is True and own["nodeConfig"]["spot"] is False
    assert ci["autoscaling"] == {"totalMinNodeCount": 0, "totalMaxNodeCount": 3, "locationPolicy": "ANY"}
    assert ci["nodeConfig"]["labels"] == {**own["nodeConfig"]["labels"], "gpu-fleet.io/ci": "true"}
    # pulumi_gcp NodePoolNodeConfigTaint: key, value, effect NO_SCHEDULE (components/clusters/taints.py)
    assert ci["nodeConfig"]["taints"] == [
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"},
        {"key": "gpu-fleet.io/ci", "value": "true", "effect": "NO_SCHEDULE"},
    ]
    assert ci["nodeConfig"]["workloadMetadataConfig"] == {"mode": "GKE_METADATA"}  # no node credentials in a job
    assert "gpu-fleet.io/ci" not in own["nodeConfig"]["labels"]
    assert len(by_type(plan, "gcp:container/nodePool:NodePool")) == 5  # system, three cards, one CI pool
