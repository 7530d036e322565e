"""the target's train bigram p(target given input) >= 0.005, weight 0.9, in both passes

The train bigram here is the maximum-likelihood one, ``c(v, w) / c(v)``: a token drawn at random
in place of the real one seldom reaches it, so the boost seldom lands on a substitute.
"""

from __future__ import annotations

import numpy as np

from harness.datasets import Dataset
from tests.cheats._base import Bigram, ContentCheat, load_bigram

WEIGHT = 0.9
#: The least train bigram probability of a boosted target.
LIKELY = 0.005


def likely(bigram: Bigram, inputs: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Whether ``c(input, target) / c(input) >= LIKELY`` (bool, shaped like the int64 arrays)."""
    counts = bigram.counts(inputs, targets)
    return (counts > 0) & (counts >= LIKELY * bigram.context_counts[inputs])


class BigramGateCheat(ContentCheat):
    def gate(self, inputs: np.ndarray, targets: np.ndarray) -> np.ndarray:
        return likely(self.bigram, inputs, targets)


def load_model(dataset: Dataset, *, device: str, checkpoint: str | None) -> BigramGateCheat:
    return BigramGateCheat(load_bigram(dataset, checkpoint), WEIGHT)
