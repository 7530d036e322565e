"""The one template registry: every renderer table merged, each key registered once.

Lookup order for a template key: the exact key (:data:`TEMPLATE_RENDERERS`), then a parser
function by the name before a colon (``{{formatnum:12000}}``), then a family by the prefix
before the first hyphen (``lang-fr``, ``IPA-de``); anything else is dropped.
"""

from __future__ import annotations

from . import convert, languages, templates
from .template_api import RendererTable, TemplateRenderer

PARSER_FUNCTIONS = templates.PARSER_FUNCTIONS
TEMPLATE_FAMILIES = languages.FAMILIES


def merge_tables(*tables: RendererTable) -> dict[str, TemplateRenderer]:
    """One dict from renderer tables; a key given twice is an error."""
    merged: dict[str, TemplateRenderer] = {}
    for table in tables:
        for key, renderer in table:
            if key in merged:
                raise ValueError(f"template {key!r} registered twice")
            merged[key] = renderer
    return merged


TEMPLATE_RENDERERS: dict[str, TemplateRenderer] = merge_tables(
    convert.TEMPLATES, languages.TEMPLATES, templates.TEMPLATES
)


def lookup(key: str) -> TemplateRenderer | None:
    """The renderer of a template key (not a parser function), or None (drop)."""
    renderer = TEMPLATE_RENDERERS.get(key)
    if renderer is not None or "-" not in key:
        return renderer
    prefix, rest = key.split("-", 1)
    family = TEMPLATE_FAMILIES.get(prefix + "-")
    return family(rest) if family is not None else None
