"""The shipped fleet planned end to end under the strict mock engine: clusters, infra, federation, Jobs."""

from __future__ import annotations

import json
import math
import tomllib

import kubernetes_validate
import pytest
import yaml
from pulumi.runtime import rpc

from fleet.model.core import pod_contract
from fleet.model.core.clouds import cloud_rules
from fleet.model.core.clouds.pool_view import pool_views, read_pool
from fleet.model.core.clusters import pool_resource_name
from fleet.model.core.pod_contract import BENCHMARK_QUEUE, QUEUE_NAME_LABEL
from fleet.model.core.pools import CARDS_PER_NODE_LABEL
from fleet.model.core.taints import CI_TAINT
from fleet.model.loader import POLICY_FILE, load_fleet
from fleet.model.monitoring import dashboards, grafana
from fleet.model.placement.node_agents import SITE_GPU_AGENTS
from fleet.model.placement.pods import PodToPlace, cluster_nodes, fleet_pods, misplaced, place, pod_requests
from fleet.model.queues.queued_sweeps import POINT_LABEL, QUEUE_LABEL
from fleet.program.stack_config import load_stack_config
from fleet.tools.engine.plan import plan_fleet
from tests.helpers import by_type, central_series, panels_on_missing_series

K8S_VERSION = "1.33.0"


@pytest.fixture(scope="module")
def fleet():
    return load_fleet(POLICY_FILE)


@pytest.fixture(scope="module")
def plans(fleet):
    return {p.stack: p for p in plan_fleet(fleet, POLICY_FILE)}


def jobs_of(plan):
    return [r for r in plan.registrations if r.type in ("kubernetes:batch/v1:Job", "kubernetes:batch/v1:CronJob")]


def queued_jobs_on(fleet, name):
    """The queued Jobs the stack ``name`` declares: every one on the queues' manager, none elsewhere."""
    return fleet.queued_jobs() if fleet.dispatch is not None and fleet.dispatch.manager == name else []


def is_queued(reg) -> bool:
    """Whether a Job is a queued workload's (labelled with its fleet queue: declared on the manager, run by a
    worker), not a benchmark waiting its turn in its own cluster's queue (pod_contract.BENCHMARK_QUEUE)."""
    return reg.inputs["metadata"]["labels"].get(QUEUE_NAME_LABEL, BENCHMARK_QUEUE) != BENCHMARK_QUEUE


def is_queued_runtime(reg) -> bool:
    """Whether a TrainingRuntime is a queued sweep point's: the same on the manager and on the workers that hold it,
    with no pool's selector or tolerations (a worker's flavor adds them: test_queued_sweep_points_...)."""
    return QUEUE_LABEL in reg.inputs["metadata"].get("labels", {})


def job_spec(reg):
    return reg.inputs["spec"]["jobTemplate"]["spec"] if reg.type.endswith("CronJob") else reg.inputs["spec"]


def test_every_shipped_stack_plans(fleet, plans):
    assert set(plans) == set(fleet.clusters)
    for plan in plans.values():
        assert plan.registrations and rpc.is_rpc_secret(plan.exports["kubeconfig"])


def test_jobs_are_exactly_the_policy_pairs(fleet, plans):
    for name, plan in plans.items():
        cluster = fleet.cluster(name)
        expected: dict = {(b.workload.name, b.pool.card): b for b in fleet.workload_jobs(cluster)}
        expected.update({(j.workload.name, j.card): j for j in queued_jobs_on(fleet, name)})
        got = {
            (r.inputs["metadata"]["labels"]["workload"], r.inputs["metadata"]["labels"]["gpu"]): r
            for r in jobs_of(plan)
        }
        assert set(got) == set(expected), name
        # every cluster with accelerators runs benchmarks (a control cluster without any runs none)
        assert fleet.benchmarks(cluster) or not cluster.pools, f"{name} runs no benchmark"
        # scheduled workloads and every probe become CronJobs, the others Jobs
        for key, reg in got.items():
            assert reg.type.endswith("CronJob") == (getattr(expected[key], "schedule", None) is not None), key


