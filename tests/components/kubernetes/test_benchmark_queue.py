"""The benchmark queue under the mock engine (components/kubernetes/benchmark_queue.py, benchmark.py ``queue``): every
benchmark and probe Job of a cluster names its LocalQueue, whose ClusterQueue holds each card pool at its capacity, so
Kueue 0.19.2 runs a card's Jobs in turn; Kueue runs on a cluster that only benchmarks; a cluster too old for Kueue
starts its Jobs at once, as before, and says so."""

from __future__ import annotations

import pytest
import yaml

from components.kubernetes.benchmark import spec_hash
from fleet.model.benchmark_queue.quotas import flavor_quota
from fleet.model.core import pod_contract
from fleet.model.loader import load_fleet
from fleet.tools.engine.plan import StackPlan, plan_fleet
from tests.helpers import BENCHMARK_QUEUE_POLICY as POLICY
from tests.helpers import BENCHMARK_QUEUE_STACKS as STACKS
from tests.helpers import FIXTURE_WORKLOADS, by_type, kueue_flavor, write_policy

JOB = "kubernetes:batch/v1:Job"
CRONJOB = "kubernetes:batch/v1:CronJob"
KUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:"
RELEASE = "kubernetes:helm.sh/v3:Release"
NAMESPACE = "kubernetes:core/v1:Namespace"


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    policy, stacks = write_policy(tmp_path_factory.mktemp("bench-queue"), POLICY, STACKS)
    fleet = load_fleet(policy, FIXTURE_WORKLOADS)
    plans = {p.stack: p for p in plan_fleet(fleet, policy, stacks_dir=stacks, workloads_dir=FIXTURE_WORKLOADS)}
    return fleet, plans


def _kind(plan: StackPlan, kind: str) -> dict[tuple[str | None, str], dict]:
    return {
        (r.inputs["metadata"].get("namespace"), r.inputs["metadata"]["name"]): r.inputs
        for r in by_type(plan, KUEUE + kind)
    }


def _kueue_config(plan: StackPlan) -> dict:
    kueue = next(r for r in by_type(plan, RELEASE) if r.inputs["chart"].endswith("kueue"))
    return yaml.safe_load(kueue.inputs["values"]["managerConfig"]["controllerManagerConfigYaml"])


def test_every_benchmark_and_probe_job_names_the_benchmark_queue(planned):
    fleet, plans = planned
    for stack in ("gke-bench", "aks-bench"):
        plan = plans[stack]
        jobs, crons = by_type(plan, JOB), by_type(plan, CRONJOB)
        assert len(jobs) + len(crons) == len(fleet.workload_jobs(fleet.cluster(stack))) and crons, stack
        for job in jobs:
            assert job.inputs["metadata"]["labels"][pod_contract.QUEUE_NAME_LABEL] == pod_contract.BENCHMARK_QUEUE
            # Kueue's webhook suspends it and Kueue resumes it: Pulumi neither sets nor diffs spec.suspend
            assert "suspend" not in job.inputs["spec"] and "spec.suspend" in job.ignore_changes
        for cron in crons:  # each Job the CronJob starts carries the label; Kueue's webhook suspends it
            template = cron.inputs["spec"]["jobTemplate"]
            assert template["metadata"]["labels"][pod_contract.QUEUE_NAME_LABEL] == pod_contract.BENCHMARK_QUEUE
            assert "suspend" not in template["spec"]
        assert {(ns, name) for ns, name in _kind(plan, "LocalQueue")} >= {
            (pod_contract.BENCHMARK_NAMESPACE, pod_contract.BENCHMARK_QUEUE)
        }


def test_a_job_that_starts_queueing_is_a_new_job(planned):
    """Kueue refuses a queue-name label added to a Job that is not suspended: the queue is in the name's hash."""
    _, plans = planned
    for job in by_type(plans["gke-bench"], JOB):
        spec, name = job.inputs["spec"], job.inputs["metadata"]["name"]
        queue = {pod_contract.QUEUE_NAME_LABEL: pod_contract.BENCHMARK_QUEUE}
        assert name.endswith(spec_hash([spec, queue])) and not name.endswith(spec_hash(spec))


