"""Scaling sweeps under the mock engine (components/kubernetes/training.py, sweeps.py, the GKE and EKS sweep pools):
one TrainJob per point with the right accelerator count, Trainer and Kueue only where a sweep runs, the queue's
quotas, the workers' pods and their fencing."""

from __future__ import annotations

import shutil
from types import SimpleNamespace

import pytest
import yaml

from components.kubernetes.images import chart, chart_images
from components.kubernetes.sweeps import ANCESTOR_LABEL, NODE, RESTART_ATTEMPT_LABEL, trainjob_name
from components.kubernetes.training import KUEUE_FRAMEWORKS, KUEUE_VISIBILITY_PORT, WEBHOOK_PORT
from fleet.model.core import pod_contract
from fleet.model.core.pools import CARDS_PER_NODE_LABEL
from fleet.model.core.registry import DEFAULT_REGISTRY
from fleet.model.core.taints import SWEEP_TAINT
from fleet.model.placement.pods import selector_matches
from fleet.tools.engine.plan import StackPlan
from tests.helpers import FIXTURE_WORKLOADS, by_type, one, plan_one

POLICY = """
defaults:
  gpu_pool: {max_nodes: 2}
clusters:
  gcp:
    gke-sweep:
      zone: us-central1-a
      gpus: [l4, tpu-v5e, t4]
      checkpoint_claim: sweep-checkpoints
  aws:
    eks-sweep:
      region: us-east-1
      gpus: [l4]
    eks-plain:
      region: us-east-1
      central: true
      gpus: [t4]
workloads:
  sweeper:
    gpus: [l4, tpu-v5e]
    scale: [1, 4, 16]
"""
GKE = {"gcp:project": "sweep-project", "gcp:zone": "us-central1-a"}
AWS = {"aws:region": "us-east-1"}
RELEASE = "kubernetes:helm.sh/v3:Release"
TRAINJOB = "kubernetes:trainer.kubeflow.org/v1alpha1:TrainJob"
RUNTIME = "kubernetes:trainer.kubeflow.org/v1alpha1:TrainingRuntime"
KUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:"
NODE_POOL = "gcp:container/nodePool:NodePool"


@pytest.fixture(scope="module")
def gke(tmp_path_factory: pytest.TempPathFactory) -> StackPlan:
    return plan_one(tmp_path_factory.mktemp("gke"), POLICY, "gke-sweep", GKE, workloads_dir=FIXTURE_WORKLOADS)


@pytest.fixture(scope="module")
def eks(tmp_path_factory: pytest.TempPathFactory) -> StackPlan:
    return plan_one(tmp_path_factory.mktemp("eks"), POLICY, "eks-sweep", AWS, workloads_dir=FIXTURE_WORKLOADS)


def jobs(plan: StackPlan) -> dict[tuple[str, int], tuple[dict, dict]]:
    """(card, accelerators) -> (TrainJob inputs, its TrainingRuntime's inputs)."""
    runtimes = {r.inputs["metadata"]["name"]: r.inputs for r in by_type(plan, RUNTIME)}
    out = {}
    for job in by_type(plan, TRAINJOB):
        labels = job.inputs["metadata"]["labels"]
        runtime = runtimes[job.inputs["spec"]["runtimeRef"]["name"]]
        pod = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        node = next(c for c in pod["containers"] if c["name"] == NODE)
        per_node = int(next(v for k, v in node["resources"]["limits"].items() if "/" in k))
        total = per_node * job.inputs["spec"]["trainer"]["numNodes"]
        out[(labels["gpu"], total)] = (job.inputs, runtime)
    return out


def test_one_trainjob_per_point_with_the_total_accelerator_count(gke):
    assert sorted(jobs(gke)) == [("l4", 1), ("l4", 4), ("l4", 16), ("tpu-v5e", 1), ("tpu-v5e", 4)]
    job, runtime = jobs(gke)[("l4", 16)]
    assert job["spec"]["trainer"]["numNodes"] == 2 and runtime["spec"]["mlPolicy"] == {"numNodes": 2, "jax": {}}
    assert job["spec"]["runtimeRef"] == {
        "apiGroup": "trainer.kubeflow.org",
        "kind": "TrainingRuntime",
        "name": runtime["metadata"]["name"],
    }
    assert job["metadata"]["labels"][pod_contract.QUEUE_NAME_LABEL] == "sweeps-gpu-l4-x8"  # its pool's queue
    registration = next(r for r in by_type(gke, TRAINJOB) if r.inputs is job)
    assert set(registration.ignore_changes) == {"spec.suspend", "spec.runtimePatches"}  # Kueue's own changes


