"""Exact streaming perplexity.

The ``N`` tokens of a split are predicted exactly once each, whatever the batch size ``B`` and
chunk length ``T``: the prediction sequence (inputs ``<eos>, x_1 .. x_{N-1}``, targets
``x_1 .. x_N``) is cut into ``B`` contiguous streams whose lengths differ by at most one, the
streams are laid side by side and cut into chunks of ``T`` positions, and the ragged ends are
padded and masked. Nothing is trimmed. Log-probabilities are summed in float64.

With ``B = 1`` (the papers' test protocol) every prediction sees the whole preceding text; with
``B > 1`` each stream after the first starts without the text before it.

Two audits guard the number: the probability audit (full distributions at a few positions sum to
1 and agree with the reported target scores) and the causality audit (no log-probability depends
on the token it predicts or on a later one; :func:`causality_audit`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import sys
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
from tqdm import tqdm

from harness.files import DatasetError
from harness.plugin import Chunk, ChunkScores, LanguageModel, ModelUnavailable, PluginError

#: Largest positive log-probability accepted (rounding in a model's log-softmax).
MAX_LOG_PROB = 1e-6
#: Tolerance of the audit: |sum of probabilities - 1| and |log p(target) - reported|.
AUDIT_TOLERANCE = 1e-4
#: Causality audit: candidate values tried for each audited position's target (the real token
#: and others), and the positions scored before and after it in each run.
CAUSALITY_CANDIDATES = 4
CAUSALITY_CONTEXT = 7
CAUSALITY_LOOKAHEAD = 8
#: The causality audit's default tolerance for a model whose scores come back as tensors on an
#: accelerator, where kernels may reduce in another order from one run to the next (on the CPU,
#: a causal model's scores are exactly reproducible: the default there is 0).
ACCELERATOR_CAUSALITY_TOLERANCE = 1e-4


@dataclasses.dataclass(frozen=True)
class Audit:
    """What the probability audit checked.

    Attributes:
        requested: positions at which the full distribution was asked for.
        checked: positions whose distribution was checked (0 when the model gives none).
        max_sum_error: largest ``|sum_w p(w) - 1|`` seen.
        max_target_error: largest ``|log p(target) from the distribution - reported|`` seen.
    """

    requested: int
    checked: int
    max_sum_error: float
    max_target_error: float

    @property
    def passed(self) -> bool:
        """Whether at least one distribution was checked (a failed check raises instead)."""
        return self.checked > 0

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "passed": self.passed}


@dataclasses.dataclass(frozen=True)
class CausalityAudit:
    """What the causality audit checked (see :func:`causality_audit`).

    Attributes:
        points: positions audited (0: the audit was off).
        candidates: values tried for each audited position's target, one run each.
        compared: ``"targets and distributions"`` (target log-probabilities before each point and
            the distribution at it), ``"targets"`` (a model that gives no distributions), or
            ``"none"`` when off.
        max_difference: largest change, across the runs of one point, of a log-probability at or
            before the point (0 for a causal model on CPU).
        max_candidate_mass: largest sum, over a point's candidates, of the probability the model
            gave each candidate in its own run (at most 1 for a causal model).
        tolerance: largest ``max_difference`` accepted.
        seconds: wall-clock time of the audit.
    """

    points: int
    candidates: int
    compared: str
    max_difference: float
    max_candidate_mass: float
    tolerance: float
    seconds: float

    @property
    def passed(self) -> bool:
        """Whether any position was audited (a failed check raises instead)."""
        return self.points > 0

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "passed": self.passed}


#: The record of a causality audit that was switched off.
CAUSALITY_OFF = CausalityAudit(0, 0, "none", 0.0, 0.0, 0.0, 0.0)


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """Result of scoring one token stream.

    Attributes:
        tokens: predictions counted (``N``).
        total_log_prob: float64 sum of the ``N`` target log-probabilities (nats).
        seconds: wall-clock time of the scoring loop (the causality audit not included).
        audit: the probability audit.
        causality: the causality audit.
        token_log_probs: float64 ``[N]`` in stream order, when asked for.
    """

    tokens: int
    total_log_prob: float
    seconds: float
    audit: Audit
    causality: CausalityAudit = CAUSALITY_OFF
    token_log_probs: np.ndarray | None = None

    @property
    def nll(self) -> float:
        """Mean negative log-likelihood, nats per token."""
        return -self.total_log_prob / self.tokens

    @property
    def perplexity(self) -> float:
        return math.exp(self.nll)

    @property
    def bits_per_token(self) -> float:
        return self.nll / math.log(2)


def stream_bounds(num_tokens: int, batch_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Starts and lengths (int64 ``[B]``) of ``B`` contiguous streams covering ``N`` positions;
    lengths differ by at most one, longest first."""
    if batch_size < 1:
        raise ValueError(f"batch size must be >= 1, got {batch_size}")
    base, extra = divmod(num_tokens, batch_size)
    lengths = np.full(batch_size, base, dtype=np.int64)
    lengths[:extra] += 1
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    return starts, lengths


