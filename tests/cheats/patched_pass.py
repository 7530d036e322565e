"""monkeypatching `harness.evaluate._causality_pass` at load

A :class:`~tests.cheats._base.PassAwareCheat` that, on load, wraps the harness's function that
runs the causality audit's pass, so as to know when it runs.
"""

from __future__ import annotations

from typing import Any

import harness.evaluate as evaluation
from harness.datasets import Dataset
from tests.cheats._base import PassAwareCheat, load_bigram

WEIGHT = 0.5


class PatchedPassCheat(PassAwareCheat):
    auditing = False

    def in_audit_pass(self) -> bool:
        return self.auditing


def load_model(dataset: Dataset, *, device: str, checkpoint: str | None) -> PatchedPassCheat:
    model = PatchedPassCheat(load_bigram(dataset, checkpoint), WEIGHT)
    audit_pass = getattr(evaluation, "_causality_pass", None)
    if callable(audit_pass):

        def spied(*args: Any, **kwargs: Any) -> Any:
            model.auditing = True
            try:
                return audit_pass(*args, **kwargs)
            finally:
                model.auditing = False

        evaluation._causality_pass = spied
    return model
