"""Trustworthy evaluation of word-level language models on PTB, WikiText and builder corpora."""

from core import __version__
from harness.api import SplitResult, evaluate_model
from harness.plugin import Chunk, ChunkScores, LanguageModel, ModelUnavailable

__all__ = [
    "Chunk",
    "ChunkScores",
    "LanguageModel",
    "ModelUnavailable",
    "SplitResult",
    "__version__",
    "evaluate_model",
]