def test_the_queue_holds_each_card_pool_at_its_capacity(planned):
    fleet, plans = planned
    for stack in ("gke-bench", "aks-bench"):
        cluster = fleet.cluster(stack)
        queue = _kind(plans[stack], "ClusterQueue")[(None, pod_contract.BENCHMARK_CLUSTER_QUEUE)]["spec"]
        (group,) = queue["resourceGroups"]
        covered = group["coveredResources"]
        flavors = {f["name"]: f["resources"] for f in group["flavors"]}
        assert list(flavors) == [pod_contract.benchmark_flavor(p.name) for p in cluster.pools]
        for pool in cluster.pools:
            resources = flavors[pod_contract.benchmark_flavor(pool.name)]
            # Kueue: every flavor lists the group's resources in their order
            assert [r["name"] for r in resources] == covered
            held = {r["name"]: r["nominalQuota"] for r in resources}
            assert held[pool.resource] == str(pool.max_nodes * pool.units_per_node) == str(flavor_quota(pool))
            others = {r for r in covered if r.count("/") and r != pool.resource}
            assert all(held[r] == "0" for r in others)
    aks = _kind(plans["aks-bench"], "ClusterQueue")[(None, pod_contract.BENCHMARK_CLUSTER_QUEUE)]["spec"]
    t4 = aks["resourceGroups"][0]["flavors"][0]["resources"]
    assert {r["name"]: r["nominalQuota"] for r in t4}["nvidia.com/gpu"] == "4"  # 2 nodes x 2 slices
    gke = _kind(plans["gke-bench"], "ClusterQueue")[(None, pod_contract.BENCHMARK_CLUSTER_QUEUE)]["spec"]
    assert gke["resourceGroups"][0]["coveredResources"] == ["cpu", "google.com/tpu", "memory", "nvidia.com/gpu"]


def test_kueue_matches_each_job_to_its_own_pools_flavor_and_leaves_its_template_as_it_is(planned):
    fleet, plans = planned
    for stack in ("gke-bench", "aks-bench"):
        plan = plans[stack]
        flavors = {name: spec["spec"] for (_, name), spec in _kind(plan, "ResourceFlavor").items()}
        queue = _kind(plan, "ClusterQueue")[(None, pod_contract.BENCHMARK_CLUSTER_QUEUE)]["spec"]
        order = [(f["name"], flavors[f["name"]]["nodeLabels"]) for f in queue["resourceGroups"][0]["flavors"]]
        pools = {p.card: p for p in fleet.cluster(stack).pools}
        templates = [j.inputs["spec"]["template"] for j in by_type(plan, JOB)]
        templates += [c.inputs["spec"]["jobTemplate"]["spec"]["template"] for c in by_type(plan, CRONJOB)]
        for template in templates:
            pod = template["spec"]
            pool = pools[template["metadata"]["labels"]["gpu"]]
            assert kueue_flavor(pod, order) == pod_contract.benchmark_flavor(pool.name)
            flavor = flavors[pod_contract.benchmark_flavor(pool.name)]
            # admission merges the flavor's labels and tolerations into the template: nothing new to add
            assert flavor["nodeLabels"].items() <= template["spec"]["nodeSelector"].items()
            assert "tolerations" not in flavor


def test_kueue_runs_where_a_cluster_only_benchmarks_and_manages_its_benchmark_namespaces(planned):
    _, plans = planned
    gke = plans["gke-bench"]
    config = _kueue_config(gke)
    assert config["integrations"]["frameworks"] == ["batch/job"]
    assert "waitForPodsReady" not in config  # no sweep, no queue: a Job's deadline still bounds a lost scale-up
    # the uploader needs root: its Jobs are in benchmarks-root, which Kueue must manage and the queue admit from
    both = [pod_contract.BENCHMARK_NAMESPACE, pod_contract.ROOT_BENCHMARK_NAMESPACE]
    selector = {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": both}]}
    assert config["managedJobsNamespaceSelector"] == selector
    queue = _kind(gke, "ClusterQueue")[(None, pod_contract.BENCHMARK_CLUSTER_QUEUE)]["spec"]
    assert queue["namespaceSelector"] == selector
    assert {ns for ns, name in _kind(gke, "LocalQueue") if name == pod_contract.BENCHMARK_QUEUE} == set(both)
    names = {r.inputs["metadata"]["name"] for r in by_type(gke, NAMESPACE)}
    assert pod_contract.KUEUE_NAMESPACE in names and pod_contract.TRAINER_NAMESPACE not in names
    aks = _kueue_config(plans["aks-bench"])
    assert aks["managedJobsNamespaceSelector"] == {
        "matchLabels": {"kubernetes.io/metadata.name": pod_contract.BENCHMARK_NAMESPACE}
    }


def test_a_cluster_too_old_for_kueue_starts_its_jobs_at_once_and_says_so(planned):
    _, plans = planned
    old = plans["cern-old"]
    assert by_type(old, JOB) and not [r for r in old.registrations if r.type.startswith(KUEUE)]
    assert not [r for r in by_type(old, RELEASE) if r.inputs["chart"].endswith("kueue")]
    for job in by_type(old, JOB):
        assert pod_contract.QUEUE_NAME_LABEL not in job.inputs["metadata"]["labels"] and not job.ignore_changes
        assert job.inputs["metadata"]["name"].endswith(spec_hash(job.inputs["spec"]))  # the name it always had
    for cron in by_type(old, CRONJOB):
        assert pod_contract.QUEUE_NAME_LABEL not in cron.inputs["spec"]["jobTemplate"]["metadata"]["labels"]
    warnings = [f.message for f in old.findings if f.level == "warning"]
    assert any("benchmark Jobs all start at once" in w and "v1.28.9-rancher1" in w for w in warnings), warnings
