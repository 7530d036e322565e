"""Walking the mwparserfromhell tree: each node becomes plain text with sentinels."""

from __future__ import annotations

import html
import re

from mwparserfromhell.nodes import (
    Argument,
    Comment,
    ExternalLink,
    Heading,
    HTMLEntity,
    Tag,
    Template,
    Text,
    Wikilink,
)
from mwparserfromhell.wikicode import Wikicode

from .markers import (
    APOSTROPHE,
    BLOCK_FORMULA,
    FORMULA,
    INDENT,
    LIST_ITEM,
    PARA_BREAK,
    TEMPLATE_GAP,
    WHITESPACE,
    protect_apostrophes,
    verse,
)
from .registry import PARSER_FUNCTIONS, lookup
from .template_api import template_key

# Tags whose whole content is dropped.
DROPPED_TAGS = frozenset(
    {
        "ref",
        "references",
        "gallery",
        "table",
        "timeline",
        "imagemap",
        "graph",
        "mapframe",
        "maplink",
        "templatestyles",
        "score",
        "includeonly",
        "syntaxhighlight",
        "source",
        "pre",
        "hiero",
        "categorytree",
        "inputbox",
        "charinsert",
        "indicator",
        "section",
        "caption",
        "tr",
        "td",
        "th",
        "style",
        "script",
        "ol",
        "ul",
    }
)
FORMULA_TAGS = frozenset({"math", "chem", "ce"})
BREAK_TAGS = frozenset({"br", "hr", "p"})
BLOCK_TAGS = frozenset({"blockquote", "div", "center"})

# Link namespaces whose links are removed (files, categories) or shown (text).
DROPPED_NAMESPACES = frozenset({"file", "image", "media", "category"})
INLINE_INTERWIKI = frozenset(
    {
        "wikt",
        "wiktionary",
        "s",
        "wikisource",
        "q",
        "wikiquote",
        "b",
        "wikibooks",
        "n",
        "wikinews",
        "v",
        "wikiversity",
        "voy",
        "wikivoyage",
        "commons",
        "c",
        "m",
        "meta",
        "d",
        "wikidata",
        "species",
        "w",
        "wikipedia",
        "mw",
        "mediawiki",
        "wp",
        "en",
        "simple",
        "oldwikisource",
        "iarchive",
        "doi",
        "arxiv",
        "special",
        "portal",
        "help",
        "template",
        "user",
        "talk",
        "module",
    }
)
_LANGUAGE_PREFIX = re.compile(r"^[a-z]{2,3}(?:-[a-z0-9]+)*$")
# a lone apostrophe at either end of a link's text: text, never quote markup, because
# MediaWiki reads quote markup before links (''[[The Times They Are a-Changin']]'' keeps
# its apostrophe: Bob Dylan, dev pair)
_EDGE_APOSTROPHES = re.compile(r"^'(?!')|(?<!')'$")


class NodeWalker:
    """Turns a Wikicode tree into plain text with sentinels; one per article."""

    def __init__(self, title: str) -> None:
        self.title = title

    def render(self, code: Wikicode | None) -> str:
        """The text of a Wikicode fragment."""
        if code is None:
            return ""
        return "".join(self.node(n) for n in code.nodes)

    def node(self, node) -> str:  # noqa: C901 - a flat dispatch on node types
        """The text of one node."""
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
                return protect_apostrophes(node.normalize())  # &#39; is text, as in MediaWiki
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
            if prefix in DROPPED_NAMESPACES:
                return "" if not leading_colon else self._link_text(link, target)
            if prefix not in INLINE_INTERWIKI and _LANGUAGE_PREFIX.match(prefix):
                if not leading_colon:
                    return ""  # an interlanguage link
        return _EDGE_APOSTROPHES.sub(APOSTROPHE, self._link_text(link, target))

    def _link_text(self, link: Wikilink, target: str) -> str:
        if link.text is not None:
            text = self.render(link.text)
            if text.replace(TEMPLATE_GAP, "").strip():
                return text
            # the pipe trick [[Foo (bar)|]] shows "Foo"
            target = re.sub(r"\s*\([^)]*\)\s*$", "", target)
            target = target.split(":", 1)[-1] if ":" in target else target
        if target.startswith("#"):
            target = target[1:]
        return html.unescape(target.replace("_", " "))

    def template(self, tpl: Template) -> str:
        key = template_key(str(tpl.name))
        renderer = lookup(key)
        if renderer is None and ":" in key:
            function = PARSER_FUNCTIONS.get(key.split(":", 1)[0].strip())
            if function is not None:
                # {{formatnum:12000}}: the argument is the rest of the name (may hold templates)
                argument = self.render(tpl.name).replace(TEMPLATE_GAP, "").split(":", 1)[1].strip()
                return function(argument, tpl, self)
        return renderer(tpl, self) if renderer is not None else TEMPLATE_GAP

    def tag(self, tag: Tag) -> str:
        name = str(tag.tag).strip().lower()
        if tag.wiki_markup and name in ("li", "dt", "dd"):
            return INDENT if name == "dd" else LIST_ITEM
        if name in DROPPED_TAGS:
            return ""
        if name in FORMULA_TAGS:
            display = tag.has("display") and str(tag.get("display").value).strip().lower() == "block"
            return BLOCK_FORMULA if display else FORMULA
        if name in BREAK_TAGS:
            return " " if name == "br" else PARA_BREAK
        if name == "nowiki":
            # <nowiki>'</nowiki> is a literal apostrophe (Cole Hamels, dev pair:
            # "the <nowiki>'</nowiki>''Phantastic Phour''<nowiki>'</nowiki>" reads "the ' ... '")
            return protect_apostrophes(html.unescape(str(tag.contents))) if tag.contents is not None else ""
        if name == "poem":
            return verse(self.render(tag.contents)) if tag.contents is not None else ""
        if name in BLOCK_TAGS:
            return PARA_BREAK + self.render(tag.contents) + PARA_BREAK
        if tag.self_closing or tag.contents is None:
            return ""
        return self.render(tag.contents)

    # -- what template renderers use (template_api.NodeRenderer) ---------------------------
    def param(self, tpl: Template, name: str | int, default: str = "") -> str:
        """The rendered, stripped value of a template parameter ('' when absent)."""
        key = str(name)
        if not tpl.has(key):
            return default
        return self._value(tpl.get(key).value)

    def positional(self, tpl: Template) -> list[str]:
        """The rendered, stripped positional parameters, in order."""
        return [self._value(p.value) for p in tpl.params if not p.showkey]

    def _value(self, value: Wikicode) -> str:
        """A parameter value's rendered text, whitespace collapsed (template gaps dropped)."""
        return WHITESPACE.sub(" ", self.render(value).replace(TEMPLATE_GAP, "")).strip()
