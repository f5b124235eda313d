"""The policy file's runners section (fleet/model/runners/): resolved with its defaults, and every
mistake located."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from fleet.model.core.errors import InputError
from fleet.model.loader import load_fleet
from tests.helpers import GOOD

RUNNERS = """
runners:
  clusters:
    eks-a:
      t4: {concurrency: 5, tags: [cuda-12, t4]}
    gke-a: [l4]
"""


def load(tmp_path: Path, text: str):
    policy = tmp_path / "fleet.yaml"
    policy.write_text(textwrap.dedent(text), encoding="utf-8")
    (tmp_path / "workloads").mkdir(exist_ok=True)
    return load_fleet(policy, tmp_path / "workloads")


def problems(tmp_path: Path, text: str) -> str:
    with pytest.raises(InputError) as caught:
        load(tmp_path, text)
    return "\n".join(str(p) for p in caught.value.problems)


def test_runners_resolve_with_their_defaults(tmp_path):
    fleet = load(tmp_path, GOOD.replace("workloads: {}\n", "workloads: {}\n" + RUNNERS))
    (eks,) = fleet.runners_of(fleet.cluster("eks-a"))
    assert (eks.pool.card, eks.concurrency, eks.tags, eks.gitlab_url) == (
        "t4",
        5,
        ("cuda-12", "t4"),
        "https://gitlab.com",
    )
    (gke,) = fleet.runners_of(fleet.cluster("gke-a"))
    assert (gke.pool.card, gke.concurrency, gke.accelerators) == ("l4", 2, 1)
    assert gke.tags == ("gpu-fleet", "l4", "gpu") and (gke.cpu_limit, gke.memory_limit) == ("4", "12Gi")
    assert (gke.cpu_request, gke.memory_request) == ("1", "4Gi")
    assert gke.name == "gitlab-runner-l4"
    assert fleet.runners_of(fleet.cluster("cern-main")) == ()


@pytest.mark.parametrize(
    ("runners", "fragment"),
    [
        ("    gke-b: [t4]\n", "runners.clusters.gke-b: no cluster named 'gke-b'"),
        (
            "    gke-a: [a100]\n",
            "fleet.yaml:21: runners.clusters.gke-a[0]: cluster gke-a offers no a100 (its cards: t4, l4)",
        ),
        ("    gke-a: {l4: {accelerators: 2}}\n", "runners.clusters.gke-a.l4.accelerators: a CI job asks for 2 l4"),
        ("    gke-a: {l4: {concurrency: 0}}\n", "runners.clusters.gke-a.l4.concurrency"),
        ("    gke-a: {l4: {tags: ['a b']}}\n", "are not runner tags"),
        ("    gke-a: {l4: {memory_limit: lots}}\n", "is not a Kubernetes quantity"),
        ("    gke-a: {l4: {gpus: 1}}\n", "unknown key"),
        ("    gke-a: {l4: {cpu_request: 8}}\n", "cpu_request 8 is above cpu_limit 4"),
    ],
)
def test_runner_mistakes_are_located(tmp_path, runners, fragment):
    text = GOOD.replace("workloads: {}\n", "workloads: {}\nrunners:\n  clusters:\n" + runners)
    assert fragment in problems(tmp_path, text)


def test_the_gitlab_url_must_be_https(tmp_path):
    text = GOOD.replace("workloads: {}\n", "workloads: {}\nrunners: {gitlab_url: 'http://gitlab.lab'}\n")
    assert "runners.gitlab_url" in problems(tmp_path, text)


EXISTING = """
  existing:
    lab:
      gpus:
        t4: {max_nodes: 3}
