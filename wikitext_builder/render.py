"""Render one Wikipedia article (wikitext markup) in WikiText form.

Public interface (used by the corpus builder):

* :class:`MarkupError` -- raised with a one-line message naming the article and the
  problem when an article cannot be rendered (empty, a redirect, markup that
  mwparserfromhell cannot parse such as an unbalanced template).
* :func:`render_article` -- ``(title, wikitext) -> str``: the article exactly in the
  ARTICLE grammar of the WikiText format spec, tokens *not* ``<unk>``-mapped::

      " \\n = T = \\n \\n" + BODY + " \\n"

The function is pure, deterministic and module-level (picklable for worker pools).

Cleaning (mwparserfromhell): headings are kept; templates that carry text are
rendered through the :data:`TEMPLATE_RENDERERS` table (``convert``, ``lang``,
``nihongo``, dates, ...), every other template is dropped; refs, tables, galleries,
files, categories, interwiki links and comments are removed; wikilinks become their
text; ``<math>`` / ``{{math}}`` become ``<formula>``; reference-type sections
(References, Notes, See also, External links, ...) are removed; HTML entities are
decoded; surviving list items become ordinary paragraph lines.
"""

from __future__ import annotations

import html
import math
import re
from typing import Callable

import mwparserfromhell
from mwparserfromhell.nodes import (Argument, Comment, ExternalLink, Heading, HTMLEntity,
                                    Tag, Template, Text, Wikilink)
from mwparserfromhell.wikicode import Wikicode

from .tokenize import format_heading, format_paragraph, tokenize_text

__all__ = ["MarkupError", "render_article", "render_text", "REMOVED_SECTIONS"]


class MarkupError(ValueError):
    """An article whose markup cannot be rendered (message: one line, names the article)."""


# Sentinels in the intermediate plain text (never present in real article text).
LIST_ITEM = "\x02"      # start of a list item / indented line
FORMULA = "\x03"        # a <formula>
BLOCK_FORMULA = "\x04"  # display math: a line of its own
PARA_BREAK = "\n\n"
APOSTROPHE = "\x05"    # an apostrophe from a template, not part of quote markup
INDENT = "\x06"        # start of an indented (":") line

# Sections (by normalized heading) whose own text is removed; as in WikiText, their
# sub-sections (other headings) stay.
REMOVED_SECTIONS = frozenset({
    "references", "reference", "notes", "note", "see also", "external links",
    "external link", "further reading", "bibliography", "sources", "source",
    "citations", "footnotes", "notes and references", "references and notes",
    "works cited", "literature cited", "cited sources", "cited works",
    "general references", "specific references", "endnotes", "explanatory notes",
    "sources and references", "references and sources", "notes and sources",
    "external links and references", "related articles", "links",
    "selected bibliography", "select bibliography", "further information",
    "notes and citations", "citations and notes", "references and further reading",
    "sources and further reading", "footnotes and references", "references and footnotes",
    "notes and further reading", "further reading and external links",
    "bibliography and further reading", "external links and further reading",
})

# Tags whose whole content is dropped.
_DROPPED_TAGS = frozenset({
    "ref", "references", "gallery", "table", "timeline", "imagemap", "graph",
    "mapframe", "maplink", "templatestyles", "score", "includeonly", "syntaxhighlight",
    "source", "pre", "hiero", "categorytree", "inputbox", "charinsert", "indicator",
    "section", "caption", "tr", "td", "th", "style", "script", "ol", "ul",
})
_FORMULA_TAGS = frozenset({"math", "chem", "ce"})
_BREAK_TAGS = frozenset({"br", "hr", "p"})

# Link namespaces whose links are removed (files, categories) or shown (text).
_DROPPED_NAMESPACES = frozenset({"file", "image", "media", "category"})
_INLINE_INTERWIKI = frozenset({
    "wikt", "wiktionary", "s", "wikisource", "q", "wikiquote", "b", "wikibooks",
    "n", "wikinews", "v", "wikiversity", "voy", "wikivoyage", "commons", "c", "m",
    "meta", "d", "wikidata", "species", "w", "wikipedia", "mw", "mediawiki",
    "wp", "en", "simple", "oldwikisource", "iarchive", "doi", "arxiv", "special",
    "portal", "help", "template", "user", "talk", "module",
})
_LANGUAGE_PREFIX = re.compile(r"^[a-z]{2,3}(?:-[a-z0-9]+)*$")

_WS = re.compile(r"[ \t\u00a0\u2000-\u200a\u202f\u205f\u3000]+")
_INVISIBLE = re.compile(r"[\u200b-\u200f\u2060\ufeff\u00ad\u202a-\u202e\u2066-\u2069]")
_CONTROL_CHARS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_LONE_PUNCTUATION = frozenset({".", ",", ";", ":", "(", ")", "-", "–", "—", "*", "/"})
_FORMULA_ONLY = re.compile(r"[\s.,;:]+")
_STYLE_QUOTES = re.compile(r"'{2,}")


def _norm_heading(text: str) -> str:
    return _WS.sub(" ", text).strip().strip(":").strip().lower()


class _Renderer:
    """Turns a Wikicode tree into plain text with sentinels; one per article."""

    def __init__(self, title: str) -> None:
        self.title = title

    # -- nodes ------------------------------------------------------------------------
    def render(self, code: Wikicode | None) -> str:
        if code is None:
            return ""
        return "".join(self.node(n) for n in code.nodes)

    def node(self, node) -> str:  # noqa: C901 - a flat dispatch on node types
        if isinstance(node, Text):
            return node.value
        if isinstance(node, Wikilink):
            return self.wikilink(node)
        if isinstance(node, Template):
            return self.template(node)
        if isinstance(node, Tag):
            return self.tag(node)
        if isinstance(node, HTMLEntity):
            try:
                return node.normalize()
            except (ValueError, OverflowError):
                return ""
        if isinstance(node, ExternalLink):
            if node.brackets and node.title is not None:
                return self.render(node.title)
            return ""
        if isinstance(node, (Comment, Argument)):
            return ""
        if isinstance(node, Heading):  # a heading nested in a template or tag
            return PARA_BREAK + self.render(node.title).strip() + PARA_BREAK
        return ""

    def wikilink(self, link: Wikilink) -> str:
        target = str(link.title).strip()
        leading_colon = target.startswith(":")
        target = target.lstrip(":").strip()
        if ":" in target:
            prefix = target.split(":", 1)[0].strip().lower().replace("_", " ")
            if prefix in _DROPPED_NAMESPACES:
                return "" if not leading_colon else self._link_text(link, target)
            if prefix not in _INLINE_INTERWIKI and _LANGUAGE_PREFIX.match(prefix):
                if not leading_colon:
                    return ""  # an interlanguage link
        return self._link_text(link, target)

    def _link_text(self, link: Wikilink, target: str) -> str:
        if link.text is not None:
            text = self.render(link.text)
            if text.strip():
                return text
            # the pipe trick [[Foo (bar)|]] shows "Foo"
            target = re.sub(r"\s*\([^)]*\)\s*$", "", target)
            target = target.split(":", 1)[-1] if ":" in target else target
        if target.startswith("#"):
            target = target[1:]
        return html.unescape(target.replace("_", " "))

    def template(self, tpl: Template) -> str:
        key = template_key(str(tpl.name))
        renderer = TEMPLATE_RENDERERS.get(key)
        if renderer is None and ":" in key:
            function = PARSER_FUNCTIONS.get(key.split(":", 1)[0].strip())
            if function is not None:
                # {{formatnum:12000}}: the argument is the rest of the name (may hold templates)
                return function(self.render(tpl.name).split(":", 1)[1].strip(), tpl, self)
        if renderer is None:
            prefix = key.split("-", 1)[0] + "-" if "-" in key else ""
            family = TEMPLATE_FAMILIES.get(prefix)
            if family is None:
                return ""
            renderer = family(key[len(prefix):])
            if renderer is None:
                return ""
        return renderer(tpl, self)

    def tag(self, tag: Tag) -> str:
        name = str(tag.tag).strip().lower()
        if tag.wiki_markup and name in ("li", "dt", "dd"):
            return INDENT if name == "dd" else LIST_ITEM
        if name in _DROPPED_TAGS:
            return ""
        if name in _FORMULA_TAGS:
            display = tag.has("display") and str(tag.get("display").value).strip().lower() == "block"
            return BLOCK_FORMULA if display else FORMULA
        if name in _BREAK_TAGS:
            return " " if name == "br" else PARA_BREAK
        if name == "nowiki":
            return html.unescape(str(tag.contents)) if tag.contents is not None else ""
        if name in ("blockquote", "poem", "div", "center"):
            return PARA_BREAK + self.render(tag.contents) + PARA_BREAK
        if tag.self_closing or tag.contents is None:
            return ""
        return self.render(tag.contents)

    # -- helpers for template renderers -----------------------------------------------
    def param(self, tpl: Template, name: str | int, default: str = "") -> str:
        """The rendered, stripped value of a template parameter ('' when absent)."""
        key = str(name)
        if not tpl.has(key):
            return default
        return _WS.sub(" ", self.render(tpl.get(key).value)).strip()

    def positional(self, tpl: Template) -> list[str]:
        return [_WS.sub(" ", self.render(p.value)).strip() for p in tpl.params if not p.showkey]


