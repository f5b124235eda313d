"""The CrossGuard policy pack, driven through the real analyzer protocol (fleet/tools/analyzer.py starts policy/ as the
Pulumi CLI does and calls Analyze / AnalyzeStack over gRPC) with registrations from a real offline plan."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest

from fleet.model.spec import load_fleet
from fleet.tools.analyzer import PolicyPackSession, analyze_plans
from fleet.tools.mock_engine import Registration
from fleet.tools.plan import Finding, StackPlan, plan_fleet

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "policy" / "fleet.yaml"
# The tests' own fleet (one cluster per cloud, its own workloads), so a team's fleet keeps this suite green.
FIXTURE = ROOT / "tests" / "fixtures" / "fleet"
POLICY, STACKS, WORKLOADS = FIXTURE / "fleet.yaml", FIXTURE / "stacks", FIXTURE / "workloads"
PLAN_ARGS = ["--policy", str(POLICY), "--stacks-dir", str(STACKS), "--workloads-dir", str(WORKLOADS)]


@pytest.fixture(scope="module")
def plans() -> dict[str, StackPlan]:
    fleet = load_fleet(POLICY, WORKLOADS)
    return {p.stack: p for p in plan_fleet(fleet, POLICY, stacks_dir=STACKS, workloads_dir=WORKLOADS)}


@pytest.fixture(scope="module")
def session():
    with PolicyPackSession(POLICY, workloads_dir=WORKLOADS) as s:
        yield s


def reg(plans: dict[str, StackPlan], stack: str, type_: str, name: str) -> Registration:
    """A deep copy of the registration of ``stack`` with that type whose name ends in ``name``."""
    for r in plans[stack].registrations:
        if r.type == type_ and r.name.endswith(name):
            return copy.deepcopy(r)
    raise LookupError(f"{stack}: no {type_} named *{name}")


def check(session: PolicyPackSession, r: Registration) -> list[Finding]:
    return session.analyze_registrations([r], whole_stack=False)


def only(findings: list[Finding], policy: str) -> list[Finding]:
    return [f for f in findings if f.policy == policy]


def assert_violation(findings: list[Finding], policy: str, *fragments: str, urn: str | None = None) -> None:
    hits = only(findings, policy)
    assert hits, f"expected a {policy} violation, got {[(f.policy, f.message) for f in findings]}"
    for f in hits:
        assert f.level == "mandatory"
        if urn is not None:
            assert f.urn == urn
    text = "\n".join(f.message for f in hits)
    for fragment in fragments:
        assert fragment in text


GKE_POOL = "gcp:container/nodePool:NodePool"
EKS_GROUP = "aws:eks/nodeGroup:NodeGroup"
AKS_POOL = "azure-native:containerservice:AgentPool"
MAGNUM_GROUP = "openstack:containerinfra/nodeGroup:NodeGroup"
JOB = "kubernetes:batch/v1:Job"
CRONJOB = "kubernetes:batch/v1:CronJob"


def pod(r: Registration) -> dict[str, Any]:
    spec = r.inputs["spec"]
    if r.type == CRONJOB:
        spec = spec["jobTemplate"]["spec"]
    return spec["template"]["spec"]


# --- the shipped fleet --------------------------------------------------------------------------------------


def test_shipped_fleet_has_no_findings():
    """Whatever the shipped policy says, the program's plan of it passes the pack (derived from the policy)."""
    plans = {p.stack: p for p in plan_fleet(load_fleet(SHIPPED), SHIPPED)}
    findings = analyze_plans(plans.values(), policy_file=SHIPPED)
    assert set(findings) == set(plans)
    for stack, found in findings.items():
        assert [f for f in found if f.level == "mandatory"] == [], stack
        # no other advisory either; images-by-digest flags only what the repository does not pin by digest yet
        assert {f.policy for f in found} <= {"images-by-digest"}, stack
        for f in found:
            ref = re.search(r"runs '([^']+)'|\(([^)]+)\) is not pinned", f.message)
            assert ref and "@sha256:" not in (ref.group(1) or ref.group(2)), f.message


def test_fixture_fleet_has_no_findings(plans):
    findings = analyze_plans(plans.values(), policy_file=POLICY, workloads_dir=WORKLOADS)
    assert set(findings) == set(plans)
    for stack, found in findings.items():
        assert [f for f in found if f.level == "mandatory"] == [], stack
        assert {f.policy for f in found} <= {"images-by-digest"}, stack  # the fixtures' images have no digest


def test_pack_lists_every_policy_with_a_description(session):
    policies = {p.name: p for p in session.info.policies}
    assert session.info.name == "gpu-fleet"
    assert {
        "gpu-pool-allowed-card",
        "gpu-pool-card-label",
        "gpu-pool-accelerator-taint",
        "gpu-pool-size",
        "gpu-pool-spot",
        "benchmark-allowed-card",
        "benchmark-placement",
        "benchmark-limits",
        "benchmark-mtail-sidecar",
        "benchmark-metric-labels",
        "benchmark-pinned-images",
        "pod-security-restricted",
        "pod-service-account-token",
        "images-by-digest",
        "namespace-pod-security",
        "namespace-default-deny-ingress",
        "benchmark-set-matches-policy",
        "cluster-protected",
    } <= set(policies)
    assert all(len(p.description) > 30 for p in policies.values())


def test_the_pool_name_contract():
    from fleet.model.pod_contract import card_of_pool, pool_name

    assert pool_name("tpu-v5e") == "gpu-tpu-v5e"
    for name, card in (
        ("eks-test-gpu-t4", "t4"),
        ("gpu-tpu-v5e", "tpu-v5e"),  # a Magnum role
        ("aks-test-gpu-tpu-v5e", "tpu-v5e"),
        ("gpu-lab-gpu-a100", "a100"),  # a cluster whose own name has gpu- in it
        ("eks-test-system", None),
    ):
        assert card_of_pool(name) == card, name