@dataclasses.dataclass(frozen=True)
class StreamGrid:
    """A split laid out as ``B`` contiguous streams side by side (``W`` = longest stream).

    Attributes:
        starts: int64 ``[B]``, index of each stream's first prediction in the split.
        inputs, targets: int64 ``[B, W]``; padding holds ``<eos>``.
        mask: bool ``[B, W]``, true at real predictions.
    """

    starts: np.ndarray
    inputs: np.ndarray
    targets: np.ndarray
    mask: np.ndarray

    def chunks(self, bptt: int) -> list[tuple[int, Chunk]]:
        """The grid cut into chunks of ``T = bptt`` columns, in order: each chunk's first column
        and its inputs, targets and mask (views ``[B, T]`` of the grid's arrays; the last chunk
        may be narrower; no ``distribution_mask``)."""
        if bptt < 1:
            raise ValueError(f"bptt must be >= 1, got {bptt}")
        return [
            (
                begin,
                Chunk(
                    self.inputs[:, begin : begin + bptt],
                    self.targets[:, begin : begin + bptt],
                    self.mask[:, begin : begin + bptt],
                ),
            )
            for begin in range(0, self.mask.shape[1], bptt)
        ]


def stream_grid(ids: np.ndarray, *, eos_id: int, batch_size: int) -> StreamGrid:
    """Lay out the predictions of ``ids`` (int64 ``[N]``, inputs ``<eos>, x_1 .. x_{N-1}``)."""
    num_tokens = len(ids)
    if num_tokens == 0:
        raise ValueError("nothing to evaluate: the token stream is empty")
    starts, lengths = stream_bounds(num_tokens, batch_size)
    offsets = np.arange(int(lengths.max()))
    mask = offsets[None, :] < lengths[:, None]
    positions = np.where(mask, starts[:, None] + offsets[None, :], 0)
    inputs = np.concatenate([[eos_id], ids[:-1]]).astype(np.int64)[positions]
    targets = np.asarray(ids, dtype=np.int64)[positions]
    inputs[~mask] = eos_id
    targets[~mask] = eos_id
    return StreamGrid(starts, inputs, targets, mask)


def _as_float64(values: Any, what: str) -> np.ndarray:
    """``values`` (an array-like or a torch tensor on any device) as a float64 array; a
    :class:`PluginError` for anything that is not real numbers (complex ones included, whose
    imaginary part a conversion would silently drop)."""
    if hasattr(values, "detach"):  # a torch tensor, on any device
        if values.is_complex():
            raise PluginError(f"{what} is a complex tensor ({values.dtype}), not real log-probabilities")
        values = values.detach().to("cpu").double().numpy()
    try:
        array = np.asarray(values)
        if np.iscomplexobj(array):
            raise PluginError(f"{what} is a complex array ({array.dtype}), not real log-probabilities")
        return array.astype(np.float64, copy=False)
    except (TypeError, ValueError):
        raise PluginError(f"{what} is a {type(values).__name__}, not an array of floats") from None


