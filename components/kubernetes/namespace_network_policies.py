"""Who may reach each fleet namespace: a default-deny of ingress in every one, then what the fleet uses (the
helpers that write each NetworkPolicy are components/kubernetes/network_policy.py)."""

from __future__ import annotations

from typing import Any

import pulumi

from components.kubernetes.deployment import app_labels
from components.kubernetes.gateway import GATEWAY_NAME, GATEWAY_PORT
from components.kubernetes.namespaces import MONITORING_NS, NODE_AGENTS_NS
from components.kubernetes.network_policy import (
    NON_PUBLIC,
    allow_ingress,
    default_deny_egress,
    default_deny_ingress,
    from_namespace,
    internet_block,
    ports,
)
from components.kubernetes.prometheus_stack import OPERATOR_POD_LABELS, OPERATOR_WEBHOOK_PORT, PROMETHEUS_POD_LABELS
from components.kubernetes.runners import RUNNER_METRICS_PORT
from components.kubernetes.training import KUEUE_VISIBILITY_PORT
from components.kubernetes.training import WEBHOOK_PORT as TRAINING_WEBHOOK_PORT
from fleet.model.core import pod_contract

# the API server's ports: 443 on GKE, EKS and AKS; 6443 on Magnum (components/kubernetes/multikueue.py API_SERVER_PORTS)
API_SERVER_PORTS = (443, 6443)
# the cluster's own private ranges, where monitoring scrapes nodes and pods (never a credentials address: 169.254/16
# and Azure's WireServer are not in them)
CLUSTER_PRIVATE = ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10")
# what monitoring opens outside the private ranges: the leaves' gateways the central federates through their load
# balancers, the alert receivers (HTTPS), and nodes whose addresses are public (a Magnum site's network): the kubelet
# (10250) and node-exporter (9100, host network)
OUTSIDE_PORTS = (443, GATEWAY_PORT, 9100, 10250)


def egress_allow_lists() -> dict[str, list[dict[str, Any]]]:
    """Per fleet namespace (besides benchmarks and CI jobs, which have their own), what its pods may open beyond DNS."""
    api_server = {"to": [{"ipBlock": internet_block("0.0.0.0/0")}], "ports": ports(*API_SERVER_PORTS)}
    private = {"to": [{"ipBlock": {"cidr": cidr}} for cidr in CLUSTER_PRIVATE]}
    outside = {"to": [{"ipBlock": internet_block("0.0.0.0/0")}], "ports": ports(*OUTSIDE_PORTS)}
    return {
        MONITORING_NS: [api_server, private, outside],
        NODE_AGENTS_NS: [api_server],
        pod_contract.TRAINER_NAMESPACE: [api_server],
        pod_contract.KUEUE_NAMESPACE: [api_server],
        pod_contract.RUNNER_NAMESPACE: [api_server],  # GitLab's HTTPS (443) is the same rule
    }


