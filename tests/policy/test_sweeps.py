"""policy/gpufleet_policies/sweeps.py and the sweep side of the pool and benchmark-pod policies, on the fixture
fleet's own sweep (fix-gke: sweeper on l4 over 1, 2 and 8 cards); each rule fails once."""

from __future__ import annotations

import copy

from fleet.model.core.pools import CARDS_PER_NODE_LABEL
from fleet.model.loader import load_fleet
from tests.policy.support import GKE_POOL, POLICY, WORKLOADS, assert_violation, check, only

TRAIN_JOB = "kubernetes:trainer.kubeflow.org/v1alpha1:TrainJob"
RUNTIME = "kubernetes:trainer.kubeflow.org/v1alpha1:TrainingRuntime"
RELEASE = "kubernetes:helm.sh/v3:Release"
SET = "sweep-set-matches-policy"


def of_type(regs, type_):
    return [r for r in regs if r.type == type_]


def worker_pod(runtime) -> dict:
    return runtime.inputs["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]


def test_the_fixture_sweep_is_planned_and_passes(plans, session):
    regs = plans["fix-gke"].registrations
    fleet = load_fleet(POLICY, WORKLOADS)
    points = fleet.sweep_points(fleet.cluster("fix-gke"))
    assert len(of_type(regs, TRAIN_JOB)) == len(points) == 3
    findings = session.analyze_registrations(copy.deepcopy(regs))
    assert not [f for f in findings if f.level == "mandatory"], [(f.policy, f.message) for f in findings]
    # no sweep elsewhere: no training operator there either; Kueue only for the benchmarks' own queue
    assert not of_type(plans["fix-eks"].registrations, TRAIN_JOB)
    releases = {r.inputs["name"] for r in of_type(plans["fix-eks"].registrations, RELEASE)}
    assert "kubeflow-trainer" not in releases and "kueue" in releases
    assert [r for r in plans["fix-eks"].registrations if r.name == "fix-eks-benchmark-cluster-queue"]


def test_a_trainjob_outside_the_queue_is_refused(plans, session):
    job = copy.deepcopy(of_type(plans["fix-gke"].registrations, TRAIN_JOB)[0])
    del job.inputs["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
    assert_violation(check(session, job), "sweep-job-queued", "without Kueue its workers start one by one")
    job.inputs["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "sweeps-gpu-l4"
    job.inputs["spec"]["runtimeRef"]["kind"] = "ClusterTrainingRuntime"
    assert_violation(check(session, job), "sweep-job-queued", "must name its own TrainingRuntime")


def test_a_missing_point_and_an_extra_one_are_found(plans, session):
    regs = copy.deepcopy(plans["fix-gke"].registrations)
    jobs = of_type(regs, TRAIN_JOB)
    regs.remove(jobs[0])
    findings = only(session.analyze_registrations(regs), SET)
    assert any("sweeps sweeper over" in f.message and "has no TrainJob with that many" in f.message for f in findings)
    regs = copy.deepcopy(plans["fix-gke"].registrations)
    biggest = next(j for j in of_type(regs, TRAIN_JOB) if "-n8-" in j.inputs["metadata"]["name"])
    biggest.inputs["spec"]["trainer"]["numNodes"] = 2  # 2 nodes of 8 cards
    findings = only(session.analyze_registrations(regs), SET)
    assert any("runs sweeper on 16 l4, which is not a sweep point" in f.message for f in findings)


def test_a_job_bigger_than_its_pool_is_found(plans, session):
    regs = copy.deepcopy(plans["fix-gke"].registrations)
    runtime = next(
        r for r in of_type(regs, RUNTIME) if worker_pod(r)["spec"]["nodeSelector"].get(CARDS_PER_NODE_LABEL) == "2"
    )
    node = next(c for c in worker_pod(runtime)["spec"]["containers"] if c["name"] == "node")
    node["resources"]["limits"]["nvidia.com/gpu"] = "4"
    job = next(
        j
        for j in of_type(regs, TRAIN_JOB)
        if j.inputs["spec"]["runtimeRef"]["name"] == runtime.inputs["metadata"]["name"]
    )
    job.inputs["spec"]["trainer"]["numNodes"] = 3
    findings = only(session.analyze_registrations(regs), SET)
    messages = "\n".join(f.message for f in findings)
    assert "asks 4 l4 per worker on g2-standard-24, which has 2" in messages
    assert "needs 3 nodes but pool gpu-l4-x2 has max_nodes 1" in messages


def test_a_job_of_one_node_more_than_its_pool_has_is_found(plans, session):
    """A TrainJob is refused as soon as it needs more nodes than its pool's max_nodes, even when the pool's cards
    (max_nodes x cards per node) would cover its cards: Kueue admits whole nodes. At max_nodes it is not."""
    cluster = load_fleet(POLICY, WORKLOADS).cluster("fix-gke")
    checked = 0
    for runtime in of_type(plans["fix-gke"].registrations, RUNTIME):
        size = worker_pod(runtime)["spec"]["nodeSelector"].get(CARDS_PER_NODE_LABEL)
        pool = cluster.pool_sized("l4", size)
        if pool is None or pool.accelerators_per_node < 2:
            continue  # one card per node: max_nodes and max_nodes x cards per node agree
        for nodes, refused in ((pool.max_nodes + 1, True), (pool.max_nodes, False)):
            regs = copy.deepcopy(plans["fix-gke"].registrations)
            job = next(
                j
                for j in of_type(regs, TRAIN_JOB)
                if j.inputs["spec"]["runtimeRef"]["name"] == runtime.inputs["metadata"]["name"]
            )
            job.inputs["spec"]["trainer"]["numNodes"] = nodes
            assert nodes <= pool.max_nodes * pool.accelerators_per_node  # the pool's cards would cover the job
            messages = "\n".join(f.message for f in only(session.analyze_registrations(regs), SET))
            needs = f"needs {nodes} nodes but pool {pool.name} has max_nodes {pool.max_nodes}"
            assert (needs in messages) == refused, messages
        checked += 1
    assert checked, "the fixture fleet has no sweep pool of several cards per node"


def test_operators_exactly_where_sweeps_run(plans, session):
    regs = copy.deepcopy(plans["fix-gke"].registrations)
    regs = [r for r in regs if not (r.type == RELEASE and r.inputs["name"] == "kueue")]
    assert_violation(only(session.analyze_registrations(regs), SET), SET, "fix-gke runs sweep jobs but has no kueue")
    # a cluster without sweeps, queues or the benchmark queue has no use for Kueue
    regs = [r for r in copy.deepcopy(plans["fix-eks"].registrations) if r.inputs.get("kind") != "ClusterQueue"]
    regs = [r for r in regs if not (r.type == RELEASE and r.inputs["name"] == "kueue")]
    kueue = copy.deepcopy(
        next(r for r in of_type(plans["fix-gke"].registrations, RELEASE) if r.inputs["name"] == "kueue")
    )
    kueue.urn = kueue.urn.replace("fix-gke", "fix-eks")
    regs.append(kueue)
    assert_violation(only(session.analyze_registrations(regs), SET), SET, "fix-eks runs no sweep but deploys kueue")


def test_a_sweep_pool_of_a_size_no_point_needs_is_refused(plans, session):
    pool = copy.deepcopy(
        next(r for r in of_type(plans["fix-gke"].registrations, GKE_POOL) if r.inputs["name"] == "gpu-l4-x8")
    )
    pool.inputs["nodeConfig"]["labels"][CARDS_PER_NODE_LABEL] = "4"
    assert_violation(check(session, pool), "gpu-pool-allowed-card", "sweep pool of 4 cards per node", "2, 8")


def test_sweep_workers_are_checked_as_benchmark_pods(plans, session):
    runtime = copy.deepcopy(next(r for r in of_type(plans["fix-gke"].registrations, RUNTIME)))
    pod = worker_pod(runtime)["spec"]
    pod["tolerations"] = []
    pod["securityContext"] = {}
    findings = check(session, runtime)
    assert_violation(findings, "benchmark-placement", "does not tolerate")
    assert only(findings, "pod-security-restricted")


def test_a_trainjob_named_with_a_leading_digit_is_refused(plans, session):
    job = copy.deepcopy(of_type(plans["fix-gke"].registrations, TRAIN_JOB)[0])
    job.inputs["metadata"]["name"] = "3dgan-jax-l4-n1-0a1b2c3d"
    assert_violation(check(session, job), "sweep-job-queued", "a DNS-1035 label (a letter first)")
    job.inputs["metadata"]["name"] = "sweep-" + "x" * 50
    assert_violation(check(session, job), "sweep-job-queued", "at most 48 characters")


KUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:"


def test_a_point_in_another_pools_queue_and_a_queue_of_two_flavors_are_refused(plans, session):
    """Kueue v0.19.2 charges a point to the first flavor of its queue that fits, matched on that flavor's own label
    keys: a point must sit in its own pool's queue, and that queue hold its pool's flavor alone."""
    regs = copy.deepcopy(plans["fix-gke"].registrations)
    big = next(j for j in of_type(regs, TRAIN_JOB) if "-n8-" in j.inputs["metadata"]["name"])
    small = next(j for j in of_type(regs, TRAIN_JOB) if "-n1-" in j.inputs["metadata"]["name"])
    big.inputs["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = small.inputs["metadata"]["labels"][
        "kueue.x-k8s.io/queue-name"
    ]
    findings = only(session.analyze_registrations(regs), SET)
    assert any("names the queue 'sweeps-gpu-l4'" in f.message and "not the pool's own" in f.message for f in findings)
    regs = copy.deepcopy(plans["fix-gke"].registrations)
    queues = {r.inputs["metadata"]["name"]: r for r in of_type(regs, KUEUE + "ClusterQueue")}
    card, sweep = queues["gpu-fleet-sweeps-gpu-l4"], next(q for n, q in queues.items() if n.endswith("-x8"))
    sweep.inputs["spec"]["resourceGroups"][0]["flavors"].append(
        copy.deepcopy(card.inputs["spec"]["resourceGroups"][0]["flavors"][0])
    )
    findings = only(session.analyze_registrations(regs), SET)
    assert any(f"the ClusterQueue {sweep.inputs['metadata']['name']} must hold the flavor" in f.message
               for f in findings), [f.message for f in findings]  # fmt: skip
