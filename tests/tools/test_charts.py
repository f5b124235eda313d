"""The upstream charts, rendered: every Helm release of every stack (the sample fleet, each example, the fixture
fleet) rendered by the Helm v4 engine from the chart cache with our values, the cluster's Kubernetes version and
API versions (fleet/tools/checks/charts.py), and what comes out checked against the fleet's rules.

Expectations come from each fleet's own policy (registry, system pool, pools' taints, namespaces' Pod Security
levels), so a team's own fleet keeps this suite green."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.clusters.magnum import CONTROL_PLANE
from components.kubernetes.kueue_metrics import (
    KUEUE_METRICS_PORT,
    KUEUE_METRICS_READER,
    KUEUE_METRICS_SERVICE_LABELS,
    KUEUE_POD_LABELS,
)
from components.kubernetes.postrender import DEVICE_PLUGIN_POSTRENDER
from components.kubernetes.prometheus_stack import PROMETHEUS_ACCOUNT
from fleet.model.core import pod_contract
from fleet.model.core.clouds import cloud_rules
from fleet.model.core.clusters import Cluster
from fleet.model.monitoring import grafana
from fleet.model.placement.pods import Node, cluster_nodes, pool_node, selector_matches
from fleet.tools.checks.chart_placement import (
    node_agent_problems,
    operated,
    placement_problems,
    stack_pods,
)
from fleet.tools.checks.charts import (
    ChartCacheError,
    HelmRelease,
    PodOf,
    RenderedRelease,
    helm_releases,
    helm_stream,
    kube_version,
    pods_of,
    render_release,
    rendered_templates,
)
from fleet.tools.engine.mock_engine import Registration
from fleet.tools.engine.render import kubernetes_manifest
from policy.gpufleet_policies.pod_security import baseline_problems, restricted_problems
from tests.tools.conftest import PlannedFleet

Rendered = dict[tuple[str, str], list[RenderedRelease]]
# Control-plane components that GKE, EKS, AKS and Magnum do not expose to a Prometheus in the cluster, as the job
# names kube-prometheus-stack 79.5.0 gives their monitors (templates/exporters/kube-*/servicemonitor.yaml: jobLabel
# jobLabel kube-scheduler, kube-controller-manager, kube-etcd, kube-proxy) and its rules query them.
HIDDEN_JOBS = ("kube-scheduler", "kube-controller-manager", "kube-etcd", "kube-proxy")


def _clusters(planned_fleets: list[PlannedFleet]) -> Iterator[tuple[PlannedFleet, str, Cluster]]:
    for planned in planned_fleets:
        for stack in planned.plans:
            yield planned, stack, planned.fleet.cluster(stack)


def _pods(rendered: list[RenderedRelease]) -> Iterator[tuple[RenderedRelease, PodOf]]:
    for item in rendered:
        for obj in item.objects:
            pod = pods_of(obj, item.release.namespace)
            if pod is not None:
                yield item, pod


def _where(planned: PlannedFleet, stack: str, item: RenderedRelease, kind: str, name: str) -> str:
    return f"{planned.name} {stack}: release {item.release.name} ({item.release.archive_name}) {kind} {name}"


def test_every_release_of_every_stack_renders(planned_fleets: list[PlannedFleet], rendered_charts: Rendered):
    releases = 0
    for planned, stack, _cluster in _clusters(planned_fleets):
        rendered = rendered_charts[(planned.name, stack)]
        assert [r.release for r in rendered] == helm_releases(planned.plans[stack])
        for item in rendered:
            assert item.objects, f"{planned.name} {stack}: {item.release.name} renders nothing"
        releases += len(rendered)
    assert releases >= sum(len(p.plans) for p in planned_fleets)  # kube-prometheus-stack on every stack, at least


def test_a_chart_missing_from_the_cache_is_a_clear_error(tmp_path: Path, chart_cache: Path):
    release = HelmRelease("s", "r", "no-such-chart", "1.0.0", "ns", {})
    with pytest.raises(ChartCacheError, match=r"r needs no-such-chart-1.0.0.tgz in the chart cache"):
        render_release(release, tmp_path, "1.33")


def test_the_clusters_version_is_the_policys_or_magnums_kube_tag(planned_fleets: list[PlannedFleet]):
    """Helm gets ``v<major>.<minor>.<patch>``; on Magnum the template's kube_tag (a site setting) decides."""
    assert kube_version("v1.28.9-rancher1") == "v1.28.9" and kube_version("1.33") == "v1.33.0"
    for planned, stack, cluster in _clusters(planned_fleets):
        version = planned.kubernetes_version(stack)
        if cluster.cloud == "openstack":
            (template,) = [r for r in planned.plans[stack].registrations if r.type.endswith(":ClusterTemplate")]
            assert version == template.inputs["labels"]["kube_tag"]
        else:
            assert version == cluster.kubernetes_version


