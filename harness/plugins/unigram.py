"""Add-one (Laplace) unigram model estimated on the train split: ``p(w) = (c(w) + 1) / (N + V)``.

A stateless reference plugin that proves the protocol and the arithmetic.
"""

from __future__ import annotations

import numpy as np

from harness.datasets import Dataset
from harness.plugin import Chunk, ChunkScores, PluginError

#: Train ids counted at a time.
COUNT_SLICE = 1 << 24


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
    # In slices: bincount copies its input to int64, and train may be a memory-map of 100M ids.
    counts = np.zeros(vocab_size, dtype=np.int64)
    for begin in range(0, len(train), COUNT_SLICE):
        counts += np.bincount(train[begin : begin + COUNT_SLICE], minlength=vocab_size)
    return UnigramModel(np.log((counts + 1.0) / (len(train) + vocab_size)))
