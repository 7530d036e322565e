"""``python -m leaderboard``: the same as the console script ``lm-leaderboard``."""

import sys

from leaderboard.cli import main

if __name__ == "__main__":
    sys.exit(main())
