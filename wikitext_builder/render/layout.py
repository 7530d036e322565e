"""Paragraph and quote layout: rendered section text -> paragraph strings -> WikiText lines.

Bold and italic markup (parsed as plain text with ``skip_style_tags``) is removed here,
line by line, exactly as MediaWiki's ``doQuotes`` decides which apostrophes are markup.
"""

from __future__ import annotations

import re

from ..tokenize import format_paragraph, tokenize_text
from .markers import (
    APOSTROPHE,
    BLOCK_FORMULA,
    FORMULA,
    INDENT,
    INVISIBLE,
    LIST_ITEM,
    TEMPLATE_GAP,
    WHITESPACE,
)

_QUOTE_RUN = re.compile(r"('{2,})")
_LONE_PUNCTUATION = frozenset({".", ",", ";", ":", "(", ")", "-", "–", "—", "*", "/"})
_FORMULA_ONLY = re.compile(r"[\s.,;:]+")
_EMPTY_BRACKETS = re.compile(r"\s*\(\s*(?:[,;:]\s*)*\)")
_BRACKET_OPEN_PUNCT = re.compile(r"\(\s*[,;:]+\s*")
_BRACKET_CLOSE_PUNCT = re.compile(r"\s*[,;:]+\s*\)")
_MARKUP_RESIDUE = re.compile(r"\[\[|\]\]|\{\{|\}\}|\|")


def strip_quotes(text: str) -> str:
    """Remove ''italic'' and '''bold''' markup line by line; apostrophes protected as
    :data:`APOSTROPHE` (from ``{{'}}``, ``<nowiki>'</nowiki>``, link edges) are text and
    :data:`TEMPLATE_GAP` (a dropped template) keeps the quote runs on either side apart."""
    if "''" in text:
        text = "\n".join(_strip_line_quotes(line) if "''" in line else line for line in text.split("\n"))
    return text.replace(APOSTROPHE, "'").replace(TEMPLATE_GAP, "")


def _strip_line_quotes(line: str) -> str:
    """MediaWiki's ``doQuotes`` on one line, keeping only the text: four apostrophes are an
    apostrophe plus bold, more than five keep all but five, and when both the bold and the
    italic counts are odd one bold run is an apostrophe plus italic: the first after a
    one-letter word, else after a longer word, else after a space
    (``''Billboard'''s``, ``''The New York Times''' Hardcover``)."""
    parts = _QUOTE_RUN.split(line)
    bold = italic = 0
    for i in range(1, len(parts), 2):
        run = len(parts[i])
        if run == 4:
            parts[i - 1] += "'"
            parts[i] = "'''"
        elif run > 5:
            parts[i - 1] += "'" * (run - 5)
            parts[i] = "'''''"
        run = len(parts[i])
        italic += run in (2, 5)
        bold += run in (3, 5)
    if bold % 2 and italic % 2:
        single = multi = space = -1
        for i in range(1, len(parts), 2):
            if len(parts[i]) != 3:
                continue
            before = parts[i - 1]
            if before[-1:] == " ":
                space = i if space < 0 else space
            elif before[-2:-1] == " ":
                single = i
                break
            elif multi < 0:
                multi = i
        chosen = next((i for i in (single, multi, space) if i >= 0), -1)
        if chosen >= 0:
            parts[chosen - 1] += "'"
            parts[chosen] = "''"
    return "".join(parts[0::2])


def drop_markup_residue(text: str) -> str:
    """Remove the link and template markup the parser left as text, keeping the text.

    Every ``[[``, ``]]``, ``{{`` and ``}}`` still in the rendered text is markup that
    mwparserfromhell could not match (a link nested in a link target, unbalanced or deeply
    nested brackets, ``<nowiki>``): it is dropped, and a ``|`` inside such an unmatched
    span (to the matching closer or the end of the line) becomes a space, so
    ``[[a [[b]] c|d]]`` reads "a b c d". WikiText-2 has no ``[ [``, ``] ]``, ``{ {`` or
    ``} }`` in its 2 million tokens; a ``|`` outside such a span is text and is kept.
    """
    if "[[" not in text and "]]" not in text and "{{" not in text and "}}" not in text:
        return text
    return "\n".join(_drop_line_residue(line) for line in text.split("\n"))


def _drop_line_residue(line: str) -> str:
    depth = 0

    def replace(match: re.Match[str]) -> str:
        nonlocal depth
        mark = match.group(0)
        if mark == "|":
            return " " if depth else mark
        depth = depth + 1 if mark in ("[[", "{{") else max(depth - 1, 0)
        return ""

    return _MARKUP_RESIDUE.sub(replace, line)


def tidy_brackets(text: str) -> str:
    """Brackets emptied by removed templates: ``( )`` goes, ``( ; born`` becomes
    ``(born`` (WikiText has almost none of either)."""
    text = _EMPTY_BRACKETS.sub("", text)
    text = _BRACKET_OPEN_PUNCT.sub("(", text)
    return _BRACKET_CLOSE_PUNCT.sub(")", text).strip()


def paragraphs(text: str) -> list[str]:
    """Split rendered section text into paragraph strings (block formulas kept apart)."""
    text = strip_quotes(drop_markup_residue(INVISIBLE.sub("", text)))
    found: list[str] = []
    current: list[str] = []

    def flush() -> None:
        if current:
            joined = WHITESPACE.sub(" ", " ".join(current)).strip()
            if joined:
                found.append(joined)
            current.clear()

    for raw in text.split("\n"):
        line = WHITESPACE.sub(" ", raw).strip()
        if not line:
            flush()
            continue
        if line.startswith((LIST_ITEM, INDENT)):
            flush()
            indented = line.startswith(INDENT)
            line = line.replace(LIST_ITEM, " ").replace(INDENT, " ").strip()
            if not line:
                continue
            if indented and (FORMULA in line or BLOCK_FORMULA in line):
                # an indented formula (":<math>...</math> text") is display math:
                # WikiText keeps a lone <formula> line and drops the rest of the line
                found.append(BLOCK_FORMULA)
                continue
            current.append(line)
            flush()
            continue
        current.append(line.replace(LIST_ITEM, " ").replace(INDENT, " "))
    flush()
    return _split_formulas(found)


def _split_formulas(found: list[str]) -> list[str]:
    out: list[str] = []
    for para in found:
        if "(" in para:
            para = tidy_brackets(para)
            if not para:
                continue
        if FORMULA in para and not _FORMULA_ONLY.sub("", para.replace(FORMULA, "")):
            out.append(BLOCK_FORMULA)  # a paragraph that is only a formula
        elif BLOCK_FORMULA in para:
            for i, piece in enumerate(para.split(BLOCK_FORMULA)):
                if i:
                    out.append(BLOCK_FORMULA)
                piece = piece.strip()
                if piece and piece not in {".", ",", ";", ":"}:
                    out.append(piece)
        else:
            out.append(para)
    return out


def paragraph_line(paragraph: str) -> str | None:
    """The WikiText line of one paragraph, or None when nothing but stray punctuation is left."""
    if paragraph == BLOCK_FORMULA:
        return " <formula> \n"
    tokens = tokenize_text(paragraph.replace(FORMULA, " <formula> "))
    if not tokens or all(token in _LONE_PUNCTUATION for token in tokens):
        return None  # nothing, or the punctuation left behind by removed markup
    return format_paragraph(tokens)
