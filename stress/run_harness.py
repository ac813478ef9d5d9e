"""Thin entry point: ``python stress/run_harness.py [options]`` = ``python -m stress.harness``."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from stress.harness.cli import main

if __name__ == "__main__":
    sys.exit(main())