def test_job_pods_select_the_pool_request_the_card_and_tolerate_taints(fleet, plans):
    for name, plan in plans.items():
        cluster = fleet.cluster(name)
        for reg in jobs_of(plan):
            if is_queued(reg):  # the worker that admits it adds its pool's selector (test_queued_workloads_...)
                continue
            labels = reg.inputs["metadata"]["labels"]
            pool = cluster.pool(labels["gpu"])
            spec = job_spec(reg)
            pod = spec["template"]["spec"]
            assert pod["nodeSelector"] == pool.node_selector
            limits = pod["containers"][0]["resources"]["limits"]
            assert int(limits[pool.resource]) >= 1 and "cpu" in limits and "memory" in limits
            tolerations = {(t["key"], t["value"], t["effect"]) for t in pod["tolerations"]}
            assert (pool.resource, "present", "NoSchedule") in tolerations  # the card's taint
            if cluster.cloud == "azure":
                assert ("kubernetes.azure.com/scalesetpriority", "spot", "NoSchedule") in tolerations
            for key in pod_contract.METRIC_LABELS:
                assert spec["template"]["metadata"]["labels"][key] == labels[key]
            assert spec["activeDeadlineSeconds"] > 0 and spec["backoffLimit"] >= 0
            # Kubernetes may expire the Jobs a CronJob starts; a Job Pulumi manages is kept (a refresh would rerun it)
            if reg.type.endswith(":CronJob"):
                assert spec["ttlSecondsAfterFinished"] > 0
            else:
                assert "ttlSecondsAfterFinished" not in spec
            assert reg.inputs["metadata"]["annotations"]["pulumi.com/skipAwait"] == "true"


def test_mtail_runs_as_native_sidecar_over_a_precreated_log(plans):
    for plan in plans.values():
        for reg in jobs_of(plan):
            pod = job_spec(reg)["template"]["spec"]
            prepare, mtail = pod["initContainers"]
            assert prepare["name"] == "prepare-log" and "touch" in " ".join(prepare["command"])
            assert mtail["name"] == "mtail" and mtail["restartPolicy"] == "Always"
            assert mtail["ports"] == [{"name": "mtail", "containerPort": 3903}]
            shared = {m["name"] for m in mtail["volumeMounts"]} & {
                m["name"] for m in pod["containers"][0]["volumeMounts"]
            }
            assert "logs" in shared
            assert {"name": "logs", "emptyDir": {}} in pod["volumes"]


def test_no_moving_image_tags(plans):
    for plan in plans.values():
        for reg in jobs_of(plan):
            pod = job_spec(reg)["template"]["spec"]
            for c in pod["initContainers"] + pod["containers"]:
                last = c["image"].rsplit("/", 1)[-1]
                assert ":" in last and not last.endswith(":latest"), c["image"]


def test_the_fleets_own_containers_pull_from_its_registry(fleet, plans):
    """Every container the fleet adds (log preparation, mtail sidecar, federation gateway) pulls the copy in the
    fleet's registry, never the upstream image (pruned upstream, rate-limited on Docker Hub)."""
    from components.kubernetes.images import pinned_images

    ours = {p.reference for p in pinned_images(fleet.registry)}
    workload_images = {w.spec.image for w in fleet.deployed_workloads.values()}
    for plan in plans.values():
        pods = [job_spec(r)["template"]["spec"] for r in jobs_of(plan)]
        pods += [r.inputs["spec"]["template"]["spec"] for r in plan.registrations if r.type.endswith(":Deployment")]
        for pod in pods:
            for c in pod.get("initContainers", []) + pod["containers"]:
                if c["image"] not in workload_images:
                    assert c["image"] in ours and c["image"].startswith(fleet.registry + "/"), c["image"]
                else:
                    assert c["image"].startswith(fleet.registry + "/"), c["image"]


def test_job_name_changes_with_its_spec(fleet, tmp_path):
    from components.kubernetes.benchmark import spec_hash

    assert spec_hash({"a": 1}) != spec_hash({"a": 2}) and spec_hash({"a": 1}) == spec_hash({"a": 1})


