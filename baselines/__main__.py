"""``python -m baselines``: the same as the console script ``lm-baselines``."""

import sys

from baselines.cli import main

if __name__ == "__main__":
    sys.exit(main())