def namespace_network_policies(
    cluster: str, leaf: bool, namespaces: dict[str, pulumi.Input[str]], opts: pulumi.ResourceOptions
) -> None:
    """Default-deny ingress in every fleet namespace, then what the fleet needs:

    * monitoring: its pods reach each other (Prometheus, the operator, Grafana, kube-state-metrics, the gateway);
      the API server reaches the operator's admission webhook; on a leaf, the federation gateway accepts the
      central Prometheus (its LoadBalancer admits only ``federationSourceRanges``; mTLS decides who gets in).
      Nothing else reaches the leaf Prometheus, whose lifecycle API the operator enables.
    * node agents and benchmarks: scraped by the monitoring namespace's Prometheus only;
    * benchmark pods open connections to DNS only, plus what their workload declares (``WorkloadJobs``).

    And a default-deny of egress in every fleet namespace (issue 44: no instance metadata address, no arbitrary
    host), each with its allow-list (``EGRESS``): DNS always; the API server (443 or 6443, wherever the cloud puts
    it, never a credentials address) for every controller; monitoring also the cluster's own private ranges (its
    scrapes of nodes and pods) and HTTPS to the outside (the central's federation of the leaves' gateways and the
    alert receivers); the runners the GitLab host (HTTPS); CI jobs and benchmarks as before.
    """
    monitoring = namespaces[MONITORING_NS]
    for ns, name in namespaces.items():
        default_deny_ingress(f"{cluster}-{ns}", name, opts)
    allow_ingress(
        f"{cluster}-monitoring-allow-namespace",
        "allow-same-namespace",
        monitoring,
        None,
        [{"podSelector": {}}],
        None,
        opts,
    )
    allow_ingress(
        f"{cluster}-monitoring-allow-operator-webhook",
        "allow-operator-webhook",
        monitoring,
        OPERATOR_POD_LABELS,
        None,
        ports(OPERATOR_WEBHOOK_PORT),
        opts,
    )
    if leaf:
        allow_ingress(
            f"{cluster}-monitoring-allow-federation",
            "allow-federation-gateway",
            monitoring,
            app_labels(GATEWAY_NAME),
            None,
            ports(GATEWAY_PORT),
            opts,
        )
    scraper = [from_namespace(MONITORING_NS, PROMETHEUS_POD_LABELS)]
    allow_ingress(
        f"{cluster}-node-agents-allow-prometheus",
        "allow-prometheus",
        namespaces[NODE_AGENTS_NS],
        None,
        scraper,
        None,
        opts,
    )
    if pod_contract.RUNNER_NAMESPACE in namespaces:  # the runner managers' metrics (components/kubernetes/runners.py)
        allow_ingress(
            f"{cluster}-{pod_contract.RUNNER_NAMESPACE}-allow-prometheus",
            "allow-prometheus",
            namespaces[pod_contract.RUNNER_NAMESPACE],
            {"app.kubernetes.io/part-of": pod_contract.RUNNER_PART_OF},
            scraper,
            ports(RUNNER_METRICS_PORT),
            opts,
        )
    # the API server calls the controllers' admission webhooks, and Kueue's visibility API
    for ns, numbers in (
        (pod_contract.TRAINER_NAMESPACE, (TRAINING_WEBHOOK_PORT,)),
        (pod_contract.KUEUE_NAMESPACE, (TRAINING_WEBHOOK_PORT, KUEUE_VISIBILITY_PORT)),
    ):
        if ns in namespaces:
            allow_ingress(
                f"{cluster}-{ns}-allow-webhooks",
                "allow-webhooks",
                namespaces[ns],
                None,
                None,
                ports(*numbers),
                opts,
            )
    for ns in (pod_contract.BENCHMARK_NAMESPACE, pod_contract.ROOT_BENCHMARK_NAMESPACE):
        if ns not in namespaces:
            continue
        allow_ingress(
            f"{cluster}-{ns}-allow-prometheus",
            "allow-prometheus",
            namespaces[ns],
            {"app.kubernetes.io/part-of": pod_contract.BENCHMARK_PART_OF},
            scraper,
            ports(pod_contract.METRICS_PORT),
            opts,
        )
        default_deny_egress(f"{cluster}-{ns}-default-deny-egress", namespaces[ns], opts)
    for ns, allowed in egress_allow_lists().items():
        if ns in namespaces:
            default_deny_egress(f"{cluster}-{ns}-default-deny-egress", namespaces[ns], opts, *allowed)
    if (
        pod_contract.CI_JOB_NAMESPACE in namespaces
    ):  # CI jobs: HTTPS to the internet (GitLab, registries), never inside the cluster
        https = {"to": [{"ipBlock": internet_block("0.0.0.0/0", NON_PUBLIC)}], "ports": ports(443)}
        default_deny_egress(
            f"{cluster}-{pod_contract.CI_JOB_NAMESPACE}-default-deny-egress",
            namespaces[pod_contract.CI_JOB_NAMESPACE],
            opts,
            https,
        )
