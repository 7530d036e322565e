"""Calibrating the Pointer Sentinel-LSTM's gate: ``python -m baselines calibrate``.

Training scores the pointer through dropout, evaluation without it, and the two disagree on how
far to trust the pointer: the medium PTB pointer, trained to a mean gate ``g`` of 0.996, has lower
perplexity on its own training text with dropout off when every sentinel score is 2.55 lower
(docs/baselines.md, "Calibrating the pointer's gate"). :func:`fit_sentinel_shift` finds that shift
on the training text, with dropout off, so that no held-out text is used; the model adds it to
``PointerConfig.sentinel_bias``. A shift ``d`` of every sentinel score changes each target's
probability in closed form::

    p(y) = g p_vocab(y) + p_pointer(y)  ->  (w p_vocab(y) + p_pointer(y)) / (w + 1 - g),  w = g e^d

so one pass of the model scores every candidate shift.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from baselines.models import PointerSentinelLSTM
from harness.streams import stream_grid
from wikitext_toolkit_core.progress import progress_bar

#: The shifts tried first, then the ones :data:`FINE_STEP` apart around the best of them.
COARSE_SHIFTS = np.linspace(-10.0, 10.0, 81)
FINE_STEP = 0.01


@torch.inference_mode()
def mixture_parts(
    model: PointerSentinelLSTM,
    ids: np.ndarray,
    *,
    eos_id: int,
    batch_size: int = 32,
    bptt: int = 100,
    device: str | torch.device = "cpu",
    progress: bool = True,
    dropout: bool = False,
) -> np.ndarray:
    """Score ``ids`` (int ``[N]``) with dropout off (or, with ``dropout``, with dropout and zoneout
    on, as training sees the model), in ``batch_size`` streams laid out as the harness lays them
    out, and return the parts of each target's probability.

    Returns:
        float64 ``[4, N]``, the rows ``log g``, ``log (1 - g)``, ``log p_vocab(y)`` and
        ``log p_pointer(y)`` (``-inf`` where the target is not in the window).
    """
    model = model.to(device).train(dropout)
    grid = stream_grid(ids, eos_id=eos_id, batch_size=batch_size)
    state = model.initial_state(batch_size, device)
    parts = []
    for block in progress_bar(grid.chunks(bptt), desc="calibrate", unit="chunk", show=progress):
        chunk = block.chunk
        inputs = torch.from_numpy(chunk.inputs).to(device)
        targets = torch.from_numpy(chunk.targets).to(device)
        output = model(inputs, targets, state, analyze=True)
        state = output.state
        analysis = output.analysis
        rows = torch.stack(
            [
                analysis["gate"].double().log(),
                analysis["attention"].double().sum(-1).log(),  # 1 - g, precise where g is near 1
                analysis["vocab_log_prob"].double(),
                analysis["pointer_log_prob"].double(),
            ]
        )  # [4, B, T]
        parts.append(rows[:, torch.from_numpy(chunk.mask).to(device)].cpu())
    return torch.cat(parts, dim=1).numpy()


def shifted_log_probs(parts: np.ndarray, shift: float) -> np.ndarray:
    """``log p(y)`` of each target (float64 ``[N]``) with every sentinel score moved by ``shift``;
    ``parts`` as :func:`mixture_parts` returns them."""
    log_gate, log_pointer_total, vocab_log_prob, pointer_log_prob = parts
    with np.errstate(divide="ignore"):
        return np.logaddexp(shift + log_gate + vocab_log_prob, pointer_log_prob) - np.logaddexp(
            shift + log_gate, log_pointer_total
        )


def fit_sentinel_shift(parts: np.ndarray) -> float:
    """The shift of the sentinel scores that maximizes the mean ``log p(y)`` of ``parts``, found on
    :data:`COARSE_SHIFTS` and then to :data:`FINE_STEP` around the best of them."""

    def best(shifts: np.ndarray) -> float:
        return float(shifts[int(np.argmax([shifted_log_probs(parts, s).mean() for s in shifts]))])

    coarse = best(COARSE_SHIFTS)
    spacing = COARSE_SHIFTS[1] - COARSE_SHIFTS[0]
    fine = np.arange(coarse - spacing, coarse + spacing + FINE_STEP / 2, FINE_STEP)
    return round(best(fine.clip(COARSE_SHIFTS[0], COARSE_SHIFTS[-1])), 6)


def calibration_record(
    parts: np.ndarray, shift: float, previous_bias: float, **protocol: Any
) -> dict[str, Any]:
    """What a calibrated checkpoint records of its calibration: the new ``sentinel_bias``
    (``previous_bias + shift``), the shift, the tokens it was fitted on and their perplexity
    before and after, and ``protocol`` (split, batch size, BPTT)."""
    return {
        "sentinel_bias": previous_bias + shift,
        "shift": shift,
        "tokens": int(parts.shape[1]),
        "perplexity_before": math.exp(-shifted_log_probs(parts, 0.0).mean()),
        "perplexity_after": math.exp(-shifted_log_probs(parts, shift).mean()),
        **protocol,
    }
