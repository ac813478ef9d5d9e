"""``python -m stress.harness``: see :mod:`stress.harness.cli`."""

import sys

from stress.harness.cli import main

sys.exit(main())
