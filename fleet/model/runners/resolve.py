"""GitLab CI runners of a card's pool (policy: ``runners``), with their defaults."""

from __future__ import annotations

from fleet.model.core.jobs import Runner
from fleet.model.core.pools import GpuPool
from fleet.model.runners.ci_pools import ci_pool
from fleet.model.runners.settings import RunnerSettings


def resolve_runner(pool: GpuPool, gitlab_url: str, settings: RunnerSettings) -> Runner:
    """A card's runner with its defaults: tags ``gpu-fleet``, the card, and its kind (``gpu``, ``tpu``, ...); its
    jobs on the card's CI pool (fleet/model/runners/ci_pools.py) unless it opts out with ``own_pool: false``."""
    kind = pool.resource.rsplit("/", 1)[-1]
    tags = tuple(settings.tags) or ("gpu-fleet", pool.card, kind)
    jobs_pool = ci_pool(pool, settings.concurrency, settings.accelerators) if settings.own_pool else pool
    return Runner(
        jobs_pool, gitlab_url, tags, settings.concurrency, settings.accelerators, settings.cpu_request,
        settings.memory_request, settings.cpu_limit, settings.memory_limit, settings.own_pool,
    )  # fmt: skip
