"""The learning-rate schedule: a pure function of the validation perplexities so far.

The papers' recipe (Merity et al. 2016, after Zaremba et al. 2014): the learning rate starts at
``learning_rate`` and is multiplied by ``decay`` after every epoch whose validation perplexity is
no new best; training ends after ``patience`` such epochs in a row or ``max_epochs`` epochs. A
time-boxed run may anneal from a fixed epoch on as well (``anneal_from``). Since the schedule is
recomputed from the log of epochs, a resumed run follows it exactly.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # types only: the trainer imports this module
    from baselines.training import TrainOptions


@dataclasses.dataclass(frozen=True)
class Schedule:
    """The learning-rate schedule's state after some epochs (see :func:`learning_rate_schedule`)."""

    learning_rate: float
    best_valid: float
    epochs_without_improvement: int
    finished: bool


def learning_rate_schedule(valid_history: list[float], options: TrainOptions) -> Schedule:
    """The schedule after the epochs whose validation perplexities are ``valid_history`` (the
    ``valid_ppl`` of the log's full-epoch records, in order): the rate starts at
    ``options.learning_rate`` and is multiplied by ``options.decay`` after every epoch that is
    not a new best, and, when ``options.anneal_from`` is ``k > 0``, after every epoch from the
    ``k``-th on (a time-boxed run's fixed annealing); training ends after ``options.patience``
    epochs in a row without a new best, or after ``options.max_epochs`` epochs."""
    rate, best, without = options.learning_rate, math.inf, 0
    for epoch, valid in enumerate(valid_history, start=1):
        if valid < best:
            best, without = valid, 0
        else:
            without += 1
        if without or 0 < options.anneal_from <= epoch:
            rate *= options.decay
    finished = without >= options.patience or len(valid_history) >= options.max_epochs
    return Schedule(rate, best, without, finished)


def apply_learning_rate(param_groups: list[dict[str, Any]], learning_rate: float) -> None:
    """Set each optimizer parameter group's rate: ``learning_rate`` times the group's
    ``lr_scale`` (see :func:`baselines.training.parameter_groups`)."""
    for group in param_groups:
        group["lr"] = learning_rate * group["lr_scale"]
