"""The infra stack under the mock engine, on small fixture fleets: Prometheus placement and volume, the GPU exporter
per cloud, and what is deliberately absent."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from pulumi.runtime import rpc

from components.kubernetes.central_monitoring import (
    ALERTMANAGER_CONFIG_SECRET,
    alertmanager_config,
    parse_alert_receiver,
)
from components.kubernetes.federation import federated_selectors
from fleet.model.billing import accounting_hours
from fleet.model.billing.accounting import ACCOUNTING_RULES, GROUP
from fleet.model.loader import load_fleet
from fleet.model.monitoring.prometheus import duration_seconds
from fleet.model.probes import probe_phases
from fleet.tools.cli import main
from fleet.tools.engine.plan import StackPlan, plan_fleet
from tests.helpers import MAGNUM_SITE, by_type, plan_one, write_policy

MAGNUM = {"openstack:cloud": "site", "gpu-fleet:magnum": MAGNUM_SITE, "gpu-fleet:storageClass": "cinder-ssd"}
MAGNUM_CENTRAL = """
clusters:
  openstack:
    os-central:
      region: site
      central: true
      gpus: [t4]
"""
GKE_CENTRAL = """
clusters:
  gcp:
    gke-central:
      zone: europe-west4-a
      central: true
      gpus: [l4, tpu-v5e]
"""
GCP = {"gcp:project": "proj-1"}
RELEASE = "kubernetes:helm.sh/v3:Release"


def release(plan: StackPlan, name: str) -> dict[str, Any]:
    found = [r.inputs for r in by_type(plan, RELEASE) if r.inputs["name"] == name]
    assert found, f"no Helm release {name}"
    return found[0]


@pytest.fixture(scope="module")
def magnum(tmp_path_factory) -> StackPlan:
    return plan_one(tmp_path_factory.mktemp("magnum"), MAGNUM_CENTRAL, "os-central", MAGNUM)


@pytest.fixture(scope="module")
def gke(tmp_path_factory) -> StackPlan:
    return plan_one(tmp_path_factory.mktemp("gke"), GKE_CENTRAL, "gke-central", GCP)


def test_a_short_federation_interval_plans_with_a_timeout_below_it(tmp_path: Path):
    """federation_interval 30s (scrape_interval 15s) used to end the plan in a traceback: the jobs kept 45s."""
    policy = GKE_CENTRAL + "monitoring: {scrape_interval: 15s, federation_interval: 30s}\n"
    plan = plan_one(tmp_path, policy, "gke-central", GCP)
    rules = release(plan, "kps")["values"]["additionalPrometheusRulesMap"]["gpufleet-federation-alerts"]
    slow = next(r for g in rules["groups"] for r in g["rules"] if r.get("alert") == "FederationScrapeSlow")
    assert slow["expr"].endswith("> 17.6")  # 80% of the 22s timeout a 30s interval gets


def test_central_volume_uses_the_stack_storage_class(magnum, gke):
    claim = release(magnum, "kps")["values"]["prometheus"]["prometheusSpec"]["storageSpec"]["volumeClaimTemplate"]
    assert claim["spec"]["storageClassName"] == "cinder-ssd"
    # GKE has a default class: no class named unless the stack names one
    claim = release(gke, "kps")["values"]["prometheus"]["prometheusSpec"]["storageSpec"]["volumeClaimTemplate"]
    assert "storageClassName" not in claim["spec"]


def test_a_leaf_prometheus_is_bounded_to_its_storage_and_trims_before_eviction(tmp_path: Path):
    policy = GKE_CENTRAL + "    gke-leaf: {zone: us-central1-a, gpus: [t4]}\nmonitoring: {leaf_storage: 4Gi}\n"
    leaf = plan_one(tmp_path, policy, "gke-leaf", GCP)
    spec = release(leaf, "kps")["values"]["prometheus"]["prometheusSpec"]
    assert spec["storageSpec"] == {"emptyDir": {"sizeLimit": "4Gi"}}
    # 80% of 4 GiB in Prometheus' base-2 units, whatever leaf_retention keeps
    assert spec["retentionSize"] == "3276MB" and 3276 * 2**20 < 0.81 * 4 * 2**30
    assert spec["retention"] == "7d"


def test_central_without_a_storage_class_on_magnum_is_refused(tmp_path: Path, capsys):
    config = {k: v for k, v in MAGNUM.items() if k != "gpu-fleet:storageClass"}
    policy, stacks = write_policy(tmp_path, MAGNUM_CENTRAL, {"os-central": config})
    (tmp_path / "w").mkdir()
    status = main(
        ["plan", "--policy", str(policy), "--stacks-dir", str(stacks), "--workloads-dir", str(tmp_path / "w")]
    )
    err = capsys.readouterr().err
    assert status == 2
    assert "Pulumi.os-central.yaml:" in err and "gpu-fleet:storageClass: required on os-central" in err
    assert "pulumi config set --stack os-central gpu-fleet:storageClass <class>" in err
    assert "Traceback" not in err


def test_infra_pods_stay_off_gpu_nodes_on_magnum(magnum):
    """Magnum GPU nodes carry no taint: Prometheus and the rest select the default worker group's role."""
    worker = {"magnum.openstack.org/role": "worker"}
    values = release(magnum, "kps")["values"]
    assert values["prometheus"]["prometheusSpec"]["nodeSelector"] == worker
    assert values["alertmanager"]["alertmanagerSpec"]["nodeSelector"] == worker
    assert values["grafana"]["nodeSelector"] == worker
    assert values["prometheusOperator"]["nodeSelector"] == worker
    assert values["prometheusOperator"]["admissionWebhooks"]["patch"]["nodeSelector"] == worker
    assert values["kube-state-metrics"]["nodeSelector"] == worker


