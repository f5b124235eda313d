"""The rows of the benchmarks and probes (fleet/tools/doctor/benchmarks.py)."""

from __future__ import annotations

from tests.tools.doctor.support import leaf_of, row_of
from tests.tools.doctor.world import healthy


def test_a_benchmark_without_its_job_is_not_found(fleet, run_doctor):
    cluster = leaf_of(fleet)
    world = healthy(fleet, cluster)
    bench = next(b for b in fleet.benchmarks(cluster) if not b.schedule)
    world.jobs = [
        j
        for j in world.jobs
        if j.metadata.labels.get("workload") != bench.workload.name or j.metadata.labels["gpu"] != bench.pool.card
    ]
    row = row_of(run_doctor(world, cluster.name).out, f"benchmark {bench.workload.name} on {bench.pool.card}")
    assert "FAIL" in row and "not found" in row and f"pulumi up --stack {cluster.name}" in row
