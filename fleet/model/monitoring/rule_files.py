"""Prometheus rule files kept as YAML beside the code (fleet/model/monitoring/rules/), with ``${name}`` placeholders
filled in.

A rule file is data: the alert and recording rules, their expressions and their texts read as Prometheus will see
them. What depends on the fleet (a duration, a threshold, the benchmark series) is a ``${name}`` placeholder that
the code reading the file fills; ``{{ ... }}`` and ``$labels``/``$value`` are Prometheus' own alert templates and
are left alone.
"""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

RULES_DIR = Path(__file__).resolve().parent / "rules"
_PLACEHOLDER = re.compile(r"\$\{(\w+)\}")


@functools.cache
def _read(name: str) -> dict[str, Any]:
    data = yaml.safe_load((RULES_DIR / name).read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not isinstance(data.get("groups"), list):
        raise ValueError(f"{RULES_DIR / name}: a rule file is a mapping with a list of groups")
    return data


def rule_file(name: str) -> dict[str, Any]:
    """The rule file ``name`` of fleet/model/rules as read, placeholders unfilled (a copy: change it freely)."""
    return copy.deepcopy(_read(name))


def placeholders(obj: Any) -> set[str]:
    """The ``${name}`` placeholders in every string of ``obj``."""
    if isinstance(obj, str):
        return set(_PLACEHOLDER.findall(obj))
    if isinstance(obj, Mapping):
        return set().union(*(placeholders(v) for v in obj.values())) if obj else set()
    if isinstance(obj, list):
        return set().union(*(placeholders(v) for v in obj)) if obj else set()
    return set()


def _substitute(obj: Any, values: Mapping[str, str]) -> Any:
    if isinstance(obj, str):
        return _PLACEHOLDER.sub(lambda m: values[m.group(1)], obj)
    if isinstance(obj, Mapping):
        return {k: _substitute(v, values) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_substitute(v, values) for v in obj]
    return obj


def fill(rules: dict[str, Any], values: Mapping[str, str], source: str) -> dict[str, Any]:
    """``rules`` with every ``${name}`` replaced by ``values[name]``.

    ``ValueError`` naming ``source`` when a placeholder has no value or a value fills no placeholder: both mean the
    file and the code reading it no longer agree.
    """
    wanted = placeholders(rules)
    missing, unused = sorted(wanted - values.keys()), sorted(values.keys() - wanted)
    if missing or unused:
        raise ValueError(f"{source}: placeholders without a value {missing}, values without a placeholder {unused}")
    return _substitute(rules, values)
