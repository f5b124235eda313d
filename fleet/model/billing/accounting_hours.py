"""Hourly card-hours on the central Prometheus: recording rules that integrate the federated accounting records
(fleet/model/billing/accounting.py) over each hour, so the report sums 24 points a series a day instead of stepping
through every minute of its window.

Each hour (the group's ``interval``), at its evaluation instant ``t``, the central records per (billing account,
cluster, cloud, card, pool):

* ``gpufleet:billed_card_hours:1h``, ``gpufleet:used_card_hours:1h``, ``gpufleet:idle_card_hours:1h``: the card-hours
  of the record over ``(t - 1h, t]``, the very integral the report takes, ``sum_over_time(record[<1h>:<step>]) *
  step / 3600`` with one point each whole multiple of the federation interval (``step``) in that hour (the range is
  one millisecond short of the hour: the same points whether a range's start is inclusive, Prometheus 2, or not, 3);
* ``gpufleet:accounting_hour_end``: ``t`` itself, so the report knows which minutes the hourly records cover and
  integrates the rest of its window (its first and last partial hours) exactly.

A rule group's evaluations keep one phase within the hour (prometheus rules/group.go ``EvalTimestamp``: ``offset =
hash % interval``, the same slots after a restart), so consecutive records cover consecutive hours without overlap or
gap, as long as no evaluation is missed (``run``: a missed slot is counted in
``prometheus_rule_group_iterations_missed_total`` and skipped, never evaluated later). docs/accounting.md says what
precision the report keeps.
"""

from __future__ import annotations

from typing import Any

from fleet.model.billing.accounting import BILLED, IDLE, USED

GROUP = "gpufleet-accounting-hours"
HOUR = 3600
HOUR_END = "gpufleet:accounting_hour_end"
HOURLY = {
    BILLED: "gpufleet:billed_card_hours:1h",
    USED: "gpufleet:used_card_hours:1h",
    IDLE: "gpufleet:idle_card_hours:1h",
}
BY = "billing_account, cluster, cloud, gpu, pool"


def supported(step: float) -> bool:
    """Whether hourly records can hold the report's integral at ``step`` seconds: a whole number of steps an hour."""
    return step >= 1 and float(step).is_integer() and HOUR % int(step) == 0


def integral(record: str, span_ms: int, step: float, at: str = "") -> str:
    """Card-hours of ``record`` per (account, cluster, cloud, card, pool): one point each whole multiple of ``step``
    in the ``span_ms`` milliseconds before the evaluation instant (or ``at``, an ``@`` modifier), each standing for
    the step before it."""
    return f"sum by ({BY}) (sum_over_time({record}[{span_ms}ms:{int(step)}s]{at})) * {int(step)} / 3600"


def hourly_rules(step: float) -> dict[str, Any] | None:
    """The central's rule file of hourly card-hours at the records' ``step`` (the federation interval, seconds); None
    when an hour is not a whole number of steps (the report then integrates the raw records)."""
    if not supported(step):
        return None
    hour = HOUR * 1000 - 1  # (t - 1h, t] in both Prometheus 2 and 3
    rules: list[dict[str, Any]] = [
        {"record": hourly, "expr": integral(record, hour, step)} for record, hourly in HOURLY.items()
    ]
    rules.append({"record": HOUR_END, "expr": "vector(time())"})
    return {"groups": [{"name": GROUP, "interval": "1h", "rules": rules}]}
