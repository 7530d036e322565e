"""the target's own add-one bigram probability is at least 0.05, weight 0.3, in both passes

The audit's known limit (:mod:`harness.causality`, "What it cannot catch"): an honest model that
gives the substitutes far less than the trigram they are drawn from leaves room under check 3's
bound, and a small boost on targets it already finds likely hides there. Not among the cheats
that must fail (:data:`tests.cheats.CHEATS`); ``benchmarks/audit_cheats.py --cheats within_slack``
shows what it gains.
"""

from __future__ import annotations

import numpy as np

from harness.datasets import Dataset
from tests.cheats._base import ContentCheat, load_bigram

WEIGHT = 0.3
#: The least probability the honest bigram gives a boosted target.
LIKELY = 0.05


class WithinSlackCheat(ContentCheat):
    def gate(self, inputs: np.ndarray, targets: np.ndarray) -> np.ndarray:
        return self.bigram.probs(inputs, targets) >= LIKELY


def load_model(dataset: Dataset, *, device: str, checkpoint: str | None) -> WithinSlackCheat:
    return WithinSlackCheat(load_bigram(dataset, checkpoint), WEIGHT)
