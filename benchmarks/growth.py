"""How a benchmark's time grows with the fleet: a least-squares line over the sizes measured, its R^2 and the
exponent of a log-log fit (1.0 linear, 2.0 quadratic)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any


def _fit(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float, float]:
    """Least squares ``y = a + b x``: (a, b, r squared)."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    syy = sum((y - my) ** 2 for y in ys)
    b = sxy / sxx if sxx else 0.0
    a = my - b * mx
    r2 = (sxy * sxy) / (sxx * syy) if sxx and syy else 1.0
    return a, b, r2


def linearity(results: Sequence[Any], key: str = "plan_seconds") -> dict[str, Any]:
    """How ``key`` (a time) grows with the number of resources over the sizes measured.

    ``exponent`` is the slope of log(time) over log(resources): 1.0 is linear, 2.0 quadratic.
    ``per_resource_growth`` is time per resource at the largest size over the smallest (1.0 = linear).
    """
    if len(results) < 2:
        return {"sizes": len(results), "note": "one size only: nothing to fit"}
    xs = [float(r.resources) for r in results]
    ys = [float(getattr(r, key)) for r in results]
    a, b, r2 = _fit(xs, ys)
    _, exponent, _ = _fit([math.log(x) for x in xs], [math.log(y) for y in ys])
    small, large = min(results, key=lambda r: r.resources), max(results, key=lambda r: r.resources)
    growth = (getattr(large, key) / large.resources) / (getattr(small, key) / small.resources)
    return {
        "sizes": len(results),
        "intercept_seconds": a,
        "seconds_per_resource": b,
        "r_squared": r2,
        "exponent": exponent,
        "per_resource_growth": growth,
    }
