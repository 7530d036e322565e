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
rendered through the one registry :data:`TEMPLATE_RENDERERS` (``convert``, ``lang``,
``nihongo``, dates, ...), every other template is dropped; refs, tables, galleries,
files, categories, interwiki links and comments are removed; wikilinks become their
text; ``<math>`` / ``{{math}}`` become ``<formula>``; reference-type sections
(References, Notes, See also, External links, ...) are removed; HTML entities are
decoded; surviving list items become ordinary paragraph lines.

Modules, by concern (each imports only modules listed before it):

* :mod:`.markers` -- sentinels of the intermediate text, whitespace classes, verse lines;
* :mod:`.template_api` -- what a template renderer gets, ``template_key``, shared helpers;
* :mod:`.convert` -- ``{{convert}}`` and its table of :class:`~.convert.Unit` records;
* :mod:`.languages` -- the language table, language, IPA and ``{{nihongo}}`` templates;
* :mod:`.templates` -- every other text-carrying template, and parser functions;
* :mod:`.registry` -- the merged template registry (a key registered twice is an error);
* :mod:`.walker` -- node walking (links, tags, entities, templates through the registry);
* :mod:`.prestrip` -- textual removal of comments, refs, tables and layout before parsing;
* :mod:`.layout` -- bold/italic quote markup, unmatched link and template markup, paragraphs,
  brackets, WikiText lines;
* :mod:`.article` -- sections, headings and the whole article.
"""

from .article import REMOVED_SECTIONS, MarkupError, is_reference_section, render_article, render_text
from .registry import TEMPLATE_RENDERERS
from .template_api import template_key

__all__ = [
    "MarkupError",
    "render_article",
    "render_text",
    "REMOVED_SECTIONS",
    "TEMPLATE_RENDERERS",
    "is_reference_section",
    "template_key",
]
