"""CI jobs per card: what the fleet's GitLab runners (components/kubernetes/runners.py) did in the report window.

Each runner exports its own counters (gitlab-runner commands/builds_helper.go, helpers/prometheus/
failures_collector.go); the leaf's PodMonitor labels them with the runner's card (``gpu``), the leaf's external
labels add ``cluster`` and ``cloud``, and federation brings the totals and the duration histogram's sum and count.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fleet.report.queries import Window, card_key

BY = "cluster, cloud, gpu"


@dataclass(frozen=True)
class RunnerRow:
    """One card's CI jobs in the window (None: the runner reported no such series)."""

    cluster: str
    cloud: str
    gpu: str
    jobs: float
    failed: float | None
    mean_seconds: float | None

    @property
    def failed_share(self) -> float | None:
        """Failed jobs per job."""
        return self.failed / self.jobs if self.failed is not None and self.jobs else None


def runner_queries(window: Window) -> dict[str, str]:
    """The instant queries at the window's end: jobs, failed jobs and mean job duration per card."""
    r = window.range
    return {
        "jobs": f"sum by ({BY}) (increase(gitlab_runner_jobs_total[{r}]))",
        "failed": f"sum by ({BY}) (increase(gitlab_runner_failed_jobs_total[{r}]))",
        "mean_seconds": (
            f"sum by ({BY}) (increase(gitlab_runner_job_duration_seconds_sum[{r}]))"
            f" / sum by ({BY}) (increase(gitlab_runner_job_duration_seconds_count[{r}]))"
        ),
    }


def runner_rows(results: Mapping[str, list[dict[str, Any]]]) -> list[RunnerRow]:
    """One row per card that started a CI job in the window, from the answers to :func:`runner_queries`."""
    values = {
        name: {card_key(s["metric"]): float(s["value"][1]) for s in results.get(name, [])}
        for name in ("jobs", "failed", "mean_seconds")
    }
    return [
        RunnerRow(*card, jobs=jobs, failed=values["failed"].get(card), mean_seconds=values["mean_seconds"].get(card))
        for card, jobs in sorted(values["jobs"].items())
        if jobs > 0
    ]
