"""``python -m harness contamination`` and :mod:`harness.contamination`: n-gram overlap of a
benchmark split with a training corpus, and the perplexity on the clean part."""

from __future__ import annotations

import gzip
import itertools
import json
import math
import random
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO, assert_one_line_error, write_corpus
from test_harness_faults import _replacing_after_first_open

from harness import contamination
from harness.cli import main
from harness.contamination import corpus_documents, corpus_files
from harness.datasets import load_dataset
from harness.plugins.hf.detokenize import detokenize_line
from wikitext_toolkit_core import ngrams
from wikitext_toolkit_core.files import DatasetError
from wikitext_toolkit_core.format import UTF8_BOM
from wikitext_toolkit_core.ngrams import Document, TestSide, normalized_words

#: The WikiText-2 test articles planted in the must-show corpus (by index: Du Fu, a battleship
#: class with many `<unk>`, and a typhoon season full of numbers).
PLANTED = (1, 3, 23)
POINTER_RESULT = REPO / "results" / "ptb" / "baselines.pointer_sentinel.ptb.test.json"


def split_lines(real_data_dir: Path, name: str, split: str) -> list[str]:
    filename = load_dataset(name).split_files[split]
    return (real_data_dir / name / filename).read_text(encoding="utf-8").split("\n")[:-1]


def detokenized_article(lines: list[str], unit: ngrams.Unit, invented: itertools.count) -> str:
    """The unit's lines as running text, each ``<unk>`` spelled as an invented word, or as three
    digits where it is part of a number (``18,<unk>``), as in the text WikiText was made from."""
    text = "\n".join(detokenize_line(line, "wikitext") for line in lines[unit.first_line - 1 :][: unit.lines])

    def spelled(unk: re.Match[str]) -> str:
        number = next(invented)
        in_a_number = re.search(r"\d[,.]$", text[: unk.start()]) or re.match(r"[,.]\d", text[unk.end() :])
        return f"{number % 1000:03d}" if in_a_number else f"Zqx{number}"

    return re.sub("<unk>", spelled, text)


def write_jsonl_gz(path: Path, records: list[dict[str, object]]) -> Path:
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.writelines(json.dumps(record) + "\n" for record in records)
    return path


@pytest.fixture(scope="module")
def wikitext2_test() -> TestSide:
    return TestSide.from_split(load_dataset("wikitext-2"), "test")