@contextlib.contextmanager
def _naming_the_plugin(name: str, call: str) -> Iterator[None]:
    """Around a call into the plugin: when it raises (anything but a one-line user error of its
    own), a line on stderr names the plugin and ``call`` (the call and the tokens it was given)
    before the traceback goes on up."""
    try:
        yield
    except (PluginError, ModelUnavailable, DatasetError):
        raise
    except Exception:
        tqdm.write(f"{name}: {call} raised an exception (traceback below)", file=sys.stderr)
        raise


def _chunk_place(starts: np.ndarray, begin: int, end: int) -> str:
    """Where the chunk of columns ``begin .. end - 1`` of the streams starting at ``starts``
    (int64 ``[B]``) lies in the split, for messages."""
    if len(starts) == 1:
        return f"tokens {begin}..{end - 1}"
    firsts = ", ".join(str(int(start) + begin) for start in starts[:3])
    return f"positions {begin}..{end - 1} of {len(starts)} streams (starting at tokens {firsts}" + (
        ", ...)" if len(starts) > 3 else ")"
    )


def _log_sum_exp(rows: np.ndarray) -> np.ndarray:
    peak = rows.max(axis=1, keepdims=True)
    peak = np.where(np.isfinite(peak), peak, 0.0)
    return (peak + np.log(np.exp(rows - peak).sum(axis=1, keepdims=True)))[:, 0]


def evaluate(
    model: LanguageModel,
    ids: np.ndarray,
    *,
    eos_id: int,
    vocab_size: int,
    batch_size: int = 1,
    bptt: int = 100,
    audit_positions: int = 8,
    causality_points: int = 4,
    causality_tolerance: float | None = None,
    keep_token_log_probs: bool = False,
    name: str = "model",
    progress: bool = True,
) -> Evaluation:
    """Score every token of ``ids`` (integer ``[N]``) with ``model``, after its causality audit.

    Args:
        eos_id: id of ``<eos>``, the implicit input before the first token.
        vocab_size: ``V``, the width the audited distributions must have.
        batch_size: ``B``, the number of contiguous streams scored side by side.
        bptt: ``T``, positions per chunk.
        audit_positions: positions (drawn with a fixed seed) at which the full distribution is
            requested and checked; 0 disables the audit.
        causality_points: positions of the causality audit (:func:`causality_audit`), run
            before the evaluation; 0 disables it.
        causality_tolerance: largest change of a log-probability the causality audit accepts;
            None: 0, or :data:`ACCELERATOR_CAUSALITY_TOLERANCE` for scores on an accelerator.
        keep_token_log_probs: also return the ``N`` log-probabilities in stream order.
        name: the plugin's name, for error messages.
        progress: show progress bars (on stderr, when it is a terminal).

    Raises:
        PluginError: the model returned the wrong shape, a NaN/inf or positive log-probability,
            or a distribution that is unnormalized or disagrees with the reported target score;
            or it failed the causality audit.
    """
    if bptt < 1:
        raise ValueError(f"bptt must be >= 1, got {bptt}")
    num_tokens = len(ids)
    causality = CAUSALITY_OFF
    if causality_points > 0 and num_tokens > 0:
        causality = causality_audit(
            model,
            ids,
            eos_id=eos_id,
            vocab_size=vocab_size,
            bptt=bptt,
            points=causality_points,
            tolerance=causality_tolerance,
            name=name,
            progress=progress,
        )
    grid = stream_grid(ids, eos_id=eos_id, batch_size=batch_size)
    starts, mask = grid.starts, grid.mask

    audit_mask = np.zeros_like(mask)
    if audit_positions > 0:
        chosen = np.random.default_rng(0).choice(num_tokens, min(audit_positions, num_tokens), replace=False)
        stream = np.searchsorted(starts, chosen, side="right") - 1
        audit_mask[stream, chosen - starts[stream]] = True

    log_prob_grid = np.zeros(mask.shape) if keep_token_log_probs else None
    total = 0.0
    counted = 0
    requested = checked = 0
    max_sum_error = max_target_error = 0.0
    with _naming_the_plugin(name, f"reset({batch_size})"):
        model.reset(batch_size)
    began = time.perf_counter()
    with tqdm(
        total=num_tokens,
        unit="tok",
        unit_scale=True,
        desc=name,
        leave=False,
        disable=None if progress else True,
    ) as bar:
        for begin, view in grid.chunks(bptt):
            end = begin + view.mask.shape[1]
            chunk_mask = view.mask
            wanted = audit_mask[:, begin:end]
            # Copies: whatever a plugin does to its chunk cannot reach the harness's arrays.
            chunk = Chunk(
                view.inputs.copy(),
                view.targets.copy(),
                chunk_mask.copy(),
                wanted.copy() if wanted.any() else None,
            )
            with _naming_the_plugin(name, f"score() on {_chunk_place(starts, begin, end)}"):
                scores = model.score(chunk)
            if not isinstance(scores, ChunkScores):
                raise PluginError(
                    f"{name}: score() returned {type(scores).__name__}, not harness.ChunkScores"
                )
            log_probs = _as_float64(scores.target_log_probs, f"{name}: target_log_probs")
            if log_probs.shape != chunk_mask.shape:
                raise PluginError(
                    f"{name}: target_log_probs has shape {log_probs.shape}, "
                    f"expected {chunk_mask.shape} (batch, positions)"
                )
            _check_log_probs(log_probs, chunk_mask, starts, begin, name)
            total += float(log_probs[chunk_mask].sum())
            counted += int(chunk_mask.sum())
            if log_prob_grid is not None:
                log_prob_grid[:, begin:end] = log_probs
            if chunk.distribution_mask is not None:
                requested += int(wanted.sum())
                if scores.distributions is None:
                    audit_mask[:] = False  # the model gives no distributions: stop asking
                else:
                    sum_error, target_error = _audit(
                        scores.distributions, wanted, log_probs, view.targets, vocab_size, name
                    )
                    checked += int(wanted.sum())
                    max_sum_error = max(max_sum_error, sum_error)
                    max_target_error = max(max_target_error, target_error)
            bar.update(int(chunk_mask.sum()))
    seconds = time.perf_counter() - began
    assert counted == num_tokens, (counted, num_tokens)
    return Evaluation(
        tokens=counted,
        total_log_prob=total,
        seconds=seconds,
        audit=Audit(requested, checked, max_sum_error, max_target_error),
        causality=causality,
        token_log_probs=log_prob_grid[mask] if log_prob_grid is not None else None,
    )


