"""``python -m fleet``: see fleet/tools/cli.py (Ctrl-C, even while the modules load, ends it with one line and
exit status 130: fleet/tools/interrupts.py)."""

import sys

try:
    from fleet.tools.cli import main
except KeyboardInterrupt:
    from fleet.tools.interrupts import leave

    leave("fleet")

sys.exit(main())
