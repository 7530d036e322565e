"""A sampled softmax for training (Jean et al. 2015): the target's vocabulary log-probability with
the normalizer estimated from ``K`` sampled words instead of summed over all ``V``.

For the target ``y`` with logit ``z_y`` and ``K`` words ``s_1 .. s_K`` drawn with replacement
from a proposal ``Q``::

    log p(y) ~= z_y - log( exp(z_y) + sum_{k : s_k != y} exp(z_{s_k}) / (K Q(s_k)) )

The sum is an unbiased importance-sampling estimate of the normalizer's other words (draws of
``y`` itself, accidental hits, are dropped: its term is exact), so with the whole vocabulary
drawn once each at ``K Q = 1`` the estimate is the exact log-softmax. One draw serves every
position of a training step. The decoder then costs ``[B*T, D] x [D, K]`` instead of
``[B*T, D] x [D, V]``: on WikiText-2 (``V`` = 33,278) that was about three quarters of a
medium training step's arithmetic. Evaluation always uses the full softmax.

Shapes: ``B`` streams, ``T`` positions, ``D`` features, ``V`` words, ``K`` samples.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import torch
from torch import Tensor

#: The proposal is the training text's unigram distribution raised to this power (word2vec's
#: negative-sampling proposal): flatter than the unigram, so rare words are drawn more often.
UNIGRAM_POWER = 0.75


class VocabularySample(NamedTuple):
    """``K`` words drawn with replacement for one training step.

    Attributes:
        ids: int64 ``[K]``, the drawn words.
        log_expected: float ``[K]``, ``log(K Q(w))`` of each drawn word: how many times it is
            expected among the ``K`` draws.
    """

    ids: Tensor
    log_expected: Tensor


class UnigramSampler:
    """Draws :class:`VocabularySample` s from the smoothed training unigram ``(count + 1)^0.75``."""

    def __init__(self, train_ids: np.ndarray, vocab_size: int, size: int) -> None:
        """Args: ``train_ids`` the training text's word ids; ``size`` the ``K`` words per draw."""
        counts = np.bincount(train_ids, minlength=vocab_size).astype(np.float64) + 1.0
        proposal = counts**UNIGRAM_POWER
        self.probabilities = torch.from_numpy(proposal / proposal.sum())
        self.size = size

    def draw(
        self, generator: torch.Generator | None = None, device: torch.device | str = "cpu"
    ) -> VocabularySample:
        """``K`` words drawn with replacement (``generator`` on the CPU makes it reproducible)."""
        ids = torch.multinomial(self.probabilities, self.size, replacement=True, generator=generator)
        log_expected = torch.log(self.probabilities[ids]) + math.log(self.size)
        return VocabularySample(ids.to(device), log_expected.float().to(device))


def sampled_target_log_probs(
    features: Tensor, weight: Tensor, bias: Tensor, targets: Tensor, sample: VocabularySample
) -> Tensor:
    """The sampled-softmax estimate of ``log p_vocab(target)`` at every position.

    Args:
        features: ``[B, T, D]``, the decoder's input.
        weight, bias: the decoder's ``[V, D]`` and ``[V]``.
        targets: int64 ``[B, T]``.
        sample: the step's :class:`VocabularySample`.

    Returns: float32 ``[B, T]``.
    """
    target_logits = (features * weight[targets]).sum(-1) + bias[targets]  # [B, T]
    sampled_logits = features @ weight[sample.ids].t() + bias[sample.ids]  # [B, T, K]
    sampled_logits = sampled_logits.float() - sample.log_expected
    accidental_hits = sample.ids == targets.unsqueeze(-1)  # [B, T, K]
    sampled_logits = sampled_logits.masked_fill(accidental_hits, float("-inf"))
    target_logits = target_logits.float()
    normalizer = torch.logsumexp(torch.cat([target_logits.unsqueeze(-1), sampled_logits], dim=-1), dim=-1)
    return target_logits - normalizer