def _section_blocks(code: Wikicode) -> list[tuple[int, Wikicode | None, list]]:
    """Split the top-level node list into (level, heading title, nodes) sections."""
    sections: list[tuple[int, Wikicode | None, list]] = [(1, None, [])]
    for node in code.nodes:
        if isinstance(node, Heading):
            sections.append((node.level, node.title, []))
        else:
            sections[-1][2].append(node)
    return sections


def _strip_quotes(text: str) -> str:
    """Remove ''italic'' and bold (three quotes) markup, which is plain text here
    (parsed with skip_style_tags), line by line like MediaWiki: ``''Billboard'''s`` is
    an apostrophe plus the italic's end; four quotes are an apostrophe plus bold.
    Apostrophes from templates (``{{'}}``) are protected as ``APOSTROPHE`` until here."""
    if "''" in text:
        text = "\n".join(_strip_line_quotes(line) if "''" in line else line
                         for line in text.split("\n"))
    return text.replace(APOSTROPHE, "'")


def _strip_line_quotes(line: str) -> str:
    out: list[str] = []
    italic = bold = False
    last = 0
    for match in _STYLE_QUOTES.finditer(line):
        out.append(line[last:match.start()])
        last = match.end()
        run = len(match.group(0))
        if run > 5:
            out.append("'" * (run - 5))
            run = 5
        if run == 2:
            italic = not italic
        elif run == 3:
            following = line[last:last + 1]
            if (italic and not bold and following.isalpha() and match.start() > 0
                    and line[match.start() - 1].isalnum()):
                out.append("'")  # ''Title'''s: an apostrophe, then the italic ends
                italic = False
            else:
                bold = not bold
        elif run == 4:
            out.append("'")
            bold = not bold
        else:
            italic, bold = not italic, not bold
    out.append(line[last:])
    return "".join(out)


_EMPTY_BRACKETS = re.compile(r"\s*\(\s*(?:[,;:]\s*)*\)")
_BRACKET_OPEN_PUNCT = re.compile(r"\(\s*[,;:]+\s*")
_BRACKET_CLOSE_PUNCT = re.compile(r"\s*[,;:]+\s*\)")


def _tidy_brackets(text: str) -> str:
    """Brackets emptied by removed templates: ``( )`` goes, ``( ; born`` becomes
    ``(born`` (WikiText has almost none of either)."""
    text = _EMPTY_BRACKETS.sub("", text)
    text = _BRACKET_OPEN_PUNCT.sub("(", text)
    return _BRACKET_CLOSE_PUNCT.sub(")", text).strip()


def _paragraphs(text: str) -> list[str]:
    """Split rendered section text into paragraph strings (block formulas kept apart)."""
    text = _strip_quotes(_INVISIBLE.sub("", text))
    paragraphs: list[str] = []
    current: list[str] = []

    def flush() -> None:
        if current:
            joined = _WS.sub(" ", " ".join(current)).strip()
            if joined:
                paragraphs.append(joined)
            current.clear()

    for raw in text.split("\n"):
        line = _WS.sub(" ", raw).strip()
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
                paragraphs.append(BLOCK_FORMULA)
                continue
            current.append(line)
            flush()
            continue
        current.append(line.replace(LIST_ITEM, " ").replace(INDENT, " "))
    flush()

    out: list[str] = []
    for para in paragraphs:
        if "(" in para:
            para = _tidy_brackets(para)
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


def _lines_for(paragraph: str) -> str | None:
    if paragraph == BLOCK_FORMULA:
        return " <formula> \n"
    tokens = tokenize_text(paragraph.replace(FORMULA, " <formula> "))
    if not tokens or all(token in _LONE_PUNCTUATION for token in tokens):
        return None  # nothing, or the punctuation left behind by removed markup
    return format_paragraph(tokens)


_BEHAVIOR_SWITCH = re.compile(r"__[A-Z]{2,}__")  # __NOTOC__, __TOC__, __NOEDITSECTION__ ...
_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.S)
_REF = re.compile(r"<ref\b[^>]*?/\s*>|<ref\b[^>]*>.*?</ref\s*>|<references\b[^>]*?/\s*>"
                  r"|<references\b[^>]*>.*?</references\s*>", re.S | re.I)
_TABLE_OPEN = re.compile(r"^[ \t:]*\{\|")
_TABLE_CLOSE = re.compile(r"^[ \t]*(?:\|\}|\{\{\s*(?:jctbtm|jcttbtm|end|s-end|end box|col-end|"
                          r"table end|election box end|football box end)\s*(?:\|[^{}]*)?\}\})", re.I)


def _strip_tables(text: str) -> str:
    """Remove ``{| ... |}`` wiki tables (nested ones too) line by line, before parsing:
    mwparserfromhell gives up on some real tables and leaves their markup as text.
    An unclosed table is left to the parser."""
    if "{|" not in text:
        return text
    lines = text.split("\n")
    out: list[str] = []
    depth = 0
    start = 0
    for i, line in enumerate(lines):
        if _TABLE_OPEN.match(line):
            if depth == 0:
                start = i
            depth += 1
            continue
        if depth and _TABLE_CLOSE.match(line):
            depth -= 1
            if depth == 0:
                rest = _TABLE_CLOSE.sub("", line, count=1)
                if rest.strip():
                    out.append(rest)
            continue
        if depth == 0:
            out.append(line)
    if depth:  # unclosed: keep the rest as it was
        out.extend(lines[start:])
    return "\n".join(out)


# Formatting tags whose content is kept: their markup is removed before parsing, because
# an unclosed one inside a template parameter makes mwparserfromhell give up on the
# whole template (``{{Quote box|quote=<div>...}}``).
_INLINE_TAGS = re.compile(r"</?(?:span|small|big|font|u|s|strike|del|ins|abbr|tt|cite|sup|sub|"
                          r"em|strong|b|i|var|bdi|bdo|mark|q|dfn|kbd|samp|wbr)\b[^<>]*>", re.I)