@pytest.fixture
def planted_corpus(tmp_path: Path, real_data_dir: Path, wikitext2_test: TestSide) -> Path:
    """A directory: WikiText-2 train (other articles, as tokenized) and a .jsonl.gz of PTB valid
    text with three WikiText-2 test articles, detokenized, planted among its records."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "wiki-train.txt").write_bytes((real_data_dir / "wikitext-2" / "wiki.train.tokens").read_bytes())
    ptb = split_lines(real_data_dir, "ptb", "valid")
    records: list[dict[str, object]] = [
        {"text": "\n".join(ptb[i : i + 200]), "id": i} for i in range(0, 3000, 200)
    ]
    test_lines, invented = split_lines(real_data_dir, "wikitext-2", "test"), itertools.count()
    for slot, index in enumerate(PLANTED):
        text = detokenized_article(test_lines, wikitext2_test.units[index], invented)
        records.insert(4 * slot + 2, {"text": text, "id": f"planted-{index}"})
    write_jsonl_gz(corpus / "web.jsonl.gz", records)
    (corpus / ".lock").write_text("\0 hidden files are not read")
    return corpus


def synthetic_result(tmp_path: Path, dataset_name: str, split: str, seed: int = 0) -> Path:
    """A saved evaluation of ``dataset_name``/``split`` with random per-token log-probabilities,
    written as ``harness eval --output-dir`` writes them."""
    dataset = load_dataset(dataset_name)
    tokens = len(dataset.tokens(split).ids)
    values = np.log(np.random.default_rng(seed).uniform(1e-6, 1.0, tokens))
    result = tmp_path / f"model.{dataset_name}.{split}.json"
    np.save(result.with_name(f"model.{dataset_name}.{split}.logprobs.npy"), values)
    record = {
        "dataset": dataset.name,
        "split": split,
        "dataset_sha256": dataset.verify(split),
        "tokens": tokens,
        "nll": -float(values.mean()),
        "perplexity": math.exp(-float(values.mean())),
        "model": "synthetic",
        "token_log_probs_file": f"somewhere/else/model.{dataset_name}.{split}.logprobs.npy",
    }
    result.write_text(json.dumps(record))
    return result


# ---- must show -----------------------------------------------------------------------------------


def test_three_planted_wikitext2_test_articles_are_found_and_no_other(
    planted_corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report_path = tmp_path / "report.json"
    argv = ["contamination", str(planted_corpus), "--dataset", "wikitext-2", "--split", "test"]
    assert main([*argv, "--output", str(report_path)]) == 0
    report = json.loads(report_path.read_text())
    overlaps = [article["overlap"] for article in report["articles"]]
    assert len(overlaps) == 60 and report["tokens"] == 245_569
    for index in PLANTED:
        assert overlaps[index] >= 0.5, (index, overlaps[index])
        assert overlaps[index] > 0.99  # detokenized and <unk> spelled out: every n-gram is found
        source = report["articles"][index]["found_in"][0]
        assert source["document"].startswith(str(planted_corpus / "web.jsonl.gz") + ":")
    others = [overlap for index, overlap in enumerate(overlaps) if index not in PLANTED]
    assert max(others) < 0.05, max(others)
    assert [entry["article"] for entry in report["contaminated"]] == list(PLANTED)
    planted_tokens = sum(report["articles"][index]["tokens"] for index in PLANTED)
    assert report["contaminated_tokens"] == planted_tokens
    assert report["contaminated_token_share"] == planted_tokens / 245_569
    assert report["settings"] == {
        "corpus": [str(planted_corpus)],
        "threshold": 0.5,
        "block_lines": None,
        "text_field": "text",
        "ngram": 13,
        "units": "articles",
        "seed_words": 4,
    }
    assert report["corpus_documents"] == 1 + 15 + 3  # the text file, the PTB records, the planted ones
    out = capsys.readouterr().out
    assert "contaminated (overlap >= 0.5): 3 of 60 articles" in out
    assert all(report["articles"][index]["title"] in out for index in PLANTED)


def test_clean_and_contaminated_perplexities_recombine_exactly(
    planted_corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = synthetic_result(tmp_path, "wikitext-2", "test")
    report_path = tmp_path / "report.json"
    argv = ["contamination", str(planted_corpus), "--dataset", "wikitext-2", "--split", "test"]
    assert main([*argv, "--output", str(report_path), "--result", str(result)]) == 0
    report = json.loads(report_path.read_text())
    clean, dirty = report["log_prob_sum_clean"], report["log_prob_sum_contaminated"]
    n_clean, n_dirty = report["tokens_clean"], report["tokens_contaminated"]
    assert n_dirty == report["contaminated_tokens"] and n_clean + n_dirty == 245_569
    assert math.exp(-(clean + dirty) / (n_clean + n_dirty)) == report["perplexity_all"]
    assert math.isclose(report["perplexity_all"], json.loads(result.read_text())["perplexity"], rel_tol=1e-12)
    weighted = n_clean * math.log(report["perplexity_clean"]) + n_dirty * math.log(
        report["perplexity_contaminated"]
    )
    assert math.isclose(weighted / (n_clean + n_dirty), math.log(report["perplexity_all"]), rel_tol=1e-12)
    # Independently: the planted articles' tokens are those of their lines, one <eos> per line.
    values = np.load(tmp_path / "model.wikitext-2.test.logprobs.npy")
    starts = np.cumsum([0] + [article["tokens"] for article in report["articles"]])
    dirty_values = np.concatenate([values[starts[i] : starts[i + 1]] for i in PLANTED])
    assert math.isclose(report["perplexity_contaminated"], math.exp(-dirty_values.mean()), rel_tol=1e-12)
    assert "perplexity: all " in capsys.readouterr().out


def test_a_real_ptb_result_splits_by_blocks_of_lines(tmp_path: Path, real_data_dir: Path) -> None:
    """The packaged Pointer Sentinel-LSTM's saved PTB test scores, split by 100-line blocks
    when the corpus holds the first 250 lines of PTB test (blocks 1 and 2 whole, 3 half)."""
    lines = split_lines(real_data_dir, "ptb", "test")
    corpus = tmp_path / "news.txt"
    corpus.write_text("\n".join(lines[:250]).replace(" 's", "'s") + "\n")
    report_path = tmp_path / "report.json"
    argv = ["contamination", str(corpus), "--dataset", "ptb", "--split", "test", "--output", str(report_path)]
    assert main([*argv, "--result", str(POINTER_RESULT)]) == 0
    report = json.loads(report_path.read_text())
    assert report["settings"]["units"] == "blocks" and report["settings"]["block_lines"] == 100
    assert [article["title"] for article in report["articles"][:2]] == ["lines 1-100", "lines 101-200"]
    assert len(report["articles"]) == 38 and report["tokens"] == 82_430
    overlaps = [article["overlap"] for article in report["articles"]]
    assert overlaps[:2] == [1.0, 1.0] and 0.4 < overlaps[2] < 0.6 and max(overlaps[3:]) < 0.05
    assert report["perplexity_all"] == math.exp(
        -(report["log_prob_sum_clean"] + report["log_prob_sum_contaminated"]) / 82_430
    )
    recorded = json.loads(POINTER_RESULT.read_text(encoding="utf-8"))["perplexity"]
    assert math.isclose(report["perplexity_all"], recorded, rel_tol=1e-9)
    token_count = sum(len(line.split()) + 1 for line in lines[:200])
    values = np.load(POINTER_RESULT.with_name("baselines.pointer_sentinel.ptb.test.logprobs.npy"))
    assert report["tokens_contaminated"] == token_count
    assert math.isclose(
        report["perplexity_contaminated"], math.exp(-values[:token_count].mean()), rel_tol=1e-12
    )
    assert math.isclose(report["perplexity_clean"], math.exp(-values[token_count:].mean()), rel_tol=1e-12)


# ---- units and token positions -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("split", "titles"), [("test", ["Robert <unk>", "Du Fu"]), ("valid", ["Homarus gammarus", "Frank <unk>"])]
)
def test_articles_cover_every_token_of_the_split_once(split: str, titles: list[str]) -> None:
    dataset = load_dataset("wikitext-2")
    test = TestSide.from_split(dataset, split)
    assert len(test.units) == 60  # the level-1 titles between blank lines (not 2 table remnants)
    assert [unit.title for unit in test.units[:2]] == titles
    assert test.unit_tokens().sum() == test.tokens == len(dataset.tokens(split).ids)
    firsts = [unit.first_line for unit in test.units]
    assert firsts[0] == 1 and all(
        unit.first_line + unit.lines == following for unit, following in zip(test.units, firsts[1:])
    )


def test_a_title_on_the_first_line_starts_an_article() -> None:
    """A hand-made split without WikiText's leading blank line: its first title still counts."""
    side = TestSide.from_lines([" = A = ", "", " a b c d e ", "", " = B = ", "", " f g h i j ", ""], ngram=5)
    assert [unit.title for unit in side.units] == ["A", "B"]


