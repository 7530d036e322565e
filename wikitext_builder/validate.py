"""Check WikiText-format files line by line against the measured format spec.

``validate_lines(lines)`` / ``validate_file(path)`` return the findings as a list of
:class:`Violation` ``(line_number, message, severity)``, 1-based and sorted by line;
``validate_corpus(directory)`` checks every ``wiki.{train,valid,test}.{tokens,raw}`` present.

A finding has one of two severities:

* ``ERROR``: a break of the line format or article grammar that no real WikiText file has.
* ``IRREGULARITY``: one of the known quirks of the 2016 release, which the real files have
  and the spec (``docs/wikitext-format.md``) documents without making them part of the
  format (the builder does not reproduce them). The real WikiText-2 files have irregularities only
  (``validate`` passes); a corpus the builder writes has none (``validate --strict`` passes).

Errors:

* lines: every line ends with ``\\n``, starts with one space and ends with one space
  before it; no tabs, CR or other control characters, no invalid UTF-8, no two spaces in
  a row, no empty line; a blank line is exactly `` \\n``.
* headings: a line that starts with ``= `` and ends with `` =`` must be a balanced
  heading ``= ``*n TITLE `` =``*n with a non-empty title. Such a line counts as a
  heading when a blank line is next to it; elsewhere it is a paragraph that merely
  starts and ends with an ``=`` token (real WikiText-2 has a few, e.g. `` = Goals ; A = ``).
* article grammar: the file starts with a blank line; every heading is preceded and
  followed by a blank line (but see the title irregularity below); a blank line may only
  sit next to a heading or terminate an article; a section heading (level >= 2) needs an
  article title before it.
* tokens: ``<unk>`` only in ``.tokens`` files (never in ``.raw``); no ASCII hyphen
  between two letters/digits inside a token (``red-tipped``: should be ``red @-@ tipped``).
* markup residue: no wikitext markup that rendering should have removed, whole or as Moses
  tokenized it: links ``[[``/``]]`` (``[ [ a | b ] ]``), templates ``{{``/``}}``, table delimiters
  ``{ |``/``| }``, bold ``'''`` (``' ' '``), ``<ref>``, ``</ref>``, ``<references``, comments
  ``<!--``, external links ``[http://`` (``[ http : / /``), HTML entities (``& nbsp ;``,
  ``& # 8211 ;``) and magic words (``_ _ NOTOC _ _``). The real WikiText-2 files have none of these;
  they do have single brackets (``[ sic ]``), two apostrophes as quotes (``' '``), ``|`` as
  absolute value and an HTML tag named in prose (``the < pre > tag``), none of which is flagged.

Irregularities:

* missing article terminator: an article title's leading blank line directly follows the
  text (or a heading's own blank line) of the article before, instead of that article's
  terminating blank line; or the file does not end with a terminating blank line.
* a paragraph rendered as an article title: a level-1 heading line preceded by a blank
  line but followed by text (WikiText-2 train line 8031, a book title in a bibliography).
* an unsplit number: a comma or period between two digits inside a token (``1,000th``;
  should be ``1 @,@ 000th``). WikiText-2 train has three, test one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from wikitext_toolkit_core.format import UNK

__all__ = [
    "Violation",
    "ERROR",
    "IRREGULARITY",
    "heading_level",
    "validate_lines",
    "validate_file",
    "validate_corpus",
    "CORPUS_FILES",
]

ERROR = "error"
IRREGULARITY = "irregularity"

CORPUS_FILES = tuple(
    f"wiki.{split}.{ext}" for ext in ("tokens", "raw") for split in ("train", "valid", "test")
)

BLANK = " \n"
_HEADING = re.compile(r"((?:= )+)(.*?)((?: =)+)")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")  # all but \t, \n and \r
_UNDECODABLE = re.compile(r"[\udc80-\udcff]")  # bytes that were not UTF-8 (surrogateescape)
_DIGIT_SEP = re.compile(r"\d[,.]\d")
_UNSPLIT_HYPHEN = re.compile(r"[^\W_]-[^\W_]")
_ENTITIES = "nbsp|amp|lt|gt|quot|apos|ndash|mdash|minus|times|hellip|thinsp|ensp|emsp|shy|zwj|zwnj|lrm|rlm"
_RESIDUE = re.compile(
    r"\[\[|\]\]|\{\{|\}\}|'''"  # whole: links, templates, bold
    r"|(?<= )(?:\[ \[|\] \]|\{ \{|\} \}|\{ \||\| \}|' ' ')(?= )"  # tokenized; table delimiters
    r"|< ?/? ?ref(?:erences)?\b|< ?! ?--"  # <ref>, </ref>, <references/>, <!--
    r"|\[ ?(?:https?|ftp) ?: ?/ ?/"  # an external link's [http://... (tokenized "[ http : / /")
    rf"|& ?(?:{_ENTITIES}|# ?\d+) ?;"  # &nbsp;, &#8211;
    r"|_ ?_ ?[A-Z]+ ?_ ?_"
)  # __NOTOC__


def _may_hold_residue(body: str) -> bool:
    """Whether ``body`` holds one of the fixed strings that every match of ``_RESIDUE`` needs
    (each alternative needs one of them): a cheap test that spares most lines the regex,
    without changing what it finds."""
    return (
        "{" in body  # {{, { {, { |
        or "}" in body  # }}, } }, | }
        or ("[" in body and ("[[" in body or "[ [" in body or "http" in body or "ftp" in body))
        or ("]" in body and ("]]" in body or "] ]" in body))
        or ("'" in body and ("'''" in body or "' ' '" in body))
        or ("<" in body and ("< " in body or "</" in body or "<r" in body or "<!" in body))
        or ("&" in body and ";" in body)
        or ("_" in body and ("__" in body or "_ _" in body))
    )


@dataclass(frozen=True)
class Violation:
    """One finding: its 1-based line number, what is wrong, ``ERROR`` or ``IRREGULARITY``."""

    line_number: int
    message: str
    severity: str

    def __str__(self) -> str:
        return f"line {self.line_number}: {self.severity}: {self.message}"


def _error(number: int, message: str) -> Violation:
    return Violation(number, message, ERROR)


def _irregularity(number: int, message: str) -> Violation:
    return Violation(number, message, IRREGULARITY)


def heading_level(line: str) -> int:
    """The level of a well-formed heading line (`` = = T = = \\n`` -> 2), else 0."""
    body = line.rstrip("\n")
    if len(body) < 5 or not (body.startswith(" = ") and body.endswith(" = ")):
        return 0
    match = _HEADING.fullmatch(body[1:-1])
    if not match:
        return 0
    opening, title, closing = match.groups()
    level = len(opening) // 2
    if level != len(closing) // 2 or not title.strip() or title.startswith("=") and level > 1:
        return 0
    return level


def _check_line(number: int, line: str, allow_unk: bool) -> list[Violation]:
    """The checks of one line on its own (all errors but the unsplit number)."""
    found: list[Violation] = []
    if not line.endswith("\n"):
        found.append(_error(number, "line is not terminated by a newline"))
    body = line[:-1] if line.endswith("\n") else line
    if body == "":
        found.append(_error(number, "empty line (a blank line is ' \\n')"))
        return found
    if "\r" in body:
        found.append(_error(number, "carriage return (CR) in line"))
    if "\t" in body:
        found.append(_error(number, "tab in line"))
    if _CONTROL.search(body):
        found.append(_error(number, "control character in line"))
    if _UNDECODABLE.search(body):
        found.append(_error(number, "bytes that are not valid UTF-8"))
    if not body.startswith(" "):
        found.append(_error(number, "line does not start with a space"))
    if not body.endswith(" "):
        found.append(_error(number, "line does not end with a space before the newline"))
    if "  " in body:
        found.append(_error(number, "two spaces in a row"))
    text = body.strip(" ")
    if not text:
        return found
    if text.startswith("= ") and text.endswith(" =") or text == "=":
        if not heading_level(" " + text + " \n"):
            found.append(_error(number, f"malformed heading {text[:60]!r} (unbalanced '=' or empty title)"))
    tokens = text.split(" ")
    if not allow_unk and UNK in tokens:
        found.append(_error(number, "<unk> in a .raw file"))
    for token in tokens:
        if ("," in token or "." in token) and _DIGIT_SEP.search(token):
            found.append(
                _irregularity(number, f"unsplit number {token!r} (expected @,@ / @.@ between digits)")
            )
        if "-" in token and _UNSPLIT_HYPHEN.search(token):
            found.append(_error(number, f"unsplit hyphen {token!r} (expected @-@ between letters/digits)"))
    residue = _RESIDUE.search(body) if _may_hold_residue(body) else None
    if residue:
        found.append(
            _error(
                number,
                f"wikitext markup residue {residue.group(0)!r} (markup that rendering should have removed)",
            )
        )
    return found


# (line number, line, heading_level(line)); None beyond either end of the file
_Item = tuple[int, str, int] | None


def _blank(item: _Item) -> bool:
    return item is not None and item[1] == BLANK


class _Grammar:
    """The article-grammar checks, streaming: a line is checked once the three lines after
    it are known, in a window of seven lines (j-3 .. j+3) with line j in the middle.

    A heading-shaped line counts as a heading when a blank line is next to it (before or
    after); otherwise it is a paragraph that merely starts and ends with an ``=`` token.
    """

    def __init__(self) -> None:
        self.window: list[_Item] = [None] * 7
        self.seen_title = False

    def push(self, item: _Item) -> list[Violation]:
        """Add the next line (None past the end of the file); the findings for line j."""
        self.window = self.window[1:] + [item]
        return self._check() if self.window[3] is not None else []

    def finish(self) -> list[Violation]:
        """The findings for the last three lines."""
        return [violation for _ in range(3) for violation in self.push(None)]

    def _heading(self, k: int, wanted: int | None = None) -> bool:
        item = self.window[k]
        if item is None or not item[2] or (wanted is not None and item[2] != wanted):
            return False
        return _blank(self.window[k - 1]) or (k + 1 < len(self.window) and _blank(self.window[k + 1]))

    def _check(self) -> list[Violation]:
        before3, before2, before, current, after, _, _ = self.window
        assert current is not None, "_check runs only with a line at the window's centre"
        number, line, level = current
        found: list[Violation] = []
        is_blank = line == BLANK

        if before is None and not is_blank:
            found.append(_error(number, "file does not start with a blank line ' \\n'"))
        if self._heading(3):
            if level > 1 and not self.seen_title:
                found.append(_error(number, "section heading before any article title"))
            self.seen_title = self.seen_title or level == 1
            if before is not None and not _blank(before):
                found.append(_error(number, "heading not preceded by a blank line"))
            if _blank(after):
                heading_before = before3 is not None and before3[2] > 0 and _blank(before2)
                if (
                    level == 1
                    and _blank(before)
                    and before2 is not None
                    and (not _blank(before2) or heading_before)
                ):
                    # body text (or only a heading's own blank line) before the title's
                    # leading blank: the previous article's terminator is missing
                    found.append(
                        _irregularity(
                            number - 1,
                            "the article before this line is not "
                            "terminated (articles are separated by two blank lines)",
                        )
                    )
            elif level == 1 and after is not None and not self._heading(4):
                # " = T = " with text right after it (so a blank line right before it)
                found.append(
                    _irregularity(
                        number,
                        "a paragraph rendered as an article title "
                        "(a title line followed by text, not by a blank line)",
                    )
                )
            else:
                found.append(_error(number, "heading not followed by a blank line"))
        elif is_blank:
            justified = (
                self._heading(4)  # leads a heading
                or self._heading(2)  # follows a heading
                or after is None  # terminates the last article
                or (_blank(after) and self._heading(5, 1))  # terminates an article
            )
            if not justified:
                found.append(
                    _error(
                        number, "stray blank line (blank lines only surround headings and terminate articles)"
                    )
                )
        if after is None and (not is_blank or self._heading(2)):
            # the file must end with the last article's terminating blank line (after an
            # empty last section: the heading's own blank line, then the terminator)
            found.append(_irregularity(number, "the last article is not terminated by a blank line"))
        return found


def validate_lines(
    lines: Iterable[str], allow_unk: bool = True, check_grammar: bool = True
) -> list[Violation]:
    """Check the lines (each with its ``\\n``) of one WikiText file, streaming; the
    findings of both severities, sorted by line number.

    ``allow_unk``: ``<unk>`` is allowed (``.tokens``) or not (``.raw``).
    ``check_grammar``: also check the article grammar (file start, blank lines around
    headings, article terminators); off for fragments that are not whole files.
    """
    found: list[Violation] = []
    grammar = _Grammar() if check_grammar else None
    for number, line in enumerate(lines, start=1):
        found.extend(_check_line(number, line, allow_unk))
        if grammar is not None:
            found.extend(grammar.push((number, line, heading_level(line))))
    if grammar is not None:
        found.extend(grammar.finish())
    found.sort(key=lambda v: v.line_number)
    return found


def _read_lines(path: Path) -> Iterator[str]:
    """The file's lines split at ``\\n`` only (a lone CR stays inside its line, so line
    numbers match ``wc -l``); bytes that are not UTF-8 are kept as surrogate escapes."""
    with open(path, "rb") as handle:
        for raw in handle:
            yield raw.decode("utf-8", "surrogateescape")


def validate_file(path: str | Path) -> list[Violation]:
    """Check one file; ``<unk>`` is allowed unless the file name ends in ``.raw``."""
    path = Path(path)
    return validate_lines(_read_lines(path), allow_unk=not path.name.endswith(".raw"))


def validate_corpus(directory: str | Path) -> dict[str, list[Violation]]:
    """``{file name: findings}`` for every ``wiki.{train,valid,test}.{tokens,raw}`` present."""
    directory = Path(directory)
    return {name: validate_file(directory / name) for name in CORPUS_FILES if (directory / name).is_file()}
