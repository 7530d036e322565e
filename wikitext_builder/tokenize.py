"""WikiText tokenization: sacremoses (Moses) plus WikiText's number splitting.

See ``docs/wikitext-format.md`` for the measured rules:

* ``MosesTokenizer("en").tokenize(text, aggressive_dash_splits=True, escape=False)``:
  no XML escaping, Moses contractions (``Don 't``), no punctuation normalization,
  an ASCII hyphen between two alphanumerics becomes ``@-@``.
* a comma or period between two digits becomes ``@,@`` / ``@.@``
  (``8 @,@ 600``, ``0 @.@ 7``); abbreviations such as ``U.S.`` stay whole.
* ``<formula>`` stays one token.
* runs of Han / kana / hangul stay whole (``戦場のヴァルキュリア3``), where sacremoses
  would split Han characters apart because it does not count them as alphanumeric.
* the marks that sacremoses counts as letters but WikiText's Moses (Perl, ``IsAlnum``:
  Unicode Alphabetic or decimal digit) does not, mostly Indic viramas and nuktas, are
  tokens of their own: WikiText-2 has the Devanagari virama ``्`` 11 times as a token.
"""

from __future__ import annotations

import regex
from sacremoses import MosesTokenizer

__all__ = ["tokenize_text", "heading_tokens", "format_line", "format_heading", "format_paragraph"]


class _MosesTokenizer(MosesTokenizer):
    """sacremoses' tokenizer with its character-class tests on precomputed sets
    (the library rebuilds ``set(IsLower)`` / ``set(IsAlpha)`` on every call); same results."""

    _LOWER = frozenset(MosesTokenizer.IsLower)
    _ALPHA = frozenset(MosesTokenizer.IsAlpha)

    def islower(self, text: str) -> bool:
        return not set(text).difference(self._LOWER)

    def isanyalpha(self, text: str) -> bool:
        return not self._ALPHA.isdisjoint(text)


_MOSES = _MosesTokenizer(lang="en")

# characters sacremoses treats as alphanumeric that Perl's \p{IsAlnum} does not
_PERL_ALNUM = regex.compile(r"[\p{Alphabetic}\p{Nd}]")
_NOT_PERL_ALNUM = regex.compile(
    "[" + "".join(regex.escape(c) for c in sorted(_MosesTokenizer._ALPHA) if not _PERL_ALNUM.match(c)) + "]"
)

# a comma or period with a digit on both sides (inside one Moses token)
_DIGIT_SEP = regex.compile(r"(?<=\d)([,.])(?=\d)")
# Han, kana and hangul runs (with their iteration / prolonged-sound marks)
_CJK_RUN = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}\u30fc\u3005\u3006\u303b]+")
_WHITESPACE = regex.compile(r"\s+")
# placeholders are pure ASCII letters so Moses keeps them (and anything alphanumeric
# glued to them) in one token; the index is spelled with letters a-j
_PLACEHOLDER = regex.compile(r"zqcjk([a-j]+)qz")
_DIGITS_TO_LETTERS = str.maketrans("0123456789", "abcdefghij")
_LETTERS_TO_DIGITS = str.maketrans("abcdefghij", "0123456789")


def _split_numbers(token: str) -> list[str]:
    if "," not in token and "." not in token:
        return [token]
    if not _DIGIT_SEP.search(token):
        return [token]
    return _DIGIT_SEP.sub(r" @\1@ ", token).split()


_SPECIALS = frozenset({"formula"})


def _glue_specials(tokens: list[str]) -> list[str]:
    """Moses splits ``<formula>`` into ``< formula >``; glue it back."""
    out: list[str] = []
    i = 0
    while i < len(tokens):
        if tokens[i] == "<" and i + 2 < len(tokens) and tokens[i + 1] in _SPECIALS and tokens[i + 2] == ">":
            out.append(f"<{tokens[i + 1]}>")
            i += 3
        else:
            out.append(tokens[i])
            i += 1
    return out


def tokenize_text(text: str) -> list[str]:
    """Tokenize one paragraph (or heading title) the way WikiText did."""
    text = _WHITESPACE.sub(" ", text).strip()
    if not text:
        return []
    runs: list[str] = []
    if _CJK_RUN.search(text) and "zqcjk" not in text:  # (never protect if the marker is text)

        def protect(match: regex.Match) -> str:
            runs.append(match.group(0))
            return f"zqcjk{str(len(runs) - 1).translate(_DIGITS_TO_LETTERS)}qz"

        text = _CJK_RUN.sub(protect, text)
    if not text.isascii():
        text = _NOT_PERL_ALNUM.sub(r" \g<0> ", text)
    tokens = _MOSES.tokenize(text, aggressive_dash_splits=True, escape=False)
    if "<" in text:
        tokens = _glue_specials(tokens)
    out: list[str] = []
    for token in tokens:
        if runs and "zqcjk" in token:
            token = _PLACEHOLDER.sub(lambda m: runs[int(m.group(1).translate(_LETTERS_TO_DIGITS))], token)
        out.extend(_split_numbers(token))
    return out


def format_paragraph(tokens: list[str]) -> str:
    """One paragraph line: ``" " + " ".join(tokens) + " \\n"`` (empty tokens: blank line)."""
    if not tokens:
        return " \n"
    return " " + " ".join(tokens) + " \n"


def format_heading(tokens: list[str], level: int) -> str:
    """A heading line of level ``level`` (1 = article title): `` = = Title = = \\n``."""
    if level < 1:
        raise ValueError(f"heading level must be >= 1, got {level}")
    if not tokens:
        raise ValueError("a heading needs at least one token")
    return " " + "= " * level + " ".join(tokens) + " =" * level + " \n"


def heading_tokens(text: str) -> list[str]:
    """The tokens of a heading's text (an article title or a section heading), without the ``=``
    tokens at its two ends.

    The format has no escape for them: next to the ``=`` markers of the heading line they would
    read as markers too, so the title `` = = Evil = = `` would become `` = = = Evil = = = ``, a
    level-3 section heading, and ``= (album)`` the malformed heading `` = = ( album ) = ``. No
    heading of the real WikiText files starts or ends with an ``=`` token; an ``=`` inside
    (``E = mc2``) stays. Empty when the text holds nothing else."""
    tokens = tokenize_text(text)  # (Moses makes every "=" a token of its own)
    while tokens and tokens[-1] == "=":
        tokens.pop()
    while tokens and tokens[0] == "=":
        tokens.pop(0)
    return tokens


def format_line(text: str, level: int = 0) -> str:
    """Tokenize ``text`` and format it as a paragraph (level 0) or a heading line
    (:func:`heading_tokens`)."""
    return format_heading(heading_tokens(text), level) if level else format_paragraph(tokenize_text(text))