_BLOCK_TAGS = re.compile(r"</?(?:div|center|li|ul|ol|p|dl|dt|dd)\b[^<>]*>", re.I)
_QUOTE_TAGS = re.compile(r"</?(?:blockquote)\b[^<>]*>", re.I)
_TRANSCLUSION_TAGS = re.compile(r"</?(?:noinclude|onlyinclude)\s*/?>|<includeonly>.*?</includeonly>",
                                re.I | re.S)


# Multi-column layouts ({{div col}} ... {{div col end}}, {{col-begin}} ... {{col-end}}):
# WikiText has none of their content (credits and personnel lists leave empty sections).
_COLUMNS_OPEN = re.compile(r"\{\{\s*(?:div col|div col start|col-begin|col begin|col-start|colbegin|"
                           r"multicol|columns-start)\s*(?:\|[^{}]*)?\}\}", re.I)
_COLUMNS_CLOSE = re.compile(r"\{\{\s*(?:div col end|end div col|col-end|col end|colend|"
                            r"multicol-end|columns-end)\s*(?:\|[^{}]*)?\}\}", re.I)
_NEXT_HEADING = re.compile(r"^=", re.M)


# The same layout written as an HTML <div> (``<div style="column-count:2">``): dropped
# with its content up to the matching </div> (Lágrimas Cálidas: "Performance credits"
# survives, the credits list in its column div does not).
_COLUMN_DIV_MARKERS = ("column-count", "column-width", "columns:", "div-col", "multicol")
_DIV_TAG = re.compile(r"<(/?)div\b[^<>]*?(/?)>", re.I)


def _is_column_div(tag: str) -> bool:
    tag = tag.lower().replace(" ", "")
    return any(marker in tag for marker in _COLUMN_DIV_MARKERS)


def _strip_column_divs(text: str) -> str:
    """Remove ``<div>`` blocks laid out in columns (nested divs counted); an unclosed one
    runs to the next heading."""
    out: list[str] = []
    position = 0
    search_from = 0
    while True:
        opening = _DIV_TAG.search(text, search_from)
        if opening is None:
            break
        if opening.group(1) or opening.group(2) or not _is_column_div(opening.group(0)):
            search_from = opening.end()
            continue
        out.append(text[position:opening.start()])
        heading = _NEXT_HEADING.search(text, opening.end())
        limit = heading.start() if heading is not None else len(text)
        depth, end = 1, limit
        for tag in _DIV_TAG.finditer(text, opening.end(), limit):
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
    """Remove multi-column blocks; an unclosed one runs to the next heading."""
    out: list[str] = []
    position = 0
    while True:
        opening = _COLUMNS_OPEN.search(text, position)
        if opening is None:
            break
        out.append(text[position:opening.start()])
        closing = _COLUMNS_CLOSE.search(text, opening.end())
        heading = _NEXT_HEADING.search(text, opening.end())
        if closing is not None and (heading is None or closing.start() < heading.start()):
            position = closing.end()
        else:
            position = heading.start() if heading is not None else len(text)
    out.append(text[position:])
    return "".join(out)


_TABLE_ROW = re.compile(r"^[ \t]*\|-")
_TABLE_LINE = re.compile(r"^[ \t]*[|!]")


def _strip_template_tables(text: str) -> str:
    """Remove the rows of tables opened and closed by templates (``{{awards table}}``,
    ``{{jcttop}}`` ... ``|-`` rows ... ``{{end}}``): runs of ``|``/``!`` lines around a
    ``|-`` row separator, when the run's braces balance (so a template is never cut)."""
    if "|-" not in text:
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
            block = lines[start:end + 1]
            if sum(line.count("{{") - line.count("}}") for line in block) == 0 and \
                    sum(line.count("[[") - line.count("]]") for line in block) == 0:
                for k in range(start, end + 1):
                    keep[k] = False
            i = end + 1
        else:
            i += 1
    return "\n".join(line for line, kept in zip(lines, keep) if kept)


def _prestrip(wikitext: str) -> str:
    """Cheap textual removal of comments, refs and tables before parsing (faster and
    more robust than leaving them to mwparserfromhell)."""
    if "&lt;" in wikitext and ("&lt;ref" in wikitext and "<ref" not in wikitext
                                or "&lt;!--" in wikitext and "<!--" not in wikitext):
        # markup escaped one time too many (seen in some dump extracts)
        wikitext = (wikitext.replace("&lt;", "<").replace("&gt;", ">")
                    .replace("&quot;", '"').replace("&amp;", "&"))
    if "<!--" in wikitext:
        wikitext = _COMMENT.sub("", wikitext)
    if "__" in wikitext:
        wikitext = _BEHAVIOR_SWITCH.sub("", wikitext)
    if "<ref" in wikitext or "<REF" in wikitext or "<Ref" in wikitext:
        wikitext = _REF.sub("", wikitext)
    wikitext = _strip_template_tables(_strip_tables(wikitext))
    if "{{" in wikitext and _COLUMNS_OPEN.search(wikitext):
        wikitext = _strip_columns(wikitext)
    if "<" in wikitext:
        if "column" in wikitext or "multicol" in wikitext:
            wikitext = _strip_column_divs(wikitext)
        wikitext = _INLINE_TAGS.sub("", wikitext)
        wikitext = _BLOCK_TAGS.sub("\n", wikitext)
        wikitext = _QUOTE_TAGS.sub("\n\n", wikitext)
        wikitext = _TRANSCLUSION_TAGS.sub("", wikitext)
    return wikitext


def _check_parse(title: str, code: Wikicode) -> None:
    """Raise MarkupError for a ``{{`` that mwparserfromhell could not match (its text would
    leak); stray ``}}`` closers carry no text and are simply removed."""
    for node in code.nodes:
        if isinstance(node, Text) and ("{{" in node.value or "}}" in node.value):
            if "{{" in node.value:
                snippet = node.value[node.value.find("{{"):][:40].replace("\n", " ")
                raise MarkupError(f"{title}: unbalanced template markup near {snippet!r}")
            node.value = node.value.replace("}}", "")


def render_text(title: str, wikitext: str) -> list[tuple[int, str]]:
    """The cleaned article as ``(level, text)`` items: level 0 = paragraph,
    ``BLOCK_FORMULA`` paragraphs for display math, level >= 2 = headings."""
    if wikitext is None or not wikitext.strip():
        raise MarkupError(f"{title}: empty article")
    # the sentinels used below are control characters: none may come from the input
    wikitext = _CONTROL_CHARS.sub("", wikitext.replace("\r\n", "\n").replace("\r", "\n"))
    if re.match(r"\s*#redirect\b", wikitext, re.I):
        raise MarkupError(f"{title}: the page is a redirect")
    try:
        code = mwparserfromhell.parse(_prestrip(wikitext), skip_style_tags=True)
    except Exception as exc:  # mwparserfromhell's own ParserError and friends
        message = f"{title}: mwparserfromhell cannot parse the markup ({exc})"
        raise MarkupError(message.replace("\n", " ")) from exc
    _check_parse(title, code)
    renderer = _Renderer(title)
    items: list[tuple[int, str]] = []
    for level, heading, nodes in _section_blocks(code):
        if heading is not None:
            heading_text = _WS.sub(" ", _INVISIBLE.sub("", renderer.render(heading))).strip()
            heading_text = heading_text.replace(LIST_ITEM, " ").replace(INDENT, " ")
            heading_text = _strip_quotes(heading_text).strip()
            if _norm_heading(heading_text) in REMOVED_SECTIONS:
                # WikiText removed the section's own text but kept its sub-sections
                # (e.g. "Video" under "Further reading"), often with empty bodies.
                continue
            items.append((level, heading_text))
        text = "".join(renderer.node(n) for n in nodes)
        items.extend((0, p) for p in _paragraphs(text))
    return items