def test_pack_process_is_stopped():
    s = PolicyPackSession(POLICY, workloads_dir=WORKLOADS)
    proc = s._proc
    s.close()
    assert proc.poll() is not None


# --- (a) GPU pools ------------------------------------------------------------------------------------------


def test_gke_pool_without_taint(plans, session):
    r = reg(plans, "fix-gke", GKE_POOL, "gpu-l4")
    assert check(session, r) == []
    r.inputs["nodeConfig"]["taints"] = []
    assert_violation(check(session, r), "gpu-pool-accelerator-taint", "lacks the accelerator taint", urn=r.urn)


def test_gke_pool_without_card_label(plans, session):
    r = reg(plans, "fix-gke", GKE_POOL, "gpu-l4")
    del r.inputs["nodeConfig"]["labels"]["gpu"]
    assert_violation(check(session, r), "gpu-pool-card-label", "gpu=l4")


def test_aks_pool_without_taint(plans, session):
    r = reg(plans, "fix-aks", AKS_POOL, "gpu-t4")
    assert check(session, r) == []
    r.inputs["nodeTaints"] = [t for t in r.inputs["nodeTaints"] if "spot" in t]
    assert_violation(check(session, r), "gpu-pool-accelerator-taint")


def test_eks_group_with_min_size_2(plans, session):
    r = reg(plans, "fix-eks", EKS_GROUP, "gpu-t4")
    assert check(session, r) == []
    r.inputs["scalingConfig"]["minSize"] = 2
    assert_violation(check(session, r), "gpu-pool-size", "minimum size 2", "says 0", "scale to zero")


def test_eks_group_on_demand(plans, session):
    r = reg(plans, "fix-eks", EKS_GROUP, "gpu-a10g")
    r.inputs["capacityType"] = "ON_DEMAND"
    assert_violation(check(session, r), "gpu-pool-spot", "on-demand", "asks for spot")


def test_eks_group_for_a_card_the_cluster_lacks(plans, session):
    r = reg(plans, "fix-eks", EKS_GROUP, "gpu-t4")
    r.name = "fix-eks-gpu-h100"
    r.urn = r.urn.removesuffix("gpu-t4") + "gpu-h100"
    r.inputs["labels"]["gpu"] = "h100"
    assert_violation(check(session, r), "gpu-pool-allowed-card", "'h100'", "a10g")


def test_system_pool_is_not_a_gpu_pool(plans, session):
    r = reg(plans, "fix-eks", EKS_GROUP, "system")
    r.inputs["scalingConfig"]["minSize"] = 2
    assert check(session, r) == []


def test_magnum_group_keeps_one_node_unless_opted_in(plans, session):
    r = reg(plans, "fix-magnum", MAGNUM_GROUP, "gpu-v100")
    assert check(session, r) == []  # no labels or taints required on Magnum
    r.inputs["minNodeCount"] = 0
    assert_violation(check(session, r), "gpu-pool-size", "minimum size 0", "min_nodes: 0")


# --- (b) benchmark pods -------------------------------------------------------------------------------------


@pytest.fixture
def job(plans) -> Registration:
    return reg(plans, "fix-eks", JOB, "-t4")


def mandatory(findings: list[Finding]) -> list[Finding]:
    """The findings that stop a deploy (digests are advisory until the images workflow has recorded them)."""
    return [f for f in findings if f.level == "mandatory"]


def test_compliant_job_and_cronjob(plans, session, job):
    assert mandatory(check(session, job)) == []
    assert mandatory(check(session, reg(plans, "fix-aks", CRONJOB, "-t4"))) == []


def test_job_on_a_card_the_policy_does_not_allow(session, job):
    job.inputs["spec"]["template"]["metadata"]["labels"]["gpu"] = "p100"
    assert_violation(check(session, job), "benchmark-allowed-card", "'p100'", "does not give cluster 'fix-eks'")


def test_job_image_latest_and_untagged(session, job):
    pod(job)["containers"][0]["image"] = "ghcr.io/example/bench:latest"
    assert_violation(check(session, job), "benchmark-pinned-images", "bench:latest", "pin a version tag")
    pod(job)["containers"][0]["image"] = "ghcr.io/example/bench"
    assert_violation(check(session, job), "benchmark-pinned-images", "untagged")
    pod(job)["containers"][0]["image"] = "registry:5000/bench@sha256:" + "0" * 64
    assert not only(check(session, job), "benchmark-pinned-images")


def test_privileged_container_and_host_path(session, job):
    pod(job)["containers"][0]["securityContext"]["privileged"] = True
    pod(job)["volumes"].append({"name": "host", "hostPath": {"path": "/"}})
    assert_violation(
        check(session, job), "pod-security-restricted", "privileged is true", "volume 'host' is of type hostPath"
    )


def test_privileged_cronjob(plans, session):
    r = reg(plans, "fix-aks", CRONJOB, "-a100")
    pod(r)["initContainers"][0]["securityContext"]["privileged"] = True
    assert_violation(check(session, r), "pod-security-restricted", "'prepare-log'")


def test_job_without_tolerations_or_selector(session, job):
    pod(job)["tolerations"] = []
    assert_violation(check(session, job), "benchmark-placement", "does not tolerate", "gpu")
    del pod(job)["nodeSelector"]
    assert_violation(check(session, job), "benchmark-placement", "no nodeSelector")


