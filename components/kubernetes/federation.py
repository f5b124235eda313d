"""Federation seen from the central cluster: what it pulls from every leaf (and each leaf's gateway lets through),
the pools whose probes its alerts expect, and one client Secret and scrape job per leaf, learned through the leaf's
stack outputs (the leaf's side is the gateway, components/kubernetes/gateway.py)."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.kubernetes.gateway import SECRETS_DIR, server_name
from components.settings import ComponentSettings
from fleet.model.billing import accounting
from fleet.model.core.clusters import Cluster
from fleet.model.core.fleet import Fleet
from fleet.model.monitoring import prometheus
from fleet.model.probes import probe_phases
from fleet.model.queues.settings import START_WAIT_SERIES


def federated_selectors(fleet: Fleet) -> list[str]:
    """What the central pulls from every leaf (and each leaf's gateway lets through): the metrics of every workload
    that runs in the fleet's pods, the GPU aggregates, the accounting records, when the fleet has CI runners theirs,
    when a pool is probed the probes' phases and, when the fleet has queues, the workers' Kueue wait from admission to
    running pods (fleet/model/queues/ ``START_WAIT_METRIC``)."""
    runners = any(fleet.runners.values())
    probed = any(p.probe is not None for c in fleet.clusters.values() for p in c.pools)
    extra = [*accounting.ACCOUNTING_RULES, *(prometheus.RUNNER_SERIES if runners else ())]
    extra += [probe_phases.PHASE_RECORD] if probed else []
    extra += START_WAIT_SERIES if fleet.dispatch else ()
    return prometheus.match_selectors(prometheus.workload_metrics(fleet.deployed_workloads), extra=extra)


def probe_expectations(fleet: Fleet) -> list[prometheus.ProbeExpectation]:
    """Every probed pool of the fleet, for the central's probe alerts."""
    return [
        prometheus.ProbeExpectation(
            c.name, c.cloud, p.card, p.probe.stale_after_seconds, p.probe.scale_up_alert_seconds
        )
        for c in fleet.clusters.values()
        for p in c.pools
        if p.probe is not None
    ]


class LeafNotDeployedError(Exception):
    """A leaf whose stack has not been deployed yet, so the central cannot learn how to reach it."""


def leaf_output(ref: pulumi.StackReference, leaf: str, central: str, name: str) -> pulumi.Output[Any]:
    """Output ``name`` of the leaf's stack; a leaf not deployed yet (the real CLI's StackReference has no such output,
    and ``require_output`` says only ``KeyError: 'federation_ca'``) fails saying which stack to deploy first. An
    output that is there keeps its secrecy; whether it is there is no secret."""
    there = pulumi.Output.unsecret(ref.outputs.apply(lambda outputs: name in (outputs or {})))

    def present(args: list[Any]) -> Any:
        value, found = args
        if not found:
            raise LeafNotDeployedError(
                f"{central} federates {leaf}, whose stack has no output {name}: deploy it first "
                f"(pulumi up --stack {leaf}), then {central}"
            )
        return value

    return pulumi.Output.all(ref.get_output(name), there).apply(present)


def federation_sources(
    cluster: Cluster,
    fleet: Fleet,
    settings: ComponentSettings,
    namespace: pulumi.Input[str],
    child: pulumi.ResourceOptions,
) -> tuple[list[pulumi.Output[dict[str, Any]]], list[str]]:
    """One Secret and one federation scrape job per other cluster, learned through its stack's outputs."""
    selectors = federated_selectors(fleet)
    jobs = []
    secrets = []
    for leaf in fleet.clusters.values():
        if leaf.central:
            continue
        ref = pulumi.StackReference(f"{settings.stack_reference_prefix}/{leaf.name}", opts=child)
        secret_name = f"federation-{leaf.name}"
        k8s.core.v1.Secret(
            f"{cluster.name}-federation-{leaf.name}",
            metadata={"name": secret_name, "namespace": namespace},
            type="Opaque",
            string_data={
                "ca.crt": leaf_output(ref, leaf.name, cluster.name, "federation_ca"),
                "tls.crt": leaf_output(ref, leaf.name, cluster.name, "federation_client_cert"),
                "tls.key": leaf_output(ref, leaf.name, cluster.name, "federation_client_key"),
            },
            opts=child,
        )
        secrets.append(secret_name)
        files = f"{SECRETS_DIR}/{secret_name}"

        def job(address: str, leaf: Cluster = leaf, files: str = files) -> dict[str, Any]:
            target = prometheus.FederationTarget(
                cluster=leaf.name,
                cloud=leaf.cloud,
                address=address,
                server_name=server_name(leaf.name),
                ca_file=f"{files}/ca.crt",
                cert_file=f"{files}/tls.crt",
                key_file=f"{files}/tls.key",
            )
            interval = fleet.monitoring.federation_interval
            return prometheus.federation_scrape_config(
                target, selectors, interval=interval, timeout=prometheus.federation_timeout(interval)
            )

        jobs.append(leaf_output(ref, leaf.name, cluster.name, "federation_address").apply(job))
    # The list itself, not Output.all(*jobs): all() would unwrap every job deeply again, one Output per
    # nested value (tens of thousands in a large fleet); the engine resolves each job where it stands.
    return jobs, secrets
