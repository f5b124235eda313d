"""Inside a cluster: the namespaces' Pod Security levels, the pods' security contexts and the NetworkPolicies, under
the mock engine on the tests' fixture fleet and workloads."""

from __future__ import annotations

import ipaddress
from typing import Any

import kubernetes_validate
import pytest

from components.kubernetes.benchmark import HOME_DIR
from components.kubernetes.gateway import GATEWAY_PORT
from components.kubernetes.network_policy import CREDENTIAL_ADDRESSES, dns_egress
from components.kubernetes.prometheus_stack import RELEASE
from fleet.model.access import can_i, preview_rights
from fleet.model.access.rbac import Rbac, Request, User
from fleet.model.core import pod_contract
from fleet.model.loader import load_fleet
from fleet.tools.engine.plan import StackPlan, plan_fleet
from tests.conftest import FIXTURES
from tests.helpers import by_type, write_policy

FIXTURE_WORKLOADS = FIXTURES / "fleet" / "workloads"
CLUSTER_DNS_ONLY = {
    "to": [
        {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
            "podSelector": {
                "matchExpressions": [{"key": "k8s-app", "operator": "In", "values": ["kube-dns", "coredns"]}]
            },
        }
    ],
    "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
}
NAMESPACE = "kubernetes:core/v1:Namespace"
NETWORK_POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
JOB = "kubernetes:batch/v1:Job"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
# A leaf and a central; the uploader fixture workload runs only as root and uploads over HTTPS.
POLICY = """
clusters:
  gcp:
    gke-central:
      zone: europe-west4-a
      central: true
      gpus: [t4]
    gke-leaf:
      zone: europe-west4-b
      gpus: [t4, l4]
workloads:
  tracker: all
  uploader: {gpus: [l4]}
"""
GCP = {"gcp:project": "proj-1"}


@pytest.fixture(scope="module")
def plans(tmp_path_factory) -> dict[str, StackPlan]:
    policy, stacks = write_policy(tmp_path_factory.mktemp("fleet"), POLICY, {"gke-central": GCP, "gke-leaf": GCP})
    fleet = load_fleet(policy, FIXTURE_WORKLOADS)
    return {p.stack: p for p in plan_fleet(fleet, policy, stacks_dir=stacks, workloads_dir=FIXTURE_WORKLOADS)}


@pytest.fixture(scope="module")
def leaf(plans) -> StackPlan:
    return plans["gke-leaf"]


@pytest.fixture(scope="module")
def central(plans) -> StackPlan:
    return plans["gke-central"]


def namespaces(plan: StackPlan) -> dict[str, dict[str, Any]]:
    return {r.inputs["metadata"]["name"]: r.inputs["metadata"] for r in by_type(plan, NAMESPACE)}


def policies(plan: StackPlan, namespace: str) -> dict[str, dict[str, Any]]:
    return {
        r.inputs["metadata"]["name"]: r.inputs["spec"]
        for r in by_type(plan, NETWORK_POLICY)
        if r.inputs["metadata"]["namespace"] == namespace
    }


def jobs(plan: StackPlan, workload: str) -> list[dict[str, Any]]:
    return [r.inputs for r in by_type(plan, JOB) if r.inputs["metadata"]["labels"]["workload"] == workload]


