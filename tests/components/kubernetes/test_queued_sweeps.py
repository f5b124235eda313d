"""Sweep points of a workload that names a queue (fleet/model/queues/queued_sweeps.py, components/kubernetes/
queued_sweeps.py), on the tests' own queued fleet (tests/helpers.py QUEUED: a Magnum site with one-T4 machines first,
then EKS and GKE, whose catalogue offers larger T4 machines) with ``sweeper`` swept over T4s through the gpu queue:
each point once on the manager as a TrainJob with the queue's label, the same TrainingRuntime on every worker that
holds it and nowhere else, the sweep pools and flavors the workers need, the manager's TrainJob rights and Kueue
integration, every new object against the upstream Kueue and Trainer CRDs, and the pack's rules."""

from __future__ import annotations

import copy

import pytest
import yaml

from components.kubernetes.multikueue import TRAINJOBS, worker_flavor_name
from fleet.model.core import pod_contract
from fleet.model.core.pools import CARDS_PER_NODE_LABEL
from fleet.model.core.taints import SWEEP_TAINT
from fleet.model.loader import load_fleet
from fleet.model.queues.dispatch import pool_capacity, quota
from fleet.tools.checks.schemas import CRDS_ENV, load_crds, schema_errors
from fleet.tools.engine.analyzer import PolicyPackSession
from fleet.tools.engine.plan import plan_fleet
from fleet.tools.engine.render import kubernetes_manifest
from tests.conftest import shared_data
from tests.helpers import QUEUED_STACKS, by_type, queued, queued_workloads_dir, write_policy

TRAINER = "kubernetes:trainer.kubeflow.org/v1alpha1:"
KUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:"
RELEASE = "kubernetes:helm.sh/v3:Release"
CLUSTER_ROLE = "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole"
ROLE = "kubernetes:rbac.authorization.k8s.io/v1:Role"
SWEPT = """\
workloads:
  tracker: {gpus: all, queue: gpu}
  sweeper: {gpus: [t4], scale: [1, 2, 4, 8, 16], queue: gpu}
"""


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("queued-sweeps")
    policy, stacks = write_policy(tmp, queued(SWEPT), QUEUED_STACKS)
    workloads = queued_workloads_dir(tmp)
    fleet = load_fleet(policy, workloads)
    plans = {p.stack: p for p in plan_fleet(fleet, policy, stacks_dir=stacks, workloads_dir=workloads)}
    return fleet, plans, policy, workloads


def _named(plan, kind: str, api: str = TRAINER) -> dict[str, dict]:
    return {r.inputs["metadata"]["name"]: r.inputs for r in by_type(plan, api + kind)}


def _charts(plan) -> set[str]:
    return {r.inputs["name"] for r in by_type(plan, RELEASE)}


def _kueue_config(plan) -> dict:
    (release,) = [r.inputs for r in by_type(plan, RELEASE) if r.inputs["name"] == "kueue"]
    return yaml.safe_load(release["values"]["managerConfig"]["controllerManagerConfigYaml"])


def test_each_point_gets_the_shape_of_its_queues_first_worker_that_can_run_it(planned):
    fleet, *_ = planned
    shapes = {p.accelerators: (p.nodes, p.per_node) for p in fleet.queued_points()}
    first = fleet.dispatch.queues[0].clusters[0]
    t4 = fleet.clusters[first].pool("t4")
    # the Magnum site (one T4 per machine, no other machine) shapes the points its max_nodes allows; the cloud after
    # it in the queue, with larger T4 machines in the catalogue, the rest
    assert [n for n in shapes if shapes[n][1] == t4.accelerators_per_node] == [
        n for n in (1, 2, 4, 8, 16) if n <= t4.max_nodes
    ]
    for n, (nodes, per_node) in shapes.items():
        assert nodes * per_node == n
    # a worker holds a point on its card pool or on a sweep pool of the machine that fits the point's cards per node
    for name in fleet.dispatch.workers:
        cluster = fleet.clusters[name]
        for point, pool in fleet.queued_points_on(cluster):
            assert pool in cluster.all_pools and pool.card == point.card
            assert pool.accelerators_per_node >= point.per_node and pool.max_nodes >= point.nodes
    # no cluster sweeps it per cluster, and no queued batch Job is made of it
    assert all(not fleet.sweep_points(c) for c in fleet.clusters.values())
    assert {j.workload.name for j in fleet.queued_jobs()} == {"tracker"}


