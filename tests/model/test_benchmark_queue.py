"""fleet/model/benchmark_queue/: the card pools of a cluster's benchmark queue, each at what it holds (slices of a
shared card counted), and how many Jobs of a kind it runs at once there."""

from __future__ import annotations

import dataclasses

from fleet.model.benchmark_queue.quotas import at_once, covered_resources, flavor_quota, queued_pools
from fleet.model.loader import load_fleet
from tests.helpers import FIXTURE_WORKLOADS, write_policy

POLICY = """
defaults:
  gpu_pool: {max_nodes: 2}
clusters:
  gcp:
    gke-q:
      zone: us-central1-a
      central: true
      gpus: {t4: {max_nodes: 3}, l4: {probe: false}, tpu-v5e: {max_nodes: 1}}
  azure:
    aks-q:
      region: eastus
      gpus: {t4: {sharing: {time_slicing: 2}}, a10: {probe: false}}
workloads:
  tracker: [t4]
"""


def _fleet(tmp_path):
    policy, _ = write_policy(tmp_path, POLICY, {})
    return load_fleet(policy, FIXTURE_WORKLOADS)


def test_the_queue_holds_the_pools_the_jobs_run_on_in_the_clusters_order(tmp_path):
    fleet = _fleet(tmp_path)
    gke, aks = fleet.cluster("gke-q"), fleet.cluster("aks-q")
    # l4 and a10: no benchmark of theirs, and no probe; tpu-v5e: its probe
    assert [p.card for p in queued_pools(fleet, gke)] == ["t4", "tpu-v5e"]
    assert [p.card for p in queued_pools(fleet, aks)] == ["t4"]
    assert covered_resources(queued_pools(fleet, gke)) == ["google.com/tpu", "nvidia.com/gpu"]


def test_a_pools_quota_is_what_it_holds_slices_counted(tmp_path):
    fleet = _fleet(tmp_path)
    t4 = next(p for p in fleet.cluster("gke-q").pools if p.card == "t4")
    shared = next(p for p in fleet.cluster("aks-q").pools if p.card == "t4")
    assert flavor_quota(t4) == 3 * t4.accelerators_per_node == 3
    assert flavor_quota(shared) == 2 * 2  # two nodes of one T4 taken in two slices


def test_at_once_is_the_quota_over_the_cards_a_job_asks(tmp_path):
    fleet = _fleet(tmp_path)
    jobs = {(j.workload.name, j.pool.card): j for j in fleet.workload_jobs(fleet.cluster("aks-q"))}
    tracker = jobs[("tracker", "t4")]
    assert at_once(tracker) == 4  # one card each: a slice each on the shared T4s
    two = dataclasses.replace(
        tracker, workload=dataclasses.replace(
            tracker.workload, spec=tracker.workload.spec.model_copy(update={"accelerators": 3})
        )
    )  # fmt: skip
    assert at_once(two) == 1
