"""The zoneout + variational-dropout LSTM language model (Merity et al. 2016, Tables 2 and 3)."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from baselines.models.common import LMOutput, select_rows
from baselines.models.recurrent import CoreConfig, LayerState, LSTMCore
from baselines.models.sampled_softmax import VocabularySample


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

    def forward(
        self,
        inputs: Tensor,
        targets: Tensor,
        state: list[LayerState],
        generator: torch.Generator | None = None,
        distribution_rows: Tensor | None = None,
        analyze: bool = False,
        vocab_sample: VocabularySample | None = None,
    ) -> LMOutput:
        """Score one chunk.

        Args:
            inputs, targets: int64 ``[B, T]``.
            state: the carried state (see the class docstring).
            generator: draws the dropout and zoneout masks in training mode (None: torch's default
                generator); evaluation mode (``model.eval()``) is deterministic and ignores it.
            distribution_rows: bool ``[B, T]``; also return the full log-distribution there.
            analyze: unused here (the plain LSTM has no gate or attention to report).
            vocab_sample: in training, score the targets with this sampled softmax instead of the
                full one (no ``distribution_rows`` then).
        """
        features, new_state = self.core(inputs, state, generator)
        if vocab_sample is not None:
            if distribution_rows is not None:
                raise ValueError("a sampled softmax has no full distributions to return")
            return LMOutput(self.core.sampled_target_log_vocab(features, targets, vocab_sample), new_state)
        if distribution_rows is None:
            return LMOutput(self.core.target_log_vocab(features, targets), new_state)
        log_probs = self.core.log_vocab(features)  # [B, T, V]
        return LMOutput(
            target_log_probs=log_probs.gather(2, targets.unsqueeze(2)).squeeze(2),
            state=new_state,
            distributions=select_rows(log_probs, distribution_rows),
        )
