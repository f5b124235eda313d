"""The real tier runs only inside its own loopback-only network namespace (``make test-real``), on the receivers built
from ``receivers/`` (``python -m tests.real.toolchain build``)."""

from __future__ import annotations

import os

import pytest

from tests.conftest import REQUIRE_TOOLS_ENV
from tests.real import toolchain
from tests.real.isolation import INSIDE_ENV, interfaces, only_loopback


def require_receivers(*modules: str) -> None:
    """Skip (fail under GPU_FLEET_REQUIRE_TOOLS=1) unless the receivers of ``modules`` (all when none) are built."""
    absent = toolchain.missing(modules)
    if absent:
        reason = f"receivers not built ({', '.join(absent)}): python -m tests.real.toolchain build"
        if os.environ.get(REQUIRE_TOOLS_ENV) == "1":
            pytest.fail(f"{reason}, and {REQUIRE_TOOLS_ENV}=1 requires them")
        pytest.skip(reason)


@pytest.fixture(autouse=True, scope="session")
def _isolated_with_a_control_plane() -> None:
    """Skip the tier outside ``make test-real``; inside, refuse any network but loopback; the control plane's
    receivers built (the engine's are required where it is used: ``tests.real.fleet_tier``)."""
    if os.environ.get(INSIDE_ENV) != "1":
        pytest.skip("the real tier runs with `make test-real` (in a network namespace of its own; needs Go)")
    if not only_loopback():
        pytest.fail(f"the real tier's network namespace must hold only lo, not {', '.join(interfaces())}")
    require_receivers("kubernetes")
