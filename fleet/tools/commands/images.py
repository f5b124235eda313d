"""``images``: what the images workflow copies and builds into the fleet's registry, pushing them (CI) and checking
that the repository pins each by the digest the registry holds."""

from __future__ import annotations

import argparse
import json
import re
import sys
from typing import TYPE_CHECKING

from fleet.model.core.errors import InputError, Problem, did_you_mean
from fleet.model.core.input_files import read_input_text, shown_path
from fleet.model.loader import load_fleet
from fleet.tools.commands import EXIT_FAILED, EXIT_OK, check_output_file

PUSHED_EXAMPLE = '{"registry.example.org/lab/probe:1.0": "sha256:<64 hex digits>"}'

if TYPE_CHECKING:
    from collections.abc import Callable

    from fleet.tools.delivery.image_delivery import ImageJob


def cmd_images(args: argparse.Namespace) -> int:
    """List what the images workflow copies and builds; with --pushed, check the digests it got are recorded."""
    from fleet.model.core.workloads import load_workloads
    from fleet.tools.delivery.image_delivery import fleet_image_jobs, job_problems, jobs_json

    def read_jobs() -> list[ImageJob]:
        from components.kubernetes.images import reload_images

        reload_images()
        load_workloads.cache_clear()
        return fleet_image_jobs(load_fleet(args.policy, args.workloads_dir))

    # The workloads' images and the pool probe's (fleet/model/probes/probe), in the policy's registry.
    fleet = load_fleet(args.policy, args.workloads_dir)
    jobs = fleet_image_jobs(fleet)
    record = read_jobs if args.record else None
    problems = job_problems(jobs, fleet.registry, fleet.file)
    if problems:
        raise InputError(problems)
    if args.out is not None and not args.push:
        raise InputError([Problem(str(args.out), 1, "--out", "goes with --push (the digests it pushed)")])
    if args.push:
        import subprocess

        if args.out is not None:
            check_output_file(args.out, "--out")
        from fleet.tools.delivery.image_delivery import push_all

        try:
            pushed = push_all(jobs, args.push)
        except (subprocess.CalledProcessError, OSError, ValueError) as exc:
            print(f"images: push failed: {exc}", file=sys.stderr)
            return EXIT_FAILED
        if args.out:
            try:
                args.out.write_text(json.dumps(pushed, indent=1) + "\n", encoding="utf-8")
            except OSError as exc:
                print(f"images: cannot write {args.out}: {exc.strerror or exc}", file=sys.stderr)
        return _check_pins(jobs, pushed, record)
    if args.record and args.pushed is None:
        raise InputError([Problem("--record", 1, "--record", "goes with --pushed FILE or --push")])
    if args.pushed is None:
        if args.format == "json":
            print(jobs_json(jobs))
        else:
            for job in jobs:
                pin = f"@{job.digest}" if job.digest else " (no digest recorded)"
                print(f"{job.kind:<6} {job.name:<14} {job.source} -> {job.target}{pin}")
        return EXIT_OK
    text = read_input_text(args.pushed, what="pushed digests file")
    try:
        pushed = json.loads(text)
    except json.JSONDecodeError as exc:  # its line, and the column in the message
        raise InputError(
            [
                Problem(
                    shown_path(args.pushed),
                    exc.lineno,
                    "",
                    f"cannot read the pushed digests: not JSON ({exc.msg} at column {exc.colno}): expected the "
                    f"object `images --push --out FILE` writes, such as {PUSHED_EXAMPLE}",
                )
            ]
        ) from None
    if not isinstance(pushed, dict) or not all(isinstance(v, str) for v in pushed.values()):
        raise InputError(
            [
                Problem(
                    shown_path(args.pushed), 1, "", f"must be a JSON object {{image: digest}}, such as {PUSHED_EXAMPLE}"
                )
            ]
        )
    problems = pushed_problems(jobs, pushed, text, shown_path(args.pushed))
    if problems:
        raise InputError(problems)
    return _check_pins(jobs, pushed, record)


# An image digest as registries give it (OCI image-spec descriptor.md, "Digests": sha256 is the algorithm every
# registry supports, 64 lowercase hex digits).
DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


def pushed_problems(jobs: list[ImageJob], pushed: dict[str, str], text: str, shown: str) -> list[Problem]:
    """Each entry of the pushed digests that names no image of the fleet or is not a sha256 digest, at its line."""
    targets = sorted(job.target for job in jobs)
    problems = []
    for image, digest in pushed.items():
        at = text.find(json.dumps(image))
        line = text.count("\n", 0, at) + 1 if at >= 0 else 1
        if image not in targets:
            problems.append(
                Problem(
                    shown,
                    line,
                    image,
                    f"is not an image of the fleet{did_you_mean(image, targets)}: expected one `images` lists, such "
                    f"as {targets[0] if targets else 'registry.example.org/lab/mtail:3.0.8'}",
                )
            )
        if not DIGEST.match(digest):
            problems.append(
                Problem(shown, line, image, f"{digest!r} is not a sha256 digest: expected sha256: and 64 hex digits")
            )
    return problems


def _check_pins(
    jobs: list[ImageJob], pushed: dict[str, str], record: Callable[[], list[ImageJob]] | None = None
) -> int:
    """Exit 1 with what to commit where, unless the repository pins every pushed image by its pushed digest; with
    ``record`` (which reads the jobs again), first write the digests into the files that pin them (to commit)."""
    from fleet.tools.delivery.image_delivery import record_digests, unrecorded_digests

    if record:
        try:
            changed = record_digests(jobs, pushed)
        except (OSError, ValueError) as exc:
            print(f"images: cannot record the digests: {exc}", file=sys.stderr)
            return EXIT_FAILED
        for path in sorted(set(changed)):
            print(f"recorded digests in {path}")
        if changed:
            jobs = record()  # read the files again: what they pin now
    lines = unrecorded_digests(jobs, pushed)
    for line in lines:
        print(line, file=sys.stderr)
    if lines:
        print(f"{len(lines)} image(s) not pinned by the digest just pushed: commit the lines above", file=sys.stderr)
        return EXIT_FAILED
    print(f"all {len(jobs)} image(s) are pinned by the digest in the registry")
    return EXIT_OK
