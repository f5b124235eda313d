"""The policy file's runners section (fleet/model/spec.py, spec_schema.py): resolved with its defaults, and every
mistake located."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from fleet.model.errors import InputError
from fleet.model.spec import load_fleet
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


def test_a_runner_whose_jobs_cannot_all_run_at_once_is_a_warning(tmp_path):
    fleet = load(
        tmp_path,
        GOOD.replace("workloads: {}\n", "workloads: {}\nrunners: {clusters: {eks-a: {t4: {concurrency: 5}}}}\n"),
    )
    (warning,) = [w for w in fleet.warnings if "runners.clusters.eks-a" in w]
    assert "takes 5 jobs of 1 card(s) at once, but its pool holds 3 at most (max_nodes 3)" in warning
