"""The baselines' models on tiny shapes: exactness against the naive references, causality,
normalization, gradients, determinism."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import reference_models
import torch

from baselines.calibration import shifted_log_probs
from baselines.models import (
    CoreConfig,
    NeuralCache,
    PointerConfig,
    PointerSentinelLSTM,
    ZoneoutLSTM,
    recurrent,
)
from baselines.models.recurrent import (
    ZoneoutLSTMLayer,
    ZoneoutRecurrence,
    linear,
    lstm_step,
    lstm_step_backward,
    target_log_softmax,
)
from baselines.plugin_bridge import TorchLanguageModel
from harness.evaluate import evaluate
from harness.protocol import EvaluationProtocol
from harness.streams import stream_bounds

VOCAB = 13
EOS = 0
SIZES = {
    "vocab_size": VOCAB,
    "embedding_size": 6,
    "hidden_size": 7,
    "num_layers": 2,
    "dropout": 0.3,
    "zoneout_hidden": 0.2,
    "zoneout_cell": 0.15,
}


def _ids(length: int, seed: int = 0) -> np.ndarray:
    # Few types, so the pointer and the cache find plenty of repeats.
    return np.random.default_rng(seed).integers(0, 5, size=length).astype(np.int64)


def make(kind: str, *, window: int = 4, seed: int = 0, theta: float = 0.7, **overrides):
    torch.manual_seed(seed)
    sizes = {**SIZES, **overrides}
    if kind == "lstm":
        return ZoneoutLSTM(CoreConfig(**sizes))
    if kind == "pointer":
        return PointerSentinelLSTM(PointerConfig(**sizes, window=window))
    lstm = ZoneoutLSTM(CoreConfig(**sizes))
    return NeuralCache(lstm, window=window, theta=theta, interpolation=0.3)


REFERENCES = {
    "lstm": reference_models.lstm_log_probs,
    "pointer": reference_models.pointer_log_probs,
    "cache": reference_models.cache_log_probs,
}


@pytest.mark.parametrize("kind", ["lstm", "pointer", "cache"])
@pytest.mark.parametrize("batch_size,bptt", [(1, 5), (3, 4), (2, 50)])
def test_vectorized_models_equal_the_naive_reference(float64, kind, batch_size, bptt):
    model = make(kind)
    ids = _ids(37)
    scorer = TorchLanguageModel(model, "cpu")
    result = evaluate(
        scorer,
        ids,
        eos_id=EOS,
        vocab_size=VOCAB,
        progress=False,
        protocol=EvaluationProtocol(batch_size=batch_size, bptt=bptt, audit_positions=5),
    )
    inputs = np.concatenate([[EOS], ids[:-1]])
    starts, lengths = stream_bounds(len(ids), batch_size)
    expected = np.concatenate(
        [
            REFERENCES[kind](model, inputs[s : s + n].tolist(), ids[s : s + n].tolist())
            for s, n in zip(starts, lengths)
        ]
    )
    np.testing.assert_allclose(result.token_log_probs, expected, atol=1e-5, rtol=0)
    assert result.audit.checked == 5 and result.audit.max_sum_error < 1e-9


def test_cache_with_theta_zero_is_uniform_over_the_window(float64):
    cache = make("cache", theta=0.0)
    ids = _ids(23, seed=7)
    result = evaluate(
        TorchLanguageModel(cache, "cpu"),
        ids,
        eos_id=EOS,
        vocab_size=VOCAB,
        progress=False,
        protocol=EvaluationProtocol(bptt=6),
    )
    inputs = np.concatenate([[EOS], ids[:-1]])
    expected = reference_models.cache_log_probs(cache, inputs.tolist(), ids.tolist())
    np.testing.assert_allclose(result.token_log_probs, expected, atol=1e-5, rtol=0)


@pytest.mark.parametrize("kind", ["lstm", "pointer", "cache"])
def test_no_future_leakage(kind):
    model = make(kind).eval()
    ids = torch.from_numpy(_ids(30, seed=1))
    inputs, targets = ids[:-1].unsqueeze(0), ids[1:].unsqueeze(0)
    changed_inputs, changed_targets = inputs.clone(), targets.clone()
    cut = 17  # everything after position 17 changes; the target at 17 stays
    changed_inputs[0, cut + 1 :] = (changed_inputs[0, cut + 1 :] + 1) % VOCAB
    changed_targets[0, cut + 1 :] = (changed_targets[0, cut + 1 :] + 2) % VOCAB
    with torch.no_grad():
        first = model(inputs, targets, model.initial_state(1, "cpu")).target_log_probs
        second = model(changed_inputs, changed_targets, model.initial_state(1, "cpu")).target_log_probs
    torch.testing.assert_close(first[0, : cut + 1], second[0, : cut + 1], rtol=0, atol=0)
    assert not torch.equal(first[0, cut + 1 :], second[0, cut + 1 :])


@pytest.mark.parametrize("kind", ["pointer", "cache"])
def test_mixture_distributions_sum_to_one_and_match_targets(float64, kind):
    model = make(kind).eval()
    ids = torch.from_numpy(_ids(26, seed=2))
    inputs, targets = ids[:-1].view(1, -1), ids[1:].view(1, -1)
    everywhere = torch.ones_like(inputs, dtype=torch.bool)
    with torch.no_grad():
        output = model(inputs, targets, model.initial_state(1, "cpu"), distribution_rows=everywhere)
    sums = output.distributions.exp().sum(dim=1)
    torch.testing.assert_close(sums, torch.ones_like(sums), rtol=0, atol=1e-12)
    from_rows = output.distributions.gather(1, targets.view(-1, 1)).view(1, -1)
    torch.testing.assert_close(from_rows, output.target_log_probs, rtol=0, atol=1e-12)


def test_pointer_gradients_reach_sentinel_query_and_embeddings():
    model = make("pointer").train()
    ids = torch.from_numpy(_ids(41, seed=3)).view(1, -1)
    state = model.initial_state(1, "cpu")
    generator = torch.Generator().manual_seed(0)
    for begin in (0, 20):  # the second chunk attends over the carried window too
        chunk = ids[:, begin : begin + 21]
        output = model(chunk[:, :-1], chunk[:, 1:], state, generator)
        loss = -output.target_log_probs.mean() + output.auxiliary_loss.mean()
        model.zero_grad()
        loss.backward()
        state = output.state
        state = type(state)(
            [(h.detach(), c.detach()) for h, c in state.core], state.memory.detach(), state.memory_ids
        )
        for name in (
            "sentinel",
            "query.weight",
            "query.bias",
            "core.embedding.weight",
            "core.layers.0.weight_hh",
        ):
            gradient = model.get_parameter(name).grad
            assert gradient is not None and gradient.abs().sum() > 0, name
            assert torch.isfinite(gradient).all(), name


def test_pointer_loss_is_the_papers():
    model = make("pointer").eval()
    ids = torch.from_numpy(_ids(15, seed=4)).view(1, -1)
    with torch.no_grad():
        output = model(ids[:, :-1], ids[:, 1:], model.initial_state(1, "cpu"), analyze=True)
    gate = output.analysis["gate"][0]
    attention, window_ids = output.analysis["attention"][0], output.analysis["window_ids"][0]
    hits = (window_ids == ids[0, 1:].unsqueeze(1)).float()
    expected = -torch.log(gate + (attention * hits).sum(dim=1))
    torch.testing.assert_close(output.auxiliary_loss[0], expected, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(attention.sum(dim=1) + gate, torch.ones_like(gate))


def test_zoneout_is_deterministic_at_evaluation_and_random_in_training():
    model = make("lstm")
    ids = torch.from_numpy(_ids(21, seed=5)).view(1, -1)
    inputs, targets = ids[:, :-1], ids[:, 1:]
    model.eval()
    with torch.no_grad():
        runs = [model(inputs, targets, model.initial_state(1, "cpu")).target_log_probs for _ in range(2)]
        torch.testing.assert_close(runs[0], runs[1], rtol=0, atol=0)
        model.train()
        trained = [
            model(
                inputs, targets, model.initial_state(1, "cpu"), torch.Generator().manual_seed(seed)
            ).target_log_probs
            for seed in (1, 1, 2)
        ]
    torch.testing.assert_close(trained[0], trained[1], rtol=0, atol=0)  # same seed, same masks
    assert not torch.allclose(trained[0], trained[2])
    assert not torch.allclose(trained[0], runs[0])


@pytest.mark.parametrize("kind", ["lstm", "pointer", "cache"])
def test_dropout_follows_train_and_eval_modes(kind):
    """As with ``torch.nn``: ``eval()`` never drops out, whatever generator is passed; ``train()``
    draws masks, chosen by the generator (torch's default one when none is passed)."""
    model = make(kind)
    ids = torch.from_numpy(_ids(21, seed=8)).view(1, -1)
    inputs, targets = ids[:, :-1], ids[:, 1:]

    def run(generator=None):
        with torch.no_grad():
            return model(inputs, targets, model.initial_state(1, "cpu"), generator).target_log_probs

    model.eval()
    plain = run()
    for generator in (torch.Generator().manual_seed(1), torch.Generator().manual_seed(2)):
        torch.testing.assert_close(run(generator), plain, rtol=0, atol=0)
    model.train()
    assert torch.equal(run(torch.Generator().manual_seed(1)), run(torch.Generator().manual_seed(1)))
    assert not torch.equal(run(torch.Generator().manual_seed(1)), run(torch.Generator().manual_seed(2)))
    assert not torch.allclose(run(torch.Generator().manual_seed(1)), plain)
    torch.manual_seed(3)
    first = run()
    torch.manual_seed(3)
    assert torch.equal(run(), first) and not torch.allclose(first, plain)


def test_zoneout_layer_without_zoneout_equals_torch_lstm():
    torch.manual_seed(0)
    layer = ZoneoutLSTMLayer(5, 6)
    reference = torch.nn.LSTM(5, 6, batch_first=True)
    with torch.no_grad():
        reference.weight_ih_l0.copy_(layer.weight_ih)
        reference.weight_hh_l0.copy_(layer.weight_hh)
        reference.bias_ih_l0.copy_(layer.bias)
        reference.bias_hh_l0.zero_()
    x = torch.randn(3, 9, 5)
    h0, c0 = torch.randn(3, 6), torch.randn(3, 6)
    outputs, (h, c) = layer(x, (h0, c0), 0.0, 0.0, None)
    expected, (h_ref, c_ref) = reference(x, (h0.unsqueeze(0), c0.unsqueeze(0)))
    torch.testing.assert_close(outputs, expected)
    torch.testing.assert_close(h, h_ref[0])
    torch.testing.assert_close(c, c_ref[0])


def test_zoneout_training_masks_keep_previous_values():
    torch.manual_seed(0)
    layer = ZoneoutLSTMLayer(4, 5)
    x = torch.randn(2, 6, 4)
    state = (torch.zeros(2, 5), torch.zeros(2, 5))
    # Zoneout probability near 1: almost every unit keeps its previous (zero) value.
    outputs, _ = layer(x, state, 0.999, 0.999, torch.Generator().manual_seed(0))
    assert (outputs == 0).float().mean() > 0.95


def test_the_sentinel_bias_moves_the_gate_as_calibration_computes_it(float64):
    """A model whose sentinel scores carry a bias ``d`` gives each target the probability that
    :func:`shifted_log_probs` computes from the unbiased model's mixture parts."""
    ids = torch.from_numpy(_ids(30, seed=5)).view(2, -1)
    inputs, targets = ids[:, :-1], ids[:, 1:]
    plain = make("pointer", window=6).eval()
    biased = PointerSentinelLSTM(dataclasses.replace(plain.config, sentinel_bias=-1.7))
    biased.load_state_dict(plain.state_dict())
    biased.eval()
    with torch.no_grad():
        output = plain(inputs, targets, plain.initial_state(2, "cpu"), analyze=True)
        shifted = biased(inputs, targets, biased.initial_state(2, "cpu")).target_log_probs
    analysis = output.analysis
    mixed = torch.logaddexp(analysis["gate"].log() + analysis["vocab_log_prob"], analysis["pointer_log_prob"])
    torch.testing.assert_close(mixed, output.target_log_probs)
    parts = torch.stack(
        [
            analysis["gate"].log(),
            analysis["attention"].sum(-1).log(),
            analysis["vocab_log_prob"],
            analysis["pointer_log_prob"],
        ]
    ).flatten(1)
    expected = shifted_log_probs(parts.numpy(), -1.7)
    np.testing.assert_allclose(shifted.flatten().numpy(), expected, rtol=1e-10, atol=1e-10)
    assert not np.allclose(expected, output.target_log_probs.flatten().numpy())


def test_the_sentinel_bias_must_be_finite():
    with pytest.raises(ValueError, match="sentinel_bias must be finite"):
        PointerConfig(**SIZES, sentinel_bias=float("nan"))


@pytest.mark.parametrize("theta, interpolation", [(-1.0, 0.3), (float("nan"), 0.3), (0.7, 1.0), (0.7, -0.1)])
def test_the_cache_refuses_settings_that_are_no_distribution(theta, interpolation):
    """A negative or undefined flatness, or a lambda outside [0, 1): the mixture would not be a
    distribution, or would not be the cache's."""
    with pytest.raises(ValueError, match="neural cache: (theta|interpolation)"):
        NeuralCache(make("lstm"), window=4, theta=theta, interpolation=interpolation)


def test_analysis_attention_matches_the_window():
    model = make("pointer", window=3).eval()
    ids = torch.tensor([[1, 2, 3, 4, 1, 2]])
    with torch.no_grad():
        output = model(ids[:, :-1], ids[:, 1:], model.initial_state(1, "cpu"), analyze=True)
    window_ids = output.analysis["window_ids"][0]
    assert window_ids.tolist() == [[-1, -1, 1], [-1, 1, 2], [1, 2, 3], [2, 3, 4], [3, 4, 1]]
    assert (output.analysis["attention"][0][window_ids < 0] == 0).all()


@pytest.mark.slow
def test_compiled_step_equals_eager():
    """The ``torch.compile`` path the GPU trains with (about a minute of compiling on CPU), in
    training and in evaluation, with more than one stream (the gates are then column slices)."""
    torch.manual_seed(0)
    model = make("lstm")
    ids = torch.from_numpy(_ids(16, seed=6)).view(2, -1)
    inputs, targets = ids[:, :-1], ids[:, 1:]
    runs = []
    for compiled in (False, True):
        if compiled:
            model.core.compile_step()
        output = model.train()(
            inputs, targets, model.initial_state(2, "cpu"), torch.Generator().manual_seed(3)
        )
        model.zero_grad()
        output.target_log_probs.sum().backward()
        with torch.inference_mode():
            evaluation = model.eval()(inputs, targets, model.initial_state(2, "cpu"))
        runs.append(
            (
                output.target_log_probs.detach(),
                model.core.layers[0].weight_hh.grad.clone(),
                evaluation.target_log_probs,
            )
        )
    for eager, compiled in zip(*runs):
        torch.testing.assert_close(eager, compiled)


def _autograd_layer(layer: ZoneoutLSTMLayer, x, state, zone_h, zone_c):
    """The layer's recurrence written step by step for autograd: the reference for its
    hand-written backward pass. ``zone_*``: ``[T, B, H]``."""
    h, c = state
    outputs = []
    for t in range(x.shape[1]):
        gates = x[:, t] @ layer.weight_ih.t() + layer.bias + h @ layer.weight_hh.t()
        i, f, g, o = gates.chunk(4, dim=1)
        candidate_c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        candidate_h = torch.sigmoid(o) * torch.tanh(candidate_c)
        h = zone_h[t] * h + (1 - zone_h[t]) * candidate_h
        c = zone_c[t] * c + (1 - zone_c[t]) * candidate_c
        outputs.append(h)
    return torch.stack(outputs, dim=1), (h, c)


@pytest.mark.parametrize("training", [True, False])
def test_the_hand_written_backward_pass_equals_autograd(training):
    torch.manual_seed(0)
    layer = ZoneoutLSTMLayer(5, 6).double().train(training)
    x = torch.randn(3, 7, 5, dtype=torch.float64, requires_grad=True)
    h0 = torch.randn(3, 6, dtype=torch.float64, requires_grad=True)
    c0 = torch.randn(3, 6, dtype=torch.float64, requires_grad=True)
    outputs, (h, c) = layer(x, (h0, c0), 0.3, 0.4, torch.Generator().manual_seed(5))
    if training:  # the masks the layer drew, drawn again
        generator = torch.Generator().manual_seed(5)
        zone_h, zone_c = ((torch.rand(7, 3, 6, generator=generator) < p).double() for p in (0.3, 0.4))
    else:
        zone_h, zone_c = (
            torch.full((7, 3, 6), 0.3, dtype=torch.float64),
            torch.full((7, 3, 6), 0.4, dtype=torch.float64),
        )
    expected, (h_ref, c_ref) = _autograd_layer(layer, x, (h0, c0), zone_h, zone_c)
    weights = torch.randn_like(outputs), torch.randn_like(h), torch.randn_like(c)
    tensors = [x, h0, c0, *layer.parameters()]

    def gradients(out, final_h, final_c):
        loss = (out * weights[0]).sum() + (final_h * weights[1]).sum() + (final_c * weights[2]).sum()
        return torch.autograd.grad(loss, tensors)

    torch.testing.assert_close(outputs, expected)
    for mine, reference in zip(gradients(outputs, h, c), gradients(expected, h_ref, c_ref)):
        torch.testing.assert_close(mine, reference)


def test_the_recurrence_passes_gradcheck():
    torch.manual_seed(1)
    double = {"dtype": torch.float64, "requires_grad": True}
    input_part, h0, c0 = (
        torch.randn(4, 2, 12, **double),
        torch.randn(2, 3, **double),
        torch.randn(2, 3, **double),
    )
    weight = torch.randn(12, 3, **double)
    zone_h = torch.empty(4, 2, 3, dtype=torch.float64).bernoulli_(0.5)
    zone_c = torch.full((), 0.2, dtype=torch.float64).expand(4, 2, 3)

    def run(*args):
        return ZoneoutRecurrence.apply(*args, zone_h, zone_c, (lstm_step, lstm_step_backward))

    assert torch.autograd.gradcheck(run, (input_part, h0, c0, weight))


def test_bfloat16_autocast_trains_close_to_float32():
    """Under autocast the recurrent matmuls run in bfloat16, the state stays float32."""
    torch.manual_seed(0)
    layer = ZoneoutLSTMLayer(8, 16)
    x, state = torch.randn(4, 10, 8), (torch.zeros(4, 16), torch.zeros(4, 16))
    runs = []
    for amp in (False, True):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
            outputs, (h, c) = layer(x, state, 0.1, 0.1, torch.Generator().manual_seed(2))
        assert outputs.dtype == h.dtype == c.dtype == torch.float32
        (weight_grad,) = torch.autograd.grad(outputs.square().sum(), [layer.weight_hh])
        runs.append((outputs, weight_grad))
    torch.testing.assert_close(runs[1][0], runs[0][0], atol=0.03, rtol=0.03)
    torch.testing.assert_close(runs[1][1], runs[0][1], atol=0.05 * runs[0][1].abs().max().item(), rtol=0.05)


def test_linear_equals_torchs_and_passes_gradcheck():
    torch.manual_seed(0)
    double = {"dtype": torch.float64, "requires_grad": True}
    x, weight, bias = torch.randn(2, 3, 5, **double), torch.randn(4, 5, **double), torch.randn(4, **double)
    torch.testing.assert_close(linear(x, weight, bias), torch.nn.functional.linear(x, weight, bias))
    assert torch.autograd.gradcheck(linear, (x, weight, bias))


def test_linear_under_autocast_computes_in_bfloat16_and_returns_float32_gradients():
    torch.manual_seed(0)
    x, weight, bias = (torch.randn(*shape, requires_grad=True) for shape in ((6, 5), (4, 5), (4,)))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        mine, reference = linear(x, weight, bias), torch.nn.functional.linear(x, weight, bias)
    assert mine.dtype == reference.dtype == torch.bfloat16
    torch.testing.assert_close(mine, reference)
    upstream = torch.randn(6, 4)
    gradients = [
        torch.autograd.grad(out.float().mul(upstream).sum(), (x, weight, bias)) for out in (mine, reference)
    ]
    for ours, torchs in zip(*gradients):
        assert ours.dtype == torch.float32
        torch.testing.assert_close(ours, torchs, atol=0.05, rtol=0.02)


@pytest.mark.parametrize("amp", [False, True])
@pytest.mark.parametrize("fused", [False, True])
def test_the_weight_gradient_reaches_autograd_in_the_weights_layout(amp, fused):
    """A transposed gradient would cost a copy into the weight's layout, and for tied weights a
    strided sum with the embedding's gradient first (docs/measurements.md)."""
    weight = torch.randn(VOCAB, 5, requires_grad=True)
    arrived = []
    weight.register_hook(lambda grad: arrived.append(grad.stride()))
    x, bias = torch.randn(6, 5), torch.zeros(VOCAB)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
        if fused:
            scores = target_log_softmax(x, weight, bias, torch.randint(VOCAB, (6,)))
        else:
            scores = linear(x, weight, bias)
    scores.float().sum().backward()
    assert arrived == [weight.stride()]


@pytest.mark.parametrize("amp", [False, True])
def test_the_recurrent_weight_gradient_reaches_autograd_in_the_weights_layout(amp):
    layer = ZoneoutLSTMLayer(8, 16)
    arrived = []
    layer.weight_hh.register_hook(lambda grad: arrived.append(grad.stride()))
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
        outputs, _ = layer(torch.randn(4, 10, 8), (torch.zeros(4, 16), torch.zeros(4, 16)), 0.1, 0.1)
    outputs.float().sum().backward()
    assert arrived == [layer.weight_hh.stride()]


@pytest.mark.parametrize("rows", [5, 6])
def test_the_fused_target_log_softmax_equals_log_softmax_and_gather(monkeypatch, rows):
    """In float64, values and gradients, with blocks of two rows (the last one short for 5 rows)."""
    monkeypatch.setattr(recurrent, "_SOFTMAX_BLOCK_ELEMENTS", 2 * VOCAB)
    torch.manual_seed(0)
    double = {"dtype": torch.float64, "requires_grad": True}
    x, weight, bias = (
        torch.randn(rows, 2, 5, **double),
        torch.randn(VOCAB, 5, **double),
        torch.randn(VOCAB, **double),
    )
    targets, upstream = torch.randint(VOCAB, (rows, 2)), torch.randn(rows, 2, dtype=torch.float64)
    logits = torch.nn.functional.linear(x, weight, bias)
    reference = torch.log_softmax(logits, dim=-1).gather(2, targets.unsqueeze(2)).squeeze(2)
    fused = target_log_softmax(x, weight, bias, targets)
    torch.testing.assert_close(fused, reference)
    for ours, torchs in zip(
        torch.autograd.grad(fused.mul(upstream).sum(), (x, weight, bias)),
        torch.autograd.grad(reference.mul(upstream).sum(), (x, weight, bias)),
    ):
        torch.testing.assert_close(ours, torchs)


def test_the_fused_target_log_softmax_refuses_a_second_backward_pass():
    weight = torch.randn(VOCAB, 5, requires_grad=True)
    scores = target_log_softmax(torch.randn(3, 5), weight, torch.zeros(VOCAB), torch.tensor([0, 4, 12]))
    scores.sum().backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="cannot be run backward twice"):
        scores.sum().backward()


