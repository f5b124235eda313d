"""Reading a GPU pool back out of the inputs the engine received, whatever the cloud's spelling.

The plan table and the tests use this to show and check what would really be sent to each cloud; each cloud's reader
is its rules' ``read_pool`` (fleet/model/clouds/).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from fleet.model.clouds import pool_readers
from fleet.model.clouds.rules import PoolView, Registration

POOL_TYPES: dict[str, Callable[[Registration], PoolView]] = {
    pool_type: rules.read_pool for pool_type, rules in pool_readers().items()
}


def pool_views(registrations: Sequence[Registration]) -> list[PoolView]:
    """Every node pool (system and GPU) among the registrations, in their order (the plan lists them by URN)."""
    return [POOL_TYPES[r.type](r) for r in registrations if r.type in POOL_TYPES]