def test_aks_spot_toleration_required(plans, session):
    r = reg(plans, "fix-aks", JOB, "-a10")
    pod(r)["tolerations"] = [t for t in pod(r)["tolerations"] if t["value"] != "spot"]
    assert_violation(check(session, r), "benchmark-placement", "spot")


def test_job_without_limits_or_deadline(session, job):
    del pod(job)["containers"][0]["resources"]["limits"]["cpu"]
    del job.inputs["spec"]["activeDeadlineSeconds"]
    assert_violation(check(session, job), "benchmark-limits", "no cpu limit", "activeDeadlineSeconds")


def test_job_deleted_by_ttl(plans, session, job):
    """A Pulumi-managed Job with a TTL would be deleted by Kubernetes and rerun by `pulumi up --refresh`."""
    job.inputs["spec"]["ttlSecondsAfterFinished"] = 86400
    assert_violation(check(session, job), "job-not-deleted-by-ttl", "pulumi up --refresh", urn=job.urn)
    for cron in [r for p in plans.values() for r in p.registrations if r.type == CRONJOB][:1]:
        assert cron.inputs["spec"]["jobTemplate"]["spec"]["ttlSecondsAfterFinished"] > 0  # Kubernetes' own Jobs
        assert not only(check(session, cron), "job-not-deleted-by-ttl")


def test_job_without_mtail_sidecar(session, job):
    for c in pod(job)["initContainers"]:
        if c["name"] == "mtail":
            del c["restartPolicy"]
    assert_violation(check(session, job), "benchmark-mtail-sidecar", "restartPolicy: Always")


def test_job_without_metric_labels(session, job):
    del job.inputs["spec"]["template"]["metadata"]["labels"]["cloud"]
    assert_violation(check(session, job), "benchmark-metric-labels", "cloud")


def test_job_without_accelerator_is_not_a_benchmark(session, job):
    for c in pod(job)["containers"]:
        c["resources"]["limits"] = {k: v for k, v in c["resources"]["limits"].items() if "/" not in k}
    pod(job)["containers"][0]["image"] = "busybox"
    # no benchmark policy applies; the policies of every pod still do (only the advisory digest one fires)
    assert {f.policy for f in check(session, job)} == {"images-by-digest"}


# --- (c) the stack's benchmarks -----------------------------------------------------------------------------


def test_stack_missing_and_extra_benchmarks(plans, session):
    regs = copy.deepcopy(plans["fix-eks"].registrations)
    jobs = [r for r in regs if r.type == JOB]
    dropped = jobs[0]
    regs.remove(dropped)
    extra = jobs[1]
    extra.inputs["spec"]["template"]["metadata"]["labels"]["workload"] = "not-in-policy"
    findings = only(session.analyze_registrations(regs), "benchmark-set-matches-policy")
    labels = dropped.inputs["spec"]["template"]["metadata"]["labels"]
    assert any(f"workload {labels['workload']} on card {labels['gpu']}" in f.message for f in findings)
    assert any("not-in-policy" in f.message and f.urn == extra.urn for f in findings)
    assert all(f.level == "mandatory" for f in findings)


# --- (d) clusters -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stack", "type_"),
    [
        ("fix-gke", "gcp:container/cluster:Cluster"),
        ("fix-eks", "aws:eks/cluster:Cluster"),
        ("fix-aks", "azure-native:containerservice:ManagedCluster"),
        ("fix-magnum", "openstack:containerinfra/cluster:Cluster"),
    ],
)
def test_unprotected_cluster(plans, session, stack, type_):
    r = reg(plans, stack, type_, stack)
    assert check(session, r) == []
    r.protect = False
    assert_violation(check(session, r), "cluster-protected", "protect=True", urn=r.urn)


# --- `plan` itself catches a deliberately broken program ----------------------------------------------------


def _broken_plan(capsys: pytest.CaptureFixture[str], stack: str) -> tuple[int, str]:
    """``python -m fleet plan --stack STACK`` in this process (so a patched component is what runs)."""
    from fleet.tools.cli import main

    status = main(["plan", *PLAN_ARGS, "--stack", stack])
    captured = capsys.readouterr()
    return status, captured.out + captured.err


