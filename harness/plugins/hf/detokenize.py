"""Detokenizers: word-level benchmark tokens -> the running text a subword model was trained on.

A detokenizer turns a token sequence into text **piece by piece**: token ``t`` becomes
``piece_t = separator + surface``, where the separator (``""`` or ``" "``) and the surface form
depend only on token ``t`` and the tokens before it. The text is the concatenation of the pieces,
so every character belongs to exactly one word-level token (the alignment that
:mod:`harness.plugins.hf` uses to attribute subword log-probabilities), and the text up to token
``t`` never depends on later tokens.

Styles (:data:`STYLES`):

- ``wikitext`` (WikiText-2/103 and ``wikitext_builder`` corpora): ``<eos>`` is a newline and a
  line has no leading or trailing space; ``@-@``, ``@,@``, ``@.@`` become ``-``, ``,``, ``.``
  joined to both neighbours (``role @-@ playing`` -> ``role-playing``, ``1 @,@ 000`` -> ``1,000``);
  no space before ``, . ; : ! ? ) ] } %`` and the clitics ``'s 't 're 've 'm 'll 'd n't``, nor
  after ``( [ {``; a lone ``'`` after a word ending in ``s`` is joined to it (``players '`` ->
  ``players'``); double quotes alternate opening/closing within a line (``" Craig "`` ->
  ``"Craig"``); runs of ``=`` are joined, so headings read ``== Gameplay ==``.
- ``ptb`` (Mikolov's Penn Treebank): ``<eos>`` is a newline, no space at line starts nor before
  ``'s 're 've 'm 'll 'd ' n't``. Everything else (``N``, ``$``, ``<unk>``) is kept as it is.
- ``none``: tokens separated by one space, ``<eos>`` a newline.

``<unk>`` is never rewritten: a subword model scores the literal text ``<unk>``.

:func:`retokenize` is the inverse of each style (a rule-based tokenizer), used to check that the
detokenizers lose nothing: ``retokenize(detokenize(line)) == line`` holds for all but a counted,
listed handful of lines of the real files
(``python -m harness.tools.detokenizer_round_trip FILE --style S``).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Sequence

import numpy as np

from wikitext_toolkit_core.format import EOS

STYLES = ("wikitext", "ptb", "none")

_WIKITEXT_JOINERS = {"@-@": "-", "@,@": ",", "@.@": "."}
_CLITICS = ("'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "n't")
_WIKITEXT_NO_SPACE_BEFORE = frozenset({",", ".", ";", ":", "!", "?", ")", "]", "}", "%", *_CLITICS})
_WIKITEXT_NO_SPACE_AFTER = frozenset({"(", "[", "{"})
_PTB_NO_SPACE_BEFORE = frozenset({"'s", "'re", "'ve", "'m", "'ll", "'d", "'", "n't"})


@dataclasses.dataclass(frozen=True)
class Detokenized:
    """Text with its alignment to the word-level tokens.

    Attributes:
        text: the detokenized text.
        piece_ends: int64 ``[N]``; token ``t`` owns the characters
            ``text[piece_ends[t-1]:piece_ends[t]]`` (from 0 for ``t = 0``).
    """

    text: str
    piece_ends: np.ndarray

    def piece_of_char(self, positions: np.ndarray) -> np.ndarray:
        """Index of the token owning each character position (int64 ``[K]`` -> ``[K]``)."""
        return np.searchsorted(self.piece_ends, positions, side="right")


class Detokenizer:
    """Stateful, causal token -> piece converter for one stream (see the module docstring)."""

    def __init__(self, style: str) -> None:
        if style not in STYLES:
            raise ValueError(f"unknown detokenizer {style!r} (known: {', '.join(STYLES)})")
        self.style = style
        self.previous: str | None = None  # previous token of the current line, None at a line start
        self.quote_open = False  # wikitext: an opening " awaits its closing one
        self.glue_next = False  # the next token takes no separator

    def piece(self, token: str) -> str:
        """The piece (separator + surface) of the next token."""
        if token == EOS:
            self.previous, self.quote_open, self.glue_next = None, False, False
            return "\n"
        separator = "" if self.previous is None or self.glue_next else " "
        self.glue_next = False
        if self.style == "wikitext":
            surface, separator = self._wikitext(token, separator)
        elif self.style == "ptb":
            surface = token
            if token in _PTB_NO_SPACE_BEFORE:
                separator = ""
        else:
            surface = token
        self.previous = token
        return separator + surface

    def _wikitext(self, token: str, separator: str) -> tuple[str, str]:
        previous = self.previous
        if token in _WIKITEXT_JOINERS:
            self.glue_next = True
            return _WIKITEXT_JOINERS[token], ""
        if token == '"':
            opening = not self.quote_open
            self.quote_open = opening
            self.glue_next = opening
            return token, separator if opening else ""
        if (
            token in _WIKITEXT_NO_SPACE_BEFORE
            or (token == "=" and previous == "=")
            or (token == "'" and previous is not None and previous.endswith("s"))
        ):
            separator = ""
        if token in _WIKITEXT_NO_SPACE_AFTER:
            self.glue_next = True
        return token, separator


def detokenize(tokens: Iterable[str], style: str) -> Detokenized:
    """Detokenize a stream of word-level tokens (``<eos>`` closing each line)."""
    detokenizer = Detokenizer(style)
    pieces = [detokenizer.piece(token) for token in tokens]
    ends = np.cumsum([len(piece) for piece in pieces], dtype=np.int64)
    return Detokenized("".join(pieces), ends)


def detokenize_line(line: str, style: str) -> str:
    """One line of a benchmark file (whitespace tokens) -> its text, without the newline."""
    detokenizer = Detokenizer(style)
    return "".join(detokenizer.piece(token) for token in line.split())


# --- the inverse: a rule-based tokenizer for each style -------------------------------------

_WIKITEXT_LEADING = ("(", "[", "{", '"')
_WIKITEXT_TRAILING = (",", ".", ";", ":", "!", "?", ")", "]", "}", '"', "%")
_NUMBER_JOINERS = re.compile(r"(?<=[\d>])([,.])(?=[\d<])")  # digits or <unk> on both sides
_INITIALISM = re.compile(r"[A-Za-z]")  # H. gammarus, World War I.
#: Words that keep their final "." (Moses's non-breaking prefixes, as WikiText was tokenized).
_ABBREVIATIONS = frozenset(
    {
        "No",
        "St",
        "Mr",
        "Mrs",
        "Ms",
        "Dr",
        "Jr",
        "Sr",
        "Lt",
        "Col",
        "Gen",
        "Capt",
        "Sgt",
        "Maj",
        "Adm",
        "Cpl",
        "Pvt",
        "Brig",
        "Rev",
        "Prof",
        "Gov",
        "Sen",
        "Rep",
        "Co",
        "Inc",
        "Ltd",
        "Bros",
        "Corp",
        "Mt",
        "Ft",
        "vs",
        "Vol",
        "pp",
        "Jan",
        "Feb",
        "Aug",
        "Sept",
        "Oct",
        "Nov",
        "Dec",
    }
)


def _keeps_period(word: str) -> bool:
    """Whether a final "." belongs to the word: ``U.S.``, ``a.m.``, ``H.``, ``No.``, ``St.``."""
    stem = word[:-1]
    dotted_word = "." in stem and not any(char.isdigit() or char == "%" for char in stem)
    return dotted_word or bool(_INITIALISM.fullmatch(stem)) or stem in _ABBREVIATIONS


def _split_wikitext_word(word: str, last: bool) -> list[str]:
    """Split one space-delimited chunk of detokenized WikiText (``last``: the line's last one)
    into word-level tokens."""
    if word.isalnum():
        return [word]
    if set(word) == {"="}:
        return ["="] * len(word)
    leading: list[str] = []
    trailing: list[str] = []
    while len(word) > 1 and word.startswith(_WIKITEXT_LEADING):
        leading.append(word[0])
        word = word[1:]
    while len(word) > 1:
        clitic = next((c for c in _CLITICS if word.endswith(c) and len(word) > len(c)), None)
        if clitic is not None:
            trailing.append(clitic)
            word = word[: -len(clitic)]
        elif word.endswith("'") and word[-2] == "s":
            trailing.append("'")
            word = word[:-1]
        elif word.endswith(_WIKITEXT_TRAILING) and not (
            word.endswith(".") and not (last and not trailing) and _keeps_period(word)
        ):
            trailing.append(word[-1])
            word = word[:-1]
        else:
            break
    core: list[str] = []
    for index, part in enumerate(re.split(r"(?<=.)-(?=.)", word)):
        if index:
            core.append("@-@")
        core.extend(_NUMBER_JOINERS.sub(lambda m: f" @{m.group(1)}@ ", part).split())
    return leading + core + trailing[::-1]


def _split_ptb_word(word: str, last: bool) -> list[str]:
    for clitic in ("n't", "'s", "'re", "'ve", "'m", "'ll", "'d", "'"):
        if word.endswith(clitic) and len(word) > len(clitic):
            return _split_ptb_word(word[: -len(clitic)], last) + [clitic]
    return [word]


def retokenize(text: str, style: str) -> list[str]:
    """Inverse of :func:`detokenize_line`: one line of text -> word-level tokens."""
    if style not in STYLES:
        raise ValueError(f"unknown detokenizer {style!r} (known: {', '.join(STYLES)})")
    split = {"wikitext": _split_wikitext_word, "ptb": _split_ptb_word, "none": lambda word, last: [word]}[
        style
    ]
    words = text.split()
    return [token for i, word in enumerate(words) for token in split(word, i == len(words) - 1)]


@dataclasses.dataclass(frozen=True)
class RoundTrip:
    """Result of :func:`round_trip` over a file: lines checked and the lines that differ.

    Attributes:
        lines: lines checked.
        exceptions: ``(line number, original tokens, retokenized tokens)`` of each line for which
            ``retokenize(detokenize(line)) != line``.
    """

    lines: int
    exceptions: list[tuple[int, list[str], list[str]]]


def round_trip(lines: Sequence[str], style: str) -> RoundTrip:
    """Check ``retokenize(detokenize_line(line)) == line.split()`` for every line."""
    exceptions = []
    for number, line in enumerate(lines, start=1):
        tokens = line.split()
        again = retokenize(detokenize_line(line, style), style)
        if again != tokens:
            exceptions.append((number, tokens, again))
    return RoundTrip(len(lines), exceptions)
