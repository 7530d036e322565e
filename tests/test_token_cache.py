"""The token cache: encoded splits and the vocabulary keyed by the files' checksums, memory-mapped
on later runs; stale and corrupt entries are detected and rebuilt, never used."""

from __future__ import annotations

import json
import logging
from functools import partial
from pathlib import Path

import numpy as np
import pytest
from conftest import TEST, TRAIN, write_corpus

from harness import datasets
from harness.datasets import load_dataset
from wikitext_toolkit_core.files import DatasetError
from wikitext_toolkit_core.format import SPLITS

#: What the tokenizer must produce: each line's whitespace tokens (str.split, so Unicode spaces
#: separate too), then <eos>; lines end at "\n" only.
TRICKY = " a\u2028b \r\n\u00a0c\x1cd\n\n  \nno newline at the end"


def _reference_tokens(text: str) -> list[str]:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [token for line in lines for token in (*line.split(), "<eos>")]


def _entry(cache: Path) -> Path:
    (entry,) = (cache / "tokens" / "v1").iterdir()
    return entry


def _streams(directory: Path) -> dict[str, np.ndarray]:
    dataset = load_dataset(str(directory))
    return {split: np.array(dataset.tokens(split).ids) for split in SPLITS}


def test_tokens_follow_the_line_convention(tmp_path: Path) -> None:
    directory = write_corpus(tmp_path / "c", test=TRICKY)
    (directory / "wiki.train.tokens").write_text(TRICKY, encoding="utf-8")
    dataset = load_dataset(str(directory))
    vocab = dataset.vocab
    for split in ("train", "test"):
        assert [vocab.tokens[i] for i in dataset.tokens(split).ids] == _reference_tokens(TRICKY)


@pytest.mark.parametrize("block_bytes", [1, 7, 1 << 23])
def test_block_boundaries_do_not_change_the_stream(
    corpus: Path, monkeypatch: pytest.MonkeyPatch, block_bytes: int, tmp_path: Path
) -> None:
    monkeypatch.setattr(datasets, "READ_BLOCK_BYTES", block_bytes)
    dataset = load_dataset(str(corpus))
    expected = _reference_tokens(TEST)
    assert [dataset.vocab.tokens[i] for i in dataset.tokens("test").ids] == expected
    counts = {token: _reference_tokens(TRAIN).count(token) for token in set(_reference_tokens(TRAIN))}
    frequencies = [counts.get(token, 0) for token in dataset.vocab.tokens]
    assert frequencies == sorted(frequencies, reverse=True)


def test_vocabulary_ties_are_broken_by_first_occurrence(tmp_path: Path) -> None:
    directory = write_corpus(tmp_path / "c")
    (directory / "wiki.train.tokens").write_text("b a c\na b\n", encoding="utf-8")
    assert load_dataset(str(directory)).vocab.tokens == ("b", "a", "<eos>", "c", "<unk>")


def test_later_runs_memory_map_the_cached_ids(corpus: Path, isolated_cache: Path) -> None:
    first = _streams(corpus)
    entry = _entry(isolated_cache)
    assert sorted(p.suffix for p in entry.iterdir()) == [".json"] * 4 + [".npy"] * 3 + [".txt"]
    dataset = load_dataset(str(corpus))
    stream = dataset.tokens("test")
    assert isinstance(stream.ids, np.memmap) and stream.ids.dtype == np.int32
    assert not stream.ids.flags.writeable
    for split in SPLITS:
        np.testing.assert_array_equal(dataset.tokens(split).ids, first[split])


def test_an_edited_file_gets_a_new_entry_never_the_stale_one(corpus: Path, isolated_cache: Path) -> None:
    before = _streams(corpus)
    (corpus / "wiki.test.tokens").write_text(TEST.replace("cat", "dog"), encoding="utf-8")
    after = _streams(corpus)
    dataset = load_dataset(str(corpus))
    assert [dataset.vocab.tokens[i] for i in after["test"]] == _reference_tokens(TEST.replace("cat", "dog"))
    assert not np.array_equal(before["test"], after["test"])
    # A new train file is a new vocabulary: a new entry directory.
    (corpus / "wiki.train.tokens").write_text(TRAIN + " zebra \n", encoding="utf-8")
    assert "zebra" in load_dataset(str(corpus)).vocab
    assert len(list((isolated_cache / "tokens" / "v1").iterdir())) == 2


def _corrupt_ids(entry: Path) -> None:
    ids_file = next(p for p in entry.glob("*.npy") if p.stat().st_size > 128)
    data = bytearray(ids_file.read_bytes())
    data[-1] ^= 1  # one flipped bit in the last id
    ids_file.write_bytes(bytes(data))


def _truncate_ids(entry: Path) -> None:
    for ids_file in entry.glob("*.npy"):
        ids_file.write_bytes(ids_file.read_bytes()[:-4])


def _corrupt_vocabulary(entry: Path) -> None:
    vocab = entry / "vocab.txt"
    vocab.write_text(vocab.read_text(encoding="utf-8").replace("cat", "cow"), encoding="utf-8")


def _garble_records(entry: Path) -> None:
    for record in entry.glob("*.json"):
        record.write_text("{not json", encoding="utf-8")


def _split_records(entry: Path) -> list[Path]:
    return [path for path in entry.glob("*.json") if path.name != "vocab.json"]


def _drop_out_of_vocabulary_count(entry: Path) -> None:
    for path in _split_records(entry):
        record = json.loads(path.read_text())
        del record["oov_tokens"]
        path.write_text(json.dumps(record))


