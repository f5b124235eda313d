"""Cron schedules of CronJobs (benchmarks that repeat, pool probes): checked as Kubernetes reads them, and their
longest gap between runs.

Kubernetes parses a CronJob's schedule with robfig/cron's standard parser: five fields (minute, hour, day of month,
month, day of week), each a list of numbers, ranges, steps, ``*`` or ``?``, with month and weekday names
(kubernetes/kubernetes pkg/controller/cronjob uses github.com/robfig/cron/v3 ParseStandard; cron/v3 parser.go
getField, getRange and the month and dow name tables). croniter, which computes the runs here, also accepts ``L``,
``W``, ``#`` and ``H``, which Kubernetes refuses, so the syntax is checked first. robfig/cron's descriptors
(``@hourly``, ``@daily``... and ``@every 6h``) are Kubernetes' too.

The longest gap tells how long "no run" is normal, which the probe alerts need. Minute and hour do not depend on the
date in cron, so every day a schedule runs, it runs at the same times: the longest gap is the longest between two
runs of one day, or between the last run of a day and the first of the next day it runs.
"""

from __future__ import annotations

import difflib
import functools
import itertools
import re
from datetime import date, timedelta

from croniter import croniter

# Days looked at from a fixed start (2028-01-01, a Saturday): eight years, two leap days among them (a schedule of
# February 29 runs every four years), so the result never depends on the day the plan runs.
_START = date(2028, 1, 1)
_DAYS = 8 * 365 + 2
_NAMES = {
    *("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"),
    *("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"),
}
_TOKEN = re.compile(r"^(\*|\?|[0-9]+|[A-Za-z]{3})$")


# robfig/cron's descriptors, which Kubernetes accepts too (ParseStandard takes them: cron/v3 parser.go
# parseDescriptor), as the five fields they stand for; "@every <duration>" runs at a fixed interval instead.
DESCRIPTORS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
EVERY = "@every "
# A Go duration as time.ParseDuration reads it, in the units a schedule needs: 1h30m, 90m, 45s
_DURATION = re.compile(r"^(?:(\d+(?:\.\d+)?)(h|m|s))+$")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(h|m|s)")
_UNIT_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0}
EXAMPLES = "such as '0 3 * * 1' (minute hour day-of-month month day-of-week), '@daily' or '@every 6h'"


def _every_seconds(expression: str) -> float:
    """The interval of ``@every <duration>`` in seconds (``ValueError`` if it is no positive Go duration)."""
    duration = expression[len(EVERY) :].strip()
    if not _DURATION.match(duration):
        raise ValueError(f"{expression!r}: {duration!r} is not a duration such as 90m, 6h or 1h30m")
    seconds = sum(float(n) * _UNIT_SECONDS[unit] for n, unit in _DURATION_PART.findall(duration))
    if seconds < 1:
        raise ValueError(f"{expression!r}: the interval must be at least 1s")
    return seconds


def _check_syntax(expression: str) -> None:
    if expression.startswith("@"):
        close = difflib.get_close_matches(expression, [*DESCRIPTORS, EVERY.strip()], n=1)
        near = f" (did you mean {close[0]!r}?)" if close else ""
        raise ValueError(
            f"{expression!r} is not one of Kubernetes' descriptors{near}: {', '.join(DESCRIPTORS)} or @every <duration>"
        )
    fields = expression.split()
    if len(fields) != 5:
        raise ValueError(f"{expression!r} is not a cron schedule {EXAMPLES}")
    for field in fields:
        for part in field.split(","):
            base, slash, step = part.partition("/")
            tokens = base.split("-")
            bad = (slash and not step.isdigit()) or len(tokens) > 2
            bad = bad or any(not _TOKEN.match(t) or (t.isalpha() and t.upper() not in _NAMES) for t in tokens)
            if bad:
                raise ValueError(
                    f"{expression!r}: {part!r} is not Kubernetes' CronJob syntax (numbers, month and weekday names, "
                    "*, ?, ranges a-b, lists a,b and steps /n; no L, W, # or H)"
                )
    if not croniter.is_valid(expression):
        raise ValueError(f"{expression!r} is not a valid cron schedule (minute hour day-of-month month day-of-week)")


def check_cron(expression: str) -> str:
    """``expression`` if it is a five-field cron schedule Kubernetes accepts and that runs at least once in eight
    years; ``ValueError`` saying why not."""
    longest_gap_seconds(expression)
    return expression


def _values(field: list[int | str], everything: range) -> list[int]:
    return list(everything) if field == ["*"] else [int(v) for v in field]


def _runs_on(day: date, doms: list[int | str], months: list[int | str], dows: list[int | str]) -> bool:
    """Whether a schedule with these expanded fields runs on ``day``: the month matches, and the day of month and
    the weekday both match when either is ``*`` (or ``?``), either one otherwise (robfig/cron v3 dayMatches)."""
    if months != ["*"] and day.month not in months:
        return False
    dom = doms == ["*"] or day.day in doms
    dow = dows == ["*"] or (day.weekday() + 1) % 7 in dows  # cron: 0 is Sunday
    return dom and dow if "*" in (doms[0], dows[0]) else dom or dow


@functools.cache
def longest_gap_seconds(expression: str) -> float:
    """The longest time between two consecutive runs of the schedule, in seconds (``ValueError`` for a schedule
    Kubernetes would refuse, or one that never runs)."""
    if expression.startswith(EVERY):
        return _every_seconds(expression)
    if expression in DESCRIPTORS:
        return longest_gap_seconds(DESCRIPTORS[expression])
    _check_syntax(expression)
    (minutes, hours, doms, months, dows), _ = croniter.expand(expression)
    times = sorted(h * 3600 + m * 60 for h in _values(hours, range(24)) for m in _values(minutes, range(60)))
    first, last = times[0], times[-1]
    days = [d for d in range(_DAYS) if _runs_on(_START + timedelta(days=d), doms, months, dows)]
    if not days:
        raise ValueError(f"{expression!r} never runs (no such day in eight years)")
    longest = max((b - a for a, b in itertools.pairwise(times)), default=0)
    for a, b in itertools.pairwise(days):  # from the last run of a day to the first of the next day it runs
        longest = max(longest, (b - a) * 86400 + first - last)
    return float(longest)
