"""Contamination check: how much of a benchmark split a training corpus contains, by word n-grams,
and the perplexity on the clean part of the split.

``python -m harness contamination CORPUS... --dataset NAME --split SPLIT --output REPORT.json``
(:mod:`harness.cli`) and, later, the builder's overlap filter call this module:

- :class:`TestSide` holds one split in memory: its **units** (WikiText: articles, each opened by a
  level-1 heading `` = Title = `` that stands between blank lines, the lines before the first
  title joining the first article; PTB: blocks of ``block_lines`` lines), the number of tokens
  each holds as the harness counts them (whitespace tokens plus one ``<eos>`` per line), and the
  normalised words of each unit.
- :meth:`TestSide.scan` streams a corpus, :class:`Document` by :class:`Document`, and returns the
  :class:`Overlaps`: per unit, the share of its n-grams found in the corpus, and the documents
  that hold them.
- :func:`corpus_files` and :func:`corpus_documents` read what a user trained on: plain text files
  (optionally ``.gz``, ``.xz``, ``.bz2``), JSON lines (``.jsonl``, ``.jsonl.gz``, ...) with a
  text field, a builder corpus directory (its ``wiki.*.tokens``) or a directory of such files.
- :func:`read_scored_result` and :func:`split_perplexity` split a saved result's per-token
  log-probabilities into the clean and contaminated units, with no re-run.

**Normalisation** (the same function, :func:`normalized_words`, on both sides): Unicode NFKC,
case folded, then the words are the runs of letters and digits, a number keeping its inner
``,`` and ``.`` (``8,600``, ``0.7``); punctuation and markup vanish. On the test side WikiText's
`` @-@ ``, `` @,@ `` and `` @.@ `` are first joined back (``8 @,@ 600`` -> ``8,600``), so its
tokenisation (``don 't``, ``U.S .``, ``( 1999 )``) and any detokenised or differently tokenised
copy give the same words.

**Wildcards**: a test ``<unk>`` (and, in PTB, ``N``, which stands for a number) is one word the
corpus spells out: it matches any one corpus word. An n-gram is *checked* when it holds
:data:`SEED_WORDS` consecutive words that are not wildcards (for the default 13-grams: every
13-gram with at most two wildcards); an n-gram that is mostly wildcards says nothing and counts
neither as found nor as missing (``unchecked``). Every checked n-gram is matched exactly: the
test side indexes its wildcard-free 4-grams (the seeds); each seed found in the corpus aligns
the corpus with the test text there, and the n-grams around it are compared word by word.

Memory: the test side (a few int32 arrays per word of the split) plus about
:data:`CHUNK_WORDS` corpus words at a time; the corpus is never held whole.

Standard library and numpy only (with :mod:`harness.datasets` and :mod:`core.files`): it
imports neither torch nor the evaluator, so the builder and the leaderboard can use it.
"""

from __future__ import annotations

import bz2
import dataclasses
import gzip
import itertools
import json
import lzma
import math
import re
import unicodedata
import zlib
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np

from core.files import DatasetError
from core.format import SPLITS, UNK
from harness.datasets import UTF8_BOM, Dataset

#: Defaults of the command line.
DEFAULT_NGRAM = 13
DEFAULT_THRESHOLD = 0.5
DEFAULT_BLOCK_LINES = 100
DEFAULT_TEXT_FIELD = "text"
#: Shortest n-gram length accepted: shorter n-grams are found by chance.
MIN_NGRAM = 4
#: Consecutive non-wildcard words a checked n-gram must hold (the seed length).
SEED_WORDS = 4
#: How a split is cut into units: ``auto`` is ``blocks`` for PTB files (``ptb.*.txt``), else
#: ``articles``.
UNIT_KINDS = ("auto", "articles", "blocks")
#: Corpus words scanned at a time (bounds the memory of the corpus side).
CHUNK_WORDS = 1 << 20
#: Seed hits verified at a time (each costs about ``2 * ngram`` int32 words twice).
VERIFY_BATCH = 1 << 16
#: Bytes of a text file read at a time.
READ_BLOCK_BYTES = 1 << 23
#: Documents named per unit in the report (those holding most of its n-grams).
REPORTED_SOURCES = 3
#: Relative tolerance between a result's perplexity and that of its per-token file.
PERPLEXITY_RTOL = 1e-9
#: Version of the report's layout.
REPORT_VERSION = 1

# Word ids: the test side's words are >= 0; these sentinels are negative.
_WILDCARD = -1  # a test <unk>: matches any corpus word
_OTHER = -2  # a corpus word absent from the test side: matches only a wildcard
_PAD = -3  # between corpus documents: matches nothing
_BOUNDARY = -4  # between test units: matches nothing

