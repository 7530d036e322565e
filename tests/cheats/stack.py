"""the stack holds `_causality_pass` (`sys._getframe`)

A :class:`~tests.cheats._base.PassAwareCheat` that takes a pass for the causality audit's when
a frame of the call stack runs a function of that name.
"""

from __future__ import annotations

import sys
from types import FrameType

from harness.datasets import Dataset
from tests.cheats._base import PassAwareCheat, load_bigram

WEIGHT = 0.5


class StackCheat(PassAwareCheat):
    def in_audit_pass(self) -> bool:
        frame: FrameType | None = sys._getframe()
        while frame is not None:
            if frame.f_code.co_name == "_causality_pass":
                return True
            frame = frame.f_back
        return False


def load_model(dataset: Dataset, *, device: str, checkpoint: str | None) -> StackCheat:
    return StackCheat(load_bigram(dataset, checkpoint), WEIGHT)