def test_namespaces_enforce_their_pod_security_level(leaf, central):
    for plan, expected in (
        (leaf, {"monitoring": "restricted", "benchmarks": "restricted", "benchmarks-root": "baseline"}),
        (central, {"monitoring": "restricted", "benchmarks": "restricted"}),
    ):
        found = namespaces(plan)
        assert found["node-agents"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
        assert "dcgm-exporter" in found["node-agents"]["annotations"]["gpu-fleet.io/pod-security-exception"]
        for ns, level in expected.items():
            labels = found[ns]["labels"]
            assert labels["pod-security.kubernetes.io/enforce"] == level, ns
            assert labels["pod-security.kubernetes.io/warn"] == "restricted"
    # the root namespace exists only where a benchmark needs it (uploader is placed on l4 only, on the leaf)
    assert "benchmarks-root" not in namespaces(central)


def test_every_fleet_namespace_denies_ingress_by_default(leaf, central):
    for plan in (leaf, central):
        for ns in namespaces(plan):
            deny = policies(plan, ns)["default-deny-ingress"]
            assert deny == {"podSelector": {}, "policyTypes": ["Ingress"]}, ns


def test_every_fleet_namespace_denies_egress_by_default_and_no_pod_reaches_a_credentials_address(leaf, central):
    """Issue 44: monitoring, node-agents, kubeflow-system, ci-runners and kueue-system had no egress policy."""
    for plan in (leaf, central):
        for ns in namespaces(plan):
            deny = policies(plan, ns)["default-deny-egress"]
            assert deny["podSelector"] == {} and deny["policyTypes"] == ["Egress"], ns
            rules = [rule for spec in policies(plan, ns).values() for rule in spec.get("egress", [])]
            assert rules and all("to" in rule or rule == dns_egress() for rule in rules), ns  # no rule open to all
            for rule in rules:
                for peer in rule.get("to", []):
                    block = peer.get("ipBlock")
                    if block is None:
                        continue
                    network = ipaddress.ip_network(block["cidr"])
                    excepted = [ipaddress.ip_network(e) for e in block.get("except", [])]
                    for address in CREDENTIAL_ADDRESSES:
                        credentials = ipaddress.ip_network(address)
                        if credentials.subnet_of(network):
                            assert any(credentials.subnet_of(e) for e in excepted), (ns, block)
    # the node agents and the controllers reach the API server and DNS only
    assert [r.get("ports") for r in policies(leaf, "node-agents")["default-deny-egress"]["egress"][1:]] == [
        [{"protocol": "TCP", "port": 443}, {"protocol": "TCP", "port": 6443}]
    ]


def test_only_the_gateway_is_open_to_the_outside_and_only_on_its_port(leaf, central):
    monitoring = policies(leaf, "monitoring")
    gateway = monitoring["allow-federation-gateway"]
    assert gateway["podSelector"]["matchLabels"]["app.kubernetes.io/name"] == "federation-gateway"
    assert gateway["ingress"] == [{"ports": [{"protocol": "TCP", "port": GATEWAY_PORT}]}]
    # the rest of the monitoring namespace admits only its own pods (and the API server at the webhook)
    assert monitoring["allow-same-namespace"]["ingress"] == [{"from": [{"podSelector": {}}]}]
    open_rules = [name for name, spec in monitoring.items() for rule in spec.get("ingress", []) if "from" not in rule]
    assert sorted(open_rules) == ["allow-federation-gateway", "allow-operator-webhook"]
    assert "allow-federation-gateway" not in policies(central, "monitoring")  # the central has no gateway


def test_benchmarks_are_scraped_only_by_prometheus_and_reach_only_what_they_declare(leaf):
    for ns in ("benchmarks", "benchmarks-root"):
        found = policies(leaf, ns)
        scrape = found["allow-prometheus"]["ingress"]
        assert scrape[0]["from"][0]["namespaceSelector"] == {
            "matchLabels": {"kubernetes.io/metadata.name": "monitoring"}
        }
        assert scrape[0]["ports"] == [{"protocol": "TCP", "port": pod_contract.METRICS_PORT}]
        egress = found["default-deny-egress"]
        assert egress["egress"] == [CLUSTER_DNS_ONLY]  # DNS to the cluster's DNS pods, not port 53 anywhere
    uploader = policies(leaf, "benchmarks-root")["egress-uploader"]
    assert uploader["podSelector"]["matchLabels"]["workload"] == "uploader"
    assert uploader["egress"][0] == CLUSTER_DNS_ONLY
    https = uploader["egress"][1]
    # every cloud's credentials endpoints stay out: instance metadata, EKS/ECS container credentials, Azure WireServer
    assert https["to"] == [
        {"ipBlock": {"cidr": "0.0.0.0/0", "except": ["169.254.169.254/32", "169.254.170.2/32", "168.63.129.16/32"]}}
    ]
    assert https["ports"] == [{"protocol": "TCP", "port": 443}]
    assert not any(name.startswith("egress-") for name in policies(leaf, "benchmarks"))  # tracker declares none


def test_ci_jobs_reach_dns_and_public_https_only(tmp_path):
    policy = POLICY.replace("workloads:", "runners:\n  clusters:\n    gke-leaf: [t4]\nworkloads:")
    policy_file, stacks = write_policy(tmp_path, policy, {"gke-central": GCP, "gke-leaf": GCP})
    fleet = load_fleet(policy_file, FIXTURE_WORKLOADS)
    (plan,) = [
        p
        for p in plan_fleet(fleet, policy_file, stacks_dir=stacks, workloads_dir=FIXTURE_WORKLOADS)
        if p.stack == "gke-leaf"
    ]
    egress = policies(plan, pod_contract.CI_JOB_NAMESPACE)["default-deny-egress"]
    assert egress["podSelector"] == {} and egress["policyTypes"] == ["Egress"]
    dns, https = egress["egress"]
    assert dns == CLUSTER_DNS_ONLY
    assert https["ports"] == [{"protocol": "TCP", "port": 443}]
    (block,) = https["to"]
    excluded = [ipaddress.ip_network(c) for c in block["ipBlock"]["except"]]
    assert block["ipBlock"]["cidr"] == "0.0.0.0/0"
    for address in (
        "169.254.169.254",
        "169.254.170.2",
        "168.63.129.16",
        "10.4.0.1",
        "172.20.0.10",
        "192.168.1.1",
        "100.64.0.1",
    ):  # credentials endpoints; pod, service and node ranges of the clouds
        assert any(ipaddress.ip_address(address) in net for net in excluded), address
    assert not any(ipaddress.ip_address("188.184.104.2") in net for net in excluded)  # a public GitLab stays open


def _containers(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return [*pod.get("initContainers", []), *pod["containers"]]


def test_benchmark_pods_run_restricted_unless_their_workload_needs_root(leaf):
    for job in jobs(leaf, "tracker"):
        assert job["metadata"]["namespace"] == "benchmarks"
        pod = job["spec"]["template"]["spec"]
        assert pod["automountServiceAccountToken"] is False
        assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] == 1000
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        for c in _containers(pod):
            assert c["securityContext"]["allowPrivilegeEscalation"] is False, c["name"]
            assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}, c["name"]
        env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
        assert env["HOME"] == HOME_DIR  # writable for a user the image may not know
    (upload,) = jobs(leaf, "uploader")
    assert upload["metadata"]["namespace"] == "benchmarks-root"
    pod = upload["spec"]["template"]["spec"]
    assert "runAsNonRoot" not in pod["securityContext"] and "runAsUser" not in pod["securityContext"]
    for c in _containers(pod):
        assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}, c["name"]
    # its config maps and credentials live beside it, and Prometheus still scrapes it
    cms = [r.inputs["metadata"] for r in by_type(leaf, "kubernetes:core/v1:ConfigMap")]
    assert any(m["namespace"] == "benchmarks-root" and "uploader" in m["name"] for m in cms)
    (monitor,) = [r.inputs for r in by_type(leaf, "kubernetes:monitoring.coreos.com/v1:PodMonitor")]
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": ["benchmarks", "benchmarks-root"]}