def test_the_workers_pod_is_the_benchmark_pod_on_the_points_pool(gke):
    _, runtime = jobs(gke)[("l4", 16)]
    template = runtime["spec"]["template"]["spec"]
    assert template["failurePolicy"] == {"maxRestarts": 3, "restartStrategy": "Recreate"}
    (replicated,) = template["replicatedJobs"]
    assert replicated["name"] == NODE and replicated["replicas"] == 1
    assert replicated["template"]["metadata"]["labels"] == {ANCESTOR_LABEL: "trainer"}
    pod = replicated["template"]["spec"]["template"]
    assert pod["metadata"]["labels"]["app.kubernetes.io/part-of"] == pod_contract.BENCHMARK_PART_OF
    spec = pod["spec"]
    assert spec["nodeSelector"] == {"gpu": "l4", CARDS_PER_NODE_LABEL: "8"}
    assert {"key": SWEEP_TAINT.key, "operator": "Equal", "value": "present", "effect": "NoSchedule"} in spec[
        "tolerations"
    ]
    node = next(c for c in spec["containers"] if c["name"] == NODE)
    assert node["resources"]["limits"]["nvidia.com/gpu"] == "8"
    env = {e["name"]: e for e in node["env"]}
    assert env["JAX_PLATFORMS"]["value"] == "cuda"
    assert env["GPUFLEET_RESTART_ATTEMPT"]["valueFrom"]["fieldRef"]["fieldPath"] == (
        f"metadata.labels['{RESTART_ATTEMPT_LABEL}']"
    )
    assert env["GPUFLEET_CHECKPOINT_DIR"]["value"] == "/checkpoints"
    claim = next(v for v in spec["volumes"] if v["name"] == "checkpoints")
    assert claim["persistentVolumeClaim"] == {"claimName": "sweep-checkpoints"}
    mount = next(m for m in node["volumeMounts"] if m["name"] == "checkpoints")
    assert mount["subPathExpr"] == "$(GPUFLEET_JOBSET)"
    assert [c["name"] for c in spec["initContainers"]] == ["prepare-log", "mtail"]
    assert spec["securityContext"]["runAsNonRoot"] is True and spec["automountServiceAccountToken"] is False


def test_a_tpu_point_takes_whole_vms_and_the_tpu_platform(gke):
    _, runtime = jobs(gke)[("tpu-v5e", 1)]
    pod = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    node = next(c for c in pod["containers"] if c["name"] == NODE)
    assert node["resources"]["limits"]["google.com/tpu"] == "1"
    assert {e["name"]: e.get("value") for e in node["env"]}["JAX_PLATFORMS"] == "tpu"
    assert pod["nodeSelector"] == {"gpu": "tpu-v5e", CARDS_PER_NODE_LABEL: "1"}


def test_gke_builds_a_sweep_pool_per_machine_size(gke):
    pools = {r.inputs["name"]: r.inputs for r in by_type(gke, NODE_POOL)}
    assert {"gpu-l4-x4", "gpu-l4-x8", "gpu-tpu-v5e-x1"} <= set(pools)
    x8 = pools["gpu-l4-x8"]
    assert x8["nodeConfig"]["machineType"] == "g2-standard-96"
    assert x8["nodeConfig"]["guestAccelerators"][0]["count"] == 8
    assert x8["autoscaling"]["totalMinNodeCount"] == 0 and x8["autoscaling"]["totalMaxNodeCount"] == 2
    assert {"key": SWEEP_TAINT.key, "value": "present", "effect": "NO_SCHEDULE"} in x8["nodeConfig"]["taints"]
    assert x8["nodeConfig"]["spot"] is True and x8["nodeConfig"]["labels"][CARDS_PER_NODE_LABEL] == "8"
    tpu = pools["gpu-tpu-v5e-x1"]
    assert tpu["nodeConfig"]["machineType"] == "ct5lp-hightpu-1t" and not tpu["nodeConfig"].get("guestAccelerators")
    # the card pool itself keeps its one-card machine and no sweep taint
    own = pools["gpu-l4"]["nodeConfig"]
    assert own["guestAccelerators"][0]["count"] == 1 and SWEEP_TAINT.key not in str(own["taints"])


