"""Fitting the Pointer Sentinel-LSTM's sentinel bias (:mod:`baselines.calibration`)."""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from baselines.calibration import FINE_STEP, fit_sentinel_shift, mixture_parts, shifted_log_probs
from baselines.models import PointerConfig, PointerSentinelLSTM

EOS = 0


def pointer(sentinel_bias: float = 0.0) -> PointerSentinelLSTM:
    torch.manual_seed(3)
    config = PointerConfig(
        vocab_size=9, embedding_size=6, hidden_size=6, window=5, sentinel_bias=sentinel_bias
    )
    return PointerSentinelLSTM(config)


def parts_of(model: PointerSentinelLSTM, ids: np.ndarray) -> np.ndarray:
    return mixture_parts(model, ids, eos_id=EOS, batch_size=3, bptt=7, progress=False)


def test_the_parts_give_the_models_own_probabilities(float64):
    ids = np.random.default_rng(0).integers(0, 9, size=200)
    model = pointer()
    parts = parts_of(model, ids)
    assert parts.shape == (4, 200)  # every token once (the first predicted after an <eos>)
    log_gate, log_pointer_total = parts[0], parts[1]
    np.testing.assert_allclose(np.exp(log_gate) + np.exp(log_pointer_total), 1.0, atol=1e-12)
    with torch.no_grad():
        model.eval()
        inputs = torch.from_numpy(np.concatenate([[EOS], ids[:-1]])).view(1, -1)
        targets = torch.from_numpy(ids).view(1, -1)
        direct = model(inputs, targets, model.initial_state(1, "cpu")).target_log_probs
    one_stream = mixture_parts(model, ids, eos_id=EOS, batch_size=1, bptt=1000, progress=False)
    np.testing.assert_allclose(shifted_log_probs(one_stream, 0.0), direct[0].numpy(), atol=1e-12)


def test_the_fitted_shift_is_the_best_and_a_calibrated_model_needs_none(float64):
    rng = np.random.default_rng(3)
    ids = np.tile(rng.integers(1, 9, size=7), 90)[:600]  # a phrase repeated, 30% of it replaced
    noise = rng.random(600) < 0.3
    ids[noise] = rng.integers(0, 9, size=int(noise.sum()))
    parts = parts_of(pointer(), ids)
    shift = fit_sentinel_shift(parts)
    assert -9 < shift < 9 and abs(shift) > 0.1  # an inner optimum, away from the start
    fitted = shifted_log_probs(parts, shift).mean()
    for other in np.arange(-12, 12, 0.05):
        assert shifted_log_probs(parts, other).mean() <= fitted + 1e-12

    calibrated = pointer(sentinel_bias=shift)
    again = parts_of(calibrated, ids)
    np.testing.assert_allclose(shifted_log_probs(again, 0.0), shifted_log_probs(parts, shift), atol=1e-10)
    assert abs(fit_sentinel_shift(again)) <= FINE_STEP + 1e-9


def test_a_calibrated_config_round_trips():
    config = PointerConfig(vocab_size=9, sentinel_bias=-2.5)
    assert PointerConfig(**dataclasses.asdict(config)) == config
    assert PointerConfig(vocab_size=9).sentinel_bias == 0.0


def test_dropout_on_scores_the_model_as_training_sees_it(float64):
    ids = np.random.default_rng(2).integers(0, 9, size=100)
    model = pointer()
    off = parts_of(model, ids)
    on = mixture_parts(model, ids, eos_id=EOS, batch_size=3, bptt=7, progress=False, dropout=True)
    assert not np.allclose(on, off)
    plain = dataclasses.replace(model.config, dropout=0.0, zoneout_hidden=0.0, zoneout_cell=0.0)
    without = PointerSentinelLSTM(plain)
    without.load_state_dict(model.state_dict())
    on = mixture_parts(without, ids, eos_id=EOS, batch_size=3, bptt=7, progress=False, dropout=True)
    np.testing.assert_allclose(on, parts_of(without, ids))
