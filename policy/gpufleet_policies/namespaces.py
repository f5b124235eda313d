"""Namespaces: each carries a Pod Security level (privileged only with a reason) and denies ingress by default."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from typing import Any

from pulumi_policy import ReportViolation, ResourceValidationArgs, StackValidationArgs

from fleet.model.core import pod_contract
from fleet.model.core.pod_contract import CREDENTIAL_ADDRESSES

from .registry import resource_policy, stack_policy
from .resources import plain

LEVEL_LABEL = f"{pod_contract.POD_SECURITY_LABEL_PREFIX}/enforce"


@resource_policy(
    "namespace-pod-security",
    "Namespaces carry a Pod Security level: restricted for benchmarks, privileged only with a stated reason.",
)
def _validate_namespace_level(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type != "kubernetes:core/v1:Namespace":
        return
    metadata = plain(args.props).get("metadata") or {}
    name = metadata.get("name") or args.name
    level = (metadata.get("labels") or {}).get(LEVEL_LABEL)
    if level not in ("restricted", "baseline", "privileged"):
        report(f"namespace {name!r} has no Pod Security level: label it {LEVEL_LABEL}: restricted (or baseline)")
        return
    wanted = {
        pod_contract.BENCHMARK_NAMESPACE: ("restricted",),
        pod_contract.ROOT_BENCHMARK_NAMESPACE: ("restricted", "baseline"),
    }.get(name)
    if wanted and level not in wanted:
        report(f"namespace {name!r} enforces {level!r}: it must enforce {' or '.join(wanted)}")
    reason = ((metadata.get("annotations") or {}).get(pod_contract.POD_SECURITY_EXCEPTION) or "").strip()
    if level == "privileged" and not reason:
        report(
            f"namespace {name!r} enforces 'privileged' without saying why: annotate it "
            f"{pod_contract.POD_SECURITY_EXCEPTION} with "
            "the pods that need it, or enforce restricted"
        )


def _is_default_deny_ingress(props: dict[str, Any]) -> bool:
    spec = props.get("spec") or {}
    selector = spec.get("podSelector") or {}
    return (
        not selector.get("matchLabels")
        and not selector.get("matchExpressions")
        and "Ingress" in (spec.get("policyTypes") or [])
        and not spec.get("ingress")
    )


def _namespaces_without(
    args: StackValidationArgs,
    is_default: Callable[[dict[str, Any]], bool],
    visit: Callable[[dict[str, Any]], None] | None = None,
) -> list[str]:
    """The namespaces the stack creates that no NetworkPolicy recognised by ``is_default`` covers, sorted; ``visit``
    sees every NetworkPolicy's properties on the way."""
    namespaces: set[str] = set()
    covered: set[str] = set()
    for r in args.resources:
        props = plain(r.props)
        metadata = props.get("metadata") or {}
        if r.resource_type == "kubernetes:core/v1:Namespace":
            namespaces.add(metadata.get("name") or r.name)
        elif r.resource_type == "kubernetes:networking.k8s.io/v1:NetworkPolicy":
            if is_default(props):
                covered.add(metadata.get("namespace") or "")
            if visit is not None:
                visit(props)
    return sorted(namespaces - covered)


@stack_policy(
    "namespace-default-deny-ingress",
    "Every namespace the stack creates denies ingress by default (a NetworkPolicy with an empty pod "
    "selector and no ingress rule).",
)
def _validate_default_deny(args: StackValidationArgs, report: ReportViolation) -> None:
    for ns in _namespaces_without(args, _is_default_deny_ingress):
        report(
            f"namespace {ns!r} has no default-deny ingress NetworkPolicy: add one with podSelector {{}} and "
            "policyTypes [Ingress] (components/kubernetes/network_policy.py default_deny_ingress), then allow what is "
            "needed"
        )


def _is_default_deny_egress(props: dict[str, Any]) -> bool:
    spec = props.get("spec") or {}
    return spec.get("podSelector") == {} and "Egress" in (spec.get("policyTypes") or [])


def _opens_a_credentials_address(props: dict[str, Any]) -> list[str]:
    """The ipBlocks of a NetworkPolicy's egress that contain a cloud's credentials address without excepting it."""
    found = []
    for rule in (props.get("spec") or {}).get("egress") or []:
        peers = rule.get("to")
        if not peers:  # no `to`: every address, metadata included
            found.append("a rule with no `to` (every address)")
            continue
        for peer in peers:
            block = peer.get("ipBlock") or {}
            try:
                network = ipaddress.ip_network(str(block.get("cidr")))
            except ValueError:
                continue
            excepted = [ipaddress.ip_network(str(e), strict=False) for e in block.get("except") or []]
            for address in CREDENTIAL_ADDRESSES:
                credentials = ipaddress.ip_network(address)
                if credentials.subnet_of(network) and not any(
                    e.version == credentials.version and credentials.subnet_of(e) for e in excepted
                ):
                    found.append(f"{block.get('cidr')} without excepting {address}")
    return found


@stack_policy(
    "namespace-default-deny-egress",
    "Every namespace the stack creates denies egress by default (a NetworkPolicy with an empty pod selector and "
    "policyTypes Egress) and no egress rule reaches a cloud's instance metadata or credentials address.",
)
def _validate_default_deny_egress(args: StackValidationArgs, report: ReportViolation) -> None:

    def credentials(props: dict[str, Any]) -> None:
        metadata = props.get("metadata") or {}
        for problem in _opens_a_credentials_address(props):
            if "Egress" in ((props.get("spec") or {}).get("policyTypes") or []):
                report(
                    f"NetworkPolicy {metadata.get('name')!r} in {metadata.get('namespace')!r} lets pods reach a "
                    f"credentials address: {problem} (components/kubernetes/network_policy.py internet_block)"
                )

    for ns in _namespaces_without(args, _is_default_deny_egress, credentials):
        report(
            f"namespace {ns!r} has no default-deny egress NetworkPolicy: add one with podSelector {{}} and "
            "policyTypes [Egress] and its allow-list (components/kubernetes/namespace_network_policies.py "
            "egress_allow_lists)"
        )


# --- (c) the stack's benchmarks are exactly the policy's -------------------------------------------------------
