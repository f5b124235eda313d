"""Cron schedules of CronJobs (benchmarks that repeat, pool probes): checked, and their longest gap between runs.

croniter parses the expressions: the same five-field syntax as Kubernetes CronJobs (minute, hour, day of month,
month, day of week), with ranges, steps and names. The longest gap tells how long "no run" is normal, which the
probe alerts need.
"""

from __future__ import annotations

import functools
from datetime import UTC, datetime

from croniter import croniter

# Gaps are measured over one leap year from a fixed start (2028-01-01, a Saturday), so the result never depends on
# the day the plan runs; at most this many runs are stepped through (a schedule every minute repeats far sooner).
_START = datetime(2028, 1, 1, tzinfo=UTC)
_HORIZON_SECONDS = 366 * 86400.0
_MAX_RUNS = 2000


def check_cron(expression: str) -> str:
    """``expression`` if it is a five-field cron schedule Kubernetes accepts; ``ValueError`` saying why not."""
    if len(expression.split()) != 5:
        raise ValueError(f"{expression!r} is not a 5-field cron schedule such as '0 3 * * 1'")
    if not croniter.is_valid(expression):
        raise ValueError(f"{expression!r} is not a valid cron schedule (minute hour day-of-month month day-of-week)")
    return expression


@functools.cache
def longest_gap_seconds(expression: str) -> float:
    """The longest time between two consecutive runs of the schedule, in seconds, over the runs of a year (a
    schedule that runs less often gives the gap to its next run)."""
    runs = croniter(check_cron(expression), _START)
    longest, now = 0.0, runs.get_next(float)
    for _ in range(_MAX_RUNS):
        if now - _START.timestamp() > _HORIZON_SECONDS:
            break
        previous, now = now, runs.get_next(float)
        longest = max(longest, now - previous)
    return longest
