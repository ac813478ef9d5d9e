"""``python -m cstrie`` runs the ``cstrie`` command."""

import sys

from cstrie.cli import main

sys.exit(main())
