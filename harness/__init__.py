"""Trustworthy evaluation of word-level language models on PTB, WikiText and builder corpora."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("wikitext-toolkit")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0+unknown"

from harness.plugin import Chunk, ChunkScores, LanguageModel, ModelUnavailable  # noqa: E402

__all__ = ["Chunk", "ChunkScores", "LanguageModel", "ModelUnavailable", "__version__"]