def _check_log_probs(
    log_probs: np.ndarray, mask: np.ndarray, starts: np.ndarray, begin: int, name: str
) -> None:
    bad = mask & ~(np.isfinite(log_probs) & (log_probs <= MAX_LOG_PROB))
    if bad.any():
        stream, offset = (int(i) for i in np.argwhere(bad)[0])
        value = log_probs[stream, offset]
        token = int(starts[stream]) + begin + offset
        what = "a positive log-probability" if value > 0 else "an invalid log-probability"
        raise PluginError(
            f"{name}: {what} ({value}) for token {token} (stream {stream}, position {begin + offset})"
        )


def _audit(
    distributions: Any,
    wanted: np.ndarray,
    log_probs: np.ndarray,
    targets: np.ndarray,
    vocab_size: int,
    name: str,
) -> tuple[float, float]:
    rows = _as_float64(distributions, f"{name}: distributions")
    expected_shape = (int(wanted.sum()), vocab_size)
    if rows.shape != expected_shape:
        raise PluginError(
            f"{name}: distributions has shape {rows.shape}, expected "
            f"{expected_shape} (requested positions, vocabulary)"
        )
    if np.isnan(rows).any() or np.isposinf(rows).any():
        raise PluginError(f"{name}: a full distribution contains NaN or +inf")
    sums = np.exp(_log_sum_exp(rows))
    sum_errors = np.abs(sums - 1.0)
    if sum_errors.max() > AUDIT_TOLERANCE:
        raise PluginError(
            f"{name}: unnormalized distribution: probabilities sum to "
            f"{sums[sum_errors.argmax()]:.6g}, not 1 (tolerance {AUDIT_TOLERANCE})"
        )
    where = np.nonzero(wanted)
    from_rows = rows[np.arange(len(rows)), targets[where]]
    target_errors = np.abs(from_rows - log_probs[where])
    if target_errors.max() > AUDIT_TOLERANCE:
        worst = int(target_errors.argmax())
        raise PluginError(
            f"{name}: reported log p(target) = {log_probs[where][worst]:.6g} but its "
            f"full distribution gives {from_rows[worst]:.6g}"
        )
    return float(sum_errors.max()), float(target_errors.max())


