"""GitLab CI runners in the policy file (``runners``): the shape of the section."""

from __future__ import annotations

import re
from typing import Any

import pydantic

from fleet.model.core.quantity import parse_quantity
from fleet.model.core.validation import StrictModel

# A label value (a GitLab runner tag): letters, digits and - _ . as GitLab accepts, short.
RUNNER_TAG = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$"


class RunnerSettings(StrictModel):
    """One card's GitLab CI runner on a cluster: what CI jobs it picks up and what each job gets."""

    tags: list[str] = pydantic.Field(
        default_factory=list, description="Job tags it runs (default: gpu-fleet, the card, and gpu or tpu)."
    )
    concurrency: int = pydantic.Field(default=2, ge=1, le=100, description="CI jobs at once, each on its own card(s).")
    accelerators: int = pydantic.Field(default=1, ge=1, le=8, description="Cards each CI job requests.")
    cpu_request: str = pydantic.Field(default="1", description="CPU a CI job's build container is sure to get.")
    memory_request: str = pydantic.Field(default="4Gi", description="Memory a CI job's build container is sure to get.")
    cpu_limit: str = pydantic.Field(default="4", description="CPU limit of a CI job's build container.")
    memory_limit: str = pydantic.Field(default="12Gi", description="Memory limit of a CI job's build container.")
    own_pool: bool = pydantic.Field(
        default=True,
        description=(
            "CI jobs on a node pool of their own (gpu-<card>-ci, labelled and tainted gpu-fleet.io/ci=true), never on "
            "a node beside a benchmark that holds credentials. false only on an existing cluster, whose pools the "
            "fleet cannot create: the jobs then run on the card's pool."
        ),
    )

    @pydantic.field_validator("tags")
    @classmethod
    def _tags(cls, value: list[str]) -> list[str]:
        bad = [t for t in value if not re.match(RUNNER_TAG, t)]
        if bad:
            raise ValueError(f"{bad} are not runner tags (letters, digits, - _ . ; at most 63 characters)")
        if len(set(value)) != len(value):
            raise ValueError("a tag is listed twice")
        return value

    @pydantic.field_validator("cpu_request", "memory_request", "cpu_limit", "memory_limit", mode="before")
    @classmethod
    def _quantity(cls, value: Any) -> str:
        text = str(value) if isinstance(value, int | float) and not isinstance(value, bool) else value
        parse_quantity(text)
        return text

    @pydantic.model_validator(mode="after")
    def _requests_within_limits(self) -> RunnerSettings:
        for kind in ("cpu", "memory"):
            request, limit = getattr(self, f"{kind}_request"), getattr(self, f"{kind}_limit")
            if parse_quantity(request) > parse_quantity(limit):
                raise ValueError(f"{kind}_request {request} is above {kind}_limit {limit}")
        return self


class Runners(StrictModel):
    """GitLab CI runners on the fleet's pools: the GitLab they serve and, per cluster, the cards that get one."""

    gitlab_url: str = pydantic.Field(
        default="https://gitlab.com",
        pattern=r"^https://[^\s/]+(/[^\s]*)?$",
        description="The GitLab the runners serve.",
    )
    clusters: dict[str, dict[str, RunnerSettings]] = pydantic.Field(
        default_factory=dict, description="Cluster -> card -> runner settings (or a list of cards)."
    )

    @pydantic.field_validator("clusters", mode="before")
    @classmethod
    def _list_form(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {
                name: ({card: {} for card in cards} if isinstance(cards, list) else cards or {})
                for name, cards in value.items()
            }
        return value
