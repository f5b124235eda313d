"""benchmarks/dispatch_rate.py's pure parts on injected data: the stages read from objects, the watch stream split
into objects, rates from instants and the tables (the benchmark itself runs on the real tier: `make benchmark`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import dispatch_rate, dispatch_setup, dispatch_stages
from components.kubernetes.training import kueue_configuration
from fleet.model.loader import POLICY_FILE


def _with(*conditions: str, **status) -> dict:
    return {"status": {"conditions": [{"type": c, "status": "True"} for c in conditions], **status}}


def test_the_stages_of_a_workload_a_job_and_a_pod():
    assert dispatch_stages.workload_stages(_with()) == {"seen"}
    assert dispatch_stages.workload_stages(_with("QuotaReserved")) == {"seen", "quota_reserved"}
    assert dispatch_stages.workload_stages(_with("QuotaReserved", "Admitted", "Finished")) == set(
        dispatch_stages.WORKLOAD_STAGES
    )
    refused = {"status": {"conditions": [{"type": "QuotaReserved", "status": "False"}]}}
    assert dispatch_stages.workload_stages(refused) == {"seen"}
    assert dispatch_stages.job_stages(_with("Complete")) == {"seen", "complete"}
    assert dispatch_stages.pod_stages({"spec": {}, "status": {"phase": "Pending"}}) == {"seen"}
    assert dispatch_stages.pod_stages({"spec": {"nodeName": "n"}, "status": {"phase": "Pending"}}) == {
        "seen",
        "scheduled",
    }
    # a pod seen only once it had already run still counts as running (KWOK may finish it between two events)
    assert "running" in dispatch_stages.pod_stages({"spec": {"nodeName": "n"}, "status": {"phase": "Succeeded"}})


def test_the_watch_stream_is_split_into_whole_documents():
    a, b = {"metadata": {"name": "a"}}, {"metadata": {"name": "b"}}
    text = json.dumps(a, indent=4) + "\n" + json.dumps(b, indent=4) + "\n"
    cut = len(text) - 7
    found, rest = dispatch_stages.split_objects(text[:cut])
    assert found == [a] and rest.lstrip().startswith("{")
    found, rest = dispatch_stages.split_objects(rest + text[cut:])
    assert found == [b] and rest == ""


def test_a_rate_runs_from_the_first_to_the_last_object():
    rate = dispatch_stages.stage_rate([12.0, 10.0, 11.0, 14.0, 18.0], start=8.0)
    assert rate == dispatch_stages.StageRate(count=5, first_s=2.0, last_s=10.0, per_second=0.5)
    assert dispatch_stages.stage_rate([], start=0.0) == dispatch_stages.StageRate(0, None, None, None)
    assert dispatch_stages.stage_rate([3.0], start=1.0).per_second is None
    assert dispatch_stages.stage_rate([3.0, 3.0], start=1.0).per_second is None  # no time between them


def test_rates_per_stage_count_only_the_objects_that_reached_it():
    reached = {"j1": {"seen": 1.0, "complete": 5.0}, "j2": {"seen": 2.0}, "j3": {"seen": 3.0, "complete": 9.0}}
    found = dispatch_stages.rates(reached, dispatch_stages.JOB_STAGES, start=0.0)
    assert found["seen"].count == 3 and found["seen"].per_second == 1.0
    assert found["complete"] == dispatch_stages.StageRate(2, 5.0, 9.0, 0.25)


def _run(kind: str, setting: str, parts: dict) -> dict:
    return {"kind": kind, "setting": setting, "jobs": 4, "load_before": [2.5, 2, 2], "load_after": [3.25, 2, 2],
            "parts": parts}  # fmt: skip


def test_the_tables_hold_a_row_per_setting_and_say_what_did_not_finish():
    def rate(count, last, per_second):
        return {"count": count, "first_s": 1.0, "last_s": last, "per_second": per_second}

    dispatched = {
        "manager_workloads": {
            "quota_reserved": rate(4, 2.0, 3.0),
            "admitted": rate(4, 9.0, 0.5),
            "finished": rate(3, 20.0, 0.2),
        },
        "worker_jobs": {"seen": rate(4, 8.0, 0.43)},
        "worker_pods": {"running": rate(4, 10.0, 0.33)},
    }
    launched = {"worker_pods": {"seen": rate(4, 3.0, 1.5)}}
    report = {"runs": [_run("dispatch", "300 / 500", dispatched), _run("launch", "300 / 500", launched)]}
    text = dispatch_stages.render(report)
    dispatch_row, launch_row = [line for line in text.splitlines() if line.startswith("| 300 / 500")]
    assert "3.0 /s, all by 2 s" in dispatch_row and "0.2 /s, all by 20 s (3 of 4)" in dispatch_row
    assert "0.4 /s, all by 8 s" in dispatch_row and dispatch_row.endswith("| 2.5 / 3.2 |")
    assert "1.5 /s, all by 3 s" in launch_row and "| - |" in launch_row  # a stage the run did not follow
    assert text.count("|---|") == 2


def test_the_settings_name_the_fleets_own_rate():
    shipped = kueue_configuration()["clientConnection"]
    assert dispatch_rate.parse_settings("fleet, 20/40,5/10") == [(shipped["qps"], shipped["burst"]), (20, 40), (5, 10)]
    assert "the fleet's" in dispatch_rate.label(float(shipped["qps"]), int(shipped["burst"]))
    assert "the fleet's" not in dispatch_rate.label(5.0, 10)
    with pytest.raises(ValueError):
        dispatch_rate.parse_settings("fast")


def test_the_two_cluster_fleet_keeps_the_manager_and_the_first_worker(tmp_path: Path):
    policy, fleet, queue = dispatch_setup.two_cluster_policy(POLICY_FILE, tmp_path)
    assert policy.parent == tmp_path
    assert fleet.dispatch is not None and set(fleet.clusters) == {fleet.dispatch.manager, queue.clusters[0]}
    assert list(fleet.dispatch.workers) == [queue.clusters[0]]
