"""A synthetic leaf: the series a leaf Prometheus of the fleet answers ``/federate`` with, derived from the model.

For one cluster of a loaded fleet, :func:`leaf_series` lists every series the central's ``match[]`` selectors
(``components.kubernetes.federation.federated_selectors``) pull from that leaf, with the labels the leaf gives
them, at a *busy minute*: every benchmark (workload, card) pair of the cluster has its pod alive, every probed pool
its probe pod, every runner its concurrency of CI jobs, and one pod was just lost with its node (so the preemption
record exists too). Where the names come from:

* benchmark series: each deployed workload's declared metrics (``workload.yaml``), a histogram as ``_bucket`` (its
  mtail program's buckets plus ``+Inf``), ``_sum`` and ``_count``; the PodMonitor's target labels (job, namespace,
  pod, instance, container, endpoint) and the pod labels it copies (workload, gpu, cluster, cloud); each declared
  label takes two values (the workloads' own labels hold a stage or a step: few values);
* the probe's series (the same, minus ``pod`` and ``instance``, which its PodMonitor drops);
* the leaf's GPU recording rules (``fleet/model/rules/leaf-gpu-aggregates.yaml``), one series per card model and pod
  using a card, plus the idle cards of each pool (empty ``namespace`` and ``pod``);
* the accounting records (``fleet/model/accounting.py``) with the labels each rule sets, per pod, workload and pool;
* the runners' series (``fleet.model.monitoring.prometheus.RUNNER_SERIES``) per runner, the failures per reason;
* the probe phase records (``fleet/model/probe_phases.py``) of each probed pool.

:func:`exposition` writes them as ``/federate`` does: ``# TYPE`` lines, labels sorted, an explicit timestamp.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from components.kubernetes.federation import federated_selectors
from fleet.model.billing import accounting
from fleet.model.billing.accounts import account_of
from fleet.model.core.fleet import Cluster, Fleet
from fleet.model.core.workloads import Workload
from fleet.model.monitoring.prometheus import GPU_RECORDING_RULES, RUNNER_SERIES, series_names
from fleet.model.probes import probe_phases

#: Values each declared benchmark label takes (its stage, step or phase: few values).
LABEL_VALUES = 2
#: gitlab-runner's failure reasons the leaf typically has seen (helpers/prometheus/failures_collector.go).
RUNNER_FAILURE_REASONS = ("script_failure", "runner_system_failure", "job_execution_timeout")
_BUCKETS = re.compile(r"histogram\s+(\w+)[^\n]*?buckets\s+([0-9.eE+\-,\s]+)")


@dataclass(frozen=True)
class Series:
    """One federated series: its name and labels (external labels included)."""

    name: str
    labels: tuple[tuple[str, str], ...]


def _buckets(workload: Workload, metric: str) -> int:
    """The bucket count of a histogram in the workload's mtail programs (its bounds plus ``+Inf``)."""
    for program in sorted((workload.folder / "mtail").glob("*.mtail")):
        for name, bounds in _BUCKETS.findall(program.read_text(encoding="utf-8")):
            if name == metric:
                return len([b for b in bounds.split(",") if b.strip()]) + 1
    return 11  # mtail's default: none given in the program


def _make(name: str, labels: dict[str, str]) -> Series:
    return Series(name, tuple(sorted(labels.items())))


def _workload_series(wl: Workload, base: dict[str, str]) -> list[Series]:
    """A workload pod's federated series: each declared metric with every value combination of its labels."""
    out = []
    for metric in wl.spec.metrics:
        combos: list[dict[str, str]] = [{}]
        for label in metric.labels:
            combos = [{**c, label: f"{label}-{i}"} for c in combos for i in range(LABEL_VALUES)]
        for name in series_names(metric):
            for combo in combos:
                if name.endswith("_bucket") and metric.type == "histogram":
                    count = _buckets(wl, metric.name)
                    bounds = [f"{2**i:g}" for i in range(count - 1)] + ["+Inf"]
                    out += [_make(name, {**base, **combo, "le": le}) for le in bounds]
                else:
                    out.append(_make(name, {**base, **combo}))
    return out


