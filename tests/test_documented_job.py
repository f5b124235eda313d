"""The Job the docs have a user submit to a queue (docs/policy-file.md, "Submitting to a queue") is valid in the
benchmarks namespace: its requests, with the namespace's LimitRange defaults applied as the API server does, stay
within its limits. The real tier found it was not: a memory request of 2Gi under the default 1Gi limit, which Kueue
refused ("requests must not exceed its limits") and so never dispatched it."""

from __future__ import annotations

from components.kubernetes.namespaces import CONTAINER_LIMITS
from fleet.model.core.quantity import parse_quantity
from tests.real.dispatch import documented_job


def test_the_documented_jobs_requests_stay_within_its_limits_after_the_namespaces_defaults():
    job, page = documented_job()
    for container in job["spec"]["template"]["spec"]["containers"]:
        given = container.get("resources") or {}
        limits = {**CONTAINER_LIMITS["default"], **(given.get("limits") or {})}
        requests = {**CONTAINER_LIMITS["defaultRequest"], **(given.get("requests") or {})}
        over = {
            name: (value, limits[name])
            for name, value in requests.items()
            if name in limits and parse_quantity(str(value)) > parse_quantity(str(limits[name]))
        }
        assert over == {}, f"{page.name}: {container['name']}: requests above limits {over}"
        too_much = {n: v for n, v in limits.items() if n in CONTAINER_LIMITS["max"]
                    and parse_quantity(str(v)) > parse_quantity(CONTAINER_LIMITS["max"][n])}  # fmt: skip
        assert too_much == {}, page.name
