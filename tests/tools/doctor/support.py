"""Running ``python -m fleet doctor`` in the tests: on the fixture fleet (tests/fixtures/fleet), with its clock
stopped, and reading its table back row by row."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from fleet.model.core.clusters import Cluster
from fleet.model.core.fleet import Fleet
from fleet.model.core.pools import GpuPool
from fleet.tools.cli import build_parser
from fleet.tools.doctor.command import run
from tests.conftest import FIXTURES
from tests.tools.doctor.world import NOW

FLEET_DIR = FIXTURES / "fleet"
POLICY = FLEET_DIR / "fleet.yaml"
WORKLOADS = FLEET_DIR / "workloads"
STACKS = FLEET_DIR / "stacks"
BASE = ["doctor", "--policy", str(POLICY), "--workloads-dir", str(WORKLOADS), "--stacks-dir", str(STACKS)]


def doctor_at(argv: list[str], now: datetime = NOW) -> int:
    """``python -m fleet doctor ...`` as ``main`` runs it, with doctor's clock stopped at ``now``."""
    return run(build_parser().parse_args(argv), clock=lambda: now)


def leaf_of(fleet: Fleet) -> Cluster:
    """A leaf whose NVIDIA pools need the fleet's device plugin and which runs one-off and scheduled benchmarks."""
    for cluster in fleet.clusters.values():
        benches = fleet.benchmarks(cluster)
        if (
            not cluster.central
            and any(p.needs_device_plugin for p in cluster.pools)
            and any(b.schedule for b in benches)
            and any(not b.schedule for b in benches)
        ):
            return cluster
    raise AssertionError("the fixture fleet has no leaf with scheduled and one-off benchmarks on device-plugin pools")


@dataclass
class Result:
    status: int
    out: str
    err: str
    requests: list[tuple[str, str]]


def row_of(out: str, start: str) -> str:
    """The table line of the check starting with ``start``, with its problem and fix lines."""
    lines = out.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(start):
            block = [line]
            for follow in lines[i + 1 :]:
                if not follow.startswith(" "):
                    break
                block.append(follow.strip())
            return "\n".join(block)
    raise AssertionError(f"no row starting with {start!r} in:\n{out}")


def pending_row(result: Result, fleet: Fleet, cluster: Cluster, pool: GpuPool) -> str:
    bench = next(b for b in fleet.benchmarks(cluster) if b.pool is pool and not b.schedule)
    return row_of(result.out, f"benchmark {bench.workload.name} on {pool.card}")