def _runner_job_images(release: HelmRelease) -> list[tuple[str, str]]:
    """The images a GitLab runner starts CI job pods with: the job image (a job that names none) and the helper."""
    if release.chart != pod_contract.RUNNER_CHART:
        return []
    config = tomllib.loads(release.values["runners"]["config"])
    found = []
    for runner in config.get("runners", []):
        kube = runner.get("kubernetes", {})
        found.append(("CI job image (kubernetes.image)", kube.get("image", "")))
        # the runner's default helper is registry.gitlab.com/gitlab-org/gitlab-runner/gitlab-runner-helper
        # (gitlab-runner 18.9.0 helperimage/info.go), unless helper_image names another
        found.append(("CI job helper image (kubernetes.helper_image)", kube.get("helper_image", "")))
    return found


def test_every_image_comes_from_the_fleets_registry(planned_fleets: list[PlannedFleet], rendered_charts: Rendered):
    """Every container of every rendered pod, every image an operator or a runner starts pods with: the fleet's
    registry holds it, the policy's `registry` (upstream prunes versions and Docker Hub rate-limits). The operator's
    Thanos default (quay.io) is allowed only while nothing of the stack runs Thanos."""
    bad = []
    for planned, stack, _cluster in _clusters(planned_fleets):
        ours = planned.fleet.registry + "/"
        rendered = rendered_charts[(planned.name, stack)]
        # the operator's Thanos image (prometheus-operator --thanos-default-base-image) is pulled only for a Thanos
        # sidecar (a Prometheus with spec.thanos) or a ThanosRuler; the fleet runs neither
        thanos = [
            f"{o['kind']} {o['metadata']['name']}"
            for _item, o in operated(rendered)
            if o["kind"] == "ThanosRuler" or (o["kind"] == "Prometheus" and o["spec"].get("thanos"))
        ]
        for reg in planned.plans[stack].registrations:  # the stack's own pods (benchmarks, probes, the gateway ...)
            own = pods_of(kubernetes_manifest(reg)) if reg.type.startswith("kubernetes:") and reg.custom else None
            bad += [
                f"{planned.name} {stack}: {reg.type} {reg.name} container {c['name']}: {c.get('image')}"
                for c in (own.containers() if own else ())
                if not str(c.get("image", "")).startswith(ours)
            ]
        for item, pod in _pods(rendered):
            for c in pod.containers():
                if not str(c.get("image", "")).startswith(ours):
                    bad.append(
                        f"{_where(planned, stack, item, pod.kind, pod.name)} container {c['name']}: {c['image']}"
                    )
                for arg in map(str, c.get("args") or []):
                    flag, _, image = arg.partition("=")
                    if flag == "--prometheus-config-reloader" and not image.startswith(ours):
                        bad.append(f"{_where(planned, stack, item, pod.kind, pod.name)}: {arg}")
                    if flag == "--thanos-default-base-image" and not image.startswith(ours) and thanos:
                        bad.append(f"{_where(planned, stack, item, pod.kind, pod.name)}: {arg}, and {thanos} use it")
        for item, obj in operated(rendered):
            image = obj["spec"].get("image", "")
            if not image.startswith(ours):
                bad.append(f"{_where(planned, stack, item, obj['kind'], obj['metadata']['name'])}: {image}")
        for item in rendered:
            for what, image in _runner_job_images(item.release):
                if not image.startswith(ours):
                    bad.append(f"{planned.name} {stack}: runner {item.release.name}: {what} {image or '(default)'}")
    assert bad == []


