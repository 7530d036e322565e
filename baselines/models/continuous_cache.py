"""The neural cache of Grave et al. (2016) on a trained zoneout LSTM.

::

    p(w) = (1 - lambda) p_vocab(w) + lambda p_cache(w)
    p_cache(w) = sum_{i : x_{i+1} = w} softmax_i(theta h_t . h_i)

over the last ``window`` positions ``i < t`` of the stream (``h``: the LSTM's top-layer output;
``x_{i+1}``: the word that followed position ``i``). The cache applies from the first token: a
position with fewer than ``window`` predecessors uses all it has; the very first position of a
stream, with none, uses ``p_vocab`` alone. Each chunk is scored against the carried window in one
batched matmul with a banded causal mask: no per-token loop.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import Tensor, nn

from baselines.models.common import LMOutput, band_mask, masked_log_sum
from baselines.models.recurrent import LayerState, full_precision
from baselines.models.zoneout import ZoneoutLSTM


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
            raise ValueError(f"neural cache: window must be >= 1, got {window}")
        if not 0.0 <= interpolation < 1.0:
            raise ValueError(f"neural cache: interpolation (lambda) must be in [0, 1), got {interpolation}")
        if not 0.0 <= theta < math.inf:
            raise ValueError(f"neural cache: theta must be a finite number of at least 0, got {theta}")
        self.lstm = lstm
        self.window = window
        self.theta = theta
        self.interpolation = interpolation

    def initial_state(self, batch_size: int, device: torch.device | str) -> CacheState:
        width = self.lstm.config.output_size
        return CacheState(
            self.lstm.initial_state(batch_size, device),
            torch.zeros(batch_size, 0, width, device=device),
            torch.zeros(batch_size, 0, dtype=torch.long, device=device),
        )

    def encode(
        self, inputs: Tensor, targets: Tensor, state: CacheState, generator: torch.Generator | None = None
    ) -> tuple[Tensor, Tensor, Tensor, Tensor, CacheState]:
        """Run the LSTM over a chunk (``generator`` as in :meth:`forward`) and line it up against
        the carried window.

        Returns:
            log_vocab ``[B, T, V]``, similarities ``h_t . h_i`` ``[B, T, M+T]``, visible ``[T, M+T]``
            (the key is in the position's window), hits ``[B, T, M+T]`` (a key in the window
            whose next word is the target) and the new state.
        """
        features, core_state = self.lstm.core(inputs, state.core, generator)  # [B, T, D]
        memory_length = state.memory.shape[1]
        length = inputs.shape[1]
        keys = torch.cat([state.memory, features], dim=1)  # [B, M+T, D]
        key_targets = torch.cat([state.memory_targets, targets], dim=1)  # [B, M+T]
        visible = band_mask(memory_length, length, self.window, include_self=False, device=inputs.device)
        similarities = full_precision(torch.bmm(features, keys.transpose(1, 2)))
        hits = (key_targets.unsqueeze(1) == targets.unsqueeze(2)) & visible
        log_vocab = self.lstm.core.log_vocab(features)
        keep = min(self.window, memory_length + length)
        new_state = CacheState(core_state, keys[:, -keep:], key_targets[:, -keep:])
        return log_vocab, similarities, visible, hits, new_state

    def forward(
        self,
        inputs: Tensor,
        targets: Tensor,
        state: CacheState,
        generator: torch.Generator | None = None,
        distribution_rows: Tensor | None = None,
        analyze: bool = False,
    ) -> LMOutput:
        """Score one chunk (arguments as :meth:`ZoneoutLSTM.forward`; no training).

        With ``analyze``, ``analysis`` holds ``attention`` ``[B, T, M+T]`` (the cache's weight on
        each key) and ``key_targets`` ``[B, M+T]``.
        """
        log_vocab, similarities, visible, hits, new_state = self.encode(inputs, targets, state, generator)
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
            analysis = {"attention": log_weights.exp(), "key_targets": key_targets}
        return LMOutput(target_log_probs, new_state, distributions, analysis=analysis)


def cache_log_weights(similarities: Tensor, theta: float | Tensor, visible: Tensor) -> Tensor:
    """Log of ``softmax_i(theta h_t . h_i)`` over each position's window.

    ``similarities`` ``[..., T, K]``; ``visible`` bool ``[T, K]``. Keys outside the window, and
    every key of a position whose window is empty, get ``-inf`` (never NaN, whatever ``theta``).
    """
    empty = ~visible.any(dim=-1, keepdim=True)  # [T, 1]
    scaled = (similarities * theta).masked_fill(~visible, float("-inf")).masked_fill(empty, 0.0)
    return torch.log_softmax(scaled, dim=-1).masked_fill(~visible, float("-inf"))


def mix(log_vocab: Tensor, log_cache: Tensor, interpolation: float | Tensor, has_cache: Tensor) -> Tensor:
    """``log((1 - lambda) p_vocab + lambda p_cache)``; ``log p_vocab`` where ``has_cache`` is false
    (``has_cache`` ``[T]`` broadcasts against the trailing axis)."""
    interpolation = torch.as_tensor(interpolation, dtype=log_vocab.dtype, device=log_vocab.device)
    mixed = torch.logaddexp(torch.log1p(-interpolation) + log_vocab, torch.log(interpolation) + log_cache)
    return torch.where(has_cache, mixed, log_vocab)