def test_plan_fails_a_program_whose_gpu_pools_lose_their_taint(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import components.clusters.gke

    # The bug: GKE pools declare the accelerator taint as PreferNoSchedule, so other pods may land on GPUs.
    monkeypatch.setattr(
        components.clusters.gke,
        "upper_effect",
        lambda t: {"key": t.key, "value": t.value, "effect": "PREFER_NO_SCHEDULE"},
    )
    status, output = _broken_plan(capsys, "fix-gke")
    assert status == 1, output
    assert "gpu-pool-accelerator-taint" in output and "fix-gke-gpu-t4" in output, output
    pools = load_fleet(POLICY, WORKLOADS).cluster("fix-gke").pools
    assert f"{len(pools)} mandatory violation(s)" in output, output  # one per GPU pool


def test_plan_fails_a_program_that_runs_a_workload_on_a_card_the_policy_forbids(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from fleet.model.spec import Benchmark, Fleet

    # The bug: benchmarks placed on every card of the cluster, ignoring the policy's list for fitter (no A10).
    def every_card(self: Fleet, cluster: Any) -> list[Benchmark]:
        return [
            Benchmark(self.workloads[w], pool, self.schedules[w]) for w in self.placements for pool in cluster.pools
        ]

    monkeypatch.setattr(Fleet, "benchmarks", every_card)
    status, output = _broken_plan(capsys, "fix-aks")
    assert status == 1, output
    assert "benchmark-allowed-card" in output and "benchmark-set-matches-policy" in output, output
    assert "fitter-a10" in output, output


def test_plan_of_the_unbroken_stack_passes(capsys: pytest.CaptureFixture[str]) -> None:
    status, output = _broken_plan(capsys, "fix-gke")
    assert status == 0 and "0 mandatory violation(s)" in output, output


# --- (d) every pod-bearing resource and every namespace, not only GPU benchmarks -----------------------------------

DEPLOYMENT = "kubernetes:apps/v1:Deployment"
NAMESPACE = "kubernetes:core/v1:Namespace"
NETWORK_POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
DIGEST = "@sha256:" + "0" * 64
POD_POLICIES = ("pod-security-restricted", "pod-service-account-token")


def raw(type_: str, name: str, inputs: dict[str, Any], stack: str = "fix-gke") -> Registration:
    """A resource of ``type_`` as someone might add it to a stack by hand, outside the fleet's components."""
    return Registration(
        urn=f"urn:pulumi:{stack}::gpu-fleet::{type_}::{name}",
        type=type_,
        name=name,
        parent="",
        provider="",
        custom=True,
        protect=False,
        ignore_changes=[],
        inputs=inputs,
    )


def raw_job(spec: dict[str, Any], stack: str = "fix-eks", name: str = "debug") -> Registration:
    """A Job as someone might add it to a stack, outside the fleet's components."""
    inputs = {"metadata": {"name": name, "namespace": "default"}, "spec": {"template": {"spec": spec}}}
    return raw(JOB, name, inputs, stack)


def issue_job_spec() -> dict[str, Any]:
    """The pod of issue #15's Job: SYS_ADMIN and NET_ADMIN, escalation, a host port, Unconfined seccomp; no GPU."""
    return {
        "restartPolicy": "Never",
        "securityContext": {"seccompProfile": {"type": "Unconfined"}},
        "containers": [
            {
                "name": "tool",
                "image": "ghcr.io/example/tool:1.0",
                "ports": [{"containerPort": 8080, "hostPort": 8080}],
                "securityContext": {
                    "allowPrivilegeEscalation": True,
                    "capabilities": {"add": ["SYS_ADMIN", "NET_ADMIN"]},
                },
            }
        ],
    }


@pytest.fixture()
def gateway(plans: dict[str, StackPlan]) -> Registration:
    return reg(plans, "fix-gke", DEPLOYMENT, "-federation-gateway")


def test_the_fleets_own_pods_comply(plans, session, gateway):
    for r in (reg(plans, "fix-eks", JOB, "-t4"), reg(plans, "fix-aks", CRONJOB, "-t4"), gateway):
        assert mandatory(check(session, r)) == [], r.name


def test_the_issues_job_is_refused_although_it_requests_no_gpu(session):
    """SYS_ADMIN and NET_ADMIN, privilege escalation, a host port and Unconfined seccomp: a plain Job, no GPU."""
    job = raw_job(issue_job_spec())
    findings = check(session, job)
    assert_violation(
        findings,
        "pod-security-restricted",
        "seccompProfile is Unconfined",
        "allowPrivilegeEscalation must be false",
        "capabilities.add ['NET_ADMIN', 'SYS_ADMIN']",
        "hostPort 8080",
        "capabilities.drop must contain ALL",
        "runAsNonRoot must be true",
    )
    assert_violation(findings, "pod-service-account-token", "automountServiceAccountToken: false")
    assert_violation_advisory = [f for f in findings if f.policy == "images-by-digest"]
    assert assert_violation_advisory and all(f.level == "advisory" for f in assert_violation_advisory)


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        (lambda p: p.update(hostNetwork=True), "hostNetwork is true"),
        (lambda p: p.update(hostPID=True), "hostPID is true"),
        (lambda p: p["containers"][0]["securityContext"].update(runAsUser=0), "runAsUser is 0"),
        (lambda p: p["securityContext"].update(runAsNonRoot=False), "runAsNonRoot must be true"),
        (lambda p: p["initContainers"][1]["securityContext"].pop("capabilities"), "drop must contain ALL"),
        (lambda p: p["initContainers"][0]["securityContext"].pop("allowPrivilegeEscalation"), "must be false"),
        (lambda p: p["securityContext"].pop("seccompProfile"), "seccompProfile.type is unset"),
        (lambda p: p["volumes"].append({"name": "sock", "hostPath": {"path": "/run"}}), "type hostPath"),
    ],
)
def test_each_restricted_rule_on_a_benchmark_job(plans, session, change, fragment):
    job = reg(plans, "fix-eks", JOB, "-t4")
    change(pod(job))
    assert_violation(check(session, job), "pod-security-restricted", fragment)


def test_a_deployment_is_checked_too(session, gateway):
    spec = gateway.inputs["spec"]["template"]["spec"]
    spec["containers"][0]["securityContext"]["capabilities"] = {"add": ["NET_RAW"]}
    spec["automountServiceAccountToken"] = True
    findings = check(session, gateway)
    assert_violation(findings, "pod-security-restricted", "container 'nginx'", "NET_RAW")
    assert_violation(findings, "pod-service-account-token", "default service account")


def test_a_pod_with_its_own_service_account_may_mount_its_token(plans, session):
    job = reg(plans, "fix-eks", JOB, "-t4")
    pod(job)["automountServiceAccountToken"] = True
    assert only(check(session, job), "pod-service-account-token")
    pod(job)["serviceAccountName"] = "benchmark-reader"
    assert not only(check(session, job), "pod-service-account-token")


