"""The checks of the policy's ``monitoring`` section that its shape cannot say."""

from __future__ import annotations

from fleet.model.core import pod_contract
from fleet.model.core.monitoring import Monitoring
from fleet.model.monitoring.prometheus import duration_seconds


def monitoring_problems(monitoring: Monitoring) -> list[tuple[str, str]]:
    """A pod's last samples must reach the central before the pod ends: the central federates each leaf every
    federation_interval, and a benchmark or probe pod lingers LINGER_SECONDS after its last line. Each problem as
    (key of the section, message)."""
    problems: list[tuple[str, str]] = []
    interval = duration_seconds(monitoring.federation_interval)
    scrape = monitoring.scrape_interval
    if interval < duration_seconds(scrape):
        problems.append(
            (
                "federation_interval",
                f"{monitoring.federation_interval} is below the scrape_interval {scrape}: federating more "
                f"often than the leaves scrape fetches the same samples again; use {scrape} or more, such as "
                "federation_interval: 60s with scrape_interval: 30s",
            )
        )
    if interval >= pod_contract.LINGER_SECONDS:
        problems.append(
            (
                "federation_interval",
                f"{monitoring.federation_interval} is not below the {pod_contract.LINGER_SECONDS} s a "
                "benchmark or probe pod stays up after its result: the central could miss the result; use 60s or less",
            )
        )
    return problems
