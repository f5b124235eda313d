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
  allowlisted ``workload`` label, ``kube_pod_info{node}`` (where a pod runs) and ``kube_node_status_capacity``
  (what a node advertises). A pod lost with a reclaimed spot node is told in one of two ways: its node disappears
  while it ran (EKS and AKS delete the node, and the pod garbage collector its pods), or, on GKE, the node object stays
  and the reclaimed VM's kubelet runs its graceful node shutdown, which fails the pod (phase ``Failed``, reason
  ``Terminated``, "Pod was terminated in response to imminent node shutdown.": kubernetes/kubernetes
  pkg/kubelet/nodeshutdown/nodeshutdown_manager_linux.go) while the node turns NotReady. kube-state-metrics' reason
  list (``kube_pod_status_reason``: Evicted, NodeAffinity, NodeLost, Shutdown, UnexpectedAdmissionError) lacks
  ``Terminated``, so the rule reads the phase and ``kube_node_status_condition{condition="Ready"}`` instead.

The rules, evaluated every ``evaluation_interval`` (values are cards at that instant; the report integrates them over
its window into card-hours):

* ``gpufleet:pod_used_cards{namespace, pod, workload}``: a pod's cards on a pool while it runs (0 otherwise), a slice
  or MIG instance counting ``1 / units`` of a card; billed to its workload's account if the policy gives one, else
  the cluster's;
* ``gpufleet:used_cards{workload}``: the same summed per workload;
* ``gpufleet:billed_cards``: the cards of the pool's nodes, from what they advertise over the pods per card (what the
  cloud bills, busy or not);
* ``gpufleet:idle_cards``: billed minus used, never below zero, on the cluster's account (who owns the pool);
* ``gpufleet:pod_preempted{namespace, pod}``: 1 for about two minutes after a pod's node disappeared while the pod
  ran, or after the pod failed on a node that went NotReady (a GKE spot reclaim), so the report can count the
  card-hours the pod had used as lost to preemption (a normal scale-down removes a node only ``scale_down_after``
  after its last pod, 1 minute at the least; the default 5 minutes never counts; a pod failing by itself on a Ready
  node is not lost).

Every record carries ``cluster`` and ``cloud``, and all but ``pod_preempted`` also ``gpu``, ``pool`` and
``billing_account``.
"""

from __future__ import annotations

import re
from typing import Any

from fleet.model.billing.accounts import billed_apart
from fleet.model.core.clusters import Cluster
from fleet.model.core.fleet import Fleet
from fleet.model.core.pools import GpuPool

POD_USED = "gpufleet:pod_used_cards"
USED = "gpufleet:used_cards"
BILLED = "gpufleet:billed_cards"
IDLE = "gpufleet:idle_cards"
PREEMPTED = "gpufleet:pod_preempted"
ACCOUNTING_RULES = (POD_USED, USED, BILLED, IDLE, PREEMPTED)
GROUP = "gpufleet-accounting"
WORKLOAD_POD_LABEL = "workload"  # components/kubernetes/benchmark.py pod_labels


def ksm_label(key: str) -> str:
    """The label kube-state-metrics gives a Kubernetes label key in ``kube_*_labels``: sanitised, then snake case
    (kube-state-metrics v2.17.0 internal/store/utils.go)."""
    sanitised = re.sub(r"[^a-zA-Z0-9_]", "_", key)
    return "label_" + re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", sanitised).lower()


def ksm_resource(resource: str) -> str:
    """An extended resource's name as kube-state-metrics writes it in ``resource``."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", resource)


def node_label_keys(cluster: Cluster) -> list[str]:
    """The node label keys that tell a cluster's pools apart (its pools' selectors: the card, the sweep pools' size, the
    CI pools' label)."""
    return sorted({k for pool in cluster.all_pools for k in pool.node_selector})


def metric_labels_allowlist(cluster: Cluster) -> list[str]:
    """kube-state-metrics' ``metricLabelsAllowlist`` (kube-state-metrics chart 6.4.1: a list joined with commas into
    ``--metric-labels-allowlist``): the pools' node label keys and the pods' workload label."""
    return [f"nodes=[{','.join(node_label_keys(cluster))}]", f"pods=[{WORKLOAD_POD_LABEL}]"]


