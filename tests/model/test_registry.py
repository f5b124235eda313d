"""The fleet's registry, one setting of the policy file: images are named relative to it, one outside it is refused
where it is written, and moving the whole fleet to another registry is that one line."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from fleet.model.core.errors import InputError
from fleet.model.core.registry import DEFAULT_REGISTRY, has_host, in_registry, outside_registry, registry_problem
from fleet.model.loader import load_fleet
from fleet.tools.delivery.image_delivery import ImageJob, record_as
from tests.conftest import FIXTURES
from tests.helpers import GOOD

LAB = "registry.example.org/lab"


def _fleet_with(tmp_path: Path, registry: str | None, image: str) -> tuple[Path, Path]:
    """A policy (``registry:`` set unless None) and a workloads folder whose one workload names ``image``."""
    workloads = tmp_path / "workloads"
    shutil.copytree(FIXTURES / "fleet" / "workloads" / "tracker", workloads / "tracker")
    spec_file = workloads / "tracker" / "workload.yaml"
    lines = spec_file.read_text(encoding="utf-8").splitlines(keepends=True)
    lines = [f"image: {image}\n" if line.startswith("image:") else line for line in lines]
    spec_file.write_text("".join(lines), encoding="utf-8")
    policy = tmp_path / "fleet.yaml"
    head = f"registry: {registry}\n" if registry is not None else ""
    policy.write_text(head + GOOD.replace("workloads: {}", "workloads:\n  tracker: [t4]\n"), encoding="utf-8")
    return policy, workloads


@pytest.mark.parametrize(
    ("reference", "qualified"),
    [
        ("mtail:3.0.8", False),
        ("lab/mtail:3.0.8", False),  # a repository path: Docker reads docker.io/lab/mtail
        ("ghcr.io/google/mtail:3.0.8", True),
        ("localhost/x:1", True),
        ("reg:5000/x:1", True),
    ],
)
def test_a_registry_host_is_told_as_docker_tells_it(reference: str, qualified: bool) -> None:
    """distribution/reference normalize.go splitDockerDomain: a first component with '.' or ':', or localhost."""
    assert has_host(reference) is qualified
    assert in_registry(reference, LAB) == (reference if qualified else f"{LAB}/{reference}")


def test_an_image_is_outside_unless_under_the_registry_path() -> None:
    assert not outside_registry("mtail:1", LAB) and not outside_registry(f"{LAB}/mtail:1", LAB)
    assert outside_registry("registry.example.org/other/mtail:1", LAB)
    assert outside_registry("registry.example.org/lab-x/mtail:1", LAB)  # a prefix of the path is not the path


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("https://ghcr.io/lab", "has a scheme"),
        ("lab", "'lab' is not a host"),
        ("ghcr.io/My-Lab", "lower case"),
        ("ghcr.io/lab:v1", "not a registry host"),
    ],
)
def test_a_registry_that_is_not_one_is_refused_with_an_example(value: str, fragment: str) -> None:
    problem = registry_problem(value)
    assert problem and fragment in problem and "registry.example.org/lab" in problem
    assert registry_problem(LAB) is None and registry_problem("localhost:5000") is None


def test_the_policy_refuses_a_bad_registry_at_its_line(tmp_path: Path) -> None:
    policy, workloads = _fleet_with(tmp_path, "https://ghcr.io/lab", "tracker:1.0.0")
    with pytest.raises(InputError) as caught:
        load_fleet(policy, workloads)
    (problem,) = caught.value.problems
    assert (problem.line, problem.path) == (1, "registry") and "has a scheme" in problem.message


def test_workload_images_are_pulled_from_the_policys_registry(tmp_path: Path) -> None:
    policy, workloads = _fleet_with(tmp_path, LAB, "tracker:1.0.0")
    fleet = load_fleet(policy, workloads)
    assert fleet.registry == LAB and {c.registry for c in fleet.clusters.values()} == {LAB}
    assert fleet.workloads["tracker"].spec.image == f"{LAB}/tracker:1.0.0"
    assert fleet.probe_workload is not None and fleet.probe_workload.spec.image.startswith(LAB + "/")


def test_without_a_registry_the_default_is_used(tmp_path: Path) -> None:
    policy, workloads = _fleet_with(tmp_path, None, "tracker:1.0.0")
    assert load_fleet(policy, workloads).workloads["tracker"].spec.image == f"{DEFAULT_REGISTRY}/tracker:1.0.0"


def test_an_image_outside_the_registry_is_refused_where_it_is_written_with_the_fix(tmp_path: Path) -> None:
    """It used to pass validate and fail only in `fleet images`, where the workflow pushes."""
    policy, workloads = _fleet_with(tmp_path, LAB, "docker.io/someone/tracker:1.0.0")
    with pytest.raises(InputError) as caught:
        load_fleet(policy, workloads)
    (problem,) = caught.value.problems
    spec_file = workloads / "tracker" / "workload.yaml"
    image_line = next(i for i, line in enumerate(spec_file.read_text().splitlines(), 1) if line.startswith("image:"))
    assert problem.file.endswith("tracker/workload.yaml") and (problem.line, problem.path) == (image_line, "image")
    assert f"outside the fleet's registry {LAB}" in problem.message and f"{policy}:1 registry" in problem.message
    # the two lines to write instead, word for word
    assert "write `image: tracker:1.0.0` (pulled as registry.example.org/lab/tracker:1.0.0)" in problem.message
    assert "and `upstream: docker.io/someone/tracker:1.0.0` beside it" in problem.message


@pytest.mark.parametrize(
    ("extra", "why"),
    [
        ({"Dockerfile": "FROM scratch\n"}, "the folder's Dockerfile is built into it"),
        (
            {"workload.yaml": "upstream: quay.io/x/tracker:1.0.0\n"},
            "`fleet images` copies quay.io/x/tracker:1.0.0 into it",
        ),
    ],
    ids=["built", "copied"],
)
def test_a_built_or_copied_image_outside_the_registry_is_told_only_to_be_named_relative(
    tmp_path: Path, extra: dict[str, str], why: str
) -> None:
    """A workload whose Dockerfile builds its image, or which names its `upstream:` already, needs only `image:`."""
    policy, workloads = _fleet_with(tmp_path, LAB, "docker.io/someone/tracker:1.0.0")
    for name, text in extra.items():
        path = workloads / "tracker" / name
        path.write_text((path.read_text(encoding="utf-8") if path.exists() else "") + text, encoding="utf-8")
    with pytest.raises(InputError) as caught:
        load_fleet(policy, workloads)
    (problem,) = caught.value.problems
    assert problem.message.endswith(
        f"write `image: tracker:1.0.0` (pulled as registry.example.org/lab/tracker:1.0.0); {why}"
    ), problem.message


def test_validate_says_so_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from fleet.tools.cli import main

    policy, workloads = _fleet_with(tmp_path, LAB, "quay.io/x/tracker:1.0.0")
    status = main(["validate", "--policy", str(policy), "--workloads-dir", str(workloads)])
    err = capsys.readouterr().err
    assert status == 2 and "Traceback" not in err and "workload.yaml:" in err and "outside the fleet's registry" in err


def test_images_yaml_names_every_image_relative_to_the_registry() -> None:
    from components.kubernetes.images import IMAGES_FILE

    data = yaml.safe_load(IMAGES_FILE.read_text(encoding="utf-8"))
    assert "registry" not in data  # the policy file holds it
    for section in ("images", "chart_images", "autoscaler_images"):
        for name, entry in data[section].items():
            assert not has_host(entry["image"]), f"{section}.{name}: {entry['image']}"


def test_a_recorded_workload_digest_keeps_the_name_relative() -> None:
    digest = "sha256:" + "ab" * 32
    job = ImageJob("w", "build", "workloads/w", f"{LAB}/w:1", "", "workloads/w/workload.yaml", "w:1")
    assert record_as(job, digest) == ("image:", f"w:1@{digest}")