def _system_pod(pod_spec: dict[str, Any], cluster: Cluster) -> bool:
    selector = pod_spec.get("nodeSelector") or {}
    if CONTROL_PLANE in selector:  # the Magnum GPU autoscaler: on the masters, where its credentials are
        return True
    return set(cluster.system_selector.items()) <= set(selector.items())


def test_infra_pods_sit_on_the_system_pool(planned_fleets: list[PlannedFleet], rendered_charts: Rendered):
    """Every chart pod but the node agents (DaemonSets) selects the system pool (Magnum's GPU nodes carry no
    taint: only the selector keeps Prometheus off them), or the control plane."""
    bad = []
    for planned, stack, cluster in _clusters(planned_fleets):
        rendered = rendered_charts[(planned.name, stack)]
        for item, pod in _pods(rendered):
            if pod.kind != "DaemonSet" and not _system_pod(pod.spec, cluster):
                bad.append(
                    f"{_where(planned, stack, item, pod.kind, pod.name)}: nodeSelector {pod.spec.get('nodeSelector')}"
                )
        for item, obj in operated(rendered):
            if not _system_pod(obj["spec"], cluster):
                bad.append(f"{_where(planned, stack, item, obj['kind'], obj['metadata']['name'])}: spec.nodeSelector")
    assert bad == []


def test_node_agents_tolerate_the_taints_of_the_gpu_pools_they_select(
    planned_fleets: list[PlannedFleet], rendered_charts: Rendered
):
    """A DaemonSet whose selector and affinity admit a GPU pool's nodes tolerates all the pool's taints (the card's,
    the sweep's, the cloud's spot taint): a node agent refused on a GPU node leaves that node without its device
    plugin or its metrics. dcgm-exporter and the device plugin must reach every NVIDIA pool."""
    bad, reached = [], set()
    for planned, stack, cluster in _clusters(planned_fleets):
        nodes = {pool.key: pool_node(cluster, pool) for pool in cluster.all_pools}
        for item, pod in _pods(rendered_charts[(planned.name, stack)]):
            if pod.kind != "DaemonSet":
                continue
            for pool in cluster.all_pools:
                node = nodes[pool.key]
                if not selector_matches(pod.spec, node.labels):  # the model's node: the kubelet's labels too
                    continue
                reached.add((planned.name, stack, item.release.chart, pool.key))
                bad += [
                    f"{_where(planned, stack, item, pod.kind, pod.name)}: "
                    f"no toleration for {taint.as_string()} of pool {pool.key}"
                    for taint in node.untolerated(pod.spec)
                ]
            if item.release.chart in ("dcgm-exporter",) and pod.name == "dcgm-exporter":
                for pool in cluster.all_pools:
                    if pool.accelerator.is_nvidia and not selector_matches(pod.spec, nodes[pool.key].labels):
                        bad.append(f"{_where(planned, stack, item, pod.kind, pod.name)}: never reaches pool {pool.key}")
    assert bad == []
    assert reached  # the check saw node agents on GPU pools


def _namespace_levels(plan_registrations: list[Registration]) -> dict[str, str]:
    levels = {}
    for reg in plan_registrations:
        if reg.type == "kubernetes:core/v1:Namespace":
            meta = reg.inputs.get("metadata") or {}
            level = (meta.get("labels") or {}).get(f"{pod_contract.POD_SECURITY_LABEL_PREFIX}/enforce")
            if level:
                levels[meta["name"]] = level
    return levels


