"""Helpers of the policy pack's tests: the fixture fleet, registrations taken from its plan or made by hand, and
assertions on the findings the pack returns over the analyzer protocol."""

from __future__ import annotations

import copy
from typing import Any

from fleet.tools.engine.analyzer import PolicyPackSession
from fleet.tools.engine.mock_engine import Registration
from fleet.tools.engine.plan import Finding, StackPlan
from tests.conftest import ROOT

SHIPPED = ROOT / "policy" / "fleet.yaml"
# The tests' own fleet (one cluster per cloud, its own workloads), so a team's fleet keeps this suite green.
FIXTURE = ROOT / "tests" / "fixtures" / "fleet"
POLICY, STACKS, WORKLOADS = FIXTURE / "fleet.yaml", FIXTURE / "stacks", FIXTURE / "workloads"
PLAN_ARGS = ["--policy", str(POLICY), "--stacks-dir", str(STACKS), "--workloads-dir", str(WORKLOADS)]
GKE_POOL = "gcp:container/nodePool:NodePool"
EKS_GROUP = "aws:eks/nodeGroup:NodeGroup"
AKS_POOL = "azure-native:containerservice:AgentPool"
MAGNUM_GROUP = "openstack:containerinfra/nodeGroup:NodeGroup"
JOB = "kubernetes:batch/v1:Job"
CRONJOB = "kubernetes:batch/v1:CronJob"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
NAMESPACE = "kubernetes:core/v1:Namespace"
NETWORK_POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
DIGEST = "@sha256:" + "0" * 64
POD_POLICIES = ("pod-security-restricted", "pod-service-account-token")
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
# The mandatory least-privilege policies (images-by-digest is advisory here; deploys make it mandatory).
LEAST_PRIVILEGE = (*POD_POLICIES, "namespace-pod-security", "namespace-default-deny-ingress")
RESTRICTED_CONTAINER = {
    "privileged": False,
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "runAsNonRoot": True,
    "runAsUser": 1000,
    "seccompProfile": {"type": "RuntimeDefault"},
}


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


def pod(r: Registration) -> dict[str, Any]:
    spec = r.inputs["spec"]
    if r.type == CRONJOB:
        spec = spec["jobTemplate"]["spec"]
    return spec["template"]["spec"]


def mandatory(findings: list[Finding]) -> list[Finding]:
    """The findings that stop a deploy (digests are advisory until the images workflow has recorded them)."""
    return [f for f in findings if f.level == "mandatory"]


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
