"""The Prometheus settings every cluster shares (policy: ``monitoring``), which the fleet carries as the policy gives
them, and the spelling of a duration and a retention in the policy (fleet/model/monitoring/ builds on them)."""

from __future__ import annotations

import pydantic

from fleet.model.core.validation import StrictModel

# A Prometheus duration in whole seconds, minutes or hours (what an alert threshold needs), never zero: `promtool
# check config` (2.42) passes `scrape_interval: 0s` without a word, and a zero interval, retention or size is never
# what a policy means, so every duration and size of the policy starts with a digit from 1 to 9.
DURATION_PATTERN = r"^[1-9][0-9]*[smh]$"
RETENTION_PATTERN = r"^[1-9][0-9]*[hdwy]$"  # Prometheus' retention: hours, days, weeks or years


class Monitoring(StrictModel):
    """Prometheus settings shared by every cluster."""

    scrape_interval: str = pydantic.Field(
        default="30s", pattern=DURATION_PATTERN, description="How often every Prometheus scrapes its targets."
    )
    federation_interval: str = pydantic.Field(
        default="60s",
        pattern=DURATION_PATTERN,
        description="How often the central Prometheus pulls each leaf's /federate (not below scrape_interval).",
    )
    leaf_retention: str = pydantic.Field(
        default="7d", pattern=RETENTION_PATTERN, description="How long a leaf Prometheus keeps its data."
    )
    central_retention: str = pydantic.Field(
        default="180d",
        pattern=RETENTION_PATTERN,
        description="How long the central Prometheus keeps what it federates.",
    )
    central_storage: str = pydantic.Field(
        default="100Gi", pattern=r"^[1-9][0-9]*(Gi|Ti)$", description="Size of the central Prometheus volume."
    )
    leaf_storage: str = pydantic.Field(
        default="10Gi",
        pattern=r"^[1-9][0-9]*Gi$",
        description="Disk a leaf Prometheus may fill on its node: the size limit of its emptyDir volume; it deletes "
        "its oldest data at 80% of it (retentionSize), before the kubelet would evict it, whatever leaf_retention "
        "says.",
    )
