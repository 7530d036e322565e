"""The four tools' entry points, for their console scripts and ``python -m PACKAGE``.

A tool's command line imports its package first (torch for the baselines: seconds); Ctrl-C in
that time is one line and exit status 130, as it is once the tool runs
(:func:`wikitext_toolkit_core.cli.run`), not a traceback from deep inside an import.
"""

from __future__ import annotations

import importlib
import sys

from wikitext_toolkit_core.cli import EXIT_INTERRUPTED


def run_tool(module: str) -> int:
    """Import ``module`` (a tool's ``cli``) and run its ``main()``; returns the exit status."""
    try:
        main = importlib.import_module(module).main
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    return int(main())


def harness() -> int:
    """``lm-harness`` and ``python -m harness``."""
    return run_tool("harness.cli")


def baselines() -> int:
    """``lm-baselines`` and ``python -m baselines``."""
    return run_tool("baselines.cli")


def leaderboard() -> int:
    """``lm-leaderboard`` and ``python -m leaderboard``."""
    return run_tool("leaderboard.cli")


def builder() -> int:
    """``wikitext-builder`` and ``python -m wikitext_builder``."""
    return run_tool("wikitext_builder.cli")