def test_leaf_gateway_runs_on_the_system_pool(tmp_path):
    policy = (
        MAGNUM_CENTRAL
        + """
  gcp:
    gke-leaf:
      zone: europe-west4-a
      gpus: [l4]
"""
    )
    plan = plan_one(tmp_path, policy, "gke-leaf", GCP)
    (gateway,) = [d for d in by_type(plan, "kubernetes:apps/v1:Deployment") if d.name.endswith("federation-gateway")]
    assert gateway.inputs["spec"]["template"]["spec"]["nodeSelector"] == {"role": "system"}


def test_gke_exporter_reads_the_driver_from_the_host(gke):
    """GKE keeps its driver in /home/kubernetes/bin/nvidia and gives it only to pods that request a GPU."""
    values = release(gke, "dcgm-exporter")["values"]
    (volume,) = values["extraHostVolumes"]
    assert volume == {"name": "nvidia-install-dir-host", "hostPath": "/home/kubernetes/bin/nvidia"}
    mounts = {m["name"]: m for m in values["extraVolumeMounts"]}
    assert mounts["nvidia-install-dir-host"]["mountPath"] == "/usr/local/nvidia"
    assert mounts["exporter-metrics-volume"]["subPath"] == "default-counters.csv"  # the chart's default, kept
    env = {e["name"]: e["value"] for e in values["extraEnv"]}
    assert env["LD_LIBRARY_PATH"] == "/usr/local/nvidia/lib64"
    assert values["securityContext"] == {"privileged": True}
    assert values["serviceMonitor"]["enabled"] is True


def test_other_clouds_exporter_has_no_host_driver_mount(magnum):
    values = release(magnum, "dcgm-exporter")["values"]
    assert not {"extraHostVolumes", "extraVolumeMounts", "extraEnv", "securityContext"} & set(values)


@pytest.mark.parametrize("fixture", ["magnum", "gke"])
def test_exporter_namespace_admits_its_critical_priority_pods(fixture, request):
    """The chart's pods are system-node-critical; GKE admits those only where a matching quota exists."""
    plan: StackPlan = request.getfixturevalue(fixture)
    quotas = [q.inputs for q in by_type(plan, "kubernetes:core/v1:ResourceQuota") if q.name.endswith("critical-pods")]
    (quota,) = quotas
    (expr,) = quota["spec"]["scopeSelector"]["matchExpressions"]
    assert expr["scopeName"] == "PriorityClass" and "system-node-critical" in expr["values"]
    # one exporter per NVIDIA node at most: the NVIDIA pools' maximum sizes (t4 on Magnum, l4 on GKE; not the TPU)
    if fixture == "magnum":
        sizes = [g.inputs["maxNodeCount"] for g in by_type(plan, "openstack:containerinfra/nodeGroup:NodeGroup")]
    else:
        pools = by_type(plan, "gcp:container/nodePool:NodePool")
        sizes = [p.inputs["autoscaling"]["totalMaxNodeCount"] for p in pools if p.name.endswith("gpu-l4")]
    assert sizes and quota["spec"]["hard"]["pods"] == str(sum(sizes))


