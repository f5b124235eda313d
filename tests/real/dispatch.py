"""Jobs through the fleet's queues on the real tier: a Job submitted on the manager as the docs show, the Workload
Kueue makes of it there and the cluster MultiKueue gave it to, and a Job that holds a worker's whole quota of a card
(its pods run until deleted: ``HOLD_LABEL``, which the tier's KWOK stages honour) to make the worker full."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from fleet.model.core.clusters import Cluster
from fleet.model.core.jobs import Queue
from fleet.model.core.pod_contract import BENCHMARK_NAMESPACE, QUEUE_NAME_LABEL
from fleet.model.core.pools import card_affinity
from fleet.model.queues.dispatch import pool_capacity
from tests.real.hollow import HollowCluster

ROOT = Path(__file__).resolve().parents[2]
#: A pod with this label runs until it is deleted (tests/real/kwok-stages.yaml); any other Job's pod succeeds.
HOLD_LABEL = "gpu-fleet.test/runs-until-deleted"
# The documented submission: a shell block running `kubectl --context <manager> -n benchmarks create -f -` with the
# Job in a here-document (README "Queues: submit once, CERN first" or its page under docs/).
_SUBMISSION = re.compile(r"kubectl --context \S+ -n benchmarks create -f - <<'YAML'\n(.*?)\nYAML\n", re.DOTALL)


# kube-scheduler's event on binding a pod (pkg/scheduler/schedule_one.go: "Successfully assigned %v/%v to %v")
_ASSIGNED = re.compile(r"Successfully assigned \S+ to (\S+)")


def documented_job() -> tuple[dict[str, Any], Path]:
    """The Job a user submits to a queue, exactly as the README (or the docs page it moved to) shows it, and the file
    it is in."""
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        found = _SUBMISSION.search(page.read_text(encoding="utf-8"))
        if found:
            return yaml.safe_load(found.group(1)), page
    raise AssertionError("no page shows a Job submitted to a queue (kubectl ... create -f - <<'YAML')")


def for_queue(job: dict[str, Any], queue: Queue, name: str) -> dict[str, Any]:
    """``job`` (the documented one) submitted to ``queue`` under ``name``: its queue label and accelerator resource
    those of the queue, everything else as shown."""
    out = copy.deepcopy(job)
    out["metadata"].pop("generateName", None)
    out["metadata"]["name"] = name
    out["metadata"].setdefault("labels", {})[QUEUE_NAME_LABEL] = queue.name
    for container in out["spec"]["template"]["spec"]["containers"]:
        limits = container.setdefault("resources", {}).setdefault("limits", {})
        count = next((v for k, v in limits.items() if "/" in k), 1)
        for key in [k for k in limits if "/" in k]:
            del limits[key]
        limits[queue.resource] = count
    return out


def holding_job(cluster: Cluster, queue: Queue, card: str, name: str) -> dict[str, Any]:
    """A Job submitted on worker ``cluster`` to its copy of ``queue`` that takes the whole quota of ``card`` there
    (one pod per unit of the card's pool at its maximum) and runs until deleted."""
    pools = queue.pools(cluster)
    (pool,) = [p for p in pools if p.card == card]
    units = pool_capacity(pool)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": BENCHMARK_NAMESPACE, "labels": {QUEUE_NAME_LABEL: queue.name}},
        "spec": {
            "parallelism": units,
            "completions": units,
            "backoffLimit": 0,
            "template": {
                "metadata": {"labels": {HOLD_LABEL: "true"}},
                "spec": {
                    "restartPolicy": "Never",
                    "affinity": card_affinity(card, pools),
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": 1000,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "containers": [
                        {
                            "name": "main",
                            "image": "registry.invalid/hold:1",
                            "resources": {"limits": {queue.resource: 1}, "requests": {"cpu": "10m"}},
                            "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                        }
                    ],
                },
            },
        },
    }


def submit(hollow: HollowCluster, job: dict[str, Any]) -> None:
    """Create ``job`` in the benchmarks namespace of ``hollow``."""
    hollow.kubectl("-n", BENCHMARK_NAMESPACE, "create", "-f", "-", input=json.dumps(job))


def delete(hollow: HollowCluster, job: str) -> None:
    """Delete Job ``job`` and its pods (if it is still there)."""
    hollow.kubectl(
        "-n", BENCHMARK_NAMESPACE, "delete", "job", job, "--ignore-not-found", "--cascade=background", "--wait=false"
    )


def workload_of(hollow: HollowCluster, job: str) -> dict[str, Any] | None:
    """The Workload Kueue made of Job ``job`` in the benchmarks namespace, or None yet."""
    items = hollow.get("workloads.kueue.x-k8s.io", "-n", BENCHMARK_NAMESPACE)["items"]
    return next((w for w in items if any(o.get("name") == job for o in w["metadata"].get("ownerReferences", []))), None)


