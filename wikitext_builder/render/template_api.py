"""What a template renderer is given, and the helpers the template modules share.

A template renderer is ``(template, walker) -> str``: it gets the parsed
:class:`~mwparserfromhell.nodes.Template` and the :class:`NodeRenderer` walking the
article (for the rendered text of parameters and the page title). It returns plain text
with the sentinels of :mod:`.markers`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from mwparserfromhell.nodes import Template

from .markers import WHITESPACE


class NodeRenderer(Protocol):
    """The part of the node walker that template renderers use."""

    title: str

    def param(self, tpl: Template, name: str | int, default: str = "") -> str:
        """The rendered, stripped value of a parameter ('' when absent)."""

    def positional(self, tpl: Template) -> list[str]:
        """The rendered, stripped positional parameters, in order."""


TemplateRenderer = Callable[[Template, NodeRenderer], str]
# a table of renderers: (template key, renderer) pairs, keys normalized by template_key
RendererTable = list[tuple[str, TemplateRenderer]]


def template_key(name: str) -> str:
    """Normalize a template name: case-folded, spaces for underscores, no ``Template:``."""
    name = WHITESPACE.sub(" ", name.replace("_", " ")).strip()
    if name.lower().startswith("template:"):
        name = name[9:].strip()
    return name.lower()


def entries(names: str, renderer: TemplateRenderer) -> RendererTable:
    """Table rows giving ``renderer`` to each of the ``|``-separated template names."""
    return [(template_key(name), renderer) for name in names.split("|")]


def first(tpl: Template, r: NodeRenderer) -> str:
    """The first positional parameter."""
    pos = r.positional(tpl)
    return pos[0] if pos else ""


def second(tpl: Template, r: NodeRenderer) -> str:
    """The second positional parameter."""
    pos = r.positional(tpl)
    return pos[1] if len(pos) > 1 else ""


def last(tpl: Template, r: NodeRenderer) -> str:
    """The last non-empty positional parameter."""
    pos = [p for p in r.positional(tpl) if p]
    return pos[-1] if pos else ""


def constant(text: str) -> TemplateRenderer:
    """A renderer printing ``text`` whatever the parameters."""
    return lambda tpl, r: text


def is_yes(value: str) -> bool:
    """A template flag set on (``y``, ``yes``, ``on``, ``1``, ``true``)."""
    return value.strip().lower() in ("y", "yes", "on", "1", "true")