"""


def test_a_shared_runner_whose_jobs_cannot_all_run_at_once_is_a_warning(tmp_path):
    text = GOOD.replace("workloads: {}\n", EXISTING + "workloads: {}\n")
    fleet = load(
        tmp_path,
        text.replace(
            "workloads: {}\n", "workloads: {}\nrunners: {clusters: {lab: {t4: {concurrency: 5, own_pool: false}}}}\n"
        ),
    )
    found = [w for w in fleet.warnings if "runners.clusters.lab" in w]
    assert any("takes 5 jobs of 1 card(s) at once, but its pool holds 3 at most (max_nodes 3)" in w for w in found)
    assert any("beside the benchmarks (own_pool: false)" in w for w in found)
    (runner,) = fleet.runners_of(fleet.cluster("lab"))
    assert runner.pool == fleet.cluster("lab").pool("t4") and fleet.cluster("lab").ci_pools == ()


def test_a_runner_gets_a_ci_pool_sized_for_its_concurrent_jobs(tmp_path):
    fleet = load(
        tmp_path,
        GOOD.replace("workloads: {}\n", "workloads: {}\nrunners: {clusters: {eks-a: {t4: {concurrency: 5}}}}\n"),
    )
    assert not [w for w in fleet.warnings if "runners.clusters.eks-a" in w]
    cluster = fleet.cluster("eks-a")
    (runner,) = fleet.runners_of(cluster)
    (ci,) = cluster.ci_pools
    card = cluster.pool("t4")
    assert runner.pool == ci and ci in cluster.all_pools and ci not in cluster.pools
    # the card's machine, spot, from zero, one node per one-card job of a one-card machine
    assert (ci.name, ci.key, ci.machine_type, ci.spot, ci.min_nodes, ci.max_nodes) == (
        "gpu-t4-ci", "t4-ci", card.machine_type, True, 0, 5,
    )  # fmt: skip
    assert ci.labels == {**card.labels, "gpu-fleet.io/ci": "true"}
    assert ci.node_selector == {"gpu": "t4", "gpu-fleet.io/ci": "true"}
    assert "gpu-fleet.io/ci=true:NoSchedule" in [t.as_string() for t in ci.taints]
    assert "gpu-fleet.io/ci=true:NoSchedule" not in [t.as_string() for t in card.pod_tolerations]
    assert ci.probe is None and ci.sharing is None
    assert cluster.pool_sized("t4", None) == card and cluster.pool_sized("t4", None, ci=True) == ci


@pytest.mark.parametrize(
    ("concurrency", "accelerators", "cards", "nodes"),
    [(1, 1, 1, 1), (2, 1, 1, 2), (2, 1, 4, 1), (5, 1, 4, 2), (3, 2, 4, 2), (4, 3, 4, 4), (1, 4, 4, 1)],
)
def test_ci_pool_nodes_from_concurrency_and_cards_per_job(concurrency, accelerators, cards, nodes):
    from fleet.model.runners.ci_pools import ci_max_nodes

    assert ci_max_nodes(concurrency, accelerators, cards) == nodes


def test_a_magnum_ci_pool_keeps_a_node_and_is_told_apart_by_its_role(tmp_path):
    fleet = load(
        tmp_path,
        GOOD.replace("workloads: {}\n", "workloads: {}\nrunners: {clusters: {cern-main: [t4]}}\n"),
    )
    (ci,) = fleet.cluster("cern-main").ci_pools
    assert (ci.min_nodes, ci.max_nodes) == (1, 2)  # Magnum cannot scale a GPU group up from zero
    assert ci.node_selector == {"magnum.openstack.org/role": "gpu-t4-ci"}
    assert fleet.cluster("cern-main").pool("t4").node_selector == {"magnum.openstack.org/role": "gpu-t4"}


def test_own_pool_is_refused_on_an_existing_cluster_and_required_elsewhere(tmp_path):
    text = GOOD.replace("workloads: {}\n", EXISTING + "workloads: {}\n")
    found = problems(tmp_path, text.replace("workloads: {}\n", "workloads: {}\nrunners: {clusters: {lab: [t4]}}\n"))
    assert "runners.clusters.lab[0]: lab is an existing cluster: the fleet creates no node pool there" in found
    assert "set own_pool: false" in found
    found = problems(
        tmp_path,
        GOOD.replace("workloads: {}\n", "workloads: {}\nrunners: {clusters: {eks-a: {t4: {own_pool: false}}}}\n"),
    )
    assert "runners.clusters.eks-a.t4.own_pool: own_pool: false is for existing clusters only" in found


def test_pool_names_tell_ci_pools_apart():
    from fleet.model.core.pod_contract import card_of_pool, ci_pool_name, is_ci_pool

    assert ci_pool_name("tpu-v5e") == "gpu-tpu-v5e-ci"
    assert card_of_pool("eks-a-gpu-tpu-v5e-ci") == "tpu-v5e" and is_ci_pool("eks-a-gpu-tpu-v5e-ci")
    assert card_of_pool("gpu-t4") == "t4" and not is_ci_pool("gpu-t4") and not is_ci_pool("eks-a-system-ci")
