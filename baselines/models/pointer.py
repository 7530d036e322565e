"""The Pointer Sentinel-LSTM (Merity et al. 2016).

A zoneout LSTM whose softmax is mixed with a pointer over the last ``L`` inputs::

    q_t = tanh(W o_t + b)                       # o_t: top-layer output at position t, [D]
    z_i = q_t . o_i    for the L positions i = t-L+1 .. t;    z_s = q_t . s + b   (sentinel)
    a   = softmax([z; z_s]);  g = a_s                          # the sentinel's share
    p(y) = g p_vocab(y) + sum_{i : x_i = y} a_i                # x_i: the input at position i

and trained on ``-log p(y) - log(g + sum_{i : x_i = y} a_i)`` (the paper's pointer loss).
The sentinel's bias ``b`` is not the paper's: it is 0 in training, and ``python -m baselines
calibrate`` sets it afterwards (:mod:`baselines.calibration`: dropout off, on the training text).

**Training differs from the paper's scheme, not its model.** The paper advances one token per
step (k1 = 1, k2 = L) so that every prediction attends over a full window of L outputs. Here
training is ordinary truncated BPTT over chunks of ``T`` positions; each chunk carries the
previous ``L`` outputs (detached) and their input ids, and one batched matmul with a banded
causal mask scores every position of the chunk against its own window of exactly ``L``
previous outputs. Every prediction sees the same window as in the paper, at the cost of a
normal epoch; the difference is that gradients do not flow into outputs of earlier chunks
(the paper backpropagates L steps from every position).
"""

from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple

import torch
from torch import Tensor, nn

from baselines.models.common import LMOutput, band_mask, masked_log_sum
from baselines.models.recurrent import CoreConfig, LayerState, LSTMCore, full_precision
from baselines.models.sampled_softmax import VocabularySample


@dataclasses.dataclass(frozen=True)
class PointerConfig(CoreConfig):
    """:class:`CoreConfig` plus the pointer window ``L`` and the sentinel's bias ``b`` (0 unless
    calibrated: :mod:`baselines.calibration`)."""

    window: int = 100
    sentinel_bias: float = 0.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.window < 1:
            raise ValueError(f"window must be >= 1, got {self.window}")
        if not math.isfinite(self.sentinel_bias):
            raise ValueError(f"sentinel_bias must be finite, got {self.sentinel_bias}")


class PointerState(NamedTuple):
    """What a stream carries across chunks.

    Attributes:
        core: one ``(h, c)`` per layer, each ``[B, H]``.
        memory: ``[B, M, D]`` top-layer outputs of the last ``M <= L`` positions.
        memory_ids: int64 ``[B, M]``, the inputs at those positions.
    """

    core: list[LayerState]
    memory: Tensor
    memory_ids: Tensor


