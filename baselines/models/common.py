"""What the baseline models share: their output record and the windowed attention over carried
memory that the pointer and the cache both use.

Shapes: ``B`` streams, ``T`` positions per chunk, ``M`` positions carried from earlier chunks,
``V`` vocabulary size.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from torch import Tensor


@dataclasses.dataclass
class LMOutput:
    """What a baseline's forward pass returns for one chunk.

    Attributes:
        target_log_probs: ``[B, T]`` natural-log probability of each target.
        state: the state to carry into the next chunk (not detached).
        distributions: ``[K, V]`` log-distributions at the ``K`` requested positions, or None.
        auxiliary_loss: ``[B, T]`` extra per-position training loss (the pointer loss), or None.
        analysis: model-specific per-position values (pointer gates, attention), when asked.
    """

    target_log_probs: Tensor
    state: Any
    distributions: Tensor | None = None
    auxiliary_loss: Tensor | None = None
    analysis: dict[str, Tensor] | None = None


def select_rows(values: Tensor, rows: Tensor | None) -> Tensor | None:
    """``values[rows]`` for a bool ``[B, T]`` mask over ``[B, T, ...]``; None when ``rows`` is."""
    return None if rows is None else values[rows]


def band_mask(
    memory_length: int, length: int, window: int, *, include_self: bool, device: torch.device
) -> Tensor:
    """Bool ``[T, M + T]``: the ``window`` keys each of ``T`` positions sees, in a sequence of
    ``M`` carried keys followed by the chunk's own (position ``t`` is key ``M + t``).

    With ``include_self`` position ``t`` sees keys ``M+t-window+1 .. M+t`` (the pointer, which
    attends over its own output too); without, keys ``M+t-window .. M+t-1`` (the cache, whose keys
    are the positions whose next word is already known).
    """
    query = torch.arange(length, device=device).unsqueeze(1) + memory_length
    key = torch.arange(memory_length + length, device=device).unsqueeze(0)
    newest = query if include_self else query - 1
    return (key <= newest) & (key > newest - window)


def masked_log_sum(log_weights: Tensor, selected: Tensor) -> Tensor:
    """``log(sum of exp(log_weights) where selected)`` over the last axis; ``-inf`` where nothing
    is selected. ``selected`` must only mark finite weights; the gradient is finite everywhere."""
    empty = ~selected.any(dim=-1, keepdim=True)
    safe = log_weights.masked_fill(~selected, float("-inf")).masked_fill(empty, 0.0)
    return torch.logsumexp(safe, dim=-1).masked_fill(empty.squeeze(-1), float("-inf"))
