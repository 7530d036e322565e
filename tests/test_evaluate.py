from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from conftest import TEST, TRAIN
from evaluation_options import protocol_options

from harness.datasets import load_dataset
from harness.evaluate import evaluate
from harness.plugin import Chunk, ChunkScores, PluginError
from harness.plugins import unigram
from harness.streams import stream_bounds, stream_grid


def _evaluate(model, dataset, split="test", **options):
    stream = dataset.tokens(split)
    return evaluate(
        model,
        stream.ids,
        eos_id=dataset.vocab.eos_id,
        vocab_size=len(dataset.vocab),
        progress=False,
        **protocol_options(options),
    )


def test_unigram_perplexity_equals_a_hand_computation(corpus: Path) -> None:
    dataset = load_dataset(str(corpus))
    train = [tok for line in TRAIN.split("\n")[:-1] for tok in (*line.split(), "<eos>")]
    test = [tok for line in TEST.split("\n")[:-1] for tok in (*line.split(), "<eos>")]
    counts, size = Counter(train), len(set(train)) + 1  # + <unk>
    expected = math.exp(-sum(math.log((counts[t] + 1) / (len(train) + size)) for t in test) / len(test))
    result = _evaluate(unigram.load_model(dataset, device="cpu", checkpoint=None), dataset)
    assert result.tokens == len(test)
    assert result.perplexity == pytest.approx(expected, rel=1e-12)
    assert result.audit.checked == 8


@pytest.mark.parametrize("batch_size", [1, 3, 7])
@pytest.mark.parametrize("bptt", [1, 5, 35])
def test_every_token_counted_once_and_stateless_ppl_invariant(
    corpus: Path, batch_size: int, bptt: int
) -> None:
    dataset = load_dataset(str(corpus))
    model = unigram.load_model(dataset, device="cpu", checkpoint=None)
    reference = _evaluate(model, dataset)
    result = _evaluate(model, dataset, batch_size=batch_size, bptt=bptt)
    assert result.tokens == len(dataset.tokens("test").ids)
    assert result.perplexity == pytest.approx(reference.perplexity, rel=1e-12)
    np.testing.assert_array_equal(result.token_log_probs, reference.token_log_probs)


class Recorder:
    """Records what the harness feeds it; scores every token log(1/V)."""

    def __init__(self, vocab_size: int) -> None:
        self.vocab_size = vocab_size

    def reset(self, batch_size: int) -> None:
        self.streams = [([], []) for _ in range(batch_size)]

    def score(self, chunk: Chunk) -> ChunkScores:
        for b, (inputs, targets) in enumerate(self.streams):
            inputs.extend(chunk.inputs[b][chunk.mask[b]])
            targets.extend(chunk.targets[b][chunk.mask[b]])
        chunk.targets[:] = 0  # vandalism must not reach the harness
        return ChunkScores(np.full(chunk.targets.shape, -math.log(self.vocab_size)))


@pytest.mark.parametrize("batch_size, bptt", [(1, 4), (3, 5), (7, 2), (25, 3)])  # 25: a stream per token
def test_streams_are_contiguous_pieces_of_the_split_in_order(
    corpus: Path, batch_size: int, bptt: int
) -> None:
    dataset = load_dataset(str(corpus))
    ids = dataset.tokens("test").ids
    model = Recorder(len(dataset.vocab))
    # The causality audit's pass, which comes before or after, shows it substituted tokens.
    result = _evaluate(model, dataset, batch_size=batch_size, bptt=bptt, causality_points=0)
    targets = np.concatenate([t for _, t in model.streams if t])
    inputs = np.concatenate([i for i, _ in model.streams if i])
    np.testing.assert_array_equal(targets, ids)
    np.testing.assert_array_equal(inputs, np.concatenate([[dataset.vocab.eos_id], ids[:-1]]))
    assert result.tokens == len(ids)
    assert result.perplexity == pytest.approx(len(dataset.vocab))


def test_stream_bounds_are_balanced() -> None:
    starts, lengths = stream_bounds(10, 4)
    assert lengths.tolist() == [3, 3, 2, 2] and starts.tolist() == [0, 3, 6, 8]
    assert stream_bounds(2, 3)[1].tolist() == [1, 1, 0]