def test_root_only_for_a_workload_that_needs_it_and_only_in_its_namespace(plans, session):
    """The fixture uploader declares needs_root: as root it passes in benchmarks-root and fails anywhere else; a
    workload that does not declare it may not run as root even there."""
    job = reg(plans, "fix-eks", JOB, "-t4")
    as_root = copy.deepcopy(job)
    pod(as_root)["securityContext"] = {"seccompProfile": {"type": "RuntimeDefault"}}
    as_root.inputs["metadata"]["namespace"] = "benchmarks-root"
    assert_violation(check(session, as_root), "pod-security-restricted", "runAsNonRoot must be true")  # tracker
    labels = as_root.inputs["spec"]["template"]["metadata"]["labels"]
    labels["workload"] = "uploader"
    assert not only(check(session, as_root), "pod-security-restricted")
    as_root.inputs["metadata"]["namespace"] = "benchmarks"
    assert_violation(check(session, as_root), "pod-security-restricted", "belongs in 'benchmarks-root'")


def test_images_by_digest_is_advisory_and_satisfied_by_a_digest(plans, session):
    job = reg(plans, "fix-eks", JOB, "-t4")
    found = only(check(session, job), "images-by-digest")
    assert found and {f.level for f in found} == {"advisory"}
    for c in [*pod(job)["initContainers"], *pod(job)["containers"]]:
        c["image"] = c["image"] + DIGEST
    assert not only(check(session, job), "images-by-digest")