def named(hollow: HollowCluster, workload: str) -> dict[str, Any] | None:
    """The Workload ``workload`` of the benchmarks namespace, or None: MultiKueue's copy on a worker has the manager's
    Workload's name, and no owner until the worker admits it and the Job is made there."""
    return one(hollow, "workloads.kueue.x-k8s.io", workload)


def one(hollow: HollowCluster, resource: str, name: str) -> dict[str, Any] | None:
    """``resource`` ``name`` of the benchmarks namespace of ``hollow``, or None when there is none."""
    found = hollow.kubectl("-n", BENCHMARK_NAMESPACE, "get", resource, name, "-o", "json", check=False)
    return json.loads(found.stdout) if found.returncode == 0 else None


def condition(obj: dict[str, Any] | None, kind: str) -> dict[str, Any] | None:
    """The condition of type ``kind`` of ``obj``'s status, or None."""
    conditions = (obj or {}).get("status", {}).get("conditions", [])
    return next((c for c in conditions if c.get("type") == kind), None)


def holds(obj: dict[str, Any] | None, kind: str) -> bool:
    """Whether ``obj``'s condition ``kind`` is True."""
    return (condition(obj, kind) or {}).get("status") == "True"


def explain(hollow: HollowCluster) -> str:
    """What Kueue on ``hollow`` says of the benchmarks' Workloads and the workers (for a failure's message): each
    Workload's conditions, admission checks and clusters, each MultiKueueCluster's Active, the end of Kueue's log."""
    lines = [f"--- {hollow.name}: Workloads in {BENCHMARK_NAMESPACE}"]
    for w in hollow.get("workloads.kueue.x-k8s.io", "-n", BENCHMARK_NAMESPACE)["items"]:
        status = w.get("status", {})
        said = "; ".join(f"{c['type']}={c['status']} {c.get('reason', '')}: {c.get('message', '')}"
                         for c in status.get("conditions", []))  # fmt: skip
        checks = "; ".join(f"{c.get('name')}={c.get('state')}: {c.get('message', '')}"
                           for c in status.get("admissionChecks", []))  # fmt: skip
        clusters = f"cluster={status.get('clusterName')} nominated={status.get('nominatedClusterNames')}"
        lines.append(f"{w['metadata']['name']} [{w['spec'].get('queueName')}] {clusters}\n  {said}\n  {checks}")
    for j in hollow.get("jobs", "-n", BENCHMARK_NAMESPACE)["items"]:
        spec = j["spec"]
        lines.append(f"Job {j['metadata']['name']}: managedBy={spec.get('managedBy')} suspend={spec.get('suspend')}")
    found = hollow.kubectl("get", "multikueueclusters.kueue.x-k8s.io", "-o", "json", check=False)
    if found.returncode == 0:
        for c in json.loads(found.stdout)["items"]:
            active = condition(c, "Active") or {}
            lines.append(f"MultiKueueCluster {c['metadata']['name']}: {active.get('status')} {active.get('message')}")
    log = hollow.folder / "kueue.log"
    if log.is_file():
        noted = [line for line in log.read_text(errors="replace").splitlines() if '"level":"error"' in line.lower()
                 or "error" in line[:40].lower()]  # fmt: skip
        lines += ["--- the end of Kueue's errors", *noted[-40:]]
    return "\n".join(lines)


def doctor(hollow: HollowCluster, stack: str) -> str:
    """What ``python -m fleet doctor --stack <stack>`` prints of the cluster (its admin's kubeconfig given; no
    Prometheus, whose rows say so)."""
    command = [sys.executable, "-m", "fleet", "doctor", "--stack", stack, "--kubeconfig", str(hollow.kubeconfig)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode in (0, 1), f"doctor exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def scheduled_pods(hollow: HollowCluster, prefix: str) -> dict[str, str]:
    """Pod name to node of every pod of the benchmarks namespace whose name starts with ``prefix`` that the scheduler
    bound, read from its ``Scheduled`` events ("Successfully assigned <namespace>/<pod> to <node>"), which outlive
    the pods (kube-apiserver --event-ttl, 1 h by default)."""
    events = hollow.get("events", "-n", BENCHMARK_NAMESPACE, "--field-selector", "reason=Scheduled")["items"]
    placed = {}
    for event in events:
        pod = event.get("involvedObject", {}).get("name", "")
        found = _ASSIGNED.search(event.get("message") or event.get("note") or "")
        if pod.startswith(prefix) and found:
            placed[pod] = found.group(1)
    return placed


def finished(hollow: HollowCluster, job: str) -> str | None:
    """``Complete`` or ``Failed`` once Job ``job`` finished, else None."""
    found = one(hollow, "job", job)
    return next((kind for kind in ("Complete", "Failed") if holds(found, kind)), None)
