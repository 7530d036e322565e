"""The leaderboard tables embedded in a README, between per-dataset markers.

A README carries a dataset's markdown table between ``<!-- leaderboard:DATASET:begin -->`` and
``<!-- leaderboard:DATASET:end -->``; ``python -m leaderboard regenerate --readme README.md``
refreshes the text between them with :func:`update_readme`.
"""

from __future__ import annotations

import re
from pathlib import Path

from leaderboard.table import LeaderboardTable, to_markdown
from wikitext_toolkit_core.files import write_atomically

README_BEGIN = "<!-- leaderboard:{dataset}:begin -->"
README_END = "<!-- leaderboard:{dataset}:end -->"


def update_readme(readme: Path, tables: dict[str, LeaderboardTable]) -> tuple[list[str], list[str]]:
    """Replace the text between ``<!-- leaderboard:DATASET:begin -->`` and ``...:end -->``
    markers with that dataset's markdown table; datasets without markers are left out. Returns
    the datasets whose table changed and those already up to date; the file is rewritten only
    when something changed."""
    text = original = readme.read_text(encoding="utf-8")
    updated: list[str] = []
    unchanged: list[str] = []
    for dataset, table in tables.items():
        begin, end = README_BEGIN.format(dataset=dataset), README_END.format(dataset=dataset)
        pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
        match = pattern.search(text)
        if match:
            refreshed = f"{text[: match.start()]}{begin}\n{to_markdown(table)}{end}{text[match.end() :]}"
            (updated if refreshed != text else unchanged).append(dataset)
            text = refreshed
    if text != original:
        write_atomically(readme, text)
    return updated, unchanged
