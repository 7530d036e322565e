"""The neural cache of Grave et al. (2016) on a trained zoneout LSTM.

::

    p(w) = (1 - lambda) p_vocab(w) + lambda p_cache(w)
    p_cache(w) = sum_{i : x_{i+1} = w} softmax_i(theta h_t . h_i)

over the last ``window`` positions ``i < t`` of the stream (``h``: the LSTM's top-layer output;
``x_{i+1}``: the word that followed position ``i``). The cache applies from the first token: a
position with fewer than ``window`` predecessors uses all it has; the very first position of a
stream, with none, uses ``p_vocab`` alone. Each chunk is scored against the carried window in one
batched matmul with a banded causal mask: no per-token loop.

As a harness plugin (``python -m harness eval baselines.neural_cache --dataset ptb
--model-args window=2000``) it wraps the zoneout LSTM that ``baselines train zoneout_lstm`` wrote
(or ``--checkpoint``), with ``theta`` and ``interpolation`` (lambda) from ``--model-args`` or from
the ``neural_cache.json`` that ``python -m baselines tune`` wrote beside the checkpoint.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch
from torch import Tensor, nn
from tqdm import tqdm

from harness.evaluate import stream_grid
from harness.plugin import ModelUnavailable, PluginError
from baselines import checkpoint as checkpoints
from baselines.pointer_sentinel import band_mask, masked_log_sum
from baselines.recurrent import LayerState, full_precision
from baselines.scoring import TorchLanguageModel, resolve_checkpoint
from baselines.zoneout_lstm import LMOutput, ZoneoutLSTM

TUNING_FILE = "neural_cache.json"


class CacheState(NamedTuple):
    """What a stream carries across chunks.

    Attributes:
        core: one ``(h, c)`` per layer, each ``[B, H]``.
        memory: ``[B, M, D]`` top-layer outputs of the last ``M <= window`` positions.
        memory_targets: int64 ``[B, M]``, the word that followed each of them.
    """

    core: list[LayerState]
    memory: Tensor
    memory_targets: Tensor


class NeuralCache(nn.Module):
    """A trained :class:`ZoneoutLSTM` with a neural cache (evaluation only; state:
    :class:`CacheState`)."""

    kind = "neural_cache"

    def __init__(self, lstm: ZoneoutLSTM, window: int, theta: float, interpolation: float) -> None:
        super().__init__()
        if window < 1:
            raise PluginError(f"neural cache: window must be >= 1, got {window}")
        if not 0.0 <= interpolation < 1.0:
            raise PluginError(f"neural cache: interpolation (lambda) must be in [0, 1), "
                              f"got {interpolation}")
        self.lstm = lstm
        self.window = window
        self.theta = theta
        self.interpolation = interpolation

    def initial_state(self, batch_size: int, device: torch.device | str) -> CacheState:
        width = self.lstm.config.output_size
        return CacheState(self.lstm.initial_state(batch_size, device),
                          torch.zeros(batch_size, 0, width, device=device),
                          torch.zeros(batch_size, 0, dtype=torch.long, device=device))

    def encode(self, inputs: Tensor, targets: Tensor, state: CacheState
               ) -> tuple[Tensor, Tensor, Tensor, Tensor, CacheState]:
        """Run the LSTM over a chunk and line it up against the carried window.

        Returns:
            log_vocab ``[B, T, V]``, similarities ``h_t . h_i`` ``[B, T, M+T]``, visible ``[T, M+T]``
            (the key is in the position's window), hits ``[B, T, M+T]`` (a key in the window
            whose next word is the target) and the new state.
        """
        features, core_state = self.lstm.core(inputs, state.core)  # [B, T, D]
        memory_length = state.memory.shape[1]
        length = inputs.shape[1]
        keys = torch.cat([state.memory, features], dim=1)  # [B, M+T, D]
        key_targets = torch.cat([state.memory_targets, targets], dim=1)  # [B, M+T]
        visible = band_mask(memory_length, length, self.window, include_self=False,
                            device=inputs.device)
        similarities = full_precision(torch.bmm(features, keys.transpose(1, 2)))
        hits = (key_targets.unsqueeze(1) == targets.unsqueeze(2)) & visible
        log_vocab = torch.log_softmax(full_precision(self.lstm.core.logits(features)), dim=-1)
        keep = min(self.window, memory_length + length)
        new_state = CacheState(core_state, keys[:, -keep:], key_targets[:, -keep:])
        return log_vocab, similarities, visible, hits, new_state

    def forward(self, inputs: Tensor, targets: Tensor, state: CacheState,
                generator: torch.Generator | None = None,
                distribution_rows: Tensor | None = None, analyze: bool = False) -> LMOutput:
        """Score one chunk (arguments as :meth:`ZoneoutLSTM.forward`; no training).

        With ``analyze``, ``analysis`` holds ``attention`` ``[B, T, M+T]`` (the cache's weight on
        each key) and ``key_targets`` ``[B, M+T]``.
        """
        log_vocab, similarities, visible, hits, new_state = self.encode(inputs, targets, state)
        log_weights = cache_log_weights(similarities, self.theta, visible)  # [B, T, M+T]
        has_cache = visible.any(dim=1)  # [T]
        target_log_vocab = log_vocab.gather(2, targets.unsqueeze(2)).squeeze(2)
        log_cache = masked_log_sum(log_weights, hits)
        target_log_probs = mix(target_log_vocab, log_cache, self.interpolation, has_cache)

        key_targets = torch.cat([state.memory_targets, targets], dim=1)  # [B, M+T]
        distributions = None
        if distribution_rows is not None:
            rows = distribution_rows
            row_keys = key_targets.unsqueeze(1).expand_as(hits)[rows]  # [K, M+T]
            cache = torch.zeros(int(rows.sum()), log_vocab.shape[-1], device=inputs.device)
            cache.scatter_add_(1, row_keys, log_weights[rows].exp())
            row_has_cache = has_cache.unsqueeze(0).expand_as(rows)[rows].unsqueeze(1)  # [K, 1]
            weight = torch.where(row_has_cache, self.interpolation, 0.0)
            distributions = torch.log((1 - weight) * log_vocab[rows].exp() + weight * cache)
        analysis = None
        if analyze:
            analysis = {"attention": log_weights.exp(),
                        "key_targets": key_targets}
        return LMOutput(target_log_probs, new_state, distributions, analysis=analysis)


def cache_log_weights(similarities: Tensor, theta: float | Tensor, visible: Tensor) -> Tensor:
    """Log of ``softmax_i(theta h_t . h_i)`` over each position's window.

    ``similarities`` ``[..., T, K]``; ``visible`` bool ``[T, K]``. Keys outside the window, and
    every key of a position whose window is empty, get ``-inf`` (never NaN, whatever ``theta``).
    """
    empty = ~visible.any(dim=-1, keepdim=True)  # [T, 1]
    scaled = (similarities * theta).masked_fill(~visible, float("-inf")).masked_fill(empty, 0.0)
    return torch.log_softmax(scaled, dim=-1).masked_fill(~visible, float("-inf"))


def mix(log_vocab: Tensor, log_cache: Tensor, interpolation: float | Tensor,
        has_cache: Tensor) -> Tensor:
    """``log((1 - lambda) p_vocab + lambda p_cache)``; ``log p_vocab`` where ``has_cache`` is false
    (``has_cache`` ``[T]`` broadcasts against the trailing axis)."""
    interpolation = torch.as_tensor(interpolation, dtype=log_vocab.dtype, device=log_vocab.device)
    mixed = torch.logaddexp(torch.log1p(-interpolation) + log_vocab,
                            torch.log(interpolation) + log_cache)
    return torch.where(has_cache, mixed, log_vocab)


def tuning_path(checkpoint: Path) -> Path:
    return checkpoint.parent / TUNING_FILE


def load_model(dataset: Any, *, device: str, checkpoint: str | None, window: int = 100,
               theta: float | None = None, interpolation: float | None = None) -> TorchLanguageModel:
    """Harness factory: the zoneout LSTM for ``dataset`` with a cache of ``window`` positions."""
    path = resolve_checkpoint(ZoneoutLSTM.kind, dataset, checkpoint)
    lstm, _ = checkpoints.load_model(path, dataset.vocab, kind=ZoneoutLSTM.kind)
    if theta is None or interpolation is None:
        tuned = read_tuning(tuning_path(path), window)
        if tuned is None:
            raise ModelUnavailable(
                f"no tuned neural cache for window {window} beside {path}: run `python -m baselines "
                f"tune --dataset {dataset.name} --checkpoint {path} --windows {window}` or pass "
                "--model-args theta=...,interpolation=...")
        theta = tuned["theta"] if theta is None else theta
        interpolation = tuned["interpolation"] if interpolation is None else interpolation
    return TorchLanguageModel(NeuralCache(lstm, window, theta, interpolation), device,
                              checkpoint=path)


def read_tuning(path: Path, window: int) -> dict[str, float] | None:
    """The tuned ``theta`` and ``interpolation`` for ``window`` from a tuning file, if any."""
    if not path.is_file():
        return None
    try:
        best = json.loads(path.read_text(encoding="utf-8"))["best"]
    except (json.JSONDecodeError, KeyError, TypeError) as error:
        raise PluginError(f"{path}: not a neural-cache tuning file ({error})") from None
    return best.get(str(window))


@torch.inference_mode()
def tune(lstm: ZoneoutLSTM, ids: np.ndarray, *, eos_id: int, windows: list[int],
         thetas: list[float], interpolations: list[float], batch_size: int = 1, bptt: int = 100,
         device: str | torch.device = "cpu", progress: bool = True) -> dict[str, Any]:
    """Grid-search ``theta`` and ``lambda`` for each window in one pass over ``ids`` (int64 ``[N]``).

    The LSTM runs once per window; every ``(theta, lambda)`` pair is scored from the same
    similarities. Streams are laid out exactly as the harness's evaluation lays them out.

    Returns:
        ``{"grid": {window: [[ppl for each lambda] for each theta]}, "best": {window: {"theta",
        "interpolation", "perplexity"}}, "thetas", "interpolations", "tokens", "protocol"}``.
    """
    lstm = lstm.to(device).eval()
    grid = stream_grid(ids, eos_id=eos_id, batch_size=batch_size)
    theta_values = torch.tensor(thetas, device=device).view(-1, 1, 1, 1)  # [G, 1, 1, 1]
    lambda_values = torch.tensor(interpolations, device=device, dtype=torch.float64)
    results: dict[str, Any] = {"thetas": thetas, "interpolations": interpolations,
                               "tokens": int(grid.mask.sum()),
                               "protocol": {"batch_size": batch_size, "bptt": bptt},
                               "grid": {}, "best": {}}
    for window in windows:
        cache = NeuralCache(lstm, window, theta=0.0, interpolation=0.0)
        state = cache.initial_state(batch_size, device)
        totals = torch.zeros(len(thetas), len(interpolations), dtype=torch.float64, device=device)
        width = grid.inputs.shape[1]
        for begin in tqdm(range(0, width, bptt), desc=f"tune window {window}", unit="chunk",
                          leave=False, disable=None if progress else True):
            columns = slice(begin, begin + bptt)
            inputs = torch.from_numpy(grid.inputs[:, columns]).to(device)
            targets = torch.from_numpy(grid.targets[:, columns]).to(device)
            mask = torch.from_numpy(grid.mask[:, columns]).to(device)
            log_vocab, similarities, visible, hits, state = cache.encode(inputs, targets, state)
            log_weights = cache_log_weights(similarities.unsqueeze(0), theta_values, visible)
            has_cache = visible.any(dim=1)  # [T]
            log_cache = masked_log_sum(log_weights, hits)  # [G, B, T]
            target_log_vocab = log_vocab.gather(2, targets.unsqueeze(2)).squeeze(2).double()
            mixed = mix(target_log_vocab.view(1, 1, *mask.shape),
                        log_cache.double().unsqueeze(1),  # [G, 1, B, T]
                        lambda_values.view(1, -1, 1, 1), has_cache)  # [G, Lambda, B, T]
            totals += torch.where(mask, mixed, 0.0).sum(dim=(2, 3))
        perplexities = torch.exp(-totals / results["tokens"]).cpu()
        best = int(torch.argmin(perplexities))
        theta_index, lambda_index = divmod(best, len(interpolations))
        results["grid"][str(window)] = perplexities.tolist()
        results["best"][str(window)] = {"theta": thetas[theta_index],
                                        "interpolation": interpolations[lambda_index],
                                        "perplexity": float(perplexities[theta_index, lambda_index])}
        if not math.isfinite(results["best"][str(window)]["perplexity"]):
            raise PluginError(f"neural cache tuning gave a non-finite perplexity for window {window}")
    return results
