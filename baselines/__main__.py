"""``python -m baselines``: the same as the console script ``lm-baselines``."""

import sys

from wikitext_toolkit_core.startup import baselines

if __name__ == "__main__":
    sys.exit(baselines())
