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
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
from tqdm import tqdm

from core.files import DatasetError
from core.result_schema import MAX_LOG_PROB
from harness.plugin import Chunk, ChunkScores, LanguageModel, ModelUnavailable, PluginError

#: Largest mean negative log-likelihood (nats per token) whose perplexity, ``e^nll``, is a finite
#: float (about 709.78).
MAX_NLL = math.log(sys.float_info.max)
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


def _progress_bar(total: int, *, unit: str, desc: str, progress: bool, unit_scale: bool = False) -> tqdm:
    """A progress bar on stderr, shown when it is a terminal and ``progress``; gone when done."""
    return tqdm(
        total=total,
        unit=unit,
        unit_scale=unit_scale,
        desc=desc,
        leave=False,
        disable=None if progress else True,
    )


def _validated_scores(
    scores: object,
    mask: np.ndarray,
    distribution_mask: np.ndarray | None,
    *,
    vocab_size: int,
    starts: np.ndarray,
    begin: int,
    name: str,
) -> tuple[np.ndarray, np.ndarray | None]:
    """What a plugin's ``score()`` returned for a chunk, checked: a :class:`ChunkScores` whose
    target log-probabilities are real numbers, shaped like the chunk's ``mask`` (bool ``[B, T]``)
    and finite and not positive where it is true; and whose distributions, when asked for (at the
    ``K`` positions of ``distribution_mask``, bool ``[B, T]``; None: none asked for) and given,
    are real numbers shaped ``[K, V]`` with no NaN or +inf.

    Returns the target log-probabilities (float64 ``[B, T]``) and the distributions (float64
    ``[K, V]``; None when none were asked for or given). ``starts`` (int64 ``[B]``, each stream's
    first token in the split) and ``begin`` (the chunk's first column) place it for messages.

    Raises:
        PluginError: one line naming the plugin and what is wrong.
    """
    if not isinstance(scores, ChunkScores):
        raise PluginError(f"{name}: score() returned {type(scores).__name__}, not harness.ChunkScores")
    log_probs = _as_float64(scores.target_log_probs, f"{name}: target_log_probs")
    if log_probs.shape != mask.shape:
        raise PluginError(
            f"{name}: target_log_probs has shape {log_probs.shape}, expected {mask.shape} (batch, positions)"
        )
    _check_log_probs(log_probs, mask, starts, begin, name)
    if distribution_mask is None or scores.distributions is None:
        return log_probs, None
    rows = _as_float64(scores.distributions, f"{name}: distributions")
    expected_shape = (int(distribution_mask.sum()), vocab_size)
    if rows.shape != expected_shape:
        raise PluginError(
            f"{name}: distributions has shape {rows.shape}, expected "
            f"{expected_shape} (requested positions, vocabulary)"
        )
    if np.isnan(rows).any() or np.isposinf(rows).any():
        raise PluginError(f"{name}: a full distribution contains NaN or +inf")
    return log_probs, rows


