"""Workloads that name a queue under the mock engine (components/kubernetes/queued_jobs.py, benchmark.py
``dispatched``), on the queued fleet of the tests (tests/helpers.py QUEUED with QUEUED_TRACKER): their Jobs once on
the manager with the queue's label and no pool; and on every worker that may be given one, what MultiKueue does not
copy (kueue v0.19.2 job_multikueue_adapter.go ``SyncJob`` creates the Job alone, in its own namespace): the ConfigMaps
it mounts under the same names, its credentials Secret from the worker's own secret config, its egress policy and the
PodMonitor that scrapes it."""

from __future__ import annotations

import pytest

from fleet.model.core import pod_contract
from fleet.model.loader import load_fleet
from fleet.tools.engine.plan import plan_fleet
from tests.helpers import QUEUED_STACKS, QUEUED_TRACKER, by_type, queued, queued_workloads_dir, write_policy

JOB = "kubernetes:batch/v1:Job"
CRONJOB = "kubernetes:batch/v1:CronJob"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
SECRET = "kubernetes:core/v1:Secret"
POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
POD_MONITOR = "kubernetes:monitoring.coreos.com/v1:PodMonitor"
CREDENTIALS = {"AWS_ACCESS_KEY_ID": {"secure": "v1:aWQ="}, "AWS_SECRET_ACCESS_KEY": {"secure": "v1:c2VjcmV0"}}


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    """Every stack of the queued fleet with queued workloads; each worker has the loader's credentials."""
    tmp = tmp_path_factory.mktemp("queued-jobs")
    stacks_config = {
        name: {**config, "gpu-fleet:workloadSecrets": {"loader": CREDENTIALS}} if name != "control" else config
        for name, config in QUEUED_STACKS.items()
    }
    policy, stacks = write_policy(tmp, queued(QUEUED_TRACKER), stacks_config)
    workloads = queued_workloads_dir(tmp)
    fleet = load_fleet(policy, workloads)
    plans = {p.stack: p for p in plan_fleet(fleet, policy, stacks_dir=stacks, workloads_dir=workloads)}
    return fleet, plans


def _mounted_config_maps(pod: dict) -> set[str]:
    return {v["configMap"]["name"] for v in pod["volumes"] if "configMap" in v}


def test_the_manager_declares_each_queued_job_once_with_its_queues_label_and_no_pool(planned):
    fleet, plans = planned
    manager = plans[fleet.dispatch.manager]
    jobs = {(r.inputs["metadata"]["labels"]["workload"], r.inputs["metadata"]["labels"]["gpu"]): r for r in
            by_type(manager, JOB)}  # fmt: skip
    expected = {(j.workload.name, j.card): j for j in fleet.queued_jobs()}
    assert sorted(jobs) == sorted(expected) and expected
    for key, job in expected.items():
        inputs = jobs[key].inputs
        assert inputs["metadata"]["labels"][pod_contract.QUEUE_NAME_LABEL] == job.queue.name
        assert inputs["metadata"]["namespace"] == pod_contract.BENCHMARK_NAMESPACE
        pod = inputs["spec"]["template"]["spec"]
        # the worker's flavor adds its pool's selector and tolerations; the affinity keeps the card
        assert "nodeSelector" not in pod and "tolerations" not in pod
        assert pod["affinity"] == fleet.queued_affinity(job)
        labels = inputs["spec"]["template"]["metadata"]["labels"]
        assert labels["workload"] == job.workload.name and labels["gpu"] == job.card
        assert "cluster" not in labels and "cloud" not in labels  # federation names the worker that ran it
        env = {e["name"] for c in pod["containers"] for e in c.get("env", [])}
        assert "BENCHMARK_CLUSTER" not in env and "BENCHMARK_GPU" in env
        # no pod runs on the manager: it holds no ConfigMap of the workload, the workers do
        manager_maps = {r.inputs["metadata"]["name"] for r in by_type(manager, CONFIG_MAP)}
        assert not _mounted_config_maps(pod) & manager_maps
    # and the workers run none of them per cluster
    for worker in fleet.dispatch.workers:
        names = {r.inputs["metadata"]["labels"].get("workload") for r in by_type(plans[worker], JOB)}
        assert not names & set(fleet.queued), worker


def test_the_workers_have_what_a_dispatched_job_needs(planned):
    fleet, plans = planned
    manager = plans[fleet.dispatch.manager]
    checked = 0
    for job in by_type(manager, JOB):
        workload = job.inputs["metadata"]["labels"]["workload"]
        pod = job.inputs["spec"]["template"]["spec"]
        secrets = {e["valueFrom"]["secretKeyRef"]["name"] for c in pod["containers"] for e in c.get("env", [])
                   if "valueFrom" in e and "secretKeyRef" in e["valueFrom"]}  # fmt: skip
        for worker in fleet.dispatch.workers:
            if not any(b.workload.name == workload for b in fleet.dispatched_to(fleet.clusters[worker])):
                continue
            plan = plans[worker]
            maps = {r.inputs["metadata"]["name"]: r.inputs for r in by_type(plan, CONFIG_MAP)}
            for name in _mounted_config_maps(pod):
                assert name in maps, (worker, name)
                assert maps[name]["metadata"]["namespace"] == job.inputs["metadata"]["namespace"]
            have = {r.inputs["metadata"]["name"] for r in by_type(plan, SECRET)}
            assert secrets <= have, (worker, secrets - have)
            monitors = by_type(plan, POD_MONITOR)
            part_of = pod_contract.BENCHMARK_PART_OF
            assert any(m.inputs["spec"]["selector"]["matchLabels"].get("app.kubernetes.io/part-of") == part_of
                       for m in monitors)  # fmt: skip
            if fleet.workloads[workload].spec.egress:
                egress = [r for r in by_type(plan, POLICY) if r.name.endswith(f"{workload}-egress")]
                assert egress and egress[0].inputs["spec"]["podSelector"]["matchLabels"]["workload"] == workload
            checked += 1
    assert checked >= 2 * len(fleet.dispatch.workers) - 1
    # the loader's credentials come from each worker's own secret config, and really exist there
    assert all(any("loader-credentials" in r.name for r in by_type(plans[w], SECRET)) for w in fleet.dispatch.workers)


def test_per_cluster_workloads_stay_per_cluster(planned):
    fleet, plans = planned
    for name, cluster in fleet.clusters.items():
        cron = {r.inputs["metadata"]["labels"]["workload"] for r in by_type(plans[name], CRONJOB)
                if r.inputs["metadata"]["labels"].get("workload") in fleet.placements}  # fmt: skip
        assert cron == {b.workload.name for b in fleet.benchmarks(cluster) if b.schedule}


def test_the_manager_does_not_diff_what_kueue_writes_on_a_queued_job(planned):
    # Kueue's Job webhook on the manager suspends the Job and sets spec.managedBy (kueue v0.19.2
    # pkg/controller/jobs/job/job_webhook.go Default); managedBy is immutable (kubernetes v1.36.3
    # pkg/apis/batch/validation ValidateJobSpecUpdate): a refresh that tried to undo either would fail or rerun it
    fleet, plans = planned
    jobs = by_type(plans[fleet.dispatch.manager], JOB)
    assert jobs
    for job in jobs:
        assert {"spec.suspend", "spec.managedBy"} <= set(job.ignore_changes), job.name
        assert "suspend" not in job.inputs["spec"] and "managedBy" not in job.inputs["spec"]
