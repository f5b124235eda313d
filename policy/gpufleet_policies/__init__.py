"""CrossGuard policies of the gpu-fleet: what every stack must look like, checked against policy/fleet.yaml.

The same policies run under ``pulumi preview --policy-pack policy`` and, offline, under ``python -m fleet plan``
(fleet/tools/engine/analyzer.py speaks the analyzer protocol to this pack). One module a concern, each policy's name,
description and level on its check; each module's tests are tests/policy/test_<module>.py.
"""

# Importing a module registers its policies; this order is the pack's order (and its findings').
# isort: off
from . import gpu_pools  # noqa: F401
from . import benchmark_pods  # noqa: F401
from . import pod_security  # noqa: F401
from . import image_digests  # noqa: F401
from . import namespaces  # noqa: F401
from . import benchmark_set  # noqa: F401
from . import clusters  # noqa: F401
from . import ci_runners  # noqa: F401
from . import sweeps  # noqa: F401
from . import sharing  # noqa: F401
from . import preview_access  # noqa: F401
from . import endpoints  # noqa: F401
from . import queues  # noqa: F401
from . import benchmark_queue  # noqa: F401

# isort: on
from .registry import POLICIES

__all__ = ["POLICIES"]
