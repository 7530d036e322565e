"""One article: pre-strip, parse, walk section by section, lay out in WikiText form."""

from __future__ import annotations

import html
import re

import mwparserfromhell
from mwparserfromhell.nodes import Heading, Text
from mwparserfromhell.wikicode import Wikicode

from ..tokenize import format_heading, heading_tokens
from .layout import drop_markup_residue, paragraph_line, paragraphs, strip_quotes
from .markers import BLOCK_FORMULA, CONTROL_CHARS, FORMULA, INDENT, INVISIBLE, LIST_ITEM, WHITESPACE
from .prestrip import prestrip
from .walker import NodeWalker


class MarkupError(ValueError):
    """An article whose markup cannot be rendered. The message is one line, ``"TITLE: DETAIL"``;
    ``title`` and ``detail`` hold its two parts (a caller that names the article its own way
    reports ``detail``)."""

    def __init__(self, title: str, detail: str) -> None:
        self.title, self.detail = title, detail.replace("\n", " ")
        super().__init__(f"{title}: {self.detail}")

    def __reduce__(self) -> tuple[type[MarkupError], tuple[str, str]]:
        return type(self), (self.title, self.detail)


# Sections (by normalized heading) whose own text is removed; as in WikiText, their
# sub-sections (other headings) stay.
REMOVED_SECTIONS = frozenset(
    {
        "references",
        "reference",
        "notes",
        "note",
        "see also",
        "external links",
        "external link",
        "further reading",
        "bibliography",
        "sources",
        "source",
        "citations",
        "footnotes",
        "notes and references",
        "references and notes",
        "works cited",
        "literature cited",
        "cited sources",
        "cited works",
        "general references",
        "specific references",
        "endnotes",
        "explanatory notes",
        "sources and references",
        "references and sources",
        "notes and sources",
        "external links and references",
        "related articles",
        "links",
        "selected bibliography",
        "select bibliography",
        "further information",
        "notes and citations",
        "citations and notes",
        "references and further reading",
        "sources and further reading",
        "footnotes and references",
        "references and footnotes",
        "notes and further reading",
        "further reading and external links",
        "bibliography and further reading",
        "external links and further reading",
    }
)
# Other spellings of the same sections: every word a reference-section word, and one of
# them naming the kind ("Online sources", "Primary sources", "Other references"). Headings
# such as "Cultural references" or "Game notes" are kept, as in WikiText-2.
_REFERENCE_CORE = frozenset(
    {
        "references",
        "reference",
        "notes",
        "note",
        "citations",
        "citation",
        "footnotes",
        "sources",
        "source",
        "bibliography",
        "endnotes",
    }
)
_REFERENCE_WORDS = _REFERENCE_CORE | {
    "and",
    "further",
    "reading",
    "external",
    "links",
    "link",
    "see",
    "also",
    "works",
    "cited",
    "general",
    "specific",
    "literature",
    "explanatory",
    "selected",
    "select",
    "other",
    "additional",
    "related",
    "articles",
    "information",
    "online",
    "web",
    "sites",
    "websites",
    "resources",
    "primary",
    "secondary",
    "print",
    "book",
    "books",
    "list",
    "of",
}


def is_reference_section(heading: str) -> bool:
    """Whether WikiText drops the own text of a section with this heading."""
    normalized = WHITESPACE.sub(" ", heading).strip().strip(":").strip().lower()
    if normalized in REMOVED_SECTIONS:
        return True
    words = re.findall(r"[^\W_]+", normalized)
    return bool(words) and set(words) <= _REFERENCE_WORDS and not _REFERENCE_CORE.isdisjoint(words)


def _section_blocks(code: Wikicode) -> list[tuple[int, Wikicode | None, list]]:
    """Split the top-level node list into (level, heading title, nodes) sections."""
    sections: list[tuple[int, Wikicode | None, list]] = [(1, None, [])]
    for node in code.nodes:
        if isinstance(node, Heading):
            sections.append((node.level, node.title, []))
        else:
            sections[-1][2].append(node)
    return sections


def _check_parse(title: str, code: Wikicode) -> None:
    """Raise MarkupError for a ``{{`` that mwparserfromhell could not match (its text would
    leak); stray ``}}`` closers carry no text and are simply removed."""
    for node in code.nodes:
        if isinstance(node, Text) and ("{{" in node.value or "}}" in node.value):
            if "{{" in node.value:
                snippet = node.value[node.value.find("{{") :][:40].replace("\n", " ")
                raise MarkupError(title, f"unbalanced template markup near {snippet!r}")
            node.value = node.value.replace("}}", "")