def test_ptb_blocks_cover_every_token_and_n_is_a_wildcard() -> None:
    dataset = load_dataset("ptb")
    test = TestSide.from_split(dataset, "test", block_lines=500)
    assert test.kind == "blocks" and len(test.units) == 8 and test.units[-1].title == "lines 3501-3761"
    assert test.tokens == len(dataset.tokens("test").ids) == 82_430
    side = TestSide.from_lines(
        ["the company said it paid $ N million for N shares of the unit"], style="ptb", ngram=8
    )
    news = "The company said it paid $3.5 million for 1,200 shares of the unit."
    overlaps = side.scan([Document("news", [news])])
    # 6 8-grams; 3 hold 4 known words in a row (the others: "said it paid N million for N shares"...)
    assert overlaps.found.tolist() == overlaps.ngrams.tolist() == [3] and overlaps.unchecked.tolist() == [3]


def test_a_byte_order_mark_is_skipped_as_the_harness_skips_it(tmp_path: Path) -> None:
    """A split saved with a BOM keeps its first article and the harness's token count."""
    text = " \n = Alpha = \n \n one two three four five \n \n = Bravo = \n \n six seven eight nine \n"
    directory = write_corpus(tmp_path / "marked", test=text)
    (directory / "wiki.test.tokens").write_bytes(UTF8_BOM + text.encode())
    dataset = load_dataset(str(directory))
    test = TestSide.from_split(dataset, "test")
    assert [unit.title for unit in test.units] == ["Alpha", "Bravo"]
    assert test.tokens == len(dataset.tokens("test").ids)
    (directory / "wiki.test.tokens").write_bytes(UTF8_BOM + b" \n \xff\n")
    with pytest.raises(DatasetError, match=r"wiki\.test\.tokens: not valid UTF-8 at byte 6$"):
        TestSide.from_split(load_dataset(str(directory)), "test")


