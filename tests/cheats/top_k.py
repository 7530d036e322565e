"""the target is among the base model's 10 most likely next words given the input, weight 0.5

In both passes. The add-one bigram ranks words as their train counts after the input do; ties go
to the lower id, and a word never seen after the input is none of its likely ones.
"""

from __future__ import annotations

import numpy as np

from harness.datasets import Dataset
from tests.cheats._base import Bigram, ContentCheat, load_bigram

WEIGHT = 0.5
TOP = 10


def top_followers(bigram: Bigram, k: int) -> np.ndarray:
    """int64 ``[V, k]``: the ``k`` words seen most often after each word, -1 past those seen."""
    contexts, words = np.divmod(bigram.pairs, bigram.vocab_size)  # [P] each
    order = np.lexsort((words, -bigram.pair_counts, contexts))
    contexts, words = contexts[order], words[order]
    rank = np.arange(len(order)) - np.searchsorted(contexts, contexts)  # [P], within its context
    top = np.full((bigram.vocab_size, k), -1)
    kept = rank < k
    top[contexts[kept], rank[kept]] = words[kept]
    return top


class TopKCheat(ContentCheat):
    def __init__(self, bigram: Bigram, weight: float) -> None:
        super().__init__(bigram, weight)
        self.top = top_followers(bigram, TOP)

    def gate(self, inputs: np.ndarray, targets: np.ndarray) -> np.ndarray:
        return (self.top[inputs] == targets[..., None]).any(axis=-1)


def load_model(dataset: Dataset, *, device: str, checkpoint: str | None) -> TopKCheat:
    return TopKCheat(load_bigram(dataset, checkpoint), WEIGHT)