def test_the_manager_declares_each_point_once_as_a_trainjob_of_its_queue(planned):
    fleet, plans, *_ = planned
    manager = plans[fleet.dispatch.manager]
    jobs = _named(manager, "TrainJob")
    runtimes = _named(manager, "TrainingRuntime")
    assert len(jobs) == len(fleet.queued_points()) == 5
    for name, job in jobs.items():
        labels = job["metadata"]["labels"]
        assert labels[pod_contract.QUEUE_NAME_LABEL] == "gpu"
        assert job["spec"]["runtimeRef"] == {
            "apiGroup": "trainer.kubeflow.org",
            "kind": "TrainingRuntime",
            "name": name,
        }
        worker_pod = runtimes[name]["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
        # no pool: the worker's flavor adds it; no cluster: the federation does
        assert "nodeSelector" not in worker_pod["spec"] and "tolerations" not in worker_pod["spec"]
        assert "cluster" not in worker_pod["metadata"]["labels"]
    # the manager runs Trainer (its CRDs, webhooks) and integrates TrainJobs; no sweeps queue of its own
    assert {"kubeflow-trainer", "kueue"} <= _charts(manager)
    assert next(iter(TRAINJOBS)) in _kueue_config(manager)["integrations"]["frameworks"]
    assert "jobset.x-k8s.io/jobset" not in _kueue_config(manager)["integrations"]["frameworks"]
    assert not [n for n in _named(manager, "LocalQueue", KUEUE) if pod_contract.is_sweep_queue(n)]


def test_every_worker_holds_the_managers_runtime_of_its_points_and_runs_no_trainjob(planned):
    fleet, plans, *_ = planned
    manager_runtimes = _named(plans[fleet.dispatch.manager], "TrainingRuntime")
    for name in fleet.dispatch.workers:
        plan = plans[name]
        held = fleet.queued_points_on(fleet.clusters[name])
        runtimes = _named(plan, "TrainingRuntime")
        assert len(runtimes) == len(held)
        for runtime, spec in runtimes.items():
            assert manager_runtimes[runtime]["spec"] == spec["spec"]  # same name, same content
        assert not by_type(plan, TRAINER + "TrainJob")
        # Trainer and Kueue with TrainJobs on every worker: the manager watches TrainJobs on all of them
        assert {"kubeflow-trainer", "kueue"} <= _charts(plan)
        config = _kueue_config(plan)
        assert {"trainer.kubeflow.org/trainjob", "jobset.x-k8s.io/jobset", "batch/job"} <= set(
            config["integrations"]["frameworks"]
        )
        assert config["waitForPodsReady"]["blockAdmission"] is False  # training.py BLOCK_ADMISSION
        # the manager's rights there cover TrainJobs as they cover Jobs: made in benchmarks, watched everywhere
        granted = {
            (r.type.rsplit(":", 1)[-1], g, res)
            for r in by_type(plan, CLUSTER_ROLE) + by_type(plan, ROLE)
            if r.inputs["metadata"]["name"].startswith("gpu-fleet-multikueue")
            for rule in r.inputs["rules"]
            for g in rule["apiGroups"]
            for res in rule["resources"]
        }
        assert ("Role", "trainer.kubeflow.org", "trainjobs") in granted
        assert ("ClusterRole", "trainer.kubeflow.org", "trainjobs") in granted


def test_a_worker_offers_its_sweep_pools_first_in_its_queue_and_the_manager_counts_them(planned):
    fleet, plans, *_ = planned
    gpu = fleet.dispatch.queues[0]
    counted = 0
    for name in gpu.clusters:
        sweep_pools = fleet.queued_sweeps.sweep_pools_of(gpu.name, name)
        counted += sum(pool_capacity(p) for p in sweep_pools)
        queue = _named(plans[name], "ClusterQueue", KUEUE)[gpu.cluster_queue]
        flavors = [f["name"] for f in queue["spec"]["resourceGroups"][0]["flavors"]]
        assert flavors[: len(sweep_pools)] == [worker_flavor_name(p) for p in sweep_pools]
        flavor_objects = _named(plans[name], "ResourceFlavor", KUEUE)
        for pool in sweep_pools:
            spec = flavor_objects[worker_flavor_name(pool)]["spec"]
            assert spec["nodeLabels"][CARDS_PER_NODE_LABEL] == str(pool.count)
            assert SWEEP_TAINT.toleration() in spec["tolerations"]
            assert pool in fleet.clusters[name].sweep_pools  # and the worker's cloud builds the pool
    assert counted > 0
    manager_queue = _named(plans[fleet.dispatch.manager], "ClusterQueue", KUEUE)[gpu.cluster_queue]
    quotas = {
        r["name"]: r["nominalQuota"] for r in manager_queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
    }
    assert quotas[gpu.resource] == str(quota(gpu, fleet.clusters) + counted)


def test_every_new_object_fits_the_upstream_crds(planned):
    crds = load_crds(shared_data(CRDS_ENV, "k8s/crds", "the upstream CRD files"))
    fleet, plans, *_ = planned
    checked, bad = 0, []
    for stack, plan in plans.items():
        for reg in plan.registrations:
            if reg.type.startswith((TRAINER, KUEUE)):
                manifest = kubernetes_manifest(reg)
                checked += 1
                bad += [f"{stack} {manifest['kind']} {reg.name}: {e}" for e in schema_errors(manifest, "1.33", crds)]
    assert bad == []
    assert checked >= 2 * len(fleet.queued_points())
    job = kubernetes_manifest(by_type(plans[fleet.dispatch.manager], TRAINER + "TrainJob")[0])
    job["spec"]["trainer"]["numNode"] = job["spec"]["trainer"].pop("numNodes")
    assert schema_errors(job, "1.33", crds)


def test_the_pack_passes_the_plan_and_refuses_a_missing_stray_or_pinned_point(planned):
    fleet, plans, policy, workloads = planned
    manager = fleet.dispatch.manager
    job_type = TRAINER + "TrainJob"
    with PolicyPackSession(policy, workloads_dir=workloads) as pack:

        def mandatory(regs) -> str:
            return "\n".join(
                f"{f.policy}: {f.message}" for f in pack.analyze_registrations(regs) if f.level == "mandatory"
            )

        for stack, plan in plans.items():
            assert mandatory(copy.deepcopy(plan.registrations)) == "", stack
        # a point missing on the manager
        regs = copy.deepcopy(plans[manager].registrations)
        dropped = next(r for r in regs if r.type == job_type)
        regs.remove(dropped)
        assert "has no TrainJob for it" in mandatory(regs)
        # the manager's TrainJob declared on a worker, as if it swept per cluster
        worker = fleet.dispatch.workers[-1]
        stray = copy.deepcopy(dropped)
        stray.urn = stray.urn.replace(f"urn:pulumi:{manager}::", f"urn:pulumi:{worker}::")
        found = mandatory([*copy.deepcopy(plans[worker].registrations), stray])
        assert "sweep-job-queued" in found and "not its pool's 'sweeps-<pool>'" in found
        # a worker's runtime that names a pool (the flavor adds it), or loses its affinity
        regs = copy.deepcopy(plans[worker].registrations)
        runtime = next(r for r in regs if r.type == TRAINER + "TrainingRuntime")
        pod = runtime.inputs["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        pod["nodeSelector"] = {"gpu": "t4"}
        assert "must name no pool" in mandatory(regs)
        regs = copy.deepcopy(plans[worker].registrations)
        runtime = [r for r in regs if r.type == TRAINER + "TrainingRuntime"][-1]
        pod = runtime.inputs["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        pod["affinity"] = fleet.queued_point_affinity(fleet.queued_points()[0])  # another point's
        assert "must name no pool" in mandatory(regs)
