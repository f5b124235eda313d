"""Workloads that name a queue (policy: ``workloads.<name>.queue``, fleet/model/queues/ and fleet/model/core/fleet.py):
their Jobs once on the manager, one per card of the queue the workload allows, none per cluster; the pods each worker
may be given; the affinity that keeps a Job on its card whichever worker's flavor Kueue picks; and every workload that
cannot be dispatched refused with its line and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet.model.core.pools import CARDS_PER_NODE_LABEL
from fleet.model.loader import load_fleet
from fleet.model.placement.pods import selector_matches
from tests.helpers import QUEUED, QUEUED_TRACKER, kueue_flavor, queued, queued_workloads_dir, refused_by_validate


def load(tmp_path: Path, text: str):
    policy = tmp_path / "fleet.yaml"
    policy.write_text(text, encoding="utf-8")
    return load_fleet(policy, queued_workloads_dir(tmp_path))


def test_a_queued_workloads_jobs_are_on_the_manager_once_per_card_of_its_queue(tmp_path):
    fleet = load(tmp_path, queued(QUEUED_TRACKER))
    jobs = fleet.queued_jobs()
    # `all` is every card of the workload's kinds: the queue's cards, in the queue's order (t4 first, then v100)
    assert [(j.workload.name, j.card, j.queue.name) for j in jobs] == [
        ("tracker", "t4", "gpu"),
        ("tracker", "v100", "gpu"),
        ("loader", "t4", "gpu"),
    ]
    # and no cluster runs it per cluster; the other workload still does
    for cluster in fleet.clusters.values():
        assert {b.workload.name for b in fleet.benchmarks(cluster)} <= {"fitter"}
    assert {c.name for c in fleet.clusters.values() if fleet.benchmarks(c)} == {"cern-gpu", "gke-a", "eks-a"}
    # the pools each Job may run on: its card's pool on each worker, in the queue's order
    t4, v100, _ = jobs
    assert [(p.card, c) for c in t4.queue.clusters for p in fleet.clusters[c].pools if p in fleet.queued_pools(t4)] == [
        ("t4", "cern-gpu"), ("t4", "eks-a"), ("t4", "gke-a")
    ]  # fmt: skip
    assert len(fleet.queued_pools(v100)) == 1
    # what each worker may be given: the Jobs of the cards it offers
    given = {c: sorted(b.pool.card for b in fleet.dispatched_to(fleet.clusters[c])) for c in fleet.clusters}
    assert given == {"control": [], "cern-gpu": ["t4", "t4", "v100"], "gke-a": ["t4", "t4"], "eks-a": ["t4", "t4"]}


def test_explicit_cards_of_the_queue_give_one_job_each(tmp_path):
    fleet = load(tmp_path, queued("workloads:\n  tracker: {gpus: [v100], queue: gpu}\n"))
    assert [j.card for j in fleet.queued_jobs()] == ["v100"]
    assert fleet.dispatched_to(fleet.clusters["eks-a"]) == []


def test_kueue_gives_a_queued_job_its_own_cards_flavor_on_every_worker(tmp_path):
    """Magnum's pools are selected by their node-group role, the clouds' by ``gpu``: a Job of the second card of the
    queue must not take the first card's flavor, which Kueue tries first, on any worker."""
    fleet = load(tmp_path, queued(QUEUED_TRACKER))
    checked = 0
    for job in fleet.queued_jobs():
        pools = fleet.queued_pools(job)
        pod = {"affinity": fleet.queued_affinity(job)}
        for name in job.queue.clusters:
            cluster = fleet.clusters[name]
            flavors = [(p.card, dict(p.node_selector)) for p in job.queue.pools(cluster)]
            own = job.card if any(p.card == job.card for p in cluster.pools) else None
            assert kueue_flavor(pod, flavors) == own, (job.name, name, flavors)
            checked += 1
        # and the scheduler puts the admitted pod (the flavor's selector added) on a node of its pool
        for pool in pools:
            assert selector_matches({**pod, "nodeSelector": pool.node_selector}, pool.labels | pool.node_selector)
    assert checked == 9  # three Jobs, three workers each
    # the affinity really names both spellings of the card (the test would pass vacuously on one cloud)
    affinity = fleet.queued_affinity(fleet.queued_jobs()[0])["nodeAffinity"]
    terms = affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    keys = {e["key"] for t in terms for e in t["matchExpressions"]}
    assert keys - {CARDS_PER_NODE_LABEL} == {"gpu", "magnum.openstack.org/role"}
    # and every term keeps off the sweep pools, whose flavors carry the card's label too
    assert all({"key": CARDS_PER_NODE_LABEL, "operator": "DoesNotExist"} in t["matchExpressions"] for t in terms)


def test_a_plain_gpu_selector_would_take_the_wrong_flavor_on_magnum(tmp_path):
    """Why card_affinity exists: ``nodeSelector: {gpu: v100}`` names a key Magnum's flavors lack, so Kueue ignores it
    there and gives the Job the t4 flavor, tried first."""
    fleet = load(tmp_path, queued(QUEUED_TRACKER))
    magnum = fleet.clusters["cern-gpu"]
    gpu = fleet.dispatch.queues[0]
    flavors = [(p.card, dict(p.node_selector)) for p in gpu.pools(magnum)]
    empty = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": []}]}}
    pod = {"nodeSelector": {"gpu": "v100"}, "affinity": {"nodeAffinity": empty}}
    assert kueue_flavor(pod, flavors) == "t4"


@pytest.mark.parametrize(
    ("workloads", "expected"),
    [
        (
            "workloads:\n  tracker: {gpus: all, queue: gpus}\n",
            ["workloads.tracker.queue", "no queue named 'gpus' (did you mean 'gpu'?) (queues: gpu, tpu)"],
        ),
        (
            "workloads:\n  tracker: {gpus: [t4, l4], queue: gpu}\n",
            ["workloads.tracker.gpus[1]", "l4 is not a card of queue gpu (t4, v100)"],
        ),
        (
            "workloads:\n  tracker: {gpus: [l4], queue: gpu}\n",
            ["queue gpu serves t4, v100, none of which tracker allows (its cards: l4)"],
        ),
        (
            "workloads:\n  fitter: {gpus: [t4], queue: gpu, schedule: '0 3 * * 1'}\n",
            ["workloads.fitter.queue", "has a schedule (a CronJob) and names a queue", "no CronJob integration"],
        ),
        (
            "workloads:\n  uploader: {gpus: [t4], queue: gpu}\n",
            ["workloads.uploader.queue", "needs root", "benchmarks-root"],
        ),
        (
            "workloads:\n  sweeper: {gpus: [t4], queue: gpu, scale: [1, 64]}\n",
            ["workloads.sweeper.scale[1]", "sweeper's point 64 on t4 cannot run through its queue"],
        ),
    ],
    ids=["unknown-queue", "card-outside-queue", "no-card-of-queue", "cronjob", "needs-root", "sweep-point-unheld"],
)
def test_a_workload_that_cannot_be_dispatched_is_refused_with_its_line(tmp_path, capsys, workloads, expected):
    err = refused_by_validate(tmp_path, capsys, queued(workloads), *expected)
    assert "fleet.yaml:" in err


def test_a_queue_without_a_queues_section_is_refused(tmp_path, capsys):
    text = QUEUED[: QUEUED.index("queues:")].replace(
        "workloads: {}\n", "workloads:\n  tracker: {gpus: all, queue: gpu}\n"
    )
    refused_by_validate(tmp_path, capsys, text, "workloads.tracker.queue", "the policy has no queues section")
