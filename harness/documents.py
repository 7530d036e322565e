"""The articles of a WikiText-style split: the documents of ``--protocol documents``, and the
counts behind lm-evaluation-harness's ``wikitext`` metrics.

A document starts at each article heading, a line ``= Title =`` (level 1; ``= = Section = =`` is
none), as lm-evaluation-harness's ``wikitext_document_level`` pages do: a line is a heading when,
with ``= = =`` read as ``===`` and ``= =`` as ``==`` and its spaces stripped, it starts with
``"= "`` and ends with ``" ="``. A document holds its heading line and every line up to the next
heading (blank lines included), with each line's ``<eos>``. Lines before the first heading (in
WikiText, one blank line) are a document of their own, so that every token is scored once.

lm-evaluation-harness counts words and bytes in each *page*: the document's lines joined with
``\\n`` (so without the newline that ends its last line, except at the end of the file); a blank
page before the first heading is dropped. Its ``word_perplexity`` divides the log-likelihood by
``len(re.split(r"\\s+", page))`` summed over the pages (whitespace-separated words, plus 2 for the
space that starts and the whitespace that ends each page), its ``byte_perplexity`` and
``bits_per_byte`` by the pages' UTF-8 bytes.
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any

import numpy as np

from wikitext_toolkit_core.result_schema import perplexity_of

_SPACE = re.compile(r"\s+")


def is_article_heading(line: str) -> bool:
    """Whether ``line`` is an article heading (``= Title =``, module docstring)."""
    text = line.replace("= = =", "===").replace("= =", "==").strip()
    return text.startswith("= ") and text.endswith(" =")


@dataclasses.dataclass(frozen=True)
class Documents:
    """A split cut into documents.

    Attributes:
        starts, lengths: int64 ``[D]``, each document's first token in the split and its tokens.
        words: lm-evaluation-harness's word count of the pages (module docstring).
        bytes: the pages' UTF-8 bytes.
    """

    starts: np.ndarray
    lengths: np.ndarray
    words: int
    bytes: int

    def metrics(self, total_log_prob: float) -> dict[str, Any]:
        """lm-evaluation-harness's three figures for a log-likelihood (nats) of the split, with
        the counts they divide by (a perplexity too large for a float is None)."""
        return {
            "documents": len(self.starts),
            "words": self.words,
            "bytes": self.bytes,
            "word_perplexity": perplexity_of(-total_log_prob / self.words),
            "byte_perplexity": perplexity_of(-total_log_prob / self.bytes),
            "bits_per_byte": -total_log_prob / self.bytes / math.log(2),
        }


def split_documents(text: str) -> Documents | None:
    """The documents of a split's text (as its file holds it); None when it has no article
    heading."""
    lines = text.split("\n")
    # Tokens of each line: its words and <eos>; the empty string after a final newline is no line.
    tokens = np.array([len(line.split()) + 1 for line in lines], dtype=np.int64)
    if text.endswith("\n"):
        tokens[-1] = 0
    headings = [index for index, line in enumerate(lines) if is_article_heading(line)]
    if not headings:
        return None
    firsts = headings if headings[0] == 0 else [0, *headings]
    bounds = [*firsts, len(lines)]
    line_starts = np.concatenate([[0], np.cumsum(tokens)])
    starts = line_starts[firsts]
    lengths = line_starts[bounds[1:]] - starts
    pages = ["\n".join(lines[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]
    if headings[0] != 0 and not pages[0].strip():
        pages = pages[1:]  # a blank page before the first heading is no page
    return Documents(
        starts=starts.astype(np.int64),
        lengths=lengths.astype(np.int64),
        words=sum(len(_SPACE.split(page)) for page in pages),
        bytes=sum(len(page.encode("utf-8")) for page in pages),
    )