def test_rendered_jobs_validate_against_the_kubernetes_schema(fleet, plans):
    checked = 0
    for plan in plans.values():
        for reg in jobs_of(plan):
            kind = reg.type.rsplit(":", 1)[-1]
            manifest = {
                "apiVersion": "batch/v1",
                "kind": kind,
                "metadata": reg.inputs["metadata"],
                "spec": reg.inputs["spec"],
            }
            kubernetes_validate.validate(manifest, K8S_VERSION, strict=True)
            checked += 1
    assert checked == sum(len(fleet.workload_jobs(c)) for c in fleet.clusters.values()) + len(fleet.queued_jobs())


def test_schema_validation_can_fail(plans):
    reg = jobs_of(next(iter(plans.values())))[0]
    manifest = {"apiVersion": "batch/v1", "kind": "Job", "metadata": reg.inputs["metadata"], "spec": {"templat": {}}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(manifest, K8S_VERSION, strict=True)


def test_every_gpu_pool_keeps_the_fleet_invariants(fleet, plans):
    """Every pool the fleet creates is the policy's, labelled, tainted and sized as it says; on an existing cluster
    it creates none (the site's nodes carry the labels and taints: docs/clouds.md, "Existing clusters")."""
    for name, plan in plans.items():
        cluster = fleet.cluster(name)
        # a card's own pool, its sweep pools (told apart by their cards-per-node label) and its CI pool
        gpu_views = [v for v in pool_views(plan.registrations) if v.card]
        views = {(v.card, v.labels.get(CARDS_PER_NODE_LABEL), v.ci): v for v in gpu_views}
        if not cloud_rules(cluster.cloud).builds_pools:
            assert views == {}, f"{name} is an existing cluster, yet the stack creates the pools {sorted(views)}"
            continue
        wanted = {(p.card, p.labels.get(CARDS_PER_NODE_LABEL), p.ci) for p in cluster.all_pools}
        assert set(views) == wanted, f"{name}: pools created {sorted(views)}, the policy's {sorted(wanted)}"
        for pool in cluster.all_pools:
            view = views[(pool.card, pool.labels.get(CARDS_PER_NODE_LABEL), pool.ci)]
            where = f"{name}, pool {pool.name}"
            assert (view.min_nodes, view.max_nodes) == (pool.min_nodes, pool.max_nodes), where
            assert view.machine_type == pool.machine_type, where
            if cluster.cloud == "openstack":
                assert view.min_nodes >= 1, where  # Magnum cannot scale a GPU group up from zero
                continue
            assert view.labels["gpu"] == pool.card, where
            assert f"{pool.resource}=present:NoSchedule" in view.taints, where
            assert view.spot == pool.spot, where
            assert view.min_nodes == 0, where
            assert (CI_TAINT.as_string() in view.taints) == pool.ci, where  # only CI pools carry the CI taint


def test_the_node_pools_output_names_every_accelerator_pool_the_stack_creates(fleet, plans):
    """``node_pools``: each pool's key (card, sweep and CI pools) to the resource name its cloud component gives."""
    created_any = False
    for name, plan in plans.items():
        cluster = fleet.cluster(name)
        exported = plan.exports["node_pools"]
        assert exported == {p.key: pool_resource_name(cluster, p) for p in cluster.all_pools}, name
        created = {r.name for r in plan.registrations if (found := read_pool(r)) is not None and found[0].card}
        if created:  # an existing cluster's pools are not ours to create
            assert created == set(exported.values()), name
            created_any = True
    assert created_any


def test_every_cluster_gets_the_infra_stack(fleet, plans):
    external = set()
    for name, plan in plans.items():
        cluster = fleet.cluster(name)
        releases = {r.inputs["name"]: r for r in plan.registrations if r.type == "kubernetes:helm.sh/v3:Release"}
        prom = releases["kps"].inputs
        assert prom["version"], "chart versions are pinned"
        labels = prom["values"]["prometheus"]["prometheusSpec"]["externalLabels"]
        external.add(json.dumps(labels, sort_keys=True))
        assert prom["values"]["prometheus"]["prometheusSpec"]["podMonitorSelectorNilUsesHelmValues"] is False
        # the NVIDIA device plugin only where the platform brings none (not on GKE, nor with EKS's Bottlerocket
        # AMIs) and the site does not run its own (site_provides: gpu_agents); dcgm-exporter on every NVIDIA pool
        # but where the site runs its own
        site = SITE_GPU_AGENTS in cluster.site_provides
        plugin = not site and any(p.needs_device_plugin for p in cluster.all_pools)
        assert ("nvidia-device-plugin" in releases) == plugin, (
            f"{name}: the device plugin {'is' if plugin else 'is not'} the fleet's to install"
        )
        exporter = not site and any(p.accelerator.is_nvidia for p in cluster.all_pools)
        assert ("dcgm-exporter" in releases) == exporter, (
            f"{name}: dcgm-exporter {'is' if exporter else 'is not'} the fleet's to install"
        )
        if "nvidia-device-plugin" in releases:
            tol = {(t["key"], t["value"]) for t in releases["nvidia-device-plugin"].inputs["values"]["tolerations"]}
            assert ("nvidia.com/gpu", "present") in tol
            if cluster.cloud == "azure":
                assert ("kubernetes.azure.com/scalesetpriority", "spot") in tol
            # it must land on every GPU pool, whatever label the cloud lets us select (role on Magnum)
            terms = releases["nvidia-device-plugin"].inputs["values"]["affinity"]["nodeAffinity"][
                "requiredDuringSchedulingIgnoredDuringExecution"
            ]["nodeSelectorTerms"]
            selected = [{e["key"]: e["values"][0] for e in t["matchExpressions"]} for t in terms]
            assert selected == [p.node_selector for p in cluster.all_pools if p.accelerator.is_nvidia], name
        kinds = {r.type for r in plan.registrations}
        assert {"kubernetes:core/v1:ResourceQuota", "kubernetes:core/v1:LimitRange"} <= kinds
        # the fleet's own services stay on the system pool (on Magnum, GPU nodes carry no taint to keep them off)
        system = cluster.system_selector
        if system:
            assert prom["values"]["prometheus"]["prometheusSpec"]["nodeSelector"] == system, name
            for deployment in (r for r in plan.registrations if r.type == "kubernetes:apps/v1:Deployment"):
                assert deployment.inputs["spec"]["template"]["spec"]["nodeSelector"] == system, deployment.name
    assert len(external) == len(plans), "external labels must be unique per cluster"


def test_central_federates_every_other_cluster_and_leaves_are_authenticated(fleet, plans):
    central = plans[fleet.central.name]
    release = next(
        r for r in central.registrations if r.type == "kubernetes:helm.sh/v3:Release" and r.inputs["name"] == "kps"
    )
    spec = release.inputs["values"]["prometheus"]["prometheusSpec"]
    jobs = spec["additionalScrapeConfigs"]
    assert sorted(j["job_name"] for j in jobs) == sorted(
        f"federate-{c}" for c in fleet.clusters if c != fleet.central.name
    )
    for job in jobs:
        assert job["honor_labels"] is True and job["metrics_path"] == "/federate" and job["scheme"] == "https"
        assert all(not s.startswith("{") for s in job["params"]["match[]"])
    assert "storageSpec" in spec
    for name, plan in plans.items():
        if name == fleet.central.name:
            continue
        svc = next(
            r
            for r in plan.registrations
            if r.type == "kubernetes:core/v1:Service" and r.inputs["metadata"]["name"] == "federation-gateway"
        )
        config, _ = load_stack_config(name)
        ranges = json.loads(config.get("gpu-fleet:federationSourceRanges", "[]"))
        assert svc.inputs["spec"]["loadBalancerSourceRanges"] == ranges
        if not ranges:  # open to any address (mTLS still required): the plan must say so, with the command
            assert any(name in f.message and "gpu-fleet:federationSourceRanges[0]" in f.message for f in plan.findings)
        assert rpc.is_rpc_secret(plan.exports["federation_client_key"])


def test_every_probed_pool_is_watched_by_the_central_and_its_metrics_are_federated(fleet, plans):
    """Derived from the policy: one probe CronJob per probed pool (test_jobs_are_exactly_the_policy_pairs), its three
    metrics in every federation job's match[], and one pair of expectations per pool in the central's probe rules."""
    from fleet.model.monitoring.prometheus import PROBE_SCALE_UP_RULE, PROBE_STALE_RULE
    from fleet.model.probes.probe_phases import PHASE_RECORD

    probed = {(c.name, p.card): p.probe for c in fleet.clusters.values() for p in c.pools if p.probe}
    central = plans[fleet.central.name]
    (release,) = [
        r for r in central.registrations if r.type == "kubernetes:helm.sh/v3:Release" and r.inputs["name"] == "kps"
    ]
    values = release.inputs["values"]
    for job in values["prometheus"]["prometheusSpec"]["additionalScrapeConfigs"]:
        wanted = {m.name for m in fleet.probe_workload.spec.metrics} | ({PHASE_RECORD} if probed else set())
        assert wanted <= set(job["params"]["match[]"]), job["job_name"]
    rules = values["additionalPrometheusRulesMap"].get("gpufleet-probe-alerts")
    if not probed:
        assert rules is None
        return
    records = [r for g in rules["groups"] for r in g["rules"] if "record" in r]
    for record, attr in ((PROBE_STALE_RULE, "stale_after_seconds"), (PROBE_SCALE_UP_RULE, "scale_up_alert_seconds")):
        got = {(r["labels"]["cluster"], r["labels"]["gpu"]): r["expr"] for r in records if r["record"] == record}
        assert got == {key: f"vector({math.ceil(getattr(probe, attr))})" for key, probe in probed.items()}
    alerts = {r["alert"] for g in rules["groups"] for r in g["rules"] if "alert" in r}
    assert alerts == {"ProbeFailed", "ProbeNotRun", "ProbeNeverReported", "ProbeSlowScaleUp", "ProbeSlowPhase"}


def test_the_central_has_the_fleets_dashboards_on_series_that_reach_it(fleet, plans):
    """Derived from the policy: one ConfigMap per dashboard for Grafana's sidecar on the central and none elsewhere, a
    dashboard and overview row per workload the policy places, the scaling one when one sweeps, and every metric a
    panel reads federated from every leaf or recorded by the central (tests/helpers.py ``central_series``)."""
    label, value = grafana.SIDECAR_LABEL

    def boards_of(plan):
        maps = [r.inputs for r in by_type(plan, "kubernetes:core/v1:ConfigMap")]
        return {f: json.loads(t) for m in maps if m["metadata"].get("labels", {}).get(label) == value
                for f, t in m["data"].items()}  # fmt: skip

    boards = boards_of(plans[fleet.central.name])
    assert boards == dashboards.fleet_dashboards(fleet)
    assert all(boards_of(p) == {} for name, p in plans.items() if name != fleet.central.name)
    placed = dashboards.placed_workloads(fleet)
    assert placed and {f"gpufleet-workload-{n}.json" for n in placed} <= set(boards)
    overview = [p["title"] for p in boards["gpufleet-overview.json"]["panels"]]
    assert all(any(t.startswith(f"{n}: ") for t in overview) for n in placed)
    assert ("gpufleet-scaling.json" in boards) == any(n in fleet.sweep_counts for n in placed)
    assert panels_on_missing_series(boards, central_series(plans, fleet.central.name)) == []


def test_no_secret_in_plain_text_anywhere(plans):
    for plan in plans.values():
        text = json.dumps(plan.as_dict(), default=str)
        assert "PRIVATE KEY" not in text
        assert "offline-plan-placeholder-password" not in text
        assert "client-certificate-data" not in text and "FAKE-KEY" not in text


def test_the_plan_is_the_same_from_run_to_run(fleet, plans):
    """Registrations reach the engine in whatever order their inputs resolve; the plan lists them by URN, so
    ``plan --json`` of an unchanged fleet is byte-for-byte the same."""
    again = {p.stack: p for p in plan_fleet(fleet, POLICY_FILE)}
    for name, plan in plans.items():
        urns = [r.urn for r in plan.registrations]
        assert urns == sorted(urns), name
        assert json.dumps(again[name].as_dict(), sort_keys=True) == json.dumps(plan.as_dict(), sort_keys=True), name


def test_one_runner_release_per_runner_of_the_policy(fleet, plans):
    """Derived from the policy's runners section: one gitlab-runner release per (cluster, card), its concurrency and
    GitLab as the policy says, its runners' metrics federated."""
    for name, plan in plans.items():
        cluster = fleet.cluster(name)
        releases = {
            r.inputs["name"]: r.inputs["values"]
            for r in plan.registrations
            if r.type == "kubernetes:helm.sh/v3:Release" and r.inputs["chart"] == "gitlab-runner"
        }
        runners = {r.name: r for r in fleet.runners_of(cluster)}
        assert set(releases) == set(runners), name
        for release, values in releases.items():
            runner = runners[release]
            assert values["concurrent"] == runner.concurrency and values["gitlabUrl"] == runner.gitlab_url
            assert values["podLabels"]["gpu"] == runner.pool.card
            # the jobs run on a pool of their own wherever the fleet creates pools (existing clusters opt out)
            assert runner.pool.ci == (cluster.cloud != "existing") and runner.pool in cluster.all_pools


def _rendered_ci_jobs(plan):
    """(card, pod spec) of the CI job pod each runner's config.toml makes: its selector, tolerations and the build
    container's requests, limits and cards (the helper container asks nothing)."""
    for reg in plan.registrations:
        if reg.type != "kubernetes:helm.sh/v3:Release" or reg.inputs["chart"] != "gitlab-runner":
            continue
        values = reg.inputs["values"]
        for entry in tomllib.loads(values["runners"]["config"])["runners"]:
            kube = entry["kubernetes"]
            (patch,) = kube["pod_spec"]
            (build,) = yaml.safe_load(patch["patch"])["containers"]
            tolerations = [
                {"key": k.split("=")[0], "operator": "Equal", "value": k.split("=", 1)[1], "effect": effect}
                for k, effect in kube["node_tolerations"].items()
            ]
            requests = {"cpu": kube["cpu_request"], "memory": kube["memory_request"], **build["resources"]["requests"]}
            limits = {"cpu": kube["cpu_limit"], "memory": kube["memory_limit"], **build["resources"]["limits"]}
            containers = [{"name": "build", "resources": {"requests": requests, "limits": limits}}, {"name": "helper"}]
            yield (
                values["podLabels"]["gpu"],
                {
                    "nodeSelector": kube["node_selector"],
                    "tolerations": tolerations,
                    "containers": containers,
                },
            )


def test_a_ci_job_never_shares_a_node_with_a_benchmark(fleet, plans):
    """Each CI job pod a runner renders lands on its card's CI pool and nowhere else (not the card's own pool); no
    benchmark, probe or sweep worker the stack renders tolerates the CI taint or selects the CI label."""
    jobs = benchmarks = 0
    for name, plan in plans.items():
        cluster = fleet.cluster(name)
        nodes = cluster_nodes(cluster)
        runners = {r.pool.card: r for r in fleet.runners_of(cluster)}
        for card, spec in _rendered_ci_jobs(plan):
            found = place(PodToPlace(f"a CI job on {name}", runners[card].pool.name, spec), nodes)
            assert found is None, found.message
            jobs += 1
        for labels, spec in _rendered_pods(plan):
            assert not CI_TAINT.tolerated_by(spec.get("tolerations") or []), (name, labels)
            assert pod_contract.CI_LABEL not in (spec.get("nodeSelector") or {}), (name, labels)
            benchmarks += 1
    assert jobs == sum(len(fleet.runners_of(c)) for c in fleet.clusters.values()) and benchmarks


def _rendered_pods(plan):
    """(labels, pod spec) of every benchmark, probe and sweep-worker pod template a stack renders."""
    for reg in jobs_of(plan):
        if is_queued(reg):  # it runs on a worker, its pool's selector added there (test_queued_workloads_...)
            continue
        template = job_spec(reg)["template"]
        yield template["metadata"]["labels"], template["spec"]
    for reg in plan.registrations:
        if reg.type == "kubernetes:trainer.kubeflow.org/v1alpha1:TrainingRuntime" and not is_queued_runtime(reg):
            for job in reg.inputs["spec"]["template"]["spec"]["replicatedJobs"]:
                template = job["template"]["spec"]["template"]
                yield template["metadata"]["labels"], template["spec"]


def test_every_pod_the_policy_implies_fits_its_own_pool_and_no_other(fleet):
    """The model's placement (fleet/model/placement/pods.py, what validate and plan check) of every benchmark, probe,
    sweep worker and CI job of the shipped fleet, on nodes made from its pools and the catalogue's machines."""
    placed = 0
    for cluster in fleet.clusters.values():
        pods = fleet_pods(fleet, cluster)
        assert misplaced(pods, cluster_nodes(cluster)) == [], cluster.name
        placed += len(pods)
    assert placed >= sum(len(fleet.workload_jobs(c)) for c in fleet.clusters.values())


def test_every_rendered_pod_lands_on_its_pool_as_the_model_predicts(fleet, plans):
    """The pods the plan really renders, placed by the same rules: each lands on the pool its labels name (a sweep
    pool by its size label) and nowhere else, and asks exactly what the model's prediction asks."""
    checked = 0
    for name, plan in plans.items():
        cluster = fleet.cluster(name)
        nodes = cluster_nodes(cluster)
        predicted: dict[tuple[str, str], list[dict[str, int]]] = {}
        for p in fleet_pods(fleet, cluster):  # a pool may run several sweep points, each with its cards per worker
            predicted.setdefault((p.pool, p.what.split(" ")[0]), []).append(pod_requests(p.spec))
        for labels, spec in _rendered_pods(plan):
            pool = cluster.pool_sized(labels["gpu"], (spec.get("nodeSelector") or {}).get(CARDS_PER_NODE_LABEL))
            assert pool is not None, labels
            found = place(PodToPlace(f"{labels['workload']} on {name}", pool.name, spec), nodes)
            assert found is None, found.message
            kind = labels["workload"] if labels["workload"] != "probe" else "the"
            assert (pool.name, kind) in predicted, (name, labels)
            assert pod_requests(spec) in predicted[(pool.name, kind)], (name, labels)
            checked += 1
    assert checked


def test_the_queues_are_wired_as_the_policy_says(fleet, plans):
    """The manager dispatches each queue to its clusters in the policy's order; every worker exports its kubeconfig
    for the manager as a secret once its stack has the manager's token, and says how to make one until then (nothing
    to check in a fleet without queues)."""
    dispatch = fleet.dispatch
    if dispatch is None:
        return
    kueue = "kubernetes:kueue.x-k8s.io/v1beta2:"
    configs = {
        r.inputs["metadata"]["name"]: r.inputs["spec"]["clusters"]
        for r in plans[dispatch.manager].registrations
        if r.type == kueue + "MultiKueueConfig"
    }
    assert configs == {f"queue-{q.name}": list(q.clusters) for q in dispatch.queues}
    assert dispatch.manager not in {c for q in dispatch.queues for c in q.clusters}
    for worker in dispatch.workers:
        if "multikueue_kubeconfig" in plans[worker].exports:
            assert rpc.is_rpc_secret(plans[worker].exports["multikueue_kubeconfig"]), worker
        else:
            assert any("gpu-fleet:multikueueToken is not set" in f.message for f in plans[worker].findings), worker
        local = {r.inputs["metadata"]["name"] for r in plans[worker].registrations if r.type == kueue + "LocalQueue"}
        assert {q.name for q in dispatch.queues_of(worker)} <= local, worker


def admitted(pod: dict, pool) -> dict:
    """A queued pod as a worker's Kueue admits it on ``pool``'s flavor: the flavor's node labels and tolerations added
    (components/kubernetes/multikueue.py, the workers' ResourceFlavors)."""
    tolerations = [
        {"key": t.key, "operator": "Equal", "value": t.value, "effect": t.effect} for t in pool.pod_tolerations
    ]
    return {**pod, "nodeSelector": pool.node_selector, "tolerations": tolerations}


def test_queued_workloads_run_once_through_their_queue_on_their_cards_pools(fleet, plans):
    """A workload that names a queue (policy: workloads.<name>.queue): its Jobs once on the manager, none per cluster;
    each Job, as a worker runs it once Kueue gave it its pool's flavor (the flavor's selector and tolerations added),
    lands on that pool alone on every worker that offers the card, the queue's first cluster first."""
    jobs = fleet.queued_jobs()
    if not jobs:
        return
    manager = plans[fleet.dispatch.manager]
    declared = {(r.inputs["metadata"]["labels"]["workload"], r.inputs["metadata"]["labels"]["gpu"]): r
                for r in jobs_of(manager) if is_queued(r)}  # fmt: skip
    assert set(declared) == {(j.workload.name, j.card) for j in jobs}
    for name, plan in plans.items():
        per_cluster = {r.inputs["metadata"]["labels"]["workload"] for r in jobs_of(plan) if not is_queued(r)}
        assert not per_cluster & set(fleet.queued), name
    placed = 0
    for job in jobs:
        pod = job_spec(declared[(job.workload.name, job.card)])["template"]["spec"]
        assert pod["affinity"] == fleet.queued_affinity(job)
        for worker in job.queue.clusters:
            cluster = fleet.cluster(worker)
            flavors = {p.card: p for p in job.queue.pools(cluster)}
            if job.card not in flavors:
                continue
            pool = flavors[job.card]
            found = place(PodToPlace(f"{job.name} on {worker}", pool.name, admitted(pod, pool)), cluster_nodes(cluster))
            assert found is None, found.message
            placed += 1
    assert placed >= len(jobs)


def test_queued_sweep_points_run_once_on_the_manager_and_their_runtime_on_each_worker_that_holds_them(fleet, plans):
    """A sweeping workload that names a queue: each point one TrainJob of its queue on the manager, none on a worker,
    whose runtime is the manager's on every worker that holds it; a sweep that names no queue stays per cluster."""
    trainjob = "kubernetes:trainer.kubeflow.org/v1alpha1:TrainJob"
    runtime = "kubernetes:trainer.kubeflow.org/v1alpha1:TrainingRuntime"
    points = fleet.queued_points()
    for name, plan in plans.items():
        queued_here = [r for r in plan.registrations if r.type == trainjob and not pod_contract.is_sweep_queue(
            r.inputs["metadata"]["labels"].get("kueue.x-k8s.io/queue-name", ""))]  # fmt: skip
        manager = fleet.dispatch is not None and fleet.dispatch.manager == name
        assert len(queued_here) == (len(points) if manager else 0), name
        per_cluster = {r.inputs["metadata"]["labels"]["workload"] for r in plan.registrations if r.type == trainjob}
        assert manager or not per_cluster & set(fleet.queued), name
    if not points:
        # the sample's sweeps name no queue: each cluster sweeps its own cards
        assert all(p.workload.name not in fleet.queued for c in fleet.clusters.values() for p in fleet.sweep_points(c))
        return
    on_manager = {r.inputs["metadata"]["name"]: r.inputs["spec"] for r in plans[fleet.dispatch.manager].registrations
                  if r.type == runtime}  # fmt: skip
    for name in fleet.dispatch.workers:
        held = fleet.queued_points_on(fleet.cluster(name))
        runtimes = {r.inputs["metadata"]["name"]: r.inputs["spec"] for r in plans[name].registrations
                    if r.type == runtime and "gpu-fleet.io/queue" in r.inputs["metadata"]["labels"]}  # fmt: skip
        assert len(runtimes) == len(held), name
        assert all(on_manager[n] == spec for n, spec in runtimes.items()), name
        # each point's pods, as the worker admits them on the flavor of the pool that holds them, land on that pool
        cluster = fleet.cluster(name)
        labelled = {(r.inputs["metadata"]["labels"]["workload"], r.inputs["metadata"]["labels"]["gpu"],
                     r.inputs["metadata"]["labels"][POINT_LABEL]): r.inputs["spec"] for r in plans[name].registrations
                    if r.type == runtime and QUEUE_LABEL in r.inputs["metadata"]["labels"]}  # fmt: skip
        for point, pool in fleet.queued_sweeps.held.get(name, ()):
            spec = labelled[(point.workload.name, point.card, str(point.accelerators))]
            for job in spec["template"]["spec"]["replicatedJobs"]:
                pod = job["template"]["spec"]["template"]["spec"]
                found = place(PodToPlace(f"{point.name} on {name}", pool.name, admitted(pod, pool)),
                              cluster_nodes(cluster))  # fmt: skip
                assert found is None, found.message
