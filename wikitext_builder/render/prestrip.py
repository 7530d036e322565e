"""The markup pre-strip: cheap textual removal, before parsing, of what WikiText drops and
mwparserfromhell handles badly or slowly: comments, behaviour switches, refs, wiki tables,
template-built tables, multi-column blocks, and the formatting tags whose content is kept."""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Callable

_BEHAVIOR_SWITCH = re.compile(r"__[A-Z]{2,}__")  # __NOTOC__, __TOC__, __NOEDITSECTION__ ...
_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.S)
# comments alone on their line(s) go with the line's newline, as in MediaWiki's preprocessor
# (the text around stays one paragraph)
_COMMENT_LINE = re.compile(r"^[ \t]*(?:<!--(?:(?!-->).)*-->[ \t]*)+\n", re.M | re.S)
# refs, and a stray </ref> left by a ref closed twice ("<ref>a</ref> b.</ref>")
_REF = re.compile(
    r"<ref\b[^>]*?/\s*>|<ref\b[^>]*>.*?</ref\s*>|<references\b[^>]*?/\s*>"
    r"|<references\b[^>]*>.*?</references\s*>|</ref\s*>",
    re.S | re.I,
)
_TABLE_OPEN = re.compile(r"^[ \t:]*\{\|")
_TABLE_CLOSE = re.compile(
    r"^[ \t]*(?:\|\}|\{\{\s*(?:jctbtm|jcttbtm|end|s-end|end box|col-end|"
    r"table end|election box end|football box end)\s*(?:\|[^{}]*)?\}\})",
    re.I,
)
_NEXT_HEADING = re.compile(r"^(=+)[^=\n][^\n]*\1[ \t]*$", re.M)  # a heading line: == x ==


def _strip_tables(text: str) -> str:
    """Remove ``{| ... |}`` wiki tables (nested ones too) line by line, before parsing:
    mwparserfromhell gives up on some real tables and leaves their markup as text.
    An unclosed table (MediaWiki closes it at the end of the page; mwparserfromhell leaves
    its markup as text) runs to the next heading, like an unclosed column block.

    One pass, in time linear in the lines whatever the number of unclosed tables: the line
    that closes a table opened at line ``i`` is the first after it where the running count of
    opening minus closing lines falls back below its value at ``i``."""
    if "{|" not in text:
        return text
    lines = text.split("\n")
    # +1 for a line that opens a table, -1 for one that closes a table (when inside one)
    steps = [1 if _TABLE_OPEN.match(line) else -1 if _TABLE_CLOSE.match(line) else 0 for line in lines]
    levels = list(itertools.accumulate(steps))
    where: dict[int, list[int]] = {}  # running count -> the lines where it has that value
    for index, level in enumerate(levels):
        where.setdefault(level, []).append(index)
    out: list[str] = []
    i = 0
    while i < len(lines):
        if steps[i] != 1:
            out.append(lines[i])
            i += 1
            continue
        below = where.get(levels[i] - 1, [])
        position = bisect.bisect_right(below, i)
        if position < len(below):  # closed: the rest of its closing line stays
            close = below[position]
            rest = _TABLE_CLOSE.sub("", lines[close], count=1)
            if rest.strip():
                out.append(rest)
            i = close + 1
            continue
        # unclosed: dropped up to the next heading line
        heading = next((j for j in range(i + 1, len(lines)) if _NEXT_HEADING.match(lines[j])), None)
        if heading is None:
            break
        i = heading
    return "\n".join(out)


# Formatting tags whose content is kept: their markup is removed before parsing, because
# an unclosed one inside a template parameter makes mwparserfromhell give up on the
# whole template (``{{Quote box|quote=<div>...}}``).
_INLINE_TAGS = re.compile(
    r"</?(?:span|small|big|font|u|s|strike|del|ins|abbr|tt|cite|sup|sub|"
    r"em|strong|b|i|var|bdi|bdo|mark|q|dfn|kbd|samp|wbr)\b[^<>]*>",
    re.I,
)
_BLOCK_TAGS = re.compile(r"</?(?:div|center|li|ul|ol|p|dl|dt|dd)\b[^<>]*>", re.I)
_QUOTE_TAG = re.compile(r"<(/?)blockquote\b[^<>]*>", re.I)
_TRANSCLUSION_TAGS = re.compile(
    r"</?(?:noinclude|onlyinclude)\s*/?>|<includeonly>.*?</includeonly>", re.I | re.S
)


