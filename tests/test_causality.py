"""The causality audit: plugins that see the answer are rejected with one line naming the
position; honest plugins, stateless or stateful, pass."""

from __future__ import annotations

import math
import types
from pathlib import Path

import numpy as np
import pytest
from test_evaluate import TorchLSTM

from harness.datasets import load_dataset
from harness.evaluate import ACCELERATOR_CAUSALITY_TOLERANCE, causality_audit, evaluate
from harness.plugin import Chunk, ChunkScores, PluginError
from harness.plugins import unigram


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


class Bigram:
    """An honest stateful model: a random bigram table, carrying nothing but the last input.

    Subclasses leak in one way each, by overriding :meth:`log_dists` (``[B, T, V]``)."""

    def __init__(self, vocab_size: int, give_distributions: bool = True) -> None:
        rng = np.random.default_rng(0)
        self.table = _log_softmax(rng.normal(size=(vocab_size, vocab_size)))  # [V, V]
        self.give_distributions = give_distributions

    def reset(self, batch_size: int) -> None:
        pass

    def log_dists(self, chunk: Chunk) -> np.ndarray:
        return self.table[chunk.inputs]

    def score(self, chunk: Chunk) -> ChunkScores:
        log_dists = self.log_dists(chunk)
        targets = np.take_along_axis(log_dists, chunk.targets[..., None], axis=2)[..., 0]
        wanted = chunk.distribution_mask
        give = self.give_distributions and wanted is not None
        return ChunkScores(targets, log_dists[wanted] if give else None)


class ReadsCurrentTargets(Bigram):
    """Mixes a point mass on the target it is scoring into a normalised distribution."""

    def log_dists(self, chunk: Chunk) -> np.ndarray:
        mixed = 0.5 * np.exp(super().log_dists(chunk))
        np.put_along_axis(
            mixed,
            chunk.targets[..., None],
            np.take_along_axis(mixed, chunk.targets[..., None], axis=2) + 0.5,
            axis=2,
        )
        return np.log(mixed)


class ReadsLaterInputs(Bigram):
    """A "bidirectional" bigram: each position also reads the input two steps ahead, when the
    chunk has one (an off-by-one in the other direction)."""

    def log_dists(self, chunk: Chunk) -> np.ndarray:
        ahead = np.concatenate([chunk.inputs[:, 2:], chunk.inputs[:, -2:]], axis=1)
        return _log_softmax(super().log_dists(chunk) + self.table[ahead])


class NormalisesOverTheChunk(Bigram):
    """Normalises its features over the chunk's positions (a layer norm over time): every row
    sums to 1, but each depends on every input of the chunk."""

    def log_dists(self, chunk: Chunk) -> np.ndarray:
        features = super().log_dists(chunk)
        centred = features - features.mean(axis=1, keepdims=True)
        return _log_softmax(centred / (features.std(axis=1, keepdims=True) + 1e-6))


def _audit(model, dataset, **options):
    stream = dataset.tokens("test")
    return causality_audit(
        model,
        stream.ids,
        eos_id=dataset.vocab.eos_id,
        vocab_size=len(dataset.vocab),
        bptt=options.pop("bptt", 100),
        points=options.pop("points", 4),
        name="leaky",
        **options,
    )


@pytest.mark.parametrize(
    "plugin, give_distributions, message",
    [
        (
            ReadsCurrentTargets,
            True,
            r"the distribution at token (\d+) changes \(by [\d.e+-]+\) when token \1 or a later token",
        ),
        (
            ReadsCurrentTargets,
            False,
            r"the probabilities it gives 4 different values of token (\d+), each in its own run, sum "
            r"to [\d.]+ > 1: it reads the token it predicts",
        ),
        (ReadsLaterInputs, True, r"the log-probability of its target at token \d+ changes"),
        (ReadsLaterInputs, False, r"the log-probability of its target at token \d+ changes"),
        (NormalisesOverTheChunk, True, r"the log-probability of its target at token \d+ changes"),
        (NormalisesOverTheChunk, False, r"the log-probability of its target at token \d+ changes"),
    ],
)
def test_leaking_plugins_fail_with_one_line_naming_the_position(
    corpus: Path, plugin, give_distributions: bool, message: str
) -> None:
    dataset = load_dataset(str(corpus))
    model = plugin(len(dataset.vocab), give_distributions)
    with pytest.raises(
        PluginError, match=r"^leaky: causality audit failed at token \d+: " + message
    ) as error:
        _audit(model, dataset)
    assert "\n" not in str(error.value)
    # The evaluation runs the audit first, so the leaky figure is never produced.
    stream = dataset.tokens("test")
    with pytest.raises(PluginError, match="causality audit failed"):
        evaluate(
            model, stream.ids, eos_id=dataset.vocab.eos_id, vocab_size=len(dataset.vocab), progress=False
        )