def causality_audit(
    model: LanguageModel,
    ids: np.ndarray,
    *,
    eos_id: int,
    vocab_size: int,
    bptt: int,
    points: int,
    tolerance: float | None = None,
    name: str = "model",
    candidates: int = CAUSALITY_CANDIDATES,
    context: int = CAUSALITY_CONTEXT,
    lookahead: int = CAUSALITY_LOOKAHEAD,
    seed: int = 1,
    progress: bool = True,
) -> CausalityAudit:
    """Check that no log-probability depends on the token it predicts or on any later token.

    At ``points`` seeded positions ``p`` of ``ids`` (integer ``[N]``; position ``p`` predicts
    ``ids[p]``), a stretch of ``S = min(p, context) + 1 + lookahead`` positions, from up to
    ``context`` positions before ``p`` to ``lookahead`` after it, is scored as one stream from
    ``model.reset(1)``, in chunks of ``bptt``, once per candidate: run ``r`` has the real text up
    to ``p``'s input, candidate ``c_r`` as ``p``'s target (``c_0 = ids[p]``, the others drawn at
    random) and so as the next input, then random tokens (new ones each run). A causal model
    sees the same inputs at every position up to ``p`` in every run, so (within ``tolerance``;
    None: 0, or :data:`ACCELERATOR_CAUSALITY_TOLERANCE` when the scores come back as tensors on
    an accelerator):

    - its target log-probabilities before ``p`` are the same in every run;
    - its distribution at ``p`` (``[V]``, asked for in runs 0 and 1 only: for an n-gram model
      a full row costs as much as ``V`` target scores) is the same in both, when it gives one;
    - the probabilities it gives the candidates at ``p``, one per run, sum to at most 1.

    A progress bar (one step per run; on stderr, when it is a terminal, and ``progress``) shows
    from the first call on.

    Raises:
        PluginError: one line naming the position where the model failed, and for the last
            check what the evidence says (reading the target, or unnormalised scores).
    """
    began = time.perf_counter()
    num_tokens = len(ids)
    candidates = min(candidates, vocab_size)
    rng = np.random.default_rng(seed)
    chosen = np.sort(rng.choice(num_tokens, min(points, num_tokens), replace=False))
    compared = "targets and distributions"
    max_difference = max_candidate_mass = 0.0
    with tqdm(
        total=len(chosen) * candidates,
        unit="run",
        desc=f"{name} causality audit",
        leave=False,
        disable=None if progress else True,
    ) as bar:
        for point in (int(p) for p in chosen):
            start = max(0, point - context)
            before = point - start  # positions of the stretch before the point
            # The text the stretch reads: the input of its first position, then its targets.
            first_input = eos_id if start == 0 else int(ids[start - 1])
            prefix = np.concatenate([[first_input], ids[start:point]]).astype(np.int64)
            others = rng.choice(vocab_size - 1, candidates - 1, replace=False)
            others += others >= ids[point]  # skip the real token
            values = np.concatenate([[ids[point]], others]).astype(np.int64)
            score = functools.partial(
                _score_stretch,
                model,
                point_index=before,
                start=start,
                bptt=bptt,
                vocab_size=vocab_size,
                name=name,
            )
            runs = []
            for run, value in enumerate(values):
                text = np.concatenate([prefix, [value], rng.integers(0, vocab_size, lookahead)])
                runs.append(score(text, want_row=run < 2))
                bar.update()
            if tolerance is None:
                on_accelerator = any(accelerated for *_, accelerated in runs)
                tolerance = ACCELERATOR_CAUSALITY_TOLERANCE if on_accelerator else 0.0
            difference, row = _compare_runs(runs, point=point, start=start, tolerance=tolerance, name=name)
            max_difference = max(max_difference, difference)
            compared = compared if row is not None else "targets"
            candidate_log_probs = np.array([run_targets[before] for run_targets, *_ in runs])  # [candidates]
            mass = float(np.exp(candidate_log_probs).sum())
            max_candidate_mass = max(max_candidate_mass, mass)
            if mass > 1 + AUDIT_TOLERANCE:
                raise PluginError(
                    f"{name}: causality audit failed at token {point}: the probabilities it gives "
                    f"{len(values)} different values of token {point}, each in its own run, sum to "
                    f"{mass:.4g} > 1: {_excess_mass_reason(point, values, candidate_log_probs, row)}"
                )
    return CausalityAudit(
        len(chosen),
        candidates,
        compared,
        max_difference,
        max_candidate_mass,
        tolerance or 0.0,
        time.perf_counter() - began,
    )