def _training_run(kind: str, amp: bool) -> list[torch.Tensor]:
    """One training-mode chunk of a fresh ``kind`` model (fixed masks): the target scores and the
    gradients of all parameters."""
    model = make(kind, seed=3).train()
    ids = torch.from_numpy(_ids(3 * 9, seed=5)).view(3, 9)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
        output = model(
            ids[:, :-1], ids[:, 1:], model.initial_state(3, "cpu"), torch.Generator().manual_seed(6)
        )
    parameters = [p for p in model.parameters() if p.requires_grad]
    return [output.target_log_probs, *torch.autograd.grad(output.target_log_probs.sum(), parameters)]


@pytest.mark.parametrize("kind", ["lstm", "pointer"])
@pytest.mark.parametrize("amp", [False, True])
def test_training_scores_alike_with_the_fused_and_the_plain_softmax(monkeypatch, kind, amp):
    runs = []
    for fused in (True, False):
        monkeypatch.setattr(recurrent.LSTMCore, "fuse_training_softmax", fused)
        runs.append(_training_run(kind, amp))
    # Under autocast the two round the logits' gradient to bfloat16 from float32 values that
    # differ in their last bits, so a few elements differ by one bfloat16 step.
    tolerance = {"atol": 0.01, "rtol": 0.02} if amp else {}
    for fast, plain in zip(*runs):
        torch.testing.assert_close(fast, plain, **tolerance)


