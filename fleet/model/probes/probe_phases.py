"""Time to first accelerator by phase: the leaf rules that split each probed pool's newest probe pod's wait into
node, device, containers and check (fleet/model/monitoring/rules/leaf-probe-phases.yaml says what each phase covers and
which kube-state-metrics series it reads), federated to the central as ``gpufleet:probe_phase_seconds``.

The probe pod of a pool is told by its ``workload`` label (kube-state-metrics' ``kube_pod_labels``, allowlisted for
the accounting rules) and by the node it is bound to carrying the pool's selector labels (``kube_node_labels``, as
the accounting rules tell a pool's nodes). Of a pool's probe pods only the newest one bound to a node is recorded, and
only until 15 minutes after it completed (a completed pod stays as long as its Job is kept: days of samples of one
run would only cost the central), so each run has its series (its ``pod``) and the central keeps the last run as state
(``gpufleet:probe_phase_seconds:last``, fleet/model/monitoring/rules/central-probe-alerts.yaml).
"""

from __future__ import annotations

from typing import Any

from fleet.model.billing.accounting import WORKLOAD_POD_LABEL, ksm_label, node_selector
from fleet.model.core import pod_contract
from fleet.model.core.clusters import Cluster
from fleet.model.core.pools import GpuPool
from fleet.model.monitoring.rule_files import fill, rule_file

RULES_FILE = "leaf-probe-phases.yaml"
GROUP = "gpufleet-probe-phases"
#: The leaf record, one series per phase of each pool's newest probe pod.
PHASE_RECORD = "gpufleet:probe_phase_seconds"
#: The central's state: each pool's last run's phases.
PHASE_LAST_RECORD = "gpufleet:probe_phase_seconds:last"
#: The phases, in the order a probe goes through them.
PHASES: tuple[str, ...] = ("node", "device", "containers", "check")
#: What each phase covers, for the report and doctor.
PHASE_MEANING = {
    "node": "waiting for a node (pod created to node created)",
    "device": "device ready (node created to pod scheduled)",
    "containers": "image pulled, containers started",
    "check": "device check",
}
#: The probe's own container (components/kubernetes/benchmark.py pod_spec's default container name).
PROBE_CONTAINER = "workload"
PROBE_WORKLOAD = "probe"  # fleet/model/probes/probe/workload.yaml name
#: Seconds a completed probe pod's phases are still recorded: each run's series then holds about 15 samples at the
#: central, whatever the schedule, and the central keeps the values as state (gpufleet:probe_phase_seconds:last).
RECORDED_AFTER_COMPLETION = 900


def _per_pod(expr: str) -> str:
    """``expr`` reduced to one value per pod (two kube-state-metrics replicas, or a restart's overlap, count once)."""
    return f"max by (namespace, pod) ({expr})"


def _values(pool: GpuPool, cluster: Cluster) -> dict[str, str]:
    ns = pod_contract.BENCHMARK_NAMESPACE
    pod_node = f'max by (namespace, pod, node) (kube_pod_info{{namespace="{ns}",node!=""}})'
    on_pool = f"max by (node) ({node_selector(pool, cluster)})"
    probe_pods = f'kube_pod_labels{{namespace="{ns}",{ksm_label(WORKLOAD_POD_LABEL)}="{PROBE_WORKLOAD}"}}'
    created = _per_pod(f'kube_pod_created{{namespace="{ns}"}}')
    on_this_pool = (
        f"{created} * on (namespace, pod) group_left () {_per_pod(probe_pods)}"
        f" * on (namespace, pod) group_left () {_per_pod(f'{pod_node} * on (node) group_left () {on_pool}')}"
    )
    node_created = _per_pod(f"{pod_node} * 0 + on (node) group_left () max by (node) (kube_node_created)")
    finished = _per_pod(f'kube_pod_completion_time{{namespace="{ns}"}}')
    started = f'kube_pod_container_state_started{{namespace="{ns}",container="{PROBE_CONTAINER}"}}'
    return {
        # the newest probe pod of the pool, until RECORDED_AFTER_COMPLETION after it completed
        "probe": (
            f"topk(1, {on_this_pool}) unless on (namespace, pod) (time() - {finished} > {RECORDED_AFTER_COMPLETION})"
        ),
        "pod_created": created,
        "scheduled": _per_pod(f'kube_pod_status_scheduled_time{{namespace="{ns}"}}'),
        "started": _per_pod(started),
        "finished": finished,
        "node_created": node_created,
        "linger": str(pod_contract.LINGER_SECONDS),
    }