_WORD = re.compile(r"\d+(?:[.,]\d+)*|[^\W_]+")
_WIKITEXT_SPLITS = ((" @-@ ", "-"), (" @,@ ", ","), (" @.@ ", "."))
#: Odd 64-bit multipliers of the seed hash, one per word of a seed.
_SEED_MULTIPLIERS = np.array(
    [0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0xD6E8FEB86659FD93][:SEED_WORDS],
    dtype=np.uint64,
)
_OPENERS = {".gz": gzip.open, ".xz": lzma.open, ".bz2": bz2.open}
_READ_ERRORS = (OSError, EOFError, zlib.error, lzma.LZMAError)


class ContaminationError(Exception):
    """A corpus, a result or an option that cannot be used; the message is one line."""


# ---- normalisation ------------------------------------------------------------------------------


def normalized_words(text: str) -> list[str]:
    """The words of ``text`` as both sides are compared: NFKC, case folded, runs of letters and
    digits (a number keeps its inner ``,`` and ``.``)."""
    if not text.isascii():
        text = unicodedata.normalize("NFKC", text)
    return _WORD.findall(text.casefold())


def _undo_wikitext_splits(text: str) -> str:
    """``8 @,@ 600`` -> ``8,600``, ``red @-@ tipped`` -> ``red-tipped``, ``0 @.@ 7`` -> ``0.7``."""
    for split, joined in _WIKITEXT_SPLITS:
        text = text.replace(split, joined)
    return text


def line_words(tokens: Sequence[str], wildcards: frozenset[str]) -> list[str | None]:
    """The normalised words of one line of a split (its whitespace tokens), ``None`` for each
    wildcard token."""
    words: list[str | None] = []
    start = 0
    for end, token in enumerate([*tokens, None]):
        if token is None or token in wildcards:
            words.extend(normalized_words(_undo_wikitext_splits(" ".join(tokens[start:end]))))
            if token is not None:
                words.append(None)
            start = end + 1
    return words


# ---- the test side ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Unit:
    """One unit of a split: lines ``first_line .. first_line + lines - 1`` (1-based).

    Attributes:
        title: the article's title as in the split (``Robert <unk>``), or ``lines A-B``.
        tokens: its tokens as the harness counts them (one ``<eos>`` per line).
    """

    title: str
    first_line: int
    lines: int
    tokens: int


def _is_blank(tokens: Sequence[str]) -> bool:
    return not tokens


def _level_one_title(tokens: Sequence[str]) -> str | None:
    """The title of a level-1 heading line (``= Title =``), else None."""
    if len(tokens) >= 3 and tokens[0] == tokens[-1] == "=" and "=" not in (tokens[1], tokens[-2]):
        return " ".join(tokens[1:-1])
    return None


def _article_starts(lines: Sequence[Sequence[str]]) -> list[tuple[int, str]]:
    """``(line index, title)`` of each level-1 heading that stands between blank lines."""
    starts = []
    for index in range(1, len(lines) - 1):
        title = _level_one_title(lines[index])
        if title is not None and _is_blank(lines[index - 1]) and _is_blank(lines[index + 1]):
            starts.append((index, title))
    return starts


def cut_units(lines: Sequence[Sequence[str]], kind: str, block_lines: int) -> list[tuple[int, int, str]]:
    """The units of a split's ``lines`` (each a list of tokens) as ``(first, end, title)`` line
    ranges (0-based, ``end`` excluded) covering every line once, in order.

    ``kind`` ``articles``: from each level-1 title to the next (lines before the first title join
    the first article); ``blocks``: ``block_lines`` lines each."""
    if kind == "blocks":
        return [
            (
                first,
                min(first + block_lines, len(lines)),
                f"lines {first + 1}-{min(first + block_lines, len(lines))}",
            )
            for first in range(0, len(lines), block_lines)
        ]
    starts = _article_starts(lines)
    if not starts:
        raise ContaminationError(
            "no level-1 headings ( = Title = between blank lines) to cut the split into articles: "
            "use --units blocks"
        )
    firsts = [0] + [index for index, _ in starts[1:]]
    ends = firsts[1:] + [len(lines)]
    return [(first, end, title) for first, end, (_, title) in zip(firsts, ends, starts)]