def render_article(title: str, wikitext: str) -> str:
    """The article in WikiText form (no ``<unk>`` mapping); raises :class:`MarkupError`."""
    title = _CONTROL_CHARS.sub("", title or "").replace("\n", " ").strip()
    title_tokens = tokenize_text(title)
    if not title_tokens:
        raise MarkupError(f"{title!r}: empty title")
    out = [" \n", format_heading(title_tokens, 1), " \n"]
    paragraphs = 0
    for level, text in render_text(title, wikitext):
        if level:
            text = text.replace(FORMULA, " <formula> ").replace(BLOCK_FORMULA, " <formula> ")
            tokens = tokenize_text(text)
            if tokens:
                out.append(" \n")
                out.append(format_heading(tokens, min(level, 6)))
                out.append(" \n")
            continue
        line = _lines_for(text)
        if line is not None:
            out.append(line)
            paragraphs += 1
    if not paragraphs:
        raise MarkupError(f"{title}: no text left after cleaning")
    out.append(" \n")
    return "".join(out)


# ======================================================================================
# Templates: a table of renderers keyed by the normalized template name.
# Every template not in the table (infoboxes, navboxes, cite*, sfn, efn, maintenance
# tags, hatnotes, ...) is dropped.
# ======================================================================================

TemplateRenderer = Callable[[Template, _Renderer], str]


def template_key(name: str) -> str:
    """Normalize a template name: case-folded first letter, spaces for underscores."""
    name = _WS.sub(" ", name.replace("_", " ")).strip()
    if name.lower().startswith("template:"):
        name = name[9:].strip()
    return name.lower()


def _first(tpl: Template, r: _Renderer) -> str:
    pos = r.positional(tpl)
    return pos[0] if pos else ""


def _second(tpl: Template, r: _Renderer) -> str:
    pos = r.positional(tpl)
    return pos[1] if len(pos) > 1 else ""


def _last(tpl: Template, r: _Renderer) -> str:
    pos = [p for p in r.positional(tpl) if p]
    return pos[-1] if pos else ""


def _constant(text: str) -> TemplateRenderer:
    return lambda tpl, r: text


def _formula(tpl: Template, r: _Renderer) -> str:
    return FORMULA


def _block(tpl: Template, r: _Renderer) -> str:
    """Quotations: the quoted text as a paragraph of its own."""
    text = r.param(tpl, "text") or r.param(tpl, "quote") or _first(tpl, r)
    return PARA_BREAK + text + PARA_BREAK if text else ""


def _youtube(tpl: Template, r: _Renderer) -> str:
    """``{{YouTube|id=..|title=T}}``: "T on YouTube" (title defaults to the page name)."""
    pos = r.positional(tpl)
    title = r.param(tpl, "title") or (pos[1] if len(pos) > 1 else "") or r.title
    return f"{title} on YouTube"


def _imslp(tpl: Template, r: _Renderer) -> str:
    """``{{IMSLP|id=..|cname=C}}``: "Free scores by C at the International Music Score Library Project"."""
    pos = r.positional(tpl)
    name = r.param(tpl, "cname") or (pos[1] if len(pos) > 1 else "") or r.title
    return f"Free scores by {name} at the International Music Score Library Project"


def _imdb(tpl: Template, r: _Renderer) -> str:
    """``{{IMDb name|id|Name}}`` / ``{{IMDb title|id|Title}}``: "Name at the Internet Movie Database"."""
    pos = r.positional(tpl)
    name = r.param(tpl, "name") or r.param(tpl, "title") or (pos[1] if len(pos) > 1 else "") or r.title
    return f"{name} at the Internet Movie Database"


_PLAIN_NUMBER = re.compile(r"^([-−]?)(\d+)(\.\d+)?$")


def _formatnum(arg: str, tpl: Template, r: _Renderer) -> str:
    """``{{formatnum:12000}}`` reads "12,000"; ``|R`` (reverse) and ``|NOSEP`` keep the digits."""
    flags = {p.upper() for p in r.positional(tpl)}
    arg = arg.strip()
    if "R" in flags:
        return arg.replace(",", "")
    match = _PLAIN_NUMBER.match(arg)
    if match is None or "NOSEP" in flags:
        return arg
    sign, digits, decimals = match.groups()
    return sign + re.sub(r"(?<=\d)(?=(?:\d{3})+$)", ",", digits) + (decimals or "")


def _join_positional(tpl: Template, r: _Renderer) -> str:
    return " ".join(p for p in r.positional(tpl) if p)


_LANGUAGES = {
    "ar": "Arabic", "bg": "Bulgarian", "bn": "Bengali", "ca": "Catalan", "cs": "Czech",
    "cy": "Welsh", "da": "Danish", "de": "German", "el": "Greek", "en": "English",
    "es": "Spanish", "et": "Estonian", "eu": "Basque", "fa": "Persian", "fi": "Finnish",
    "fr": "French", "ga": "Irish", "gd": "Scottish Gaelic", "grc": "Ancient Greek",
    "he": "Hebrew", "hi": "Hindi", "hr": "Croatian", "hu": "Hungarian", "hy": "Armenian",
    "id": "Indonesian", "is": "Icelandic", "it": "Italian", "ja": "Japanese",
    "ka": "Georgian", "ko": "Korean", "la": "Latin", "lt": "Lithuanian", "lv": "Latvian",
    "mi": "Māori", "mn": "Mongolian", "ms": "Malay", "nl": "Dutch", "no": "Norwegian",
    "nb": "Norwegian Bokmål", "nn": "Norwegian Nynorsk", "pl": "Polish",
    "pt": "Portuguese", "ro": "Romanian", "ru": "Russian", "sa": "Sanskrit",
    "sk": "Slovak", "sl": "Slovene", "sq": "Albanian", "sr": "Serbian", "sv": "Swedish",
    "sw": "Swahili", "ta": "Tamil", "te": "Telugu", "th": "Thai", "tr": "Turkish",
    "uk": "Ukrainian", "ur": "Urdu", "vi": "Vietnamese", "yi": "Yiddish",
    "zh": "Chinese", "ang": "Old English", "non": "Old Norse", "sco": "Scots",
    "haw": "Hawaiian", "sh": "Serbo-Croatian", "bs": "Bosnian", "mk": "Macedonian",
    "be": "Belarusian", "az": "Azerbaijani", "kk": "Kazakh", "uz": "Uzbek",
    "tl": "Tagalog", "fil": "Filipino", "af": "Afrikaans", "gl": "Galician",
    "oc": "Occitan", "br": "Breton", "kw": "Cornish", "gv": "Manx", "fo": "Faroese",
    "mt": "Maltese", "lb": "Luxembourgish", "pa": "Punjabi", "ne": "Nepali",
    "si": "Sinhala", "my": "Burmese", "km": "Khmer", "lo": "Lao", "bo": "Tibetan",
    "am": "Amharic", "so": "Somali", "ha": "Hausa", "yo": "Yoruba", "zu": "Zulu",
    "xh": "Xhosa", "ku": "Kurdish", "ps": "Pashto", "tg": "Tajik", "tk": "Turkmen",
    "ky": "Kyrgyz", "tt": "Tatar", "ba": "Bashkir", "cv": "Chuvash", "sme": "Northern Sami",
    "se": "Northern Sami", "fy": "West Frisian", "eo": "Esperanto", "ia": "Interlingua",
    "gsw": "Swiss German", "nds": "Low German", "yue": "Cantonese", "cmn": "Mandarin",
}