def test_grid_chunks_cover_the_grid_once_in_order() -> None:
    """The one chunk loop (evaluation, cache tuning, analysis): ``T`` columns at a time, the last
    chunk narrower, together exactly the grid."""
    grid = stream_grid(np.arange(1, 24), eos_id=0, batch_size=3)  # 3 streams of 8 positions
    blocks = grid.chunks(3)
    assert [block.begin for block in blocks] == [0, 3, 6]
    assert [block.chunk.mask.shape for block in blocks] == [(3, 3), (3, 3), (3, 2)]
    for name in ("inputs", "targets", "mask"):
        joined = np.concatenate([getattr(block.chunk, name) for block in blocks], axis=1)
        np.testing.assert_array_equal(joined, getattr(grid, name))
        for block in blocks:
            np.testing.assert_array_equal(getattr(grid, name)[block.place], getattr(block.chunk, name))
    assert all(block.chunk.distribution_mask is None for block in blocks)
    with pytest.raises(ValueError, match="bptt"):
        grid.chunks(0)


def test_grid_streams_are_each_stream_whole_without_padding() -> None:
    """The whole-stream loop: one row at a time, its real positions only, placed in the grid."""
    grid = stream_grid(np.arange(1, 12), eos_id=0, batch_size=3)  # streams of 4, 4 and 3
    blocks = grid.streams()
    assert [block.chunk.mask.shape for block in blocks] == [(1, 4), (1, 4), (1, 3)]
    assert [block.rows.start for block in blocks] == [0, 1, 2]
    assert all(block.chunk.mask.all() for block in blocks)
    np.testing.assert_array_equal(blocks[2].chunk.targets, [[9, 10, 11]])
    np.testing.assert_array_equal(blocks[2].chunk.inputs, [[8, 9, 10]])  # the token before it first
    for block in blocks:
        np.testing.assert_array_equal(grid.targets[block.place], block.chunk.targets)


class Faulty:
    """A uniform model with one injected fault."""

    def __init__(self, vocab_size: int, fault: str) -> None:
        self.vocab_size, self.fault = vocab_size, fault

    def reset(self, batch_size: int) -> None:
        pass

    def score(self, chunk: Chunk):
        log_probs = np.full(chunk.targets.shape, -math.log(self.vocab_size))
        rows = int(chunk.distribution_mask.sum()) if chunk.distribution_mask is not None else 0
        distributions = np.full((rows, self.vocab_size), -math.log(self.vocab_size))
        if self.fault == "nan":
            log_probs[0, -1] = np.nan
        elif self.fault == "positive":
            log_probs[:] = 0.5
        elif self.fault == "shape":
            log_probs = log_probs[:, :-1]
        elif self.fault == "unnormalized":
            distributions += math.log(2)
            log_probs += math.log(2)
        elif self.fault == "disagrees":
            log_probs -= 0.1
        elif self.fault == "distribution shape":
            distributions = distributions[:, 1:]
        elif self.fault == "probabilities":
            log_probs, distributions = np.exp(log_probs), np.exp(distributions)
        elif self.fault == "wrong axis" and rows > 1:
            distributions = np.log(np.full((rows, self.vocab_size), 1 / rows))
        elif self.fault == "other vocabulary":
            distributions = np.full((rows, self.vocab_size + 7), -math.log(self.vocab_size + 7))
        elif self.fault == "not scores":
            return log_probs
        elif self.fault == "no distributions":
            distributions = None
        return ChunkScores(log_probs, distributions)


