"""The old name of ``fleet.model.probes.probe_phases``: benchmarks/ import it by this name until their split
(issue 47) moves them to the new one; no other module does (tests/test_layout.py). Importing it gives that module."""

import sys

from fleet.model.probes import probe_phases

sys.modules[__name__] = probe_phases
