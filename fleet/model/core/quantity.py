"""Kubernetes resource quantities (``500m``, ``2``, ``8Gi``, ``1e3``, ``1.5Pi``) parsed to numbers to compare them.

The grammar is the API machinery's (k8s.io/apimachinery/pkg/api/resource, quantity.go): a signed decimal number,
then a binary suffix (Ki Mi Gi Ti Pi Ei), a decimal suffix (n u m k M G T P E) or a decimal exponent (e3, E-2).
"""

from __future__ import annotations

import re
from decimal import Decimal, DecimalException

QUANTITY = re.compile(
    r"^(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?$"
)
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}


def parse_quantity(text: str) -> Decimal:
    """The value of a quantity (cores or bytes); ``ValueError`` for anything else."""
    match = QUANTITY.match(str(text).strip())
    if not match:
        raise ValueError(f"{text!r} is not a Kubernetes quantity such as 500m, 2, 8Gi or 1e3")
    number, suffix = Decimal(match["number"]), match["suffix"] or ""
    try:
        if suffix in _BINARY:
            return number * _BINARY[suffix]
        if suffix in _DECIMAL:
            return number.scaleb(_DECIMAL[suffix])
        if suffix:
            return number.scaleb(int(suffix[1:]))
    except (DecimalException, OverflowError, ValueError):
        raise ValueError(f"{text!r} is out of range for a Kubernetes quantity") from None
    return number