def test_no_registry_mirror(magnum, gke):
    """The mirror was removed: no managed pool API of these clouds points containerd at it (docs/clouds.md)."""
    for plan in (magnum, gke):
        names = {
            r.inputs.get("metadata", {}).get("name") for r in plan.registrations if r.type.startswith("kubernetes:")
        }
        assert "registry-mirror" not in names


def test_node_exporter_runs_with_the_node_agents(magnum, gke):
    for plan in (magnum, gke):
        values = release(plan, "kps")["values"]
        assert values["prometheus-node-exporter"]["namespaceOverride"] == "node-agents"
        assert release(plan, "dcgm-exporter")["namespace"] == "node-agents"


def test_central_grafana_admin_password_is_generated_secret_and_exported(gke):
    values = release(gke, "kps")["values"]
    assert values["grafana"]["admin"] == {
        "existingSecret": "grafana-admin",
        "userKey": "admin-user",
        "passwordKey": "admin-password",
    }
    (secret,) = [r for r in by_type(gke, "kubernetes:core/v1:Secret") if r.name.endswith("-grafana-admin")]
    shown = secret.plain_inputs()["stringData"]
    assert set(shown) == {"admin-user", "admin-password"} and shown["admin-password"] == "[secret]"
    assert by_type(gke, "random:index/randomPassword:RandomPassword")
    assert rpc.is_rpc_secret(gke.exports["grafana_admin_password"])


def test_central_grafana_admin_password_from_secret_config(tmp_path):
    config = {**GCP, "gpu-fleet:grafanaAdminPassword": {"secure": "v1:abc"}}
    plan = plan_one(tmp_path, GKE_CENTRAL, "gke-central", config)
    assert not by_type(plan, "random:index/randomPassword:RandomPassword")
    assert rpc.is_rpc_secret(plan.exports["grafana_admin_password"])


def _alertmanager_secret(plan: StackPlan) -> tuple[dict[str, Any], dict[str, Any]]:
    """The central's Alertmanager configuration (``alertmanager.yaml`` of its Secret, secrets unwrapped) and the
    kps values that name it."""
    (secret,) = [
        r
        for r in by_type(plan, "kubernetes:core/v1:Secret")
        if r.inputs["metadata"]["name"] == ALERTMANAGER_CONFIG_SECRET
    ]
    data = secret.inputs["stringData"]
    data = rpc.unwrap_rpc_secret(data) if rpc.is_rpc_secret(data) else data
    text = data["alertmanager.yaml"]
    text = rpc.unwrap_rpc_secret(text) if rpc.is_rpc_secret(text) else text
    return yaml.safe_load(text), release(plan, "kps")["values"]["alertmanager"]


def test_alerts_reach_no_one_without_a_receiver_and_the_plan_says_so(gke):
    config, _ = _alertmanager_secret(gke)
    assert config["route"]["receiver"] == "null"
    assert [f for f in gke.findings if "gpu-fleet:alertReceiver is not set" in f.message]


