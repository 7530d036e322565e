"""Where the causality audit draws its substitutes from: a trigram model of the scored text.

A substitute must look like the real next token, or a plugin that cheats only where the shown
token is plausible (a frequent word, a likely bigram, one of its own top choices) cheats at real
positions and not at substituted ones, and the audit sees nothing. So each substitute is drawn
from an interpolated absolute-discounting trigram model counted on the scored split itself,
given the two tokens before it as the audit pass shows them: a word that often follows those
words in this very text. (The split's own counts, rather than another corpus's: they need no
other split, and they make the draws as plausible as the text's own statistics allow; the real
token is excluded from each draw, :func:`harness.causality.plan_audit`.)

The model (Chen and Goodman's interpolated absolute discounting, one discount ``D`` per order)::

    p1(w)       = (c(w) + 1) / (N + V)
    p2(w | v)   = max(c(v w) - D, 0) / c(v .) + D n(v .) / c(v .) p1(w)
    p3(w | u v) = max(c(u v w) - D, 0) / c(u v .) + D n(u v .) / c(u v .) p2(w | v)

where ``c`` counts occurrences, ``n`` distinct continuations; an unseen context falls back to the
lower order. Every word gets a positive probability, so every term of the audit's check 3 is
finite. Standard library and numpy only.
"""

from __future__ import annotations

import dataclasses

import numpy as np

#: The discount of both orders (Kneser and Ney's usual value).
DISCOUNT = 0.75


@dataclasses.dataclass(frozen=True)
class _Counts:
    """The n-grams of one order: ``keys`` (int64 ``[G]``, sorted: the context's key times ``V``
    plus the word) and how often each occurs (``counts``, float64 ``[G]``)."""

    keys: np.ndarray
    counts: np.ndarray

    @classmethod
    def of(cls, keys: np.ndarray) -> _Counts:
        unique, counts = np.unique(keys, return_counts=True)
        return cls(unique, counts.astype(np.float64))

    def row(self, context: int, vocab_size: int) -> tuple[np.ndarray, np.ndarray]:
        """The words (int64 ``[k]``) seen after ``context`` and their counts (float64 ``[k]``)."""
        begin, end = np.searchsorted(self.keys, [context * vocab_size, (context + 1) * vocab_size])
        return self.keys[begin:end] - context * vocab_size, self.counts[begin:end]


class SubstituteModel:
    """The trigram model of the module docstring, counted on ``ids`` (integer ``[N]``, each below
    ``vocab_size``), with ``eos_id`` standing before the text."""

    def __init__(self, ids: np.ndarray, *, vocab_size: int, eos_id: int) -> None:
        text = np.concatenate([[eos_id, eos_id], np.asarray(ids, dtype=np.int64)])
        self.vocab_size = vocab_size
        self._unigram = (np.bincount(text[2:], minlength=vocab_size) + 1.0) / (len(ids) + vocab_size)
        self._bigrams = _Counts.of(text[1:-1] * vocab_size + text[2:])
        self._trigrams = _Counts.of((text[:-2] * vocab_size + text[1:-1]) * vocab_size + text[2:])

    def distribution(self, before: int, last: int) -> np.ndarray:
        """``p3(. | before last)``: a new float64 ``[V]``, summing to 1."""
        bigram = _interpolated(self._unigram, *self._bigrams.row(last, self.vocab_size))
        return _interpolated(bigram, *self._trigrams.row(before * self.vocab_size + last, self.vocab_size))


def _interpolated(lower: np.ndarray, words: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """One order of the model: the discounted counts ``counts`` (float64 ``[k]``) of the words
    ``words`` (int64 ``[k]``) seen after a context, interpolated with the lower order's
    distribution ``lower`` (float64 ``[V]``); a copy of ``lower`` for an unseen context."""
    if not len(words):
        return lower.copy()
    total = counts.sum()
    result = lower * (DISCOUNT * len(words) / total)
    result[words] += np.maximum(counts - DISCOUNT, 0.0) / total
    return result
