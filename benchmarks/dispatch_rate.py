"""How fast the fleet's queues dispatch: Jobs submitted on the queues' manager, admitted there, dispatched by the real
Kueue's MultiKueue to a worker and run there, and the worker's own pod launch rate, at Kueue client rates.

On the real tier's machinery (benchmarks/dispatch_setup.py): the shipped fleet's manager and the first worker of its
first GPU queue, each stack deployed by the real engine on a hollow control plane, Kueue 0.19.2 running for real on
both, KWOK running the pods. For each Kueue ``clientConnection`` (qps/burst) of ``--settings`` (set on both Kueues;
the first is the fleet's own), two bursts of ``--jobs`` small Jobs (benchmarks/dispatch_runs.py):

- **dispatch**: submitted on the manager to the queue: the rate at which the manager's Kueue reserves quota for
  them, MultiKueue makes each Job on the worker, the manager's admission check goes Ready, the pods run on the worker
  and the manager's Workloads finish;
- **launch**: submitted on the worker to its own copy of the queue: the rate at which its Kueue admits them and its
  Job controller, scheduler and KWOK make, place and run the pods.

Each rate is the number of objects over the time from the first to the last reaching the stage; the machine's load
average is noted before and after each burst (2 shared cores: the figures carry it). The manager's clients **to the
worker** are not in ``--settings``: kueue 0.19.2 builds them from the worker's kubeconfig alone, at client-go's
5 QPS and burst 10 (components/kubernetes/multikueue.py).

Must run in the real tier's network namespace, on built receivers:

    python -m tests.real.isolation .venv/bin/python -m benchmarks.dispatch_rate [--jobs 100] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks import tier_cli
from benchmarks.dispatch_stages import render
from components.kubernetes.training import kueue_configuration
from fleet.model.loader import POLICY_FILE
from tests.real import toolchain

#: The client rates measured by default: the fleet's (which is Kueue 0.19.2's own default, apis/config/v1beta2/
#: defaults.go), four times client-go's default, and client-go's default (k8s.io/client-go rest DefaultQPS,
#: DefaultBurst), at which the manager's clients to its workers run.
DEFAULT_SETTINGS = "fleet,20/40,5/10"
#: How long one burst may take before its figures are taken as they are.
RUN_PATIENCE_S = 1800.0


def parse_settings(text: str) -> list[tuple[float, int]]:
    """``fleet,20/40,5/10`` as (qps, burst) pairs; ``fleet``: the rate the fleet renders into Kueue's configuration."""
    shipped = kueue_configuration()["clientConnection"]
    out = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        if part == "fleet":
            out.append((float(shipped["qps"]), int(shipped["burst"])))
        else:
            qps, burst = part.split("/")
            out.append((float(qps), int(burst)))
    return out


def label(qps: float, burst: int) -> str:
    """A setting as the table shows it; the fleet's own marked."""
    shipped = kueue_configuration()["clientConnection"]
    mark = " (the fleet's; Kueue's default)" if (qps, burst) == (shipped["qps"], shipped["burst"]) else ""
    return f"{qps:g} / {burst}{mark}"


def run(
    jobs: int, settings: list[tuple[float, int]], log: Callable[[str], None], partial: Path | None = None
) -> dict[str, Any]:
    """Every figure, as plain data (the ``--json`` form); the runs so far written to ``partial`` after each one."""
    from benchmarks.dispatch_runs import measure, remove  # the receivers and the namespace are needed from here on
    from benchmarks.dispatch_setup import TwoClusters, two_cluster_policy

    began = time.monotonic()
    runs = []
    with tempfile.TemporaryDirectory(prefix="gpu-fleet-dispatch-") as tmp:
        policy, fleet, queue = two_cluster_policy(POLICY_FILE, Path(tmp))
        clusters = TwoClusters(fleet, policy, Path(tmp) / "tier")
        try:
            clusters.up(log)
            setup_s = time.monotonic() - began
            log(f"manager {clusters.manager_name} and worker {clusters.worker_name} up in {setup_s:.0f} s")
            manager, worker = clusters.manager.hollow, clusters.worker.hollow
            for index, (qps, burst) in enumerate(settings):
                clusters.kueue_client(qps, burst, log)
                for kind in ("dispatch", "launch"):
                    name = f"bench-{kind[0]}{index}"
                    where = "manager" if kind == "dispatch" else "worker"
                    log(f"{label(qps, burst)}: {jobs} Jobs submitted on the {where}...")
                    runs.append(measure(kind, label(qps, burst), manager, worker, queue, jobs, name, RUN_PATIENCE_S))
                    log(f"  done in {runs[-1]['seconds']:.0f} s, load {runs[-1]['load_after'][0]:.1f}")
                    if partial:
                        partial.write_text(json.dumps({"runs": runs, "partial": True}, indent=1), encoding="utf-8")
                    remove(name, manager, worker, patience_s=RUN_PATIENCE_S)
        finally:
            clusters.stop()
    return {
        "environment": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "kueue": str(toolchain.binary("kueue")),
        },
        "manager": fleet.dispatch.manager if fleet.dispatch else "",
        "worker": queue.clusters[0],
        "queue": queue.name,
        "setup_s": round(setup_s, 1),
        "total_s": round(time.monotonic() - began, 1),
        "runs": runs,
    }


def main(argv: list[str] | None = None) -> int:
    """Measure (inside the real tier's namespace) and print the tables; ``--render`` prints an earlier ``--json``."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.dispatch_rate", description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100, help="Jobs per burst (default 100; the benchmarks "
                        "namespace's quota allows 200 Jobs)")  # fmt: skip
    parser.add_argument("--settings", default=DEFAULT_SETTINGS, help="Kueue clientConnection qps/burst to measure, "
                        f"comma-separated; 'fleet' is the fleet's own (default {DEFAULT_SETTINGS})")  # fmt: skip
    tier_cli.add_output_options(parser)
    args = tier_cli.parse(parser, argv, render)
    if args is None:
        return 0
    if not 1 <= args.jobs <= 190:
        parser.error("--jobs must be 1 to 190 (the benchmarks namespace's quota counts 200 Jobs)")
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    report = run(args.jobs, parse_settings(args.settings), log, partial=args.json)
    print(render(report))
    print(f"setup (two stacks up) {report['setup_s']:.0f} s, whole run {report['total_s']:.0f} s")
    tier_cli.write_json(args.json, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
