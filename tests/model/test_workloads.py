"""The workload folders: each loads, declares exactly what its mtail program exports, and bad input is located.

These tests need no external tool; ``tests/e2e/test_mtail.py`` runs the same programs under the real mtail.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from fleet.model.core.errors import InputError
from fleet.model.core.workloads import WORKLOADS_DIR, load_workloads
from fleet.tools.checks.workload_checks import dockerfile_problems, mtail_declarations, upstream_problems
from fleet.tools.delivery.image_delivery import split_digest

# Every workload folder of the repository (a folder with a workload.yaml), whatever a team keeps or adds.
NAMES = sorted(p.name for p in WORKLOADS_DIR.iterdir() if (p / "workload.yaml").is_file())


def test_every_folder_loads() -> None:
    workloads = load_workloads()
    assert NAMES and sorted(workloads) == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_declared_metrics_equal_the_program_metrics(name: str) -> None:
    workload = load_workloads()[name]
    declared = {(m.name, m.type, tuple(m.labels)) for m in workload.spec.metrics}
    program = set().union(*(mtail_declarations(text) for text in workload.mtail_programs.values()))
    assert declared == program
    assert sorted(workload.mtail_programs) == [f"{name}.mtail"]


@pytest.mark.parametrize("name", NAMES)
def test_sample_log_is_there_and_ends_with_a_newline(name: str) -> None:
    text = load_workloads()[name].sample_log.read_text(encoding="utf-8")
    # mtail only reads complete lines: a last line without "\n" would never be counted.
    assert any(line.strip() for line in text.splitlines())
    assert text.endswith("\n")


@pytest.mark.skipif(
    not (WORKLOADS_DIR / "madgraph4gpu").is_dir(), reason="the shipped madgraph4gpu workload was removed"
)
def test_headline_match_picks_a_declared_label_value() -> None:
    headline = load_workloads()["madgraph4gpu"].spec.headline
    assert headline.metric == "madgraph_throughput_events_per_second"
    assert headline.match == {"stage": "MatrixElems"}


# --- images without a public build: a pinned Dockerfile beside the workload --------------------------------

BUILT_HERE = {"madgraph4gpu": "MADGRAPH4GPU_REF", "simpletrack": "SIMPLETRACK_REF"}


@pytest.mark.parametrize(("name", "ref_arg"), sorted((n, r) for n, r in BUILT_HERE.items() if n in NAMES))
def test_built_images_come_from_a_pinned_dockerfile(name: str, ref_arg: str) -> None:
    workload = load_workloads()[name]
    dockerfile = (workload.folder / "Dockerfile").read_text(encoding="utf-8")
    bases = re.findall(r"^FROM\s+(\S+)", dockerfile, flags=re.MULTILINE)
    assert bases, "no FROM line"
    for base in bases:
        assert re.fullmatch(r"nvidia/cuda:\d+\.\d+\.\d+-[a-z0-9.-]+", base), base
    ref = re.search(rf"^ARG {ref_arg}=([0-9a-f]+)$", dockerfile, flags=re.MULTILINE)
    assert ref and len(ref[1]) == 40, "the upstream repository must be pinned to a full commit"
    cuda = re.search(r"nvidia/cuda:(\d+\.\d+\.\d+)", bases[-1])
    # named relative to the policy's registry, pinned by digest once the images workflow recorded it
    image, _ = split_digest(workload.spec.image)
    assert image == f"{name}:{ref[1][:8]}-cuda{cuda[1]}"
    assert f"docker build -t <registry>/{image} workloads/{name}" in dockerfile


BUILT = sorted(n for n in NAMES if (WORKLOADS_DIR / n / "Dockerfile").is_file())


@pytest.mark.parametrize("name", BUILT)
def test_images_built_here_run_as_the_pods_user_from_an_exactly_pinned_base(name: str) -> None:
    """A workload built from its Dockerfile runs as the unprivileged user its pods set (``run_as_user``), unless it
    says why it needs root; every base image has an exact version tag; an upstream repository fetched by git is
    fetched by a full commit: validate's rules (workload_checks.dockerfile_problems), which a team's folder meets."""
    assert dockerfile_problems(load_workloads()[name]) == []


# Bases by tag only, each with its reason (docs/security.md, "Workload images"): NVIDIA publishes no digest of its
# CUDA tags that could be checked upstream (no repo-info record as Docker's official images have).
TAG_ONLY_BASES = {
    "nvidia/cuda:12.4.1-base-ubuntu22.04",
    "nvidia/cuda:12.4.1-devel-ubuntu22.04",
    "nvidia/cuda:12.4.1-runtime-ubuntu22.04",
}


@pytest.mark.parametrize("name", BUILT)
def test_images_built_here_take_bases_by_digest_and_packages_by_hash(name: str) -> None:
    """Every base by digest but the named CUDA ones; every pip install from a hash-locked file of the workload's
    folder (the build context), whose every line pins one version with its SHA-256 (issue 44)."""
    folder = load_workloads()[name].folder
    dockerfile = (folder / "Dockerfile").read_text(encoding="utf-8")
    for base in re.findall(r"^FROM\s+(\S+)", dockerfile, flags=re.MULTILINE):
        image, digest = split_digest(base)
        assert digest or image in TAG_ONLY_BASES, f"{name}: {base} is neither by digest nor a named exception"
    installs = re.findall(r"pip3? install[^\n]*", dockerfile)
    for line in installs:
        if "--no-deps -e /opt/" in line:  # the upstream checkout itself, fetched by a full commit
            continue
        files = re.findall(r"--require-hashes (?:--no-deps --no-build-isolation )?-r /tmp/(\S+)", line)
        assert files, f"{name}: {line!r} is not a hash-locked install"
        for file in files:
            assert f"COPY {file}" in dockerfile or re.search(rf"COPY [^\n]*\b{re.escape(file)}\b", dockerfile)
            text = (folder / file).read_text(encoding="utf-8")
            pins = re.findall(r"^([A-Za-z0-9_.-]+)==(\S+) \\\n    --hash=sha256:([0-9a-f]{64})$", text, re.MULTILINE)
            entries = [line for line in text.splitlines() if line and not line.startswith(("#", " "))]
            assert pins and len(pins) == len(entries), f"{name}/{file}: every entry pinned with its hash"


def test_no_workload_image_is_copied_from_a_moving_tag() -> None:
    """A workload either builds its image here or copies an upstream image by an exact version (a digest once the
    images workflow recorded it): never a moving tag such as ``latest`` or ``demo`` (validate's rule)."""
    for name, workload in load_workloads().items():
        assert upstream_problems(workload) == [], name


# --- broken workload.yaml: every problem named by file, line and key ---------------------------------------

VALID = """\
name: broken
description: A workload with one mistake.
image: registry.example/bench:1.0
command: ["bench"]
resources:
  cpu_request: "1"
  memory_request: 1Gi
  cpu_limit: "2"
  memory_limit: 2Gi
timeout_seconds: 600
metrics:
  - name: bench_runs_total
    type: counter
    help: Runs.
  - name: bench_duration_seconds
    type: gauge
    help: Duration.
    labels: [stage]
headline:
  metric: bench_duration_seconds
  unit: s
  higher_is_better: false
"""


def write_workload(root: Path, text: str) -> Path:
    folder = root / "broken"
    (folder / "mtail").mkdir(parents=True)
    (folder / "mtail" / "broken.mtail").write_text("counter bench_runs_total\n", encoding="utf-8")
    path = folder / "workload.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_the_valid_base_loads(tmp_path: Path) -> None:
    write_workload(tmp_path, VALID)
    assert list(load_workloads(tmp_path)) == ["broken"]


BROKEN = {
    "latest tag": (
        ("image: registry.example/bench:1.0", "image: registry.example/bench:latest"),
        3,
        "image",
        "moving tag 'latest'",
    ),
    "no tag": (
        ("image: registry.example/bench:1.0", "image: registry.example/bench"),
        3,
        "image",
        "has no tag",
    ),
    "counter without _total": (
        ("- name: bench_runs_total", "- name: bench_runs"),
        12,
        "metrics[0]",
        "counter 'bench_runs' must end in _total",
    ),
    "unknown key": (
        ("    labels: [stage]", "    lables: [stage]"),
        18,
        "metrics[1].lables",
        "unknown key",
    ),
    "headline not declared": (
        ("  metric: bench_duration_seconds", "  metric: bench_seconds"),
        19,
        "headline",
        "headline metric 'bench_seconds' is not among the declared metrics",
    ),
    "secret_env not a variable name": (
        ("timeout_seconds: 600", "secret_env: [1TOKEN]\ntimeout_seconds: 600"),
        10,
        "secret_env",
        "are not environment variable names",
    ),
    "secret_env listed twice": (
        ("timeout_seconds: 600", "secret_env: [TOKEN, TOKEN]\ntimeout_seconds: 600"),
        10,
        "secret_env",
        "['TOKEN'] listed twice",
    ),
    "secret_env with a plain value": (
        ("timeout_seconds: 600", "env: {TOKEN: abc}\nsecret_env: [TOKEN]\ntimeout_seconds: 600"),
        11,
        "secret_env",
        "also have a plain value under env",
    ),
    "request above its limit": (
        ("  memory_request: 1Gi\n", "  memory_request: 4Gi\n"),
        5,
        "resources",
        "memory_request 4Gi exceeds memory_limit 2Gi",
    ),
    "not a quantity": (
        ('  cpu_limit: "2"\n', "  cpu_limit: 2 cores\n"),
        8,
        "resources.cpu_limit",
        "not a Kubernetes quantity",
    ),
    "a negative quantity": (
        ('  cpu_request: "1"\n', '  cpu_request: "-1"\n'),
        6,
        "resources.cpu_request",
        "is negative",
    ),
    "a quantity out of range": (
        ('  cpu_limit: "2"\n', "  cpu_limit: 1e999999999\n"),
        8,
        "resources.cpu_limit",
        "out of range",
    ),
    "a metric label the fleet sets": (
        ("    labels: [stage]\n", "    labels: [stage, gpu]\n"),
        18,
        "metrics[1].labels",
        "label(s) gpu are set by the fleet",
    ),
    "headline match on a missing label": (
        ("  unit: s\n", "  unit: s\n  match: {phase: warm}\n"),
        19,
        "headline",
        "headline match uses ['phase']",
    ),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_broken_workload_names_file_line_and_key(tmp_path: Path, case: str) -> None:
    (old, new), line, key, message = BROKEN[case]
    assert old in VALID
    path = write_workload(tmp_path, VALID.replace(old, new, 1))
    with pytest.raises(InputError) as caught:
        load_workloads(tmp_path)
    [problem] = caught.value.problems
    assert (problem.file, problem.line, problem.path) == (str(path), line, key)
    assert message in problem.message
    assert f"{path}:{line}: {key}: " in str(caught.value)


@pytest.mark.parametrize("quantity", ["1Pi", "1e3", "1.5Gi", "0.5", "250m", "1E2"])
def test_valid_kubernetes_quantities_are_accepted(tmp_path: Path, quantity: str) -> None:
    text = VALID.replace('  cpu_request: "1"', f"  cpu_request: {quantity}").replace(
        '  cpu_limit: "2"', '  cpu_limit: "1e18"'
    )
    write_workload(tmp_path, text)
    assert load_workloads(tmp_path)["broken"].spec.resources.cpu_request == quantity


def test_all_problems_of_a_file_are_reported_at_once(tmp_path: Path) -> None:
    text = (
        VALID.replace("bench:1.0", "bench:latest")
        .replace("timeout_seconds: 600", "timeout_secs: 600")
        .replace("  metric: bench_duration_seconds", "  metric: bench_seconds")
    )
    path = write_workload(tmp_path, text)
    with pytest.raises(InputError) as caught:
        load_workloads(tmp_path)
    located = {(p.line, p.path) for p in caught.value.problems}
    # A missing key is located at the mapping that lacks it: here the top level, which starts on line 1.
    assert located == {(3, "image"), (10, "timeout_secs"), (1, "timeout_seconds"), (19, "headline")}
    assert all(p.file == str(path) for p in caught.value.problems)


def test_a_symbolic_link_under_files_is_refused(tmp_path: Path) -> None:
    """A link to a system file would be rendered into a ConfigMap and shipped to every cluster."""
    path = write_workload(tmp_path, VALID)
    (path.parent / "files").mkdir()
    (path.parent / "files" / "passwd").symlink_to("/etc/passwd")
    (path.parent / "files" / "run.sh").write_text("echo hi\n", encoding="utf-8")
    with pytest.raises(InputError) as caught:
        load_workloads(tmp_path)
    [problem] = caught.value.problems
    assert problem.file == str(path.parent / "files" / "passwd") and "symbolic link" in problem.message
    assert "root:" not in str(caught.value)


def test_a_program_that_is_not_utf8_is_located(tmp_path: Path) -> None:
    path = write_workload(tmp_path, VALID)
    (path.parent / "mtail" / "broken.mtail").write_bytes(b"counter bench_runs_total # caf\xe9\n")
    with pytest.raises(InputError) as caught:
        load_workloads(tmp_path)
    [problem] = caught.value.problems
    assert problem.file.endswith("broken.mtail") and "not UTF-8" in problem.message


@pytest.mark.parametrize("sub", ["files", "mtail"])
def test_a_symbolic_link_for_a_whole_folder_is_refused(tmp_path: Path, sub: str) -> None:
    path = write_workload(tmp_path, VALID)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "key.txt").write_text("secret\n", encoding="utf-8")
    (elsewhere / "x.mtail").write_text("counter bench_runs_total\n", encoding="utf-8")
    if sub == "mtail":
        shutil.rmtree(path.parent / "mtail")
    (path.parent / sub).symlink_to(elsewhere)
    with pytest.raises(InputError) as caught:
        load_workloads(tmp_path)
    [problem] = caught.value.problems
    assert problem.file == str(path.parent / sub) and "symbolic link" in problem.message


def test_a_copied_workload_keeps_its_tests_and_they_do_not_collide(tmp_path: Path) -> None:
    """docs/policy-file.md, "Adding a workload": a shipped folder copied and renamed (folder, name:, mtail program)
    keeps its test files' names; with the repository's pytest settings both folders' tests run, each on its own folder
    (they failed with "import file mismatch" when two files of one name were imported as the same module)."""
    import os
    import subprocess
    import sys

    from tests.conftest import ROOT

    shipped = sorted(p for p in WORKLOADS_DIR.iterdir() if list(p.glob("test_*.py")))
    if not shipped:
        pytest.skip("no workload folder carries tests of its own")
    original = shipped[0]
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    shutil.copytree(original, tmp_path / "workloads" / original.name, ignore=shutil.ignore_patterns("__pycache__"))
    copy = tmp_path / "workloads" / "lab-copy"
    shutil.copytree(original, copy, ignore=shutil.ignore_patterns("__pycache__"))
    spec = copy / "workload.yaml"
    spec.write_text(spec.read_text(encoding="utf-8").replace(f"name: {original.name}\n", "name: lab-copy\n"))
    (copy / "mtail" / f"{original.name}.mtail").rename(copy / "mtail" / "lab-copy.mtail")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}, "PYTHONPATH": str(ROOT)}

    def passed(*folders: str) -> int:
        run = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", *folders],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert run.returncode == 0 and "import file mismatch" not in run.stdout, run.stdout[-3000:] + run.stderr
        return int(re.search(r"(\d+) passed", run.stdout)[1])

    alone = passed(f"workloads/{original.name}")
    assert alone and passed("workloads") == 2 * alone
