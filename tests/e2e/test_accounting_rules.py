"""The leaf's accounting rules (fleet/model/billing/accounting.py) under ``promtool test rules``, on kube-state-metrics
series written here minute by minute, with every expected value worked out by hand below.

The cluster (its own policy text): a GKE cluster billed to ``physics`` with a T4 pool time-sliced in two and a whole
L4 pool; the workload ``fitter`` is billed to ``theory``. One minute apart:

* node ``n1`` (T4, one card in two slices: it advertises 2) is up all along; node ``n2`` (L4) is up for minutes 0 to
  4, then gone (reclaimed: its series end with a staleness marker);
* pod ``p1`` (tracker) runs on ``n1`` all along, one slice: 1/2 card;
* pod ``p2`` (fitter) runs on ``n1`` from minute 2, one slice: 1/2 card, on ``theory``;
* pod ``p3`` (tracker) runs on ``n2`` for minutes 0 to 4, then is gone with its node (the pod garbage collector).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet.model.billing.accounting import accounting_rules
from fleet.model.loader import load_fleet
from tests.conftest import FIXTURES
from tests.e2e.support import ACCOUNTING_POLICY, promtool, write_yaml

pytestmark = pytest.mark.e2e

POLICY = ACCOUNTING_POLICY
NS = "benchmarks"
BASE = {"cluster": "acct-gke", "cloud": "gcp"}


def series(name: str, values: str, **labels: str) -> dict[str, str]:
    inner = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return {"series": f"{name}{{{inner}}}", "values": values}


def sample(name: str, value: float, **labels: str) -> dict[str, object]:
    inner = ",".join(f'{k}="{v}"' for k, v in sorted({**BASE, **labels}.items()))
    return {"labels": f"{name}{{{inner}}}", "value": value}


def pod(name: str, node: str, workload: str, running: str, present: str = "1x10") -> list[dict[str, str]]:
    """The ksm series of a pod requesting one nvidia.com/gpu on ``node``, running as ``running`` says, its object
    there as ``present`` says."""
    request = {"namespace": NS, "pod": name, "container": "workload", "node": node}
    return [
        series("kube_pod_container_resource_requests", present, resource="nvidia_com_gpu", unit="integer", **request),
        series("kube_pod_status_phase", running, namespace=NS, pod=name, phase="Running"),
        series("kube_pod_labels", present, namespace=NS, pod=name, label_workload=workload),
        series("kube_pod_info", present, namespace=NS, pod=name, node=node),
    ]


INPUT = [
    series("kube_node_labels", "1x10", node="n1", label_gpu="t4"),
    series("kube_node_labels", "1 1 1 1 1 stale", node="n2", label_gpu="l4"),  # gone: a staleness marker
    series("kube_node_status_capacity", "2x10", node="n1", resource="nvidia_com_gpu", unit="integer"),
    series("kube_node_status_capacity", "1 1 1 1 1 stale", node="n2", resource="nvidia_com_gpu", unit="integer"),
    *pod("p1", "n1", "tracker", "1x10"),
    *pod("p2", "n1", "fitter", "0 0 1 1 1 1 1 1 1 1 1"),
    *pod("p3", "n2", "tracker", "1 1 1 1 1 stale", present="1 1 1 1 1 stale"),
]


def used(pod_name: str, value: float, gpu: str, account: str, workload: str) -> dict[str, object]:
    labels = {"namespace": NS, "pod": pod_name, "workload": workload, "gpu": gpu, "pool": f"gpu-{gpu}"}
    return sample("gpufleet:pod_used_cards", value, billing_account=account, **labels)


def per_pool(name: str, gpu: str, value: float) -> dict[str, object]:
    return sample(name, value, gpu=gpu, pool=f"gpu-{gpu}", billing_account="physics")


TESTS = [
    # minute 1: p1's slice (1/2 T4) and p3's whole L4; p2 not running yet: 0 on its account
    {"expr": "gpufleet:pod_used_cards", "eval_time": "1m", "exp_samples": [
        used("p1", 0.5, "t4", "physics", "tracker"), used("p2", 0, "t4", "theory", "fitter"),
        used("p3", 1, "l4", "physics", "tracker")]},
    {"expr": "gpufleet:billed_cards", "eval_time": "1m", "exp_samples": [
        per_pool("gpufleet:billed_cards", "t4", 1), per_pool("gpufleet:billed_cards", "l4", 1)]},
    # T4: 1 card billed, 1/2 used: 1/2 idle; L4: 1 billed, 1 used: none idle
    {"expr": "gpufleet:idle_cards", "eval_time": "1m", "exp_samples": [
        per_pool("gpufleet:idle_cards", "t4", 0.5), per_pool("gpufleet:idle_cards", "l4", 0)]},
    # minute 3: p2 runs too, billed to theory; the T4 is fully used (two slices), nothing idle
    {"expr": "gpufleet:used_cards", "eval_time": "3m", "exp_samples": [
        sample("gpufleet:used_cards", 0.5, gpu="t4", pool="gpu-t4", billing_account="physics", workload="tracker"),
        sample("gpufleet:used_cards", 0.5, gpu="t4", pool="gpu-t4", billing_account="theory", workload="fitter"),
        sample("gpufleet:used_cards", 1, gpu="l4", pool="gpu-l4", billing_account="physics", workload="tracker")]},
    {"expr": "gpufleet:idle_cards", "eval_time": "3m", "exp_samples": [
        per_pool("gpufleet:idle_cards", "t4", 0), per_pool("gpufleet:idle_cards", "l4", 0)]},
    # minute 5: n2 is gone while p3 ran on it a minute ago: p3 is marked lost with its node
    {"expr": "gpufleet:pod_preempted", "eval_time": "5m", "exp_samples": [
        sample("gpufleet:pod_preempted", 1, namespace=NS, pod="p3")]},
    # minute 6: nothing billed on L4 any more, and p3 is gone
    {"expr": "gpufleet:billed_cards", "eval_time": "6m", "exp_samples": [
        per_pool("gpufleet:billed_cards", "t4", 1), per_pool("gpufleet:billed_cards", "l4", 0)]},
    {"expr": 'gpufleet:pod_used_cards{gpu="l4"}', "eval_time": "6m", "exp_samples": []},
    # never while the nodes are there, nor long after
    {"expr": "gpufleet:pod_preempted", "eval_time": "3m", "exp_samples": []},
    {"expr": "gpufleet:pod_preempted", "eval_time": "9m", "exp_samples": []},
]  # fmt: skip


def test_accounting_rules_give_the_hand_computed_cards(tmp_path: Path) -> None:
    policy = tmp_path / "fleet.yaml"
    policy.write_text(POLICY, encoding="utf-8")
    fleet = load_fleet(policy, FIXTURES / "fleet" / "workloads")
    rules = write_yaml(tmp_path / "accounting.yaml", accounting_rules(fleet.clusters["acct-gke"], fleet))
    assert promtool("check", "rules", rules).returncode == 0
    tests = write_yaml(
        tmp_path / "tests.yaml",
        {
            "rule_files": [rules.name],
            "evaluation_interval": "1m",
            "tests": [{"interval": "1m", "input_series": INPUT, "promql_expr_test": TESTS}],
        },
    )
    run = promtool("test", "rules", tests, cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr


def test_a_wrong_expectation_fails(tmp_path: Path) -> None:
    """The check can fail: one value changed by hand is reported."""
    policy = tmp_path / "fleet.yaml"
    policy.write_text(POLICY, encoding="utf-8")
    fleet = load_fleet(policy, FIXTURES / "fleet" / "workloads")
    rules = write_yaml(tmp_path / "accounting.yaml", accounting_rules(fleet.clusters["acct-gke"], fleet))
    wrong = [
        {
            **TESTS[2],
            "exp_samples": [per_pool("gpufleet:idle_cards", "t4", 1), per_pool("gpufleet:idle_cards", "l4", 0)],
        }
    ]
    tests = write_yaml(
        tmp_path / "tests.yaml",
        {"rule_files": [rules.name], "evaluation_interval": "1m",
         "tests": [{"interval": "1m", "input_series": INPUT, "promql_expr_test": wrong}]},
    )  # fmt: skip
    assert promtool("test", "rules", tests, cwd=tmp_path).returncode == 1


# A GKE spot reclaim keeps the node object: the kubelet's graceful node shutdown fails the pod (phase Failed, reason
# Terminated; kubernetes pkg/kubelet/nodeshutdown) and the node is NotReady while its VM is gone. Node n3 (L4) stays
# listed all along, NotReady at minutes 4 to 6; pod p4 runs on it for minutes 0 to 3, then is Failed and stays listed.
# Pod p5 fails by itself at minute 4 on n1, which stays Ready: not lost.
SHUTDOWN_INPUT = [
    series("kube_node_labels", "1x10", node="n1", label_gpu="t4"),
    series("kube_node_labels", "1x10", node="n3", label_gpu="l4"),
    series("kube_node_status_condition", "1x10", node="n1", condition="Ready", status="true"),
    series("kube_node_status_condition", "1 1 1 1 0 0 0 1 1 1 1", node="n3", condition="Ready", status="true"),
    *pod("p4", "n3", "tracker", "1 1 1 1 0 0 0 0 0 0 0"),
    series("kube_pod_status_phase", "0 0 0 0 1 1 1 1 1 1 1", namespace=NS, pod="p4", phase="Failed"),
    *pod("p5", "n1", "tracker", "1 1 1 1 0 0 0 0 0 0 0"),
    series("kube_pod_status_phase", "0 0 0 0 1 1 1 1 1 1 1", namespace=NS, pod="p5", phase="Failed"),
]
SHUTDOWN_TESTS = [
    {"expr": "gpufleet:pod_preempted", "eval_time": "3m", "exp_samples": []},
    # minute 5: p4 ran at minute 3, has failed, and n3 was NotReady in the last 2 minutes: lost; p5 is not
    {"expr": "gpufleet:pod_preempted", "eval_time": "5m", "exp_samples": [
        sample("gpufleet:pod_preempted", 1, namespace=NS, pod="p4")]},
    {"expr": "gpufleet:pod_preempted", "eval_time": "9m", "exp_samples": []},
]  # fmt: skip


def test_a_pod_failed_by_a_gke_spot_shutdown_is_lost_though_its_node_stays(tmp_path: Path) -> None:
    policy = tmp_path / "fleet.yaml"
    policy.write_text(POLICY, encoding="utf-8")
    fleet = load_fleet(policy, FIXTURES / "fleet" / "workloads")
    rules = write_yaml(tmp_path / "accounting.yaml", accounting_rules(fleet.clusters["acct-gke"], fleet))
    tests = write_yaml(
        tmp_path / "tests.yaml",
        {"rule_files": [rules.name], "evaluation_interval": "1m",
         "tests": [{"interval": "1m", "input_series": SHUTDOWN_INPUT, "promql_expr_test": SHUTDOWN_TESTS}]},
    )  # fmt: skip
    run = promtool("test", "rules", tests, cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