def test_namespace_levels(plans, session):
    namespaces = {r.inputs["metadata"]["name"]: r for r in plans["fix-gke"].registrations if r.type == NAMESPACE}
    for r in namespaces.values():
        assert not only(check(session, r), "namespace-pod-security"), r.name
    bench = copy.deepcopy(namespaces["benchmarks"])
    bench.inputs["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] = "baseline"
    assert_violation(check(session, bench), "namespace-pod-security", "must enforce restricted")
    del bench.inputs["metadata"]["labels"]["pod-security.kubernetes.io/enforce"]
    assert_violation(check(session, bench), "namespace-pod-security", "has no Pod Security level")
    agents = copy.deepcopy(namespaces["node-agents"])
    agents.inputs["metadata"]["annotations"] = {}
    assert_violation(check(session, agents), "namespace-pod-security", "privileged' without saying why")


def test_every_namespace_denies_ingress_by_default(plans, session):
    stack = plans["fix-gke"].registrations
    assert not only(session.analyze_registrations(list(stack)), "namespace-default-deny-ingress")
    without = [
        r
        for r in stack
        if not (
            r.type == NETWORK_POLICY
            and r.inputs["metadata"]["name"] == "default-deny-ingress"
            and r.inputs["metadata"]["namespace"] == "node-agents"
        )
    ]
    assert_violation(
        session.analyze_registrations(without), "namespace-default-deny-ingress", "'node-agents'", "podSelector {}"
    )
    # an "allow" policy is not a default deny
    opened = copy.deepcopy(without)
    for r in opened:
        if r.type == NETWORK_POLICY and r.inputs["metadata"]["namespace"] == "node-agents":
            r.inputs["spec"]["podSelector"] = {}
    assert_violation(session.analyze_registrations(opened), "namespace-default-deny-ingress", "'node-agents'")


def test_chart_images_in_release_values_are_checked_for_digests(plans, session):
    (kps,) = [
        r
        for r in plans["fix-magnum"].registrations
        if r.type == "kubernetes:helm.sh/v3:Release" and r.name.endswith("-prometheus")
    ]
    found = only(check(session, kps), "images-by-digest")
    assert found and {f.level for f in found} == {"advisory"}
    assert any("prometheus.prometheusSpec.image" in f.message for f in found)
    pinned = copy.deepcopy(kps)
    values = pinned.inputs["values"]
    stack = [values]
    while stack:  # give every image block of the values a digest
        node = stack.pop()
        if isinstance(node, dict):
            if isinstance(node.get("repository"), str):
                node["sha"] = "0" * 64
            stack.extend(node.values())
    assert not only(check(session, pinned), "images-by-digest")


# --- (d) each pod-bearing kind, each `restricted` rule, its allowed forms, namespaces, digests ---------------------

POD = "kubernetes:core/v1:Pod"
POD_BEARING_KINDS = (
    POD,
    JOB,
    CRONJOB,
    DEPLOYMENT,
    "kubernetes:apps/v1:StatefulSet",
    "kubernetes:apps/v1:DaemonSet",
    "kubernetes:apps/v1:ReplicaSet",
    "kubernetes:core/v1:ReplicationController",
)
# The mandatory policies of issue #15 (images-by-digest is advisory here; deploys make it mandatory).
LEAST_PRIVILEGE = (*POD_POLICIES, "namespace-pod-security", "namespace-default-deny-ingress")
RESTRICTED_CONTAINER = {
    "privileged": False,
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "runAsNonRoot": True,
    "runAsUser": 1000,
    "seccompProfile": {"type": "RuntimeDefault"},
}


def harden(spec: dict[str, Any]) -> dict[str, Any]:
    """The pod spec with a fully compliant securityContext on the pod and every container, and no API token."""
    spec["securityContext"] = {
        "runAsNonRoot": True,
        "runAsUser": 1000,
        "runAsGroup": 1000,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    spec["automountServiceAccountToken"] = False
    for key in ("initContainers", "containers", "ephemeralContainers"):
        for c in spec.get(key) or []:
            c["securityContext"] = copy.deepcopy(RESTRICTED_CONTAINER)
    return spec


def pod_spec_of(r: Registration) -> dict[str, Any]:
    """The pod spec of a registration of any pod-bearing kind."""
    if r.type == POD:
        return r.inputs["spec"]
    if r.type == CRONJOB:
        return r.inputs["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return r.inputs["spec"]["template"]["spec"]


def as_kind(source: Registration, type_: str) -> Registration:
    """A deep copy of ``source`` (a real Deployment of the plan) as a resource of ``type_`` with the same pod
    template, hardened: the same pod, carried by another pod-bearing kind."""
    r = copy.deepcopy(source)
    template = r.inputs["spec"]["template"]
    harden(template["spec"])
    kind = type_.rsplit(":", 1)[-1]
    r.type = type_
    r.name = f"{source.name}-{kind.lower()}"
    r.urn = f"{source.urn.split('::')[0]}::gpu-fleet::{type_}::{r.name}"
    metadata = r.inputs["metadata"]
    if type_ == POD:
        r.inputs = {"metadata": {**metadata, **template.get("metadata", {})}, "spec": template["spec"]}
    elif type_ == CRONJOB:
        r.inputs = {
            "metadata": metadata,
            "spec": {"schedule": "0 3 * * *", "jobTemplate": {"spec": {"template": template}}},
        }
    elif type_ == JOB:
        template["spec"]["restartPolicy"] = "Never"
        r.inputs = {"metadata": metadata, "spec": {"template": template}}
    else:
        r.inputs = {"metadata": metadata, "spec": {"selector": r.inputs["spec"]["selector"], "template": template}}
    r.inputs["kind"] = kind
    return r


def test_the_fixture_fleets_own_resources_pass_the_least_privilege_policies(plans, session):
    """The unmodified plan of the fixture fleet, every stack whole: none of its pods, namespaces or network policies
    breaks a policy of issue #15, and there are pods and namespaces of several kinds for them to check."""
    kinds = set()
    for stack, plan in plans.items():
        regs = list(plan.registrations)
        kinds |= {r.type for r in regs if r.type in POD_BEARING_KINDS}
        assert any(r.type == NAMESPACE for r in regs), stack
        findings = session.analyze_registrations(regs)
        assert [(f.policy, f.message) for f in findings if f.policy in LEAST_PRIVILEGE] == [], stack
    assert {JOB, CRONJOB, DEPLOYMENT} <= kinds


@pytest.mark.parametrize("type_", POD_BEARING_KINDS)
def test_every_pod_bearing_kind_is_checked(session, gateway, type_):
    r = as_kind(gateway, type_)
    findings = check(session, r)
    assert mandatory(findings) == [], [(f.policy, f.message) for f in findings]
    kind = type_.rsplit(":", 1)[-1]
    pod_spec_of(r)["containers"][0]["securityContext"]["privileged"] = True
    pod_spec_of(r)["automountServiceAccountToken"] = True
    findings = check(session, r)
    assert_violation(
        findings, "pod-security-restricted", f"{kind} '{r.name}'", "container 'nginx'", "privileged is true", urn=r.urn
    )
    assert_violation(findings, "pod-service-account-token", f"{kind} '{r.name}'", "automountServiceAccountToken")
    digests = only(findings, "images-by-digest")
    assert digests and {f.level for f in digests} == {"advisory"} and "container 'nginx'" in digests[0].message


def test_the_issues_job_made_compliant_passes(session):
    spec = harden(issue_job_spec())
    spec["containers"][0]["ports"] = [{"containerPort": 8080}]
    spec["containers"][0]["image"] += DIGEST
    assert check(session, raw_job(spec)) == []


def test_the_issues_job_names_resource_container_and_field(session):
    findings = only(check(session, raw_job(issue_job_spec())), "pod-security-restricted")
    assert findings and all("Job 'debug': " in f.message for f in findings), [f.message for f in findings]
    container = [f.message for f in findings if "container 'tool'" in f.message]
    assert any("allowPrivilegeEscalation" in m and "set it" in m for m in container)
    assert any("capabilities.drop" in m and "[ALL]" in m for m in container)
    assert any("hostPort 8080" in m and "remove hostPort" in m for m in container)
    assert any("pod securityContext.seccompProfile is Unconfined" in f.message for f in findings)


@pytest.mark.parametrize(
    ("change", "fragments"),
    [
        (lambda p: p.update(hostIPC=True), ("hostIPC is true",)),
        (lambda p: p.update(hostNetwork=True), ("hostNetwork is true",)),
        (lambda p: p.update(hostPID=True), ("hostPID is true",)),
        (lambda p: p["containers"][0]["securityContext"].update(privileged=True), ("privileged is true",)),
        (
            lambda p: p["containers"][0]["securityContext"].update(allowPrivilegeEscalation=True),
            ("container 'nginx'", "allowPrivilegeEscalation must be false"),
        ),
        (
            lambda p: p["containers"][0]["securityContext"].pop("allowPrivilegeEscalation"),
            ("unset counts as true",),
        ),
        (
            lambda p: p["containers"][0]["securityContext"]["capabilities"].update(drop=["NET_RAW"]),
            ("capabilities.drop must contain ALL",),
        ),
        (
            lambda p: p["containers"][0]["securityContext"]["capabilities"].update(
                add=["NET_BIND_SERVICE", "SYS_TIME"]
            ),
            ("capabilities.add ['SYS_TIME']", "only NET_BIND_SERVICE"),
        ),
        (  # the container's own Unconfined wins over the pod's RuntimeDefault
            lambda p: p["containers"][0]["securityContext"].update(seccompProfile={"type": "Unconfined"}),
            ("container 'nginx'", "securityContext.seccompProfile.type is Unconfined"),
        ),
        (
            lambda p: p["securityContext"].update(seccompProfile={"type": "Unconfined"}),
            ("pod securityContext.seccompProfile is Unconfined",),
        ),
        (
            lambda p: [
                p["securityContext"].pop("seccompProfile"),
                p["containers"][0]["securityContext"].pop("seccompProfile"),
            ],
            ("seccompProfile.type is unset",),
        ),
        (  # a container's false overrides the pod's true
            lambda p: p["containers"][0]["securityContext"].update(runAsNonRoot=False),
            ("container 'nginx'", "securityContext.runAsNonRoot is false"),
        ),
        (
            lambda p: [
                p["securityContext"].pop("runAsNonRoot"),
                p["containers"][0]["securityContext"].pop("runAsNonRoot"),
            ],
            ("runAsNonRoot must be true",),
        ),
        (lambda p: p["securityContext"].update(runAsUser=0), ("pod securityContext.runAsUser is 0",)),
        (
            lambda p: p["containers"][0]["securityContext"].update(runAsUser=0),
            ("container 'nginx'", "securityContext.runAsUser is 0"),
        ),
        (
            lambda p: p["containers"][0]["ports"].append({"containerPort": 80, "hostPort": 80}),
            ("hostPort 80",),
        ),
        (
            lambda p: p["volumes"].append({"name": "docker", "hostPath": {"path": "/var/run/docker.sock"}}),
            ("volume 'docker' is of type hostPath",),
        ),
        (
            lambda p: p["volumes"].append({"name": "share", "nfs": {"server": "nas", "path": "/"}}),
            ("volume 'share' is of type nfs",),
        ),
        (  # an ephemeral (debug) container is a container too
            lambda p: p.update(ephemeralContainers=[{"name": "debugger", "image": "busybox:1.36"}]),
            ("container 'debugger'", "allowPrivilegeEscalation", "capabilities.drop"),
        ),
        (  # and so is an init container
            lambda p: p.update(initContainers=[{"name": "setup", "image": "busybox:1.36", "securityContext": {}}]),
            ("container 'setup'", "allowPrivilegeEscalation"),
        ),
    ],
)
def test_each_restricted_rule_on_a_deployment(session, gateway, change, fragments):
    r = as_kind(gateway, DEPLOYMENT)
    change(pod_spec_of(r))
    assert_violation(check(session, r), "pod-security-restricted", f"Deployment '{r.name}'", *fragments)


@pytest.mark.parametrize(
    "change",
    [
        lambda p: p["containers"][0]["securityContext"]["capabilities"].update(add=["NET_BIND_SERVICE"]),
        lambda p: p["securityContext"].update(seccompProfile={"type": "Localhost", "localhostProfile": "fleet.json"}),
        # seccomp and non-root set on the container alone, or on the pod alone
        lambda p: [p["securityContext"].pop("seccompProfile"), p["securityContext"].pop("runAsNonRoot")],
        lambda p: [p["containers"][0]["securityContext"].pop(k) for k in ("seccompProfile", "runAsNonRoot")],
        lambda p: p["volumes"].extend(
            [
                {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
                {"name": "info", "downwardAPI": {"items": []}},
                {"name": "token", "projected": {"sources": []}},
                {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
                {"name": "csi", "csi": {"driver": "secrets-store.csi.k8s.io"}},
            ]
        ),
        lambda p: p.update(hostNetwork=False, hostPID=False, hostIPC=False),
        lambda p: p.update(automountServiceAccountToken=None, serviceAccountName="gateway-reader"),
    ],
)
def test_what_restricted_allows(session, gateway, change):
    r = as_kind(gateway, DEPLOYMENT)
    change(pod_spec_of(r))
    assert mandatory(check(session, r)) == []


def test_service_account_token_of_the_default_account(session, gateway):
    r = as_kind(gateway, DEPLOYMENT)
    del pod_spec_of(r)["automountServiceAccountToken"]  # unset mounts the token
    assert_violation(check(session, r), "pod-service-account-token", "default service account")
    pod_spec_of(r)["serviceAccountName"] = "default"  # naming the default account is no exception
    assert_violation(check(session, r), "pod-service-account-token", "automountServiceAccountToken: false")
    pod_spec_of(r)["serviceAccountName"] = "federation-reader"
    assert not only(check(session, r), "pod-service-account-token")


def test_root_benchmarks_keep_every_other_rule(plans, session):
    """A needs_root benchmark may run as root in benchmarks-root, but privilege, escalation, capabilities, seccomp and
    host access are still refused; a non-root benchmark may run in benchmarks-root too."""
    job = reg(plans, "fix-eks", JOB, "-t4")
    job.inputs["metadata"]["namespace"] = "benchmarks-root"
    assert not only(check(session, job), "pod-security-restricted")  # non-root in benchmarks-root: fine
    job.inputs["spec"]["template"]["metadata"]["labels"]["workload"] = "uploader"
    pod(job)["securityContext"] = {"runAsUser": 0, "runAsNonRoot": False, "seccompProfile": {"type": "RuntimeDefault"}}
    for c in pod(job)["containers"]:
        c["securityContext"].pop("runAsNonRoot", None)
        c["securityContext"].pop("runAsUser", None)
    assert not only(check(session, job), "pod-security-restricted")  # root, allowed
    c = pod(job)["containers"][0]
    c["securityContext"].update(privileged=True, allowPrivilegeEscalation=True)
    c["securityContext"]["capabilities"]["add"] = ["SYS_ADMIN"]
    pod(job)["hostPID"] = True
    findings = only(check(session, job), "pod-security-restricted")
    text = "\n".join(f.message for f in findings)
    for fragment in ("privileged is true", "allowPrivilegeEscalation", "['SYS_ADMIN']", "hostPID"):
        assert fragment in text
    assert "runAsNonRoot" not in text and "runAsUser" not in text


def test_namespace_levels_of_the_benchmark_namespaces(plans, session):
    (bench,) = [r for r in plans["fix-gke"].registrations if r.type == NAMESPACE and r.name.endswith("benchmarks")]
    root = copy.deepcopy(bench)
    root.inputs["metadata"]["name"] = "benchmarks-root"
    labels = root.inputs["metadata"]["labels"]
    for level in ("baseline", "restricted"):
        labels["pod-security.kubernetes.io/enforce"] = level
        assert not only(check(session, root), "namespace-pod-security"), level
    labels["pod-security.kubernetes.io/enforce"] = "privileged"
    root.inputs["metadata"]["annotations"] = {"gpu-fleet.io/pod-security-exception": "it is easier"}
    assert_violation(check(session, root), "namespace-pod-security", "'benchmarks-root'", "restricted or baseline")
    labels["pod-security.kubernetes.io/enforce"] = "root"  # not a Pod Security level
    assert_violation(check(session, root), "namespace-pod-security", "has no Pod Security level")


def test_a_privileged_namespace_needs_a_reason(plans, session):
    (agents,) = [r for r in plans["fix-gke"].registrations if r.type == NAMESPACE and r.name.endswith("node-agents")]
    reason = agents.inputs["metadata"]["annotations"]["gpu-fleet.io/pod-security-exception"]
    assert reason.strip() and not only(check(session, agents), "namespace-pod-security")
    tools = copy.deepcopy(agents)
    tools.inputs["metadata"]["name"] = "tools"
    tools.inputs["metadata"]["annotations"] = {"gpu-fleet.io/pod-security-exception": "  "}
    assert_violation(check(session, tools), "namespace-pod-security", "'tools'", "gpu-fleet.io/pod-security-exception")
    tools.inputs["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] = "baseline"
    assert not only(check(session, tools), "namespace-pod-security")


def tools_stack(policy_spec: dict[str, Any] | None, namespace: str = "tools") -> list[Registration]:
    """A namespace `tools` and (unless None) one NetworkPolicy with ``policy_spec`` in ``namespace``."""
    regs = [
        raw(
            NAMESPACE,
            "tools",
            {"metadata": {"name": "tools", "labels": {"pod-security.kubernetes.io/enforce": "restricted"}}},
        )
    ]
    if policy_spec is not None:
        regs.append(
            raw(
                NETWORK_POLICY,
                "tools-deny",
                {"metadata": {"name": "deny", "namespace": namespace}, "spec": policy_spec},
            )
        )
    return regs


@pytest.mark.parametrize(
    "spec",
    [
        {"podSelector": {}, "policyTypes": ["Ingress"]},
        {"podSelector": {"matchLabels": {}}, "policyTypes": ["Ingress", "Egress"], "ingress": []},
        {"policyTypes": ["Ingress"]},  # no podSelector: every pod
    ],
)
def test_a_default_deny_ingress_policy(session, spec):
    assert not only(session.analyze_registrations(tools_stack(spec)), "namespace-default-deny-ingress")


@pytest.mark.parametrize(
    ("spec", "namespace"),
    [
        (None, "tools"),  # none at all
        ({"podSelector": {}, "policyTypes": ["Ingress"]}, "default"),  # in another namespace
        ({"podSelector": {"matchLabels": {"app": "web"}}, "policyTypes": ["Ingress"]}, "tools"),  # some pods only
        (
            {"podSelector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]}, "policyTypes": ["Ingress"]},
            "tools",
        ),
        ({"podSelector": {}, "policyTypes": ["Egress"]}, "tools"),  # egress only
        ({"podSelector": {}, "policyTypes": ["Ingress"], "ingress": [{}]}, "tools"),  # allows everything
    ],
)
def test_no_default_deny_ingress(session, spec, namespace):
    findings = session.analyze_registrations(tools_stack(spec, namespace))
    assert_violation(findings, "namespace-default-deny-ingress", "namespace 'tools'", "podSelector {}", "Ingress")


HEX = "0123456789abcdef" * 4


@pytest.mark.parametrize(
    ("image", "pinned"),
    [
        (f"ghcr.io/gpu-fleet/nginx-unprivileged:1.27.3-alpine@sha256:{HEX}", True),
        (f"ghcr.io/gpu-fleet/nginx-unprivileged@sha256:{HEX}", True),
        (f"registry.local:5000/fleet/tool:1.0@sha256:{HEX}", True),
        ("ghcr.io/gpu-fleet/nginx-unprivileged:1.27.3-alpine", False),
        ("ghcr.io/gpu-fleet/nginx-unprivileged@sha256:1234", False),  # not 64 hex digits
        (f"ghcr.io/gpu-fleet/nginx-unprivileged@sha256:{HEX.upper()}", False),
        (f"ghcr.io/gpu-fleet/nginx-unprivileged@sha512:{HEX}{HEX}", False),
        (f"@sha256:{HEX}", False),  # no name
        (f"ghcr.io/gpu-fleet/nginx-unprivileged:1.27.3-alpine@sha256:{HEX} ", False),
    ],
)
def test_images_by_digest_form(session, gateway, image, pinned):
    for type_ in (DEPLOYMENT, POD, CRONJOB):
        r = as_kind(gateway, type_)
        pod_spec_of(r)["containers"][0]["image"] = image
        found = only(check(session, r), "images-by-digest")
        if pinned:
            assert found == [], type_
            continue
        assert found and {f.level for f in found} == {"advisory"}, type_
        for fragment in ("container 'nginx'", repr(image), "python -m fleet images", "images.yaml", "workload.yaml"):
            assert fragment in found[0].message, (fragment, found[0].message)
