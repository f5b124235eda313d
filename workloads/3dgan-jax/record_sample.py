#!/usr/bin/env python3
"""Record ``sample.log`` by really running files/gan3d_jax.py as a multi-worker job on this machine's CPU.

Each sweep point runs its workers as separate processes joined by ``jax.distributed`` over localhost, with the
variables Kubeflow Trainer's ``jax`` policy sets in a TrainJob (``JAX_NUM_PROCESSES``, ``JAX_PROCESS_ID``,
``JAX_COORDINATOR_ADDRESS``); each process sees ``--devices-per-worker`` CPU devices
(``--xla_force_host_platform_device_count``) and is pinned to one CPU core of its own (XLA's CPU backend
otherwise spreads one process over every core), so a worker stands for one node and the job's cores for its
cards. One point is interrupted after its first epoch and started again as restart attempt 1
from its checkpoint, as JobSet restarts a job after a preemption. The output of every worker of every point is
appended to sample.log in that order; the mtail program's lines carry the point and the worker.

Needs a Python with ``jax==0.10.2`` (CPU): ``python -m venv /tmp/jax && /tmp/jax/bin/pip install jax==0.10.2``,
then ``/tmp/jax/bin/python workloads/3dgan-jax/record_sample.py`` on an otherwise idle machine (another load slows
the one-worker point and inflates the speed-ups). It takes about 11 minutes on two cores.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "files" / "gan3d_jax.py"
# (workers, CPU devices per worker): 1, 2 and 4 accelerators in all
POINTS = ((1, 1), (2, 1), (2, 2))
TRAINING = ["--epochs", "3", "--samples-per-epoch", "8", "--batch-per-device", "1"]
SINGLE_THREAD = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"


def pin(worker: int):
    """A function that pins the calling (child) process to its worker's core."""
    cores = sorted(os.sched_getaffinity(0))
    core = cores[worker % len(cores)]
    return lambda: os.sched_setaffinity(0, {core})


def run_point(workers: int, devices: int, port: int, extra: list[str], attempt: int, stop_after: str = "") -> list[str]:
    """Run one job to its end (or until a worker prints ``stop_after``); every worker's output, in worker order."""
    procs = []
    for worker in range(workers):
        env = dict(os.environ)
        env.update(
            JAX_PLATFORMS="cpu",
            XLA_FLAGS=f"--xla_force_host_platform_device_count={devices} {SINGLE_THREAD}",
            PYTHONUNBUFFERED="1",
            GPUFLEET_RESTART_ATTEMPT=str(attempt),
        )
        if workers > 1:
            env.update(
                JAX_NUM_PROCESSES=str(workers),
                JAX_PROCESS_ID=str(worker),
                JAX_COORDINATOR_ADDRESS=f"localhost:{port}",
            )
        procs.append(
            subprocess.Popen(
                [sys.executable, str(SCRIPT), *TRAINING, *extra],
                env=env,
                preexec_fn=pin(worker),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    outputs: list[list[str]] = [[] for _ in procs]
    stopped = False
    assert procs[0].stdout is not None
    for text in procs[0].stdout:  # worker 0 paces the job: the others wait on its collectives
        outputs[0].append(text)
        if stop_after and text.startswith(stop_after):
            for proc in procs:
                proc.kill()
            stopped = True
            break
    for i, proc in enumerate(procs):
        rest, _ = proc.communicate()
        outputs[i].extend((rest or "").splitlines(keepends=True))
        if not stopped and proc.returncode != 0:
            sys.exit(f"worker {i} of {workers}x{devices} failed:\n{''.join(outputs[i])}")
    return [text for output in outputs for text in output]


def main() -> int:
    """Run every point and write sample.log."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE / "sample.log")
    args = parser.parse_args()
    lines: list[str] = []
    port = 29611
    with tempfile.TemporaryDirectory() as checkpoints:
        for workers, devices in POINTS:
            port += 1
            print(f"{workers} workers x {devices} devices", file=sys.stderr, flush=True)
            if (workers, devices) == (2, 1):  # the restarted point
                extra = ["--checkpoint-dir", checkpoints]
                lines += run_point(workers, devices, port, extra, attempt=0, stop_after="gan3d-jax epoch epoch=1 ")
                port += 1
                lines += run_point(workers, devices, port, extra, attempt=1)
            else:
                lines += run_point(workers, devices, port, [], attempt=0)
    args.out.write_text("".join(lines), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
