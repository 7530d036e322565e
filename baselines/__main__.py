"""``python -m baselines``: the same as the console script ``lm-baselines``."""

import sys

from core.startup import baselines

if __name__ == "__main__":
    sys.exit(baselines())
