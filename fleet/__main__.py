"""``python -m fleet``: see fleet/cli.py."""

import sys

from fleet.cli import main

sys.exit(main())
