"""The one rule for "a pod asking for n cards fits this pool", used by the checker (on the policy's settings) and by
the resolved pools (``GpuPool.fits``, which places benchmarks)."""

from __future__ import annotations


def more_than_a_machine(accelerators: int, per_machine: int | None) -> bool:
    """A pod asks for more cards than one machine of the pool holds (``per_machine`` None: the machines are a site's,
    unknown, so it may fit)."""
    return per_machine is not None and accelerators > per_machine


def more_than_a_slice(accelerators: int, time_sliced: bool) -> bool:
    """A pod asks for more than one card of a time-sliced pool: it gets one slice at most (the device plugin and GKE
    refuse more)."""
    return time_sliced and accelerators > 1


def fits(accelerators: int, per_machine: int | None, time_sliced: bool) -> bool:
    """A pod asking for ``accelerators`` cards fits a pool of ``per_machine`` cards per machine."""
    return not (more_than_a_machine(accelerators, per_machine) or more_than_a_slice(accelerators, time_sliced))