def _check_log_probs(
    log_probs: np.ndarray, mask: np.ndarray, starts: np.ndarray, begin: int, name: str
) -> None:
    """Raise :class:`PluginError` at the first real position (``mask``, bool ``[B, T]``) whose
    log-probability (``log_probs``, float64 ``[B, T]``) is NaN, infinite or positive."""
    bad = mask & ~(np.isfinite(log_probs) & (log_probs <= MAX_LOG_PROB))
    if bad.any():
        stream, offset = (int(i) for i in np.argwhere(bad)[0])
        value = log_probs[stream, offset]
        token = int(starts[stream]) + begin + offset
        what = "a positive log-probability" if value > 0 else "an invalid log-probability"
        raise PluginError(
            f"{name}: {what} ({value}) for token {token} (stream {stream}, position {begin + offset})"
        )


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
            or it failed the causality audit; or its mean negative log-likelihood is above
            :data:`MAX_NLL`, where the perplexity overflows, or below 0 (log-probabilities
            within :data:`MAX_LOG_PROB` above 0 everywhere: no perplexity is below 1).
    """
    if bptt < 1:
        raise ValueError(f"bptt must be >= 1, got {bptt}")
    causality = CAUSALITY_OFF
    if causality_points > 0 and len(ids) > 0:
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
    tally = _Tally(np.zeros(grid.mask.shape) if keep_token_log_probs else None)
    audit_mask = _audit_mask(grid, audit_positions)
    with _naming_the_plugin(name, f"reset({batch_size})"):
        model.reset(batch_size)
    began = time.perf_counter()
    with _progress_bar(len(ids), unit="tok", desc=name, progress=progress, unit_scale=True) as bar:
        for begin, view in grid.chunks(bptt):
            _score_chunk(model, view, begin, grid.starts, audit_mask, tally, vocab_size=vocab_size, name=name)
            bar.update(int(view.mask.sum()))
    seconds = time.perf_counter() - began
    assert tally.tokens == len(ids), (tally.tokens, len(ids))
    nll = -tally.total_log_prob / tally.tokens
    if nll > MAX_NLL:
        raise PluginError(
            f"{name}: mean negative log-likelihood {nll:.6g} nats per token; its perplexity, e^{nll:.6g}, "
            f"is too large for a float (at most {MAX_NLL:.2f} nats)"
        )
    if nll < 0:
        raise PluginError(
            f"{name}: mean negative log-likelihood {nll:.6g} nats per token, below 0: its "
            "log-probabilities are above 0 on average, so its perplexity would be below 1"
        )
    return Evaluation(
        tokens=tally.tokens,
        total_log_prob=tally.total_log_prob,
        seconds=seconds,
        audit=Audit(tally.requested, tally.checked, tally.max_sum_error, tally.max_target_error),
        causality=causality,
        token_log_probs=tally.log_prob_grid[grid.mask] if tally.log_prob_grid is not None else None,
    )


@dataclasses.dataclass
class _Tally:
    """What the scoring loop of :func:`evaluate` has added up so far.

    Attributes:
        log_prob_grid: float64 ``[B, W]``, the log-probability at each place of the stream grid,
            when the caller keeps them (None otherwise).
        total_log_prob, tokens: the sum of the log-probabilities scored, and their number.
        requested, checked, max_sum_error, max_target_error: the probability audit's figures
            (see :class:`Audit`).
    """

    log_prob_grid: np.ndarray | None
    total_log_prob: float = 0.0
    tokens: int = 0
    requested: int = 0
    checked: int = 0
    max_sum_error: float = 0.0
    max_target_error: float = 0.0


def _audit_mask(grid: StreamGrid, audit_positions: int) -> np.ndarray:
    """Where (bool ``[B, W]``, like ``grid.mask``) the probability audit asks for the full
    distribution: ``audit_positions`` predictions drawn with a fixed seed (none when 0)."""
    num_tokens = int(grid.mask.sum())
    audit_mask = np.zeros_like(grid.mask)
    if audit_positions > 0:
        chosen = np.random.default_rng(0).choice(num_tokens, min(audit_positions, num_tokens), replace=False)
        stream = np.searchsorted(grid.starts, chosen, side="right") - 1
        audit_mask[stream, chosen - grid.starts[stream]] = True
    return audit_mask


def _score_chunk(
    model: LanguageModel,
    view: Chunk,
    begin: int,
    starts: np.ndarray,
    audit_mask: np.ndarray,
    tally: _Tally,
    *,
    vocab_size: int,
    name: str,
) -> None:
    """Score the chunk ``view`` (views ``[B, T]`` of the stream grid, from column ``begin``;
    ``starts``: int64 ``[B]``, each stream's first token) and add it to ``tally``, auditing the
    distributions asked for where ``audit_mask`` (bool ``[B, W]``) is true. A model that gives no
    distributions clears ``audit_mask``: it is not asked again."""
    end = begin + view.mask.shape[1]
    wanted = audit_mask[:, begin:end]
    requested = wanted if wanted.any() else None
    # Copies: whatever a plugin does to its chunk cannot reach the harness's arrays.
    chunk = Chunk(
        view.inputs.copy(),
        view.targets.copy(),
        view.mask.copy(),
        requested.copy() if requested is not None else None,
    )
    with _naming_the_plugin(name, f"score() on {_chunk_place(starts, begin, end)}"):
        scores = model.score(chunk)
    log_probs, rows = _validated_scores(
        scores, view.mask, requested, vocab_size=vocab_size, starts=starts, begin=begin, name=name
    )
    tally.total_log_prob += float(log_probs[view.mask].sum())
    tally.tokens += int(view.mask.sum())
    if tally.log_prob_grid is not None:
        tally.log_prob_grid[:, begin:end] = log_probs
    if requested is None:
        return
    tally.requested += int(requested.sum())
    if rows is None:
        audit_mask[:] = False  # the model gives no distributions: stop asking
        return
    sum_error, target_error = _probability_audit(rows, requested, log_probs, view.targets, name)
    tally.checked += int(requested.sum())
    tally.max_sum_error = max(tally.max_sum_error, sum_error)
    tally.max_target_error = max(tally.max_target_error, target_error)


def _probability_audit(
    rows: np.ndarray, wanted: np.ndarray, log_probs: np.ndarray, targets: np.ndarray, name: str
) -> tuple[float, float]:
    """Check the distributions ``rows`` (float64 ``[K, V]``, from :func:`_validated_scores`)
    asked for at the ``K`` positions of ``wanted`` (bool ``[B, T]``): each sums to 1 and gives
    its target (``targets``, int64 ``[B, T]``) the reported log-probability (``log_probs``,
    float64 ``[B, T]``), within :data:`AUDIT_TOLERANCE`. Returns the largest errors of each."""
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
    candidates = min(candidates, vocab_size)
    rng = np.random.default_rng(seed)
    chosen = np.sort(rng.choice(len(ids), min(points, len(ids)), replace=False))
    score = functools.partial(_score_stretch, model, bptt=bptt, vocab_size=vocab_size, name=name)
    compared = "targets and distributions"
    max_difference = max_candidate_mass = 0.0
    with _progress_bar(
        len(chosen) * candidates, unit="run", desc=f"{name} causality audit", progress=progress
    ) as bar:
        for point in (int(p) for p in chosen):
            stretch = _Stretch.around(ids, point, eos_id=eos_id, context=context)
            values = _candidate_values(rng, int(ids[point]), vocab_size=vocab_size, candidates=candidates)
            runs = _score_runs(
                score, stretch, values, rng, vocab_size=vocab_size, lookahead=lookahead, bar=bar
            )
            if tolerance is None:
                tolerance = _default_tolerance(runs)
            difference, row = _compare_runs(runs, stretch, tolerance=tolerance, name=name)
            mass = _check_candidate_mass(runs, stretch, values, row, name=name)
            max_difference = max(max_difference, difference)
            max_candidate_mass = max(max_candidate_mass, mass)
            compared = compared if row is not None else "targets"
    return CausalityAudit(
        len(chosen),
        candidates,
        compared,
        max_difference,
        max_candidate_mass,
        tolerance or 0.0,
        time.perf_counter() - began,
    )


@dataclasses.dataclass(frozen=True)
class _Stretch:
    """The real text a stretch of :func:`causality_audit` reads up to its audited point.

    Attributes:
        point: the audited position (it predicts ``ids[point]``).
        start: the stretch's first position in the split.
        prefix: int64 ``[point - start + 1]``, the input of the stretch's first position, then
            the targets of the positions before the point.
    """

    point: int
    start: int
    prefix: np.ndarray

    @classmethod
    def around(cls, ids: np.ndarray, point: int, *, eos_id: int, context: int) -> _Stretch:
        """The stretch of ``ids`` (integer ``[N]``) from up to ``context`` positions before
        ``point``."""
        start = max(0, point - context)
        first_input = eos_id if start == 0 else int(ids[start - 1])
        return cls(point, start, np.concatenate([[first_input], ids[start:point]]).astype(np.int64))

    @property
    def before(self) -> int:
        """Positions of the stretch before the point: the point's index in it."""
        return self.point - self.start

    def text(self, value: int, rng: np.random.Generator, vocab_size: int, lookahead: int) -> np.ndarray:
        """The text of one run (int64 ``[S + 1]``): the prefix, ``value`` as the point's target,
        then ``lookahead`` random tokens drawn from ``rng``."""
        return np.concatenate([self.prefix, [value], rng.integers(0, vocab_size, lookahead)])


#: One run of a stretch (see :func:`_score_stretch`): the target log-probabilities (float64
#: ``[S]``), the distribution at the point (float64 ``[V]`` or None), and whether the scores
#: came back as tensors on an accelerator.
_Run = tuple[np.ndarray, np.ndarray | None, bool]


def _score_runs(
    score: Callable[..., _Run],
    stretch: _Stretch,
    values: np.ndarray,
    rng: np.random.Generator,
    *,
    vocab_size: int,
    lookahead: int,
    bar: tqdm,
) -> list[_Run]:
    """One run of ``stretch`` per value (int64 ``[C]``) of its point's target, each scored with
    ``score`` (:func:`_score_stretch` bound to the model), the distribution at the point asked
    for in the first two; ``bar`` advances a step per run."""
    runs = []
    for run, value in enumerate(values):
        runs.append(score(stretch.text(value, rng, vocab_size, lookahead), stretch, want_row=run < 2))
        bar.update()
    return runs


def _default_tolerance(runs: list[_Run]) -> float:
    """The causality audit's tolerance when none is given, from the first point's ``runs``:
    :data:`ACCELERATOR_CAUSALITY_TOLERANCE` when the scores came back on an accelerator, else 0."""
    on_accelerator = any(accelerated for *_, accelerated in runs)
    return ACCELERATOR_CAUSALITY_TOLERANCE if on_accelerator else 0.0


def _candidate_values(rng: np.random.Generator, real: int, *, vocab_size: int, candidates: int) -> np.ndarray:
    """The values (int64 ``[candidates]``) an audited point's target takes, one per run: the
    real token ``real`` first, then others drawn from ``rng`` without repeats."""
    others = rng.choice(vocab_size - 1, candidates - 1, replace=False)
    others += others >= real  # skip the real token
    return np.concatenate([[real], others]).astype(np.int64)


def _compare_runs(
    runs: list[_Run],
    stretch: _Stretch,
    *,
    tolerance: float,
    name: str,
) -> tuple[float, np.ndarray | None]:
    """The first two checks of :func:`causality_audit` on the runs of one point (each from
    :func:`_score_stretch` on ``stretch``): the target log-probabilities before the point, and
    the distribution at it in runs 0 and 1, are the same within ``tolerance``. Returns the
    largest change seen and the distribution at the point (float64 ``[V]``; None when the model
    gives none); raises :class:`PluginError` otherwise."""
    point, before = stretch.point, stretch.before
    targets = np.stack([run_targets for run_targets, *_ in runs])  # [candidates, S]
    changes = _changes(targets[:1, :before], targets[1:, :before]).max(axis=0, initial=0.0)
    if (changes > tolerance).any():
        where = stretch.start + int(np.argmax(changes > tolerance))
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


def _check_candidate_mass(
    runs: list[_Run],
    stretch: _Stretch,
    values: np.ndarray,
    row: np.ndarray | None,
    *,
    name: str,
) -> float:
    """The last check of :func:`causality_audit` on the runs of one point (each from
    :func:`_score_stretch` on ``stretch``, with ``values``, int64 ``[C]``, as the point's
    target): the probabilities of the values, each in its own run, sum to at most 1. Returns
    that sum; raises :class:`PluginError`, with what ``row`` (the distribution at the point,
    from :func:`_compare_runs`) says of the cause, when it is more."""
    point = stretch.point
    candidate_log_probs = np.array([run_targets[stretch.before] for run_targets, *_ in runs])  # [C]
    mass = float(np.exp(candidate_log_probs).sum())
    if mass > 1 + AUDIT_TOLERANCE:
        raise PluginError(
            f"{name}: causality audit failed at token {point}: the probabilities it gives "
            f"{len(values)} different values of token {point}, each in its own run, sum to "
            f"{mass:.4g} > 1: {_excess_mass_reason(point, values, candidate_log_probs, row)}"
        )
    return mass


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
    stretch: _Stretch,
    *,
    want_row: bool,
    bptt: int,
    vocab_size: int,
    name: str,
) -> _Run:
    """Score ``text`` (int64 ``[S + 1]``: inputs ``text[:-1]``, targets ``text[1:]``), one run
    of ``stretch``, as one stream from ``reset(1)``; returns the target log-probabilities
    (float64 ``[S]``), when ``want_row`` the distribution at the stretch's point (float64 ``[V]``;
    None when the model gives none), and whether the scores came back as tensors on an
    accelerator."""
    length, start = len(text) - 1, stretch.start
    inputs, targets = text[None, :-1], text[None, 1:]
    wanted = np.zeros((1, length), dtype=bool)
    wanted[0, stretch.before] = want_row
    log_probs, row, on_accelerator = np.empty(length), None, False
    with _naming_the_plugin(name, f"reset(1) in the causality audit, for token {stretch.point}"):
        model.reset(1)
    for begin in range(0, length, bptt):
        end = min(begin + bptt, length)
        mask = np.ones((1, end - begin), dtype=bool)
        requested = wanted[:, begin:end] if wanted[:, begin:end].any() else None
        chunk = Chunk(
            inputs[:, begin:end].copy(),
            targets[:, begin:end].copy(),
            mask.copy(),
            requested.copy() if requested is not None else None,
        )
        place = f"tokens {start + begin}..{start + end - 1} of a made-up stretch"
        with _naming_the_plugin(name, f"score() in the causality audit, on {place}"):
            scores = model.score(chunk)
        chunk_log_probs, rows = _validated_scores(
            scores,
            mask,
            requested,
            vocab_size=vocab_size,
            starts=np.zeros(1, dtype=np.int64),
            begin=start + begin,
            name=name,
        )
        device = getattr(scores.target_log_probs, "device", None)  # a torch tensor's
        on_accelerator |= getattr(device, "type", "cpu") != "cpu"
        log_probs[begin:end] = chunk_log_probs[0]
        row = rows[0] if rows is not None else row
    return log_probs, row, on_accelerator


def _changes(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``|a - b|`` elementwise (broadcast), 0 where equal (infinities included), NaN counted as
    a change."""
    a, b = np.broadcast_arrays(a, b)
    if np.array_equal(a, b):
        return np.zeros(a.shape)
    with np.errstate(invalid="ignore"):
        return np.where(a == b, 0.0, np.nan_to_num(np.abs(a - b), nan=np.inf))
