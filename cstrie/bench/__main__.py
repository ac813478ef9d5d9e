"""``python -m cstrie.bench`` is ``cstrie bench``."""

import sys

from cstrie.bench import main

sys.exit(main())
