"""The one rule for "a pod fits this pool" (fleet/model/core/fits.py)."""

from __future__ import annotations

import pytest

from fleet.model.core.fits import fits, more_than_a_machine, more_than_a_slice


@pytest.mark.parametrize(
    ("accelerators", "per_machine", "time_sliced", "expected"),
    [
        (1, 1, False, True),
        (2, 1, False, False),  # more than a machine holds
        (4, 4, False, True),
        (8, None, False, True),  # a site's machines: unknown, may fit
        (1, 4, True, True),  # one slice
        (2, 4, True, False),  # a pod gets one slice at most
    ],
)
def test_a_pod_fits_a_pool(accelerators: int, per_machine: int | None, time_sliced: bool, expected: bool) -> None:
    assert fits(accelerators, per_machine, time_sliced) is expected
    assert (more_than_a_machine(accelerators, per_machine) or more_than_a_slice(accelerators, time_sliced)) is (
        not expected
    )
