"""A team's own fleet keeps the suite green with no edit under tests/ (README, "Make it your own").

tests/fixtures/ownfleet is a lab's fleet with nothing of the sample's: its own registry, a GKE central, EKS and AKS
with other cards, an existing GPU cluster of its own (with what its site already runs), a time-sliced and a MIG pool,
a pool on a machine the price table lacks, its own workloads (gemm, with a sample log recorded by running it, and
lab-fit, the shipped pyhf copied and renamed with its test file), GitLab runners, a scaling sweep, billing accounts,
and queues whose manager also runs runners and a sweep of its own. Here it is checked to stay that, to validate and
plan with every image from its registry, and the tests that read the shipped policy/fleet.yaml, stacks/ and
workloads/ are run on a copy of the repository that holds it instead (tests/own_fleet.py). CI runs the whole suite on
that copy too (.ci/run), which catches a test welded to the sample wherever it reads it.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fleet.model.billing.prices import load_prices
from fleet.model.core.fleet import Fleet
from fleet.model.core.workloads import WORKLOADS_DIR
from fleet.model.loader import POLICY_FILE, load_fleet
from fleet.tools.cli import main
from tests.conftest import ROOT
from tests.own_fleet import IN_COPY_ENV, OWN_FLEET, make_copy, run_pytest

# The harness itself does not run inside the copy it makes (there, the lab's fleet is the shipped one).
pytestmark = pytest.mark.skipif(os.environ.get(IN_COPY_ENV) == "1", reason="this is the copy tests/own_fleet.py made")

POLICY = OWN_FLEET / "fleet.yaml"
ARGS = [
    "--policy",
    str(POLICY),
    "--stacks-dir",
    str(OWN_FLEET / "stacks"),
    "--workloads-dir",
    str(OWN_FLEET / "workloads"),
]

# How a test module reads the shipped fleet by default: the paths of the policy, the stack files and the workloads,
# or the loaders called without one.
READS_THE_SHIPPED_FLEET = re.compile(
    r"POLICY_FILE|STACKS_DIR|WORKLOADS_DIR|load_fleet\(\)|load_workloads\(\)|ROOT / \"(?:workloads|stacks)\""
    r"|policy/fleet\.yaml|\"policy\" / \"fleet\.yaml\""
)


@pytest.fixture(scope="module")
def lab() -> Fleet:
    return load_fleet(POLICY, OWN_FLEET / "workloads")


@pytest.fixture(scope="module")
def shipped() -> Fleet:
    return load_fleet(POLICY_FILE, WORKLOADS_DIR)


def test_the_lab_fleet_has_nothing_of_the_sample(lab: Fleet, shipped: Fleet) -> None:
    """Names the sample uses would let a test welded to them pass on the copy: the lab's are its own."""
    assert lab.registry != shipped.registry
    assert not set(lab.clusters) & set(shipped.clusters)
    assert not set(lab.workloads) & set(shipped.workloads)
    for cloud in ("aws", "azure"):  # other cards than the sample's on EKS and AKS
        ours = {p.card for c in lab.clusters.values() if c.cloud == cloud for p in c.pools}
        theirs = {p.card for c in shipped.clusters.values() if c.cloud == cloud for p in c.pools}
        assert ours and not ours & theirs, (cloud, ours & theirs)