def test_a_split_replaced_after_its_checksum_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The units scanned are those of the file whose checksum the report records."""
    directory = write_corpus(tmp_path / "toy")
    test_file = directory / "wiki.test.tokens"
    _replacing_after_first_open(monkeypatch, test_file, " another text altogether \n")
    dataset = load_dataset(str(directory))
    dataset.verify("test")  # as the command does, for the report's dataset_sha256
    with pytest.raises(DatasetError, match=r"wiki\.test\.tokens: changed while being read; run again"):
        TestSide.from_split(dataset, "test", units="blocks")


def test_an_empty_split_is_one_line() -> None:
    with pytest.raises(ngrams.ContaminationError, match="^the split holds no words to look for$"):
        TestSide.from_lines(["", " ", ""], units="blocks")


def test_a_split_without_level_one_titles_needs_blocks(tmp_path: Path) -> None:
    with pytest.raises(ngrams.ContaminationError, match="--units blocks"):
        TestSide.from_split(load_dataset(str(write_corpus(tmp_path / "toy"))), "test")


# ---- normalisation and the wildcard rule ---------------------------------------------------------


def test_wikitext_tokenization_and_running_text_give_the_same_words() -> None:
    wikitext = "The red @-@ tipped U.S. ship ( 8 @,@ 600 t ) didn 't sail at 0 @.@ 7 knots ."
    assert ngrams.line_words(wikitext.split(), frozenset({"<unk>"})) == normalized_words(
        "the Red-tipped U.S. ship (8,600 t) didn't sail at 0.7 knots."
    )
    assert normalized_words("ＴＨＥ ﬁnal Straße 1,000") == ["the", "final", "strasse", "1,000"]
    assert ngrams.line_words("a <unk> word".split(), frozenset({"<unk>"})) == ["a", None, "word"]


def test_a_number_joined_to_an_unk_is_one_wildcard_as_a_corpus_spells_it_one_word() -> None:
    """WikiText writes ``18,125`` as ``18 @,@ 125``, and ``<unk>`` can stand for a part of it
    (42 lines of WikiText-2 test): the whole number is one wildcard, so a verbatim copy matches."""
    unk = frozenset({"<unk>"})
    assert ngrams.line_words("about 18 @,@ <unk> men".split(), unk) == ["about", None, "men"]
    assert ngrams.line_words("in 1 @,@ <unk> @.@ 5 ships".split(), unk) == ["in", None, "ships"]
    assert ngrams.line_words("<unk> @,@ 000 men".split(), unk) == [None, "men"]
    assert ngrams.line_words("a red @-@ <unk> bird".split(), unk) == ["a", "red", None, "bird"]
    side = TestSide.from_lines(
        ["", " = T = ", "", " one two three 18 @,@ <unk> five six seven ", ""], ngram=8
    )
    copy = side.scan([Document("d", ["T one two three 18,125 five six seven"])])
    assert copy.found.tolist() == side.ngrams().tolist() == [1]


def test_an_unk_matches_any_one_corpus_word_and_wildcard_heavy_ngrams_are_not_checked() -> None:
    side = TestSide.from_lines(
        ["", " = T = ", "", " one two <unk> four five six seven eight <unk> ten ", ""], ngram=8
    )
    # "t one two W four five six seven eight W ten": 4 8-grams, each holding 4 known words in a row.
    assert side.ngrams().tolist() == [4] and side.unchecked.tolist() == [0]
    overlaps = side.scan([Document("d", ["T. One two Three four five, six seven eight nine ten!"])])
    assert overlaps.found.tolist() == [4]
    missing = side.scan([Document("d", ["T one two three four five six seven eight"])])
    assert missing.found.tolist() == [2]  # "ten" missing: the last two 8-grams are not there
    sparse = TestSide.from_lines(["", " = T = ", "", " a <unk> b <unk> c <unk> d e f ", ""], ngram=5)
    assert sparse.ngrams().tolist() == [0] and sparse.unchecked.tolist() == [6]


def brute_force_found(unit_words: list[list[str | None]], documents: list[list[str]], n: int) -> list[int]:
    """Per unit, its n-grams holding 4 known words in a row that some document holds (a wildcard
    matching any word), by comparing every pair of windows."""
    found = []
    for words in unit_words:
        count = 0
        for start in range(len(words) - n + 1):
            window = words[start : start + n]
            if not any(all(w is not None for w in window[i : i + 4]) for i in range(n - 3)):
                continue
            count += any(
                all(w is None or w == c for w, c in zip(window, document[i : i + n]))
                for document in documents
                for i in range(len(document) - n + 1)
            )
        found.append(count)
    return found


@pytest.mark.parametrize("chunk_words", [40, 97, 1 << 20])
def test_the_scan_finds_exactly_what_brute_force_finds(
    chunk_words: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Random texts over 6 words (so that n-grams repeat), with wildcards; buffers of any size."""
    monkeypatch.setattr(ngrams, "CHUNK_WORDS", chunk_words)
    monkeypatch.setattr(ngrams, "VERIFY_BATCH", 7)
    rng = random.Random(5)
    vocabulary = ["a", "b", "c", "d", "e", "f"]
    unit_words: list[list[str | None]] = [
        [None if rng.random() < 0.12 else rng.choice(vocabulary[:3]) for _ in range(rng.randrange(3, 80))]
        for _ in range(6)
    ]
    documents = [[rng.choice(vocabulary[:4]) for _ in range(rng.randrange(0, 300))] for _ in range(9)]
    units = [ngrams.Unit(f"u{i}", i + 1, 1, len(words)) for i, words in enumerate(unit_words)]
    side = TestSide(units, unit_words, 6, "articles")
    overlaps = side.scan(
        Document(f"doc{i}", [" ".join(words[:50]), " ".join(words[50:])]) for i, words in enumerate(documents)
    )
    assert overlaps.found.tolist() == brute_force_found(unit_words, documents, 6)
    assert overlaps.words == sum(map(len, documents)) and overlaps.documents == 9
    for unit, sources in enumerate(overlaps.sources):
        for label, count in sources:
            document = documents[int(label.removeprefix("doc"))]
            assert count == brute_force_found([unit_words[unit]], [document], 6)[0] > 0


