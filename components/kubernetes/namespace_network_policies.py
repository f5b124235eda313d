"""Who may reach each fleet namespace: a default-deny of ingress in every one, then what the fleet uses (the
helpers that write each NetworkPolicy are components/kubernetes/network_policy.py)."""

from __future__ import annotations

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
from fleet.model import pod_contract


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