def leaf_rules(cluster: Cluster, interval: str | None = None) -> dict[str, Any] | None:
    """The leaf's probe phase rule file for ``cluster``: the four phase records per probed pool, each labelled with
    the cluster, cloud, card and pool; None when no pool of the cluster is probed."""
    rules: list[dict[str, Any]] = []
    template = rule_file(RULES_FILE)["groups"][0]["rules"]
    for pool in cluster.pools:
        if pool.probe is None:
            continue
        values = _values(pool, cluster)
        for rule in fill({"groups": [{"rules": template}]}, values, f"fleet/model/monitoring/rules/{RULES_FILE}")[
            "groups"
        ][0]["rules"]:
            labels = {"cluster": cluster.name, "cloud": cluster.cloud, "gpu": pool.card, "pool": pool.name}
            rules.append({**rule, "labels": {**labels, **rule["labels"]}})
    if not rules:
        return None
    group: dict[str, Any] = {"name": GROUP, **({"interval": interval} if interval else {}), "rules": rules}
    return {"groups": [group]}


# --- the central's record of finished runs ----------------------------------------------------------------------------
#
# Each run's phases are series of their own (the probe pod's), so over a long window the report would read a series per
# run, pool and phase: over 180 days of 200 clusters, over a million, three times (runs, median, worst). The central
# keeps instead one sample per finished run on a series per pool and phase: at each evaluation ``t`` of its group
# (every federation interval ``step``), the runs whose phase series' last sample came in the interval before
# ``t - SETTLED_AFTER`` (:func:`settled`), that is those with no sample since (the leaf stopped recording them: their
# pod completed ``RECORDED_AFTER_COMPLETION`` ago, or a newer run took their place). A group's evaluations keep one
# phase within its interval (prometheus rules/group.go ``EvalTimestamp``), so consecutive evaluations' windows tile
# time and each run is counted once, as long as no evaluation is missed (the central down: the runs settled then are not
# recorded) and federation of its cluster was never cut for ``SETTLED_AFTER`` while the run was recorded (the run
# would count twice). Two runs of one pool settled in the same interval keep the longer phase each in
# ``PHASE_RUN_RECORD`` (the count in ``SETTLED_RUNS_RECORD`` has both).

#: One sample per finished run: each phase's seconds, per (cluster, cloud, gpu, phase).
PHASE_RUN_RECORD = "gpufleet:probe_phase_seconds:run"
#: How many runs finished at each evaluation, per (cluster, cloud, gpu).
SETTLED_RUNS_RECORD = "gpufleet:probe_runs:settled"
#: Each evaluation's instant (its value, and its time): the report reads the records only over a window they cover
#: from its start (fleet/report/probes.py ``records_cover``), every run's series otherwise.
RUNS_EVALUATED = "gpufleet:probe_runs:evaluated"
RUNS_GROUP = "gpufleet-probe-runs"
#: Seconds without a sample after which a run's phases are final: longer than a federation scrape missed now and then.
SETTLED_AFTER = 900
_POOL_KEY = "cluster, cloud, gpu"


#: Every recorded run has this phase (a pod bound to a node has its node's wait, 0 when it was up): the runs are
#: counted by it, once each even if a run's other phases stopped being recorded at another evaluation.
FIRST_PHASE = PHASES[0]


def settled(step: float, phase: str | None = None) -> str:
    """The phase series (one per run and phase, labels kept; with ``phase``, that phase's only) whose last sample came
    by ``t - SETTLED_AFTER`` and after the previous evaluation's bound, at the evaluation instant ``t``, with that
    last value. The two ranges share their bound at ``t - SETTLED_AFTER``, so the runs each evaluation takes tile time
    whether a range's start is inclusive (Prometheus 2: a last sample ``x`` is taken when ``t - SETTLED_AFTER - step <=
    x < t - SETTLED_AFTER``) or not (3, the fleet's central: ``t - SETTLED_AFTER - step < x <= t - SETTLED_AFTER``)."""
    series = f'{PHASE_RECORD}{{phase="{phase}"}}' if phase else PHASE_RECORD
    return (
        f"last_over_time({series}[{int(step)}s] offset {SETTLED_AFTER}s)"
        f" unless last_over_time({series}[{SETTLED_AFTER}s])"
    )


def settled_run_rules(step: float) -> dict[str, Any] | None:
    """The central's rule file of finished probe runs, evaluated every ``step`` seconds (the federation interval); None
    when ``step`` is not a whole number of seconds (the report then reads every run's series)."""
    if not (step >= 1 and float(step).is_integer()):
        return None
    runs = settled(step)
    rules = [
        {"record": PHASE_RUN_RECORD, "expr": f"max by ({_POOL_KEY}, phase) ({runs})"},
        {"record": SETTLED_RUNS_RECORD, "expr": f"count by ({_POOL_KEY}) ({settled(step, FIRST_PHASE)})"},
        {"record": RUNS_EVALUATED, "expr": "vector(time())"},
    ]
    return {"groups": [{"name": RUNS_GROUP, "interval": f"{int(step)}s", "rules": rules}]}
