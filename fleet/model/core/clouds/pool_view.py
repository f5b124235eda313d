"""Reading a GPU pool back out of the inputs the engine received, whatever the cloud's spelling.

The plan table, the policy pack and the tests use this to show and check what would really be sent to each cloud; each
cloud's reader is its rules' ``read_pool`` (fleet/model/core/clouds/), found by the engine type of its node pools.
"""

from __future__ import annotations

from collections.abc import Sequence

from fleet.model.core.clouds import pool_readers
from fleet.model.core.clouds.rules import CloudRules, PoolView, Registration

READERS: dict[str, CloudRules] = pool_readers()


def read_pool(registration: Registration) -> tuple[PoolView, CloudRules] | None:
    """One registration read back as a node pool, with the rules of its cloud; None when it is no node pool."""
    rules = READERS.get(registration.type)
    return None if rules is None else (rules.read_pool(registration), rules)


def pool_views(registrations: Sequence[Registration]) -> list[PoolView]:
    """Every node pool (system and GPU) among the registrations, in their order (the plan lists them by URN)."""
    return [found[0] for r in registrations if (found := read_pool(r)) is not None]
