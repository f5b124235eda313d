"""GPU accounting on each leaf Prometheus: the cards billed (GPU nodes up), used (running pods' requests) and idle, per
pool, card and billing account, as recording rules over kube-state-metrics, federated to the central.

kube-state-metrics (v2.17.0, in kube-prometheus-stack 79.5.0) gives, per node and pod:

* ``kube_node_labels{node, label_<key>...}``, only with the label keys allowlisted (``--metric-labels-allowlist
  nodes=[...]``; the chart value ``kube-state-metrics.metricLabelsAllowlist``): each pool's selector labels, by
  which a node is told to belong to a pool; a key's label name is ``label_`` + the key with every character outside
  ``[a-zA-Z0-9_]`` made ``_`` (internal/store/utils.go);
* ``kube_pod_container_resource_requests{namespace, pod, node, resource, unit}``, an extended resource's name
  sanitised the same way (``nvidia.com/gpu`` -> ``nvidia_com_gpu``; internal/store/pod.go);
* ``kube_pod_status_phase{namespace, pod, phase}`` (1 for the current phase), ``kube_pod_labels`` with the
  allowlisted ``workload`` label, and ``kube_pod_status_reason{reason}``, whose ``Shutdown`` (a graceful node
  shutdown, as spot reclaims do) and ``NodeLost`` mark a pod lost with its node (internal/store/pod.go
  podStatusReasons).

The rules, evaluated every ``evaluation_interval`` (values are cards at that instant; the report integrates them over
its window into card-hours):

* ``gpufleet:pod_used_cards{namespace, pod, workload}``: a pod's cards on a pool while it runs (0 otherwise), a slice
  or MIG instance counting ``1 / units`` of a card; billed to its workload's account if the policy gives one, else
  the cluster's;
* ``gpufleet:used_cards{workload}``: the same summed per workload;
* ``gpufleet:billed_cards``: the pool's nodes times their cards (what the cloud bills, busy or not);
* ``gpufleet:idle_cards``: billed minus used, never below zero, on the cluster's account (who owns the pool);
* ``gpufleet:pod_preempted{namespace, pod}``: 1 for a pod lost with its node, so the report can count the
  card-hours such pods had used as lost to preemption.

Every record carries ``gpu``, ``pool`` and ``billing_account``; federation adds ``cluster`` and ``cloud``.
"""

from __future__ import annotations

import re
from typing import Any

from fleet.model.spec import Cluster, Fleet, GpuPool
from fleet.model.sweeps import CARDS_PER_NODE_LABEL

POD_USED = "gpufleet:pod_used_cards"
USED = "gpufleet:used_cards"
BILLED = "gpufleet:billed_cards"
IDLE = "gpufleet:idle_cards"
PREEMPTED = "gpufleet:pod_preempted"
ACCOUNTING_RULES = (POD_USED, USED, BILLED, IDLE, PREEMPTED)
GROUP = "gpufleet-accounting"
WORKLOAD_POD_LABEL = "workload"  # components/kubernetes/benchmark.py pod_labels
PREEMPTION_REASONS = ("Shutdown", "NodeLost")


def ksm_label(key: str) -> str:
    """The label kube-state-metrics gives a Kubernetes label key in ``kube_*_labels``."""
    return "label_" + re.sub(r"[^a-zA-Z0-9_]", "_", key)


def ksm_resource(resource: str) -> str:
    """An extended resource's name as kube-state-metrics writes it in ``resource``."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", resource)


def node_label_keys(cluster: Cluster) -> list[str]:
    """The node label keys that tell a cluster's pools apart (its pools' selectors, and the sweep pools' size)."""
    keys = {k for pool in cluster.all_pools for k in pool.node_selector}
    if cluster.sweep_pools:
        keys.add(CARDS_PER_NODE_LABEL)
    return sorted(keys)


def metric_labels_allowlist(cluster: Cluster) -> list[str]:
    """kube-state-metrics' ``metricLabelsAllowlist`` (kube-state-metrics chart 6.4.1: a list joined with commas into
    ``--metric-labels-allowlist``): the pools' node label keys and the pods' workload label."""
    return [f"nodes=[{','.join(node_label_keys(cluster))}]", f"pods=[{WORKLOAD_POD_LABEL}]"]


def node_selector(pool: GpuPool, cluster: Cluster) -> str:
    """``kube_node_labels{...}`` of the pool's nodes (a card's own pool: none of its sweep pools' nodes)."""
    matchers = {ksm_label(k): v for k, v in pool.node_selector.items()}
    if cluster.sweep_pools and not pool.sweep:
        matchers[ksm_label(CARDS_PER_NODE_LABEL)] = ""
    inner = ",".join(f'{k}="{v}"' for k, v in sorted(matchers.items()))
    return f"kube_node_labels{{{inner}}}"


