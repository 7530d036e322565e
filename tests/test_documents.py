"""``--protocol documents``: each article of a WikiText-style split from a fresh state, with
lm-evaluation-harness's word and byte counts, recorded as its own protocol and ranked apart."""

from __future__ import annotations

import json
import lzma
import re
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO, assert_one_line_error
from evaluation_options import protocol_options
from test_causality import half_on_targets

import harness.evaluate as evaluation
from harness.api import evaluate_model
from harness.cli import main as harness_main
from harness.datasets import load_dataset
from harness.documents import document_batches, is_article_heading, split_documents
from harness.evaluate import evaluate
from harness.plugin import Chunk, ChunkScores, PluginError
from harness.plugins import unigram
from harness.tools.lm_eval_wikitext import lm_eval_pages
from leaderboard.records import collect
from leaderboard.table import build_tables
from wikitext_toolkit_core.result_schema import InvalidResultRecord, ResultRecord

#: Two articles after a blank line, with a section heading, a table legend that reads as a heading
#: (as in WikiText), and blank lines.
TEXT = (
    " \n"
    " = First article = \n"
    " \n"
    " It begins here . \n"
    " = = A section = = \n"
    " More text , here . \n"
    " \n"
    " = Second = \n"
    " Short . \n"
    " = Goals ; A = \n"
    " \n"
)
#: The split of the tests that score it: 12 articles, 160 tokens, in batches of documents of 100
#: and 60 positions, each of which takes a quarter of its positions in substitutions, as the split's
#: default asks (with 3 copies, 75 and 45 take 18 and 11, below the default 30: a split under
#: 4,000 tokens whose batches' quarters round down below the split's is unaudited by default).
ARTICLES = TEXT * 4


def test_articles_start_at_level_one_headings_as_lm_eval_cuts_its_pages() -> None:
    assert is_article_heading(" = First article = ") and is_article_heading(" = Goals ; A = ")
    assert not is_article_heading(" = = A section = = ") and not is_article_heading(" = = = Deeper = = = ")
    documents = split_documents(TEXT)
    tokens = [(*line.split(), "<eos>") for line in TEXT.split("\n")[:-1]]
    lengths = [len(line) for line in tokens]
    # Each page (the first article's 6 lines, the second's 2, the legend "article"'s 2) with the
    # <eos> before it (the blank line's, then that of each page's last line, in no page).
    assert documents.lengths.tolist() == [
        sum(lengths[0:7]) - 1,
        sum(lengths[7:9]),
        sum(lengths[9:11]) + 1,
    ]
    assert documents.starts.tolist() == np.concatenate([[0], np.cumsum(documents.lengths)[:-1]]).tolist()
    pages = lm_eval_pages(TEXT)
    assert len(pages) == documents.pages == 3  # no page for the blank line before the first heading
    assert documents.words == sum(len(re.split(r"\s+", page)) for page in pages)
    assert documents.bytes == sum(len(page.encode("utf-8")) for page in pages)
    assert split_documents(" no heading here \n") is None


def test_wikitext_2_test_has_lm_evals_62_pages_and_counts() -> None:
    text = (
        lzma.open(REPO / "wikitext_toolkit_core" / "data" / "wikitext-2" / "wiki.test.tokens.xz")
        .read()
        .decode("utf-8")
    )
    documents = split_documents(text)
    pages = lm_eval_pages(text)
    assert len(pages) == documents.pages == len(documents.starts) == 62
    assert documents.variant == "<unk>"
    assert documents.lengths.sum() == 245_569  # every token, once
    assert documents.words == sum(len(re.split(r"\s+", page)) for page in pages) == 241_335
    assert documents.bytes == sum(len(page.encode("utf-8")) for page in pages) == 1_256_386


class Recorder:
    """The unigram, recording what the harness feeds it: the batch size of each reset, and the
    first input of each stream after it."""

    def __init__(self, dataset) -> None:
        self.honest = unigram.load_model(dataset, device="cpu", checkpoint=None)
        self.resets: list[int] = []
        self.first_inputs: list[np.ndarray] = []

    def reset(self, batch_size: int) -> None:
        self.resets.append(batch_size)
        self.fresh = True

    def score(self, chunk: Chunk) -> ChunkScores:
        if self.fresh:
            self.first_inputs.append(chunk.inputs[:, 0].copy())
            self.fresh = False
        return self.honest.score(chunk)