def _lang_xx(code: str) -> TemplateRenderer:
    language = _LANGUAGES.get(code, "")

    def render(tpl: Template, r: _Renderer) -> str:
        text = r.param(tpl, 1) or r.param(tpl, "text")
        if not text:
            return ""
        out = f"{language}: {text}" if language else text
        translit = r.param(tpl, "translit") or r.param(tpl, 2)
        if translit:
            out += f", translit. {translit}"
        translation = r.param(tpl, "lit") or r.param(tpl, "trans")
        if translation:
            out += f", lit. '{translation}'"
        return out
    return render


def _lang(tpl: Template, r: _Renderer) -> str:
    return r.param(tpl, 2) or r.param(tpl, "text")


def _nihongo(tpl: Template, r: _Renderer) -> str:
    """{{nihongo|English|漢字|rōmaji|extra}} -> English (Japanese: 漢字, Hepburn: rōmaji)."""
    english, kanji, romaji = (r.param(tpl, i) for i in (1, 2, 3))
    extra = r.param(tpl, 4)
    parts = []
    if kanji:
        parts.append(f"Japanese: {kanji}")
    if romaji and english:
        parts.append(f"Hepburn: {romaji}")
    if extra:
        parts.append(extra)
    head = english or romaji
    if not parts:
        return head
    inside = ", ".join(parts)
    return f"{head} ({inside})" if head else inside


def _ipa_xx(code: str) -> TemplateRenderer:
    """{{IPA-fr|kʁak|...}} -> French pronunciation: [kʁak]."""
    language = _LANGUAGES.get(code, "")

    def render(tpl: Template, r: _Renderer) -> str:
        text = _first(tpl, r)
        if not text:
            return ""
        return f"{language} pronunciation: [{text}]" if language else f"[{text}]"
    return render


def _langx(tpl: Template, r: _Renderer) -> str:
    """{{langx|fr|texte}} -> French: texte (the newer form of {{lang-fr|texte}})."""
    pos = r.positional(tpl)
    if len(pos) < 2:
        return ""
    language = _LANGUAGES.get(pos[0].lower(), "")
    text = pos[1]
    return f"{language}: {text}" if language else text


def _chem(tpl: Template, r: _Renderer) -> str:
    """{{chem|H|2|O}} -> H2O."""
    return "".join(r.positional(tpl))


def _isbn(tpl: Template, r: _Renderer) -> str:
    pos = [p for p in r.positional(tpl) if p]
    return "ISBN " + ", ".join(pos) if pos else ""


def _times_ten(tpl: Template, r: _Renderer) -> str:
    """{{e|5}} -> ×105 (the superscript flattened, as in WikiText)."""
    exponent = _first(tpl, r)
    return f"×10{exponent}" if exponent else ""


def _ipac_en(tpl: Template, r: _Renderer) -> str:
    keys = {"lang", "local", "pron", "ipa", "us", "uk", "also", "audio", "icon"}
    parts = [p for p in r.positional(tpl) if p and p.lower() not in keys]
    return "/" + "".join(parts) + "/" if parts else ""


def _ipa(tpl: Template, r: _Renderer) -> str:
    return _first(tpl, r)


def _frac(tpl: Template, r: _Renderer) -> str:
    pos = r.positional(tpl)
    if len(pos) >= 3:
        return f"{pos[0]} {pos[1]}\u2044{pos[2]}"
    if len(pos) == 2:
        return f"{pos[0]}\u2044{pos[1]}"
    if len(pos) == 1:
        return f"1\u2044{pos[0]}"
    return ""


def _sortname(tpl: Template, r: _Renderer) -> str:
    first, last = r.param(tpl, 1), r.param(tpl, 2)
    return f"{first} {last}".strip()


_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December"]


def _format_date(year: str, month: str = "", day: str = "", df: bool = False) -> str:
    year, month, day = year.strip(), month.strip(), day.strip()
    if not year:
        return ""
    try:
        m = _MONTHS[int(month) - 1] if month else ""
    except (ValueError, IndexError):
        m = month
    try:
        d = str(int(day)) if day else ""
    except ValueError:
        d = day
    if m and d:
        return f"{d} {m} {year}" if df else f"{m} {d}, {year}"
    if m:
        return f"{m} {year}"
    return year


def _is_df(tpl: Template, r: _Renderer) -> bool:
    return (r.param(tpl, "df") or r.param(tpl, "day first") or "").lower() in ("y", "yes", "1", "true")


def _date_template(offset: int = 0) -> TemplateRenderer:
    """start date / birth date / ...: year, month, day from positional ``offset``."""
    def render(tpl: Template, r: _Renderer) -> str:
        pos = [p for p in r.positional(tpl) if p.isdigit()]
        values = (pos[offset:offset + 3] + ["", "", ""])[:3]
        return _format_date(*values, df=_is_df(tpl, r))
    return render


def _death_date_and_age(tpl: Template, r: _Renderer) -> str:
    pos = r.positional(tpl)
    pos = (pos + [""] * 6)[:6]
    death = _format_date(pos[0], pos[1], pos[2], df=_is_df(tpl, r))
    try:
        y1, m1, d1, y2, m2, d2 = (int(x) if x else 0 for x in pos)
        age = y1 - y2 - ((m1, d1) < (m2, d2))
        return f"{death} (aged {age})"
    except ValueError:
        return death


def _as_of(tpl: Template, r: _Renderer) -> str:
    pos = r.positional(tpl)
    pos = (pos + ["", "", ""])[:3]
    date = _format_date(pos[0], pos[1], pos[2], df=_is_df(tpl, r))
    word = "as of" if (r.param(tpl, "lc") or "").lower() in ("y", "yes") else "As of"
    if r.param(tpl, "since"):
        word = "since" if word == "as of" else "Since"
    return f"{word} {date}" if date else word


def _circa(tpl: Template, r: _Renderer) -> str:
    year = _first(tpl, r)
    return f"c. {year}" if year else "c."


def _ship(prefix: str | None = None) -> TemplateRenderer:
    """{{ship|HMS|Dreadnought|1906}} -> HMS Dreadnought (1906); {{HMS|Dreadnought|1906}};
    the optional display code picks parts (1: prefix and name, 2: name, 3: name and id,
    5: prefix and name, 6: prefix and id)."""
    def render(tpl: Template, r: _Renderer) -> str:
        pos = r.positional(tpl)
        if prefix is None:
            pre, name, ident, code = (pos + ["", "", "", ""])[:4]
        else:
            (name, ident, code), pre = (pos + ["", "", ""])[:3], prefix
        with_id = f" ({ident})" if ident else ""
        parts = {"1": f"{pre} {name}", "2": name, "3": f"{name}{with_id}",
                 "5": f"{pre} {name}", "6": f"{pre}{with_id}"}
        return parts.get(code, f"{pre} {name}{with_id}").strip()
    return render


def _currency(symbol: str) -> TemplateRenderer:
    return lambda tpl, r: f"{symbol}{_first(tpl, r)}"


def _val(tpl: Template, r: _Renderer) -> str:
    value = _first(tpl, r)
    unit = r.param(tpl, "u") or r.param(tpl, "ul")
    err = _second(tpl, r)
    out = value
    if err:
        out += f" ± {err}"
    return f"{out} {unit}".strip()


# ---- {{convert}} -----------------------------------------------------------------------
# unit code -> (dimension, factor to SI base, singular name, plural name, symbol)
_UNITS: dict[str, tuple[str, float, str, str, str]] = {}


