"""The zoneout + variational-dropout LSTM language model (Merity et al. 2016, Tables 2 and 3).

As a harness plugin: ``python -m harness eval baselines.zoneout_lstm --dataset ptb`` (loads the
checkpoint ``python -m baselines train zoneout_lstm --dataset ptb`` wrote; ``--checkpoint CKPT``
for any other).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from torch import Tensor, nn

from baselines.recurrent import CoreConfig, LayerState, LSTMCore, full_precision


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


class ZoneoutLSTM(nn.Module):
    """Multi-layer LSTM LM with zoneout on ``h`` and ``c`` and locked dropout.

    State: a list with one ``(h, c)`` pair (each ``[B, H]``) per layer.
    """

    kind = "zoneout_lstm"

    def __init__(self, config: CoreConfig) -> None:
        super().__init__()
        self.config = config
        self.core = LSTMCore(config)

    def initial_state(self, batch_size: int, device: torch.device | str) -> list[LayerState]:
        return self.core.initial_state(batch_size, device)

    def restore_state(self, saved: list) -> list[LayerState]:
        """The state from its checkpointed form (nested lists of tensors)."""
        return [(h, c) for h, c in saved]

    def forward(self, inputs: Tensor, targets: Tensor, state: list[LayerState],
                generator: torch.Generator | None = None,
                distribution_rows: Tensor | None = None, analyze: bool = False) -> LMOutput:
        """Score one chunk.

        Args:
            inputs, targets: int64 ``[B, T]``.
            state: the carried state (see the class docstring).
            generator: draws dropout/zoneout masks (training); None evaluates deterministically.
            distribution_rows: bool ``[B, T]``; also return the full log-distribution there.
            analyze: unused here (the plain LSTM has no gate or attention to report).
        """
        features, new_state = self.core(inputs, state, generator)
        log_probs = torch.log_softmax(full_precision(self.core.logits(features)), dim=-1)  # [B, T, V]
        return LMOutput(
            target_log_probs=log_probs.gather(2, targets.unsqueeze(2)).squeeze(2),
            state=new_state,
            distributions=select_rows(log_probs, distribution_rows),
        )


def load_model(dataset: Any, *, device: str, checkpoint: str | None) -> Any:
    """Harness factory: the trained zoneout LSTM for ``dataset`` (see the module docstring)."""
    from baselines.scoring import load_plugin_model

    return load_plugin_model(ZoneoutLSTM.kind, dataset, device=device, checkpoint=checkpoint)