def _documents_corpus(tmp_path: Path) -> Path:
    directory = tmp_path / "articles"
    directory.mkdir(parents=True)
    for split in ("train", "valid", "test"):
        (directory / f"wiki.{split}.tokens").write_text(ARTICLES, encoding="utf-8")
    return directory


def test_each_document_is_a_stream_from_a_fresh_state(tmp_path: Path) -> None:
    dataset = load_dataset(str(_documents_corpus(tmp_path)))
    ids = dataset.tokens("test").ids
    documents = split_documents(ARTICLES)
    model = Recorder(dataset)
    result = evaluate(
        model,
        ids,
        eos_id=dataset.vocab.eos_id,
        vocab_size=len(dataset.vocab),
        documents=(documents.starts, documents.lengths),
        progress=False,
        **protocol_options({"protocol_name": "documents", "causality_seed": 0, "bptt": 4}),
    )
    batches = [len(batch) for batch in document_batches(documents.lengths)]
    assert sum(batches) == len(documents.starts)
    assert model.resets == batches * 2  # a reset per batch, in the evaluation's pass and the audit's
    # each from <eos>, as a split starts, the legend "article" too, which follows a word
    for first_inputs in model.first_inputs:
        assert (first_inputs == dataset.vocab.eos_id).all()
    streamed = evaluate(model, ids, eos_id=dataset.vocab.eos_id, vocab_size=len(dataset.vocab))
    np.testing.assert_array_equal(result.token_log_probs, streamed.token_log_probs)  # in the split's order
    assert result.causality.passed


def test_the_command_line_records_the_protocol_and_lm_evals_figures(tmp_path: Path, capsys) -> None:
    corpus = _documents_corpus(tmp_path)
    out = tmp_path / "results"
    for protocol in ("stream", "documents"):
        assert _eval_unigram(corpus, "--protocol", protocol, "--output-dir", str(out)) == 0
    printed = capsys.readouterr().out
    assert "on articles/test (documents): perplexity" in printed
    assert "lm-evaluation-harness's figures over 12 documents: word_perplexity" in printed
    record = json.loads((out / "harness.plugins.unigram.articles.test.documents.json").read_text())
    stream = json.loads((out / "harness.plugins.unigram.articles.test.json").read_text())
    assert record["protocol"] == {"batch_size": 12, "bptt": 100, "name": "documents"}
    assert stream["protocol"]["name"] == "stream" and stream["document_metrics"] is None
    assert record["perplexity"] == pytest.approx(stream["perplexity"], rel=1e-12)  # a unigram has no state
    metrics = record["document_metrics"]
    pages = lm_eval_pages(ARTICLES)
    log_likelihood = -record["nll"] * record["tokens"]
    assert metrics["words"] == sum(len(re.split(r"\s+", page)) for page in pages)
    assert metrics["word_perplexity"] == pytest.approx(np.exp(-log_likelihood / metrics["words"]), rel=1e-12)
    assert metrics["bits_per_byte"] == pytest.approx(
        -log_likelihood / metrics["bytes"] / np.log(2), rel=1e-12
    )
    # The leaderboard ranks each protocol in a table of its own.
    tables = build_tables(collect([out]), None, roots=[out])
    assert sorted(tables) == ["articles", "articles.documents"]
    assert [row.rank for row in tables["articles.documents"].rows] == [1]


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["--dataset", "ptb", "--protocol", "documents"], "no article heading (a line ' = Title = ')"),
        (["--dataset", "ptb", "--protocol", "documents", "--batch-size", "2"], "--batch-size does not apply"),
    ],
)
def test_the_documents_protocol_refuses_what_it_cannot_do_in_one_line(arguments, message, capsys) -> None:
    assert harness_main(["eval", "unigram", *arguments, "--split", "test"]) == 2
    assert message in assert_one_line_error(capsys)


def _eval_unigram(corpus: Path, *options: str) -> int:
    """``harness eval unigram`` of the test split of ``corpus`` with ``options``."""
    return harness_main(["eval", "unigram", "--dataset", str(corpus), "--split", "test", *options])