class PointerSentinelLSTM(nn.Module):
    """The Pointer Sentinel-LSTM language model (state: :class:`PointerState`)."""

    kind = "pointer_sentinel"

    def __init__(self, config: PointerConfig) -> None:
        super().__init__()
        self.config = config
        self.core = LSTMCore(config)
        width = config.output_size
        self.query = nn.Linear(width, width)
        self.sentinel = nn.Parameter(torch.empty(width).uniform_(-0.1, 0.1))

    def pointer_parameters(self) -> list[nn.Parameter]:
        """The parameters of the pointer itself (the query projection and the sentinel)."""
        return [*self.query.parameters(), self.sentinel]

    def initial_state(self, batch_size: int, device: torch.device | str) -> PointerState:
        width = self.config.output_size
        return PointerState(
            self.core.initial_state(batch_size, device),
            torch.zeros(batch_size, 0, width, device=device),
            torch.zeros(batch_size, 0, dtype=torch.long, device=device),
        )

    def restore_state(self, saved: list) -> PointerState:
        """The state from its checkpointed form (nested lists of tensors)."""
        core, memory, memory_ids = saved
        return PointerState([(h, c) for h, c in core], memory, memory_ids)

    def forward(
        self,
        inputs: Tensor,
        targets: Tensor,
        state: PointerState,
        generator: torch.Generator | None = None,
        distribution_rows: Tensor | None = None,
        analyze: bool = False,
        vocab_sample: VocabularySample | None = None,
    ) -> LMOutput:
        """Score one chunk (arguments as :meth:`ZoneoutLSTM.forward`).

        With ``analyze``, ``analysis`` holds ``gate`` ``[B, T]`` (the sentinel share ``g``),
        ``attention`` ``[B, T, L]`` (the weight of each window slot, oldest first, zero where the
        stream has fewer than ``L`` previous positions), ``window_ids`` ``[B, T, L]`` (the
        input word in each slot, ``-1`` where empty) and the parts of the target's probability
        ``p(y) = g p_vocab(y) + p_pointer(y)`` besides ``g``, each ``[B, T]``: ``vocab_log_prob``
        (``log p_vocab(y)``) and ``pointer_log_prob`` (``log`` of the attention on the window
        slots holding ``y``, ``-inf`` where none does). With ``vocab_sample`` (training),
        ``log p_vocab(y)`` is its sampled-softmax estimate.
        """
        features, core_state = self.core(inputs, state.core, generator)  # [B, T, D]
        batch, length, _ = features.shape
        memory_length = state.memory.shape[1]
        keys = torch.cat([state.memory.to(features.dtype), features], dim=1)  # [B, M+T, D]
        key_ids = torch.cat([state.memory_ids, inputs], dim=1)  # [B, M+T]

        query = torch.tanh(self.query(features))  # [B, T, D]
        pointer_scores = full_precision(torch.bmm(query, keys.transpose(1, 2)))  # [B, T, M+T]
        visible = band_mask(
            memory_length, length, self.config.window, include_self=True, device=inputs.device
        )
        pointer_scores = pointer_scores.masked_fill(~visible, float("-inf"))
        sentinel_scores = full_precision(query @ self.sentinel.to(query.dtype)).unsqueeze(2)  # [B, T, 1]
        sentinel_scores = sentinel_scores + self.config.sentinel_bias
        log_attention = torch.log_softmax(torch.cat([pointer_scores, sentinel_scores], 2), dim=2)
        log_gate = log_attention[..., -1]  # [B, T]
        log_attention = log_attention[..., :-1]  # [B, T, M+T]

        if vocab_sample is not None:
            if distribution_rows is not None:
                raise ValueError("a sampled softmax has no full distributions to return")
            target_log_vocab = self.core.sampled_target_log_vocab(features, targets, vocab_sample)
        elif distribution_rows is None:
            target_log_vocab = self.core.target_log_vocab(features, targets)  # [B, T]
        else:
            log_vocab = self.core.log_vocab(features)  # [B, T, V]
            target_log_vocab = log_vocab.gather(2, targets.unsqueeze(2)).squeeze(2)
        hits = key_ids.unsqueeze(1) == targets.unsqueeze(2)  # [B, T, M+T]
        log_pointer = masked_log_sum(log_attention, hits & visible)  # [B, T]
        target_log_probs = torch.logaddexp(log_gate + target_log_vocab, log_pointer)
        pointer_loss = -torch.logaddexp(log_gate, log_pointer)

        distributions = None
        if distribution_rows is not None:
            rows = distribution_rows
            pointer_mass = torch.zeros(int(rows.sum()), log_vocab.shape[-1], device=inputs.device)
            row_ids = key_ids.unsqueeze(1).expand(batch, length, -1)[rows]  # [K, M+T]
            pointer_mass.scatter_add_(1, row_ids, log_attention[rows].exp())
            distributions = torch.log(
                log_gate[rows].exp().unsqueeze(1) * log_vocab[rows].exp() + pointer_mass
            )

        keep = min(self.config.window, memory_length + length)
        new_state = PointerState(core_state, keys[:, -keep:], key_ids[:, -keep:])
        analysis = None
        if analyze:
            analysis = self._analysis(log_gate, log_attention, key_ids, memory_length)
            analysis.update(vocab_log_prob=target_log_vocab, pointer_log_prob=log_pointer)
        return LMOutput(target_log_probs, new_state, distributions, pointer_loss, analysis)

    def _analysis(
        self, log_gate: Tensor, log_attention: Tensor, key_ids: Tensor, memory_length: int
    ) -> dict[str, Tensor]:
        """Gates and each position's attention over its ``L`` window slots, oldest first."""
        batch, length, _ = log_attention.shape
        window = self.config.window
        # Slot s of position t is key index M + t - L + 1 + s.
        slots = (
            torch.arange(length, device=key_ids.device).unsqueeze(1)
            + memory_length
            - window
            + 1
            + torch.arange(window, device=key_ids.device).unsqueeze(0)
        )  # [T, L]
        present = slots >= 0
        index = slots.clamp(min=0).unsqueeze(0).expand(batch, -1, -1)  # [B, T, L]
        attention = log_attention.exp().gather(2, index) * present
        window_ids = key_ids.unsqueeze(1).expand(batch, length, -1).gather(2, index)
        return {
            "gate": log_gate.exp(),
            "attention": attention,
            "window_ids": window_ids.masked_fill(~present, -1),
        }
