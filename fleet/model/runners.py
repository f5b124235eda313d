"""GitLab CI runners of a card's pool (policy: ``runners``), with their defaults."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from fleet.model.ci_pools import ci_pool
from fleet.model.spec_schema import RunnerSettings

if TYPE_CHECKING:  # spec.py imports this module
    from fleet.model.spec import GpuPool


@dataclass(frozen=True)
class Runner:
    """A GitLab CI runner of one card: each CI job it runs requests ``accelerators`` of the cards of ``pool``, the
    card's CI pool (or, with ``own_pool`` false on an existing cluster, the card's own pool)."""

    pool: GpuPool
    gitlab_url: str
    tags: tuple[str, ...]
    concurrency: int
    accelerators: int
    cpu_request: str
    memory_request: str
    cpu_limit: str
    memory_limit: str
    own_pool: bool = True

    @property
    def name(self) -> str:
        """The runner's name in the cluster: ``gitlab-runner-<card>``."""
        return f"gitlab-runner-{self.pool.card}"


def resolve_runner(pool: GpuPool, gitlab_url: str, settings: RunnerSettings) -> Runner:
    """A card's runner with its defaults: tags ``gpu-fleet``, the card, and its kind (``gpu``, ``tpu``, ...); its
    jobs on the card's CI pool (fleet/model/ci_pools.py) unless it opts out with ``own_pool: false``."""
    kind = pool.resource.rsplit("/", 1)[-1]
    tags = tuple(settings.tags) or ("gpu-fleet", pool.card, kind)
    jobs_pool = ci_pool(pool, settings.concurrency, settings.accelerators) if settings.own_pool else pool
    return Runner(
        jobs_pool, gitlab_url, tags, settings.concurrency, settings.accelerators, settings.cpu_request,
        settings.memory_request, settings.cpu_limit, settings.memory_limit, settings.own_pool,
    )  # fmt: skip
