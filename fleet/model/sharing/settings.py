"""A pool's GPU sharing in the policy file (``sharing``): the shape of the key."""

from __future__ import annotations

import pydantic

from fleet.model.core.validation import StrictModel

# GKE's time-sharing takes 2 to 48 clients per GPU (its autoscaler's GetMaxGpuSharedClients range)
MAX_TIME_SLICES = 48


class SharingSettings(StrictModel):
    """How the pool's cards are shared by pods: time-slicing (N pods take turns on a card) or MIG partitions."""

    time_slicing: int | None = pydantic.Field(
        default=None, ge=2, le=MAX_TIME_SLICES, description="Pods per card, taking turns (2 to 48)."
    )
    mig: str | None = pydantic.Field(
        default=None,
        pattern=r"^[1-7]g\.[0-9]+gb$",
        description="MIG profile each pod gets, such as 1g.5gb (the catalogue lists each card's profiles).",
    )

    @pydantic.model_validator(mode="after")
    def _one_kind(self) -> SharingSettings:
        if (self.time_slicing is None) == (self.mig is None):
            raise ValueError("give exactly one of time_slicing (pods per card) or mig (a MIG profile)")
        return self
