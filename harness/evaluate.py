"""Exact streaming perplexity.

The ``N`` tokens of a split are predicted exactly once each, whatever the batch size ``B`` and
chunk length ``T``: the prediction sequence (inputs ``<eos>, x_1 .. x_{N-1}``, targets
``x_1 .. x_N``) is cut into ``B`` contiguous streams whose lengths differ by at most one, the
streams are laid side by side and cut into chunks of ``T`` positions, and the ragged ends are
padded and masked. Nothing is trimmed. Log-probabilities are summed in float64.

With ``B = 1`` (the papers' test protocol) every prediction sees the whole preceding text; with
``B > 1`` each stream after the first starts without the text before it.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any

import numpy as np
from tqdm import tqdm

from harness.plugin import Chunk, ChunkScores, LanguageModel, PluginError

#: Largest positive log-probability accepted (rounding in a model's log-softmax).
MAX_LOG_PROB = 1e-6
#: Tolerance of the audit: |sum of probabilities - 1| and |log p(target) - reported|.
AUDIT_TOLERANCE = 1e-4


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

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """Result of scoring one token stream.

    Attributes:
        tokens: predictions counted (``N``).
        total_log_prob: float64 sum of the ``N`` target log-probabilities (nats).
        seconds: wall-clock time of the scoring loop.
        token_log_probs: float64 ``[N]`` in stream order, when asked for.
    """

    tokens: int
    total_log_prob: float
    seconds: float
    audit: Audit
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
    if hasattr(values, "detach"):  # a torch tensor, on any device
        values = values.detach().to("cpu").double().numpy()
    try:
        return np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise PluginError(f"{what} is a {type(values).__name__}, not an array of floats") from None


def _log_sum_exp(rows: np.ndarray) -> np.ndarray:
    peak = rows.max(axis=1, keepdims=True)
    peak = np.where(np.isfinite(peak), peak, 0.0)
    return (peak + np.log(np.exp(rows - peak).sum(axis=1, keepdims=True)))[:, 0]


def evaluate(model: LanguageModel, ids: np.ndarray, *, eos_id: int, vocab_size: int,
             batch_size: int = 1, bptt: int = 100, audit_positions: int = 8,
             keep_token_log_probs: bool = False, name: str = "model",
             progress: bool = True) -> Evaluation:
    """Score every token of ``ids`` (int64 ``[N]``) with ``model``.

    Args:
        eos_id: id of ``<eos>``, the implicit input before the first token.
        vocab_size: ``V``, the width the audited distributions must have.
        batch_size: ``B``, the number of contiguous streams scored side by side.
        bptt: ``T``, positions per chunk.
        audit_positions: positions (drawn with a fixed seed) at which the full distribution is
            requested and checked; 0 disables the audit.
        keep_token_log_probs: also return the ``N`` log-probabilities in stream order.
        name: the plugin's name, for error messages.

    Raises:
        PluginError: the model returned the wrong shape, a NaN/inf or positive log-probability,
            or a distribution that is unnormalized or disagrees with the reported target score.
    """
    if bptt < 1:
        raise ValueError(f"bptt must be >= 1, got {bptt}")
    num_tokens = len(ids)
    grid = stream_grid(ids, eos_id=eos_id, batch_size=batch_size)
    starts, inputs, targets, mask = grid.starts, grid.inputs, grid.targets, grid.mask
    width = mask.shape[1]

    audit_mask = np.zeros_like(mask)
    if audit_positions > 0:
        chosen = np.random.default_rng(0).choice(num_tokens, min(audit_positions, num_tokens),
                                                 replace=False)
        stream = np.searchsorted(starts, chosen, side="right") - 1
        audit_mask[stream, chosen - starts[stream]] = True

    log_prob_grid = np.zeros(mask.shape) if keep_token_log_probs else None
    total = 0.0
    counted = 0
    requested = checked = 0
    max_sum_error = max_target_error = 0.0
    model.reset(batch_size)
    began = time.perf_counter()
    with tqdm(total=num_tokens, unit="tok", unit_scale=True, desc=name, leave=False,
              disable=None if progress else True) as bar:
        for begin in range(0, width, bptt):
            end = min(begin + bptt, width)
            chunk_mask = mask[:, begin:end]
            wanted = audit_mask[:, begin:end]
            # Copies: whatever a plugin does to its chunk cannot reach the harness's arrays.
            chunk = Chunk(inputs[:, begin:end].copy(), targets[:, begin:end].copy(),
                          chunk_mask.copy(), wanted.copy() if wanted.any() else None)
            scores = model.score(chunk)
            if not isinstance(scores, ChunkScores):
                raise PluginError(f"{name}: score() returned {type(scores).__name__}, "
                                  "not harness.ChunkScores")
            log_probs = _as_float64(scores.target_log_probs, f"{name}: target_log_probs")
            if log_probs.shape != chunk_mask.shape:
                raise PluginError(f"{name}: target_log_probs has shape {log_probs.shape}, "
                                  f"expected {chunk_mask.shape} (batch, positions)")
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
                    sum_error, target_error = _audit(scores.distributions, wanted, log_probs,
                                                     targets[:, begin:end], vocab_size, name)
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
        token_log_probs=log_prob_grid[mask] if log_prob_grid is not None else None,
    )


def _check_log_probs(log_probs: np.ndarray, mask: np.ndarray, starts: np.ndarray, begin: int,
                     name: str) -> None:
    bad = mask & ~(np.isfinite(log_probs) & (log_probs <= MAX_LOG_PROB))
    if bad.any():
        stream, offset = (int(i) for i in np.argwhere(bad)[0])
        value = log_probs[stream, offset]
        token = int(starts[stream]) + begin + offset
        what = "a positive log-probability" if value > 0 else "an invalid log-probability"
        raise PluginError(f"{name}: {what} ({value}) for token {token} "
                          f"(stream {stream}, position {begin + offset})")


def _audit(distributions: Any, wanted: np.ndarray, log_probs: np.ndarray, targets: np.ndarray,
           vocab_size: int, name: str) -> tuple[float, float]:
    rows = _as_float64(distributions, f"{name}: distributions")
    expected_shape = (int(wanted.sum()), vocab_size)
    if rows.shape != expected_shape:
        raise PluginError(f"{name}: distributions has shape {rows.shape}, expected "
                          f"{expected_shape} (requested positions, vocabulary)")
    if np.isnan(rows).any() or np.isposinf(rows).any():
        raise PluginError(f"{name}: a full distribution contains NaN or +inf")
    sums = np.exp(_log_sum_exp(rows))
    sum_errors = np.abs(sums - 1.0)
    if sum_errors.max() > AUDIT_TOLERANCE:
        raise PluginError(f"{name}: unnormalized distribution: probabilities sum to "
                          f"{sums[sum_errors.argmax()]:.6g}, not 1 (tolerance {AUDIT_TOLERANCE})")
    where = np.nonzero(wanted)
    from_rows = rows[np.arange(len(rows)), targets[where]]
    target_errors = np.abs(from_rows - log_probs[where])
    if target_errors.max() > AUDIT_TOLERANCE:
        worst = int(target_errors.argmax())
        raise PluginError(f"{name}: reported log p(target) = {log_probs[where][worst]:.6g} but its "
                          f"full distribution gives {from_rows[worst]:.6g}")
    return float(sum_errors.max()), float(target_errors.max())
