"""Naive per-token reference implementations of the baselines, written from the papers' equations.

One token at a time, plain Python lists for the windows, float64 throughout: slow and obviously
right. The tests check the vectorized models against these to 1e-5; the benchmarks time the
neural cache against :func:`cache_log_probs`.
"""

from __future__ import annotations

import numpy as np
import torch

from baselines.models import LSTMCore, NeuralCache, PointerSentinelLSTM, ZoneoutLSTM


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _log_softmax(x: np.ndarray) -> np.ndarray:
    shifted = x - x.max()
    return shifted - np.log(np.exp(shifted).sum())


def _numpy(module: torch.nn.Module) -> dict[str, np.ndarray]:
    return {name: value.detach().double().numpy() for name, value in module.state_dict().items()}


def core_outputs(core: LSTMCore, inputs: list[int]) -> list[np.ndarray]:
    """Top-layer outputs of an evaluation-mode core, one token at a time (zoneout as its
    expectation: ``h = z h_prev + (1 - z) h_candidate``)."""
    weights = _numpy(core)
    config = core.config
    zone_h, zone_c = config.zoneout_hidden, config.zoneout_cell
    states = [(np.zeros(layer.hidden_size), np.zeros(layer.hidden_size)) for layer in core.layers]
    outputs = []
    for token in inputs:
        x = weights["embedding.weight"][token]
        for index in range(len(core.layers)):
            h, c = states[index]
            prefix = f"layers.{index}."
            gates = (
                weights[prefix + "weight_ih"] @ x
                + weights[prefix + "bias"]
                + weights[prefix + "weight_hh"] @ h
            )
            size = len(h)
            i, f, g, o = (gates[k * size : (k + 1) * size] for k in range(4))
            candidate_c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
            candidate_h = _sigmoid(o) * np.tanh(candidate_c)
            h = zone_h * h + (1 - zone_h) * candidate_h
            c = zone_c * c + (1 - zone_c) * candidate_c
            states[index] = (h, c)
            x = h
        outputs.append(x)
    return outputs


def _vocab_log_probs(core: LSTMCore, output: np.ndarray) -> np.ndarray:
    weights = _numpy(core)
    return _log_softmax(weights["decoder.weight"] @ output + weights["decoder.bias"])


def lstm_log_probs(model: ZoneoutLSTM, inputs: list[int], targets: list[int]) -> np.ndarray:
    """``log p(targets[t])`` for one stream."""
    outputs = core_outputs(model.core, inputs)
    return np.array([_vocab_log_probs(model.core, h)[y] for h, y in zip(outputs, targets)])


def pointer_distributions(model: PointerSentinelLSTM, inputs: list[int]) -> list[np.ndarray]:
    """The Pointer Sentinel mixture ``p(. | x_1..x_t)`` at every position of one stream."""
    weights = _numpy(model)
    outputs = core_outputs(model.core, inputs)
    window = model.config.window
    distributions = []
    for t, h in enumerate(outputs):
        query = np.tanh(weights["query.weight"] @ h + weights["query.bias"])
        start = max(0, t - window + 1)
        scores = [query @ outputs[i] for i in range(start, t + 1)] + [query @ weights["sentinel"]]
        attention = np.exp(_log_softmax(np.array(scores)))
        probs = attention[-1] * np.exp(_vocab_log_probs(model.core, h))
        for slot, i in enumerate(range(start, t + 1)):
            probs[inputs[i]] += attention[slot]
        distributions.append(probs)
    return distributions


def pointer_log_probs(model: PointerSentinelLSTM, inputs: list[int], targets: list[int]) -> np.ndarray:
    return np.array([np.log(p[y]) for p, y in zip(pointer_distributions(model, inputs), targets)])


def cache_log_probs(cache: NeuralCache, inputs: list[int], targets: list[int]) -> np.ndarray:
    """Grave et al.'s cache, one token at a time over a list of ``(h_i, x_{i+1})`` pairs."""
    outputs = core_outputs(cache.lstm.core, inputs)
    entries: list[tuple[np.ndarray, int]] = []
    log_probs = []
    for h, y in zip(outputs, targets):
        probs = np.exp(_vocab_log_probs(cache.lstm.core, h))
        if entries:
            weights = np.exp(_log_softmax(np.array([cache.theta * (h @ key) for key, _ in entries])))
            cached = np.zeros_like(probs)
            for (_, word), weight in zip(entries, weights):
                cached[word] += weight
            probs = (1 - cache.interpolation) * probs + cache.interpolation * cached
        log_probs.append(np.log(probs[y]))
        entries = (entries + [(h, y)])[-cache.window :]
    return np.array(log_probs)