def test_eks_sweep_node_groups_scale_from_zero_with_their_card_count(eks):
    groups = {r.inputs["nodeGroupName"]: r.inputs for r in by_type(eks, "aws:eks/nodeGroup:NodeGroup")}
    assert groups["gpu-l4-x8"]["instanceTypes"] == ["g6.48xlarge"]
    assert groups["gpu-l4-x8"]["scalingConfig"]["minSize"] == 0
    tags = {r.inputs["tag"]["key"]: r.inputs["tag"]["value"] for r in by_type(eks, "aws:autoscaling/tag:Tag")}
    assert tags["k8s.io/cluster-autoscaler/node-template/resources/nvidia.com/gpu"] in {"1", "4", "8"}
    x8 = [r for r in by_type(eks, "aws:autoscaling/tag:Tag") if "gpu-l4-x8" in r.name]
    x8_tags = {r.inputs["tag"]["key"]: r.inputs["tag"]["value"] for r in x8}
    assert x8_tags["k8s.io/cluster-autoscaler/node-template/resources/nvidia.com/gpu"] == "8"
    assert x8_tags[f"k8s.io/cluster-autoscaler/node-template/taint/{SWEEP_TAINT.key}"] == "present:NoSchedule"
    assert x8_tags[f"k8s.io/cluster-autoscaler/node-template/label/{CARDS_PER_NODE_LABEL}"] == "8"


def test_trainer_and_kueue_are_pinned_and_only_where_a_sweep_runs(gke, tmp_path):
    releases = {r.inputs["name"]: r.inputs for r in by_type(gke, RELEASE)}
    for name in ("kubeflow-trainer", "kueue"):
        pinned = chart(name)
        assert releases[name]["chart"] == f"{pinned.repo}/{name}" and pinned.repo.startswith("oci://")
        assert releases[name]["version"] == pinned.version and "repositoryOpts" not in releases[name]
    trainer = releases["kubeflow-trainer"]["values"]
    images = {i.name: i for i in chart_images(DEFAULT_REGISTRY, "kubeflow-trainer")}  # the policy sets none
    assert trainer["image"]["repository"] == images["trainer-controller-manager"].image.split("/", 1)[1].split(":")[0]
    assert trainer["jobset"]["image"]["repository"] == images["jobset"].image.rsplit(":", 1)[0]
    assert trainer["jobset"]["install"] is True
    config = yaml.safe_load(releases["kueue"]["values"]["managerConfig"]["controllerManagerConfigYaml"])
    assert config["apiVersion"] == "config.kueue.x-k8s.io/v1beta2"
    # and batch Jobs: the cluster's benchmarks wait their turn in its Kueue too (test_benchmark_queue.py)
    assert config["integrations"]["frameworks"] == [*KUEUE_FRAMEWORKS, "batch/job"]
    wait = config["waitForPodsReady"]
    assert wait["blockAdmission"] is False and wait["timeout"] == f"{pod_contract.SCALE_UP_ALLOWANCE_SECONDS // 60}m"
    plain = plan_one(
        tmp_path,
        POLICY.replace("central: true", "central: false").replace("eks-sweep:", "eks-sweep:\n      central: true"),
        "eks-plain",
        AWS,
        workloads_dir=FIXTURE_WORKLOADS,
    )
    # no training operator; Kueue for the benchmarks' own queue alone, managing batch Jobs only
    releases = {r.inputs["name"]: r.inputs for r in by_type(plain, RELEASE)}
    assert "kubeflow-trainer" not in releases and not by_type(plain, TRAINJOB)
    config = yaml.safe_load(releases["kueue"]["values"]["managerConfig"]["controllerManagerConfigYaml"])
    assert config["integrations"]["frameworks"] == ["batch/job"] and "waitForPodsReady" not in config


