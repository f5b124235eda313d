"""One measured burst of the dispatch-rate benchmark: N small Jobs submitted at once to a queue, on the manager
(``dispatch``: admitted there, dispatched by MultiKueue, run on the worker) or on the worker itself (``launch``: its
own Kueue, Job controller, scheduler and KWOK making, placing and running the pods), followed by watches
(``benchmarks/dispatch_watch.py``) until every Job finished, then removed.

The Jobs are the one docs/policy-file.md has a user submit (tests/real/dispatch.py ``documented_job``), asking for
no card and a sliver of CPU and memory: the queue's ClusterQueues cover CPU and memory with quotas no node reaches
(components/kubernetes/training.py ``UNBOUNDED``), so every Job of the burst is admitted at once and what is measured
is the machinery (API calls, controllers), not how many cards the worker's pools hold (a card each would run them
eight at a time on cern-main, each for KWOK's 3 s).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from benchmarks.dispatch_stages import (
    JOB_STAGES,
    POD_STAGES,
    WORKLOAD_STAGES,
    job_stages,
    pod_stages,
    rates,
    workload_stages,
)
from benchmarks.dispatch_watch import StageWatch
from fleet.model.core.jobs import Queue
from fleet.model.core.pod_contract import BENCHMARK_NAMESPACE
from tests.e2e.processes import wait_for
from tests.real import dispatch
from tests.real.hollow import HollowCluster

RUN_LABEL = "gpu-fleet.bench/run"
#: What each Job's one container asks for (the benchmarks namespace's LimitRange fills in the rest).
SLIVER = {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "16Mi"}}
#: Time for the watches' kubectl to start and list before the burst (a watch started late still lists every object,
#: but at the instant of its listing).
WATCH_START_S = 5.0


def small_job(queue: Queue, name: str, run: str) -> dict[str, Any]:
    """The documented Job, for ``queue``, named ``name``, labelled (and its pod) with the run, asking for no card."""
    shown, _ = dispatch.documented_job()
    job = dispatch.for_queue(shown, queue, name)
    job["metadata"]["labels"][RUN_LABEL] = run
    template = job["spec"]["template"]
    template.setdefault("metadata", {}).setdefault("labels", {})[RUN_LABEL] = run
    for container in template["spec"]["containers"]:
        container["resources"] = json.loads(json.dumps(SLIVER))
    return job


def _owner_in_run(run: str):
    def key(obj: Mapping[str, Any]) -> str | None:
        owners = [o["name"] for o in obj["metadata"].get("ownerReferences", []) if o.get("kind") == "Job"]
        return owners[0] if owners and owners[0].startswith(f"{run}-") else None

    return key


def _name(obj: Mapping[str, Any]) -> str:
    return str(obj["metadata"]["name"])


def measure(
    kind: str,
    setting: str,
    manager: HollowCluster,
    worker: HollowCluster,
    queue: Queue,
    jobs: int,
    run: str,
    patience_s: float,
) -> dict[str, Any]:
    """One burst of ``jobs`` Jobs named ``<run>-NNN`` (``kind``: ``dispatch`` on the manager, ``launch`` on the
    worker), measured until every Job finished or ``patience_s`` passed (then the counts say how many got how far)."""
    selector = f"{RUN_LABEL}={run}"
    submit_to = manager if kind == "dispatch" else worker
    watches = {
        "worker_jobs": StageWatch(str(worker.kubeconfig), "jobs", BENCHMARK_NAMESPACE, _name, job_stages, selector),
        "worker_pods": StageWatch(str(worker.kubeconfig), "pods", BENCHMARK_NAMESPACE, _name, pod_stages, selector),
    }
    stages = {"worker_jobs": JOB_STAGES, "worker_pods": POD_STAGES}
    workloads = "manager_workloads" if kind == "dispatch" else "worker_workloads"
    watches[workloads] = StageWatch(str(submit_to.kubeconfig), "workloads.kueue.x-k8s.io", BENCHMARK_NAMESPACE,
                                    _owner_in_run(run), workload_stages)  # fmt: skip
    stages[workloads] = WORKLOAD_STAGES
    for watch in watches.values():
        watch.start()
    items = [small_job(queue, f"{run}-{i:03d}", run) for i in range(jobs)]
    batch = {"apiVersion": "v1", "kind": "List", "items": items}
    try:
        time.sleep(WATCH_START_S)
        load_before = os.getloadavg()
        start = time.monotonic()
        submit_to.kubectl("-n", BENCHMARK_NAMESPACE, "create", "-f", "-", input=json.dumps(batch))
        submitted = time.monotonic() - start
        done = watches[workloads] if kind == "dispatch" else watches["worker_jobs"]
        stage = "finished" if kind == "dispatch" else "complete"
        try:
            wait_for(f"{jobs} Jobs of {run} to finish", lambda: done.count(stage) >= jobs,
                     time.monotonic() + patience_s, [])  # fmt: skip
        except AssertionError:
            pass  # the counts below say how far they got
        seconds = time.monotonic() - start
        load_after = os.getloadavg()
    finally:
        for watch in watches.values():
            watch.stop()
    return {
        "kind": kind,
        "setting": setting,
        "jobs": jobs,
        "run": run,
        "submit_s": round(submitted, 2),
        "seconds": round(seconds, 1),
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in load_after],
        "parts": {
            part: {stage: asdict(r) for stage, r in rates(watch.snapshot(), stages[part], start).items()}
            for part, watch in watches.items()
        },
        "problems": [p for w in watches.values() for p in w.problems],
    }


def remove(run: str, *clusters: HollowCluster, patience_s: float) -> None:
    """Delete the run's Jobs (and so their pods and Workloads) on ``clusters``; wait until none is left, so that the
    next run starts on an empty namespace (its ResourceQuota counts Jobs)."""
    selector = f"{RUN_LABEL}={run}"
    for hollow in clusters:
        hollow.kubectl("-n", BENCHMARK_NAMESPACE, "delete", "jobs", "-l", selector, "--cascade=background",
                       "--wait=false")  # fmt: skip

    def gone() -> bool:
        for hollow in clusters:
            for resource in ("jobs", "pods"):
                left = hollow.kubectl("-n", BENCHMARK_NAMESPACE, "get", resource, "-l", selector, "-o", "name")
                if left.stdout.strip():
                    time.sleep(2)  # the controllers' work, not ours: ask again in a while
                    return False
        return True

    wait_for(f"the Jobs of {run} removed", gone, time.monotonic() + patience_s, [])
