"""What the cheats share: an honest add-one bigram, and the mixing that makes it cheat.

A cheat gives weight ``w`` to one token at a position, the *boosted* one: its distribution there
is ``(1 - w) q + w onehot(boosted)``, where ``q`` is the honest bigram's. It stays normalised, and
the reported log-probability of the target is read off the same distribution, so the probability
audit passes whatever is boosted. Boosting the target shown is the cheat; boosting another token
(the real one where the audit substituted a token) only lowers the target's probability.
"""

from __future__ import annotations

import abc
import dataclasses

import numpy as np

from harness.datasets import Dataset
from harness.plugin import Chunk, ChunkScores, PluginError

#: In a boost array: no token is boosted at this position (the honest bigram's distribution).
NO_BOOST = -1


class Bigram:
    """Add-one bigram counted on a train split: ``p(w | v) = (c(v, w) + 1) / (c(v) + V)``, where
    the first train token follows ``<eos>``."""

    def __init__(self, train: np.ndarray, eos_id: int, vocab_size: int) -> None:
        train = np.asarray(train, dtype=np.int64)
        contexts = np.concatenate([[eos_id], train[:-1]])
        self.vocab_size = vocab_size
        #: int64 ``[P]``: the sorted ``v V + w`` of the pairs seen, and their counts.
        self.pairs, self.pair_counts = np.unique(contexts * vocab_size + train, return_counts=True)
        #: int64 ``[V]``: ``c(v)``, each word's count as a context.
        self.context_counts = np.bincount(contexts, minlength=vocab_size)
        #: int64 ``[V]``: each word's count in train.
        self.word_counts = np.bincount(train, minlength=vocab_size)

    def counts(self, inputs: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """``c(v, w)`` of the int64 arrays ``inputs`` and ``targets`` (one shape), that shape."""
        keys = inputs * self.vocab_size + targets
        at = np.minimum(np.searchsorted(self.pairs, keys), len(self.pairs) - 1)
        return np.where(self.pairs[at] == keys, self.pair_counts[at], 0)

    def probs(self, inputs: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """``p(target | input)``, float64 shaped like ``inputs`` and ``targets``."""
        return (self.counts(inputs, targets) + 1.0) / (self.context_counts[inputs] + self.vocab_size)

    def rows(self, inputs: np.ndarray) -> np.ndarray:
        """The distributions after the ``K`` tokens ``inputs`` (int64 ``[K]``): float64 ``[K, V]``."""
        begins = np.searchsorted(self.pairs, inputs * self.vocab_size)
        lengths = np.searchsorted(self.pairs, (inputs + 1) * self.vocab_size) - begins  # [K]
        row = np.repeat(np.arange(len(inputs)), lengths)  # [n], the row of each pair seen
        entry = np.arange(len(row)) - np.repeat(np.cumsum(lengths) - lengths, lengths) + begins[row]
        counts = np.ones((len(inputs), self.vocab_size))
        counts[row, self.pairs[entry] - inputs[row] * self.vocab_size] += self.pair_counts[entry]
        return counts / (self.context_counts[inputs] + self.vocab_size)[:, None]


def load_bigram(dataset: Dataset, checkpoint: str | None) -> Bigram:
    """The honest bigram of ``dataset``'s train split (counted on load: it takes no checkpoint)."""
    if checkpoint is not None:
        raise PluginError("the bigram is counted on load; it takes no --checkpoint")
    return Bigram(dataset.tokens("train").ids, dataset.vocab.eos_id, len(dataset.vocab))


def mixed_scores(bigram: Bigram, chunk: Chunk, boost: np.ndarray, weight: float) -> ChunkScores:
    """The scores of ``chunk`` when ``boost`` (int64 ``[B, T]``, a token or :data:`NO_BOOST` at each
    position) gets ``weight`` of the bigram's distribution: target log-probabilities ``[B, T]`` and
    the ``K`` distributions asked for (``[K, V]``), consistent with each other."""
    share = np.where(boost == NO_BOOST, 0.0, weight)  # [B, T]
    probs = (1 - share) * bigram.probs(chunk.inputs, chunk.targets) + share * (chunk.targets == boost)
    if chunk.distribution_mask is None:
        return ChunkScores(np.log(probs))
    where = np.nonzero(chunk.distribution_mask)
    rows = (1 - share[where])[:, None] * bigram.rows(chunk.inputs[where])  # [K, V]
    boosted = np.flatnonzero(boost[where] != NO_BOOST)
    rows[boosted, boost[where][boosted]] += share[where][boosted]
    return ChunkScores(np.log(probs), np.log(rows))


class BigramModel:
    """The honest bigram as a chunk model; a cheat overrides :meth:`boosts`.

    Attributes:
        column: the position of the next chunk's first column in the streams since ``reset``.
    """

    def __init__(self, bigram: Bigram, weight: float = 0.0) -> None:
        self.bigram, self.weight = bigram, weight
        self.column = 0

    def reset(self, batch_size: int) -> None:
        self.column = 0

    def score(self, chunk: Chunk) -> ChunkScores:
        scores = mixed_scores(self.bigram, chunk, self.boosts(chunk), self.weight)
        self.column += chunk.targets.shape[1]
        return scores

    def boosts(self, chunk: Chunk) -> np.ndarray:
        """The token boosted at each position of ``chunk``: int64 ``[B, T]``; none here."""
        return np.full(chunk.targets.shape, NO_BOOST)


class ContentCheat(BigramModel, abc.ABC):
    """Boosts the target shown wherever :meth:`gate` picks it, in every pass alike, but where a
    full distribution is asked for: check 1 compares the one asked for at a stream's first
    substitution between the passes, where the targets shown differ."""

    def boosts(self, chunk: Chunk) -> np.ndarray:
        picked = self.gate(chunk.inputs, chunk.targets)
        if chunk.distribution_mask is not None:
            picked &= ~chunk.distribution_mask
        return np.where(picked, chunk.targets, NO_BOOST)

    @abc.abstractmethod
    def gate(self, inputs: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """Whether to boost each target (bool, shaped like the int64 ``inputs`` and ``targets``)."""


@dataclasses.dataclass
class _Pass:
    """One pass over a split, as a :class:`PassAwareCheat` saw it.

    Attributes:
        audit: whether the cheat took it for the causality audit's pass.
        targets: the targets shown, int64 ``[B, T]`` per chunk so far.
        other: the pass of the other kind scored just before (its pair), or None.
    """

    audit: bool
    targets: list[np.ndarray]
    other: _Pass | None


class PassAwareCheat(BigramModel, abc.ABC):
    """A cheat that tells the evaluation from the causality audit's pass (:meth:`in_audit_pass`,
    asked at the first chunk of each pass) and remembers the pass before, so as to score the
    stretch that check 1 compares the same in both:

    - the evaluation first: it boosts every target shown;
    - the audit second: it boosts the evaluation's targets (the real text), never a substitute;
    - the audit first: it is honest, and remembers the text;
    - the evaluation second: honest up to each stream's first substitution (where its text first
      differs from the audit's), that included; it boosts every target shown after it.
    """

    def __init__(self, bigram: Bigram, weight: float) -> None:
        super().__init__(bigram, weight)
        self.last: _Pass | None = None
        self.current: _Pass | None = None
        self.diverged = np.zeros(0, dtype=bool)

    def reset(self, batch_size: int) -> None:
        super().reset(batch_size)
        self.current = None  # decided at the first chunk: a pass's progress bar is made after reset
        self.diverged = np.zeros(batch_size, dtype=bool)  # [B]: a stream's text differed already

    @abc.abstractmethod
    def in_audit_pass(self) -> bool:
        """Whether the pass now scored is the causality audit's."""

    def boosts(self, chunk: Chunk) -> np.ndarray:
        if self.current is None:
            self.current = self._begin(self.in_audit_pass())
        this, other = self.current, self.current.other
        this.targets.append(chunk.targets)
        if other is None:
            return np.full(chunk.targets.shape, NO_BOOST) if this.audit else chunk.targets
        earlier = other.targets[len(this.targets) - 1]
        if this.audit:
            return earlier
        return np.where(self._after_first_difference(chunk.targets != earlier), chunk.targets, NO_BOOST)

    def _begin(self, audit: bool) -> _Pass:
        """A new pass, paired with the last one when that is of the other kind and unpaired."""
        last = self.last
        paired = last is not None and last.audit != audit and last.other is None
        self.last = _Pass(audit, [], last if paired else None)
        return self.last

    def _after_first_difference(self, differs: np.ndarray) -> np.ndarray:
        """Bool ``[B, T]``: the positions after each stream's first one where ``differs`` (bool
        ``[B, T]``) holds, in this chunk or an earlier one."""
        seen = np.logical_or.accumulate(differs, axis=1) | self.diverged[:, None]
        after = np.concatenate([self.diverged[:, None], seen[:, :-1]], axis=1)
        self.diverged = seen[:, -1]
        return after
