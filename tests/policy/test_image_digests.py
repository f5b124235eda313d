"""policy/gpufleet_policies/image_digests.py: container and chart images by digest, and the digest's form."""

from __future__ import annotations

import copy

import pytest

from tests.policy.support import CRONJOB, DEPLOYMENT, DIGEST, JOB, POD, as_kind, check, only, pod, pod_spec_of, reg

HEX = "0123456789abcdef" * 4


def test_images_by_digest_is_advisory_and_satisfied_by_a_digest(plans, session):
    job = reg(plans, "fix-eks", JOB, "-t4")
    found = only(check(session, job), "images-by-digest")
    assert found and {f.level for f in found} == {"advisory"}
    for c in [*pod(job)["initContainers"], *pod(job)["containers"]]:
        c["image"] = c["image"] + DIGEST
    assert not only(check(session, job), "images-by-digest")


def test_chart_images_in_release_values_are_checked_for_digests(plans, session):
    (kps,) = [
        r
        for r in plans["fix-magnum"].registrations
        if r.type == "kubernetes:helm.sh/v3:Release" and r.name.endswith("-prometheus")
    ]
    found = only(check(session, kps), "images-by-digest")
    assert found and {f.level for f in found} == {"advisory"}
    assert any("prometheus.prometheusSpec.image" in f.message for f in found)
    pinned = copy.deepcopy(kps)
    values = pinned.inputs["values"]
    stack = [values]
    while stack:  # give every image block of the values a digest
        node = stack.pop()
        if isinstance(node, dict):
            if isinstance(node.get("repository"), str):
                node["sha"] = "0" * 64
            stack.extend(node.values())
    assert not only(check(session, pinned), "images-by-digest")


@pytest.mark.parametrize(
    ("image", "pinned"),
    [
        (f"registry.example.org/lab/nginx-unprivileged:1.27.3-alpine@sha256:{HEX}", True),
        (f"registry.example.org/lab/nginx-unprivileged@sha256:{HEX}", True),
        (f"registry.local:5000/fleet/tool:1.0@sha256:{HEX}", True),
        ("registry.example.org/lab/nginx-unprivileged:1.27.3-alpine", False),
        ("registry.example.org/lab/nginx-unprivileged@sha256:1234", False),  # not 64 hex digits
        (f"registry.example.org/lab/nginx-unprivileged@sha256:{HEX.upper()}", False),
        (f"registry.example.org/lab/nginx-unprivileged@sha512:{HEX}{HEX}", False),
        (f"@sha256:{HEX}", False),  # no name
        (f"registry.example.org/lab/nginx-unprivileged:1.27.3-alpine@sha256:{HEX} ", False),
    ],
)
def test_images_by_digest_form(session, gateway, image, pinned):
    for type_ in (DEPLOYMENT, POD, CRONJOB):
        r = as_kind(gateway, type_)
        pod_spec_of(r)["containers"][0]["image"] = image
        found = only(check(session, r), "images-by-digest")
        if pinned:
            assert found == [], type_
            continue
        assert found and {f.level for f in found} == {"advisory"}, type_
        for fragment in ("container 'nginx'", repr(image), "python -m fleet images", "images.yaml", "workload.yaml"):
            assert fragment in found[0].message, (fragment, found[0].message)
