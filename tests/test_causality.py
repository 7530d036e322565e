"""The causality audit: a second pass a plugin cannot tell from the evaluation. Plugins that see
the answer, anywhere in their streams, are rejected with one line; honest plugins, stateless or
stateful, pass exactly."""

from __future__ import annotations

import types
from pathlib import Path

import numpy as np
import pytest
from evaluation_options import protocol_options
from test_evaluate import TorchLSTM

from harness.causality import (
    ACCELERATOR_TOLERANCE,
    EVIDENCE_BOUND,
    SUBSTITUTIONS,
    plan_audit,
    substitution_evidence,
)
from harness.datasets import Dataset, load_dataset
from harness.evaluate import evaluate
from harness.plugin import Chunk, ChunkScores, PluginError
from harness.plugins import unigram
from harness.streams import stream_grid
from harness.substitutes import SubstituteModel


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


def half_on_targets(log_dists: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """The log-distributions ``log_dists`` (``[B, T, V]``) with half of each moved onto its
    target (``targets``: int ``[B, T]``): still normalised, and reading the target."""
    mixed = 0.5 * np.exp(log_dists)
    np.put_along_axis(
        mixed, targets[..., None], np.take_along_axis(mixed, targets[..., None], axis=2) + 0.5, axis=2
    )
    return np.log(mixed)


class ReadsCurrentTargets(Bigram):
    """Mixes a point mass on the target it is scoring into a normalised distribution."""

    def log_dists(self, chunk: Chunk) -> np.ndarray:
        return half_on_targets(super().log_dists(chunk), chunk.targets)


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


def _evaluate(model, dataset: Dataset, split: str = "test", **options):
    return evaluate(
        model,
        dataset.tokens(split).ids,
        eos_id=dataset.vocab.eos_id,
        vocab_size=len(dataset.vocab),
        name="leaky",
        progress=False,
        **protocol_options({"causality_seed": 1, **options}),
    )


@pytest.mark.parametrize(
    "plugin, give_distributions, message",
    [
        (
            ReadsCurrentTargets,
            True,
            r"the distribution at token (\d+) changes \(by [\d.e+-]+\) when token \1",
        ),
        (
            ReadsCurrentTargets,
            False,
            r"the probabilities it gives the real token and another one there, after the same text, "
            r"sum to [\d.]+ > 1: it reads the token it predicts, or its scores are not normalised",
        ),
        (ReadsLaterInputs, True, r"the log-probability of its target changes \(by [\d.e+-]+\) when token"),
        (ReadsLaterInputs, False, r"the log-probability of its target changes"),
        (NormalisesOverTheChunk, True, r"the log-probability of its target changes"),
        (NormalisesOverTheChunk, False, r"the log-probability of its target changes"),
    ],
)
def test_leaking_plugins_fail_with_one_line_naming_the_position(
    corpus: Path, plugin, give_distributions: bool, message: str
) -> None:
    dataset = load_dataset(str(corpus))
    model = plugin(len(dataset.vocab), give_distributions)
    # One substitution, at token 20 of the toy test split (seed 3): a stretch precedes it.
    with pytest.raises(
        PluginError, match=r"^leaky: causality audit failed at token \d+: " + message
    ) as error:
        _evaluate(model, dataset, causality_points=1, causality_seed=3)
    assert "\n" not in str(error.value)


class Cheat:
    """An honest unigram that moves half of its probability onto the target it is shown, at the
    positions after ``reset()`` that ``cheats_at`` (int ``[T]`` -> bool ``[T]``) picks: in its
    target scores and in any full distribution asked for there, which stays normalised."""

    def __init__(self, dataset: Dataset, cheats_at) -> None:
        self.honest = unigram.load_model(dataset, device="cpu", checkpoint=None)
        self.cheats_at = cheats_at

    def reset(self, batch_size: int) -> None:
        self.honest.reset(batch_size)
        self.position = 0

    def score(self, chunk: Chunk) -> ChunkScores:
        honest = self.honest.score(chunk)
        columns = self.position + np.arange(chunk.targets.shape[1])
        self.position += chunk.targets.shape[1]
        cheating = self.cheats_at(columns)[None, :] & chunk.mask  # [B, T]
        target_log_probs = np.asarray(honest.target_log_probs, dtype=np.float64)
        target_log_probs = np.where(cheating, np.log(0.5 * np.exp(target_log_probs) + 0.5), target_log_probs)
        rows = None
        if chunk.distribution_mask is not None:
            rows = np.exp(np.asarray(honest.distributions, dtype=np.float64))
            for row, (stream, column) in enumerate(np.argwhere(chunk.distribution_mask)):
                if cheating[stream, column]:
                    rows[row] *= 0.5
                    rows[row, chunk.targets[stream, column]] += 0.5
            rows = np.log(rows)
        return ChunkScores(target_log_probs, rows)


CHEATS = {
    "after the first 16 positions": lambda columns: columns >= 16,
    "every 7th position, offset 3": lambda columns: columns % 7 == 3,
    "only after position 10,000": lambda columns: columns >= 10_000,
}


@pytest.mark.parametrize("cheats_at", CHEATS.values(), ids=CHEATS.keys())
def test_cheating_deep_in_the_stream_fails_and_an_honest_unigram_passes(cheats_at) -> None:
    """The issue's cheats, on PTB test: each scores far better than the honest unigram (the
    first at 1.98) and passed the earlier audit of short stretches after a reset."""
    ptb = load_dataset("ptb")
    cheated = _evaluate(Cheat(ptb, cheats_at), ptb, causality_points=0)
    honest = _evaluate(unigram.load_model(ptb, device="cpu", checkpoint=None), ptb, causality_seed=None)
    assert cheated.perplexity < 0.5 * honest.perplexity
    assert honest.causality.passed and honest.causality.evidence < honest.causality.evidence_bound
    for seed in range(3):
        with pytest.raises(PluginError, match="^leaky: causality audit failed") as error:
            _evaluate(Cheat(ptb, cheats_at), ptb, causality_seed=seed)
        assert "reads the token it predicts" in str(error.value) or "changes (by" in str(error.value)


def test_a_cheat_that_is_honest_wherever_a_distribution_is_asked_for_fails_too() -> None:
    ptb = load_dataset("ptb")

    class HonestWhenWatched(Cheat):
        def score(self, chunk: Chunk) -> ChunkScores:
            if chunk.distribution_mask is None:
                return super().score(chunk)
            self.position += chunk.targets.shape[1]
            return self.honest.score(chunk)

    with pytest.raises(PluginError, match="it reads the token it predicts"):
        _evaluate(HonestWhenWatched(ptb, lambda columns: columns >= 0), ptb)


class Recorder(Bigram):
    """An honest bigram that records everything the harness shows it, pass by pass."""

    def __init__(self, vocab_size: int) -> None:
        super().__init__(vocab_size)
        self.passes: list[dict] = []

    def reset(self, batch_size: int) -> None:
        self.passes.append({"batch_size": batch_size, "chunks": []})

    def score(self, chunk: Chunk) -> ChunkScores:
        self.passes[-1]["chunks"].append(chunk)
        return super().score(chunk)


@pytest.mark.parametrize("batch_size, bptt", [(1, 100), (3, 7)])
def test_the_audit_pass_shows_the_plugin_what_the_evaluation_shows_but_the_substitutions(
    corpus: Path, batch_size: int, bptt: int
) -> None:
    dataset = load_dataset(str(corpus))
    orders = set()
    for seed in range(8):
        model = Recorder(len(dataset.vocab))
        result = _evaluate(
            model, dataset, batch_size=batch_size, bptt=bptt, causality_seed=seed, causality_points=5
        )
        orders.add(result.causality.audit_pass)
        first, second = model.passes
        assert first["batch_size"] == second["batch_size"] == batch_size
        assert len(first["chunks"]) == len(second["chunks"])
        differences = 0
        for one, other in zip(first["chunks"], second["chunks"]):
            assert one.inputs.shape == other.inputs.shape and np.array_equal(one.mask, other.mask)
            assert (one.distribution_mask is None) == (other.distribution_mask is None)
            if one.distribution_mask is not None:
                assert np.array_equal(one.distribution_mask, other.distribution_mask)
            differences += int((one.targets != other.targets).sum())
        assert differences == result.causality.points == 5
        for chunks in (first["chunks"], second["chunks"]):  # each pass is one consistent text
            inputs = np.concatenate([c.inputs for c in chunks], axis=1)
            targets = np.concatenate([c.targets for c in chunks], axis=1)
            mask = np.concatenate([c.mask for c in chunks], axis=1)
            follows = mask[:, 1:]
            assert np.array_equal(targets[:, :-1][follows], inputs[:, 1:][follows])
    assert orders == {"first", "second"}


def test_the_seed_is_fresh_each_time_and_recorded_so_an_audit_can_be_replayed(corpus: Path) -> None:
    dataset = load_dataset(str(corpus))
    seeds = {
        _evaluate(Bigram(len(dataset.vocab)), dataset, causality_seed=None).causality.seed for _ in range(3)
    }
    assert len(seeds) == 3
    ids, eos = dataset.tokens("test").ids, dataset.vocab.eos_id
    grid = stream_grid(ids, eos_id=eos, batch_size=2)
    substitutes = SubstituteModel(ids, vocab_size=len(dataset.vocab), eos_id=eos)
    plans = [
        plan_audit(
            grid.inputs, grid.targets, grid.mask, substitutes=substitutes, eos_id=eos, points=4, seed=seed
        )
        for seed in (min(seeds), min(seeds))
    ]
    assert np.array_equal(plans[0].targets, plans[1].targets) and plans[0].audit_first == plans[1].audit_first


@pytest.mark.parametrize("bptt, batch_size", [(1, 1), (3, 2), (100, 1), (100, 4)])
def test_honest_plugins_pass(corpus: Path, bptt: int, batch_size: int) -> None:
    dataset = load_dataset(str(corpus))
    for model, compared in [
        (Bigram(len(dataset.vocab)), "targets and distributions"),
        (Bigram(len(dataset.vocab), False), "targets"),
        (unigram.load_model(dataset, device="cpu", checkpoint=None), "targets and distributions"),
    ]:
        for seed in range(4):
            audit = _evaluate(model, dataset, bptt=bptt, batch_size=batch_size, causality_seed=seed).causality
            assert audit.passed and audit.compared == compared and audit.max_difference == 0.0
            assert 0 < audit.max_pair_mass <= 1 and audit.evidence <= audit.evidence_bound


def test_stateful_torch_model_passes_exactly_on_cpu(corpus: Path) -> None:
    pytest.importorskip("torch")
    dataset = load_dataset(str(corpus))
    for seed in range(3):
        audit = _evaluate(TorchLSTM(len(dataset.vocab)), dataset, bptt=5, causality_seed=seed).causality
        assert audit.passed and audit.max_difference == 0.0


def test_tolerance_admits_small_nondeterminism_only(corpus: Path) -> None:
    dataset = load_dataset(str(corpus))

    class Jittery(Bigram):
        """Honest, but with pass-to-pass noise of 1e-9 (as a GPU kernel may have)."""

        def log_dists(self, chunk: Chunk) -> np.ndarray:
            noise = np.random.default_rng().uniform(-1e-9, 1e-9, size=chunk.inputs.shape)
            return super().log_dists(chunk) + noise[..., None]

    with pytest.raises(PluginError, match="causality audit failed"):
        _evaluate(Jittery(len(dataset.vocab)), dataset)
    audit = _evaluate(Jittery(len(dataset.vocab)), dataset, causality_tolerance=1e-6).causality
    assert audit.passed and 0 < audit.max_difference <= 1e-6

    class OnAccelerator(Jittery):
        """The same, its scores handed back as (fake) tensors on a GPU."""

        def score(self, chunk: Chunk) -> ChunkScores:
            scores = super().score(chunk)
            return ChunkScores(
                FakeGpuTensor(scores.target_log_probs),
                None if scores.distributions is None else FakeGpuTensor(scores.distributions),
            )

    audit = _evaluate(OnAccelerator(len(dataset.vocab)), dataset).causality  # default tolerance: 1e-4 there
    assert audit.passed and audit.tolerance == ACCELERATOR_TOLERANCE
    with pytest.raises(PluginError, match="causality audit failed"):
        _evaluate(OnAccelerator(len(dataset.vocab)), dataset, causality_tolerance=0.0)


def _draw_rows(rng: np.random.Generator, rows: np.ndarray) -> np.ndarray:
    """One index drawn from each row of ``rows`` (float64 ``[m, V]``, each summing to 1): int64 ``[m]``."""
    cumulative = np.cumsum(rows, axis=1)
    below = cumulative < rng.random((len(rows), 1)) * cumulative[:, -1:]
    return np.minimum(below.sum(axis=1), rows.shape[1] - 1)


def test_check_3_holds_honest_models_whatever_their_distance_from_the_draw_law() -> None:
    """Honest models far from, and close to, the law the substitutes are drawn from, real tokens
    drawn from each model: the evidence stays below its bound in every one of 300 audits (each
    exceeds it with probability at most 1e-6), and mostly below 0; a model that adds 0.3 to the
    shown token's probability at a quarter of the substitutions is caught every time (at a tenth
    of them, only where its own probabilities leave it no room: the limit the module states)."""
    rng = np.random.default_rng(0)
    vocab, count = 50, 1000
    honest, cheat = [], []
    for trial in range(300):
        law = rng.dirichlet(np.full(vocab, 0.3), size=count)  # [m, V]: the trigram's, say
        spread = 0.05 if trial % 2 else 3.0  # peaked models, far from it; flat ones, near it
        model = rng.dirichlet(np.full(vocab, spread), size=count)  # [m, V]
        real = _draw_rows(rng, model)
        others = law.copy()
        others[np.arange(count), real] = 0.0
        others /= others.sum(axis=1, keepdims=True)  # Q_r
        drawn = _draw_rows(rng, others)
        proposal = others[np.arange(count), drawn]
        shown = model[np.arange(count), drawn]
        honest.append(substitution_evidence(shown / proposal))
        boosted = np.where(rng.random(count) < 0.25, 0.7 * shown + 0.3, shown)
        cheat.append(substitution_evidence(boosted / proposal))
    assert max(honest) < EVIDENCE_BOUND and np.median(honest) < 0
    assert min(cheat) > EVIDENCE_BOUND


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
    result = _evaluate(Bigram(len(dataset.vocab)), dataset, causality_points=3, causality_seed=None)
    record = result.causality.to_json()
    assert record["points"] == 3 and record["passed"] is True and record["seconds"] > 0
    assert record["compared"] == "targets and distributions" and record["tolerance"] == 0.0
    assert record["audit_pass"] in ("first", "second") and record["seed"] > 0
    assert record["compared_positions"] >= 1 and record["max_pair_mass"] <= 1
    assert record["evidence"] <= record["evidence_bound"] and record["substitutes"] == "trigram of the split"
    off = _evaluate(Bigram(len(dataset.vocab)), dataset, causality_points=0).causality
    assert not off.passed and off.to_json()["points"] == 0


def test_the_default_substitutes_a_thousand_tokens_at_most_a_quarter_of_a_split(corpus: Path) -> None:
    ptb = load_dataset("ptb")
    assert (
        _evaluate(unigram.load_model(ptb, device="cpu", checkpoint=None), ptb).causality.points
        == SUBSTITUTIONS
    )
    dataset = load_dataset(str(corpus))
    tokens = len(dataset.tokens("test").ids)
    assert _evaluate(Bigram(len(dataset.vocab)), dataset).causality.points == max(1, tokens // 4)


# ---- models that score whole streams ------------------------------------------------------------


class WholeStreams:
    """A chunk model behind the whole-stream seam: each stream scored from ``reset(1)`` in one
    chunk. It has no ``reset`` of its own: nothing carries over between streams."""

    def __init__(self, model) -> None:
        self.model, self.calls = model, 0

    def score_stream(self, stream: Chunk) -> ChunkScores:
        assert stream.targets.shape[0] == 1 and stream.mask.all()
        self.calls += 1
        self.model.reset(1)
        return self.model.score(stream)


@pytest.mark.parametrize("batch_size", [1, 3])
def test_a_whole_stream_model_scores_as_its_chunk_twin_and_passes(corpus: Path, batch_size: int) -> None:
    dataset = load_dataset(str(corpus))
    chunked = _evaluate(Bigram(len(dataset.vocab)), dataset, bptt=5, batch_size=batch_size)
    whole_model = WholeStreams(Bigram(len(dataset.vocab)))
    whole = _evaluate(whole_model, dataset, bptt=5, batch_size=batch_size)
    assert whole.total_log_prob == pytest.approx(chunked.total_log_prob, rel=1e-12)
    assert whole.audit.checked == chunked.audit.checked > 0
    assert whole.causality.passed and whole.causality.compared_positions > 0
    assert whole_model.calls == 2 * batch_size  # each stream once in each pass


@pytest.mark.parametrize("plugin", [ReadsCurrentTargets, ReadsLaterInputs, NormalisesOverTheChunk])
@pytest.mark.parametrize("give_distributions", [True, False])
def test_a_leaking_whole_stream_model_fails_through_its_scoring_method(
    corpus: Path, plugin, give_distributions: bool
) -> None:
    dataset = load_dataset(str(corpus))
    model = WholeStreams(plugin(len(dataset.vocab), give_distributions))
    with pytest.raises(PluginError, match=r"^leaky: causality audit failed at token \d+: "):
        _evaluate(model, dataset, causality_points=1, causality_seed=3)


def test_a_whole_stream_cheat_deep_in_the_stream_fails() -> None:
    ptb = load_dataset("ptb")
    cheat = WholeStreams(Cheat(ptb, CHEATS["every 7th position, offset 3"]))
    honest = _evaluate(unigram.load_model(ptb, device="cpu", checkpoint=None), ptb, causality_points=0)
    assert _evaluate(cheat, ptb, causality_points=0).perplexity < 0.75 * honest.perplexity
    with pytest.raises(PluginError, match="^leaky: causality audit failed"):
        _evaluate(cheat, ptb, causality_seed=0)
