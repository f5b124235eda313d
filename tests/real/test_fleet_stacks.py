"""Every stack of the shipped fleet under the real Pulumi CLI and Kubernetes provider, on hollow control planes
(tests/real/fleet_tier.py): a preview with the policy pack, run by the CLI's own analyzer host."""

from __future__ import annotations

import pytest

from fleet.model.loader import load_fleet
from tests.real.conftest import require_receivers
from tests.real.fleet_tier import POLICY_PACK, FleetTier, stack_order

FLEET = load_fleet()
ORDER = stack_order(FLEET)


@pytest.fixture(scope="module")
def tier(tmp_path_factory):
    """The shipped fleet's stacks on their hollow clusters; every process stopped at the end."""
    require_receivers()
    fleet_tier = FleetTier(FLEET, tmp_path_factory.mktemp("tier"))
    try:
        yield fleet_tier
    finally:
        fleet_tier.stop()


@pytest.mark.parametrize("name", ORDER)
def test_the_real_preview_with_the_policy_pack_passes(tier, name):
    on = tier.on_hollow(name)
    output: list[str] = []
    result = on.stack.preview(policy_packs=[str(POLICY_PACK)], on_output=output.append, color="never")
    text = "".join(output)
    assert "mandatory" not in text.lower(), text
    assert result.change_summary.get("create", 0) > 0, text