# Multi-column layouts ({{div col}} ... {{div col end}}, {{col-begin}} ... {{col-end}}) and
# reference lists ({{refbegin}} ... {{refend}}): WikiText has none of their content (credits
# and personnel lists leave empty sections).
_COLUMNS_OPEN = re.compile(
    r"\{\{\s*(?:div col|div col start|col-begin|col begin|col-start|colbegin|"
    r"multicol|columns-start|refbegin|ref begin|refstart)\s*(?:\|[^{}]*)?\}\}",
    re.I,
)
_COLUMNS_CLOSE = re.compile(
    r"\{\{\s*(?:div col end|end div col|col-end|col end|colend|"
    r"multicol-end|columns-end|refend|ref end)\s*(?:\|[^{}]*)?\}\}",
    re.I,
)


# The same layouts written as an HTML <div> (``<div style="column-count:2">``,
# ``<div class="references-small">``): dropped with their content up to the matching
# </div> (Lágrimas Cálidas: "Performance credits" survives, the credits list in
# its column div does not; Chagas disease, dev pair: the "Original publication" citation in
# a references-small div is not in WikiText-2).
_COLUMN_DIV_MARKERS = ("column-count", "column-width", "columns:", "div-col", "multicol")
_REFERENCE_DIV_CLASS = re.compile(r"\bclass\s*=\s*[\"']?[^\"'>]*\bref", re.I)
_DIV_TAG = re.compile(r"<(/?)div\b[^<>]*?(/?)>", re.I)
_HTML_TABLE_TAG = re.compile(r"<(/?)table\b[^<>]*?(/?)>", re.I)


def _is_dropped_div(tag: str) -> bool:
    compact = tag.lower().replace(" ", "")
    return any(marker in compact for marker in _COLUMN_DIV_MARKERS) or bool(_REFERENCE_DIV_CLASS.search(tag))


def _strip_tag_blocks(text: str, tags: re.Pattern[str], is_dropped: Callable[[str], bool]) -> str:
    """Remove the blocks opened by a tag of ``tags`` (groups: the closing slash, the
    self-closing slash) for which ``is_dropped(opening tag)``, up to the matching closing
    tag (nested ones counted); an unclosed block runs to the next heading."""
    out: list[str] = []
    position = 0
    search_from = 0
    while True:
        opening = tags.search(text, search_from)
        if opening is None:
            break
        if opening.group(1) or opening.group(2) or not is_dropped(opening.group(0)):
            search_from = opening.end()
            continue
        out.append(text[position : opening.start()])
        heading = _NEXT_HEADING.search(text, opening.end())
        limit = heading.start() if heading is not None else len(text)
        depth, end = 1, limit
        for tag in tags.finditer(text, opening.end(), limit):
            if tag.group(2):
                continue
            depth += -1 if tag.group(1) else 1
            if depth == 0:
                end = tag.end()
                break
        position = search_from = end
    out.append(text[position:])
    return "".join(out)


def _strip_columns(text: str) -> str:
    """Remove multi-column blocks and reference lists; an unclosed one runs to the next heading."""
    out: list[str] = []
    position = 0
    while True:
        opening = _COLUMNS_OPEN.search(text, position)
        if opening is None:
            break
        out.append(text[position : opening.start()])
        closing = _COLUMNS_CLOSE.search(text, opening.end())
        heading = _NEXT_HEADING.search(text, opening.end())
        if closing is not None and (heading is None or closing.start() < heading.start()):
            position = closing.end()
        else:
            position = heading.start() if heading is not None else len(text)
    out.append(text[position:])
    return "".join(out)


