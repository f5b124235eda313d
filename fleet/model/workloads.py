"""The old name of ``fleet.model.core.workloads``: benchmarks/ import it by this name until their split
(issue 47) moves them to the new one; no other module does (tests/test_layout.py). Importing it gives that module."""

import sys

from fleet.model.core import workloads

sys.modules[__name__] = workloads
