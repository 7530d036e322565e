from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest
from conftest import TRAIN, write_corpus

from harness.datasets import load_dataset
from wikitext_toolkit_core.benchmarks import PACKAGED_DATA
from wikitext_toolkit_core.catalogue import BENCHMARKS, Benchmark
from wikitext_toolkit_core.files import DatasetError
from wikitext_toolkit_core.format import EOS, SPLITS, UNK


def test_token_stream_counts_one_eos_per_line_including_blank_lines(corpus: Path) -> None:
    dataset = load_dataset(str(corpus))
    lines = TRAIN.split("\n")[:-1]
    train = dataset.tokens("train")
    assert len(train.ids) == sum(len(line.split()) + 1 for line in lines)
    assert (train.ids == dataset.vocab.eos_id).sum() == len(lines)
    assert dataset.vocab.tokens[dataset.tokens("test").ids[0]] == EOS  # the leading blank line


def test_vocabulary_is_train_types_by_frequency_with_unk_added(corpus: Path) -> None:
    vocab = load_dataset(str(corpus)).vocab
    # 10 x <eos>; then "=" and "the" 6 times each, the tie broken by first occurrence
    assert vocab.tokens[:3] == (EOS, "=", "the")
    assert vocab.tokens[-1] == UNK  # train has no <unk>: appended
    assert len(vocab) == len(set(TRAIN.split())) + 2


def test_unseen_tokens_map_to_unk_and_are_counted(tmp_path: Path) -> None:
    dataset = load_dataset(str(write_corpus(tmp_path / "raw", "raw", test=" a zebra and a yak \n")))
    stream = dataset.tokens("test")
    assert stream.oov_tokens == 2
    assert list(stream.ids).count(dataset.vocab.unk_id) == 2


def test_an_empty_train_split_says_so(tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "c")
    (corpus / "wiki.train.tokens").write_text("", encoding="utf-8")
    dataset = load_dataset(str(corpus))
    with pytest.raises(DatasetError, match=r"wiki\.train\.tokens: the train split is empty"):
        dataset.vocab


def test_line_splitting_is_on_newline_only(tmp_path: Path) -> None:
    dataset = load_dataset(str(write_corpus(tmp_path / "c", test=" a\u2028b \n")))
    assert len(dataset.tokens("test").ids) == 3  # "a", "b" (split on whitespace), <eos>


def test_checksum_file_beside_the_data_detects_corruption(corpus: Path) -> None:
    test_file = corpus / "wiki.test.tokens"
    digest = hashlib.sha256(test_file.read_bytes()).hexdigest()
    (corpus / "SHA256SUMS").write_text(f"{digest}  wiki.test.tokens\n")
    assert load_dataset(str(corpus)).is_verified("test")
    load_dataset(str(corpus)).tokens("test")
    test_file.write_text(test_file.read_text().replace("cat", "cow"))
    with pytest.raises(DatasetError, match=r"wiki\.test\.tokens: sha256 mismatch"):
        load_dataset(str(corpus)).tokens("test")


def test_corrupted_benchmark_file_fails_its_canonical_checksum(tmp_path: Path) -> None:
    root = tmp_path / "data"
    for split in SPLITS:
        (root / "ptb").mkdir(parents=True, exist_ok=True)
        (root / "ptb" / f"ptb.{split}.txt").write_text(" the cat \n")
    with pytest.raises(DatasetError, match=r"ptb\.train\.txt: sha256 mismatch \(expected fcea919f"):
        load_dataset("ptb", data_dir=root).vocab


def test_checksum_advice_depends_on_being_the_benchmark_not_on_the_name(tmp_path: Path) -> None:
    # A builder directory that happens to be named like a benchmark is told to rebuild it.
    directory = write_corpus(tmp_path / "wikitext-2")
    (directory / "SHA256SUMS").write_text(f"{'0' * 64}  wiki.train.tokens\n")
    with pytest.raises(DatasetError, match=r"sha256 mismatch .*rebuild the corpus") as error:
        load_dataset(str(directory)).vocab
    assert "download it again" not in str(error.value)
    # The catalogue benchmark itself is told to download it again.
    root = tmp_path / "data"
    (root / "ptb").mkdir(parents=True)
    for split in SPLITS:
        (root / "ptb" / f"ptb.{split}.txt").write_text(" the cat \n")
    with pytest.raises(DatasetError, match=r"sha256 mismatch .*delete it to download it again"):
        load_dataset("ptb", data_dir=root).vocab


