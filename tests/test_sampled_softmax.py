"""The sampled softmax that training may use instead of the full one."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from baselines.models import (
    CoreConfig,
    PointerConfig,
    PointerSentinelLSTM,
    UnigramSampler,
    VocabularySample,
    ZoneoutLSTM,
)
from baselines.models.sampled_softmax import sampled_target_log_probs

VOCAB = 50


def decoder(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Features ``[2, 3, 4]``, a decoder ``[V, 4]`` and ``[V]``, targets ``[2, 3]``."""
    generator = torch.Generator().manual_seed(seed)
    features = torch.randn(2, 3, 4, generator=generator)
    weight = torch.randn(VOCAB, 4, generator=generator)
    bias = torch.randn(VOCAB, generator=generator)
    targets = torch.randint(VOCAB, (2, 3), generator=generator)
    return features, weight, bias, targets


def exact(features, weight, bias, targets) -> torch.Tensor:
    log_probs = torch.log_softmax(features @ weight.t() + bias, dim=-1)
    return log_probs.gather(2, targets.unsqueeze(2)).squeeze(2)


def whole_vocabulary() -> VocabularySample:
    """Every word drawn once, each expected once: the estimate must be exact."""
    return VocabularySample(torch.arange(VOCAB), torch.zeros(VOCAB))


def test_drawing_every_word_once_gives_the_exact_log_softmax():
    features, weight, bias, targets = decoder()
    estimate = sampled_target_log_probs(features, weight, bias, targets, whole_vocabulary())
    torch.testing.assert_close(estimate, exact(features, weight, bias, targets))


def test_draws_of_the_target_itself_are_not_counted_twice():
    features, weight, bias, targets = decoder()
    only_targets = VocabularySample(targets.flatten(), torch.zeros(targets.numel()))
    estimate = sampled_target_log_probs(features, weight, bias, targets, only_targets)
    # Each position's normalizer holds its own target once and the other positions' targets.
    logits = features @ weight.t() + bias
    for b in range(2):
        for t in range(3):
            others = [int(word) for word in targets.flatten() if word != targets[b, t]]
            normalizer = torch.logsumexp(logits[b, t, [int(targets[b, t]), *others]], 0)
            assert estimate[b, t].item() == pytest.approx((logits[b, t, targets[b, t]] - normalizer).item())


def test_many_draws_from_the_proposal_approach_the_exact_log_softmax():
    features, weight, bias, targets = decoder()
    counts = np.arange(1, VOCAB + 1)[::-1]
    sampler = UnigramSampler(np.repeat(np.arange(VOCAB), counts), VOCAB, size=200_000)
    sample = sampler.draw(torch.Generator().manual_seed(1))
    estimate = sampled_target_log_probs(features, weight, bias, targets, sample)
    torch.testing.assert_close(estimate, exact(features, weight, bias, targets), rtol=0, atol=0.02)
    few = UnigramSampler(np.repeat(np.arange(VOCAB), counts), VOCAB, size=5).draw(
        torch.Generator().manual_seed(1)
    )
    assert not torch.allclose(
        sampled_target_log_probs(features, weight, bias, targets, few),
        exact(features, weight, bias, targets),
        atol=0.02,
    )


def test_the_proposal_is_the_smoothed_unigram_to_the_three_quarters_and_draws_are_reproducible():
    train_ids = np.array([0, 0, 0, 1, 2, 2])  # word 3 never occurs
    sampler = UnigramSampler(train_ids, 4, size=8)
    weights = np.array([4.0, 2.0, 3.0, 1.0]) ** 0.75
    np.testing.assert_allclose(sampler.probabilities.numpy(), weights / weights.sum())
    first, second = (sampler.draw(torch.Generator().manual_seed(7)) for _ in range(2))
    assert torch.equal(first.ids, second.ids)
    expected = np.log(8 * sampler.probabilities.numpy()[first.ids.numpy()])
    np.testing.assert_allclose(first.log_expected.numpy(), expected, rtol=1e-6)


CONFIG = CoreConfig(vocab_size=VOCAB, embedding_size=6, hidden_size=6, num_layers=2)


@pytest.mark.parametrize(
    "model",
    [
        lambda: ZoneoutLSTM(CONFIG),
        lambda: PointerSentinelLSTM(PointerConfig(**dataclasses.asdict(CONFIG), window=4)),
    ],
    ids=["zoneout_lstm", "pointer_sentinel"],
)
def test_both_models_score_the_whole_vocabulary_sample_as_the_full_softmax(model):
    torch.manual_seed(0)
    network = model().eval()
    inputs, targets = torch.randint(VOCAB, (2, 5)), torch.randint(VOCAB, (2, 5))
    state = network.initial_state(2, "cpu")
    full = network(inputs, targets, state)
    sampled = network(inputs, targets, state, vocab_sample=whole_vocabulary())
    torch.testing.assert_close(sampled.target_log_probs, full.target_log_probs)
    if full.auxiliary_loss is not None:
        torch.testing.assert_close(sampled.auxiliary_loss, full.auxiliary_loss)
    with pytest.raises(ValueError, match="no full distributions"):
        network(
            inputs,
            targets,
            state,
            distribution_rows=torch.ones(2, 5, dtype=torch.bool),
            vocab_sample=whole_vocabulary(),
        )