def test_every_chart_pod_fits_its_namespaces_pod_security_level(
    planned_fleets: list[PlannedFleet], rendered_charts: Rendered
):
    """With the namespace's enforced level (from the plan's Namespace labels; none enforced: privileged), checked
    by the policy pack's own `restricted` and `baseline` rules (policy/gpufleet_policies/pod_security.py); Helm hooks
    included: the API server admits them like any pod."""
    bad, checked = [], 0
    for planned, stack, _cluster in _clusters(planned_fleets):
        levels = _namespace_levels(planned.plans[stack].registrations)
        for item, pod in _pods(rendered_charts[(planned.name, stack)]):
            level = levels.get(pod.namespace, "privileged")
            if level == "privileged":
                continue
            if level == "baseline":
                problems = baseline_problems(pod.spec, pod.metadata)
            else:
                problems = restricted_problems(pod.spec, metadata=pod.metadata)
            checked += 1
            bad += [
                f"{_where(planned, stack, item, pod.kind, pod.name)} in {pod.namespace} ({level}): {p}"
                for p in problems
            ]
    assert bad == []
    assert checked


def test_every_container_has_requests(planned_fleets: list[PlannedFleet], rendered_charts: Rendered):
    """CPU and memory requests on every container of every chart pod (BestEffort pods are evicted first from a busy
    system node), in every operated resource (Prometheus, Alertmanager) and in every pod of the stack's own
    (benchmarks, probes, sweep runtimes, the gateway)."""
    bad = []
    for planned, stack, _cluster in _clusters(planned_fleets):
        for reg in planned.plans[stack].registrations:
            own = pods_of(kubernetes_manifest(reg)) if reg.type.startswith("kubernetes:") and reg.custom else None
            for c in own.containers() if own else ():
                if not {"cpu", "memory"} <= set((c.get("resources") or {}).get("requests") or {}):
                    bad.append(f"{planned.name} {stack}: {reg.type} {reg.name} container {c['name']}")
        rendered = rendered_charts[(planned.name, stack)]
        for item, pod in _pods(rendered):
            for c in pod.containers():
                requests = (c.get("resources") or {}).get("requests") or {}
                if not {"cpu", "memory"} <= set(requests):
                    bad.append(f"{_where(planned, stack, item, pod.kind, pod.name)} container {c['name']}: {requests}")
        for item, obj in operated(rendered):
            requests = (obj["spec"].get("resources") or {}).get("requests") or {}
            if not {"cpu", "memory"} <= set(requests):
                bad.append(f"{_where(planned, stack, item, obj['kind'], obj['metadata']['name'])}: {requests}")
    assert bad == []


# What nvidia-device-plugin 0.17.1 renders without resources where the release has a configuration (its one resources
# value goes to the plugin's and the MPS daemon's own containers: components/kubernetes/postrender/device_plugin.py).
CONFIG_MANAGER_CONTAINERS = (
    "nvidia-device-plugin-init",
    "nvidia-device-plugin-sidecar",
    "mps-control-daemon-init",
    "mps-control-daemon-sidecar",
)