def test_the_lab_fleet_covers_what_a_team_uses(lab: Fleet) -> None:
    clouds = {c.cloud for c in lab.clusters.values()}
    assert lab.central.cloud == "gcp" and clouds == {"gcp", "aws", "azure", "existing"}
    sharing = {p.sharing.kind for c in lab.clusters.values() for p in c.pools if p.sharing}
    assert sharing == {"time-slicing", "mig"}
    assert any(lab.runners_of(c) for c in lab.clusters.values())
    assert any(lab.sweep_points(c) for c in lab.clusters.values())
    accounts = {c.billing_account for c in lab.clusters.values()} | set(lab.billing_accounts.values())
    assert len(accounts) >= 3
    # the moves README "Make it your own" describes: an existing GPU cluster with what its site runs, a workload
    # copied from a shipped one and renamed (its test file keeps its name), a machine the price table lacks, its own
    # queues whose manager also runs runners and a sweep
    existing = next(c for c in lab.clusters.values() if c.cloud == "existing")
    assert existing.pools and existing.site_provides
    copied = lab.workloads["lab-fit"]
    assert (copied.folder / "test_pyhf_wrapper.py").is_file() and sorted(copied.mtail_programs) == ["lab-fit.mtail"]
    prices = load_prices()
    assert any(prices.lookup(c.cloud, p.machine_type) is None for c in lab.clusters.values() for p in c.pools), (
        "a pool on a machine the price table lacks"
    )
    assert lab.dispatch is not None and lab.sweep_points(lab.cluster(lab.dispatch.manager))
    assert lab.runners_of(lab.cluster(lab.dispatch.manager))
    gemm = lab.workloads["gemm"]
    assert gemm.sample_log.read_text(encoding="utf-8").count("gemm run ") == 9  # recorded: 3 sizes x 3 products


def test_the_lab_fleet_validates(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", *ARGS]) == 0, capsys.readouterr().err


def _image_references(node: Any) -> Iterator[str]:
    """Every image a plan's inputs name: containers' ``image``, and charts' image blocks (``registry`` with
    ``repository`` or ``image``, or a ``repository`` with a ``tag``)."""
    if isinstance(node, dict):
        registry, repository, image = node.get("registry"), node.get("repository"), node.get("image")
        if isinstance(registry, str) and isinstance(repository or image, str):
            yield f"{registry}/{repository or image}"
        elif isinstance(repository, str) and "tag" in node:
            yield repository
        elif isinstance(image, str):
            yield image
        for key, value in node.items():
            if not (key in ("repository", "image") and isinstance(value, str)):
                yield from _image_references(value)
    elif isinstance(node, list):
        for item in node:
            yield from _image_references(item)


def test_every_image_the_lab_fleet_runs_comes_from_its_registry(lab: Fleet, tmp_path: Path) -> None:
    """Moving to another registry is one line of the policy: the fleet's own images, the charts' and the workloads'
    all follow it."""
    out = tmp_path / "plan.json"
    assert main(["plan", "--no-policy-pack", *ARGS, "--json", str(out)]) == 0
    stacks = json.loads(out.read_text(encoding="utf-8"))["stacks"]
    images = {ref for stack in stacks for resource in stack["resources"] for ref in _image_references(resource)}
    assert len(images) > 20 and "registry.example.org/lab/gemm:13.6.0" in images
    assert all(ref.startswith(lab.registry + "/") for ref in images), sorted(
        ref for ref in images if not ref.startswith(lab.registry + "/")
    )


def shipped_fleet_tests(root: Path = ROOT) -> list[str]:
    """The test modules of the repository at ``root`` that read its policy, stack files or workloads (without the
    end-to-end ones, which CI runs on the copy with the whole suite), and the workloads' own tests."""
    found = []
    for path in sorted([*(root / "tests").rglob("test_*.py"), *(root / "workloads").glob("*/test_*.py")]):
        relative = path.relative_to(root)
        if relative.parts[:2] in (("tests", "e2e"), ("tests", "fixtures")) or relative == Path(__file__).relative_to(
            ROOT
        ):
            continue
        if relative.parts[0] == "workloads" or READS_THE_SHIPPED_FLEET.search(path.read_text(encoding="utf-8")):
            found.append(str(relative))
    return found


def test_the_tests_of_the_shipped_fleet_pass_on_the_lab_fleet(tmp_path: Path) -> None:
    assert {"tests/test_shipped_fleet.py", "tests/tools/test_image_delivery.py"} <= set(shipped_fleet_tests())
    copy = make_copy(tmp_path / "repo")
    modules = shipped_fleet_tests(copy)  # the workloads' own tests went with them
    # about a minute alone on an idle core; the bound is for a hang only (on 2 cores shared by the suite's other worker
    # and other work, the same run takes many times longer)
    run = run_pytest(copy, ["-q", "-x", "-p", "no:xdist", "-m", "not e2e", *modules], timeout=3600)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
