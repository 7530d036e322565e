"""N-gram overlap between a benchmark split's units and any text: the matching engine of the
contamination check (``python -m harness contamination``, :mod:`harness.contamination`) and of
the builder's overlap filter (``--exclude-overlap``, :mod:`wikitext_builder.overlap`).

- :class:`TestSide` holds one split in memory: its **units** (WikiText: articles, each opened by a
  level-1 heading `` = Title = `` that stands between blank lines, the lines before the first
  title joining the first article; PTB: blocks of ``block_lines`` lines), the number of tokens
  each holds as the harness counts them (whitespace tokens plus one ``<eos>`` per line), and the
  normalised words of each unit.
- :meth:`TestSide.scan` streams a corpus, :class:`Document` by :class:`Document`, and returns the
  :class:`Overlaps`: per unit, the share of its n-grams found in the corpus, and the documents
  that hold them.

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
:data:`CHUNK_WORDS` corpus words at a time; the corpus is never held whole. Standard library
and numpy only.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
import unicodedata
from collections.abc import Iterable, Iterator, Sequence

import numpy as np

from wikitext_toolkit_core.benchmarks import SplitFiles
from wikitext_toolkit_core.errors import ToolkitError
from wikitext_toolkit_core.files import DatasetError
from wikitext_toolkit_core.format import UNK, UTF8_BOM

#: The n-gram length, and the lines of a PTB block, when none is given.
DEFAULT_NGRAM = 13
DEFAULT_BLOCK_LINES = 100
#: Shortest n-gram length accepted: shorter n-grams are found by chance.
MIN_NGRAM = 4
#: The longest n-grams checked (the test side holds ``2 n`` boundary positions).
MAX_NGRAM = 1_000
#: Consecutive non-wildcard words a checked n-gram must hold (the seed length).
SEED_WORDS = 4
#: How a split is cut into units: ``auto`` is ``blocks`` for PTB files (``ptb.*.txt``), else
#: ``articles``.
UNIT_KINDS = ("auto", "articles", "blocks")
#: Corpus words scanned at a time (bounds the memory of the corpus side).
CHUNK_WORDS = 1 << 20
#: Seed hits verified at a time (each costs about ``2 * ngram`` int32 words twice).
VERIFY_BATCH = 1 << 16
#: Characters of a document's text normalised at a time.
TEXT_SLICE_CHARS = 1 << 23

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


class ContaminationError(ToolkitError):
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


#: The WikiText joiners that keep a number one word (``18 @,@ 125`` is ``18,125``; ``@-@`` splits).
_NUMBER_JOINERS = frozenset(split.strip() for split, joined in _WIKITEXT_SPLITS if joined != "-")


def _fold_joined_wildcards(tokens: Sequence[str], wildcards: frozenset[str]) -> list[str]:
    """``tokens`` where each number joined up by ``@,@``/``@.@`` that holds a wildcard
    (``18 @,@ <unk>``, ``<unk> @.@ 5``) is that one wildcard: a corpus spells it as one word."""
    if wildcards.isdisjoint(tokens):
        return list(tokens)
    folded: list[str] = []
    start = 0
    while start < len(tokens):
        end = start  # the joined number is tokens[start : end + 1]
        while end + 2 < len(tokens) and tokens[end + 1] in _NUMBER_JOINERS:
            end += 2
        parts = tokens[start : end + 1 : 2]
        wildcard = next((part for part in parts if part in wildcards), None)
        folded.extend(tokens[start : end + 1] if wildcard is None else [wildcard])
        start = end + 1
    return folded


def line_words(tokens: Sequence[str], wildcards: frozenset[str]) -> list[str | None]:
    """The normalised words of one line of a split (its whitespace tokens), ``None`` for each
    wildcard token (a number joined to one, ``18 @,@ <unk>``, is one wildcard)."""
    tokens = _fold_joined_wildcards(tokens, wildcards)
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
    """``(line index, title)`` of each level-1 heading that stands between blank lines (the start
    and the end of the file count as blank lines)."""
    starts = []
    for index, tokens in enumerate(lines):
        title = _level_one_title(tokens)
        before = index == 0 or _is_blank(lines[index - 1])
        after = index == len(lines) - 1 or _is_blank(lines[index + 1])
        if title is not None and before and after:
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
        if ngram > MAX_NGRAM:
            raise ContaminationError(
                f"n-grams of {ngram:,} words: at most {MAX_NGRAM:,} (a longer match is no better evidence)"
            )
        if not any(unit_words):
            raise ContaminationError("the split holds no words to look for")
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
        dataset: SplitFiles,
        split: str,
        *,
        units: str = "auto",
        ngram: int = DEFAULT_NGRAM,
        block_lines: int = DEFAULT_BLOCK_LINES,
    ) -> TestSide:
        """The test side of ``dataset``'s ``split``: the very bytes
        :meth:`~wikitext_toolkit_core.benchmarks.SplitFiles.verify` checksums
        (:meth:`~wikitext_toolkit_core.benchmarks.SplitFiles.read_bytes`), a leading byte-order mark
        skipped as the harness skips it."""
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
    """``text`` in slices of at most about :data:`TEXT_SLICE_CHARS` characters, each cut after a
    space or a newline, so that no word is cut and a long text is normalised a slice at a time."""
    start = 0
    while len(text) - start > TEXT_SLICE_CHARS:
        end = start + TEXT_SLICE_CHARS
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
