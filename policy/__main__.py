"""The gpu-fleet policy pack (``pulumi preview --policy-pack policy``); its policies: the gpufleet_policies package."""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
for path in (HERE, HERE.parent):  # the policies module, and the repo root for the `fleet`/`components` packages
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from gpufleet_policies import POLICIES  # noqa: E402
from pulumi_policy import EnforcementLevel, PolicyPack  # noqa: E402

PolicyPack(name="gpu-fleet", policies=POLICIES, enforcement_level=EnforcementLevel.MANDATORY)