def _unit(codes: str, dim: str, factor: float, singular: str, plural: str, symbol: str) -> None:
    for code in codes.split():
        _UNITS[code] = (dim, factor, singular, plural, symbol)


_unit("m metre meter metres meters", "length", 1.0, "metre", "metres", "m")
_unit("km kilometre kilometer kilometres kilometers", "length", 1000.0, "kilometre", "kilometres", "km")
_unit("cm centimetre centimeter", "length", 0.01, "centimetre", "centimetres", "cm")
_unit("mm millimetre millimeter", "length", 0.001, "millimetre", "millimetres", "mm")
_unit("mi mile miles", "length", 1609.344, "mile", "miles", "mi")
_unit("ft foot feet", "length", 0.3048, "foot", "feet", "ft")
_unit("in inch inches", "length", 0.0254, "inch", "inches", "in")
_unit("yd yard yards", "length", 0.9144, "yard", "yards", "yd")
_unit("nmi", "length", 1852.0, "nautical mile", "nautical miles", "nmi")
_unit("km2 sqkm", "area", 1e6, "square kilometre", "square kilometres", "km2")
_unit("m2 sqm", "area", 1.0, "square metre", "square metres", "m2")
_unit("sqmi mi2", "area", 2589988.110336, "square mile", "square miles", "sq mi")
_unit("sqft ft2", "area", 0.09290304, "square foot", "square feet", "sq ft")
_unit("ha hectare hectares", "area", 1e4, "hectare", "hectares", "ha")
_unit("acre acres", "area", 4046.8564224, "acre", "acres", "acres")
_unit("kg kilogram kilograms", "mass", 1.0, "kilogram", "kilograms", "kg")
_unit("g gram grams", "mass", 0.001, "gram", "grams", "g")
_unit("t tonne tonnes", "mass", 1000.0, "tonne", "tonnes", "t")
_unit("lb pound pounds", "mass", 0.45359237, "pound", "pounds", "lb")
_unit("oz ounce", "mass", 0.028349523125, "ounce", "ounces", "oz")
_unit("LT longton", "mass", 1016.0469088, "long ton", "long tons", "long tons")
_unit("ST shortton", "mass", 907.18474, "short ton", "short tons", "short tons")
_unit("km/h kph", "speed", 1 / 3.6, "kilometre per hour", "kilometres per hour", "km/h")
_unit("mph", "speed", 0.44704, "mile per hour", "miles per hour", "mph")
_unit("kn knot knots kt", "speed", 1852 / 3600, "knot", "knots", "kn")
_unit("m/s", "speed", 1.0, "metre per second", "metres per second", "m/s")
_unit("ft/s", "speed", 0.3048, "foot per second", "feet per second", "ft/s")
_unit("l L litre liter", "volume", 0.001, "litre", "litres", "l")
_unit("m3", "volume", 1.0, "cubic metre", "cubic metres", "m3")
_unit("cuft ft3", "volume", 0.028316846592, "cubic foot", "cubic feet", "cu ft")
_unit("USgal", "volume", 0.003785411784, "US gallon", "US gallons", "US gal")
_unit("impgal", "volume", 0.00454609, "imperial gallon", "imperial gallons", "imp gal")
_unit("cuft/s ft3/s", "flow", 0.028316846592, "cu ft/s", "cu ft/s", "cu ft/s")
_unit("m3/s", "flow", 1.0, "m3/s", "m3/s", "m3/s")
_unit("MT Mt", "mass", 1e9, "megatonne", "megatonnes", "Mt")
_unit("long cwt", "mass", 50.80234544, "long hundredweight", "long hundredweight", "long cwt")
_unit("km3", "volume", 1e9, "cubic kilometre", "cubic kilometres", "km3")
_unit("cumi mi3", "volume", 4168181825.440579, "cubic mile", "cubic miles", "cu mi")
_unit("hp", "power", 745.69987158227022, "horsepower", "horsepower", "hp")
_unit("shp", "power", 745.69987158227022, "shaft horsepower", "shaft horsepower", "shp")
_unit("ihp", "power", 745.69987158227022, "indicated horsepower", "indicated horsepower", "ihp")
_unit("kW", "power", 1000.0, "kilowatt", "kilowatts", "kW")
_unit("MW", "power", 1e6, "megawatt", "megawatts", "MW")
_unit("C °C", "temperature", 1.0, "°C", "°C", "°C")
_unit("F °F", "temperature", 1.0, "°F", "°F", "°F")
_unit("K", "temperature", 1.0, "K", "K", "K")
_unit("inHg", "pressure", 3386.389, "inch of mercury", "inches of mercury", "inHg")
_unit("mbar hPa", "pressure", 100.0, "millibar", "millibars", "mbar")

_DEFAULT_OUTPUT = {
    "m": "ft", "km": "mi", "cm": "in", "mm": "in", "mi": "km", "ft": "m", "in": "cm",
    "yd": "m", "nmi": "km mi", "km2": "sqmi", "m2": "sqft", "sqmi": "km2", "sqft": "m2",
    "ha": "acre", "acre": "ha", "kg": "lb", "g": "oz", "t": "LT", "lb": "kg", "oz": "g",
    "LT": "t", "ST": "t", "km/h": "mph", "mph": "km/h", "kn": "km/h mph", "m/s": "km/h mph",
    "ft/s": "m/s", "cuft/s": "m3/s", "m3/s": "cuft/s", "MT": "ST", "Mt": "ST",
    "long cwt": "kg", "km3": "cumi", "cumi": "km3", "l": "USgal", "L": "USgal", "m3": "cuft",
    "cuft": "m3", "USgal": "l",
    "impgal": "l", "hp": "kW", "shp": "kW", "ihp": "kW", "kW": "hp", "MW": "hp",
    "C": "F", "F": "C", "K": "C", "inHg": "mbar", "mbar": "inHg", "hPa": "inHg",
    "metre": "ft", "meter": "ft", "kilometre": "mi", "kilometer": "mi", "mile": "km",
    "miles": "km", "foot": "m", "feet": "m", "inch": "cm", "knot": "km/h mph", "knots": "km/h mph",
    "kt": "km/h mph", "kph": "mph", "°C": "°F", "°F": "°C", "acres": "ha", "hectare": "acre",
    "hectares": "acre", "tonne": "LT", "tonnes": "LT", "pound": "kg", "pounds": "kg",
    "kilogram": "lb", "kilograms": "lb", "sqkm": "sqmi", "sqm": "sqft", "mi2": "km2",
    "ft2": "m2", "litre": "USgal", "liter": "USgal", "ft3": "m3",
}
_RANGE_WORDS = {"to": " to ", "-": "–", "–": "–", "and": " and ", "or": " or ",
                "x": " × ", "by": " by ", "to(-)": " to ", "+/-": " ± ", "&": " & ",
                "and(-)": " and ", "or(-)": " or "}
_NUMBER = re.compile(r"^[-+−]?(?:\d+(?:,\d{3})*(?:\.\d*)?|\.\d+)(?:e[-+]?\d+)?$")


def _parse_number(text: str) -> tuple[float, int] | None:
    """(value, precision) where precision = decimal places, negative for trailing zeros."""
    text = text.strip().replace("−", "-")
    if not _NUMBER.match(text):
        return None
    plain = text.replace(",", "").lstrip("+")
    value = float(plain)
    if "e" in plain.lower():
        return value, 2
    digits = plain.lstrip("-")
    if "." in digits:
        return value, len(digits.split(".")[1])
    stripped = digits.rstrip("0")
    if not stripped:
        return value, 0
    return value, -(len(digits) - len(stripped))