def test_the_device_plugins_post_renderer_run_as_helm_runs_it_gives_what_this_tier_renders(
    planned_fleets: list[PlannedFleet], rendered_charts: Rendered, chart_cache: Path
):
    """Each device plugin release with a configuration (its config manager rendered): the chart's own rendering, as
    Helm 3 streams it, through the executable the Release names (run from the project's folder, as the provider runs
    it) gives the objects this tier holds to the fleet's rules, every container of the plugin's and the MPS daemon's
    pods with the plugin's resources; without the post-renderer, the chart leaves four containers without any."""
    from tests.conftest import ROOT

    checked = 0
    for planned, stack, _cluster in _clusters(planned_fleets):
        for item in rendered_charts[(planned.name, stack)]:
            release = item.release
            if release.chart != "nvidia-device-plugin" or "config" not in release.values:
                continue
            assert release.postrender == DEVICE_PLUGIN_POSTRENDER, f"{planned.name} {stack}"
            templates, _crds = rendered_templates(release, chart_cache, planned.kubernetes_version(stack))
            done = subprocess.run(
                [release.postrender], input=helm_stream(templates), capture_output=True, text=True, cwd=ROOT, timeout=60
            )
            assert (done.returncode, done.stderr) == (0, ""), f"{planned.name} {stack}"
            objects = [o for o in yaml.safe_load_all(done.stdout) if o]
            assert objects == [o for o in item.objects if o.get("kind") != "CustomResourceDefinition"]
            bare = render_release(dataclasses.replace(release, postrender=""), chart_cache, "1.33")
            empty = sorted(
                c["name"] for _item, pod in _pods([bare]) for c in pod.containers() if not c.get("resources")
            )
            assert empty == sorted(CONFIG_MANAGER_CONTAINERS)
            for _item, pod in _pods([item]):
                assert all(c["resources"] == release.values["resources"] for c in pod.containers()), pod.name
            checked += 1
    assert checked, "the tests' own fleet (tests/fixtures/fleet) time-slices a pool through our device plugin"


def test_no_alert_rule_or_monitor_watches_a_hidden_control_plane_component(
    planned_fleets: list[PlannedFleet], rendered_charts: Rendered
):
    """Where the scheduler, controller manager, etcd and kube-proxy run as no pod the cluster's Prometheus reaches
    (``control_plane_pods`` false in fleet/model/core/clouds: GKE, EKS and AKS run the control plane themselves, Magnum
    runs it as systemd units on its masters), a monitor of one finds no target and its `...Down` alert fires for ever.
    An existing cluster keeps the chart's monitors. Where the cluster DNS is no CoreDNS (GKE's kube-dns,
    ``coredns_pods``) the chart's coreDns target would be down for ever, and its TargetDown fire."""
    bad, rules = [], 0
    for planned, stack, cluster in _clusters(planned_fleets):
        platform = cloud_rules(cluster.cloud)
        jobs = (() if platform.control_plane_pods else HIDDEN_JOBS) + (() if platform.coredns_pods else ("coredns",))
        if not jobs:
            continue
        hidden = re.compile(r'job="(' + "|".join(jobs) + ')"')
        for item in rendered_charts[(planned.name, stack)]:
            for obj in item.objects:
                name = obj.get("metadata", {}).get("name", "")
                if obj.get("kind") == "ServiceMonitor" and any(name.endswith(job) for job in jobs):
                    bad.append(f"{_where(planned, stack, item, 'ServiceMonitor', name)}")
                if obj.get("kind") != "PrometheusRule":
                    continue
                for group in obj["spec"]["groups"]:
                    for rule in group["rules"]:
                        rules += 1
                        if hidden.search(str(rule["expr"])):
                            bad.append(
                                f"{_where(planned, stack, item, 'PrometheusRule', name)}: "
                                f"{rule.get('alert') or rule.get('record')}"
                            )
    assert bad == []
    assert rules  # the chart's own rules were rendered and read


def _kueue_configuration(rendered: RenderedRelease) -> dict[str, Any]:
    (config_map,) = [
        o for o in rendered.objects if o["kind"] == "ConfigMap" and "manager-config" in o["metadata"]["name"]
    ]
    return yaml.safe_load(config_map["data"]["controller_manager_config.yaml"])