@pytest.mark.parametrize(
    "fault, message",
    [
        ("nan", r"an invalid log-probability \(nan\) for token 4 \(stream 0, position 4\)"),
        ("positive", r"a positive log-probability \(0\.5\) for token 0"),
        ("shape", r"target_log_probs has shape \(1, 4\), expected \(1, 5\)"),
        (
            "unnormalized",
            r"unnormalized distribution at token \d+ \(stream 0, position \d+\): "
            r"probabilities sum to 2, not 1",
        ),
        (
            "probabilities",
            r"a positive log-probability .* all of the chunk's lie in \[0, 1\]: probabilities rather",
        ),
        ("wrong axis", r"unnormalized distribution .* a softmax over the wrong axis\?"),
        ("other vocabulary", r"a distribution over \d+ words, where the dataset's vocabulary has \d+"),
        ("disagrees", r"reported log p\(target\) = .* but its full distribution gives"),
        ("distribution shape", r"distributions has shape \(\d+, \d+\), expected"),
        ("not scores", r"score\(\) returned ndarray, not harness.ChunkScores"),
    ],
)
def test_misbehaving_plugins_are_rejected_with_a_clear_message(
    corpus: Path, fault: str, message: str
) -> None:
    dataset = load_dataset(str(corpus))
    with pytest.raises(PluginError, match=message):  # found by the scoring loop
        _evaluate(Faulty(len(dataset.vocab), fault), dataset, bptt=5, audit_positions=30, causality_points=0)
    # With the causality audit on (the default), it may find the fault first, at another token.
    what = message.split(r" \(")[0].split(" for token")[0]
    with pytest.raises(PluginError, match=what):
        _evaluate(Faulty(len(dataset.vocab), fault), dataset, bptt=5, audit_positions=30)


def test_target_only_plugins_are_evaluated_but_not_audited(corpus: Path) -> None:
    dataset = load_dataset(str(corpus))
    result = _evaluate(Faulty(len(dataset.vocab), "no distributions"), dataset, bptt=5)
    assert result.audit.checked == 0 and result.audit.requested > 0
    assert result.perplexity == pytest.approx(len(dataset.vocab))


def test_a_perplexity_too_large_for_a_float_is_a_plugin_error(corpus: Path) -> None:
    class AlmostImpossible:  # every target gets e^-1000: a perplexity of e^1000 overflows
        def reset(self, batch_size: int) -> None:
            pass

        def score(self, chunk: Chunk) -> ChunkScores:
            return ChunkScores(np.full(chunk.targets.shape, -1000.0))

    with pytest.raises(PluginError, match=r"^peaked: mean negative log-likelihood 1000 nats per token; "):
        _evaluate(AlmostImpossible(), load_dataset(str(corpus)), name="peaked")


def test_a_mean_log_probability_above_0_is_a_plugin_error(corpus: Path) -> None:
    class AboveCertain:  # every target within the rounding allowance above 0: perplexity below 1
        def reset(self, batch_size: int) -> None:
            pass

        def score(self, chunk: Chunk) -> ChunkScores:
            return ChunkScores(np.full(chunk.targets.shape, 5e-7))

    with pytest.raises(
        PluginError, match=r"^sure: mean negative log-likelihood -5e-07 nats per token, below 0"
    ):
        _evaluate(AboveCertain(), load_dataset(str(corpus)), name="sure", causality_points=0)


def test_torch_tensors_are_accepted(corpus: Path) -> None:
    torch = pytest.importorskip("torch")
    dataset = load_dataset(str(corpus))
    model = unigram.load_model(dataset, device="cpu", checkpoint=None)

    class TorchUnigram:
        def reset(self, batch_size: int) -> None:
            pass

        def score(self, chunk: Chunk) -> ChunkScores:
            scores = model.score(chunk)
            distributions = scores.distributions
            return ChunkScores(
                torch.from_numpy(scores.target_log_probs).float(),
                None if distributions is None else torch.tensor(distributions).float(),
            )

    reference = _evaluate(model, dataset)
    result = _evaluate(TorchUnigram(), dataset)
    assert result.perplexity == pytest.approx(reference.perplexity, rel=1e-6)
    assert result.audit.checked == 8