def render_text(title: str, wikitext: str) -> list[tuple[int, str]]:
    """The cleaned article as ``(level, text)`` items: level 0 = paragraph,
    ``BLOCK_FORMULA`` paragraphs for display math, level >= 2 = headings."""
    if wikitext is None or not wikitext.strip():
        raise MarkupError(title, "empty article")
    # the sentinels used below are control characters: none may come from the input
    wikitext = CONTROL_CHARS.sub("", wikitext.replace("\r\n", "\n").replace("\r", "\n"))
    if re.match(r"\s*#redirect\b", wikitext, re.I):
        raise MarkupError(title, "the page is a redirect")
    try:
        code = mwparserfromhell.parse(prestrip(wikitext), skip_style_tags=True)
    except Exception as exc:  # mwparserfromhell's own ParserError and friends
        raise MarkupError(title, f"mwparserfromhell cannot parse the markup ({exc})") from exc
    _check_parse(title, code)
    walker = NodeWalker(title)
    items: list[tuple[int, str]] = []
    for level, heading, nodes in _section_blocks(code):
        if heading is not None:
            heading_text = WHITESPACE.sub(" ", INVISIBLE.sub("", walker.render(heading))).strip()
            heading_text = heading_text.replace(LIST_ITEM, " ").replace(INDENT, " ")
            heading_text = strip_quotes(drop_markup_residue(heading_text)).strip()
            if is_reference_section(heading_text):
                # WikiText removed the section's own text but kept its sub-sections
                # (e.g. "Video" under "Further reading"), often with empty bodies.
                continue
            items.append((level, heading_text))
        text = "".join(walker.node(n) for n in nodes)
        items.extend((0, p) for p in paragraphs(text))
    return items


def plain_title(title: str) -> str:
    """A page title as plain text. A real title holds no markup (MediaWiki forbids ``{}[]<>|`` in
    titles), but a title guessed from an article's lead can: a comment is dropped and a template
    gives its last positional parameter, its display text ("Sir Noël Peirce<!--YES-->
    Coward" is "Sir Noël Peirce Coward", "{{Audio|ru-El_Lissitzky.ogg|Lazar Markovich
    Lissitzky}}" is "Lazar Markovich Lissitzky"); entity references are decoded ("State
    Route&nbsp;213" is "State Route 213")."""
    code = mwparserfromhell.parse(CONTROL_CHARS.sub("", title or ""))
    for comment in code.filter_comments(recursive=False):
        code.remove(comment)
    for template in code.filter_templates(recursive=False):
        positional = [param for param in template.params if not param.showkey]
        code.replace(template, str(positional[-1].value) if positional else "")
    return WHITESPACE.sub(" ", html.unescape(str(code)).replace("\n", " ")).strip()


def render_article(title: str, wikitext: str) -> str:
    """The article in WikiText form (no ``<unk>`` mapping); raises :class:`MarkupError`.

    The title line and the section headings hold their text without the ``=`` signs at its ends
    (:func:`~wikitext_builder.tokenize.heading_tokens`): the format has no escape for them, and
    kept they would turn the title `` = = Evil = = `` into a section heading of the article before
    (an article too few counted; a heading before any title, an error of ``validate``, when it
    opens its split) and ``Evil =`` into a malformed heading. Dropping them keeps the article and
    every word of its title, where skipping it would lose a real article such as ``= (album)``;
    ``manifest.jsonl`` keeps the exact title. A title of nothing but ``=`` signs is empty."""
    title = plain_title(title)
    title_tokens = heading_tokens(title)
    if not title_tokens:
        raise MarkupError(repr(title), "empty title (nothing but '=' signs)" if title else "empty title")
    out = [" \n", format_heading(title_tokens, 1), " \n"]
    lines = 0
    for level, text in render_text(title, wikitext):
        if level:
            text = text.replace(FORMULA, " <formula> ").replace(BLOCK_FORMULA, " <formula> ")
            tokens = heading_tokens(text)
            if tokens:
                out.append(" \n")
                out.append(format_heading(tokens, min(level, 6)))
                out.append(" \n")
            continue
        line = paragraph_line(text)
        if line is not None:
            out.append(line)
            lines += 1
    if not lines:
        raise MarkupError(title, "no text left after cleaning")
    out.append(" \n")
    return "".join(out)