def _documents_record(tmp_path: Path) -> dict:
    output = tmp_path / "r.json"
    assert _eval_unigram(_documents_corpus(tmp_path), "--protocol", "documents", "--output", str(output)) == 0
    return json.loads(output.read_text())


def test_the_schema_checks_the_document_figures(tmp_path: Path) -> None:
    record = _documents_record(tmp_path)
    ResultRecord.from_json(record)
    edited = {**record, "document_metrics": {**record["document_metrics"], "word_perplexity": 1.5}}
    with pytest.raises(InvalidResultRecord, match="document_metrics.word_perplexity 1.5 disagrees"):
        ResultRecord.from_json(edited)
    stream = {**record, "protocol": {**record["protocol"], "name": "stream"}}
    with pytest.raises(InvalidResultRecord, match="document_metrics in a result of the stream protocol"):
        ResultRecord.from_json(stream)
    unknown = {**record, "protocol": {**record["protocol"], "name": "sentences"}}
    with pytest.raises(
        InvalidResultRecord, match="protocol.name 'sentences' is not one of stream, documents"
    ):
        ResultRecord.from_json(unknown)
    older = {
        **record,
        "schema_version": 3,
        "protocol": {"batch_size": 1, "bptt": 100},
        "document_metrics": None,
    }
    assert ResultRecord.from_json(older).protocol.kind == "stream"


def test_the_api_takes_the_protocol_by_name(tmp_path: Path) -> None:
    corpus = _documents_corpus(tmp_path)
    (result,) = evaluate_model("unigram", corpus, splits="test", protocol="documents")
    assert result.record.protocol.name == "documents" and result.record.document_metrics["documents"] == 12
    with pytest.raises(ValueError, match="takes no batch size"):
        evaluate_model("unigram", corpus, splits="test", protocol="documents", batch_size=2)
    with pytest.raises(ValueError, match="protocol 'pages' is not one of stream, documents"):
        evaluate_model("unigram", corpus, splits="test", protocol="pages")


def test_a_byte_order_mark_is_no_token_of_the_first_document(tmp_path: Path) -> None:
    directory = _documents_corpus(tmp_path)
    text = TEXT.lstrip(" \n")  # the first line is the first article's heading
    (directory / "wiki.test.tokens").write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))
    (result,) = evaluate_model("unigram", directory, splits="test", protocol="documents", causality_audit=0)
    metrics = result.record.document_metrics
    assert metrics["documents"] == 3 and result.tokens == len(load_dataset(str(directory)).tokens("test").ids)
    assert metrics["bytes"] == sum(len(page.encode("utf-8")) for page in lm_eval_pages(text))


def test_crlf_line_ends_give_the_figures_of_lf_ones(tmp_path: Path) -> None:
    lf = _documents_corpus(tmp_path / "lf")
    crlf = _documents_corpus(tmp_path / "crlf")
    for split in ("train", "valid", "test"):
        path = crlf / f"wiki.{split}.tokens"
        path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    metrics = [
        evaluate_model("unigram", directory, splits="test", protocol="documents", causality_audit=0)[
            0
        ].record.document_metrics
        for directory in (lf, crlf)
    ]
    assert metrics[0] == metrics[1]
    assert metrics[0]["bytes"] == sum(len(page.encode("utf-8")) for page in lm_eval_pages(ARTICLES))


class StreamCache:
    """An honest stateful model: ``p(w)`` in proportion to 1 plus how often ``w`` was an input of
    its stream since ``reset``, so that its scores differ wherever a stream's history does."""

    def __init__(self, vocab_size: int) -> None:
        self.vocab_size = vocab_size

    def reset(self, batch_size: int) -> None:
        self.counts = np.zeros((batch_size, self.vocab_size))

    def log_dists(self, chunk: Chunk) -> np.ndarray:
        """float64 ``[B, T, V]``, the distributions at the chunk's positions."""
        log_dists = np.zeros((*chunk.targets.shape, self.vocab_size))
        for column in range(chunk.targets.shape[1]):
            real = chunk.mask[:, column]
            self.counts[real, chunk.inputs[real, column]] += 1
            log_dists[:, column] = np.log((1 + self.counts) / (1 + self.counts).sum(axis=1, keepdims=True))
        return log_dists

    def score(self, chunk: Chunk) -> ChunkScores:
        log_dists = self.log_dists(chunk)
        targets = np.take_along_axis(log_dists, chunk.targets[..., None], axis=2)[..., 0]
        wanted = chunk.distribution_mask
        return ChunkScores(targets, None if wanted is None else log_dists[wanted])


