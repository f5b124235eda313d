"""The doctor's rows on the queues' manager (fleet/tools/doctor/queues.py): each worker's MultiKueueCluster connected or
why not, and why a workload on the manager was not dispatched. The objects are shaped as kueue v0.19.2 writes them
(the condition types, reasons and check states the module cites); the reader is run against the loopback API server
of the doctor's tests (tests/tools/doctor/fake_kube_api.py), which answers Kueue's two list paths too. The fleet is
tests/helpers.py QUEUED."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kubernetes.config import new_client_from_config

from fleet.model.core import pod_contract
from fleet.model.core.fleet import Fleet
from fleet.model.loader import load_fleet
from fleet.tools.doctor import queues as dq
from tests.helpers import QUEUED, QUEUED_STACKS, write_policy
from tests.tools.doctor.fake_kube_api import ApiServer, World, write_kubeconfig

KUBECTL = "kubectl --kubeconfig k"


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Fleet:
    tmp = tmp_path_factory.mktemp("queued-doctor")
    policy, _stacks = write_policy(tmp, QUEUED, QUEUED_STACKS)
    (tmp / "workloads").mkdir()
    return load_fleet(policy, tmp / "workloads")


def mk_cluster(name: str, status: str, reason: str, message: str) -> dict[str, Any]:
    condition = {"type": "Active", "status": status, "reason": reason, "message": message}
    return {"metadata": {"name": name}, "status": {"conditions": [condition]}}


def workload(name: str, conditions: dict[str, str], checks: list[dict[str, str]] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": pod_contract.BENCHMARK_NAMESPACE},
        "spec": {"queueName": "gpu"},
        "status": {
            "conditions": [
                {"type": kind, "status": status, "message": f"{kind} is {status}"}
                for kind, status in conditions.items()
            ],
            "admissionChecks": checks or [],
        },
    }


def test_each_worker_is_connected_or_told_why_with_its_fix(fleet: Fleet) -> None:
    workers = fleet.dispatch.workers
    assert len(workers) >= 3
    first, second, third = workers[:3]
    objects = dq.QueueObjects(
        clusters=[
            mk_cluster(first, "True", "Active", "Connected"),
            mk_cluster(second, "False", "BadKubeConfig", 'load client config failed: secrets "x" not found'),
            mk_cluster(third, "False", "ClientConnectionFailed", "dial tcp 10.0.0.1:443: i/o timeout"),
        ]
    )
    manager = fleet.clusters[fleet.dispatch.manager]
    rows = {r[0]: r for r in dq.manager_rows(fleet, manager, objects, KUBECTL)}
    assert rows[f"queue worker {first}"][1:] == ("Active (Connected)", "", "")
    bad = rows[f"queue worker {second}"]
    assert bad[1] == "not Active: BadKubeConfig" and "not found" in bad[2]
    assert f"get secret multikueue-{second}" in bad[3] and f"worker stack {second}" in bad[3]
    down = rows[f"queue worker {third}"]
    assert down[1] == "not Active: ClientConnectionFailed" and "i/o timeout" in down[2]
    assert "apiAllowedCidrs" in down[3]
    for worker in workers[3:]:  # a worker without its MultiKueueCluster is a problem too
        assert rows[f"queue worker {worker}"][1] == "no MultiKueueCluster"


def test_a_waiting_workload_says_what_holds_it(fleet: Fleet) -> None:
    objects = dq.QueueObjects(
        workloads=[
            workload("running", {"QuotaReserved": "True", "Admitted": "True"}),
            workload("done", {"Finished": "True"}),
            workload("no-quota", {"QuotaReserved": "False"}),
            workload(
                "offered",
                {"QuotaReserved": "True", "Admitted": "False"},
                [{"name": "queue-gpu", "state": "Pending", "message": 'The workload got reservation on "cern-gpu"'}],
            ),
        ]
    )
    rows = dq.waiting_rows(objects)
    assert [r[0] for r in rows] == ["queued workload no-quota (gpu)", "queued workload offered (gpu)"]
    assert rows[0][1:3] == ("waiting for the manager's quota", "QuotaReserved is False")
    assert rows[1][1] == "not dispatched yet"
    assert rows[1][2] == 'queue-gpu: Pending: The workload got reservation on "cern-gpu"'


def test_no_queue_rows_and_no_call_off_the_manager(fleet: Fleet) -> None:
    worker = fleet.clusters[fleet.dispatch.workers[0]]
    assert dq.queue_rows_for(fleet, worker, None, KUBECTL, 5.0) == []  # type: ignore[arg-type]


def test_the_reader_lists_kueues_objects_read_only(fleet: Fleet, tmp_path: Path) -> None:
    worker = fleet.dispatch.workers[0]
    clusters = [mk_cluster(worker, "False", "InsecureKubeConfig", "tokenFile is not allowed")]
    waiting = [workload("w", {"QuotaReserved": "False"})]
    manager = fleet.clusters[fleet.dispatch.manager]
    with ApiServer(World(multikueueclusters=clusters, workloads=waiting)) as server:
        api = new_client_from_config(str(write_kubeconfig(tmp_path / "kubeconfig", server.url)))
        try:
            rows = dq.queue_rows_for(fleet, manager, api, KUBECTL, 5.0)
        finally:
            api.close()
    assert {method for method, _ in server.requests} == {"GET"}
    by_what = {r[0]: r for r in rows}
    assert by_what[f"queue worker {worker}"][1] == "not Active: InsecureKubeConfig"
    assert "queued workload w (gpu)" in by_what
    with ApiServer(World(), refuse=True) as server:
        api = new_client_from_config(str(write_kubeconfig(tmp_path / "kubeconfig", server.url)))
        try:
            (row,) = dq.queue_rows_for(fleet, manager, api, KUBECTL, 5.0)
        finally:
            api.close()
    assert row[1] == "unreadable" and row[2].startswith("403") and "multikueueclusters" in row[3]