def node_selector(pool: GpuPool, cluster: Cluster) -> str:
    """``kube_node_labels{...}`` of the pool's nodes (a card's own pool: none of its sweep or CI pools' nodes, which
    carry a label its selector does not name; an absent label reads as "" in kube-state-metrics)."""
    matchers = {ksm_label(k): v for k, v in pool.node_selector.items()}
    for key in cluster.pool_kind_labels:
        if key not in pool.node_selector:
            matchers[ksm_label(key)] = ""
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


def running_phase() -> str:
    """1 for a pod in phase Running, 0 otherwise."""
    return 'max by (namespace, pod) (kube_pod_status_phase{phase="Running"})'


def _pod_cards(pool: GpuPool, cluster: Cluster, workloads: str) -> str:
    """Per pod (``namespace``, ``pod``, ``workload``): its cards on ``pool`` while it runs, 0 otherwise (a series that
    stays keeps an integral right where no staleness marker ends it), for pods whose workload label matches
    ``workloads`` (a matcher; empty: every pod)."""
    units = pool.sharing.units if pool.sharing else 1
    # max by: the same series from two kube-state-metrics replicas (or a restart's overlap) counts once
    requests = (
        "max by (namespace, pod, container, node) "
        f'(kube_pod_container_resource_requests{{resource="{ksm_resource(pool.resource)}"}})'
    )
    running = running_phase()
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
    """The pool's cards: what its nodes advertise (``kube_node_status_capacity``, kube-state-metrics node.go) over the
    pods per card, so a node of unknown size (an existing cluster's) counts its real cards."""
    units = pool.sharing.units if pool.sharing else 1
    capacity = f'max by (node) (kube_node_status_capacity{{resource="{ksm_resource(pool.resource)}"}})'
    on_pool = f"max by (node) ({node_selector(pool, cluster)})"
    return f"(sum({capacity} * on (node) group_left () {on_pool}) / {units} or vector(0))"


def accounting_rules(cluster: Cluster, fleet: Fleet, interval: str | None = None) -> dict[str, Any]:
    """The leaf's accounting rule file for ``cluster``. Every record reads kube-state-metrics only, never another
    record, so each holds at its own evaluation's instant (also when backfilled by ``promtool tsdb create-blocks-from
    rules``, which evaluates rule by rule)."""
    accounts = billed_apart(fleet, cluster)  # workload names are DNS labels: nothing to escape in a regex
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
    # a pod running on a node in the last 2 minutes, the node gone now: lost with it (a spot reclaim deletes the node,
    # and the pod garbage collector its pods, with no reason recorded on current Kubernetes)
    on_node = 'max by (namespace, pod, node) (kube_pod_info{node!=""})'
    was_running = f"({on_node} * on (namespace, pod) group_left () {running_phase()})"
    ran = f"(max_over_time({was_running}[2m:]) == 1)"
    gone = f"max by (namespace, pod) ({ran} unless on (node) kube_node_labels)"
    # or the node stays and shut down under it (GKE: the reclaimed Spot VM's kubelet runs its graceful node shutdown,
    # which fails the pod with reason Terminated, and the node object is kept): the pod Failed now, after running in
    # the last 2 minutes, on a node not Ready at some point of them (kube_node_status_condition)
    failed = 'max by (namespace, pod) (kube_pod_status_phase{phase="Failed"})'
    not_ready = 'min by (node) (min_over_time(kube_node_status_condition{condition="Ready",status="true"}[2m])) == 0'
    shut = f"max by (namespace, pod) ({ran} and on (namespace, pod) ({failed} == 1) and on (node) ({not_ready}))"
    lost = f"{gone} or {shut}"
    rules.append({"record": PREEMPTED, "expr": lost, "labels": _labels(cluster, None, None)})
    group: dict[str, Any] = {"name": GROUP, "rules": rules}
    if interval is not None:
        group = {"name": GROUP, "interval": interval, "rules": rules}
    return {"groups": [group]}
