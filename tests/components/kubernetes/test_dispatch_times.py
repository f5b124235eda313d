"""What Kueue 0.19.2 does with a queued job's times, as docs/queues.md states them, against the configuration the fleet
renders (components/kubernetes/multikueue.py ``multikueue_settings``, training.py ``kueue_configuration``).

Upstream (kueue v0.19.2): the Incremental dispatcher adds ``stepSize`` clusters every 5-minute round
(pkg/controller/workloaddispatcher/incrementaldispatcher.go ``incrementalDispatcherRoundTimeout``); an eviction on a
worker turns the manager's MultiKueue check to Retry (pkg/controller/admissionchecks/multikueue/workload.go), the
manager's eviction clears the nomination (pkg/workload/evict/evict.go ``resetClusterNomination``) and the dispatcher
starts again from the first cluster; ``workerLostTimeout`` defaults to 15 minutes (apis/config/v1beta2)."""

from __future__ import annotations

import re
from pathlib import Path

from components.kubernetes.multikueue import (
    DISPATCHER_ALL_AT_ONCE,
    DISPATCHER_INCREMENTAL,
    ROUND_SECONDS,
    WORKER_LOST_TIMEOUT,
    multikueue_settings,
)
from components.kubernetes.training import kueue_configuration
from fleet.model.core import pod_contract
from fleet.model.loader import load_fleet
from tests.helpers import QUEUED, write_policy

REPO = Path(__file__).resolve().parents[3]
QUEUES_DOC = (REPO / "docs" / "queues.md").read_text(encoding="utf-8")
ALLOWANCE_MINUTES = pod_contract.SCALE_UP_ALLOWANCE_SECONDS // 60


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def test_ordered_spill_is_the_incremental_dispatcher_one_cluster_a_round(tmp_path):
    policy, _ = write_policy(tmp_path, QUEUED, {})
    (tmp_path / "workloads").mkdir()
    dispatch = load_fleet(policy, tmp_path / "workloads").dispatch
    ordered = multikueue_settings(dispatch)
    assert ordered["dispatcherName"] == DISPATCHER_INCREMENTAL
    assert ordered["incrementalDispatcherConfig"] == {"stepSize": 1}
    assert ordered["workerLostTimeout"] == WORKER_LOST_TIMEOUT == "15m"
    everywhere = multikueue_settings(type(dispatch)(**{**vars(dispatch), "spill": "all"}))
    assert everywhere["dispatcherName"] == DISPATCHER_ALL_AT_ONCE and "incrementalDispatcherConfig" not in everywhere


def test_a_worker_evicts_after_the_allowance_and_never_blocks_its_other_queues():
    wait = kueue_configuration(("batch/job",))["waitForPodsReady"]
    assert wait["timeout"] == f"{ALLOWANCE_MINUTES}m" and wait["recoveryTimeout"] == f"{ALLOWANCE_MINUTES}m"
    assert wait["blockAdmission"] is False
    assert wait["requeuingStrategy"] == {"timestamp": "Eviction", "backoffLimitCount": 5, "backoffBaseSeconds": 60}


def test_the_doc_states_the_rendered_times():
    doc = _flat(QUEUES_DOC)
    assert f"round of {ROUND_SECONDS // 60} minutes" in doc
    assert f"at **{ALLOWANCE_MINUTES} minutes** after the worker admitted it" in doc
    assert f"(**{int(WORKER_LOST_TIMEOUT[:-1])} minutes**, kept at Kueue's default)" in doc
    assert "backoff (60 s doubling, at most 5 times on that cluster)" in doc
    assert "No Kueue of the fleet sets `waitForPodsReady.blockAdmission`" in doc


def test_the_doc_says_an_evicted_job_starts_again_from_the_first_cluster():
    doc = _flat(QUEUES_DOC)
    assert "the Incremental dispatcher **starts again from the first cluster**" in doc
    assert "resetClusterNomination" in doc
    # the claim issue 45 found wrong: an eviction on a worker does not send the job on to the next cluster
    assert "and the manager dispatches it again, to the next cluster in order" not in doc
    summary = _flat((REPO / "docs" / "policy-file.md").read_text(encoding="utf-8"))  # the policy file's queues section
    assert "gets it back every hour instead of passing it on" in summary
