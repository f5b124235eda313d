"""A stack's program imports its own cloud's SDK and no other cloud's (each in a fresh interpreter, as the real
engine runs one program per stack)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from fleet.model.core.clouds import RULES
from fleet.model.loader import POLICY_FILE, load_fleet
from tests.conftest import ROOT

# each cloud's SDK module, from the package of its cluster's engine type (``azure-native:...`` is pulumi_azure_native)
CLOUD_SDKS = {
    name: "pulumi_" + rules.cluster_type.split(":", 1)[0].replace("-", "_")
    for name, rules in RULES.items()
    if rules.cluster_type
}

PLAN_ONE = """
import json, sys
from fleet.tools.engine.plan import plan_runtime, plan_stack
from fleet.model.loader import POLICY_FILE
with plan_runtime():
    plan_stack(sys.argv[1], POLICY_FILE)
print(json.dumps(sorted(m for m in sys.modules if m.startswith("pulumi_") and "." not in m)))
"""


def _one_stack_per_cloud() -> list[tuple[str, str]]:
    """A stack of each cloud that plans alone: not the central one nor the queues' manager (they read other stacks'
    outputs, which are planned first)."""
    fleet = load_fleet(POLICY_FILE)
    manager = fleet.dispatch.manager if fleet.dispatch else None
    alone = sorted((c.name, c.cloud) for c in fleet.clusters.values() if not c.central and c.name != manager)
    return sorted({cloud: (cloud, name) for name, cloud in reversed(alone)}.values())


def test_every_cloud_names_its_sdk() -> None:
    assert len(CLOUD_SDKS) >= 4 and len(set(CLOUD_SDKS.values())) == len(CLOUD_SDKS)


@pytest.mark.parametrize(("cloud", "stack"), _one_stack_per_cloud())
def test_a_stack_imports_no_other_clouds_sdk(cloud: str, stack: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", PLAN_ONE, stack], cwd=ROOT, capture_output=True, text=True, check=True, timeout=300
    )
    loaded = set(json.loads(done.stdout.splitlines()[-1]))
    others = {sdk for name, sdk in CLOUD_SDKS.items() if name != cloud}
    assert not loaded & others, f"{stack} ({cloud}) imports {sorted(loaded & others)}"
    if cloud in CLOUD_SDKS:
        assert CLOUD_SDKS[cloud] in loaded
