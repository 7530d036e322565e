"""The honest base: an add-one bigram counted on the train split, no cheat."""

from __future__ import annotations

from harness.datasets import Dataset
from tests.cheats._base import BigramModel, load_bigram


def load_model(dataset: Dataset, *, device: str, checkpoint: str | None) -> BigramModel:
    return BigramModel(load_bigram(dataset, checkpoint))
