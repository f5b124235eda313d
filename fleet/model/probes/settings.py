"""A pool's probe in the policy file (``probe`` of a pool, ``defaults.probe``): the shape of the keys."""

from __future__ import annotations

from typing import Any

import pydantic

from fleet.model.core.monitoring import DURATION_PATTERN
from fleet.model.core.schedules import check_cron
from fleet.model.core.validation import StrictModel

DEFAULT_PROBE_SCHEDULE = "17 4 * * *"
DEFAULT_PROBE_SCALE_UP_ALERT = "20m"


class ProbeSettings(StrictModel):
    """One pool's probe: on or off (``probe: false``), and its own schedule or scale-up threshold."""

    enabled: bool | None = pydantic.Field(
        default=None, description="Run the probe (default: only on pools whose minimum is 0)."
    )
    schedule: str | None = pydantic.Field(default=None, description="Cron schedule (UTC) of this pool's probe.")
    scale_up_alert_after: str | None = pydantic.Field(
        default=None, pattern=DURATION_PATTERN, description="Alert when the probe waited longer for its accelerator."
    )

    @pydantic.model_validator(mode="before")
    @classmethod
    def _short_form(cls, value: Any) -> Any:
        return {"enabled": value} if isinstance(value, bool) else value

    @pydantic.field_validator("schedule")
    @classmethod
    def _cron(cls, value: str | None) -> str | None:
        return None if value is None else check_cron(value)


class ProbeDefaults(StrictModel):
    """The probes: a small CronJob per GPU pool that asks for one accelerator, checks it and reports how long it
    waited, so a pool that cannot scale up (or hands out a broken card) is found before a benchmark needs it."""

    schedule: str = pydantic.Field(
        default=DEFAULT_PROBE_SCHEDULE,
        description="Cron schedule (UTC) of every pool's probe; each run may start a node.",
    )
    scale_up_alert_after: str = pydantic.Field(
        default=DEFAULT_PROBE_SCALE_UP_ALERT,
        pattern=DURATION_PATTERN,
        description="ProbeSlowScaleUp fires when a probe waited longer than this for its accelerator.",
    )

    @pydantic.field_validator("schedule")
    @classmethod
    def _cron(cls, value: str) -> str:
        return check_cron(value)
