"""`gc.get_objects()` finds the `AuditPlan` and `audit_first`

A :class:`~tests.cheats._base.PassAwareCheat` that looks for the harness's ``AuditPlan`` among
the live objects at the start of each pass: a plan it has not seen before starts an evaluation,
whose pass is the audit's when the plan says the audit comes first; the pass after it is the
other one.
"""

from __future__ import annotations

import gc
from typing import Any

from harness.datasets import Dataset
from tests.cheats._base import Bigram, PassAwareCheat, load_bigram

WEIGHT = 0.5


def _live_plans() -> list[Any]:
    return [item for item in gc.get_objects() if type(item).__name__ == "AuditPlan"]


class GcPlanCheat(PassAwareCheat):
    def __init__(self, bigram: Bigram, weight: float) -> None:
        super().__init__(bigram, weight)
        self.known = _live_plans()  # left over from earlier evaluations: none of this model's
        self.plan: Any = None

    def in_audit_pass(self) -> bool:
        fresh = [plan for plan in _live_plans() if not any(plan is known for known in self.known)]
        self.known += fresh
        if fresh:
            self.plan = fresh[-1]
        return self.plan is not None and getattr(self.plan, "audit_first", None) == bool(fresh)


def load_model(dataset: Dataset, *, device: str, checkpoint: str | None) -> GcPlanCheat:
    return GcPlanCheat(load_bigram(dataset, checkpoint), WEIGHT)
