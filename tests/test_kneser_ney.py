from __future__ import annotations

import math
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pytest

from baselines import kneser_ney
from harness.datasets import load_dataset
from harness.evaluate import evaluate
from harness.plugin import PluginError
from harness.protocol import EvaluationProtocol


class NaiveKneserNey:
    """Interpolated modified Kneser-Ney written from the definitions with dictionaries
    (SRILM convention: <s> context, </s> predicted, no n-gram across sentences)."""

    def __init__(self, sentences: list[list[str]], vocab: list[str], order: int) -> None:
        self.order, self.vocab_size = order, len(vocab)
        raw = [Counter() for _ in range(order + 1)]
        for sentence in sentences:
            seq = ["<s>", *sentence]
            for i in range(1, len(seq)):
                for k in range(1, min(order, i + 1) + 1):
                    raw[k][tuple(seq[i - k + 1 : i + 1])] += 1
        self.adjusted = [None] * (order + 1)
        self.adjusted[order] = dict(raw[order])
        for k in range(order - 1, 0, -1):
            continuation = Counter(gram[1:] for gram in raw[k + 1])
            self.adjusted[k] = {
                gram: raw[k][gram] if gram[0] == "<s>" else continuation[gram] for gram in raw[k]
            }
        self.discounts = [None] + [self._discounts(self.adjusted[k].values()) for k in range(1, order + 1)]
        self.total = [defaultdict(float) for _ in range(order + 1)]
        self.gamma = [defaultdict(float) for _ in range(order + 1)]
        for k in range(1, order + 1):
            for gram, count in self.adjusted[k].items():
                self.total[k][gram[:-1]] += count
                self.gamma[k][gram[:-1]] += self.discounts[k][min(count, 3)]

    @staticmethod
    def _discounts(counts) -> list[float]:
        n = Counter(counts)
        y = n[1] / (n[1] + 2 * n[2])
        return [0.0, 1 - 2 * y * n[2] / n[1], 2 - 3 * y * n[3] / n[2], 3 - 4 * y * n[4] / n[3]]

    def prob(self, history: tuple[str, ...], word: str) -> float:
        k = len(history) + 1
        lower = 1 / self.vocab_size if k == 1 else self.prob(history[1:], word)
        total = self.total[k].get(history, 0.0)
        if total == 0:
            return lower
        count = self.adjusted[k].get((*history, word), 0)
        return (count - self.discounts[k][min(count, 3)] + self.gamma[k][history] * lower) / total

    def log_prob_of(self, sentences: list[list[str]]) -> float:
        total = 0.0
        for sentence in sentences:
            seq = ["<s>", *sentence]
            for i in range(1, len(seq)):
                total += math.log(self.prob(tuple(seq[max(0, i - self.order + 1) : i]), seq[i]))
        return total


@pytest.fixture(scope="module")
def zipf_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Random sentences over 150 Zipf-distributed words: every order up to 4 has n1..n4 > 0,
    so the discounts are the textbook formula's, with no fallback."""
    rng = np.random.default_rng(7)
    words = [f"w{i}" for i in range(150)]
    weights = 1 / np.arange(1, 151) ** 1.2

    def text(sentences: int) -> str:
        lines = (
            " ".join(rng.choice(words, rng.integers(0, 9), p=weights / weights.sum()))
            for _ in range(sentences)
        )
        return "".join(f" {line} \n" if line else " \n" for line in lines)

    directory = tmp_path_factory.mktemp("zipf")
    for split, size in (("train", 600), ("valid", 30), ("test", 60)):
        (directory / f"wiki.{split}.tokens").write_text(text(size))
    return directory


def _sentences(path: Path) -> list[list[str]]:
    return [[*line.split(), "<eos>"] for line in path.read_text().split("\n")[:-1]]


@pytest.mark.parametrize("order", [2, 3, 4])
def test_matches_a_naive_reference_implementation(zipf_corpus: Path, order: int) -> None:
    dataset = load_dataset(str(zipf_corpus))
    model = kneser_ney.load_model(dataset, device="cpu", checkpoint=None, order=order)
    naive = NaiveKneserNey(_sentences(zipf_corpus / "wiki.train.tokens"), list(dataset.vocab.tokens), order)
    for k in range(1, order + 1):  # the textbook discounts apply unclipped
        assert all(0 < naive.discounts[k][r] <= r for r in (1, 2, 3)), naive.discounts[k]
    for table, k in zip(model.tables, range(2, order + 1)):
        np.testing.assert_allclose(table.discounts, naive.discounts[k], rtol=1e-12)
    expected = naive.log_prob_of(_sentences(zipf_corpus / "wiki.test.tokens"))
    stream = dataset.tokens("test")
    for bptt in (1, 7, 1000):
        result = evaluate(
            model,
            stream.ids,
            eos_id=dataset.vocab.eos_id,
            vocab_size=len(dataset.vocab),
            progress=False,
            protocol=EvaluationProtocol(bptt=bptt),
        )
        assert result.total_log_prob == pytest.approx(expected, rel=1e-10)


def test_every_distribution_is_normalized(zipf_corpus: Path) -> None:
    dataset = load_dataset(str(zipf_corpus))
    model = kneser_ney.load_model(dataset, device="cpu", checkpoint=None, order=5)
    ids = dataset.tokens("test").ids
    for batch_size in (1, 4):
        result = evaluate(
            model,
            ids,
            eos_id=dataset.vocab.eos_id,
            vocab_size=len(dataset.vocab),
            progress=False,
            protocol=EvaluationProtocol(batch_size=batch_size, bptt=9, audit_positions=len(ids)),
        )
        assert result.audit.checked == len(ids)
        assert result.audit.max_sum_error < 1e-12


def test_tiny_corpus_still_gives_a_proper_distribution(corpus: Path) -> None:
    dataset = load_dataset(str(corpus))
    model = kneser_ney.load_model(dataset, device="cpu", checkpoint=None)
    ids = dataset.tokens("test").ids
    result = evaluate(
        model,
        ids,
        eos_id=dataset.vocab.eos_id,
        vocab_size=len(dataset.vocab),
        progress=False,
        protocol=EvaluationProtocol(audit_positions=len(ids)),
    )
    assert result.audit.checked == len(ids) and math.isfinite(result.perplexity)


def test_rejects_checkpoint_and_bad_order(corpus: Path) -> None:
    dataset = load_dataset(str(corpus))
    with pytest.raises(PluginError, match="takes no --checkpoint"):
        kneser_ney.load_model(dataset, device="cpu", checkpoint="x.pt")
    for order in (0, 2.5, True, "five"):
        with pytest.raises(PluginError, match=rf"order must be a positive integer, got {order!r}"):
            kneser_ney.load_model(dataset, device="cpu", checkpoint=None, order=order)


def test_kn5_on_ptb_test_reproduces_mikolov_and_zweig() -> None:
    dataset = load_dataset("ptb", download=False)
    model = kneser_ney.load_model(dataset, device="cpu", checkpoint=None)
    stream = dataset.tokens("test")
    result = evaluate(
        model, stream.ids, eos_id=dataset.vocab.eos_id, vocab_size=len(dataset.vocab), progress=False
    )
    assert result.tokens == 82_430
    assert result.perplexity == pytest.approx(141.2, rel=0.02)
    assert result.audit.checked == 8
