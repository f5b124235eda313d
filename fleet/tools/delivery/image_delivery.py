"""The images the fleet keeps in its own registry: what the images workflow copies and builds, and the digests to
record once they are pushed.

Two kinds, both listed from the repository itself:
  - ``copy``: an upstream image of components/kubernetes/images.yaml, copied with its digest unchanged
    (``skopeo copy --all --preserve-digests``) to the fleet's registry, where pods pull it;
  - ``build``: a workload folder with a Dockerfile, built and pushed as the image its workload.yaml names.
After pushing, the workflow hands the digests it got to ``python -m fleet images --pushed FILE``, which says which
file records which digest and fails until the repository pins each image by that digest.
"""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from components.kubernetes.images import (
    IMAGES_FILE,
    autoscaler_images,
    chart_images,
    magnum_autoscaler_images,
    pinned_images,
)
from fleet.model.core.errors import Problem
from fleet.model.core.fleet import Fleet
from fleet.model.core.registry import relative_to
from fleet.model.core.workloads import Workload

ROOT = Path(__file__).resolve().parents[3]
DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


@dataclass(frozen=True)
class ImageJob:
    """One image the workflow pushes to the fleet's registry."""

    name: str  # the images.yaml entry or the workload
    kind: str  # "copy" or "build"
    source: str  # the upstream reference (copy) or the build context, relative to the repository (build)
    target: str  # where it is pushed: the reference pods pull, without digest
    digest: str  # the digest the repository records now ("" when none)
    pinned_in: str  # the file that records it, relative to the repository
    pinned_as: str = ""  # how that file names the image: relative to the fleet's registry, without digest


def split_digest(reference: str) -> tuple[str, str]:
    """``repo:tag@sha256:...`` -> (``repo:tag``, ``sha256:...``); no digest -> (reference, "")."""
    ref, _, digest = reference.partition("@")
    return ref, digest


