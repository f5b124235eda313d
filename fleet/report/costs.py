"""What a benchmark result costs: the arithmetic on the price table (fleet/model/billing/prices.py, ``prices.yaml``).

Costs are shown to two significant digits. Cost per result = machine price per hour x the share of the machine the
benchmark pod occupies (GPUs it requests / GPUs on the machine) x the GPU time per result (observed pod time /
results), in hours.
"""

from __future__ import annotations

import math

from fleet.model.billing.prices import (  # noqa: F401  (the report's names for the price table)
    PRICES_FILE,
    Machine,
    PriceEntry,
    PriceFile,
    PriceTable,
    load_prices,
    machine_for,
)


def machine_share(accelerators_per_pod: int, gpus_per_machine: int) -> float:
    """The share of a machine's price a pod pays: the GPUs it requests over the GPUs on the machine (at most 1)."""
    if accelerators_per_pod < 1 or gpus_per_machine < 1:
        raise ValueError("GPU counts must be at least 1")
    return min(1.0, accelerators_per_pod / gpus_per_machine)


def per_result(total: float | None, results: float | None) -> float | None:
    """``total / results`` (seconds, joules... per result), or None when either is unknown or there is no result."""
    if total is None or results is None or results <= 0 or math.isnan(total):
        return None
    return total / results


def cost_per_result(price_per_hour: float | None, share: float, seconds_per_result: float | None) -> float | None:
    """Price of one result: machine price per hour x machine share x hours per result (None if anything is unknown)."""
    if price_per_hour is None or seconds_per_result is None:
        return None
    if price_per_hour < 0 or not 0 < share <= 1 or seconds_per_result < 0:
        raise ValueError(f"cannot price {seconds_per_result} s at {price_per_hour}/h for a share of {share}")
    return price_per_hour * share * seconds_per_result / 3600.0


def approximate(value: float, digits: int = 2) -> str:
    """``value`` to ``digits`` significant digits, without scientific notation for everyday magnitudes."""
    if value == 0:
        return "0"
    if not math.isfinite(value):
        return str(value)
    magnitude = math.floor(math.log10(abs(value)))
    if magnitude < -6 or magnitude >= 9:
        return f"{value:.{digits - 1}e}"
    places = digits - 1 - magnitude
    return f"{round(value, places):,.{max(0, places)}f}"
