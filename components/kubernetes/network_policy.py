"""NetworkPolicies of the fleet's namespaces: nothing reaches a pod unless a policy here lets it.

Every fleet namespace gets a default-deny of ingress (an empty pod selector with no ingress rule selects every
pod and admits nothing: kubernetes.io/docs/concepts/services-networking/network-policies, "Default deny all
ingress traffic"); the allow rules below open only what the fleet uses. Namespaces are selected by the label
``kubernetes.io/metadata.name``, which the API server sets on every namespace (Kubernetes 1.22 and later).
Whether the policies are enforced depends on the cluster's network plugin: each cluster component turns
enforcement on where its cloud can (GKE Dataplane V2, AKS Azure network policy, EKS VPC CNI network policy,
Magnum with Calico); see docs/security.md.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

NAMESPACE_LABEL = "kubernetes.io/metadata.name"
METADATA_ADDRESS = ipaddress.ip_network("169.254.169.254/32")
DNS_PORTS = [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]


def network_policy(
    resource_name: str,
    name: str,
    namespace: pulumi.Input[str],
    spec: dict[str, Any],
    opts: pulumi.ResourceOptions,
) -> k8s.networking.v1.NetworkPolicy:
    """One NetworkPolicy ``name`` in ``namespace`` with ``spec`` (Kubernetes API field names)."""
    return k8s.networking.v1.NetworkPolicy(
        resource_name,
        metadata={"name": name, "namespace": namespace, "labels": {"app.kubernetes.io/part-of": "gpu-fleet"}},
        spec=spec,
        opts=opts,
    )


def default_deny_ingress(prefix: str, namespace: pulumi.Input[str], opts: pulumi.ResourceOptions) -> None:
    """The namespace's default: no pod accepts a connection that no other policy allows."""
    network_policy(
        f"{prefix}-default-deny-ingress",
        "default-deny-ingress",
        namespace,
        {"podSelector": {}, "policyTypes": ["Ingress"]},
        opts,
    )


def from_namespace(namespace: str, pod_labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A ``from``/``to`` peer: the pods of ``namespace`` (those with ``pod_labels``, else all of them)."""
    peer: dict[str, Any] = {"namespaceSelector": {"matchLabels": {NAMESPACE_LABEL: namespace}}}
    if pod_labels:
        peer["podSelector"] = {"matchLabels": dict(pod_labels)}
    return peer


def ports(*numbers: int | str) -> list[dict[str, Any]]:
    """TCP ports (numbers or container port names) of a rule."""
    return [{"protocol": "TCP", "port": n} for n in numbers]


def allow_ingress(
    resource_name: str,
    name: str,
    namespace: pulumi.Input[str],
    pod_labels: Mapping[str, str] | None,
    peers: Sequence[dict[str, Any]] | None,
    port_list: Sequence[dict[str, Any]] | None,
    opts: pulumi.ResourceOptions,
) -> None:
    """Let ``peers`` (None: any address) reach the pods with ``pod_labels`` (None: every pod) on ``port_list``
    (None: every port)."""
    rule: dict[str, Any] = {}
    if peers is not None:
        rule["from"] = list(peers)
    if port_list is not None:
        rule["ports"] = list(port_list)
    network_policy(
        resource_name,
        name,
        namespace,
        {
            "podSelector": {"matchLabels": dict(pod_labels)} if pod_labels else {},
            "policyTypes": ["Ingress"],
            "ingress": [rule],
        },
        opts,
    )


def internet_block(cidr: str) -> dict[str, Any]:
    """An ``ipBlock`` peer for ``cidr``, never including the cloud's instance metadata address (node credentials
    live there)."""
    network = ipaddress.ip_network(cidr, strict=True)
    block: dict[str, Any] = {"cidr": str(network)}
    if network.version == METADATA_ADDRESS.version and METADATA_ADDRESS.subnet_of(network):  # type: ignore[arg-type]
        block["except"] = [str(METADATA_ADDRESS)]
    return block


def egress_allow_list(
    resource_name: str,
    name: str,
    namespace: pulumi.Input[str],
    pod_labels: Mapping[str, str],
    rules: Sequence[tuple[str, Sequence[int]]],
    opts: pulumi.ResourceOptions,
) -> None:
    """Egress of the pods with ``pod_labels``: DNS, plus each ``(cidr, ports)`` of ``rules``; nothing else."""
    egress: list[dict[str, Any]] = [{"ports": DNS_PORTS}]
    for cidr, numbers in rules:
        egress.append({"to": [{"ipBlock": internet_block(cidr)}], "ports": ports(*numbers)})
    network_policy(
        resource_name,
        name,
        namespace,
        {"podSelector": {"matchLabels": dict(pod_labels)}, "policyTypes": ["Egress"], "egress": egress},
        opts,
    )
