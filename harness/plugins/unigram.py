"""Add-one (Laplace) unigram model estimated on the train split: ``p(w) = (c(w) + 1) / (N + V)``.

A stateless reference plugin that proves the protocol and the arithmetic.
"""

from __future__ import annotations

import numpy as np

from harness.datasets import Dataset
from harness.plugin import Chunk, ChunkScores, PluginError


class UnigramModel:
    """Context-free model; ``log_probs`` is float64 ``[V]``."""

    def __init__(self, log_probs: np.ndarray) -> None:
        self.log_probs = log_probs
        self.num_parameters = len(log_probs)

    def reset(self, batch_size: int) -> None:
        pass

    def score(self, chunk: Chunk) -> ChunkScores:
        distributions = None
        if chunk.distribution_mask is not None:
            rows = int(chunk.distribution_mask.sum())
            distributions = np.broadcast_to(self.log_probs, (rows, len(self.log_probs)))
        return ChunkScores(self.log_probs[chunk.targets], distributions)


def load_model(dataset: Dataset, *, device: str, checkpoint: str | None) -> UnigramModel:
    if checkpoint is not None:
        raise PluginError("the unigram model is estimated on load; it takes no --checkpoint")
    train = dataset.tokens("train").ids
    vocab_size = len(dataset.vocab)
    counts = np.bincount(train, minlength=vocab_size)
    return UnigramModel(np.log((counts + 1.0) / (len(train) + vocab_size)))
