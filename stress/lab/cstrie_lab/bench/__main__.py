"""``python -m cstrie_lab.bench`` is ``cstrie bench``."""

import sys

from cstrie_lab.bench import main

sys.exit(main())