class TorchLSTM:
    """A small random-weight LSTM that carries its hidden state across chunks."""

    def __init__(self, vocab_size: int) -> None:
        import torch

        torch.manual_seed(0)
        self.torch = torch
        self.embed = torch.nn.Embedding(vocab_size, 16)
        self.lstm = torch.nn.LSTM(16, 16, batch_first=True)
        self.out = torch.nn.Linear(16, vocab_size)

    def reset(self, batch_size: int) -> None:
        self.state = None

    def score(self, chunk: Chunk) -> ChunkScores:
        torch = self.torch
        with torch.no_grad():
            hidden, self.state = self.lstm(self.embed(torch.from_numpy(chunk.inputs)), self.state)
            log_probs = torch.log_softmax(self.out(hidden).double(), dim=-1)  # [B, T, V]
        targets = log_probs.gather(2, torch.from_numpy(chunk.targets)[..., None])[..., 0]
        wanted = chunk.distribution_mask
        return ChunkScores(targets, None if wanted is None else log_probs[torch.from_numpy(wanted)])


def test_stateful_rnn_scores_identically_for_any_chunk_length(corpus: Path) -> None:
    pytest.importorskip("torch")
    dataset = load_dataset(str(corpus))
    model = TorchLSTM(len(dataset.vocab))
    results = [_evaluate(model, dataset, bptt=bptt, audit_positions=10) for bptt in (1, 7, 100)]
    for result in results[1:]:  # float32 arithmetic: equal to rounding
        assert result.total_log_prob == pytest.approx(results[0].total_log_prob, rel=1e-6)
    assert all(result.audit.checked == 10 for result in results)

    class Forgetful(TorchLSTM):
        def score(self, chunk: Chunk) -> ChunkScores:
            self.state = None
            return super().score(chunk)

    forgetful = _evaluate(Forgetful(len(dataset.vocab)), dataset, bptt=7)
    assert forgetful.total_log_prob != pytest.approx(results[0].total_log_prob, rel=1e-4)


class WholeStreamUnigram:
    """The unigram behind the whole-stream seam, with a ``score()`` the harness must not call
    and no ``reset()``; ``corrupt`` breaks its answer for the stream that starts at that token."""

    def __init__(self, dataset, corrupt: str | None = None) -> None:
        self.honest = unigram.load_model(dataset, device="cpu", checkpoint=None)
        self.corrupt = corrupt
        self.lengths: list[int] = []

    def score(self, chunk):
        raise AssertionError("score() called on a model that scores whole streams")

    def score_stream(self, stream):
        self.lengths.append(stream.targets.shape[1])
        scores = self.honest.score(stream)
        if self.corrupt == "shape" and len(self.lengths) == 2:
            return ChunkScores(scores.target_log_probs[:, :-1], scores.distributions)
        if self.corrupt == "unnormalized" and len(self.lengths) == 2 and scores.distributions is not None:
            return ChunkScores(scores.target_log_probs, scores.distributions + 0.1)
        return scores


@pytest.mark.parametrize("batch_size", [1, 3])
def test_a_model_that_scores_whole_streams_is_handed_each_stream_once(corpus: Path, batch_size: int) -> None:
    dataset = load_dataset(str(corpus))
    reference = _evaluate(unigram.load_model(dataset, device="cpu", checkpoint=None), dataset)
    model = WholeStreamUnigram(dataset)
    result = _evaluate(model, dataset, batch_size=batch_size, causality_points=0, audit_positions=10)
    assert result.total_log_prob == pytest.approx(reference.total_log_prob, rel=1e-12)
    assert model.lengths == list(stream_bounds(result.tokens, batch_size)[1])
    assert result.audit.checked == 10


def test_a_whole_stream_models_faults_name_its_method_and_place(corpus: Path) -> None:
    dataset = load_dataset(str(corpus))
    starts, lengths = stream_bounds(len(dataset.tokens("test").ids), 3)
    with pytest.raises(PluginError, match=rf"shape \(1, {lengths[1] - 1}\), expected \(1, {lengths[1]}\)"):
        _evaluate(WholeStreamUnigram(dataset, "shape"), dataset, batch_size=3, causality_points=0)
    with pytest.raises(
        PluginError, match=r"unnormalized distribution at token (\d+) \(stream 1, position \d+\)"
    ):
        _evaluate(
            WholeStreamUnigram(dataset, "unnormalized"),
            dataset,
            batch_size=3,
            causality_points=0,
            audit_positions=len(dataset.tokens("test").ids),
        )
