"""The logs ``python -m baselines train`` writes (:mod:`wikitext_toolkit_core.training_log`): read
(:func:`load_training_log`), joined along a warm-started path (:func:`cut_training_log`,
:func:`join_training_logs`), and projected to where the run will end (:func:`project_run`).
``python -m leaderboard plot curves`` draws them; ``python -m leaderboard project`` projects them.

How :func:`project_run` projects a run's best validation perplexity:

1. **Its plateau.** The validations at the ends of the epochs trained at the run's first learning
   rate, from epoch :data:`FIRST_FITTED_EPOCH` on (the first epoch's warm-up, and a sampled-softmax
   phase, lie off the curve), are fitted with ``l(e) = l_inf + b exp(-c e)``: ``l`` the
   log-perplexity at the end of epoch ``e``; ``c`` by a grid search, ``l_inf`` and ``b`` by least
   squares for each ``c``. ``exp(l_inf)`` is where the curve levels off at that rate.
2. **The rest of the schedule, from finished runs.** A reference run of the same recipe that has
   finished its schedule is fitted the same way on the epochs it shares with the run: those at
   the first learning rate in both, up to ``k``, the run's last fitted epoch, or the reference's
   last epoch at its first rate if that comes earlier (the run's plateau is then fitted on those
   epochs too). The ratio of the reference's best validation perplexity to that plateau is what
   its later epochs gave it, the halvings of the learning rate included. The run's plateau on the
   same epochs times that ratio is one projection per reference; their range is the answer.
3. **The error to expect.** With two or more references, each is projected from each other in the
   same way, on the epochs the two share, and compared with its real best (:attr:`Projection.backtest`).

The method assumes the run follows the references' shape: the same recipe (learning rate,
halving rule, batch and BPTT), so that the epochs after ``k`` take it as far below its plateau
as they took them. Epochs of a different length (another dataset) weaken the assumption; the
backtest does not see that.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from wikitext_toolkit_core.training_log import EpochEndRecord, MidEpochRecord, read_training_log

#: The first epoch whose validation the plateau fit uses.
FIRST_FITTED_EPOCH = 2
#: The fewest epochs a fit takes (three parameters and one degree of freedom).
MIN_FITTED_EPOCHS = 4
#: The grid of the fit's rate ``c`` (per epoch). A best rate at either end of it means that the
#: curve shows no plateau yet (nearly straight) or has already reached one.
RATES = np.geomspace(0.01, 3.0, 800)


def load_training_log(path: str | Path) -> pd.DataFrame:
    """A ``baselines train`` log (:mod:`wikitext_toolkit_core.training_log`) as columns ``epoch``,
    ``step`` (the step of a validation mid-epoch, else None), ``epochs`` (epochs trained up to the
    record, a fraction for a validation mid-epoch), ``minutes`` (training time up to the record,
    validation excluded), ``valid_ppl``, ``learning_rate``, ``partial`` (a validation mid-epoch)
    and ``device`` (where the record's training ran; None in logs older than that field).

    Raises:
        ValueError: a path that is no regular file, a line that is not a training-log record
            (naming the file and the line), or a log without records.
    """
    records = read_training_log(path)
    if not records:
        raise ValueError(f"{path}: no training-log records")
    rows, finished_seconds = [], 0.0
    for record in records:
        if isinstance(record, EpochEndRecord):
            seconds = finished_seconds = record.total_seconds
        else:
            seconds = finished_seconds + record.seconds
        rows.append(
            {
                "epoch": record.epoch,
                "step": record.step if isinstance(record, MidEpochRecord) else None,
                "epochs": record.epochs,
                "minutes": seconds / 60,
                "valid_ppl": record.valid_ppl,
                "learning_rate": record.learning_rate,
                "partial": record.partial,
                "device": record.device,
            }
        )
    return pd.DataFrame(rows)


def cut_training_log(frame: pd.DataFrame, epoch: int, step: int | None, name: str) -> pd.DataFrame:
    """The records of a :func:`load_training_log` frame up to its validation at the end of
    ``epoch`` (``step`` None) or at ``step`` of it, the point whose weights a later run started
    from; ``name`` (the log) is for the error when the log has no such validation."""
    same_step = frame["step"].isna() if step is None else frame["step"] == step
    at = frame.index[(frame["epoch"] == epoch) & same_step]
    if at.empty:
        where = f"the end of epoch {epoch}" if step is None else f"epoch {epoch} step {step}"
        raise ValueError(f"{name}: no validation at {where} to cut the log at")
    return frame.loc[: at[0]]


def join_training_logs(frames: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """One curve from the logs of runs that each started from the last weights of the run before
    (``--init-from``, after :func:`cut_training_log`): each log's ``epochs`` and ``minutes`` are
    counted on from the previous log's last record, so that the x axis is the time of the whole
    path."""
    joined = []
    epochs = minutes = 0.0
    for frame in frames:
        frame = frame.assign(epochs=frame["epochs"] + epochs, minutes=frame["minutes"] + minutes)
        epochs, minutes = frame["epochs"].iloc[-1], frame["minutes"].iloc[-1]
        joined.append(frame)
    return pd.concat(joined, ignore_index=True)


# ---- projection ----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class PlateauFit:
    """``l(e) = l_inf + b exp(-c e)`` fitted to a run's log-perplexities at the ends of ``epochs``.

    Attributes:
        epochs: the epochs fitted (at the run's first learning rate, from :data:`FIRST_FITTED_EPOCH`),
            counted as the frame's ``epochs`` (on from the first log along a warm-started path).
        learning_rate: that first learning rate.
        plateau: ``exp(l_inf)``, the perplexity the curve levels off at.
        rate: ``c``, per epoch.
        rms_error: the root mean square of the fit's residuals (log-perplexity; 0.01 is 1%).
    """

    epochs: tuple[float, ...]
    learning_rate: float
    plateau: float
    rate: float
    rms_error: float


def epoch_ends(frame: pd.DataFrame) -> pd.DataFrame:
    """The validations at the ends of epochs (the last one of each epoch, should a resumed run
    have logged one twice), in epoch order."""
    ends = frame[~frame["partial"].astype(bool)]
    return ends.drop_duplicates("epochs", keep="last").sort_values("epochs")


def fit_plateau(frame: pd.DataFrame, name: str, last_epoch: float | None = None) -> PlateauFit:
    """The plateau fit of a :func:`load_training_log` frame (see the module docstring), on its
    epochs at the first learning rate from :data:`FIRST_FITTED_EPOCH` up to ``last_epoch`` (None:
    all of them).

    Raises:
        ValueError: fewer than :data:`MIN_FITTED_EPOCHS` such epochs, or a curve with no plateau
            the fit can place (its best rate at an end of :data:`RATES`); ``name`` names the log.
    """
    ends = epoch_ends(frame)
    first_rate = float(frame["learning_rate"].iloc[0])
    fitted = ends[(ends["learning_rate"] == first_rate) & (ends["epochs"] >= FIRST_FITTED_EPOCH)]
    if last_epoch is not None:
        fitted = fitted[fitted["epochs"] <= last_epoch]
    epochs = fitted["epochs"].to_numpy(dtype=float)
    if len(epochs) < MIN_FITTED_EPOCHS:
        upto = "" if last_epoch is None else f" up to epoch {last_epoch:g}"
        raise ValueError(
            f"{name}: {len(epochs)} epoch(s) at its first learning rate {first_rate:g} from epoch "
            f"{FIRST_FITTED_EPOCH}{upto}; the plateau fit needs at least {MIN_FITTED_EPOCHS}"
        )
    losses = np.log(fitted["valid_ppl"].to_numpy(dtype=float))
    errors, _, scales = _least_squares(RATES, epochs, losses)
    errors = np.where(scales > 0, errors, np.inf)
    index = int(np.argmin(errors))
    if not np.isfinite(errors[index]) or index in (0, len(RATES) - 1):
        raise ValueError(
            f"{name}: its curve over epochs {epochs[0]:g}-{epochs[-1]:g} shows no plateau the "
            "fit can place (no falling exponential fits it, or its rate sits at the grid's edge)"
        )
    rate = _refine(float(RATES[index - 1]), float(RATES[index + 1]), epochs, losses)
    (error,), (level,), _ = _least_squares(np.array([rate]), epochs, losses)
    return PlateauFit(
        epochs=tuple(float(epoch) for epoch in epochs),
        learning_rate=first_rate,
        plateau=math.exp(float(level)),
        rate=rate,
        rms_error=math.sqrt(float(error) / len(epochs)),
    )


def _least_squares(rates: np.ndarray, epochs: np.ndarray, losses: np.ndarray) -> tuple[np.ndarray, ...]:
    """``(squared error, l_inf, b)``, each ``[R]``, of the least-squares fits of
    ``l_inf + b exp(-rate e)`` to ``losses`` ``[N]`` at ``epochs`` ``[N]``, one per rate of
    ``rates`` ``[R]`` (a straight-line fit in ``exp(-rate e)``)."""
    features = np.exp(-np.outer(rates, epochs))  # [R, N]
    centred = features - features.mean(axis=1, keepdims=True)
    scale = centred @ (losses - losses.mean()) / np.maximum((centred**2).sum(axis=1), 1e-300)
    level = losses.mean() - scale * features.mean(axis=1)
    residuals = losses - level[:, None] - scale[:, None] * features
    return (residuals**2).sum(axis=1), level, scale


def _refine(low: float, high: float, epochs: np.ndarray, losses: np.ndarray, steps: int = 60) -> float:
    """The rate in ``[low, high]`` (around the grid's best) of least squared error, by a
    golden-section search."""
    ratio = (math.sqrt(5) - 1) / 2
    for _ in range(steps):
        left, right = high - ratio * (high - low), low + ratio * (high - low)
        left_error, right_error = _least_squares(np.array([left, right]), epochs, losses)[0]
        if left_error <= right_error:
            high = right
        else:
            low = left
    return (low + high) / 2


@dataclasses.dataclass(frozen=True)
class ReferenceProjection:
    """What one finished reference run says about the run.

    Attributes:
        name: the reference.
        best: its best validation perplexity (any record, mid-epoch ones included).
        best_epoch: the epochs it had trained at that record.
        fit: its plateau fit on the epochs it shares with the run (see the module docstring).
        run_fit: the run's plateau fit on the same epochs.
        projection: ``run_fit.plateau`` times ``best / fit.plateau``.
    """

    name: str
    best: float
    best_epoch: float
    fit: PlateauFit
    run_fit: PlateauFit
    projection: float

    @property
    def ratio(self) -> float:
        """``best / fit.plateau``: how far the rest of its schedule took it below the plateau."""
        return self.best / self.fit.plateau


@dataclasses.dataclass(frozen=True)
class Backtest:
    """Reference ``target`` projected from reference ``source``: ``projection`` against ``best``."""

    target: str
    source: str
    projection: float
    best: float

    @property
    def error(self) -> float:
        """``projection / best - 1``."""
        return self.projection / self.best - 1


@dataclasses.dataclass(frozen=True)
class Projection:
    """:func:`project_run`'s answer: the run's fit, one projection per reference, the backtests;
    ``epochs_trained`` is how far the run has trained (at its last record)."""

    fit: PlateauFit
    best: float
    epochs_trained: float
    references: tuple[ReferenceProjection, ...]
    backtest: tuple[Backtest, ...]

    @property
    def low(self) -> float:
        return min(reference.projection for reference in self.references)

    @property
    def high(self) -> float:
        return max(reference.projection for reference in self.references)


@dataclasses.dataclass(frozen=True)
class ValidToTest:
    """One model's validation and test perplexity on one dataset, from two harness results: their
    ratio carries a projected best validation perplexity over to the test split."""

    model: str
    dataset: str
    valid: float
    test: float

    @property
    def ratio(self) -> float:
        """``test / valid``."""
        return self.test / self.valid


def last_epoch_at_first_rate(frame: pd.DataFrame, name: str) -> float:
    """The last epoch a finished reference run ended at its first learning rate.

    Raises:
        ValueError: a run that never left its first learning rate (not finished).
    """
    first_rate = frame["learning_rate"].iloc[0]
    ends = epoch_ends(frame)
    later = ends[ends["learning_rate"] != first_rate]
    if later.empty:
        raise ValueError(f"{name}: never left its first learning rate: no finished run to project from")
    return float(ends[ends["epochs"] < later["epochs"].iloc[0]]["epochs"].max())


def project_run(run: pd.DataFrame, name: str, references: Mapping[str, pd.DataFrame]) -> Projection:
    """Project the best validation perplexity of ``run`` (a :func:`load_training_log` frame) from
    finished ``references`` of the same recipe, {name: frame} (the module docstring has the
    method).

    Raises:
        ValueError: no reference, a run or a reference the method cannot use (one line, named).
    """
    if not references:
        raise ValueError("the projection needs at least one finished reference run")
    fit = fit_plateau(run, name)
    frames = {name: run, **references}
    last_epochs = {label: last_epoch_at_first_rate(frame, label) for label, frame in references.items()}
    last_epochs[name] = fit.epochs[-1]
    best_rows = {label: int(frame["valid_ppl"].to_numpy().argmin()) for label, frame in references.items()}
    bests = {label: float(frame["valid_ppl"].iloc[best_rows[label]]) for label, frame in references.items()}

    @functools.cache
    def fit_shared(label: str, other: str) -> PlateauFit:
        """``label``'s plateau on the epochs it shares with ``other`` and the run (those at the
        first learning rate in all three)."""
        return fit_plateau(frames[label], label, min(last_epochs[key] for key in (label, other, name)))

    def scaled(target: str, source: str) -> float:
        """``target``'s plateau times ``source``'s best / plateau, both on the epochs they share."""
        return fit_shared(target, source).plateau * bests[source] / fit_shared(source, target).plateau

    projections = tuple(
        ReferenceProjection(
            label,
            bests[label],
            float(frame["epochs"].iloc[best_rows[label]]),
            fit_shared(label, name),
            fit_shared(name, label),
            scaled(name, label),
        )
        for label, frame in references.items()
    )
    backtest = tuple(
        Backtest(target, source, scaled(target, source), bests[target])
        for target, source in itertools.permutations(references, 2)
    )
    best, trained = float(run["valid_ppl"].min()), float(run["epochs"].max())
    return Projection(fit, best, trained, projections, backtest)


def hours_by_device(frame: pd.DataFrame) -> dict[str, float]:
    """Training hours (validation excluded) of a :func:`load_training_log` frame by the device
    each record's training ran on ("unknown" for logs without the field), each record counting the
    time since the record before."""
    hours: dict[str, float] = {}
    previous = 0.0
    for minutes, device in zip(frame["minutes"], frame["device"], strict=True):
        key = device if isinstance(device, str) else "unknown"  # None, or NaN in a mixed column
        hours[key] = hours.get(key, 0.0) + max(minutes - previous, 0.0) / 60
        previous = max(previous, minutes)
    return hours


def last_epoch_pace(frame: pd.DataFrame) -> tuple[float, str] | None:
    """``(hours, device)`` of the last whole epoch of a :func:`load_training_log` frame trained on
    one device (validation excluded); None when it has none."""
    ends = epoch_ends(frame)
    for previous, current in zip(ends.index[::-1][1:], ends.index[::-1], strict=False):
        if not math.isclose(ends.loc[current, "epochs"] - ends.loc[previous, "epochs"], 1.0):
            continue
        devices = set(frame.loc[previous:current, "device"].iloc[1:])
        device = devices.pop() if len(devices) == 1 else None
        if isinstance(device, str):
            return (frame.loc[current, "minutes"] - frame.loc[previous, "minutes"]) / 60, device
    return None


def _span(values: Sequence[float], spec: str, dash: str = "-") -> str:
    """``low-high`` of ``values`` formatted by ``spec``, or one figure where the two read the same."""
    low, high = format(min(values), spec), format(max(values), spec)
    return low if low == high else f"{low}{dash}{high}"


def _epochs(fit: PlateauFit) -> str:
    """``epochs FIRST-LAST``: the epochs a fit took."""
    return f"epochs {fit.epochs[0]:g}-{fit.epochs[-1]:g}"


def describe_projection(
    projection: Projection,
    name: str,
    hours: Mapping[str, float],
    pace: tuple[float, str] | None,
    valid_to_test: ValidToTest | None = None,
) -> list[str]:
    """The lines ``leaderboard project`` prints; with ``valid_to_test``, the projected best
    validation perplexity carried over to the test split by its ratio as well."""
    fit = projection.fit
    lines = [
        f"{name}: best validation perplexity so far {projection.best:.2f}; plateau at learning rate "
        f"{fit.learning_rate:g} {fit.plateau:.1f} (fitted on {_epochs(fit)}: rate {fit.rate:.3f} per "
        f"epoch, rms error {fit.rms_error:.1%})",
    ]
    for reference in projection.references:
        line = (
            f"  from {reference.name}: best {reference.best:.2f}, its plateau on {_epochs(reference.fit)} "
            f"{reference.fit.plateau:.1f}, best / plateau {reference.ratio:.3f}"
        )
        if reference.run_fit != fit:  # it left its first learning rate before the run's last fitted epoch
            line += f"; the run's plateau on those epochs {reference.run_fit.plateau:.1f}"
        lines.append(f"{line} -> {reference.projection:.1f}")
    projected = [projection.low, projection.high]
    lines.append(f"projected best validation perplexity: {_span(projected, '.1f', ' - ')}")
    if valid_to_test is not None:
        ratio = valid_to_test.ratio
        lines.append(
            f"projected test perplexity: {_span([value * ratio for value in projected], '.1f', ' - ')} "
            f"(x {ratio:.3f}, the test / valid perplexity of {valid_to_test.model} on "
            f"{valid_to_test.dataset}: {valid_to_test.test:.2f} / {valid_to_test.valid:.2f})"
        )
    for test in projection.backtest:
        lines.append(
            f"  backtest: {test.target} from {test.source}: {test.projection:.1f} against its "
            f"{test.best:.2f} ({test.error:+.1%})"
        )
    spent = ", ".join(f"{device} {value:.1f} h" for device, value in sorted(hours.items()))
    lines.append(f"training time so far (validation excluded): {spent}")
    trained = projection.epochs_trained
    left = [max(reference.best_epoch - trained, 0.0) for reference in projection.references]
    remaining = (
        f"the references reached their best at epochs "
        f"{_span([reference.best_epoch for reference in projection.references], '.1f')}; the run has "
        f"trained {trained:.1f}: {_span(left, '.1f')} epochs more"
    )
    if pace is not None:
        each, device = pace
        hours_left = _span([epochs * each for epochs in left], ".0f")
        remaining += (
            f"; at the run's last whole epoch's pace ({each:.2f} h an epoch on {device}), {hours_left} h more"
        )
    lines.append(remaining)
    return lines