def _relative(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def image_jobs(workloads: dict[str, Workload], registry: str) -> list[ImageJob]:
    """The copies of images.yaml into ``registry``, then the builds of the workloads with a Dockerfile, by name
    (``workloads`` as the fleet resolves them: their images in the registry)."""
    jobs = [
        ImageJob(p.name, "copy", p.upstream, p.image, p.digest, _relative(IMAGES_FILE), relative_to(p.image, registry))
        for p in [
            *pinned_images(registry),
            *chart_images(registry),
            *autoscaler_images(registry),
            *magnum_autoscaler_images(registry),
        ]
        if p.upstream
    ]
    for name, wl in sorted(workloads.items()):
        target, digest = split_digest(wl.spec.image)
        pinned_in = _relative(wl.folder / "workload.yaml")
        written = relative_to(target, registry)
        if (wl.folder / "Dockerfile").is_file():
            jobs.append(ImageJob(name, "build", _relative(wl.folder), target, digest, pinned_in, written))
        elif wl.spec.upstream:
            jobs.append(ImageJob(name, "copy", wl.spec.upstream, target, digest, pinned_in, written))
    return jobs


def fleet_image_jobs(fleet: Fleet) -> list[ImageJob]:
    """What the images workflow pushes for ``fleet``: images.yaml's copies, every workload folder's image (placed
    in the policy or not) and the pool probe's, all in the policy's ``registry``."""
    probe = {fleet.probe_workload.name: fleet.probe_workload} if fleet.probe_workload else {}
    return image_jobs({**fleet.workloads, **probe}, fleet.registry)


def job_problems(jobs: list[ImageJob], registry: str, policy: str = "policy/fleet.yaml") -> list[Problem]:
    """Images the workflow could not push where pods pull them: a target outside the fleet's registry (an image
    images.yaml names with a registry host of its own; workload images are checked when the policy is loaded)."""
    prefix = registry.rstrip("/") + "/"
    return [
        Problem(
            job.pinned_in,
            1,
            job.name,
            f"{job.target} is not in the fleet's registry {registry} ({policy} `registry`), where the images workflow "
            f"pushes and pods pull: name it relative to the registry ({job.target.split('/')[-1]})",
        )
        for job in jobs
        if not job.target.startswith(prefix)
    ]


def unrecorded_digests(jobs: list[ImageJob], pushed: dict[str, str]) -> list[str]:
    """For every pushed image whose digest the repository does not record: what to write where."""
    lines = []
    for job in jobs:
        digest = pushed.get(job.target)
        if digest is None:
            lines.append(f"{job.target}: not pushed by this run ({job.kind} {job.source})")
        elif digest != job.digest:
            where, value = record_as(job, digest)
            lines.append(f"{job.pinned_in}: {job.name}: set {where} {value} (recorded: {job.digest or 'none'})")
    return lines


def record_as(job: ImageJob, digest: str) -> tuple[str, str]:
    """The key and value that record ``digest`` for ``job``: images.yaml's ``digest:``, or a workload's ``image:``
    with the digest after its tag (the readable tag stays beside it, the name relative to the registry)."""
    if job.pinned_in == _relative(IMAGES_FILE):
        return "digest:", digest
    return "image:", f"{job.pinned_as or job.target}@{digest}"


def record_digests(jobs: list[ImageJob], pushed: dict[str, str], root: Path = ROOT) -> list[str]:
    """Write each pushed digest the repository does not record yet into the file that pins it; return the files
    changed. Only the one line changes (its comments and layout stay), and only a line that holds what the
    repository records now, so nothing else is rewritten."""
    changed: list[str] = []
    for job in jobs:
        digest = pushed.get(job.target)
        if not digest or digest == job.digest:
            continue
        if not DIGEST.match(digest):
            raise ValueError(f"{job.target}: {digest!r} is not a sha256 digest")
        path = root / job.pinned_in
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        key, value = record_as(job, digest)
        if key == "digest:":
            index = _entry_line(lines, job.name, "digest:")
        else:
            index = next((i for i, line in enumerate(lines) if line.startswith("image:")), None)
        if index is None:
            raise ValueError(f"{job.pinned_in}: no {key} line for {job.name}")
        indent = lines[index][: len(lines[index]) - len(lines[index].lstrip())]
        lines[index] = f"{indent}{key} {json.dumps(value) if key == 'digest:' else value}\n"
        path.write_text("".join(lines), encoding="utf-8")
        changed.append(job.pinned_in)
    return changed


def _entry_line(lines: list[str], entry: str, key: str) -> int | None:
    """The line of ``key`` inside the images.yaml entry ``entry`` (``  <entry>:`` then its indented keys)."""
    inside = False
    for i, line in enumerate(lines):
        if line.rstrip() == f"  {entry}:":
            inside = True
        elif inside and line.startswith("    ") and line.strip().startswith(key):
            return i
        elif inside and line.strip() and not line.startswith("    ") and not line.lstrip().startswith("#"):
            return None
    return None


def jobs_json(jobs: list[ImageJob]) -> str:
    """The jobs as a JSON list, for the workflow's loop."""
    return json.dumps([asdict(j) for j in jobs])


# How each job is pushed. The flags were checked with skopeo 1.9.3 and buildah 1.28.2 (Debian bookworm: `skopeo
# copy --help`, `buildah push --help`) and docker buildx (docs.docker.com "docker buildx build": --metadata-file,
# key containerimage.digest). `--all --preserve-digests` copies a multi-arch list as it is, so the digest pinned
# in the repository is upstream's own.
BUILDERS = ("docker", "buildah")


def push_commands(job: ImageJob, builder: str, digest_file: Path) -> list[list[str]]:
    """The commands that push ``job`` and leave its digest in ``digest_file``."""
    if job.kind == "copy":
        return [
            [
                "skopeo",
                "copy",
                "--all",
                "--preserve-digests",
                "--digestfile",
                str(digest_file),
                f"docker://{job.source}",
                f"docker://{job.target}",
            ],
        ]
    context = str(ROOT / job.source)
    if builder == "docker":
        return [
            ["docker", "buildx", "build", "--push", "--tag", job.target, "--metadata-file", str(digest_file), context]
        ]
    # buildah in an unprivileged CI container: chroot isolation (BUILDAH_ISOLATION is honoured too)
    return [
        ["buildah", "build", "--isolation", "chroot", "--tag", job.target, context],
        ["buildah", "push", "--digestfile", str(digest_file), job.target, f"docker://{job.target}"],
    ]


def read_digest(job: ImageJob, builder: str, digest_file: Path) -> str:
    """The digest a push left: the plain file of skopeo and buildah, or docker's metadata JSON."""
    text = digest_file.read_text(encoding="utf-8").strip() if digest_file.is_file() else ""
    if job.kind == "build" and builder == "docker":
        try:
            text = str(json.loads(text)["containerimage.digest"])
        except (ValueError, KeyError, TypeError):
            text = text or "no metadata"
    if not text.startswith("sha256:") or len(text) != len("sha256:") + 64:
        raise ValueError(f"{job.target}: the push left no digest but {text[:80]!r}")
    return text


def push_all(jobs: list[ImageJob], builder: str, run: Callable[..., object] = subprocess.run) -> dict[str, str]:
    """Push every job (stopping at the first failure); the digest of each target."""
    if builder not in BUILDERS:
        raise ValueError(f"unknown builder {builder!r} (one of {', '.join(BUILDERS)})")
    pushed: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for i, job in enumerate(jobs):
            digest_file = Path(tmp) / f"{i}.digest"
            for command in push_commands(job, builder, digest_file):
                print("+", " ".join(command), flush=True)
                run(command, check=True)
            pushed[job.target] = read_digest(job, builder, digest_file)
            # Pods pull without credentials (no imagePullSecrets): a new package on GitHub's registry is private
            # until made public, and would sit in ImagePullBackOff on every cluster.
            anonymous = ["skopeo", "inspect", "--no-creds", "--raw", f"docker://{job.target}"]
            print("+", " ".join(anonymous), flush=True)
            try:
                run(anonymous, check=True)
            except subprocess.CalledProcessError:
                raise ValueError(
                    f"{job.target} was pushed but cannot be pulled without credentials, as the clusters pull it: make "
                    "the package public (on GitHub: the package's settings, visibility)"
                ) from None
    return pushed
