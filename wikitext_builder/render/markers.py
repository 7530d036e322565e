"""Sentinels of the intermediate plain text and the whitespace classes shared by the renderer.

The sentinels are control characters: the input is stripped of control characters before
rendering, so none can come from an article's text.
"""

from __future__ import annotations

import re

LIST_ITEM = "\x02"  # start of a list item / indented line
FORMULA = "\x03"  # a <formula>
BLOCK_FORMULA = "\x04"  # display math: a line of its own
APOSTROPHE = "\x05"  # an apostrophe that is text, never part of '' / ''' quote markup
INDENT = "\x06"  # start of an indented (":") line
# where a dropped template was: MediaWiki's quote rule saw the template's output there, so
# the quote markup on either side stays apart (''{{polytonic|...}}'' is an empty italic
# span, not a run of four apostrophes); removed with the quote markup
TEMPLATE_GAP = "\x07"
PARA_BREAK = "\n\n"

WHITESPACE = re.compile(r"[ \t\u00a0\u2000-\u200a\u202f\u205f\u3000]+")
INVISIBLE = re.compile(r"[\u200b-\u200f\u2060\ufeff\u00ad\u202a-\u202e\u2066-\u2069]")
CONTROL_CHARS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def protect_apostrophes(text: str) -> str:
    """Every ``'`` of ``text`` as literal text (not quote markup)."""
    return text.replace("'", APOSTROPHE)


def verse(text: str) -> str:
    """Verse (``<poem>``, ``{{poem quote}}``): each non-blank line a paragraph of its own.

    WikiText-2 keeps every line of a poem as a line of its own ("Jack and Jill went up the
    hill" / "To fetch a <unk> of water ." in Jack and Jill (nursery rhyme); the 80 lines of
    Ode to a Nightingale), while a ``<br>`` in prose joins its line to the next (Missouri
    River, Norman Finkelstein, dev pairs); stanza breaks leave no blank line."""
    lines = [line for line in text.split("\n") if line.strip()]
    return PARA_BREAK + PARA_BREAK.join(lines) + PARA_BREAK if lines else ""