def test_the_alert_receiver_lives_in_a_secret_of_its_own_and_the_values_stay_plain(tmp_path):
    config = {**GCP, "gpu-fleet:alertReceiver": {"secure": "v1:abc"}}
    plan = plan_one(tmp_path, GKE_CENTRAL, "gke-central", config)
    config, values = _alertmanager_secret(plan)
    # the chart renders no configuration of its own and the Alertmanager reads ours (values keys of kps 79.5.0)
    assert "config" not in values
    assert values["alertmanagerSpec"]["useExistingSecret"] is True
    assert values["alertmanagerSpec"]["configSecret"] == ALERTMANAGER_CONFIG_SECRET
    # the receiver (webhook URLs) is secret in the Secret only; no value of the release is
    (kps,) = [r for r in by_type(plan, RELEASE) if r.inputs["name"] == "kps"]
    assert "[secret]" not in json.dumps(kps.plain_inputs()["values"])
    assert "offline-plan.invalid" not in json.dumps(kps.inputs)  # the stand-in receiver is in the Secret only
    assert config["receivers"][1]["webhook_configs"][0]["url"] == "https://offline-plan.invalid/"
    assert not [f for f in plan.findings if "alertReceiver" in f.message]
    receiver = {"name": "team", "webhook_configs": [{"url": "https://alerts.example.org/hook"}]}
    built = alertmanager_config(parse_alert_receiver(json.dumps(receiver)))
    assert built["route"]["receiver"] == "team"
    assert built["route"]["routes"] == [{"receiver": "null", "matchers": ['alertname = "Watchdog"']}]
    assert built["receivers"] == [{"name": "null"}, receiver]


def test_kube_state_metrics_does_not_watch_secrets(gke):
    ksm = release(gke, "kps")["values"]["kube-state-metrics"]
    assert "secrets" not in ksm["collectors"] and "pods" in ksm["collectors"]


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("not json", "is not JSON"),
        ('{"webhook_configs": []}', "with a name"),
        ('{"name": "null", "webhook_configs": []}', 'must not be named "null"'),
        ('{"name": "team"}', "has no *_configs"),
    ],
)
def test_bad_alert_receivers_are_refused_without_showing_them(text, fragment):
    with pytest.raises(ValueError, match=re.escape(fragment)) as caught:
        parse_alert_receiver(text)
    assert text not in str(caught.value)


def test_accounting_rules_and_their_labels_reach_the_leaf_and_the_central(tmp_path):
    """Each cluster with GPU pools records its card-hours (fleet/model/billing/accounting.py) from kube-state-metrics
    with the node and pod labels it joins on allowlisted; the central federates the records."""
    policy = "clusters:\n  aws:\n    eks-acc:\n      region: us-east-1\n      central: true\n"
    policy += "      billing_account: lab\n      gpus: [t4]\n"
    plan = plan_one(tmp_path, policy, "eks-acc", {"aws:region": "us-east-1"})
    (release,) = [r for r in by_type(plan, "kubernetes:helm.sh/v3:Release") if r.inputs["name"] == "kps"]
    values = release.inputs["values"]
    assert values["kube-state-metrics"]["metricLabelsAllowlist"] == ["nodes=[gpu]", "pods=[workload]"]
    group = values["additionalPrometheusRulesMap"][GROUP]["groups"][0]
    billed = [r for r in group["rules"] if r["record"] == "gpufleet:billed_cards"]
    assert billed[0]["labels"]["billing_account"] == "lab"
    fleet = load_fleet(tmp_path / "fleet.yaml", tmp_path / "no-workloads")
    assert set(ACCOUNTING_RULES) <= set(federated_selectors(fleet))
    # the central integrates them an hour at a time for the report (fleet/model/billing/accounting_hours.py)
    step = duration_seconds(fleet.monitoring.federation_interval)
    assert values["additionalPrometheusRulesMap"][accounting_hours.GROUP] == accounting_hours.hourly_rules(step)
    # and keeps each finished probe run's phases for the report's long windows (fleet/model/probes/probe_phases.py)
    assert values["additionalPrometheusRulesMap"][probe_phases.RUNS_GROUP] == probe_phases.settled_run_rules(step)


@pytest.mark.parametrize(("leaf", "central"), [("3d", "90d"), ("12h", "2y")])
def test_each_prometheus_keeps_its_own_retention(tmp_path, leaf, central):
    """The policy's monitoring.leaf_retention reaches every leaf Prometheus and central_retention the central one (a
    central given the leaf's would lose the fleet's history after days)."""
    policy = f"monitoring:\n  leaf_retention: {leaf}\n  central_retention: {central}\n" + MAGNUM_CENTRAL
    policy += "  gcp:\n    gke-leaf:\n      zone: europe-west4-a\n      gpus: [l4]\n"
    policy_file, stacks = write_policy(tmp_path, policy, {"os-central": MAGNUM, "gke-leaf": GCP})
    (tmp_path / "no-workloads").mkdir()
    fleet = load_fleet(policy_file, tmp_path / "no-workloads")
    retention = {
        plan.stack: release(plan, "kps")["values"]["prometheus"]["prometheusSpec"]["retention"]
        for plan in plan_fleet(fleet, policy_file, stacks_dir=stacks, workloads_dir=tmp_path / "no-workloads")
    }
    assert retention == {"os-central": central, "gke-leaf": leaf}