def _set_out_of_vocabulary_count(entry: Path, value: object) -> None:
    for path in _split_records(entry):
        path.write_text(json.dumps({**json.loads(path.read_text()), "oov_tokens": value}))


def _swap_records(entry: Path) -> None:
    records = sorted(p for p in entry.glob("*.json") if p.name != "vocab.json")
    texts = [p.read_text() for p in records]
    for path, text in zip(records, texts[1:] + texts[:1]):
        path.write_text(text)


@pytest.mark.parametrize(
    "damage, reason",
    [
        (_corrupt_ids, "does not match its CRC-32"),
        (_truncate_ids, "unreadable"),
        (_corrupt_vocabulary, "vocab.txt does not match its checksum"),
        (_garble_records, "unreadable"),
        (_swap_records, "does not describe this entry"),
        (_drop_out_of_vocabulary_count, "oov_tokens None is not a count"),
        (partial(_set_out_of_vocabulary_count, value=None), "oov_tokens None is not a count"),
        (partial(_set_out_of_vocabulary_count, value=-1), "oov_tokens -1 is not a count"),
        (partial(_set_out_of_vocabulary_count, value="3"), "oov_tokens '3' is not a count"),
    ],
)
def test_a_corrupt_entry_is_detected_and_rebuilt(
    corpus: Path, isolated_cache: Path, caplog: pytest.LogCaptureFixture, damage, reason: str
) -> None:
    expected = _streams(corpus)
    damage(_entry(isolated_cache))
    rebuilt = _streams(corpus)
    for split in SPLITS:
        np.testing.assert_array_equal(rebuilt[split], expected[split])
    err = caplog.text
    assert "is corrupt" in err and reason in err and "rebuilding it" in err
    caplog.clear()
    assert _streams(corpus) and "corrupt" not in caplog.text  # healthy again


def test_an_unwritable_cache_is_only_a_note(
    corpus: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(blocker))
    dataset = load_dataset(str(corpus))
    assert [dataset.vocab.tokens[i] for i in dataset.tokens("test").ids] == _reference_tokens(TEST)
    assert "cannot write the token cache" in caplog.text


def test_invalid_utf8_is_named_with_its_byte_offset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(datasets, "READ_BLOCK_BYTES", 4)
    directory = write_corpus(tmp_path / "c")
    (directory / "wiki.train.tokens").write_bytes(b"ok line\nbad \xff byte\n")
    with pytest.raises(DatasetError, match=r"wiki\.train\.tokens: not valid UTF-8 at byte 12$"):
        load_dataset(str(directory)).vocab


def test_real_benchmarks_are_cached_and_identical_on_reload() -> None:
    first = load_dataset("wikitext-2")
    counts = {split: len(first.tokens(split).ids) for split in SPLITS}
    assert counts == {"train": 2_088_628, "valid": 217_646, "test": 245_569}
    again = load_dataset("wikitext-2")
    assert isinstance(again.tokens("train").ids, np.memmap)
    assert again.vocab.sha256() == first.vocab.sha256() and len(again.vocab) == 33_278
    np.testing.assert_array_equal(again.tokens("test").ids, first.tokens("test").ids)


def test_two_process_encoding_equals_one_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Large train files are encoded by two processes; the vocabulary and ids are the same."""
    directory = write_corpus(tmp_path / "c")
    (directory / "wiki.train.tokens").write_text(
        TRAIN * 50 + TRICKY + "\n" + TRAIN.upper() * 50, encoding="utf-8"
    )
    single = load_dataset(str(directory))
    expected = (single.vocab.tokens, np.array(single.tokens("train").ids))
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "other-cache"))
    monkeypatch.setattr(datasets, "LARGE_FILE_BYTES", 0)
    monkeypatch.setattr(datasets, "WORKER_PIECE_BYTES", 1000)  # the worker's half in pieces
    monkeypatch.setattr(datasets, "_cpus", lambda: 2)
    caplog.set_level(logging.INFO, logger="harness")
    double = load_dataset(str(directory))
    assert double.vocab.tokens == expected[0]
    np.testing.assert_array_equal(double.tokens("train").ids, expected[1])
    assert "encoding" in caplog.text


def test_a_file_rewritten_while_encoded_is_refused(corpus: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    original = datasets._line_blocks

    def rewriting(handle, *args):
        yield from original(handle, *args)
        (corpus / "wiki.train.tokens").write_text(TRAIN + " more \n", encoding="utf-8")

    monkeypatch.setattr(datasets, "_line_blocks", rewriting)
    with pytest.raises(DatasetError, match=r"wiki\.train\.tokens: changed while being read"):
        load_dataset(str(corpus)).vocab


@pytest.mark.parametrize("half", ["first", "second"])
def test_invalid_utf8_in_either_half_of_a_two_process_encoding_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, half: str
) -> None:
    directory = write_corpus(tmp_path / "c")
    good = (TRAIN * 40).encode()
    data = good + b"bad \xff\n" + good * 3 if half == "first" else good * 3 + b"bad \xff\n" + good
    (directory / "wiki.train.tokens").write_bytes(data)
    monkeypatch.setattr(datasets, "LARGE_FILE_BYTES", 0)
    monkeypatch.setattr(datasets, "_cpus", lambda: 2)
    offset = data.index(b"\xff")
    with pytest.raises(DatasetError, match=rf"wiki\.train\.tokens: not valid UTF-8 at byte {offset}$"):
        load_dataset(str(directory)).vocab
