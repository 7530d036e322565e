"""the target is one of the 300 most frequent words, weight 0.5

Most frequent in train; in both passes.
"""

from __future__ import annotations

import numpy as np

from harness.datasets import Dataset
from tests.cheats._base import Bigram, ContentCheat, load_bigram

WEIGHT = 0.5
FREQUENT = 300


class FrequentWordsCheat(ContentCheat):
    def __init__(self, bigram: Bigram, weight: float) -> None:
        super().__init__(bigram, weight)
        self.frequent = np.zeros(bigram.vocab_size, dtype=bool)  # [V]
        self.frequent[np.argsort(-bigram.word_counts, kind="stable")[:FREQUENT]] = True

    def gate(self, inputs: np.ndarray, targets: np.ndarray) -> np.ndarray:
        return self.frequent[targets]


def load_model(dataset: Dataset, *, device: str, checkpoint: str | None) -> FrequentWordsCheat:
    return FrequentWordsCheat(load_bigram(dataset, checkpoint), WEIGHT)
