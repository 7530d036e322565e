"""``python -m harness``: the same as the console script ``lm-harness``."""

import sys

from wikitext_toolkit_core.startup import harness

if __name__ == "__main__":
    sys.exit(harness())