def _seed_keys(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For word ids ``[L]``: the hash (uint64 ``[L - SEED_WORDS + 1]``) of the seed starting at
    each position and whether it is one (bool, same shape: all its words are test words)."""
    count = len(ids) - SEED_WORDS + 1
    if count <= 0:
        return np.zeros(0, np.uint64), np.zeros(0, bool)
    keys = np.zeros(count, np.uint64)
    negative = np.concatenate([[0], np.cumsum(ids < 0)])
    for offset, multiplier in enumerate(_SEED_MULTIPLIERS):
        keys += ids[offset : offset + count].astype(np.uint64) * multiplier
    return keys, negative[SEED_WORDS:] - negative[:count] == 0


class TestSide:
    """One benchmark split, cut into units, as n-grams to look for (held in memory).

    Attributes:
        units: the units, in split order.
        ngram: the n-gram length.
        kind: ``articles`` or ``blocks``.
        ids: int32 ``[P]``: every unit's word ids in order (``_WILDCARD`` for a wildcard), each
            unit followed by a ``_BOUNDARY``, with ``ngram`` more of them first and last.
        unit_of: int32 ``[P]``: the unit of each position (-1 at boundaries).
        checked: bool ``[P]``: the n-grams (by first position) that are checked.
        unchecked: int64 ``[U]``: per unit, the n-grams that are not (mostly wildcards).
    """

    __test__ = False  # not a pytest test class, whatever its name

    def __init__(self, units: list[Unit], unit_words: list[list[str | None]], ngram: int, kind: str) -> None:
        if ngram < MIN_NGRAM:
            raise ContaminationError(
                f"n-grams of {ngram} words: at least {MIN_NGRAM} needed (shorter ones match by chance)"
            )
        self.units, self.ngram, self.kind = units, ngram, kind
        self.vocabulary: dict[str, int] = {}
        pieces, owners = [np.full(ngram, _BOUNDARY, np.int32)], [np.full(ngram, -1, np.int32)]
        for number, words in enumerate(unit_words):
            ids = [
                _WILDCARD if word is None else self.vocabulary.setdefault(word, len(self.vocabulary))
                for word in words
            ]
            pieces += [np.array(ids, np.int32), np.full(1, _BOUNDARY, np.int32)]
            owners += [np.full(len(ids), number, np.int32), np.full(1, -1, np.int32)]
        self.ids = np.concatenate([*pieces, np.full(ngram, _BOUNDARY, np.int32)])
        self.unit_of = np.concatenate([*owners, np.full(ngram, -1, np.int32)])
        keys, is_seed = _seed_keys(self.ids)
        self.checked, inside = self._windows(is_seed)
        unchecked = inside & ~self.checked
        self.unchecked = np.bincount(self.unit_of[unchecked], minlength=len(units)).astype(np.int64)
        positions = np.flatnonzero(is_seed)
        order = np.argsort(keys[positions], kind="stable")
        self._seed_positions = positions[order]
        self._seed_keys, self._seed_starts = np.unique(keys[self._seed_positions], return_index=True)
        self._seed_starts = np.append(self._seed_starts, len(self._seed_positions))

    def _windows(self, is_seed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per position ``[P]``: whether the n-gram starting there is checked (inside one unit,
        holding a seed), and whether it is inside one unit."""
        n, size = self.ngram, len(self.ids)
        count = size - n + 1
        boundaries = np.concatenate([[0], np.cumsum(self.ids == _BOUNDARY)])
        inside = np.zeros(size, bool)
        inside[:count] = boundaries[n:] - boundaries[:count] == 0
        seeds = np.concatenate([[0], np.cumsum(np.append(is_seed, np.zeros(SEED_WORDS - 1, bool)))])
        span = n - SEED_WORDS + 1  # seeds that fit inside an n-gram
        has_seed = np.zeros(size, bool)
        has_seed[:count] = seeds[span : span + count] - seeds[:count] > 0
        return inside & has_seed, inside

    @classmethod
    def from_lines(
        cls,
        lines: Sequence[str],
        *,
        style: str = "wikitext",
        units: str = "auto",
        ngram: int = DEFAULT_NGRAM,
        block_lines: int = DEFAULT_BLOCK_LINES,
    ) -> TestSide:
        """The test side of a split given as its ``lines`` (without newlines); ``style``
        ``ptb`` makes ``N`` a wildcard too and ``auto`` units blocks."""
        kind = units if units != "auto" else ("blocks" if style == "ptb" else "articles")
        if kind not in UNIT_KINDS[1:]:
            raise ContaminationError(f"unknown units {units!r} (known: {', '.join(UNIT_KINDS)})")
        wildcards = frozenset({UNK, "N"} if style == "ptb" else {UNK})
        tokens = [line.split() for line in lines]
        cut, unit_words = [], []
        for first, end, title in cut_units(tokens, kind, block_lines):
            count = sum(len(line) + 1 for line in tokens[first:end])  # one <eos> per line
            cut.append(Unit(title, first + 1, end - first, count))
            unit_words.append([word for line in tokens[first:end] for word in line_words(line, wildcards)])
        return cls(cut, unit_words, ngram, kind)

    @classmethod
    def from_split(
        cls,
        dataset: Dataset,
        split: str,
        *,
        units: str = "auto",
        ngram: int = DEFAULT_NGRAM,
        block_lines: int = DEFAULT_BLOCK_LINES,
    ) -> TestSide:
        """The test side of ``dataset``'s ``split``: the very bytes :meth:`Dataset.verify`
        checksums (:meth:`Dataset.read_bytes`), a leading byte-order mark skipped as the
        harness skips it."""
        data = dataset.read_bytes(split)
        start = len(UTF8_BOM) if data.startswith(UTF8_BOM) else 0
        try:
            text = data[start:].decode("utf-8")
        except UnicodeDecodeError as error:
            path = dataset.path(split)
            raise DatasetError(f"{path}: not valid UTF-8 at byte {start + error.start}") from None
        lines = text.split("\n")
        if lines[-1] == "":
            lines.pop()  # the file's final newline ends its last line
        style = "ptb" if dataset.split_files[split].startswith("ptb.") else "wikitext"
        return cls.from_lines(lines, style=style, units=units, ngram=ngram, block_lines=block_lines)

    @classmethod
    def joined(cls, sides: Sequence[TestSide]) -> TestSide:
        """One test side holding the units of ``sides`` (of one n-gram length and one kind), in
        order, so that one scan of a corpus serves several splits (the builder's filter)."""
        if len({(side.ngram, side.kind) for side in sides}) != 1:
            raise ContaminationError("test sides of different n-gram lengths or units cannot be joined")
        unit_words: list[list[str | None]] = []
        for side in sides:
            words = list(side.vocabulary)  # word ids are in insertion order
            inside = side.unit_of >= 0
            ids, owners = side.ids[inside].tolist(), side.unit_of[inside]
            bounds = np.searchsorted(owners, np.arange(len(side.units) + 1)).tolist()
            unit_words += [
                [None if word == _WILDCARD else words[word] for word in ids[first:end]]
                for first, end in zip(bounds[:-1], bounds[1:])
            ]
        units = [unit for side in sides for unit in side.units]
        return cls(units, unit_words, sides[0].ngram, sides[0].kind)

    @property
    def tokens(self) -> int:
        """Tokens of the split (the harness's count)."""
        return sum(unit.tokens for unit in self.units)

    def unit_tokens(self) -> np.ndarray:
        """int64 ``[U]``: the tokens of each unit; consecutive ranges of the split's tokens."""
        return np.array([unit.tokens for unit in self.units], np.int64)

    def ngrams(self) -> np.ndarray:
        """int64 ``[U]``: the checked n-grams of each unit."""
        return np.bincount(self.unit_of[self.checked], minlength=len(self.units)).astype(np.int64)

    def scan(self, documents: Iterable[Document]) -> Overlaps:
        """Look for every checked n-gram in the corpus ``documents`` (streamed once)."""
        scanner = _Scanner(self)
        for document in documents:
            scanner.add(document)
        return scanner.finish()

    def _seed_hits(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For corpus seed hashes (uint64 ``[K]``): ``(k, p)`` int64 ``[H]`` pairs, each a corpus
        seed ``k`` whose hash is that of the test seed starting at position ``p``."""
        slots = np.minimum(np.searchsorted(self._seed_keys, keys), max(len(self._seed_keys) - 1, 0))
        hit = (
            np.flatnonzero(self._seed_keys[slots] == keys) if len(self._seed_keys) else np.zeros(0, np.int64)
        )
        first, end = self._seed_starts[slots[hit]], self._seed_starts[slots[hit] + 1]
        counts = end - first
        corpus = np.repeat(hit, counts)
        offsets = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
        return corpus, self._seed_positions[np.repeat(first, counts) + offsets]


# ---- the corpus side ----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Document:
    """One corpus document: ``label`` names it in the report (``FILE`` or ``FILE:LINE``); its
    text comes as ``pieces`` (cut between words), read when scanned. N-grams run across its
    pieces, never across documents."""

    label: str
    pieces: Iterable[str]


@dataclasses.dataclass(frozen=True)
class Overlaps:
    """What :meth:`TestSide.scan` found.

    Attributes:
        ngrams: int64 ``[U]``: checked n-grams per unit.
        found: int64 ``[U]``: those found in the corpus.
        unchecked: int64 ``[U]``: n-grams not checked (mostly wildcards).
        sources: per unit, ``(document label, n-grams of the unit found in it)``, most first.
        documents, words, characters: what the corpus held.
    """

    ngrams: np.ndarray
    found: np.ndarray
    unchecked: np.ndarray
    sources: list[list[tuple[str, int]]]
    documents: int
    words: int
    characters: int

    @property
    def overlap(self) -> np.ndarray:
        """float64 ``[U]``: the share of each unit's checked n-grams found (0 without any)."""
        return self.found / np.maximum(self.ngrams, 1)


def _between_words(text: str) -> Iterator[str]:
    """``text`` in slices of at most about :data:`READ_BLOCK_BYTES` characters, each cut after a
    space or a newline, so that no word is cut and a long text is normalised a slice at a time."""
    start = 0
    while len(text) - start > READ_BLOCK_BYTES:
        end = start + READ_BLOCK_BYTES
        cut = max(text.rfind(" ", start, end), text.rfind("\n", start, end)) + 1
        cut = cut if cut > start else end  # no space in a whole slice: cut anyway
        yield text[start:cut]
        start = cut
    yield text[start:]


class _Scanner:
    """The corpus side of :meth:`TestSide.scan`: word ids in a buffer of at most about
    :data:`CHUNK_WORDS`, documents separated by ``ngram`` pads, scanned chunk by chunk."""

    def __init__(self, test: TestSide) -> None:
        self.test = test
        self.margin = test.ngram - SEED_WORDS  # words a verification needs before its seed
        self.ids = [np.full(test.ngram, _PAD, np.int32)]  # buffered word ids
        self.owners = [np.full(test.ngram, -1, np.int32)]  # their document numbers
        self.buffered = test.ngram
        self.first = test.ngram  # first seed start of the buffer not yet scanned
        self.found = np.zeros(len(test.ids), bool)
        self.pairs: list[np.ndarray] = []  # document * P + n-gram position, found
        self.holding: set[int] = set()  # documents holding found n-grams
        self.labels: dict[int, str] = {}  # documents holding found n-grams or still buffered
        self.documents = self.words = self.characters = 0

    def add(self, document: Document) -> None:
        number = self.documents
        self.documents += 1
        self.labels[number] = document.label
        for piece in itertools.chain.from_iterable(map(_between_words, document.pieces)):
            words = normalized_words(piece)
            self.characters += len(piece)
            self.words += len(words)
            ids = map(self.test.vocabulary.get, words, itertools.repeat(_OTHER))
            self._append(np.fromiter(ids, np.int32, len(words)), number)
        self._append(np.full(self.test.ngram, _PAD, np.int32), -1)

    def _append(self, ids: np.ndarray, owner: int) -> None:
        self.ids.append(ids)
        self.owners.append(np.full(len(ids), owner, np.int32))
        self.buffered += len(ids)
        if self.buffered >= CHUNK_WORDS:
            self._scan_buffer()

    def _scan_buffer(self) -> None:
        """Scan the seeds of the buffer whose n-grams lie in it; keep the rest with its context."""
        ids, owners = np.concatenate(self.ids), np.concatenate(self.owners)
        last = len(ids) - self.test.ngram  # the last seed start whose n-grams fit
        keys, is_seed = _seed_keys(ids[self.first : last + SEED_WORDS])
        seeds = np.flatnonzero(is_seed)
        hits, positions = self.test._seed_hits(keys[seeds])
        for start in range(0, len(hits), VERIFY_BATCH):
            corpus = self.first + seeds[hits[start : start + VERIFY_BATCH]]
            self._verify(ids, owners, corpus, positions[start : start + VERIFY_BATCH])
        keep = max(last + 1, self.first) - self.margin  # the next seed start, with its context
        live = {*np.unique(owners[keep:]).tolist(), self.documents - 1, *self.holding}
        self.labels = {number: label for number, label in self.labels.items() if number in live}
        self.ids, self.owners = [ids[keep:]], [owners[keep:]]
        self.buffered, self.first = len(ids) - keep, self.margin

    def _verify(self, ids: np.ndarray, owners: np.ndarray, corpus: np.ndarray, test: np.ndarray) -> None:
        """Compare the n-grams around each seed hit (corpus position ``[H]``, test position
        ``[H]``) word by word; record those that match whole and are checked."""
        n = self.test.ngram
        offsets = np.arange(-self.margin, n)  # [L]: every n-gram holding the seed
        words, wanted = ids[corpus[:, None] + offsets], self.test.ids[test[:, None] + offsets]
        match = ((wanted == words) & (wanted >= 0)) | ((wanted == _WILDCARD) & (words >= _OTHER))
        matched = np.zeros((len(corpus), len(offsets) + 1), np.int32)
        np.cumsum(match, axis=1, out=matched[:, 1:])
        whole = matched[:, n:] - matched[:, : self.margin + 1] == n  # [H, margin + 1]
        rows, shift = np.nonzero(whole)
        starts = test[rows] - self.margin + shift
        checked = self.test.checked[starts]
        self.found[starts[checked]] = True
        documents = owners[corpus[rows[checked]]].astype(np.int64)
        self.pairs.append(np.unique(documents * len(self.test.ids) + starts[checked]))
        self.holding.update(np.unique(documents).tolist())

    def finish(self) -> Overlaps:
        self._scan_buffer()
        test, units = self.test, len(self.test.units)
        found = np.bincount(test.unit_of[self.found], minlength=units).astype(np.int64)
        pairs = np.unique(np.concatenate([np.zeros(0, np.int64), *self.pairs]))
        documents, unit = pairs // len(test.ids), test.unit_of[pairs % len(test.ids)]
        combined, counts = np.unique(documents * units + unit, return_counts=True)
        sources: list[list[tuple[str, int]]] = [[] for _ in range(units)]
        for key, count in sorted(zip(combined.tolist(), counts.tolist()), key=lambda item: -item[1]):
            sources[key % units].append((self.labels[key // units], count))
        return Overlaps(
            test.ngrams(), found, test.unchecked, sources, self.documents, self.words, self.characters
        )


# ---- reading a corpus ---------------------------------------------------------------------------


def _is_json_lines(path: Path) -> bool:
    name = path.name
    for suffix in _OPENERS:
        name = name.removesuffix(suffix)
    return name.endswith(".jsonl")


def _open_binary(path: Path) -> IO[bytes]:
    """``path``'s bytes, decompressed by its suffix (``.gz``, ``.xz``, ``.bz2``)."""
    opener = _OPENERS.get(path.suffix)
    return opener(path, "rb") if opener else path.open("rb")  # type: ignore[operator]


def corpus_files(paths: Sequence[str | Path]) -> list[Path]:
    """The files of the corpus arguments, in order: a file as it is; a builder corpus directory
    (one holding ``wiki.*.tokens``) as its ``wiki.{train,valid,test}.tokens``; any other directory
    as every file under it (sorted, hidden ones left out)."""
    files: list[Path] = []
    for path in map(Path, paths):
        if path.is_file():
            files.append(path)
        elif path.is_dir():
            splits = [
                path / f"wiki.{split}.tokens" for split in SPLITS if (path / f"wiki.{split}.tokens").is_file()
            ]
            found = splits or sorted(
                file
                for file in path.rglob("*")
                if file.is_file() and not any(part.startswith(".") for part in file.relative_to(path).parts)
            )
            if not found:
                raise ContaminationError(f"corpus {path}: an empty directory (no files to read)")
            files.extend(found)
        else:
            raise ContaminationError(f"corpus {path}: no such file or directory")
    return files


def _text_pieces(path: Path) -> Iterator[str]:
    """A text file's text, about :data:`READ_BLOCK_BYTES` at a time, cut after a newline (else a
    space); a binary or non-UTF-8 file is a one-line :class:`ContaminationError`."""
    offset, carry = 0, b""  # where carry, an unfinished line, starts
    try:
        with _open_binary(path) as handle:
            for block in iter(lambda: handle.read(READ_BLOCK_BYTES), b""):
                nul = block.find(b"\0")
                if nul >= 0:
                    where = offset + len(carry) + nul
                    raise ContaminationError(
                        f"corpus {path}: binary data (a NUL byte at byte {where}), not text"
                    )
                data = carry + block
                cut = data.rfind(b"\n") + 1 or data.rfind(b" ") + 1  # a line, else a word, stays whole
                yield _decoded(data[:cut], offset, path)
                carry, offset = data[cut:], offset + cut
            yield _decoded(carry, offset, path)
    except _READ_ERRORS as error:
        raise ContaminationError(f"corpus {path}: cannot read it ({_reason(error)})") from None


def _reason(error: BaseException) -> str:
    text = str(error).splitlines()[0] if str(error) else ""
    return text or type(error).__name__


def _decoded(data: bytes, offset: int, path: Path) -> str:
    """``data`` (bytes from ``offset`` of ``path``) as text, or a one-line error."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ContaminationError(
            f"corpus {path}: not UTF-8 text (invalid byte at {offset + error.start})"
        ) from None


def _json_documents(path: Path, text_field: str) -> Iterator[Document]:
    """One document per JSON line (``FILE:LINE``), its text the record's ``text_field``."""
    number = 0
    try:
        with _open_binary(path) as handle:
            for number, line in enumerate(handle, start=1):
                if line.strip():
                    yield Document(f"{path}:{number}", [_record_text(line, text_field, f"{path}:{number}")])
    except _READ_ERRORS as error:
        raise ContaminationError(
            f"corpus {path}: cannot read it after line {number} ({_reason(error)})"
        ) from None


def _record_text(line: bytes, text_field: str, where: str) -> str:
    try:
        record = json.loads(line)
    except ValueError as error:  # UnicodeDecodeError included
        raise ContaminationError(f"corpus {where}: not a JSON line ({_reason(error)})") from None
    if not isinstance(record, dict):
        raise ContaminationError(f"corpus {where}: not a JSON object")
    if text_field not in record:
        fields = ", ".join(map(str, list(record)[:8])) or "none"
        raise ContaminationError(f"corpus {where}: no {text_field!r} field (--text-field; it has: {fields})")
    text = record[text_field]
    if not isinstance(text, str):
        raise ContaminationError(f"corpus {where}: field {text_field!r} is not a string")
    return text


def corpus_documents(files: Sequence[Path], text_field: str = DEFAULT_TEXT_FIELD) -> Iterator[Document]:
    """The documents of the corpus ``files`` (see :func:`corpus_files`), read lazily: one per
    JSON line of a ``.jsonl`` file, one per other (text) file."""
    for path in files:
        if _is_json_lines(path):
            yield from _json_documents(path, text_field)
        else:
            yield Document(str(path), _text_pieces(path))


# ---- perplexity on the clean part ---------------------------------------------------------------


def read_scored_result(
    path: Path, *, dataset: str, split: str, sha256: str, tokens: int
) -> tuple[dict[str, Any], np.ndarray]:
    """A saved evaluation (``harness eval --output`` or ``--output-dir``) of ``dataset``/``split``
    (the split file of checksum ``sha256``, ``tokens`` tokens) and its per-token log-probabilities
    (float64 ``[tokens]``), checked against the record (dataset, split, checksum, token count
    and perplexity, within :data:`PERPLEXITY_RTOL`); one-line errors otherwise."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ContaminationError(f"--result {path}: not a readable JSON result ({_reason(error)})") from None
    if not isinstance(record, dict) or not {"dataset", "split", "tokens", "perplexity"} <= record.keys():
        raise ContaminationError(
            f"--result {path}: not a harness result (no dataset, split, tokens, perplexity)"
        )
    if (record["dataset"], record["split"]) != (dataset, split):
        raise ContaminationError(
            f"--result {path}: a result of {record['dataset']}/{record['split']}, not of {dataset}/{split}"
        )
    if record.get("dataset_sha256") != sha256:
        raise ContaminationError(
            f"--result {path}: scored another version of the {dataset} {split} file (sha256)"
        )
    values = _token_log_probs(path, record)
    if len(values) != tokens or record["tokens"] != tokens:
        raise ContaminationError(
            f"--result {path}: {len(values)} per-token log-probabilities and {record['tokens']} tokens "
            f"recorded, for a split of {tokens} tokens"
        )
    perplexity = math.exp(-math.fsum(values) / tokens)
    if not math.isclose(perplexity, float(record["perplexity"]), rel_tol=PERPLEXITY_RTOL):
        raise ContaminationError(
            f"--result {path}: its per-token log-probabilities give perplexity {perplexity:.6f}, the "
            f"result says {float(record['perplexity']):.6f}: the per-token file is not this result's"
        )
    return record, values


def _token_log_probs(path: Path, record: dict[str, Any]) -> np.ndarray:
    """The per-token file the result names (``token_log_probs_file``: absolute or relative to the
    result's folder; else, as older results record it, relative to the working directory; else
    by its name beside the result), as float64."""
    recorded = record.get("token_log_probs_file")
    if not recorded:
        raise ContaminationError(
            f"--result {path}: no per-token log-probabilities recorded (rerun harness eval with "
            "--output-dir or --save-token-logprobs)"
        )
    candidates = [path.parent / recorded, Path(recorded), path.parent / Path(recorded).name]
    found = next((candidate for candidate in candidates if candidate.is_file()), None)
    if found is None:
        raise ContaminationError(
            f"--result {path}: its per-token file {recorded} is missing (also looked beside it)"
        )
    try:
        values = np.load(found, allow_pickle=False)
    except (OSError, ValueError) as error:
        raise ContaminationError(
            f"--result {path}: {found} is not a readable .npy array ({_reason(error)})"
        ) from None
    if values.ndim != 1 or not np.issubdtype(values.dtype, np.floating):
        raise ContaminationError(f"--result {path}: {found} is not a 1-D float array")
    return values.astype(np.float64, copy=False)


def split_perplexity(
    token_log_probs: np.ndarray, unit_tokens: np.ndarray, contaminated: np.ndarray
) -> dict[str, Any]:
    """Perplexity of the whole split, of its clean units and of its contaminated ones.

    Args:
        token_log_probs: float64 ``[N]``, in split order.
        unit_tokens: int64 ``[U]``: each unit's tokens (consecutive ranges, summing to ``N``).
        contaminated: bool ``[U]``.

    The sums are exactly rounded (``math.fsum``) and ``perplexity_all`` is
    ``exp(-(log_prob_sum_clean + log_prob_sum_contaminated) / tokens)``, so the parts recombine
    to it exactly; a part with no tokens has perplexity None.
    """
    in_contaminated = np.repeat(contaminated, unit_tokens)
    sums = {
        part: math.fsum(token_log_probs[mask])
        for part, mask in (("clean", ~in_contaminated), ("contaminated", in_contaminated))
    }
    counts = {"clean": int((~in_contaminated).sum()), "contaminated": int(in_contaminated.sum())}

    def perplexity(total: float, count: int) -> float | None:
        return math.exp(-total / count) if count else None

    return {
        "perplexity_all": perplexity(sums["clean"] + sums["contaminated"], len(token_log_probs)),
        "perplexity_clean": perplexity(sums["clean"], counts["clean"]),
        "perplexity_contaminated": perplexity(sums["contaminated"], counts["contaminated"]),
        "tokens_clean": counts["clean"],
        "tokens_contaminated": counts["contaminated"],
        "log_prob_sum_clean": sums["clean"],
        "log_prob_sum_contaminated": sums["contaminated"],
    }


# ---- the report ---------------------------------------------------------------------------------


def contamination_report(
    test: TestSide, overlaps: Overlaps, *, dataset: str, split: str, sha256: str, settings: dict[str, Any]
) -> dict[str, Any]:
    """The JSON-ready report (without perplexities) of ``dataset``/``split`` (its file's
    ``sha256``): every unit with its overlap, the contaminated ones (``overlap >=
    settings["threshold"]``) and their share of the split's tokens, and the ``settings``."""
    overlap, threshold = overlaps.overlap, settings["threshold"]
    articles = [
        {
            "title": unit.title,
            "first_line": unit.first_line,
            "lines": unit.lines,
            "tokens": unit.tokens,
            "ngrams": int(overlaps.ngrams[i]),
            "found": int(overlaps.found[i]),
            "unchecked": int(overlaps.unchecked[i]),
            "overlap": float(overlap[i]),
            "found_in": [
                {"document": label, "ngrams": count}
                for label, count in overlaps.sources[i][:REPORTED_SOURCES]
            ],
        }
        for i, unit in enumerate(test.units)
    ]
    contaminated = [i for i in range(len(articles)) if overlap[i] >= threshold]
    contaminated_tokens = sum(test.units[i].tokens for i in contaminated)
    return {
        "report_version": REPORT_VERSION,
        "dataset": dataset,
        "split": split,
        "dataset_sha256": sha256,
        "settings": {**settings, "ngram": test.ngram, "units": test.kind, "seed_words": SEED_WORDS},
        "corpus_documents": overlaps.documents,
        "corpus_words": overlaps.words,
        "corpus_characters": overlaps.characters,
        "tokens": test.tokens,
        "ngrams": int(overlaps.ngrams.sum()),
        "ngrams_found": int(overlaps.found.sum()),
        "ngrams_unchecked": int(overlaps.unchecked.sum()),
        "articles": articles,
        "contaminated": [
            {
                "article": i,
                "title": test.units[i].title,
                "overlap": articles[i]["overlap"],
                "tokens": test.units[i].tokens,
            }
            for i in contaminated
        ],
        "contaminated_tokens": contaminated_tokens,
        "contaminated_token_share": contaminated_tokens / test.tokens,
    }


def contaminated_units(report: dict[str, Any]) -> np.ndarray:
    """bool ``[U]``: which units of the report are contaminated."""
    flags = np.zeros(len(report["articles"]), bool)
    flags[[entry["article"] for entry in report["contaminated"]]] = True
    return flags


def format_report(report: dict[str, Any], rows: int = 10) -> str:
    """A short table: the summary; every contaminated unit, then the next most overlapping ones
    (overlap above 0) up to ``rows`` lines; the perplexities when the report has them."""
    articles, settings = report["articles"], report["settings"]
    unit = settings["units"]
    found_share = report["ngrams_found"] / max(report["ngrams"], 1)
    lines = [
        f"{report['dataset']}/{report['split']}: {len(articles)} {unit}, {report['tokens']:,} tokens; "
        f"{report['ngrams']:,} {settings['ngram']}-grams checked, {report['ngrams_found']:,} found "
        f"({found_share:.1%}) in {report['corpus_documents']:,} documents ({report['corpus_words']:,} words)",
        f"contaminated (overlap >= {settings['threshold']:g}): {len(report['contaminated'])} of "
        f"{len(articles)} {unit}, {report['contaminated_tokens']:,} tokens "
        f"({report['contaminated_token_share']:.1%} of the split)",
    ]
    ranked = sorted(range(len(articles)), key=lambda i: -articles[i]["overlap"])
    shown = [i for i in ranked[: max(rows, len(report["contaminated"]))] if articles[i]["overlap"] > 0]
    if shown:
        lines.append(f"{'overlap':>8} {'tokens':>8}  {unit[:-1]}")
        lines += [
            f"{articles[i]['overlap']:>8.3f} {articles[i]['tokens']:>8,}  {articles[i]['title']}"
            for i in shown
        ]
    if len(articles) > len(shown):
        highest = articles[ranked[len(shown)]]["overlap"]
        lines.append(f"the other {len(articles) - len(shown)} {unit}: overlap at most {highest:.3f}")
    if "perplexity_all" in report:
        parts = [("all", "perplexity_all", "tokens"), ("clean", "perplexity_clean", "tokens_clean")]
        parts.append(("contaminated", "perplexity_contaminated", "tokens_contaminated"))
        lines.append(
            "perplexity: "
            + ", ".join(
                f"{name} {_perplexity_text(report[value], report[tokens])}" for name, value, tokens in parts
            )
        )
    return "\n".join(lines)


def _perplexity_text(value: float | None, tokens: int) -> str:
    return f"{'-' if value is None else f'{value:.2f}'} ({tokens:,} tokens)"
