"""``python -m wikitext_builder``."""

import sys

from wikitext_builder.cli import main

if __name__ == "__main__":
    sys.exit(main())
