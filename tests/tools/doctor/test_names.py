"""The names the doctor looks for (fleet/tools/doctor/names.py) are those the stack deploys."""

from __future__ import annotations

from typing import Any

from fleet.model.core import pod_contract
from fleet.tools.doctor.names import (
    DEVICE_PLUGIN,
    DEVICE_PLUGIN_NS,
    EXPORTER,
    GATEWAY,
    MONITOR_SERVERS,
    MONITORING_NS,
    NODE_AGENTS_NS,
    PART_OF,
    POD_MONITORS,
    PROMETHEUS_SERVICE,
)
from tests.tools.doctor.support import POLICY, STACKS, WORKLOADS, leaf_of


def test_the_names_the_doctor_looks_for_are_those_the_stack_creates(fleet):
    """The release names, namespaces, Services and labels the doctor reads are what the program deploys: plan a leaf
    of the fixture fleet under the mock engine and find each one."""
    from components.kubernetes import gateway, namespaces, prometheus_stack
    from fleet.tools.engine.plan import plan_stack

    cluster = leaf_of(fleet)
    plan = plan_stack(cluster.name, POLICY, STACKS, None, WORKLOADS)
    releases = {
        (r.inputs["name"], r.inputs["namespace"])
        for r in plan.registrations
        if r.type == "kubernetes:helm.sh/v3:Release"
    }
    assert (DEVICE_PLUGIN, DEVICE_PLUGIN_NS) in releases
    assert (EXPORTER, NODE_AGENTS_NS) in releases
    assert (prometheus_stack.RELEASE, MONITORING_NS) in releases
    assert (namespaces.MONITORING_NS, namespaces.NODE_AGENTS_NS, gateway.GATEWAY_NAME) == (
        MONITORING_NS,
        NODE_AGENTS_NS,
        GATEWAY,
    )
    kps = next(
        r.inputs
        for r in plan.registrations
        if r.type.endswith("Release") and r.inputs["name"] == prometheus_stack.RELEASE
    )
    assert f"{kps['values']['fullnameOverride']}-prometheus" == PROMETHEUS_SERVICE
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for r in plan.registrations:
        by_kind.setdefault(r.type.rsplit(":", 1)[-1], []).append(r.inputs)
    assert {(m["metadata"]["name"], m["metadata"]["namespace"]) for m in by_kind["Deployment"]} >= {
        (GATEWAY, MONITORING_NS)
    }
    monitors = {(m["metadata"]["namespace"], m["metadata"]["name"]) for m in by_kind["PodMonitor"]}
    assert POD_MONITORS[0] in monitors
    assert monitors <= set(POD_MONITORS) and set(MONITOR_SERVERS) == {n for _, n in POD_MONITORS}
    # every benchmark's Job or CronJob carries the labels the doctor matches
    objects = by_kind.get("Job", []) + by_kind.get("CronJob", [])
    assert fleet.probes(cluster)  # the fixture's leaf probes its pools
    for bench in fleet.workload_jobs(cluster):
        wanted = {
            PART_OF: pod_contract.BENCHMARK_PART_OF,
            "workload": bench.workload.name,
            "gpu": bench.pool.card,
        }
        assert any(wanted.items() <= o["metadata"]["labels"].items() for o in objects), wanted
