"""The state of a Job (fleet/tools/doctor/jobs.py): refused by the quota, failed with its exit code, its pod gone
at the deadline."""

from __future__ import annotations

from kubernetes import client as k8s

from fleet.tools.doctor.messages import FAILED_CREATE, NOT_TRIGGERED
from tests.tools.doctor.support import leaf_of, pending_row, row_of
from tests.tools.doctor.world import ago, event, healthy, job_pod, make_pending


def test_a_quota_that_refuses_the_pod_is_named_from_the_jobs_failed_create_event(fleet, run_doctor):
    cluster = leaf_of(fleet)
    world = healthy(fleet, cluster)
    pool = cluster.pools[0]
    make_pending(world, fleet, cluster, pool)
    the_job = next(j for j in world.jobs if j.metadata.labels["gpu"] == pool.card and not j.status.succeeded)
    world.pods = [p for p in world.pods if p.metadata.labels.get("job-name") != the_job.metadata.name]
    limit = pool.max_nodes * pool.accelerators_per_node
    world.events.append(
        event(
            the_job,
            FAILED_CREATE,
            f'Error creating: pods "{the_job.metadata.name}-q8r2m" is forbidden: exceeded quota: benchmarks, '
            f"requested: requests.{pool.resource}=1, used: requests.{pool.resource}={limit}, "
            f"limited: requests.{pool.resource}={limit}",
            "job-controller",
            "Warning",
        )
    )
    result = run_doctor(world, cluster.name)
    assert result.status == 1
    row = pending_row(result, fleet, cluster, pool)
    assert "FAIL" in row and "ResourceQuota benchmarks refuses its pod" in row
    assert f"requests.{pool.resource}={limit}" in row and "describe resourcequota benchmarks" in row


def test_a_failed_benchmark_names_the_exit_code_and_the_logs_command(fleet, run_doctor):
    cluster = leaf_of(fleet)
    world = healthy(fleet, cluster)
    pool = cluster.pools[0]
    bench = next(b for b in fleet.benchmarks(cluster) if b.pool is pool and not b.schedule)
    the_job = world.job_of(bench.workload.name, pool.card)
    the_job.status = k8s.V1JobStatus(
        failed=1,
        start_time=ago(3000),
        conditions=[
            k8s.V1JobCondition(
                type="Failed",
                status="True",
                reason="BackoffLimitExceeded",
                message="Job has reached the specified backoff limit",
            )
        ],
    )
    pod = next(p for p in world.pods if p.metadata.labels.get("job-name") == the_job.metadata.name)
    pod.status = k8s.V1PodStatus(
        phase="Failed",
        container_statuses=[
            k8s.V1ContainerStatus(
                name="workload",
                image=bench.workload.spec.image,
                image_id="",
                ready=False,
                restart_count=0,
                state=k8s.V1ContainerState(terminated=k8s.V1ContainerStateTerminated(exit_code=3, reason="Error")),
            )
        ],
    )
    result = run_doctor(world, cluster.name)
    assert result.status == 1
    row = pending_row(result, fleet, cluster, pool)
    assert "FAIL" in row and "BackoffLimitExceeded" in row and "exited with code 3 (Error)" in row, result.out
    assert f"logs job/{the_job.metadata.name} -c workload" in row


def test_a_probe_whose_pod_never_got_a_node_says_why_after_its_deadline(fleet, run_doctor):
    """At the deadline the Job controller deletes the Pending pod; the autoscaler's events about it remain."""
    cluster = leaf_of(fleet)
    world = healthy(fleet, cluster)
    pool = cluster.pools[-1]
    run = next(
        j for j in world.jobs if j.metadata.labels["workload"] == "probe" and j.metadata.labels["gpu"] == pool.card
    )
    run.status = k8s.V1JobStatus(
        failed=1,
        start_time=ago(4000),
        conditions=[
            k8s.V1JobCondition(
                type="Failed",
                status="True",
                reason="DeadlineExceeded",
                message="Job was active longer than specified deadline",
            )
        ],
    )
    gone = job_pod(run, phase="Pending")
    world.pods = [p for p in world.pods if p.metadata.labels.get("job-name") != run.metadata.name]
    world.events.append(
        event(
            gone,
            NOT_TRIGGERED,
            f"pod didn't trigger scale-up: 1 Insufficient {pool.resource}, 2 node(s) didn't match Pod's node "
            "affinity/selector",
            "cluster-autoscaler",
        )
    )
    result = run_doctor(world, cluster.name)
    assert result.status == 1
    row = row_of(result.out, f"probe of pool {pool.name}")
    assert "FAIL" in row and "DeadlineExceeded" in row and f"its pod {gone.metadata.name} never ran" in row
    assert f"node template of pool {pool.name} has no {pool.resource}" in row and "logs job/" not in row