def test_a_trainjob_whose_queue_changes_is_a_new_job(gke, tmp_path, monkeypatch):
    """Kueue refuses a new queue-name label on a TrainJob that is not suspended, one admitted or finished (kueue
    v0.19.2 pkg/controller/jobframework/validation.go validateUpdateForQueueName): a point moved to another queue
    (the one queue ``sweeps`` of earlier versions) must get a new name, a new job, not a label patched in place."""
    monkeypatch.setattr(pod_contract, "sweep_queue", lambda pool: "sweeps")
    before = plan_one(tmp_path, POLICY, "gke-sweep", GKE, workloads_dir=FIXTURE_WORKLOADS)
    old = {r.name: r.inputs["metadata"] for r in by_type(before, TRAINJOB)}
    new = {r.name: r.inputs["metadata"] for r in by_type(gke, TRAINJOB)}
    assert old.keys() == new.keys() and old
    for resource, metadata in new.items():
        assert (
            metadata["labels"][pod_contract.QUEUE_NAME_LABEL] != old[resource]["labels"][pod_contract.QUEUE_NAME_LABEL]
        )
        assert metadata["name"] != old[resource]["name"], resource


def test_the_queue_caps_each_pool_at_what_it_holds(gke):
    flavors = {r.inputs["metadata"]["name"]: r.inputs["spec"] for r in by_type(gke, KUEUE + "ResourceFlavor")}
    assert flavors["gpu-l4-x8"] == {"nodeLabels": {"gpu": "l4", CARDS_PER_NODE_LABEL: "8"}}
    queues = {r.inputs["metadata"]["name"]: r.inputs["spec"] for r in by_type(gke, KUEUE + "ClusterQueue")}
    del queues[pod_contract.BENCHMARK_CLUSTER_QUEUE]  # the benchmarks' own (test_benchmark_queue.py)
    quota = {}
    for name, spec in queues.items():
        (group,) = spec["resourceGroups"]
        (flavor,) = group["flavors"]  # a pool's queue holds its flavor alone
        assert name == pod_contract.sweep_cluster_queue(flavor["name"])
        assert set(group["coveredResources"]) == {"cpu", "memory"} | {r["name"] for r in flavor["resources"]}
        quota[flavor["name"]] = {r["name"]: r["nominalQuota"] for r in flavor["resources"]}
    assert quota["gpu-l4-x8"]["nvidia.com/gpu"] == "16"
    assert quota["gpu-l4"]["nvidia.com/gpu"] == "2"  # the card pool: max_nodes 2 of one card
    assert quota["gpu-tpu-v5e"]["google.com/tpu"] == "8"
    local = {r.inputs["metadata"]["name"]: r.inputs["spec"] for r in by_type(gke, KUEUE + "LocalQueue")}
    del local[pod_contract.BENCHMARK_QUEUE]
    assert local == {pod_contract.sweep_queue(f): {"clusterQueue": pod_contract.sweep_cluster_queue(f)} for f in quota}


def test_workers_of_a_job_reach_each_other_and_nothing_else(gke):
    job, _ = jobs(gke)[("l4", 16)]
    name = job["metadata"]["name"]
    policy = one(gke, "kubernetes:networking.k8s.io/v1:NetworkPolicy", "gke-sweep-sweeper-l4-n16-workers")
    selector = {"matchLabels": {"jobset.sigs.k8s.io/jobset-name": name}}
    assert policy.inputs["spec"]["podSelector"] == selector
    assert policy.inputs["spec"]["ingress"] == [{"from": [{"podSelector": selector}]}]
    assert policy.inputs["spec"]["egress"] == [{"to": [{"podSelector": selector}]}]


def test_trainjob_names_are_dns_1035_labels_short_enough_for_jobsets_pods(gke):
    names = [r.inputs["metadata"]["name"] for r in by_type(gke, TRAINJOB)]
    assert names and all(
        pod_contract.TRAINJOB_NAME.match(n) and len(n) <= pod_contract.MAX_TRAINJOB_NAME for n in names
    )
    # a workload name may start with a digit and be 40 characters long
    point = SimpleNamespace(workload=SimpleNamespace(name="3" + "d" * 39), card="tpu-v5e", accelerators=128, nodes=1)
    name = trainjob_name(point, "0a1b2c3d")  # type: ignore[arg-type]
    assert pod_contract.TRAINJOB_NAME.match(name) and len(name) <= pod_contract.MAX_TRAINJOB_NAME
    assert name.startswith("sweep-3ddd") and name.endswith("-0a1b2c3d")


