"""How a benchmark pod hands its log to the mtail sidecar: one place for paths, ports and flags.

The workload appends its output to ``LOG_DIR/<workload>.log`` on a shared ``emptyDir``. An init container
creates that file empty before anything else starts, because mtail reads a file it sees for the first time
from its end: lines written before mtail opened the file would be lost.
"""

from __future__ import annotations

LOG_DIR = "/var/log/benchmark"
PROGRAMS_DIR = "/etc/mtail"
METRICS_PORT = 3903
METRICS_PORT_NAME = "mtail"
# Seconds the pod stays up after the workload's last line, so Prometheus scrapes the final values at
# least twice (two 30 s intervals plus margin) before the pod ends and its PodMonitor target disappears.
LINGER_SECONDS = 75


def log_file(workload: str) -> str:
    """The log file the workload appends to and mtail tails."""
    return f"{LOG_DIR}/{workload}.log"


def mtail_args(programs_dir: str = PROGRAMS_DIR, logs: str = f"{LOG_DIR}/*.log", port: int = METRICS_PORT) -> list[str]:
    """mtail's command line in the sidecar (and in the tests that prove the arrangement loses no line)."""
    return [
        "--progs",
        programs_dir,
        "--logs",
        logs,
        "--port",
        str(port),
        "--logtostderr",
        "--emit_prog_label=false",
    ]
