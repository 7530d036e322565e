"""``python -m wikitext_builder``: the same as the console script ``wikitext-builder``."""

import sys

from wikitext_toolkit_core.startup import builder

if __name__ == "__main__":
    sys.exit(builder())