def test_kueue_is_reachable_by_the_api_server_and_scoped_to_the_benchmarks(gke):
    policies = {r.name: r.inputs["spec"] for r in by_type(gke, "kubernetes:networking.k8s.io/v1:NetworkPolicy")}
    ports = {p["port"] for p in policies["gke-sweep-kueue-system-allow-webhooks"]["ingress"][0]["ports"]}
    assert ports == {WEBHOOK_PORT, KUEUE_VISIBILITY_PORT}
    release = next(r for r in by_type(gke, RELEASE) if r.inputs["name"] == "kueue")
    config = yaml.safe_load(release.inputs["values"]["managerConfig"]["controllerManagerConfigYaml"])
    assert config["managedJobsNamespaceSelector"] == {
        "matchLabels": {"kubernetes.io/metadata.name": pod_contract.BENCHMARK_NAMESPACE}
    }


def test_a_point_on_the_cards_own_pool_keeps_off_the_sweep_pools(gke):
    _, own = jobs(gke)[("l4", 1)]
    pod = own["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": CARDS_PER_NODE_LABEL, "operator": "DoesNotExist"}]}]
    node = next(c for c in pod["containers"] if c["name"] == NODE)
    assert {e["name"]: e.get("value") for e in node["env"]}["GPUFLEET_ACCELERATORS"] == "1"
    _, big = jobs(gke)[("l4", 16)]
    assert (
        "affinity" not in big["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    )


def test_a_sweeping_workloads_credentials_and_egress_are_made(tmp_path):
    workloads = tmp_path / "workloads"
    shutil.copytree(FIXTURE_WORKLOADS / "sweeper", workloads / "sweeper")
    spec = workloads / "sweeper" / "workload.yaml"
    text = spec.read_text(encoding="utf-8")
    extra = "secret_env: [DATA_TOKEN]\negress:\n  - cidr: 188.184.0.0/16\n    ports: [443]\n"
    spec.write_text(text.replace("timeout_seconds:", extra + "timeout_seconds:"), encoding="utf-8")
    config = {**GKE, "gpu-fleet:workloadSecrets": {"sweeper": {"DATA_TOKEN": {"secure": "v1:c2VjcmV0"}}}}
    plan = plan_one(tmp_path, POLICY, "gke-sweep", config, workloads_dir=workloads)
    assert [r.name for r in by_type(plan, "kubernetes:core/v1:Secret") if "sweeper" in r.name] == [
        "gke-sweep-sweeper-credentials"
    ]
    egress = one(plan, "kubernetes:networking.k8s.io/v1:NetworkPolicy", "gke-sweep-sweeper-egress")
    assert egress.inputs["spec"]["podSelector"]["matchLabels"]["workload"] == "sweeper"


def _kueue_flavor_of(pod: dict, flavors: list[tuple[str, dict[str, str]]]) -> str | None:
    """The first flavor whose node labels the pod's selector and required affinity match on that flavor's own label
    keys, as Kueue assigns one when its quota fits (kueue v0.19.2 pkg/scheduler/flavorassigner: flavorLabelKeys :=
    sets.KeySet(flavor.Spec.NodeLabels); flavorSelector drops the selector's keys and expressions outside them, and a
    term left empty matches any flavor)."""
    for name, labels in flavors:
        keys = set(labels)
        spec: dict = {"nodeSelector": {k: v for k, v in (pod.get("nodeSelector") or {}).items() if k in keys}}
        terms = (((pod.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        ) or {}).get("nodeSelectorTerms") or []  # fmt: skip
        kept = [{"matchExpressions": [e for e in t.get("matchExpressions", []) if e["key"] in keys]} for t in terms]
        if kept and all(t["matchExpressions"] for t in kept):
            spec["affinity"] = {
                "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": kept}}
            }
        if selector_matches(spec, labels):
            return name
    return None


@pytest.mark.parametrize("stack", ["gke", "eks"])
def test_kueue_gives_every_point_its_own_pools_flavor_even_when_that_pool_is_full(stack, request):
    """Kueue v0.19.2 tries a queue's flavors in order, matches each on its own label keys only, and moves to the next
    when one's quota does not fit (flavorassigner.go ``checkFlavorForPodSets``, ``shouldTryNextFlavor``: true for
    noFit). So every flavor of a point's queue but its own pool's must refuse the point: with its own pool full, a
    point waits for it instead of being charged to the card pool's flavor (``gpu=<card>``, which it matches too)."""
    plan = request.getfixturevalue(stack)
    labels = {
        r.inputs["metadata"]["name"]: r.inputs["spec"]["nodeLabels"] for r in by_type(plan, KUEUE + "ResourceFlavor")
    }
    queues = {r.inputs["metadata"]["name"]: r.inputs["spec"] for r in by_type(plan, KUEUE + "ClusterQueue")}
    local = {
        r.inputs["metadata"]["name"]: r.inputs["spec"]["clusterQueue"] for r in by_type(plan, KUEUE + "LocalQueue")
    }
    runtimes = {r.inputs["metadata"]["name"]: r.inputs for r in by_type(plan, RUNTIME)}
    points = 0
    for job in by_type(plan, TRAINJOB):
        runtime = runtimes[job.inputs["spec"]["runtimeRef"]["name"]]
        pod = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        size = pod["nodeSelector"].get(CARDS_PER_NODE_LABEL)
        own = f"gpu-{pod['nodeSelector']['gpu']}" + (f"-x{size}" if size else "")
        queue = queues[local[job.inputs["metadata"]["labels"][pod_contract.QUEUE_NAME_LABEL]]]
        order = [(f["name"], labels[f["name"]]) for f in queue["resourceGroups"][0]["flavors"]]
        assert _kueue_flavor_of(pod, order) == own, (job.name, [n for n, _ in order])
        # its own flavor's quota taken: no other flavor of its queue takes the point
        assert _kueue_flavor_of(pod, [(n, f) for n, f in order if n != own]) is None, (job.name, order)
        points += 1
    assert points and any(n.endswith(("-x4", "-x8")) for n in labels)


def test_a_trainjob_of_more_than_ten_nodes_leaves_room_for_two_digit_pod_indexes():
    for nodes in (1, 10, 11, 16, 100, 101):
        point = SimpleNamespace(
            workload=SimpleNamespace(name="3" + "d" * 39), card="tpu-v5e", accelerators=128, nodes=nodes
        )
        name = trainjob_name(point, "0a1b2c3d")  # type: ignore[arg-type]
        last_pod = f"{name}-{NODE}-0-{nodes - 1}-abcde"  # JobSet: <jobset>-<replicated job>-<job index>-<pod index>-<5>
        assert len(last_pod) <= 63, (nodes, last_pod)
        assert len(name) == pod_contract.max_trainjob_name(nodes)


def test_benchmark_jobs_are_created_after_kueue_whose_webhook_covers_their_namespace(gke):
    kueue = next(r for r in by_type(gke, RELEASE) if r.inputs["name"] == "kueue")
    (jobs_component,) = by_type(gke, "gpufleet:index:BenchmarkJobs")
    assert kueue.urn in jobs_component.dependencies


def test_every_worker_reports_the_points_total_accelerator_count(gke):
    """GPUFLEET_ACCELERATORS is the point's whole count (nodes x cards per node) on every worker, not one node's: a
    point of 16 cards on 2 nodes of 8 reports 16, as its TrainJob's name and the report's scaling rows say."""
    multi_node = 0
    for (card, total), (job, runtime) in jobs(gke).items():
        pod = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        node = next(c for c in pod["containers"] if c["name"] == NODE)
        assert {e["name"]: e.get("value") for e in node["env"]}["GPUFLEET_ACCELERATORS"] == str(total), (card, total)
        assert job["metadata"]["name"].startswith(f"sweep-sweeper-{card}-n{total}-")
        multi_node += job["spec"]["trainer"]["numNodes"] > 1
    assert multi_node, "no point spans several nodes: the test could not tell the total from one node's count"