class StreamCacheReadingTargets(StreamCache):
    """The cache with half of each distribution moved onto the target it is shown."""

    def log_dists(self, chunk: Chunk) -> np.ndarray:
        return half_on_targets(super().log_dists(chunk), chunk.targets)


def _evaluate_documents(model, dataset, documents, **options):
    return evaluate(
        model,
        dataset.tokens("test").ids,
        eos_id=dataset.vocab.eos_id,
        vocab_size=len(dataset.vocab),
        documents=(documents.starts, documents.lengths),
        progress=False,
        name="m",
        **protocol_options({"protocol_name": "documents", "bptt": 4, **options}),
    )


def test_documents_in_batches_score_as_in_one_grid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dataset = load_dataset(str(_documents_corpus(tmp_path)))
    documents = split_documents(ARTICLES)
    one_grid = _evaluate_documents(StreamCache(len(dataset.vocab)), dataset, documents, causality_seed=1)
    assert len(document_batches(documents.lengths, max_positions=1 << 30)) > 1  # the halving rule
    monkeypatch.setattr(evaluation, "document_batches", lambda lengths: [np.arange(len(lengths))])
    plain = _evaluate_documents(StreamCache(len(dataset.vocab)), dataset, documents, causality_seed=1)
    np.testing.assert_array_equal(one_grid.token_log_probs, plain.token_log_probs)
    assert one_grid.causality.points == plain.causality.points == 40  # a quarter of the 160 tokens
    monkeypatch.setattr(
        evaluation, "document_batches", lambda lengths: document_batches(lengths, max_positions=8)
    )
    for seed in range(3):
        batched = _evaluate_documents(
            StreamCache(len(dataset.vocab)), dataset, documents, causality_seed=seed
        )
        np.testing.assert_array_equal(batched.token_log_probs, plain.token_log_probs)
        assert batched.causality.passed
        fewer = _evaluate_documents(StreamCache(len(dataset.vocab)), dataset, documents, causality_points=10)
        assert fewer.causality.points == 10  # shared among the batches, as many as one grid gets
        assert batched.audit.checked == plain.audit.checked > 0
        with pytest.raises(PluginError, match="^m: causality audit failed"):
            _evaluate_documents(
                StreamCacheReadingTargets(len(dataset.vocab)), dataset, documents, causality_seed=seed
            )


def test_one_long_article_among_thousands_of_short_ones_is_no_dense_grid(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = " = Long = \n" + " the cat sat on the mat . \n" * 2500 + " = Short = \n a cat . \n" * 2000
    directory = tmp_path / "skewed"
    directory.mkdir()
    for split in ("train", "valid", "test"):
        (directory / f"wiki.{split}.tokens").write_text(text, encoding="utf-8")
    dataset = load_dataset(str(directory))
    documents = split_documents(text)
    tokens = int(documents.lengths.sum())
    assert len(documents.starts) * int(documents.lengths.max()) > 1000 * tokens  # a dense grid's size
    real_grid, laid_out = evaluation.stream_grid, []

    def checked_grid(ids, *, eos_id, batch_size=1, bounds=None):
        """The grid, once its size is checked (before it is allocated)."""
        if bounds is not None:
            starts, lengths = bounds
            laid_out.append(len(starts) * int(lengths.max()))
            assert laid_out[-1] <= 2 * len(ids), f"a grid of {len(starts):,} x {int(lengths.max()):,}"
        return real_grid(ids, eos_id=eos_id, batch_size=batch_size, bounds=bounds)

    monkeypatch.setattr(evaluation, "stream_grid", checked_grid)
    model = unigram.load_model(dataset, device="cpu", checkpoint=None)
    result = _evaluate_documents(model, dataset, documents, bptt=100)
    assert sum(laid_out) <= 2 * tokens  # the padding is less than the tokens
    assert result.causality.passed and result.tokens == tokens
    streamed = evaluate(
        model, dataset.tokens("test").ids, eos_id=dataset.vocab.eos_id, vocab_size=len(dataset.vocab)
    )
    np.testing.assert_array_equal(result.token_log_probs, streamed.token_log_probs)