def _compare_runs(
    runs: list[tuple[np.ndarray, np.ndarray | None, bool]],
    *,
    point: int,
    start: int,
    tolerance: float,
    name: str,
) -> tuple[float, np.ndarray | None]:
    """The first two checks of :func:`causality_audit` on the runs of one point (each from
    :func:`_score_stretch`, the point at index ``point - start`` of its stretch): the target
    log-probabilities before the point, and the distribution at it in runs 0 and 1, are the same
    within ``tolerance``. Returns the largest change seen and the distribution at the point
    (float64 ``[V]``; None when the model gives none); raises :class:`PluginError` otherwise."""
    before = point - start
    targets = np.stack([run_targets for run_targets, *_ in runs])  # [candidates, S]
    changes = _changes(targets[:1, :before], targets[1:, :before]).max(axis=0, initial=0.0)
    if (changes > tolerance).any():
        where = start + int(np.argmax(changes > tolerance))
        raise PluginError(
            f"{name}: causality audit failed at token {point}: the log-probability of its "
            f"target at token {where} changes (by {changes.max():.3g}) when token {point} "
            "or a later token changes"
        )
    reference_row = runs[0][1]
    other_row = runs[1][1] if len(runs) > 1 else None
    if reference_row is None or other_row is None:
        return float(changes.max(initial=0.0)), None
    change = float(_changes(reference_row, other_row).max())
    if change > tolerance:
        raise PluginError(
            f"{name}: causality audit failed at token {point}: the distribution at token "
            f"{point} changes (by {change:.3g}) when token {point} or a later token changes"
        )
    return max(float(changes.max(initial=0.0)), change), reference_row


def _excess_mass_reason(
    point: int, values: np.ndarray, candidate_log_probs: np.ndarray, row: np.ndarray | None
) -> str:
    """What it means, from what was seen, that the probabilities a model gave the candidate
    targets ``values`` (int ``[C]``) at token ``point``, each in its own run
    (``candidate_log_probs``, float64 ``[C]``), sum to more than 1: it reads the token it
    predicts, or its scores are not normalised, or both. ``row`` is its distribution at the
    point (float64 ``[V]``, the same in the runs that asked for it; None when it gives none),
    which tells them apart: its total mass, and whether it agrees with the candidates' scores."""
    if row is None:
        return (
            "it reads the token it predicts, or its scores are not normalised (it gives no full "
            "distributions, so the audit cannot tell which)"
        )
    row_mass = float(np.exp(_log_sum_exp(row[None, :]))[0])
    unnormalised = abs(row_mass - 1) > AUDIT_TOLERANCE
    reads_target = float(_changes(row[values], candidate_log_probs).max()) > AUDIT_TOLERANCE
    if unnormalised and not reads_target:
        return (
            f"its scores are not normalised: its distribution at token {point} sums to "
            f"{row_mass:.4g}, not 1, and gives each value the score it got in its own run (so "
            "it does not read the token it predicts)"
        )
    if reads_target and not unnormalised:
        return (
            f"it reads the token it predicts: the values' scores differ from its distribution at "
            f"token {point}, which sums to 1 and is the same whatever follows"
        )
    if reads_target:
        return (
            f"it reads the token it predicts (the values' scores differ from its distribution at "
            f"token {point}), and its scores are not normalised (that distribution sums to "
            f"{row_mass:.4g}, not 1)"
        )
    return "it reads the token it predicts, or its scores are not normalised (the audit cannot tell which)"


