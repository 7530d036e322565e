"""``python -m leaderboard``: the same as the console script ``lm-leaderboard``."""

import sys

from core.startup import leaderboard

if __name__ == "__main__":
    sys.exit(leaderboard())
