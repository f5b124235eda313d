"""Sweep points of a workload that names a queue (fleet/model/queues/queued_sweeps.py): the shape each point takes, the
workers that hold it and on which pool, the flavor Kueue 0.19.2 gives its pods on each worker (its own pool's, and
none where it cannot run), the pods placed as the workers run them, and the located error for a point no worker of
its queue holds, as on a queue of a cloud that builds no sweep pools. The tests' own queued fleet (tests/helpers.py)."""

from __future__ import annotations

from pathlib import Path

from fleet.model.loader import load_fleet
from fleet.model.placement.pods import selector_matches
from fleet.model.queues.dispatch import pool_capacity
from tests.helpers import QUEUED, kueue_flavor, queued, queued_workloads_dir, refused_by_validate

SWEPT = "workloads:\n  tracker: {gpus: all, queue: gpu}\n  sweeper: {gpus: [t4], scale: [1, 2, 4, 8, 16], queue: gpu}\n"


def load(tmp_path: Path, text: str):
    policy = tmp_path / "fleet.yaml"
    policy.write_text(text, encoding="utf-8")
    return load_fleet(policy, queued_workloads_dir(tmp_path))


def test_each_point_takes_its_pools_flavor_on_every_worker_that_holds_it_and_none_elsewhere(tmp_path):
    fleet = load(tmp_path, queued(SWEPT))
    checked = 0
    for point in fleet.queued_points():
        pod = {"affinity": fleet.queued_point_affinity(point)}
        holders = {}
        for name in point.queue.clusters:
            cluster = fleet.clusters[name]
            held = dict((p.name, pool) for p, pool in fleet.queued_points_on(cluster))
            # the worker's ClusterQueue of the queue, in its order: the sweep pools first, then the card pools
            pools = [*fleet.queued_sweeps.sweep_pools_of(point.queue.name, name), *point.queue.pools(cluster)]
            flavors = [(p.name, dict(p.node_selector)) for p in pools]
            chosen = kueue_flavor(pod, flavors)
            if point.name in held:
                assert chosen == held[point.name].name, (point.name, name, flavors)
                holders[name] = held[point.name]
            elif chosen is not None:
                # Kueue matches the card pool's flavor on its own keys only (the card's label), which a sweep pool's
                # term names too: its quota must refuse the point (docs/queues.md), as here
                pool = next(p for p in pools if p.name == chosen)
                assert not pool.sweep and pool_capacity(pool) < point.accelerators, (point.name, name)
            checked += 1
        assert holders, point.name
        # and the scheduler puts the admitted pod (the flavor's selector added) on a node of the pool
        for pool in holders.values():
            assert selector_matches({**pod, "nodeSelector": pool.node_selector}, pool.labels | pool.node_selector)
    assert checked == 5 * 3
    # the plain queued Jobs of the same queue keep off the sweep pools' flavors, tried first
    for job in fleet.queued_jobs():
        pod = {"affinity": fleet.queued_affinity(job)}
        for name in job.queue.clusters:
            cluster = fleet.clusters[name]
            pools = [*fleet.queued_sweeps.sweep_pools_of(job.queue.name, name), *job.queue.pools(cluster)]
            chosen = kueue_flavor(pod, [(p.name, dict(p.node_selector)) for p in pools])
            assert chosen is None or not next(p for p in pools if p.name == chosen).sweep


def test_a_worker_that_cannot_hold_a_point_is_passed_over_with_a_warning(tmp_path):
    fleet = load(tmp_path, queued(SWEPT))
    first = fleet.dispatch.queues[0].clusters[0]
    passed = {(w, n) for w, _, _, n in fleet.queued_sweeps.passed_over}
    t4 = fleet.clusters[first].pool("t4")
    assert {n for w, n in passed if w == first} == {n for n in (1, 2, 4, 8, 16) if n > t4.max_nodes}
    assert any(f"{first} cannot hold the point 16 on t4" in w and "waits a round" in w for w in fleet.warnings)


def test_a_point_no_worker_holds_is_refused_with_its_line(tmp_path, capsys):
    err = refused_by_validate(
        tmp_path,
        capsys,
        queued("workloads:\n  sweeper: {gpus: [t4], scale: [1, 64], queue: gpu}\n"),
        "workloads.sweeper.scale[1]",
        "sweeper's point 64 on t4 cannot run through its queue: no worker of the queue holds 64",
        "max_nodes 4",
    )
    assert "fleet.yaml:" in err


def test_a_queue_on_a_cloud_that_builds_no_sweep_pools_holds_only_what_its_machines_do(tmp_path, capsys):
    """The Magnum site's T4 machines hold one card each and Magnum builds no sweep pool of another machine: a point
    beyond its max_nodes cannot run through a queue of that site alone."""
    text = QUEUED.replace(
        "gpu: {clusters: [cern-gpu, eks-a, gke-a], gpus: [t4, v100]}", "gpu: {clusters: [cern-gpu], gpus: [t4, v100]}"
    )
    fleet = load(
        tmp_path,
        queued_text := text.replace(
            "workloads: {}\n", "workloads:\n  sweeper: {gpus: [t4], scale: [1, 3], queue: gpu}\n"
        ),
    )
    assert [(p.accelerators, p.nodes, p.per_node) for p in fleet.queued_points()] == [(1, 1, 1), (3, 3, 1)]
    assert not fleet.clusters["cern-gpu"].sweep_pools
    again = tmp_path / "again"
    again.mkdir()
    refused_by_validate(
        again,
        capsys,
        queued_text.replace("scale: [1, 3]", "scale: [1, 4]"),
        "workloads.sweeper.scale[1]",
        "cern-gpu: machines of 1 cards, max_nodes 3 and no sweep pool of another machine",
    )


def test_a_passed_over_worker_whose_card_pool_quota_holds_the_point_is_warned_of_the_wait(tmp_path):
    """Kueue matches the card pool's flavor on the card's label alone: a worker that cannot hold a point but whose
    card pool's quota has room for its cards may admit it there, and its pods wait the allowance."""
    text = queued(SWEPT).replace("gpus: [t4, tpu-v5e]", "gpus: {t4: {max_nodes: 8}, tpu-v5e: {}}")
    fleet = load(tmp_path, text)
    warned = [w for w in fleet.warnings if "gke-a cannot hold the point" in w]
    assert any("point 8 on t4" in w and "may admit the point on that pool's flavor" in w for w in warned)
    assert not any("point 16 on t4" in w and "may admit" in w for w in warned)


def test_the_pods_a_worker_may_be_given_and_the_report_find_the_pool_of_each_point(tmp_path):
    """``validate`` places each point's pods as each worker that holds it runs them, and the scaling report prices a
    point from the pool of the worker that ran it (its metrics carry that worker's cluster)."""
    from fleet.model.placement.pods import fleet_pods
    from fleet.report.sweeps import _sweep_point

    fleet = load(tmp_path, queued(SWEPT))
    for name in fleet.dispatch.workers:
        cluster = fleet.clusters[name]
        pods = [p for p in fleet_pods(fleet, cluster) if "from queue" in p.what and "sweep point" in p.what]
        assert [p.pool for p in pods] == [pool.name for _, pool in fleet.queued_points_on(cluster)]
        for point, pool in fleet.queued_points_on(cluster):
            assert _sweep_point(fleet, "sweeper", name, "t4", point.accelerators) == (pool, point.nodes)
    assert _sweep_point(fleet, "sweeper", fleet.dispatch.manager, "t4", 1) is None