# a row separator, or the closer of a table a template opened ({{Nobility table header}})
_TABLE_ROW = re.compile(r"^[ \t]*\|(?:-|\}(?!\}))")
_TABLE_LINE = re.compile(r"^[ \t]*[|!]")


def _strip_template_tables(text: str) -> str:
    """Remove the rows of tables opened by templates (``{{awards table}}``, ``{{jcttop}}``
    ... ``|-`` rows ... ``{{end}}`` or ``|}``): runs of ``|``/``!`` lines around a ``|-`` row
    separator or a ``|}`` closer, when the run's braces balance (so a template is never cut)."""
    if "|-" not in text and "|}" not in text:
        return text
    lines = text.split("\n")
    keep = [True] * len(lines)
    i = 0
    while i < len(lines):
        if keep[i] and _TABLE_ROW.match(lines[i]):
            start = i
            while start > 0 and keep[start - 1] and _TABLE_LINE.match(lines[start - 1]):
                start -= 1
            end = i
            while end + 1 < len(lines) and _TABLE_LINE.match(lines[end + 1]):
                end += 1
            block = lines[start : end + 1]
            if (
                sum(line.count("{{") - line.count("}}") for line in block) == 0
                and sum(line.count("[[") - line.count("]]") for line in block) == 0
            ):
                for k in range(start, end + 1):
                    keep[k] = False
            i = end + 1
        else:
            i += 1
    return "\n".join(line for line, kept in zip(lines, keep) if kept)


def _break_block_quotes(text: str) -> str:
    """A ``<blockquote>`` and its closing tag become paragraph breaks; a closing tag with
    no open block quote is dropped and the text around it stays one paragraph (Charles-
    Valentin Alkan, dev pair: 'the point or goal."</blockquote> This spirit of' is one line
    of WikiText-2)."""
    depth = 0

    def replace(match: re.Match[str]) -> str:
        nonlocal depth
        if not match.group(1):
            depth += 1
            return "\n\n"
        if depth:
            depth -= 1
            return "\n\n"
        return ""

    return _QUOTE_TAG.sub(replace, text)


def prestrip(wikitext: str) -> str:
    """Cheap textual removal of comments, refs and tables before parsing (faster and
    more robust than leaving them to mwparserfromhell)."""
    if "&lt;" in wikitext and (
        "&lt;ref" in wikitext and "<ref" not in wikitext or "&lt;!--" in wikitext and "<!--" not in wikitext
    ):
        # markup escaped one time too many (seen in some dump extracts)
        wikitext = (
            wikitext.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"').replace("&amp;", "&")
        )
    if "<!--" in wikitext:
        wikitext = _COMMENT.sub("", _COMMENT_LINE.sub("", wikitext))
    if "__" in wikitext:
        wikitext = _BEHAVIOR_SWITCH.sub("", wikitext)
    # The tag regexes ignore case and run unguarded: a search that finds no tag costs less than
    # a lowered copy of the text to test a keyword in (and a keyword in one case misses <NOINCLUDE>).
    if "<" in wikitext:
        wikitext = _REF.sub("", wikitext)
        # before the tables: "<onlyinclude>{| ..." opens a table at the start of its line
        wikitext = _TRANSCLUSION_TAGS.sub("", wikitext)
    wikitext = _strip_template_tables(_strip_tables(wikitext))
    if "{{" in wikitext and _COLUMNS_OPEN.search(wikitext):
        wikitext = _strip_columns(wikitext)
    if "<" in wikitext:
        wikitext = _strip_tag_blocks(wikitext, _DIV_TAG, _is_dropped_div)
        # HTML tables, like wiki tables, are dropped whole (a malformed one would leak its tags
        # as text)
        wikitext = _strip_tag_blocks(wikitext, _HTML_TABLE_TAG, lambda tag: True)
        wikitext = _INLINE_TAGS.sub("", wikitext)
        wikitext = _BLOCK_TAGS.sub("\n", wikitext)
        wikitext = _break_block_quotes(wikitext)
    return wikitext
