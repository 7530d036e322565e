"""JSON parsing with a bound on nesting: the one reader of the harness's and the builder's JSON
inputs (``contamination --result`` files, ``.jsonl`` corpora, ``--jsonl`` pools,
``--from-manifest`` manifests and their ``stats.json``, the token cache's records).

:mod:`json` recurses once per level of nesting, so a document nested 100,000 deep ends in a
``RecursionError``: a traceback rather than a one-line error. :func:`loads` measures the nesting
first, with a scan that skips the contents of strings, and refuses a document nested deeper than
:data:`MAX_DEPTH` with :class:`JSONTooDeep`. That is a :class:`json.JSONDecodeError` (so a
``ValueError``), which every reader already turns into its one-line error naming the file (and
the line, for JSON lines).

Standard library only: the builder uses it.
"""

from __future__ import annotations

import json
import re
from typing import Any

#: The deepest nesting of arrays and objects accepted: the toolkit's own files nest a few levels.
MAX_DEPTH = 100

#: A string literal (escapes included), or a bracket outside strings (its group 1).
_STRING_OR_BRACKET = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|([\[\]{}])', re.DOTALL)


class JSONTooDeep(json.JSONDecodeError):
    """A JSON document nested deeper than the limit; its position is the first bracket past it."""


def loads(document: str | bytes, max_depth: int = MAX_DEPTH) -> Any:
    """:func:`json.loads` of ``document`` (bytes decoded as :func:`json.loads` decodes them),
    first refusing one nested more than ``max_depth`` arrays and objects deep with
    :class:`JSONTooDeep`."""
    text = (
        document.decode(json.detect_encoding(document), "surrogatepass")
        if isinstance(document, bytes)
        else document
    )
    _check_depth(text, max_depth)
    return json.loads(text)


def _check_depth(text: str, max_depth: int) -> None:
    """Raise :class:`JSONTooDeep` where ``text`` opens more than ``max_depth`` brackets (outside
    strings) without closing them."""
    if text.count("[") + text.count("{") <= max_depth:  # cannot nest deeper than it opens
        return
    depth = 0
    for token in _STRING_OR_BRACKET.finditer(text):
        bracket = token.group(1)
        if bracket is None:  # a string: its brackets are text
            continue
        depth += 1 if bracket in "[{" else -1
        if depth > max_depth:
            raise JSONTooDeep(f"nested deeper than {max_depth} levels", text, token.start())
