"""The ``lm-eval`` detokenizer: a stream as lm-evaluation-harness's ``wikitext`` task reads a page.

lm-evaluation-harness (0.4.13) scores each page of ``wikitext_document_level`` (the split's
lines from an article heading to the next, joined by ``\\n``; the last page ends with the file's
final newline) after its ``wikitext_detokenizer``: plain string replacements and regular
expressions over the whole page, in a fixed order (:data:`_RULES` repeats them). Some reach
across tokens and lines: a double or single quote pairs with the next one anywhere on the page,
and the spaces (newlines too) just inside a pair of brackets or quotes are dropped.

Under ``--protocol documents`` each stream the plugin gets is a page with the ``<eos>`` before
it, which is in no page (:mod:`harness.documents`). :func:`lm_eval_page` rebuilds the page's text
as WikiText's files write it, each line ``" " + " ".join(words) + " "`` and a newline for each
``<eos>`` (the part after the last ``<eos>``: empty, or a last line without its newline), applies
the rules and keeps, for each character that survives them, the token it came from: a token's
piece is what is left of its separator and surface (``<eos>``: the line's last space and its
newline), so the alignment of :class:`~harness.plugins.hf.detokenize.Detokenized` holds, and a
piece may be empty. The ``<eos>`` tokens before a stream's first heading line are in no page, and a
stream with no word (the lines before the first heading, when blank) is no page: their pieces
are empty and they score nothing, as lm-evaluation-harness leaves them out.

The text of a token depends on tokens after it (a closing bracket removes the space after the
opening one), so scores made from it fail the causality audit by design.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Sequence

import numpy as np

from harness.documents import is_article_heading
from harness.plugins.hf.detokenize import Detokenized
from wikitext_toolkit_core.format import EOS

#: The detokenizer's name (``detokenizer=lm-eval``).
LM_EVAL = "lm-eval"

#: What a rule makes of one match: ``(start, end, replacement)`` spans of the text in order, each
#: kept as it is (``replacement`` None) or replaced by ``replacement``, whose characters come
#: from the token of the character at ``start``.
_Spans = list[tuple[int, int, str | None]]
_Rule = tuple[re.Pattern[str], Callable[[re.Match[str]], _Spans]]


def _literal(old: str, new: str) -> _Rule:
    """``str.replace(old, new)`` as a rule: ``new`` is ``old`` with characters left out, or one
    replaced (`` N `` -> `` 1 ``); each character of ``new`` comes from the next character of
    ``old`` that it equals, else from the next one."""
    origins: list[tuple[int, str]] = []
    position = 0
    for char in new:
        found = old.find(char, position)
        origin = found if found >= 0 else position
        origins.append((origin, char))
        position = origin + 1

    def spans(match: re.Match[str]) -> _Spans:
        start = match.start()
        return [
            (start + origin, start + origin + 1, None if old[origin] == char else char)
            for origin, char in origins
        ]

    return re.compile(re.escape(old)), spans


def _pair(pattern: str) -> _Rule:
    """``re.sub(pattern, r"X\\1Y")`` for a pattern ``X\\s*(...)\\s*Y``: a pair of brackets or quotes
    without the spaces just inside them."""

    def spans(match: re.Match[str]) -> _Spans:
        return [
            (match.start(), match.start() + 1, None),
            (match.start(1), match.end(1), None),
            (match.end() - 1, match.end(), None),
        ]

    return re.compile(pattern), spans


def _quote_before_digit(match: re.Match[str]) -> _Spans:
    """``re.sub(r"/' [0-9]/", r"/'[0-9]/", ...)``: the replacement is literal text, its
    ``[0-9]`` taking the matched digit's place."""
    start = match.start()
    return [(start, start + 2, None), (start + 3, start + 4, "[0-9]"), (start + 4, start + 5, None)]


#: lm-evaluation-harness 0.4.13's ``wikitext_detokenizer``
#: (``lm_eval/tasks/wikitext/preprocess_wikitext.py``), rule for rule and in its order.
_RULES: tuple[_Rule, ...] = (
    _literal("s '", "s'"),
    (re.compile(r"/' [0-9]/"), _quote_before_digit),
    _literal(" @-@ ", "-"),
    _literal(" @,@ ", ","),
    _literal(" @.@ ", "."),
    _literal(" : ", ": "),
    _literal(" ; ", "; "),
    _literal(" . ", ". "),
    _literal(" ! ", "! "),
    _literal(" ? ", "? "),
    _literal(" , ", ", "),
    _pair(r"\(\s*([^\)]*?)\s*\)"),
    _pair(r"\[\s*([^\]]*?)\s*\]"),
    _pair(r"{\s*([^}]*?)\s*}"),
    _pair(r"\"\s*([^\"]*?)\s*\""),
    _pair(r"'\s*([^']*?)\s*'"),
    _literal("= = = =", "===="),
    _literal("= = =", "==="),
    _literal("= =", "=="),
    _literal(" \N{DEGREE SIGN} ", "\N{DEGREE SIGN}"),
    _literal(" \n", "\n"),
    _literal("\n ", "\n"),
    _literal(" N ", " 1 "),
    _literal(" 's", "'s"),
)


def _page(tokens: Sequence[str]) -> tuple[str, np.ndarray]:
    """The page's text as WikiText's files write it, with the token each character comes from
    (int64, one per character): a word's piece is a space and the word, ``<eos>``'s the line's
    last space and a newline, and a last line without its newline ends with a space."""
    pieces = [" \n" if token == EOS else " " + token for token in tokens]
    if tokens and tokens[-1] != EOS:
        pieces[-1] += " "
    lengths = [len(piece) for piece in pieces]
    return "".join(pieces), np.repeat(np.arange(len(pieces), dtype=np.int64), lengths)


def _rewrite(text: str, owners: np.ndarray, rule: _Rule) -> tuple[str, np.ndarray]:
    """``rule`` applied to every match in ``text``, left to right and without overlaps, as
    ``str.replace`` and ``re.sub`` do; ``owners`` (int64, one per character) follow the characters."""
    pattern, spans_of = rule
    texts: list[str] = []
    owned: list[np.ndarray] = []
    done = 0
    for match in pattern.finditer(text):
        for start, end, replacement in [(done, match.start(), None), *spans_of(match)]:
            texts.append(text[start:end] if replacement is None else replacement)
            owned.append(
                owners[start:end] if replacement is None else np.full(len(replacement), owners[start])
            )
        done = match.end()
    texts.append(text[done:])
    owned.append(owners[done:])
    return "".join(texts), np.concatenate(owned)


def _page_start(tokens: Sequence[str]) -> int:
    """Where the page starts in a stream: after the ``<eos>`` before its first line when that line
    is an article heading (the newline before the page, in no page), else at the stream's start."""
    blank = next((index for index, token in enumerate(tokens) if token != EOS), len(tokens))
    line = itertools.takewhile(lambda token: token != EOS, tokens[blank:])
    return blank if blank and is_article_heading(" ".join(line)) else 0


def lm_eval_page(tokens: Sequence[str]) -> Detokenized:
    """The text lm-evaluation-harness's ``wikitext`` task scores for the page in ``tokens`` (words
    and ``<eos>``), aligned with them (module docstring); empty for a stream with no word."""
    if all(token == EOS for token in tokens):
        return Detokenized("", np.zeros(len(tokens), dtype=np.int64))
    first = _page_start(tokens)
    text, owners = _page(tokens[first:])
    owners += first
    for rule in _RULES:
        text, owners = _rewrite(text, owners, rule)
    return Detokenized(text, np.searchsorted(owners, np.arange(len(tokens)), side="right").astype(np.int64))