def _score_stretch(
    model: LanguageModel,
    text: np.ndarray,
    *,
    point_index: int,
    want_row: bool,
    start: int,
    bptt: int,
    vocab_size: int,
    name: str,
) -> tuple[np.ndarray, np.ndarray | None, bool]:
    """Score ``text`` (int64 ``[S + 1]``: inputs ``text[:-1]``, targets ``text[1:]``) as one
    stream from ``reset(1)``; returns the target log-probabilities (float64 ``[S]``), when
    ``want_row`` the distribution at position ``point_index`` (float64 ``[V]``; None when the
    model gives none), and whether the scores came back as tensors on an accelerator. ``start``
    (the stretch's first position in the split) is for messages."""
    length = len(text) - 1
    inputs, targets = text[None, :-1], text[None, 1:]
    wanted = np.zeros((1, length), dtype=bool)
    wanted[0, point_index] = want_row
    log_probs, row, on_accelerator = np.empty(length), None, False
    with _naming_the_plugin(name, f"reset(1) in the causality audit, for token {start + point_index}"):
        model.reset(1)
    for begin in range(0, length, bptt):
        end = min(begin + bptt, length)
        chunk_wanted = wanted[:, begin:end]
        chunk = Chunk(
            inputs[:, begin:end].copy(),
            targets[:, begin:end].copy(),
            np.ones((1, end - begin), dtype=bool),
            chunk_wanted.copy() if chunk_wanted.any() else None,
        )
        place = f"tokens {start + begin}..{start + end - 1} of a made-up stretch"
        with _naming_the_plugin(name, f"score() in the causality audit, on {place}"):
            scores = model.score(chunk)
        if not isinstance(scores, ChunkScores):
            raise PluginError(f"{name}: score() returned {type(scores).__name__}, not harness.ChunkScores")
        device = getattr(scores.target_log_probs, "device", None)  # a torch tensor's
        on_accelerator |= getattr(device, "type", "cpu") != "cpu"
        chunk_log_probs = _as_float64(scores.target_log_probs, f"{name}: target_log_probs")
        if chunk_log_probs.shape != chunk.mask.shape:
            raise PluginError(
                f"{name}: target_log_probs has shape {chunk_log_probs.shape}, "
                f"expected {chunk.mask.shape} (batch, positions)"
            )
        _check_log_probs(chunk_log_probs, chunk.mask, np.zeros(1, dtype=np.int64), start + begin, name)
        log_probs[begin:end] = chunk_log_probs[0]
        if chunk.distribution_mask is not None and scores.distributions is not None:
            rows = _as_float64(scores.distributions, f"{name}: distributions")
            if rows.shape != (1, vocab_size):
                raise PluginError(
                    f"{name}: distributions has shape {rows.shape}, expected "
                    f"{(1, vocab_size)} (requested positions, vocabulary)"
                )
            if np.isnan(rows).any() or np.isposinf(rows).any():
                raise PluginError(f"{name}: a full distribution contains NaN or +inf")
            row = rows[0]
    return log_probs, row, on_accelerator


def _changes(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``|a - b|`` elementwise (broadcast), 0 where equal (infinities included), NaN counted as
    a change."""
    a, b = np.broadcast_arrays(a, b)
    if np.array_equal(a, b):
        return np.zeros(a.shape)
    with np.errstate(invalid="ignore"):
        return np.where(a == b, 0.0, np.nan_to_num(np.abs(a - b), nan=np.inf))