def leaf_series(cluster: Cluster, fleet: Fleet) -> list[Series]:
    """Every series the central federates from ``cluster`` at a busy minute (module docstring)."""
    ext = {"cluster": cluster.name, "cloud": cluster.cloud}
    series: list[Series] = []
    pods: list[tuple[str, str, object, str]] = []  # (pod, workload, pool, account)
    benchmarks = fleet.benchmarks(cluster)
    for i, bench in enumerate(benchmarks + fleet.probes(cluster)):
        wl, pool = bench.workload, bench.pool
        probe = bench not in benchmarks
        pod = f"{'probe' if probe else wl.name}-{pool.card}-{i:03d}-x7k2p"
        base = {
            **ext,
            "job": "benchmarks/benchmarks",
            "namespace": "benchmarks",
            "container": "mtail",
            "endpoint": "metrics",
            "workload": wl.name,
            "gpu": pool.card,
        }
        if not probe:
            base |= {"pod": pod, "instance": f"10.4.{i // 250}.{i % 250 + 1}:3903"}
        series += _workload_series(wl, base)
        account = account_of(fleet, cluster, wl.name)
        pods.append((pod, wl.name, pool, account))
    for pool in cluster.all_pools:
        on_pool = [p for p in pods if p[2] is pool]
        busy = sum(fleet.workloads[w].spec.accelerators if w in fleet.workloads else 1 for _, w, _, _ in on_pool)
        cards = pool.max_nodes * pool.units_per_node
        users = [(p, "benchmarks") for p, *_ in on_pool] + ([("", "")] if cards > busy else [])
        for record in GPU_RECORDING_RULES:
            for pod, namespace in users:
                labels = {**ext, "modelName": pool.card, "namespace": namespace, "pod": pod}
                series.append(_make(record, {**labels, "gpufleet_source": "dcgm-exporter"}))
        pool_labels = {**ext, "gpu": pool.card, "pool": pool.name}
        for pod, workload, _, account in on_pool:
            labels = {**pool_labels, "billing_account": account, "workload": workload}
            series.append(_make(accounting.POD_USED, {**labels, "namespace": "benchmarks", "pod": pod}))
        for workload, account in sorted({(w, a) for _, w, _, a in on_pool}):
            series.append(_make(accounting.USED, {**pool_labels, "billing_account": account, "workload": workload}))
        owner = {**pool_labels, "billing_account": cluster.billing_account}
        series += [_make(accounting.BILLED, owner), _make(accounting.IDLE, owner)]
    if pods:
        series.append(_make(accounting.PREEMPTED, {**ext, "namespace": "benchmarks", "pod": pods[0][0]}))
    for runner in fleet.runners_of(cluster):
        base = {
            **ext,
            "job": "gitlab-runner",
            "namespace": "gitlab-runners",
            "instance": f"10.5.0.1:9252-{runner.pool.card}",
            "runner": f"runner-{runner.pool.card}",
            "system_id": f"r_{runner.pool.card}",
        }
        for name in RUNNER_SERIES:
            reasons = RUNNER_FAILURE_REASONS if name == "gitlab_runner_failed_jobs_total" else ("",)
            for reason in reasons:
                series.append(_make(name, {**base, **({"failure_reason": reason} if reason else {})}))
    for pool in cluster.pools:
        if pool.probe is None:
            continue
        for phase in probe_phases.PHASES:
            labels = {**ext, "gpu": pool.card, "pool": pool.name, "phase": phase, "namespace": "benchmarks"}
            series.append(_make(probe_phases.PHASE_RECORD, {**labels, "pod": f"probe-{pool.card}-x7k2p"}))
    return series


def selected_names(fleet: Fleet) -> set[str]:
    """The series names the central's ``match[]`` selectors pull (every selector is a bare name)."""
    return set(federated_selectors(fleet))


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def exposition_lines(series: Iterable[Series]) -> list[tuple[str, str]]:
    """(``# TYPE`` line or "", the series' text up to its value) in ``/federate``'s order: by name, then labels."""
    out: list[tuple[str, str]] = []
    last = None
    for s in sorted(series, key=lambda s: (s.name, s.labels)):
        head = f"# TYPE {s.name} untyped" if s.name != last else ""
        last = s.name
        labels = ",".join(f'{k}="{_escape(v)}"' for k, v in s.labels)
        out.append((head, f"{s.name}{{{labels}}}"))
    return out


def exposition(lines: list[tuple[str, str]], value: float, timestamp_ms: int) -> str:
    """The ``/federate`` answer: every series with ``value`` at ``timestamp_ms`` (text format 0.0.4)."""
    parts = []
    for head, text in lines:
        if head:
            parts.append(head)
        parts.append(f"{text} {value:g} {timestamp_ms}")
    return "\n".join(parts) + "\n"