def test_the_gateway_runs_restricted_without_a_token(leaf):
    (gateway,) = [r.inputs for r in by_type(leaf, DEPLOYMENT) if r.inputs["metadata"]["name"] == "federation-gateway"]
    pod = gateway["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    assert pod["securityContext"]["runAsUser"] == 101 and pod["securityContext"]["runAsNonRoot"] is True
    (nginx,) = pod["containers"]
    assert nginx["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "readOnlyRootFilesystem": True,
    }
    assert {"name": "tmp", "mountPath": "/tmp"} in nginx["volumeMounts"]


PREVIEW_POLICY = """
clusters:
  gcp:
    gke-p:
      zone: europe-west4-a
      central: true
      gpus: [t4]
  aws:
    eks-p:
      region: eu-west-1
      gpus: [t4]
"""


@pytest.fixture(scope="module")
def preview_plans(tmp_path_factory) -> dict[str, StackPlan]:
    configs = {
        "gke-p": {**GCP, "gpu-fleet:previewPrincipal": "gpu-fleet-preview@proj-1.iam.gserviceaccount.com"},
        "eks-p": {"gpu-fleet:previewPrincipal": "arn:aws:iam::123456789012:role/gpu-fleet-preview"},
    }
    policy, stacks = write_policy(tmp_path_factory.mktemp("preview"), PREVIEW_POLICY, configs)
    fleet = load_fleet(policy, FIXTURE_WORKLOADS)
    return {p.stack: p for p in plan_fleet(fleet, policy, stacks_dir=stacks, workloads_dir=FIXTURE_WORKLOADS)}


def _kind(plan: StackPlan, kind: str) -> list[dict[str, Any]]:
    return [r.inputs for r in plan.registrations if r.type.endswith(f":{kind}")]


def _not_the_charts(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Leave out the kube-prometheus-stack release's roles, which the fleet declares for the chart
    (components/kubernetes/operator_rbac.py)."""
    return [o for o in objects if not o["metadata"]["name"].startswith(f"{RELEASE}-")]


def test_the_preview_identity_may_only_dry_run(preview_plans):
    for stack, user in (
        ("gke-p", "gpu-fleet-preview@proj-1.iam.gserviceaccount.com"),
        ("eks-p", "gpu-fleet-previewer"),
    ):
        plan = preview_plans[stack]
        assert plan.exports["preview_user"] == user  # what `kubectl auth can-i --as` asks as (docs/security.md)
        subjects = [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]
        (binding,) = _not_the_charts(_kind(plan, "ClusterRoleBinding"))
        assert binding["subjects"] == subjects
        roles = {r["metadata"]["name"]: r for r in _not_the_charts(_kind(plan, "ClusterRole"))}
        assert set(roles) == {preview_rights.NAME, preview_rights.NAMESPACED_NAME}
        assert binding["roleRef"]["name"] == preview_rights.NAME
        # cluster-wide, only the cluster-scoped kinds; the namespaced ones in the fleet's namespaces, one by one
        cluster_wide = {r for rule in roles[preview_rights.NAME]["rules"] for r in rule["resources"]}
        assert cluster_wide == {r for rs in preview_rights.CLUSTER_SCOPED.values() for r in rs}
        bindings = _not_the_charts(_kind(plan, "RoleBinding"))
        assert {b["metadata"]["namespace"] for b in bindings} == {
            n["metadata"]["name"] for n in _kind(plan, "Namespace")
        }
        assert all(b["roleRef"]["name"] == preview_rights.NAMESPACED_NAME for b in bindings)
        assert all(b["subjects"] == subjects for b in bindings)
        rules = [rule for role in roles.values() for rule in role["rules"]]
        for rule in rules:  # every group, resource and verb named
            assert "*" not in [*rule["apiGroups"], *rule["resources"], *rule["verbs"]], rule
        groups = {g for rule in rules for g in rule["apiGroups"]}
        # admission policies do not guard their own configuration: the preview identity may not touch it
        assert "admissionregistration.k8s.io" not in groups and "rbac.authorization.k8s.io" not in groups
        (policy,) = _kind(plan, "ValidatingAdmissionPolicy")
        assert policy["spec"]["matchConditions"] == [
            {"name": "preview-identity", "expression": f'request.userInfo.username == "{user}"'}
        ]
        assert policy["spec"]["validations"][0]["expression"] == "has(request.dryRun) && request.dryRun == true"
        assert policy["spec"]["failurePolicy"] == "Fail"
        # every write of every kind, "*/*" alone: the real API server refused ["*", "*/*"] (found by the real tier;
        # kubernetes v1.36.3 admissionregistration validation "if '*/*' is present, must not specify other resources")
        (rule,) = policy["spec"]["matchConstraints"]["resourceRules"]
        assert rule["resources"] == ["*/*"] and rule["apiGroups"] == ["*"] and rule["apiVersions"] == ["*"]
        (policy_binding,) = _kind(plan, "ValidatingAdmissionPolicyBinding")
        assert policy_binding["spec"]["validationActions"] == ["Deny"]
        for r in plan.registrations:  # valid objects of the Kubernetes 1.33 API (VAP is v1 from 1.30)
            if r.type.endswith(
                (":ClusterRole", ":ClusterRoleBinding", ":RoleBinding", "AdmissionPolicy", "AdmissionPolicyBinding")
            ):
                _, api_version, kind = r.type.split(":")
                kubernetes_validate.validate(
                    {**r.inputs, "apiVersion": api_version, "kind": kind}, "1.33.0", strict=True
                )
    # the EKS preview role reaches the cluster through its own access entry, under that user name
    (entry,) = _kind(preview_plans["eks-p"], "AccessEntry")
    assert entry["principalArn"] == "arn:aws:iam::123456789012:role/gpu-fleet-preview"
    assert entry["userName"] == "gpu-fleet-previewer" and entry["type"] == "STANDARD"


def test_no_preview_access_unless_the_stack_names_the_identity(leaf):
    assert "preview_user" not in leaf.exports
    assert not _kind(leaf, "ValidatingAdmissionPolicy") and not _not_the_charts(_kind(leaf, "ClusterRoleBinding"))


def _rendered_rbac(plan: StackPlan) -> Rbac:
    """Every Role, ClusterRole and binding of the plan, as the provider would send them."""
    return Rbac.of(
        (r.type.rsplit(":", 1)[-1], r.plain_inputs())
        for r in plan.registrations
        if r.type.startswith("kubernetes:rbac.authorization.k8s.io/")
    )


@pytest.mark.parametrize("request_", preview_rights.REFUSED, ids=lambda r: r.describe())
def test_the_preview_identity_is_refused(preview_plans, request_):
    for stack, user in (
        ("gke-p", "gpu-fleet-preview@proj-1.iam.gserviceaccount.com"),
        ("eks-p", "gpu-fleet-previewer"),
    ):
        rbac = _rendered_rbac(preview_plans[stack])
        assert rbac.why_allowed(User(user), request_) is None, (stack, request_.describe())


def test_the_preview_identity_may_dry_run_what_the_fleet_registers_and_nothing_else(preview_plans):
    """Every kind the fixture fleet registers itself (one cluster per cloud, sweeps, runners) is named in the
    previewer's role, and the role names nothing the fleet does not register."""
    fixture = FIXTURES / "fleet"
    fleet = load_fleet(fixture / "fleet.yaml", fixture / "workloads")
    plans = plan_fleet(
        fleet, fixture / "fleet.yaml", stacks_dir=fixture / "stacks", workloads_dir=fixture / "workloads"
    )
    registered = {
        r.type
        for plan in plans
        for r in plan.registrations
        if r.type.startswith("kubernetes:")
        and r.type.rsplit(":", 1)[-1] not in preview_rights.CLIENT_SIDE_KINDS
        and "admissionregistration" not in r.type
        and r.type != "kubernetes:helm.sh/v3:Release"  # rendered client-side (preview_rights' docstring)
    }
    user = User("gpu-fleet-previewer")
    rbac = _rendered_rbac(preview_plans["eks-p"])
    wanted = set()
    for type_ in registered:
        _, api_version, kind = type_.split(":")
        group = api_version.rsplit("/", 1)[0] if "/" in api_version else ""
        group = "" if group == "core" else group
        resource = {"NetworkPolicy": "networkpolicies"}.get(kind, kind.lower() + "s")  # the API's plurals
        wanted.add((group, resource))
        for verb in preview_rights.VERBS:
            assert rbac.allows(user, Request(verb, resource, group, namespace="benchmarks", name="x")), (verb, type_)
    named = {(group, res) for group, resources in preview_rights.RESOURCES.items() for res in resources}
    assert named == wanted


def test_the_preview_identity_may_dry_run_each_object_where_the_stack_puts_it(preview_plans):
    """Each namespaced object a preview dry-runs is in a namespace the previewer is bound in (the fleet's own)."""
    checked = 0
    for stack, user in (
        ("gke-p", "gpu-fleet-preview@proj-1.iam.gserviceaccount.com"),
        ("eks-p", "gpu-fleet-previewer"),
    ):
        plan = preview_plans[stack]
        rbac = _rendered_rbac(plan)
        for r in plan.registrations:
            _, api_version, kind = r.type.split(":")
            group = api_version.rsplit("/", 1)[0] if "/" in api_version else ""
            group = "" if group == "core" else group
            resource = {"NetworkPolicy": "networkpolicies"}.get(kind, kind.lower() + "s")
            namespace = (r.inputs.get("metadata") or {}).get("namespace")
            if resource in preview_rights.RESOURCES.get(group, ()) and namespace:
                assert rbac.allows(User(user), Request("patch", resource, group, namespace=namespace, name="x")), (
                    stack,
                    r.name,
                )
                checked += 1
    assert checked > 10


@pytest.mark.parametrize(
    "question",
    [q for q in can_i.load() if q.user == "gpu-fleet-preview"],
    ids=lambda q: f"{q.request.describe()}={q.allowed}",
)
def test_the_preview_identity_answers_the_can_i_table(preview_plans, question):
    """fleet/model/access/can_i.yaml's preview rows, asked of each preview stack's RBAC under its own user name."""
    for stack, user in (
        ("gke-p", "gpu-fleet-preview@proj-1.iam.gserviceaccount.com"),
        ("eks-p", "gpu-fleet-previewer"),
    ):
        assert _rendered_rbac(preview_plans[stack]).allows(User(user), question.request) is question.allowed, stack