def _format_number(value: float, precision: int) -> str:
    if precision < 0:
        value = round(value, precision)
        precision = 0
    text = f"{value:,.{precision}f}"
    if text.startswith("-"):
        text = "−" + text[1:]
    return text


def _display_input(text: str) -> str:
    """The input number as Wikipedia shows it (thousands separators added)."""
    text = text.strip()
    parsed = _parse_number(text)
    if parsed is None:
        return text
    value, precision = parsed
    return _format_number(value, max(precision, 0))


def _convert_value(value: float, src: str, dst: str) -> float:
    dim = _UNITS[src][0]
    if dim == "temperature":
        def to_kelvin(v: float, u: str) -> float:
            u = u.lstrip("°")
            return v + 273.15 if u == "C" else (v - 32) * 5 / 9 + 273.15 if u == "F" else v

        k = to_kelvin(value, src)
        d = dst.lstrip("°")
        return k - 273.15 if d == "C" else (k - 273.15) * 9 / 5 + 32 if d == "F" else k
    return value * _UNITS[src][1] / _UNITS[dst][1]


def _output_precision(value: float, precision: int, src: str, dst: str, out: float) -> int:
    """Wikipedia's default output rounding (Help:Convert): the input's precision shifted
    by the conversion's magnitude (plus log10 2), but at least two significant figures
    (temperatures: three significant figures in kelvin)."""
    fudge = 1e-14
    if _UNITS[src][0] == "temperature":
        kelvin = abs(_convert_value(value, src, "K"))
        minprec = 2 if kelvin < 1e-8 else 2 - math.floor(math.log10(kelvin) + fudge)
        adjust = 0.0
    else:
        if value == 0 or out == 0:
            return 0
        adjust = math.log10(abs(value / out)) + math.log10(2)
        minprec = 1 - math.floor(math.log10(abs(out)) + fudge)
    return min(max(math.floor(precision + adjust), minprec), 8)


def _feet_inches(metres_or_feet: float, unit: str) -> str:
    """A length as ``X ft Y in`` rounded to the inch (the ``ftin`` output unit)."""
    inches = round(abs(_convert_value(metres_or_feet, unit, "in")))
    feet, inches = divmod(inches, 12)
    sign = "−" if metres_or_feet < 0 else ""
    return f"{sign}{feet:,} ft {inches} in" if inches else f"{sign}{feet:,} ft"


def _american(name: str, us: bool) -> str:
    return name.replace("metre", "meter").replace("litre", "liter") if us else name


def _convert(tpl: Template, r: _Renderer) -> str:
    """{{convert}} / {{cvt}}: ``6.1 kilometres (3.8 mi)``; ranges (``to``, ``-``, ``x``,
    ...), ``abbr``, ``adj``, ``disp``/``order=flip``, ``sp=us``, a positional precision
    and the ``ftin`` output are supported; unknown units show the input only."""
    pos = r.positional(tpl)
    if not pos:
        return ""
    values: list[str] = [pos[0]]
    seps: list[str] = []
    i = 1
    while i + 1 < len(pos) and pos[i] in _RANGE_WORDS and _parse_number(pos[i + 1]) is not None:
        seps.append(pos[i])
        values.append(pos[i + 1])
        i += 2
    unit = pos[i] if i < len(pos) else ""
    rest = pos[i + 1:]
    # composite input {{convert|5|ft|6|in|m}}: (sub-unit number text, its unit row, value)
    composite: tuple[str, tuple, float] | None = None
    if (len(values) == 1 and len(rest) >= 2 and _parse_number(rest[0]) is not None
            and rest[1] in _UNITS and unit in _UNITS and _UNITS[rest[1]][0] == _UNITS[unit][0]
            and _UNITS[rest[1]][0] != "temperature"):
        sub_value, sub_unit = _parse_number(rest[0]), rest[1]
        whole = _parse_number(values[0])
        if whole is not None and sub_value is not None:
            total = whole[0] + sub_value[0] * _UNITS[sub_unit][1] / _UNITS[unit][1]
            sub_info = _UNITS[sub_unit]
            composite = (rest[0], sub_info, sub_value[0])
            values = [repr(total)]
            rest = rest[2:]
    out_unit = ""
    explicit_precision: int | None = None
    suffix = ""
    for item in rest:
        if re.fullmatch(r"-?\d+", item) and explicit_precision is None:
            explicit_precision = int(item)
        elif not out_unit and item and not item.startswith("-") and explicit_precision is None:
            out_unit = item
        elif item.startswith("-") and not suffix:
            suffix = item
    abbr = (r.param(tpl, "abbr") or ("on" if template_key(str(tpl.name)) == "cvt" else "")).lower()
    adj = (r.param(tpl, "adj") or "").lower()
    disp = (r.param(tpl, "disp") or "").lower()
    if (r.param(tpl, "order") or "").lower() == "flip":
        disp = "flip"
    us = (r.param(tpl, "sp") or "").lower() == "us"
    sigfig = r.param(tpl, "sigfig")
    shown = [_display_input(v) for v in values]
    number_text = shown[0] + "".join(_RANGE_WORDS[s] + v for s, v in zip(seps, shown[1:]))
    info = _UNITS.get(unit)
    if info is None:
        return f"{number_text} {unit}".strip()
    parsed = [_parse_number(v) for v in values]
    if composite:
        whole_text = _display_input(pos[0])
        sub_number, sub_info, sub_value = composite
        whole_value = _parse_number(pos[0])[0]
        main = info[4] if abbr in ("on", "in", "values", "unit") else (info[2] if whole_value == 1 else info[3])
        sub = sub_info[4] if abbr in ("on", "in", "values", "unit") else (
            sub_info[2] if sub_value == 1 else sub_info[3])
        number_text = f"{whole_text} {main} {_display_input(sub_number)}"
        parsed = [(parsed[0][0], 1 + (_parse_number(sub_number) or (0, 0))[1])]
    if any(p is None for p in parsed):
        return f"{number_text} {unit}".strip()
    first_value = parsed[0][0]
    adjective = adj in ("on", "yes", "y", "mid")
    plural = not (len(values) == 1 and abs(first_value) == 1) and not adjective
    in_symbol = abbr in ("on", "in", "values", "unit")
    in_name = info[4] if in_symbol else _american(info[3] if plural else info[2], us)
    if composite:
        in_text = f"{number_text} {sub}"
    elif adjective and not in_symbol:
        in_text = f"{number_text}-{_american(info[2], us)}{suffix if adj == 'mid' else ''}"
    else:
        in_text = f"{number_text} {in_name}"
    out_codes = out_unit.split() if out_unit else _DEFAULT_OUTPUT.get(unit, "").split()
    out_symbol = abbr not in ("off", "in")
    outputs: list[str] = []
    for code in out_codes:
        if code == "ftin" and info[0] == "length":
            outputs.append(" to ".join(_feet_inches(p[0], unit) for p in parsed))
            continue
        if code not in _UNITS or _UNITS[code][0] != info[0]:
            continue
        converted = [_convert_value(p[0], unit, code) for p in parsed]
        if sigfig.isdigit() and int(sigfig) > 0:
            prec = max(int(sigfig) - 1 - math.floor(math.log10(abs(v))) if v else 0
                       for v in converted)
        elif explicit_precision is not None:
            prec = explicit_precision
        else:
            prec = max(_output_precision(p[0], p[1], unit, code, v) for p, v in zip(parsed, converted))
        texts = [_format_number(v, prec) for v in converted]
        out_text = texts[0] + "".join(_RANGE_WORDS[s] + v for s, v in zip(seps, texts[1:]))
        single = len(texts) == 1 and texts[0] in ("1", "1.0")
        out_name = _UNITS[code][4] if out_symbol else _american(
            _UNITS[code][2] if single else _UNITS[code][3], us)
        outputs.append(f"{out_text} {out_name}")
    if not outputs:
        return in_text
    if disp in ("out", "output only"):
        return outputs[0]
    if disp == "or":
        return f"{in_text} or {' or '.join(outputs)}"
    if disp == "flip":
        return f"{outputs[0]} ({in_text})"
    return f"{in_text} ({'; '.join(outputs)})"


