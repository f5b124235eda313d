"""Pool probes under the mock engine (components/kubernetes/benchmark.py builds them like benchmarks): one CronJob per
probed pool, on the pool's card, schedule and tolerations, reporting through the mtail sidecar and the PodMonitor."""

from __future__ import annotations

import kubernetes_validate
import pytest

from components.kubernetes.benchmark import CRONJOB_TIME_ZONE, JOB_NAME_LABEL
from fleet.model.core import pod_contract
from fleet.model.core.workloads import PROBE_DIR, load_workload
from fleet.tools.engine.plan import StackPlan
from tests.helpers import by_type, plan_one

CRONJOB = "kubernetes:batch/v1:CronJob"
POD_MONITOR = "kubernetes:monitoring.coreos.com/v1:PodMonitor"
# t4 probed by default (min 0), l4 opted out, a100 keeps a node (not probed), the TPU on its own schedule.
POLICY = """
defaults:
  probe: {schedule: "5 1 * * *", scale_up_alert_after: 25m}
clusters:
  gcp:
    gke-probed:
      zone: us-central1-a
      central: true
      gpus:
        t4: {}
        l4: {probe: false}
        a100: {min_nodes: 1}
        tpu-v5e: {probe: {schedule: "0 */12 * * *"}}
"""
PROBE = load_workload(PROBE_DIR)


@pytest.fixture(scope="module")
def plan(tmp_path_factory: pytest.TempPathFactory) -> StackPlan:
    return plan_one(tmp_path_factory.mktemp("probes"), POLICY, "gke-probed", {"gcp:project": "proj-1"})


def probes(plan: StackPlan) -> dict[str, dict]:
    """The probe CronJobs' inputs by card."""
    out = {}
    for r in by_type(plan, CRONJOB):
        labels = r.inputs["metadata"]["labels"]
        if labels["workload"] == PROBE.name:
            out[labels["gpu"]] = r.inputs
    return out


def test_one_probe_per_probed_pool_on_its_schedule(plan):
    found = probes(plan)
    assert set(found) == {"t4", "tpu-v5e"}
    assert found["t4"]["spec"]["schedule"] == "5 1 * * *"
    assert found["tpu-v5e"]["spec"]["schedule"] == "0 */12 * * *"
    for spec in (f["spec"] for f in found.values()):
        assert spec["timeZone"] == CRONJOB_TIME_ZONE and spec["concurrencyPolicy"] == "Forbid"
        job = spec["jobTemplate"]["spec"]
        assert job["backoffLimit"] == 0
        assert job["activeDeadlineSeconds"] == pod_contract.active_deadline_seconds(PROBE.spec.timeout_seconds)


@pytest.mark.parametrize(("card", "resource"), [("t4", "nvidia.com/gpu"), ("tpu-v5e", "google.com/tpu")])
def test_a_probe_asks_for_one_card_of_its_pool_as_a_benchmark_does(plan, card, resource):
    pod = probes(plan)[card]["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"gpu": card}
    assert {t["key"] for t in pod["tolerations"]} >= {"nvidia.com/gpu" if card == "t4" else "google.com/tpu"}
    (container,) = pod["containers"]
    assert container["resources"]["limits"][resource] == "1"
    env = {e["name"]: e for e in container["env"]}
    assert env["BENCHMARK_ACCELERATOR"]["value"] == resource
    assert env["BENCHMARK_JOB_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == f"metadata.labels['{JOB_NAME_LABEL}']"
    assert [c["name"] for c in pod["initContainers"]] == ["prepare-log", "mtail"]
    assert container["command"][-2:] == PROBE.spec.command


def test_probe_cronjobs_validate_against_the_kubernetes_schema(plan):
    for inputs in probes(plan).values():
        manifest = {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": inputs["metadata"], "spec": inputs["spec"]}
        kubernetes_validate.validate(manifest, "1.33", strict=True)


def test_the_pod_monitor_keeps_one_series_per_pool_for_probe_metrics(plan):
    (monitor,) = by_type(plan, POD_MONITOR)
    (endpoint,) = monitor.inputs["spec"]["podMetricsEndpoints"]
    relabel = endpoint["metricRelabelings"]
    assert {r["targetLabel"] for r in relabel} == {"pod", "instance"}
    for r in relabel:
        assert r["sourceLabels"] == ["__name__"] and r["replacement"] == "" and r["action"] == "replace"
        assert all(m.name.startswith(r["regex"].removesuffix(".+")) for m in PROBE.spec.metrics)


def test_benchmarks_get_the_fleets_extra_variables_only_when_they_ask(tmp_path):
    """A new variable would change every benchmark's pod spec, so its Job's name, and rerun it: only workloads that
    list ``fleet_env`` (the probe) get BENCHMARK_ACCELERATOR and BENCHMARK_JOB_NAME."""
    from tests.conftest import FIXTURES

    plan = plan_one(
        tmp_path, POLICY.replace("tpu-v5e: {probe", "tpu-v5e: {min_nodes: 0, probe") + "workloads:\n  tracker: [t4]\n",
        "gke-probed", {"gcp:project": "proj-1"}, workloads_dir=FIXTURES / "fleet" / "workloads",
    )  # fmt: skip
    (job,) = by_type(plan, "kubernetes:batch/v1:Job")
    names = {e["name"] for e in job.inputs["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert {"BENCHMARK_LOG", "BENCHMARK_GPU"} <= names
    assert not names & {"BENCHMARK_ACCELERATOR", "BENCHMARK_JOB_NAME"}
    assert PROBE.spec.fleet_env == ["accelerator", "job_name"]