def _labels(cluster: Cluster, pool: GpuPool | None, account: str | None) -> dict[str, str]:
    """The record's labels: its cluster and cloud (so the central's own records read like federated ones), pool, card
    and account."""
    out = {"cluster": cluster.name, "cloud": cluster.cloud}
    if pool is not None:
        out.update({"gpu": pool.card, "pool": pool.name})
    if account is not None:
        out["billing_account"] = account
    return out


def _pod_cards(pool: GpuPool, cluster: Cluster, workloads: str) -> str:
    """Per pod (``namespace``, ``pod``, ``workload``): its cards on ``pool`` while it runs, 0 otherwise (a series that
    stays keeps an integral right where no staleness marker ends it), for pods whose workload label matches
    ``workloads`` (a matcher; empty: every pod)."""
    units = pool.sharing.units if pool.sharing else 1
    requests = f'kube_pod_container_resource_requests{{resource="{ksm_resource(pool.resource)}"}}'
    running = 'max by (namespace, pod) (kube_pod_status_phase{phase="Running"})'
    on_pool = f"max by (node) ({node_selector(pool, cluster)})"
    named = f"max by (namespace, pod, {ksm_label(WORKLOAD_POD_LABEL)}) (kube_pod_labels{{{workloads}}})"
    cards = (
        f"sum by (namespace, pod, {ksm_label(WORKLOAD_POD_LABEL)}) ("
        f"{requests} * on (namespace, pod) group_left () {running} * on (node) group_left () {on_pool}"
        f" * on (namespace, pod) group_left ({ksm_label(WORKLOAD_POD_LABEL)}) {named}) / {units}"
    )
    renamed = f'label_replace({cards}, "{WORKLOAD_POD_LABEL}", "$1", "{ksm_label(WORKLOAD_POD_LABEL)}", "(.*)")'
    return f"sum by (namespace, pod, {WORKLOAD_POD_LABEL}) ({renamed})"


def _billed(pool: GpuPool, cluster: Cluster) -> str:
    return f"(count({node_selector(pool, cluster)}) * {pool.accelerators_per_node} or vector(0))"


def accounting_rules(cluster: Cluster, fleet: Fleet, interval: str | None = None) -> dict[str, Any]:
    """The leaf's accounting rule file for ``cluster``. Every record reads kube-state-metrics only, never another
    record, so each holds at its own evaluation's instant (also when backfilled by ``promtool tsdb create-blocks-from
    rules``, which evaluates rule by rule)."""
    own = {w: a for w, a in sorted(fleet.billing_accounts.items()) if a != cluster.billing_account}
    accounts: dict[str, list[str]] = {}
    for workload, account in own.items():
        accounts.setdefault(account, []).append(workload)  # DNS labels: nothing to escape in a regex
    label = ksm_label(WORKLOAD_POD_LABEL)
    others = [n for names in accounts.values() for n in names]
    matchers = [(account, f'{label}=~"{"|".join(names)}"') for account, names in sorted(accounts.items())]
    matchers.append((cluster.billing_account, f'{label}!~"{"|".join(others)}"' if others else ""))
    rules: list[dict[str, Any]] = []
    for pool in cluster.all_pools:
        for account, workloads in matchers:
            pods = _pod_cards(pool, cluster, workloads)
            labels = _labels(cluster, pool, account)
            rules.append({"record": POD_USED, "expr": pods, "labels": labels})
            rules.append({"record": USED, "expr": f"sum by ({WORKLOAD_POD_LABEL}) ({pods})", "labels": labels})
        owner = _labels(cluster, pool, cluster.billing_account)
        rules.append({"record": BILLED, "expr": _billed(pool, cluster), "labels": owner})
        used = f"(sum({_pod_cards(pool, cluster, '')}) or vector(0))"
        rules.append({"record": IDLE, "expr": f"clamp_min({_billed(pool, cluster)} - {used}, 0)", "labels": owner})
    reasons = "|".join(PREEMPTION_REASONS)
    rules.append(
        {
            "record": PREEMPTED,
            "expr": f'max by (namespace, pod) (kube_pod_status_reason{{reason=~"{reasons}"}}) == 1',
            "labels": _labels(cluster, None, None),
        }
    )
    group: dict[str, Any] = {"name": GROUP, "rules": rules}
    if interval is not None:
        group = {"name": GROUP, "interval": interval, "rules": rules}
    return {"groups": [group]}