def test_our_kueue_configuration_keeps_the_charts_defaults(
    planned_fleets: list[PlannedFleet], rendered_charts: Rendered, chart_cache: Path
):
    """Our configuration replaces the chart's whole (kueue 0.19.2 managerConfig.controllerManagerConfigYaml): every
    setting of the chart's default stays as the chart has it (client QPS and burst, controller concurrency ...), but
    the frameworks, which we narrow to the sweeps' TrainJobs and JobSets."""
    ours = [item for key, rendered in rendered_charts.items() for item in rendered if item.release.chart == "kueue"]
    assert ours, "no fleet of the tests runs Kueue"
    default = _kueue_configuration(
        render_release(
            HelmRelease("s", "kueue", "kueue", ours[0].release.version, "kueue-system", {}), chart_cache, "1.33"
        )
    )
    assert default["clientConnection"]["qps"] > 0
    for item in ours:
        config = _kueue_configuration(item)
        for key, value in default.items():
            if key != "integrations":
                assert config.get(key) == value, (item.release.stack, key)


def test_what_the_kueue_scrape_names_is_what_the_charts_render(
    planned_fleets: list[PlannedFleet], rendered_charts: Rendered
):
    """The ServiceMonitor, ClusterRoleBinding and ingress rule of components/kubernetes/multikueue.py
    ``kueue_metrics_scrape`` name the kueue chart's metrics Service, port, reader ClusterRole and pods, and the
    kube-prometheus-stack chart's Prometheus ServiceAccount, as the pinned charts render them."""
    checked = 0
    for planned, stack, _cluster in _clusters(planned_fleets):
        for item in rendered_charts[(planned.name, stack)]:
            by_kind: dict[str, list[dict[str, Any]]] = {}
            for obj in item.objects:
                by_kind.setdefault(obj.get("kind", ""), []).append(obj)
            if item.release.chart == "kueue":
                services = [
                    s
                    for s in by_kind.get("Service", [])
                    if KUEUE_METRICS_SERVICE_LABELS.items() <= (s["metadata"].get("labels") or {}).items()
                ]
                assert len(services) == 1, f"{stack}: the kueue metrics Service"
                (port,) = services[0]["spec"]["ports"]
                assert (port["name"], port["port"]) == ("https", KUEUE_METRICS_PORT)
                roles = {r["metadata"]["name"]: r for r in by_kind.get("ClusterRole", [])}
                assert roles[KUEUE_METRICS_READER]["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
                pods = [d["spec"]["template"]["metadata"]["labels"] for d in by_kind.get("Deployment", [])]
                assert any(KUEUE_POD_LABELS.items() <= p.items() for p in pods)
                checked += 1
            if item.release.chart == "kube-prometheus-stack":
                accounts = [a["metadata"]["name"] for a in by_kind.get("ServiceAccount", [])]
                assert PROMETHEUS_ACCOUNT in accounts, f"{stack}: {accounts}"
    assert checked, "the tests' own fleet (tests/fixtures/fleet) sweeps, so at least one planned stack runs Kueue"


def test_grafana_on_the_central_collects_the_dashboards_as_the_chart_renders_it(
    planned_fleets: list[PlannedFleet], rendered_charts: Rendered
):
    """In what the pinned kube-prometheus-stack renders for every central: the dashboard sidecar watches the monitoring
    namespace for the fleet's label and files each dashboard by its folder annotation, the provider reads folders
    from that structure, and the Prometheus datasource has the uid every panel names and the federation interval as
    its scrape interval (Grafana's $__rate_interval is four of them). A leaf runs no Grafana."""
    label, value = grafana.SIDECAR_LABEL
    for planned, stack, cluster in _clusters(planned_fleets):
        objects = [o for item in rendered_charts[(planned.name, stack)] for o in item.objects]
        grafanas = [o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"].endswith("-grafana")]
        if not cluster.central:
            assert grafanas == [], f"{planned.name} {stack}"
            continue
        (deployment,) = grafanas
        containers = {c["name"]: c for c in deployment["spec"]["template"]["spec"]["containers"]}
        env = {e["name"]: e.get("value") for e in containers["grafana-sc-dashboard"]["env"]}
        assert (env["LABEL"], env["LABEL_VALUE"], env["NAMESPACE"]) == (label, value, "monitoring"), planned.name
        assert env["FOLDER_ANNOTATION"] == grafana.FOLDER_ANNOTATION, planned.name
        config_maps = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ConfigMap"}
        (provider,) = [m for n, m in config_maps.items() if n.endswith("-grafana-config-dashboards")]
        (options,) = [p["options"] for p in yaml.safe_load(provider["data"]["provider.yaml"])["providers"]]
        assert options == {"foldersFromFilesStructure": True, "path": env["FOLDER"]}, planned.name
        (source,) = [m for n, m in config_maps.items() if n.endswith("-grafana-datasource")]
        prometheus = next(d for d in yaml.safe_load(source["data"]["datasource.yaml"])["datasources"]
                          if d["type"] == "prometheus")  # fmt: skip
        assert prometheus["uid"] == grafana.DATASOURCE_UID and prometheus["isDefault"] is True, planned.name
        assert prometheus["jsonData"]["timeInterval"] == planned.fleet.monitoring.federation_interval, planned.name


# --- every pod placed: the charts' and the stack's own, by the model's rules (fleet/tools/checks/chart_placement.py) -


def test_the_node_agents_the_charts_render_hold_what_the_model_counts(
    planned_fleets: list[PlannedFleet], rendered_charts: Rendered
):
    """On every node of every pool, the DaemonSets that land there (selector, affinity and taints, by the model's
    rules) request exactly what the model holds back for its node agents (fleet/model/placement/node_agents.py), the
    room ``validate`` and ``plan`` take off each node before placing the pool's own pods."""
    bad, checked = [], 0
    for planned, stack, cluster in _clusters(planned_fleets):
        pods = stack_pods(planned.plans[stack], rendered_charts[(planned.name, stack)])
        bad += node_agent_problems(cluster, pods)
        checked += sum(p.kind == "DaemonSet" for p in pods)
    assert bad == []
    assert checked


def test_every_pod_the_charts_and_the_stack_run_lands_on_the_system_pool_alone_and_fits(
    planned_fleets: list[PlannedFleet], rendered_charts: Rendered
):
    """Every pod of a Deployment, StatefulSet, Job (Helm hooks too) or operated Prometheus/Alertmanager, the charts'
    and the stack's own, placed by the model's rules on nodes made from the cluster's pools (the node agents' room
    already taken): it fits a system node and no other pool admits it (the GPU autoscaler on Magnum: the masters),
    and the system pool at its maximum holds them all at once (requests x replicas)."""
    bad, placed = [], 0
    for planned, stack, cluster in _clusters(planned_fleets):
        pods = stack_pods(planned.plans[stack], rendered_charts[(planned.name, stack)])
        bad += [f"{planned.name} {problem}" for problem in placement_problems(cluster, pods)]
        placed += sum(p.kind != "DaemonSet" for p in pods)
    assert bad == []
    assert placed


def test_a_system_pool_too_small_for_the_infrastructure_is_found(
    planned_fleets: list[PlannedFleet], rendered_charts: Rendered, monkeypatch
):
    """The same check on a system pool of one node that the infrastructure overfills (its allocatable cut to what the
    node agents take plus 100m and 256 MiB): the pods that no longer fit, and the pool's total, with the numbers."""
    import dataclasses

    import fleet.tools.checks.chart_placement as chart_placement

    planned, stack, cluster = next(
        (p, s, c) for p, s, c in _clusters(planned_fleets) if cluster_nodes(c)[0].allocatable is not None
    )
    pods = stack_pods(planned.plans[stack], rendered_charts[(planned.name, stack)])
    assert placement_problems(cluster, pods) == []
    real = chart_placement.cluster_nodes

    def small_system_node(c: Cluster, catalogue=None) -> list[Node]:
        system, *others = real(c, catalogue)
        room = {"cpu": system.held["cpu"] + 100, "memory": system.held["memory"] + 256 * 2**20}
        return [dataclasses.replace(system, allocatable={**system.allocatable, **room}), *others]

    monkeypatch.setattr(chart_placement, "cluster_nodes", small_system_node)
    one_node = dataclasses.replace(cluster, system_pool=dataclasses.replace(cluster.system_pool, max_nodes=1))
    found = "\n".join(placement_problems(one_node, pods))
    assert "does not fit a node of pool system" in found and "cpu: asks" in found
    assert f"{cluster.name}: the system pool's pods ask" in found and "raise system_pool max_nodes" in found


def test_plan_with_a_chart_cache_places_the_chart_pods_and_says_what_the_cache_lacks(
    chart_cache: Path, tmp_path: Path, capsys, monkeypatch
):
    """``plan --chart-cache DIR``: the same rendering and placement as this tier, for a user with the charts pulled;
    an archive the folder lacks is a mandatory finding that says which and how to get it."""
    from fleet.tools.cli import main
    from tests.conftest import FIXTURES

    fixture = FIXTURES / "fleet"
    on_fixture = [
        *("--policy", str(fixture / "fleet.yaml"), "--stacks-dir", str(fixture / "stacks")),
        *("--workloads-dir", str(fixture / "workloads"), "--stack", "fix-gke", "--no-policy-pack"),
    ]
    assert main(["plan", *on_fixture, "--chart-cache", str(chart_cache)]) == 0
    assert "0 mandatory violation(s)" in capsys.readouterr().out
    empty = tmp_path / "charts"
    empty.mkdir()
    assert main(["plan", *on_fixture, "--chart-cache", str(empty)]) == 1
    out = capsys.readouterr().out
    assert re.search(
        rf"\[mandatory\] chart-placement: fix-gke: release \S+ needs \S+\.tgz in the chart cache {empty}", out
    )
    # a folder that is not there is the flag's mistake: refused before any stack is planned, exit 2
    from fleet.tools.commands import planning

    def planned(*args: object) -> None:
        raise AssertionError("a stack was planned before the --chart-cache folder was checked")

    monkeypatch.setattr(planning, "plan_selected", planned)
    assert main(["plan", *on_fixture, "--chart-cache", str(tmp_path / "nope")]) == 2
    assert f"--chart-cache {tmp_path / 'nope'}: no such folder" in capsys.readouterr().err


def test_no_prometheus_keeps_its_data_unbounded(planned_fleets: list[PlannedFleet], rendered_charts: Rendered):
    """Every Prometheus the charts render keeps its data on a volume claim, or in an emptyDir with a size limit and a
    retentionSize below it (a leaf's week of data in an unbounded emptyDir filled the system node's disk and got the
    pod evicted, issue 34); Prometheus' base-2 units (prometheus docs/storage.md)."""
    from fleet.model.core.quantity import parse_quantity

    units = {"B": 1, "KB": 2**10, "MB": 2**20, "GB": 2**30, "TB": 2**40}
    bad, checked = [], 0
    for planned, stack, _cluster in _clusters(planned_fleets):
        for _item, obj in operated(rendered_charts[(planned.name, stack)]):
            if obj["kind"] != "Prometheus":
                continue
            checked += 1
            storage = obj["spec"].get("storage") or {}
            if storage.get("volumeClaimTemplate"):
                continue
            limit = (storage.get("emptyDir") or {}).get("sizeLimit")
            size = re.fullmatch(r"(\d+)([KMGT]?B)", str(obj["spec"].get("retentionSize", "")))
            if limit is None or size is None or int(size[1]) * units[size[2]] >= parse_quantity(str(limit)):
                bad.append(f"{planned.name} {stack}: {obj['metadata']['name']}: storage {storage}, retentionSize "
                           f"{obj['spec'].get('retentionSize')}")  # fmt: skip
    assert bad == []
    assert checked