EXISTING = """\
clusters:
  existing:
    lab:
      central: true
      gpus: [a100, v100]
      site_provides: {provides}
workloads: {{}}
"""
KUBECONFIG = {"gpu-fleet:kubeconfig": {"secure": "v1:c2l0ZQ=="}, "gpu-fleet:storageClass": "local-path"}


def _releases(plan: StackPlan) -> dict[str, dict[str, Any]]:
    return {r.inputs["name"]: r.inputs for r in by_type(plan, "kubernetes:helm.sh/v3:Release")}


def test_an_existing_cluster_gets_what_its_site_does_not_run(tmp_path: Path) -> None:
    """Without site_provides the fleet installs the device plugin, dcgm-exporter, the node exporter and the
    operator's CRDs there; each the site lists is left to the site (docs/clouds.md, "Existing clusters")."""
    (tmp_path / "bare").mkdir()
    (tmp_path / "site").mkdir()
    bare = _releases(plan_one(tmp_path / "bare", EXISTING.format(provides="[]"), "lab", KUBECONFIG))
    assert {"nvidia-device-plugin", "dcgm-exporter", "kps"} <= set(bare)
    assert "nodeExporter" not in bare["kps"]["values"] and "crds" not in bare["kps"]["values"]
    every = "[gpu_agents, node_exporter, monitoring_crds]"
    site = _releases(plan_one(tmp_path / "site", EXISTING.format(provides=every), "lab", KUBECONFIG))
    assert not {"nvidia-device-plugin", "dcgm-exporter"} & set(site)
    values = site["kps"]["values"]
    assert values["nodeExporter"] == {"enabled": False} and values["crds"] == {"enabled": False}


def test_site_provides_is_for_existing_clusters_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy = tmp_path / "fleet.yaml"
    policy.write_text(
        "clusters:\n  gcp:\n    lab:\n      zone: europe-west4-a\n      central: true\n      gpus: [l4]\n"
        "      site_provides: [gpu_agents]\nworkloads: {}\n",
        encoding="utf-8",
    )
    assert main(["validate", "--policy", str(policy), "--stacks-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"{policy}:7: clusters.gcp.lab.site_provides: only for existing clusters" in err, err


def test_validate_and_plan_say_the_same_of_an_existing_clusters_nodes(tmp_path: Path, capsys) -> None:
    """Both list its cards as the site's nodes (neither sizes nor prices them), and validate says what the site puts
    on them; before, validate showed "a100 (0-2 spot)" pools where the plan said there were none."""
    policy = tmp_path / "fleet.yaml"
    policy.write_text(EXISTING.format(provides="[]"), encoding="utf-8")
    (tmp_path / "stacks").mkdir()
    stack = {"config": {"pulumi:disable-default-providers": ["*"], **KUBECONFIG}}
    (tmp_path / "stacks" / "Pulumi.lab.yaml").write_text(yaml.safe_dump(stack), encoding="utf-8")
    (tmp_path / "workloads").mkdir()
    args = [
        "--policy",
        str(policy),
        "--stacks-dir",
        str(tmp_path / "stacks"),
        "--workloads-dir",
        str(tmp_path / "workloads"),
    ]
    assert main(["validate", *args]) == 0
    out = capsys.readouterr().out
    assert "a100 (the site's nodes), v100 (the site's nodes)" in out and "spot" not in out
    assert "the site labels and taints its nodes: gpu=a100 and nvidia.com/gpu=present:NoSchedule" in out
    assert main(["plan", "--no-policy-pack", *args]) == 0
    out = capsys.readouterr().out
    assert (
        "no node pools created: the site's own nodes run the jobs (not priced): a100 (gpu=a100), v100 (gpu=v100)" in out
    )
