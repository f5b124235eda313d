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

from fleet.model.core import pod_contract

NAMESPACE_LABEL = "kubernetes.io/metadata.name"
METADATA_ADDRESS = ipaddress.ip_network("169.254.169.254/32")
# Where the clouds hand out credentials (fleet/model/core/pod_contract.py, with its sources): no egress rule of the
# fleet ever reaches them.
CREDENTIAL_ADDRESSES = pod_contract.CREDENTIAL_ADDRESSES
# Addresses that are never "the internet" for a pod: the private ranges (RFC 1918) and the shared address space
# (RFC 6598) the clouds take the clusters' node, pod and service ranges from, and link-local (RFC 3927, which
# holds the metadata addresses). A CI job's HTTPS egress excludes them, so it reaches neither the cluster's pods,
# services and nodes nor a credentials endpoint.
NON_PUBLIC = ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "169.254.0.0/16", "168.63.129.16/32")
DNS_PORTS = [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]
# The cluster's DNS pods: kube-system pods labelled k8s-app=kube-dns on GKE, EKS, AKS and Magnum (CoreDNS keeps the
# kube-dns label for compatibility); Canonical Kubernetes labels them k8s-app=coredns (tigera/operator#4652).
CLUSTER_DNS = {
    "namespaceSelector": {"matchLabels": {NAMESPACE_LABEL: "kube-system"}},
    "podSelector": {"matchExpressions": [{"key": "k8s-app", "operator": "In", "values": ["kube-dns", "coredns"]}]},
}


def dns_egress() -> dict[str, Any]:
    """An egress rule: DNS to the cluster's DNS pods only (not port 53 of any address)."""
    return {"to": [CLUSTER_DNS], "ports": DNS_PORTS}


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


def internet_block(cidr: str, excluded: Sequence[str] = CREDENTIAL_ADDRESSES) -> dict[str, Any]:
    """An ``ipBlock`` peer for ``cidr``, never including the ``excluded`` ranges inside it (by default the clouds'
    credentials endpoints)."""
    network = ipaddress.ip_network(cidr, strict=True)
    block: dict[str, Any] = {"cidr": str(network)}
    inside = [
        str(e)
        for e in map(ipaddress.ip_network, excluded)
        if e.version == network.version and e.subnet_of(network) and e != network  # type: ignore[arg-type]
    ]
    if inside:
        block["except"] = inside
    return block


def default_deny_egress(
    resource_name: str, namespace: pulumi.Input[str], opts: pulumi.ResourceOptions, *allowed: dict[str, Any]
) -> None:
    """The namespace's pods open connections to the cluster's DNS and to the ``allowed`` egress rules only."""
    network_policy(
        resource_name,
        "default-deny-egress",
        namespace,
        {"podSelector": {}, "policyTypes": ["Egress"], "egress": [dns_egress(), *allowed]},
        opts,
    )


def egress_allow_list(
    resource_name: str,
    name: str,
    namespace: pulumi.Input[str],
    pod_labels: Mapping[str, str],
    rules: Sequence[tuple[str, Sequence[int]]],
    opts: pulumi.ResourceOptions,
) -> None:
    """Egress of the pods with ``pod_labels``: DNS, plus each ``(cidr, ports)`` of ``rules``; nothing else."""
    egress: list[dict[str, Any]] = [dns_egress()]
    for cidr, numbers in rules:
        egress.append({"to": [{"ipBlock": internet_block(cidr)}], "ports": ports(*numbers)})
    network_policy(
        resource_name,
        name,
        namespace,
        {"podSelector": {"matchLabels": dict(pod_labels)}, "policyTypes": ["Egress"], "egress": egress},
        opts,
    )