TEMPLATE_RENDERERS: dict[str, TemplateRenderer] = {
    # units and numbers
    "convert": _convert, "cvt": _convert, "convert/2": _convert,
    "val": _val, "frac": _frac, "fraction": _frac, "sfrac": _frac,
    "us$": _currency("US$"), "usd": _currency("US$"), "£": _currency("£"),
    "gbp": _currency("£"), "€": _currency("€"), "euro": _currency("€"),
    "inr": _currency("₹"), "a$": _currency("A$"), "ca$": _currency("CA$"),
    # languages and pronunciation
    "lang": _lang, "transl": _last, "transliteration": _last, "translit": _last,
    "ipa": _ipa, "ipac-en": _ipac_en, "ipac": _ipac_en, "ipa-all": _ipa,
    "nihongo": _nihongo, "nihongo2": _first, "nihongo3": _nihongo, "korean": _first,
    "zh": _join_positional, "native name": _second, "lang-en": _lang_xx("en"),
    # text formatting wrappers
    "abbr": _first, "abbrlink": _first, "nowrap": _first, "nobr": _first,
    "small": _first, "smaller": _first, "big": _first, "larger": _first,
    "resize": _last, "smallcaps": _first, "sc": _first, "small caps": _first,
    "em": _first, "strong": _first, "nobold": _first, "noitalic": _first,
    "sup": _first, "sub": _first, "sortname": _sortname, "sort": _second,
    "visible anchor": _first, "vanchor": _first, "keypress": _first,
    "lang-rtl": _second, "script": _second, "transl-": _last, "unicode": _first,
    "flag": _first, "flagcountry": _first, "flagu": _first, "tooltip": _first,
    "hover title": _second, "lit": lambda tpl, r: f"lit. '{_first(tpl, r)}'",
    "ship": _ship(), "hms": _ship("HMS"), "uss": _ship("USS"), "sms": _ship("SMS"),
    "hmas": _ship("HMAS"), "hmcs": _ship("HMCS"), "hmnzs": _ship("HMNZS"),
    "ins": _ship("INS"), "rms": _ship("RMS"), "ss": _ship("SS"), "usns": _ship("USNS"),
    "usat": _ship("USAT"), "ncs": _ship("NCS"), "mv": _ship("MV"), "hnlms": _ship("HNLMS"),
    "jds": _ship("JDS"), "sclass": _first, "sclass-": _first, "sclass2": _first,
    "circa": _circa, "c.": _circa, "ca.": _circa,
    # block quotations survive in WikiText; floating boxes ({{quote box}}, {{cquote}},
    # pull quotes: tables or sidebars in the HTML) do not: measured on the pairs
    "quote": _block, "blockquote": _block, "quotation": _block, "poemquote": _block,
    "poem quote": _block,
    # punctuation and spacing templates
    "'": _constant(APOSTROPHE), "' \"": _constant(APOSTROPHE + '"'),
    "\" '": _constant('"' + APOSTROPHE), "'s": _constant(APOSTROPHE + "s"),
    "nbsp": _constant(" "), "spaces": _constant(" "),
    "ndash": _constant("–"), "mdash": _constant("—"), "snd": _constant(" – "),
    "spnd": _constant(" – "), "spaced ndash": _constant(" – "), "spaced en dash": _constant(" – "),
    "sndash": _constant(" – "), "dash": _constant("–"), "thinsp": _constant(" "),
    "zwsp": _constant(""), "okina": _constant("ʻ"), "shy": _constant(""),
    "·": _constant(" · "), "dot": _constant(" · "), "middot": _constant("·"),
    "en dash": _constant("–"), "em dash": _constant("—"), "sic": _constant(""),
    "!": _constant("|"), "=": _constant("="), "pipe": _constant("|"),
    # dates
    "start date": _date_template(), "end date": _date_template(),
    "birth date": _date_template(), "death date": _date_template(),
    "start date and age": _date_template(), "end date and age": _date_template(),
    "birth date and age": _date_template(), "bda": _date_template(),
    "death date and age": _death_date_and_age, "dda": _death_date_and_age,
    "film date": _date_template(), "release date": _date_template(),
    "dts": _date_template(), "date": _first, "as of": _as_of, "asof": _as_of,
    "birth year and age": _first, "death year and age": _first, "floruit": lambda t, r: f"fl. {_first(t, r)}",
    "fl.": lambda t, r: f"fl. {_first(t, r)}", "reign": lambda t, r: f"r. {_first(t, r)}",
    "r.": lambda t, r: f"r. {_first(t, r)}", "oldstyledate": _first,
    # math
    "math": _formula, "mvar": _formula, "tmath": _formula, "bigmath": _formula,
    "mathcal": _formula, "overline": _formula, "overset": _formula, "underset": _formula,
    "sqrt": _formula, "radic": _formula, "pi": _constant("π"),
}
TEMPLATE_RENDERERS.update({
    "nihongo": _nihongo, "nihongo3": _nihongo, "langx": _langx, "lang-x": _langx,
    "chem": _chem, "chem2": _first, "ce": _first, "isbn": _isbn, "e": _times_ten,
    "mlby": _first, "mlb year": _first, "by": _first, "year": _first, "tlit": _second,
    "solar mass": _constant("M☉"), "solar radius": _constant("R☉"),
    "solar luminosity": _constant("L☉"), "jupiter mass": _constant("MJ"),
    "earth mass": _constant("M🜨"), "jupiter radius": _constant("RJ"),
    "music": _first, "aud": _currency("A$"), "nzd": _currency("NZ$"), "cad": _currency("CA$"),
    "yen": _currency("¥"), "jpy": _currency("¥"), "inrconvert": _currency("₹"),
    # more punctuation and spacing spellings (measured: Charmbracelet {{emdash}}, {{sp}})
    "emdash": _constant("—"), "endash": _constant("–"), "sp": _constant(" "),
    "space": _constant(" "),
    # external-link templates that WikiText kept as text in surviving link lists
    # (Alkan: "Scherzo Focoso , Op. 34 on YouTube , played by ..."; Finkelstein, Federer:
    # "... at the Internet Movie Database"; Alkan: "Free scores by Alkan at the ...")
    "youtube": _youtube, "imslp": _imslp,
    "imdb name": _imdb, "imdb title": _imdb,
})

# Parser functions (``{{formatnum:12000}}``), keyed by the name before the colon; the
# renderer gets the rendered argument, the template and the renderer.
PARSER_FUNCTIONS: dict[str, Callable[[str, Template, _Renderer], str]] = {
    "formatnum": _formatnum,
    "uc": lambda arg, tpl, r: arg.upper(), "lc": lambda arg, tpl, r: arg.lower(),
    "ucfirst": lambda arg, tpl, r: arg[:1].upper() + arg[1:],
    "lcfirst": lambda arg, tpl, r: arg[:1].lower() + arg[1:],
}

# Families of templates sharing a prefix: ``lang-fr``, ``IPA-de``. The factory gets the
# part after the prefix and returns a renderer (or None: drop).
TEMPLATE_FAMILIES: dict[str, Callable[[str], TemplateRenderer | None]] = {
    "lang-": _lang_xx,
    "ipa-": _ipa_xx,
}
