"""Trustworthy evaluation of word-level language models on PTB, WikiText and builder corpora."""

from typing import Any

from harness.plugin import Chunk, ChunkScores, LanguageModel, ModelUnavailable, StreamScorer
from wikitext_toolkit_core import __version__

__all__ = [
    "Chunk",
    "ChunkScores",
    "LanguageModel",
    "ModelUnavailable",
    "SplitResult",
    "StreamScorer",
    "__version__",
    "evaluate_model",
]

#: Exported from :mod:`harness.api`, imported on first use: ``import harness`` (a plugin's import,
#: the contamination check) stays free of the evaluator.
_FROM_API = ("SplitResult", "evaluate_model")


def __getattr__(name: str) -> Any:
    if name in _FROM_API:
        from harness import api

        return getattr(api, name)
    raise AttributeError(f"module 'harness' has no attribute {name!r}")
