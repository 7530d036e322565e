"""The articles of a WikiText-style split: the documents of ``--protocol documents``, and the
counts behind lm-evaluation-harness's ``wikitext`` metrics.

lm-evaluation-harness's ``wikitext_document_level`` cuts a split into *pages*: a page starts at
each article heading, a line ``= Title =`` (level 1; ``= = Section = =`` is none): a line is a
heading when, with ``= = =`` read as ``===`` and ``= =`` as ``==`` and its spaces stripped, it
starts with ``"= "`` and ends with ``" ="``. A page is its heading line and every line up to the
next heading (blank lines included), joined with ``\\n``: so the newline that ends its last line
is in no page, except at the end of the file. The lines before the first heading (in WikiText,
one blank line) are a page too, dropped when blank.

A document is a page with the ``<eos>`` before it: the newline between it and the page before
(in no page), or the blank line before the first heading. A page's tokens are thus its lines'
words and the ``<eos>`` of every line but its last (the split's last page keeps that one too), and
the lines before the first heading, when there are more than that blank line, are a document of
their own; every token is scored once. WikiText-2 test has 62 pages, so 62 documents. A plugin that
scores pages as lm-evaluation-harness does (the ``hf`` plugin's ``detokenizer=lm-eval``) gives the
``<eos>`` before a page nothing to score.

Its ``word_perplexity`` divides the log-likelihood by ``len(re.split(r"\\s+", page))`` summed over
the pages (whitespace-separated words, plus 2 for the space that starts and the whitespace that
ends each page), its ``byte_perplexity`` and ``bits_per_byte`` by the pages' UTF-8 bytes.
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any

import numpy as np

from wikitext_toolkit_core.format import UNK
from wikitext_toolkit_core.result_schema import perplexity_of

_SPACE = re.compile(r"\s+")

#: The most positions (documents times its longest) a batch of documents scored side by side,
#: from one ``reset``, lays out, unless one document alone is longer.
MAX_BATCH_POSITIONS = 1 << 20


def is_article_heading(line: str) -> bool:
    """Whether ``line`` is an article heading (``= Title =``, module docstring)."""
    text = line.replace("= = =", "===").replace("= =", "==").strip()
    return text.startswith("= ") and text.endswith(" =")


@dataclasses.dataclass(frozen=True)
class Documents:
    """A split cut into documents.

    Attributes:
        starts, lengths: int64 ``[D]``, each document's first token in the split and its tokens.
        pages: lm-evaluation-harness's pages (module docstring).
        words: lm-evaluation-harness's word count of the pages.
        bytes: the pages' UTF-8 bytes.
        variant: ``<unk>`` when the split's text holds the token ``<unk>`` (WikiText's tokenized
            variant, or a corpus built like it), else ``raw`` (lm-evaluation-harness reads
            ``wikitext-2-raw``): a figure compares only with figures of the same variant.
    """

    starts: np.ndarray
    lengths: np.ndarray
    pages: int
    words: int
    bytes: int
    variant: str

    def metrics(self, total_log_prob: float) -> dict[str, Any]:
        """lm-evaluation-harness's three figures for a log-likelihood (nats) of the split, with
        the counts they divide by (a perplexity too large for a float is None)."""
        return {
            "documents": len(self.starts),
            "pages": self.pages,
            "variant": self.variant,
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
    # Each document from the <eos> before its heading line (none before a first line); a blank
    # line before the first heading leaves no document before that <eos>.
    starts = np.unique(np.concatenate([[0], line_starts[headings] - 1]).clip(0))
    lengths = np.diff(np.append(starts, line_starts[-1]))
    pages = ["\n".join(lines[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]
    if headings[0] != 0 and not pages[0].strip():
        pages = pages[1:]  # a blank page before the first heading is no page
    return Documents(
        starts=starts.astype(np.int64),
        lengths=lengths.astype(np.int64),
        pages=len(pages),
        words=sum(len(_SPACE.split(page)) for page in pages),
        bytes=sum(len(page.encode("utf-8")) for page in pages),
        variant=UNK if UNK in text.split() else "raw",
    )


def document_batches(lengths: np.ndarray, max_positions: int = MAX_BATCH_POSITIONS) -> list[np.ndarray]:
    """The documents of ``lengths`` (int64 ``[D]``, tokens each) in batches scored side by side,
    from one ``reset`` each: a batch's indices (int64, in split order) lay its documents out as
    rows padded to its longest. Longest first, a document joins the batch of the longer ones while
    it is at least half as long as that batch's longest and the batch keeps within
    ``max_positions``, so that the padding is less than the tokens and the batches' memory is
    linear in the split, where one grid of every document padded to the longest grows with their
    product (one long article among thousands of short ones)."""
    batches: list[list[int]] = []
    for index in np.argsort(-lengths, kind="stable").tolist():
        batch = batches[-1] if batches else []
        longest = int(lengths[batch[0]]) if batch else 0
        if not batch or 2 * int(lengths[index]) < longest or (len(batch) + 1) * longest > max_positions:
            batches.append([index])
        else:
            batch.append(index)
    return [np.sort(np.asarray(batch, dtype=np.int64)) for batch in batches]
