"""Leaderboards from harness result files, the papers' numbers beside ours.

- ``python -m leaderboard build RESULTS --output-dir DIR [--format csv markdown html]``: one
  table per dataset (``ptb``, ``wikitext-2``, ``wikitext-103`` and every builder corpus with
  results), our runs (``kind`` ``reproduced baseline``, ``user model`` or ``subword``; with
  ``--include-unaudited`` also ``unaudited``) merged with the published figures of
  :data:`table.REPORTED_CSV` (``kind`` ``reported``), ranked by test perplexity (see
  :mod:`leaderboard.table`). Each result's figures are recomputed from its per-token
  log-probabilities; one without them is shown unranked (``kind`` ``unverified``), or rejected
  with ``--strict``. Malformed or incompatible files are named on stderr and rejected;
  files that are not results are named and skipped. Contamination reports among the files
  (``harness contamination --result``) add the clean-subset perplexity of the results they fit
  (:mod:`leaderboard.clean_subset`).
- ``python -m leaderboard regenerate``: the project's committed tables from ``results/``.
- ``python -m leaderboard compare A.json B.json``: paired (block) bootstrap of the perplexity
  difference over the saved per-token log-probabilities, each result's protocol named; results of
  two protocols (stream and documents) are refused unless ``--across-protocols``.
- ``python -m leaderboard plot {bars,frequency,gates,curves,zipf} ...``: the figures.
- ``python -m leaderboard site RESULTS --output-dir SITE``: the tables, a page per result,
  significance matrices and figures as a static web site (:mod:`leaderboard.site`).
- ``python -m leaderboard project LOG --reference DONE ...``: where a ``baselines train`` run
  will end, projected from finished runs of the same recipe (:mod:`leaderboard.training_logs`).

``compare`` and the plots of results (``bars``, ``frequency``) refuse, by name, the results that
``build`` would not rank (unaudited or unverified: :func:`records.trust_gap`) unless
``--allow-unaudited``, and then warn on stderr, in ``compare``'s output and in the figure.
"""

from leaderboard.bootstrap import Comparison, paired_bootstrap
from leaderboard.records import Result, ResultError, collect, load_result, load_token_log_probs, run_key
from leaderboard.table import (
    COLUMNS,
    LeaderboardRow,
    LeaderboardTable,
    build_tables,
    load_reported,
    write_tables,
)

__all__ = [
    "COLUMNS",
    "Comparison",
    "LeaderboardRow",
    "LeaderboardTable",
    "Result",
    "ResultError",
    "build_tables",
    "collect",
    "load_reported",
    "load_result",
    "load_token_log_probs",
    "paired_bootstrap",
    "run_key",
    "write_tables",
]