def test_an_empty_split_is_refused_by_tokens(corpus: Path) -> None:
    (corpus / "wiki.valid.tokens").write_text("", encoding="utf-8")
    dataset = load_dataset(str(corpus))
    assert len(dataset.tokens("train").ids) > 0
    message = r"wiki\.valid\.tokens: the valid split is empty \(no tokens\): nothing to score"
    with pytest.raises(DatasetError, match=message):
        dataset.tokens("valid")
    with pytest.raises(DatasetError, match=message):  # from the token cache, too
        load_dataset(str(corpus)).tokens("valid")


def test_files_lists_every_split_file(corpus: Path) -> None:
    dataset = load_dataset(str(corpus))
    assert dataset.files() == [corpus / f"wiki.{split}.tokens" for split in ("train", "valid", "test")]


def test_missing_split_and_bad_encoding_are_one_line_errors(corpus: Path) -> None:
    (corpus / "wiki.valid.tokens").unlink()
    with pytest.raises(DatasetError, match=r"missing split file .*wiki\.valid\.tokens"):
        load_dataset(str(corpus)).tokens("valid")
    (corpus / "wiki.test.tokens").write_bytes(b" caf\xe9 \n")
    with pytest.raises(DatasetError, match=r"wiki\.test\.tokens: not valid UTF-8 at byte 4"):
        load_dataset(str(corpus)).tokens("test")


def test_unknown_dataset_name(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="unknown dataset 'nope'"):
        load_dataset("nope")
    with pytest.raises(DatasetError, match="no split files found"):
        load_dataset(str(tmp_path))


@pytest.fixture
def toy_benchmark(monkeypatch: pytest.MonkeyPatch) -> Benchmark:
    benchmark = Benchmark("toy", {s: f"wiki.{s}.tokens" for s in SPLITS}, {}, (), "test")
    monkeypatch.setitem(BENCHMARKS, "toy", benchmark)
    return benchmark


def test_resolution_order_data_dir_then_env_then_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_cache: Path, toy_benchmark: Benchmark
) -> None:
    for place in ("flag", "env"):
        write_corpus(tmp_path / place / "toy")
    write_corpus(isolated_cache / "data" / "toy")
    monkeypatch.setenv("HARNESS_DATA_DIR", str(tmp_path / "env"))
    assert load_dataset("toy", data_dir=tmp_path / "flag").directory == tmp_path / "flag" / "toy"
    (tmp_path / "empty").mkdir()  # a --data-dir without the benchmark: the next place is used
    assert load_dataset("toy", data_dir=tmp_path / "empty").directory == tmp_path / "env" / "toy"
    monkeypatch.delenv("HARNESS_DATA_DIR")
    assert load_dataset("toy").directory == isolated_cache / "data" / "toy"


def test_not_found_without_download_names_the_places_searched(
    toy_benchmark: Benchmark, tmp_path: Path
) -> None:
    with pytest.raises(
        DatasetError,
        match=rf"toy: not found \(searched --data-dir {tmp_path}/toy, "
        r"packaged .*/wikitext_toolkit_core/data/toy, cache",
    ):
        load_dataset("toy", data_dir=tmp_path, download=False)


def test_a_data_dir_that_does_not_exist_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match=r"^--data-dir .*/nowhere: no such directory$"):
        load_dataset("ptb", data_dir=tmp_path / "nowhere")


@pytest.mark.parametrize(
    "name, counts, vocab_size",
    [
        ("ptb", (929_589, 73_760, 82_430), 10_000),
        ("wikitext-2", (2_088_628, 217_646, 245_569), 33_278),
    ],
)
def test_packaged_benchmarks_match_the_papers_table_1(
    name: str, counts: tuple[int, ...], vocab_size: int
) -> None:
    dataset = load_dataset(name, download=False)
    assert dataset.directory == PACKAGED_DATA / name
    assert tuple(len(dataset.tokens(split).ids) for split in SPLITS) == counts
    assert len(dataset.vocab) == vocab_size
    assert all(dataset.is_verified(split) for split in SPLITS)
    assert all(dataset.tokens(split).oov_tokens == 0 for split in SPLITS)
    if name == "wikitext-2":
        train = dataset.tokens("train").ids
        assert np.mean(train == dataset.vocab.unk_id) == pytest.approx(0.026, abs=0.0005)
