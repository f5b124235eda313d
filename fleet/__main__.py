"""``python -m fleet``: see fleet/tools/cli.py."""

import sys

from fleet.tools.cli import main

sys.exit(main())
