"""The fleet-wide queues of the policy (fleet/model/queues/): resolved in the policy's order, and every policy that
cannot work refused with its file, line, key, the reason and the fix, exit 2."""

from __future__ import annotations

import textwrap
from pathlib import Path

from fleet.model.loader import load_fleet
from fleet.model.queues.dispatch import quota
from fleet.model.queues.settings import SPILL_ALL, SPILL_ORDERED
from fleet.tools.cli import main
from tests.helpers import QUEUED


def bad(tmp_path: Path, capsys, text: str, *expected: str) -> str:
    """``validate`` of ``text`` exits 2 and prints each of ``expected``, with no traceback."""
    policy = tmp_path / "fleet.yaml"
    policy.write_text(textwrap.dedent(text), encoding="utf-8")
    for folder in ("stacks", "workloads"):
        (tmp_path / folder).mkdir(exist_ok=True)
    args = ["--stacks-dir", str(tmp_path / "stacks"), "--workloads-dir", str(tmp_path / "workloads")]
    code = main(["validate", "--policy", str(policy), *args])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    for fragment in expected:
        assert fragment in err, f"{fragment!r} not in:\n{err}"
    return err


def _load(tmp_path: Path, text: str = QUEUED):
    policy = tmp_path / "fleet.yaml"
    policy.write_text(textwrap.dedent(text), encoding="utf-8")
    workloads = tmp_path / "workloads"
    workloads.mkdir(exist_ok=True)
    return load_fleet(policy, workloads)


def test_queues_resolve_in_the_policys_order(tmp_path):
    fleet = _load(tmp_path)
    dispatch = fleet.dispatch
    assert dispatch is not None and dispatch.manager == "control" and dispatch.spill == SPILL_ORDERED
    gpu, tpu = dispatch.queues
    assert gpu.clusters == ("cern-gpu", "eks-a", "gke-a") and gpu.cards == ("t4", "v100")
    assert gpu.resource == "nvidia.com/gpu"
    assert tpu.clusters == ("gke-a",) and tpu.cards == ("tpu-v5e",) and tpu.resource == "google.com/tpu"
    assert dispatch.workers == ("cern-gpu", "eks-a", "gke-a")
    assert dispatch.role("control") == "manager" and dispatch.role("gke-a") == "worker"
    assert [q.name for q in dispatch.queues_of("gke-a")] == ["gpu", "tpu"]
    # only the pools of the queue's cards, in the queue's card order
    assert [p.card for p in gpu.pools(fleet.clusters["cern-gpu"])] == ["t4", "v100"]
    assert [p.card for p in gpu.pools(fleet.clusters["gke-a"])] == ["t4"]


def test_the_managers_quota_is_what_the_workers_pools_hold(tmp_path):
    fleet = _load(tmp_path)
    gpu, tpu = fleet.dispatch.queues
    # cern-gpu t4 3 + v100 2 (default), eks-a t4 4, gke-a t4 2; one card per machine each
    expected = sum(
        p.max_nodes * p.units_per_node
        for name in gpu.clusters
        for p in fleet.clusters[name].pools
        if p.card in gpu.cards
    )
    assert quota(gpu, fleet.clusters) == expected == 3 + 2 + 4 + 2
    v5e = fleet.clusters["gke-a"].pool("tpu-v5e")
    assert quota(tpu, fleet.clusters) == v5e.max_nodes * v5e.units_per_node


def test_spill_all_and_no_queues(tmp_path):
    assert _load(tmp_path, QUEUED.replace("spill: ordered", "spill: all")).dispatch.spill == SPILL_ALL
    assert _load(tmp_path, QUEUED.split("queues:")[0]).dispatch is None


def test_the_manager_cannot_be_its_own_worker(tmp_path, capsys):
    bad(
        tmp_path,
        capsys,
        QUEUED.replace("manager: control", "manager: cern-gpu"),
        "fleet.yaml:23: queues.gpu.clusters[0]: cern-gpu is the manager",
        "make a cluster without accelerators the manager",
    )


def test_unknown_manager_and_worker(tmp_path, capsys):
    err = bad(
        tmp_path,
        capsys,
        QUEUED.replace("manager: control", "manager: contrl").replace("[cern-gpu, eks-a, gke-a]", "[cern-gpu, eks-b]"),
        "fleet.yaml:21: queues.manager: no cluster named 'contrl' (clusters: control, cern-gpu, gke-a, eks-a)",
        "fleet.yaml:23: queues.gpu.clusters[1]: no cluster named 'eks-b'",
    )
    assert "example: manager:" in err


def test_a_card_no_worker_offers(tmp_path, capsys):
    bad(
        tmp_path,
        capsys,
        QUEUED.replace("gpus: [t4, v100]}", "gpus: [t4, l4]}"),
        "fleet.yaml:23: queues.gpu.gpus[1]: none of the queue's clusters (cern-gpu, eks-a, gke-a) offers l4",
    )


def test_a_cluster_without_the_queues_cards(tmp_path, capsys):
    bad(
        tmp_path,
        capsys,
        QUEUED.replace("tpu: {clusters: [gke-a]", "tpu: {clusters: [gke-a, eks-a]"),
        "fleet.yaml:24: queues.tpu.clusters[1]: eks-a offers none of the queue's cards (tpu-v5e; it has t4)",
    )


def test_kinds_and_cards_that_cannot_make_one_queue(tmp_path, capsys):
    bad(
        tmp_path,
        capsys,
        QUEUED.replace("gpus: [t4, v100]}", "gpus: [t4, tpu-v5e]}").replace("kind: tpu}", "kind: tpuu}"),
        "queues.gpu.gpus: the cards count different resources (google.com/tpu, nvidia.com/gpu)",
        "queues.tpu.kind: unknown accelerator kind 'tpuu'",
    )


def test_the_shape_is_checked_with_lines(tmp_path, capsys):
    bad(
        tmp_path,
        capsys,
        QUEUED.replace("gpus: [t4, v100]}", "gpus: [t4, v100], kind: gpu}").replace(
            "[gke-a], kind", "[gke-a, gke-a], kind"
        ),
        "fleet.yaml:23: queues.gpu: give exactly one of gpus",
        "fleet.yaml:24: queues.tpu.clusters: gke-a listed twice",
    )
    bad(tmp_path, capsys, QUEUED.replace("spill: ordered", "spill: sometimes"), "fleet.yaml:22: queues.spill:")
    bad(tmp_path, capsys, QUEUED.replace("  tpu: {", "  TPU: {"), "queues.TPU: queue name 'TPU' must be a DNS-1123")
    # the per-cluster sweeps' LocalQueues are sweeps-<pool>: a queue of that name would take a pool's points
    bad(tmp_path, capsys, QUEUED.replace("  tpu: {", "  sweeps-gpu-l4: {"),
        "queues.sweeps-gpu-l4: 'sweeps-gpu-l4' is taken by the scaling sweeps' own LocalQueues")  # fmt: skip
    # every cluster that runs benchmarks has the LocalQueue benchmarks (fleet/model/benchmark_queue/)
    bad(tmp_path, capsys, QUEUED.replace("  tpu: {", "  benchmarks: {"),
        "queues.benchmarks: 'benchmarks' is taken by the benchmarks' own LocalQueue")  # fmt: skip