# ---- reading corpora -----------------------------------------------------------------------------


def test_long_texts_are_read_and_normalised_a_slice_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(contamination, "READ_BLOCK_BYTES", 16)
    monkeypatch.setattr(ngrams, "TEXT_SLICE_CHARS", 16)
    side = TestSide.from_lines(
        ["", " = T = ", "", " alpha beta gamma delta epsilon zeta eta theta ", ""], ngram=6
    )
    one_line = tmp_path / "one-line.txt"  # no newline at all: cut at spaces
    one_line.write_text("x " * 20 + "T alpha beta gamma delta epsilon zeta eta theta" + " y" * 20)
    record = write_jsonl_gz(tmp_path / "r.jsonl.gz", [{"text": one_line.read_text()}])
    for corpus in (one_line, record):
        pieces = [piece for document in corpus_documents([corpus]) for piece in document.pieces]
        overlaps = side.scan(corpus_documents([corpus]))
        assert overlaps.found.tolist() == overlaps.ngrams.tolist() == [4], corpus
    assert len(pieces) == 1  # a JSON record is one piece, sliced only when normalised
    assert max(map(len, ngrams._between_words(pieces[0]))) <= 16


def test_corpus_inputs_plain_gzip_jsonl_builder_and_directories(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(contamination, "READ_BLOCK_BYTES", 7)  # lines longer than a block
    builder = write_corpus(tmp_path / "built")
    (builder / "manifest.jsonl").write_text('{"title": "not text"}\n')
    folder = tmp_path / "folder"
    (folder / "sub").mkdir(parents=True)
    (folder / "b.txt.gz").write_bytes(gzip.compress(b"second file\n"))
    (folder / "sub" / "a.jsonl").write_text('{"body": "first"}\n\n{"body": "record"}\n')
    (folder / ".hidden").write_text("skipped")
    files = corpus_files([builder, folder])
    assert [path.name for path in files] == [
        "wiki.train.tokens",
        "wiki.valid.tokens",
        "wiki.test.tokens",
        "b.txt.gz",
        "a.jsonl",
    ]
    documents = list(corpus_documents(files, "body"))
    assert [document.label for document in documents[3:]] == [
        str(folder / "b.txt.gz"),
        f"{folder / 'sub' / 'a.jsonl'}:1",
        f"{folder / 'sub' / 'a.jsonl'}:3",
    ]
    assert "".join(documents[0].pieces) == (builder / "wiki.train.tokens").read_text()
    assert ["".join(document.pieces) for document in documents[3:]] == ["second file\n", "first", "record"]


@pytest.mark.parametrize(
    ("content", "name", "message"),
    [
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "image.png", "binary data (a NUL byte at byte 8), not text"),
        ("caf\u00e9\n".encode("latin-1"), "latin.txt", "not UTF-8 text (invalid byte at 3)"),
        (b"not gzip at all", "fake.txt.gz", "cannot read it"),
        (b'{"text": "fine"}\n{"text": \n', "broken.jsonl", "broken.jsonl:2: not a JSON line"),
        (
            b'{"title": "x", "body": "y"}\n',
            "fields.jsonl",
            "fields.jsonl:1: no 'text' field (--text-field; it has: title, body)",
        ),
        (b'["text"]\n', "array.jsonl", "array.jsonl:1: not a JSON object"),
        (b'{"text": 5}\n', "number.jsonl", "field 'text' is not a string"),
    ],
)
def test_a_corpus_that_is_not_text_is_one_line(
    content: bytes, name: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = tmp_path / name
    corpus.write_bytes(content)
    argv = [
        "contamination",
        str(corpus),
        "--dataset",
        "ptb",
        "--split",
        "test",
        "--output",
        str(tmp_path / "r.json"),
    ]
    assert main(argv) == 2
    assert_one_line_error(capsys, message)
    assert not (tmp_path / "r.json").exists()


# ---- bad input is one line -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--threshold", "1.5"], "--threshold: must be greater than 0 and at most 1"),
        (["--ngram", "3"], "n-grams of 3 words: at least 4 needed"),
        (["--ngram", "10000000000000"], "n-grams of 10,000,000,000,000 words: at most 1,000"),
        (["--block-lines", "50", "--units", "articles"], "--block-lines applies to --units blocks"),
        (["--units", "sentences"], "invalid choice: 'sentences'"),
    ],
)
def test_bad_options_are_one_line(
    extra: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = tmp_path / "c.txt"
    corpus.write_text("text\n")
    argv = [
        "contamination",
        str(corpus),
        "--dataset",
        "wikitext-2",
        "--split",
        "test",
        "--output",
        str(tmp_path / "r.json"),
    ]
    assert main([*argv, *extra]) == 2
    assert_one_line_error(capsys, message)


def test_missing_corpus_and_empty_directory_fail_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--dataset", "wikitext-2", "--split", "test", "--output", str(tmp_path / "r.json")]
    assert main(["contamination", str(tmp_path / "nowhere.txt"), *argv]) == 2
    assert_one_line_error(capsys, "nowhere.txt: no such file or directory")
    (tmp_path / "empty").mkdir()
    assert main(["contamination", str(tmp_path / "empty"), *argv]) == 2
    assert_one_line_error(capsys, "an empty directory")


def test_the_report_may_not_overwrite_an_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = tmp_path / "c.txt"
    corpus.write_text("text\n")
    argv = [
        "contamination",
        str(corpus),
        "--dataset",
        "wikitext-2",
        "--split",
        "test",
        "--output",
        str(corpus),
    ]
    assert main(argv) == 2
    assert_one_line_error(capsys, "is an input of this command")
    assert corpus.read_text() == "text\n"


@pytest.mark.parametrize(
    ("dataset", "split", "change", "message"),
    [
        ("wikitext-2", "valid", {}, "a result of wikitext-2/valid, not of wikitext-2/test"),
        ("ptb", "test", {}, "a result of ptb/test, not of wikitext-2/test"),
        (
            "wikitext-2",
            "test",
            {"dataset_sha256": "0" * 64},
            "scored another version of the wikitext-2 test file",
        ),
        ("wikitext-2", "test", {"token_log_probs_file": None}, "no per-token log-probabilities recorded"),
        ("wikitext-2", "test", {"perplexity": 1234.5}, "the per-token file is not this result's"),
        ("wikitext-2", "test", {"tokens": 5}, "245569 per-token log-probabilities and 5 tokens recorded"),
    ],
)
def test_a_result_that_does_not_fit_is_one_line(
    dataset: str,
    split: str,
    change: dict[str, object],
    message: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    result = synthetic_result(tmp_path, dataset, split)
    record = json.loads(result.read_text())
    result.write_text(json.dumps({**record, **change}))
    corpus = tmp_path / "c.txt"
    corpus.write_text("text\n")
    argv = [
        "contamination",
        str(corpus),
        "--dataset",
        "wikitext-2",
        "--split",
        "test",
        "--output",
        str(tmp_path / "r.json"),
    ]
    assert main([*argv, "--result", str(result)]) == 2
    assert_one_line_error(capsys, message)


def test_the_per_token_file_is_found_relative_to_the_result(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = synthetic_result(tmp_path, "wikitext-2", "test")
    (tmp_path / "scores").mkdir()
    (tmp_path / "model.wikitext-2.test.logprobs.npy").rename(tmp_path / "scores" / "lp.npy")
    result.write_text(json.dumps({**json.loads(result.read_text()), "token_log_probs_file": "scores/lp.npy"}))
    corpus = tmp_path / "c.txt"
    corpus.write_text("text\n")
    argv = ["contamination", str(corpus), "--dataset", "wikitext-2", "--split", "test"]
    assert main([*argv, "--output", str(tmp_path / "r.json"), "--result", str(result)]) == 0
    assert json.loads((tmp_path / "r.json").read_text())["tokens_contaminated"] == 0


def test_the_report_may_not_overwrite_the_results_per_token_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = synthetic_result(tmp_path, "wikitext-2", "test")
    per_token = tmp_path / "model.wikitext-2.test.logprobs.npy"
    kept = per_token.read_bytes()
    corpus = tmp_path / "c.txt"
    corpus.write_text("text\n")
    argv = ["contamination", str(corpus), "--dataset", "wikitext-2", "--split", "test"]
    assert main([*argv, "--result", str(result), "--output", str(per_token)]) == 2
    assert_one_line_error(capsys, "is an input of this command")
    assert per_token.read_bytes() == kept


def test_a_result_whose_per_token_file_is_gone_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = synthetic_result(tmp_path, "wikitext-2", "test")
    (tmp_path / "model.wikitext-2.test.logprobs.npy").unlink()
    corpus = tmp_path / "c.txt"
    corpus.write_text("text\n")
    argv = [
        "contamination",
        str(corpus),
        "--dataset",
        "wikitext-2",
        "--split",
        "test",
        "--output",
        str(tmp_path / "r.json"),
    ]
    assert main([*argv, "--result", str(result)]) == 2
    assert_one_line_error(
        capsys, "its per-token file somewhere/else/model.wikitext-2.test.logprobs.npy is missing"
    )


def test_every_option_shows_its_default_and_the_module_imports_no_torch() -> None:
    help_text = subprocess.run(
        [sys.executable, "-m", "harness", "contamination", "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    options = help_text.split("options:")[1]
    for option in ("--ngram", "--threshold", "--result", "--units", "--block-lines", "--text-field"):
        section = options[options.index(option + " ") :].split("\n  --")[0]
        assert "default" in section, section
    modules = subprocess.run(
        [sys.executable, "-c", "import sys, harness.contamination; print(' '.join(sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert "torch" not in modules and "harness.evaluate" not in modules