def test_a_target_reader_scores_near_perplexity_one_without_the_audit(corpus: Path) -> None:
    """What the audit prevents: the leaky figure is far better than an honest one."""
    dataset = load_dataset(str(corpus))
    stream = dataset.tokens("test")
    options = dict(eos_id=dataset.vocab.eos_id, vocab_size=len(dataset.vocab), progress=False)
    leaky = evaluate(ReadsCurrentTargets(len(dataset.vocab)), stream.ids, causality_points=0, **options)
    honest = evaluate(Bigram(len(dataset.vocab)), stream.ids, **options)
    assert leaky.perplexity < 2 < honest.perplexity
    assert not leaky.causality.passed and honest.causality.passed


@pytest.mark.parametrize("bptt", [1, 3, 100])
def test_honest_plugins_pass(corpus: Path, bptt: int) -> None:
    dataset = load_dataset(str(corpus))
    for model, compared in [
        (Bigram(len(dataset.vocab)), "targets and distributions"),
        (Bigram(len(dataset.vocab), False), "targets"),
        (unigram.load_model(dataset, device="cpu", checkpoint=None), "targets and distributions"),
    ]:
        audit = _audit(model, dataset, bptt=bptt, points=8)
        assert (audit.points, audit.candidates, audit.compared) == (8, 4, compared)
        assert audit.passed and audit.max_difference == 0.0
        assert 0 < audit.max_candidate_mass <= 1


def test_stateful_torch_model_passes_exactly_on_cpu(corpus: Path) -> None:
    pytest.importorskip("torch")
    dataset = load_dataset(str(corpus))
    audit = _audit(TorchLSTM(len(dataset.vocab)), dataset, bptt=5, points=6)
    assert audit.passed and audit.max_difference == 0.0


def test_tolerance_admits_small_nondeterminism_only(corpus: Path) -> None:
    dataset = load_dataset(str(corpus))

    class Jittery(Bigram):
        """Honest, but with run-to-run noise of 1e-9 (as a GPU kernel may have)."""

        def log_dists(self, chunk: Chunk) -> np.ndarray:
            noise = np.random.default_rng().uniform(-1e-9, 1e-9, size=chunk.inputs.shape)
            return super().log_dists(chunk) + noise[..., None]

    with pytest.raises(PluginError, match="causality audit failed"):
        _audit(Jittery(len(dataset.vocab)), dataset)
    audit = _audit(Jittery(len(dataset.vocab)), dataset, tolerance=1e-6)
    assert audit.passed and 0 < audit.max_difference <= 1e-6
    assert audit.max_candidate_mass <= 1 + 1e-6

    class OnAccelerator(Jittery):
        """The same, its scores handed back as (fake) tensors on a GPU."""

        def score(self, chunk: Chunk) -> ChunkScores:
            scores = super().score(chunk)
            return ChunkScores(
                FakeGpuTensor(scores.target_log_probs),
                None if scores.distributions is None else FakeGpuTensor(scores.distributions),
            )

    audit = _audit(OnAccelerator(len(dataset.vocab)), dataset)  # default tolerance: 1e-4 there
    assert audit.passed and audit.tolerance == ACCELERATOR_CAUSALITY_TOLERANCE
    with pytest.raises(PluginError, match="causality audit failed"):
        _audit(OnAccelerator(len(dataset.vocab)), dataset, tolerance=0.0)


class FakeGpuTensor:
    """Just enough of a torch tensor on a GPU for the harness: ``device``, ``is_complex()`` and
    ``detach() ...``."""

    device = types.SimpleNamespace(type="cuda")

    def __init__(self, values: np.ndarray) -> None:
        self.values = values

    def detach(self) -> FakeGpuTensor:
        return self

    def is_complex(self) -> bool:
        return False

    def to(self, device: str) -> FakeGpuTensor:
        return self

    def double(self) -> FakeGpuTensor:
        return self

    def numpy(self) -> np.ndarray:
        return np.asarray(self.values, dtype=np.float64)


def test_the_audit_is_recorded_in_the_evaluation(corpus: Path) -> None:
    dataset = load_dataset(str(corpus))
    stream = dataset.tokens("test")
    result = evaluate(
        Bigram(len(dataset.vocab)),
        stream.ids,
        eos_id=dataset.vocab.eos_id,
        vocab_size=len(dataset.vocab),
        causality_points=3,
        progress=False,
    )
    record = result.causality.to_json()
    assert record["points"] == 3 and record["passed"] is True and record["seconds"] > 0
    assert record["compared"] == "targets and distributions" and record["tolerance"] == 0.0
    assert math.isfinite(record["max_candidate_mass"])
