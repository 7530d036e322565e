"""Tuning the neural cache: ``python -m baselines tune`` and the tuning file it writes.

:func:`tune` grid-searches the cache's ``theta`` and ``interpolation`` (lambda) for each window in
one pass over a split; ``python -m baselines tune`` records the result in the checkpoint's tuning
file (``neural_cache.json`` beside it, :data:`baselines.tuning_files.NEURAL_CACHE`), where the
:mod:`baselines.neural_cache` plugin reads the tuned settings (:func:`read_tuning`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from baselines.models import NeuralCache, ZoneoutLSTM
from baselines.models.common import masked_log_sum
from baselines.models.continuous_cache import cache_log_weights, mix
from baselines.tuning_files import NEURAL_CACHE, read_tuned
from harness.plugin import PluginError
from harness.streams import StreamGrid, stream_grid
from wikitext_toolkit_core.progress import progress_bar


def read_tuning(checkpoint: Path, window: int, retune: Sequence[str]) -> dict[str, Any] | None:
    """The tuned ``theta`` and ``interpolation`` for ``window`` from the tuning file beside
    ``checkpoint``, if any.

    Raises:
        PluginError: the file is not a neural-cache tuning file, or its settings are out of range.
        ModelUnavailable: the file was tuned on another checkpoint (the message says to run
            ``retune``, the command that tunes this one).
    """
    return read_tuned(checkpoint, NEURAL_CACHE, retune).get(str(window))


@dataclasses.dataclass(frozen=True)
class TuningGrid:
    """The settings :func:`tune` searches: every ``(theta, interpolation)`` pair, for each window.

    Attributes:
        windows: the cache sizes tuned, each on its own (``--windows``).
        thetas: the flatness values ``theta`` tried (``--thetas``), ``G`` of them.
        interpolations: the cache's weights ``lambda`` tried (``--interpolations``), each in [0, 1).
    """

    windows: list[int]
    thetas: list[float]
    interpolations: list[float]


@torch.inference_mode()
def tune(
    lstm: ZoneoutLSTM,
    ids: np.ndarray,
    *,
    eos_id: int,
    grid: TuningGrid,
    batch_size: int = 1,
    bptt: int = 100,
    device: str | torch.device = "cpu",
    progress: bool = True,
) -> dict[str, dict[str, dict[str, Any]]]:
    """Grid-search ``grid``'s ``theta`` and ``lambda`` for each of its windows in one pass over
    ``ids`` (int64 ``[N]``).

    The LSTM runs once per window; every ``(theta, lambda)`` pair is scored from the same
    similarities. Streams are laid out exactly as the harness's evaluation lays them out
    (``batch_size`` streams, chunks of ``bptt``).

    Returns:
        ``{"best": {window: {"theta", "interpolation", "perplexity"}}, "searches": {window:
        {"thetas", "interpolations", "grid": [[ppl for each lambda] for each theta], "tokens",
        "protocol"}}}``, as a tuning file holds them (:mod:`baselines.tuning_files`).
    """
    lstm = lstm.to(device).eval()
    streams = stream_grid(ids, eos_id=eos_id, batch_size=batch_size)
    tokens = int(streams.mask.sum())
    results: dict[str, dict[str, dict[str, Any]]] = {"best": {}, "searches": {}}
    for window in grid.windows:
        totals = _log_prob_totals(
            NeuralCache(lstm, window, theta=0.0, interpolation=0.0), streams, grid, bptt, device, progress
        )
        perplexities = torch.exp(-totals / tokens).cpu()
        theta_index, lambda_index = divmod(int(torch.argmin(perplexities)), len(grid.interpolations))
        best = float(perplexities[theta_index, lambda_index])
        if not math.isfinite(best):
            raise PluginError(f"neural cache tuning gave a non-finite perplexity for window {window}")
        results["best"][str(window)] = {
            "theta": grid.thetas[theta_index],
            "interpolation": grid.interpolations[lambda_index],
            "perplexity": best,
        }
        results["searches"][str(window)] = {
            "thetas": grid.thetas,
            "interpolations": grid.interpolations,
            "grid": perplexities.tolist(),
            "tokens": tokens,
            "protocol": {"batch_size": batch_size, "bptt": bptt},
        }
    return results


def _log_prob_totals(
    cache: NeuralCache,
    streams: StreamGrid,
    grid: TuningGrid,
    bptt: int,
    device: str | torch.device,
    progress: bool,
) -> torch.Tensor:
    """The summed target log-probabilities of ``streams`` under ``cache`` with each ``(theta,
    lambda)`` of ``grid``: float64 ``[G, Lambda]``."""
    theta_values = torch.tensor(grid.thetas, device=device).view(-1, 1, 1, 1)  # [G, 1, 1, 1]
    lambda_values = torch.tensor(grid.interpolations, device=device, dtype=torch.float64)
    state = cache.initial_state(streams.mask.shape[0], device)  # B streams
    totals = torch.zeros(len(grid.thetas), len(grid.interpolations), dtype=torch.float64, device=device)
    blocks = streams.chunks(bptt)
    for block in progress_bar(blocks, desc=f"tune window {cache.window}", unit="chunk", show=progress):
        chunk = block.chunk
        inputs = torch.from_numpy(chunk.inputs).to(device)
        targets = torch.from_numpy(chunk.targets).to(device)
        mask = torch.from_numpy(chunk.mask).to(device)
        log_vocab, similarities, visible, hits, state = cache.encode(inputs, targets, state)
        log_weights = cache_log_weights(similarities.unsqueeze(0), theta_values, visible)
        has_cache = visible.any(dim=1)  # [T]
        log_cache = masked_log_sum(log_weights, hits)  # [G, B, T]
        target_log_vocab = log_vocab.gather(2, targets.unsqueeze(2)).squeeze(2).double()
        mixed = mix(
            target_log_vocab.view(1, 1, *mask.shape),
            log_cache.double().unsqueeze(1),  # [G, 1, B, T]
            lambda_values.view(1, -1, 1, 1),
            has_cache,
        )  # [G, Lambda, B, T]
        totals += torch.where(mask, mixed, 0.0).sum(dim=(2, 3))
    return totals
