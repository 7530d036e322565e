"""The leaderboard's one HTML renderer: the Jinja2 templates of ``leaderboard/templates``.

Every template autoescapes: whatever a value holds (a result file may name a model
``<script>``) is written as text, escaped as :func:`html.escape` escapes it (``&quot;`` and
``&#x27;`` for the quotes, the spelling the pages had before they were templates, so that their
bytes did not change); only markup the templates make themselves (a macro's output) is kept as
it is. Templates are compiled on each use, not cached: a site renders a few dozen pages.
"""

from __future__ import annotations

import html
import json
import re

import jinja2
from markupsafe import Markup


def _escaped(value: object) -> Markup:
    """A value a template writes, as HTML: markup the templates made as it is, anything else
    escaped (:func:`html.escape`, quotes included)."""
    return value if isinstance(value, Markup) else Markup(html.escape(str(value), quote=True))


def _css_name(text: str) -> str:
    """``text`` as a CSS class name: each run of characters other than ``a``-``z`` a ``-``
    (``reproduced baseline`` -> ``reproduced-baseline``)."""
    return re.sub(r"[^a-z]+", "-", text)


def _web_address_split(text: str) -> list[str]:
    """``text`` cut around its web addresses: text, address, text, ... (the addresses at the odd
    positions)."""
    return re.split(r"(https?://\S+)", text)


def _pretty_json(value: object) -> str:
    """A JSON value as a result page shows it: indented, keys sorted."""
    return json.dumps(value, indent=2, sort_keys=True)


ENVIRONMENT = jinja2.Environment(
    loader=jinja2.PackageLoader("leaderboard", "templates"),
    autoescape=True,
    finalize=_escaped,
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
    cache_size=0,
)
ENVIRONMENT.filters.update(css_name=_css_name, web_address_split=_web_address_split, pretty_json=_pretty_json)


def render(template: str, **context: object) -> str:
    """The text of ``template`` (a file name in ``leaderboard/templates``) rendered with
    ``context``."""
    return ENVIRONMENT.get_template(template).render(**context)