@pytest.mark.parametrize("kind", ["lstm", "pointer"])
def test_only_training_takes_the_fused_softmax(monkeypatch, kind):
    calls = []

    def spy(*args):
        calls.append(args)
        return target_log_softmax(*args)

    monkeypatch.setattr(recurrent, "target_log_softmax", spy)
    model = make(kind)
    ids = torch.from_numpy(_ids(2 * 9)).view(2, 9)
    for training, expected_calls in ((False, 0), (True, 1)):
        model.train(training)
        model(ids[:, :-1], ids[:, 1:], model.initial_state(2, "cpu"))
        assert len(calls) == expected_calls


@pytest.mark.parametrize("kind", ["lstm", "pointer"])
def test_evaluation_scores_equal_those_returned_with_full_distributions(kind):
    """Bit for bit: the harness's causality audit compares the two passes exactly on a CPU."""
    model = make(kind).eval()
    ids = torch.from_numpy(_ids(2 * 9)).view(2, 9)
    inputs, targets = ids[:, :-1], ids[:, 1:]
    with torch.no_grad():
        alone = model(inputs, targets, model.initial_state(2, "cpu")).target_log_probs
        rows = torch.ones(2, 8, dtype=torch.bool)
        with_distributions = model(inputs, targets, model.initial_state(2, "cpu"), distribution_rows=rows)
    assert torch.equal(alone, with_distributions.target_log_probs)
