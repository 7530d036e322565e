"""reading the real targets from `_scored_passes`' grid (frame locals)

It boosts the real text's token at each position, in both passes: the evaluation's grid, read
from the local ``section`` (the streams being scored, whose ``grid`` is the real text's) of the
harness's ``_score_pass`` on the call stack at ``reset``. At
a substituted position that is not the token shown, so it never boosts a substitute. With no
such frame it boosts the target shown.
"""

from __future__ import annotations

import sys
from types import FrameType

import numpy as np

from harness.datasets import Dataset
from harness.plugin import Chunk
from tests.cheats._base import BigramModel, load_bigram

WEIGHT = 0.5


def _real_targets() -> np.ndarray | None:
    """The evaluation grid's targets (int64 ``[B, W]``), or None without them on the stack."""
    frame: FrameType | None = sys._getframe()
    while frame is not None:
        if frame.f_code.co_name == "_score_pass" and "section" in frame.f_locals:
            return np.asarray(frame.f_locals["section"].grid.targets)
        frame = frame.f_back
    return None


class FrameGridCheat(BigramModel):
    real: np.ndarray | None = None

    def reset(self, batch_size: int) -> None:
        super().reset(batch_size)
        self.real = _real_targets()

    def boosts(self, chunk: Chunk) -> np.ndarray:
        if self.real is None:
            return chunk.targets
        return self.real[:, self.column : self.column + chunk.targets.shape[1]]


def load_model(dataset: Dataset, *, device: str, checkpoint: str | None) -> FrameGridCheat:
    return FrameGridCheat(load_bigram(dataset, checkpoint), WEIGHT)
