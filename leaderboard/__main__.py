"""``python -m leaderboard``: the same as the console script ``lm-leaderboard``."""

import sys

from wikitext_toolkit_core.startup import leaderboard

if __name__ == "__main__":
    sys.exit(leaderboard())
