"""Tuning the neural cache: ``python -m baselines tune`` and the tuning file it writes.

:func:`tune` grid-searches the cache's ``theta`` and ``interpolation`` (lambda) for each window in
one pass over a split; ``python -m baselines tune`` writes the result as the tuning file
(:data:`TUNING_FILE`) beside the zoneout LSTM checkpoint, where the :mod:`baselines.neural_cache`
plugin reads the tuned settings (:func:`read_tuning`).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from baselines import checkpoint as checkpoints
from baselines.models import NeuralCache, ZoneoutLSTM
from baselines.models.common import masked_log_sum
from baselines.models.continuous_cache import cache_log_weights, mix
from harness.plugin import PluginError
from harness.results import portable_path
from harness.streams import stream_grid
from wikitext_toolkit_core.files import file_sha256
from wikitext_toolkit_core.progress import progress_bar

TUNING_FILE = "neural_cache.json"


def tuning_path(checkpoint: Path) -> Path:
    """Where the tuning file of a zoneout LSTM checkpoint is: beside it."""
    return checkpoint.parent / TUNING_FILE


def read_tuning_file(path: Path) -> dict[str, Any] | None:
    """The tuning file's content, its ``best`` settings (window -> ``theta``, ``interpolation``,
    ...) checked, or None when there is no file.

    Raises:
        PluginError: the file is not a tuning file (not JSON, or without a ``best`` mapping), or
            a window's settings are missing or out of range (the message names the window).
    """
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        best = record["best"]
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError) as error:
        raise PluginError(f"{path}: not a neural-cache tuning file ({error})") from None
    if not isinstance(best, dict):
        raise PluginError(f"{path}: not a neural-cache tuning file (best is not a mapping)")
    for window, settings in best.items():
        _check_settings(path, window, settings)
    return dict(record)


def _check_settings(path: Path, window: str, settings: Any) -> None:
    """Fail unless ``settings``, the tuning file's entry of ``window``, holds a finite ``theta`` of
    at least 0 and an ``interpolation`` in [0, 1)."""
    where = f"{path}: window {window}"
    if not isinstance(settings, dict):
        raise PluginError(f"{where}: not a mapping of theta and interpolation")
    for name, high, must in (
        ("theta", math.inf, "a finite number of at least 0"),
        ("interpolation", 1.0, "at least 0 and below 1"),
    ):
        if name not in settings:
            raise PluginError(f"{where}: no {name}")
        value = settings[name]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < high:
            raise PluginError(f"{where}: {name} must be {must}, got {value!r}")


def read_tuning(checkpoint: Path, window: int, retune: Sequence[str]) -> dict[str, float] | None:
    """The tuned ``theta`` and ``interpolation`` for ``window`` from the tuning file beside
    ``checkpoint``, if any.

    Raises:
        PluginError: the file is not a tuning file, or its settings are out of range.
        ModelUnavailable: the file was tuned on another checkpoint (the message says to run
            ``retune``, the command that tunes this one).
    """
    path = tuning_path(checkpoint)
    record = read_tuning_file(path)
    if record is None:
        return None
    checkpoints.require_tuned_on(record, path, checkpoint, retune)
    return record["best"].get(str(window))


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
) -> dict[str, Any]:
    """Grid-search ``grid``'s ``theta`` and ``lambda`` for each of its windows in one pass over
    ``ids`` (int64 ``[N]``).

    The LSTM runs once per window; every ``(theta, lambda)`` pair is scored from the same
    similarities. Streams are laid out exactly as the harness's evaluation lays them out
    (``batch_size`` streams, chunks of ``bptt``).

    Returns:
        ``{"grid": {window: [[ppl for each lambda] for each theta]}, "best": {window: {"theta",
        "interpolation", "perplexity"}}, "thetas", "interpolations", "tokens", "protocol"}``.
    """
    thetas, interpolations = grid.thetas, grid.interpolations
    lstm = lstm.to(device).eval()
    streams = stream_grid(ids, eos_id=eos_id, batch_size=batch_size)
    theta_values = torch.tensor(thetas, device=device).view(-1, 1, 1, 1)  # [G, 1, 1, 1]
    lambda_values = torch.tensor(interpolations, device=device, dtype=torch.float64)
    results: dict[str, Any] = {
        "thetas": thetas,
        "interpolations": interpolations,
        "tokens": int(streams.mask.sum()),
        "protocol": {"batch_size": batch_size, "bptt": bptt},
        "grid": {},
        "best": {},
    }
    for window in grid.windows:
        cache = NeuralCache(lstm, window, theta=0.0, interpolation=0.0)
        state = cache.initial_state(batch_size, device)
        totals = torch.zeros(len(thetas), len(interpolations), dtype=torch.float64, device=device)
        blocks = streams.chunks(bptt)
        for block in progress_bar(blocks, desc=f"tune window {window}", unit="chunk", show=progress):
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
        perplexities = torch.exp(-totals / results["tokens"]).cpu()
        best = int(torch.argmin(perplexities))
        theta_index, lambda_index = divmod(best, len(interpolations))
        results["grid"][str(window)] = perplexities.tolist()
        results["best"][str(window)] = {
            "theta": thetas[theta_index],
            "interpolation": interpolations[lambda_index],
            "perplexity": float(perplexities[theta_index, lambda_index]),
        }
        if not math.isfinite(results["best"][str(window)]["perplexity"]):
            raise PluginError(f"neural cache tuning gave a non-finite perplexity for window {window}")
    return results


def tuning_record(
    results: dict[str, Any],
    previous: dict[str, Any],
    *,
    checkpoint: Path,
    dataset: str,
    split: str,
    seconds: float,
) -> dict[str, Any]:
    """The tuning file's content: :func:`tune`'s ``results`` for the checkpoint, the dataset
    split it was tuned on and how long it took, its best (theta, lambda) per window added to
    ``previous`` (the windows tuned earlier, from the file being replaced; a window tuned again
    takes its new values)."""
    return {
        **results,
        "checkpoint": portable_path(checkpoint),
        "checkpoint_sha256": file_sha256(checkpoint),
        "dataset": dataset,
        "split": split,
        "seconds": seconds,
        "best": {**previous, **results["best"]},
    }
