"""Images by digest: every container image, and every image a Helm release's values set (advisory in previews; the
deploy configuration, policy/deploy-config.json, makes it mandatory)."""

from __future__ import annotations

import re
from typing import Any

from pulumi_policy import ReportViolation, ResourceValidationArgs

from .registry import ADVISORY, resource_policy
from .resources import HELM_RELEASE, all_containers, plain, pod_of, subject

# name[:tag]@sha256:<64 hex>, as the images workflow records it (the readable tag kept beside the digest).
DIGEST_REF = re.compile(r"[^@\s]+@sha256:[0-9a-f]{64}")


def release_images(values: Any, path: str = "") -> list[tuple[str, dict[str, Any]]]:
    """The image blocks (mappings with a ``repository``, or a ``registry`` and an ``image``) in a Helm release's
    values, with their dotted paths."""
    found: list[tuple[str, dict[str, Any]]] = []
    if isinstance(values, dict):
        if isinstance(values.get("repository"), str) or (
            isinstance(values.get("registry"), str) and isinstance(values.get("image"), str)
        ):
            found.append((path, values))
        for key, value in values.items():
            found += release_images(value, f"{path}.{key}" if path else str(key))
    return found


def _block_pinned(block: dict[str, Any]) -> bool:
    digest = str(block.get("sha") or block.get("digest") or "")
    return bool(digest) or "@sha256:" in str(block.get("tag") or "")


@resource_policy(
    "images-by-digest",
    "Every container image, and every image a Helm release's values set, is pinned by digest "
    "(advisory in previews; deploys make it mandatory).",
    ADVISORY,
)
def _validate_digests(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type == HELM_RELEASE:
        values = plain(args.props).get("values") or {}
        for path, block in release_images(values):
            if not _block_pinned(block):
                name = block.get("repository") or block.get("image")
                report(
                    f"{subject(args)}: chart image {path} ({name}:{block.get('tag')}) is not pinned "
                    "by digest: record it (python -m fleet images --push ... --record; "
                    "components/kubernetes/images.yaml)"
                )
        return
    found = pod_of(args)
    if not found:
        return
    _, pod = found
    for c in all_containers(pod):
        ref = c.get("image") or ""
        if not DIGEST_REF.fullmatch(ref):
            report(
                f"{subject(args)}: container {c.get('name')!r} runs {ref!r}, not pinned by digest "
                "(name[:tag]@sha256:<64 hex>): record the digests (python -m fleet images --push ... --record "
                "writes them into components/kubernetes/images.yaml and the workload's workload.yaml) and commit them"
            )
