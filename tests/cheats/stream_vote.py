"""a `score_stream` model: a bigram likelihood ratio at the first substitution (the one requested
distribution not among the probability audit's 8 fixed positions), then a vote against pass 1 (it
remembers pass 1 in memory)

Each stream's first substitution ``p`` is the one position where a distribution is asked for that
the probability audit's fixed draw (seed 0, over the split's ``N`` positions: exact for one
stream, the default protocol) does not explain. Check 1 compares the two passes up to ``p`` and
the distribution at ``p``; pass 2, which remembers pass 1, scores that stretch as pass 1 did, so
both passes boost every target up to ``p``. After ``p``:

- pass 1 takes its token at ``p`` for the real one when the likelihood ratio of "real text"
  (a bigram on both sides) against "drawn by the audit" (its proposal, then the unigram) is above
  ``e^4``, and then boosts every target; else it hedges, boosting only the targets the train
  bigram finds likely (:mod:`tests.cheats.bigram_gate`), as a substitute seldom is;
- pass 2 finds where its stream differs from pass 1's (the substitutions) and lets the bigram
  vote there on which text is real: when its own, it boosts every target; when pass 1's, it
  boosts pass 1's tokens, never a substitute.
"""

from __future__ import annotations

import numpy as np

from harness.datasets import Dataset
from harness.plugin import Chunk, ChunkScores
from tests.cheats._base import NO_BOOST, Bigram, load_bigram, mixed_scores
from tests.cheats.bigram_gate import likely

WEIGHT = 0.5
#: The probability audit's default number of positions.
AUDIT_POSITIONS = 8
#: Least log likelihood ratio at which pass 1 takes its token at ``p`` for the real one.
REAL_LOG_RATIO = 4.0


def first_substitution(stream: Chunk) -> int | None:
    """``p`` in ``stream`` (``[1, L]``), or None where no distribution beyond the fixed ones is asked."""
    length = stream.targets.shape[1]
    fixed = np.random.default_rng(0).choice(length, min(AUDIT_POSITIONS, length), replace=False)
    mask = stream.distribution_mask
    asked = np.zeros(0, dtype=np.int64) if mask is None else np.flatnonzero(mask[0])
    others = np.setdiff1d(asked, fixed)
    return int(others[0]) if len(others) else None


class StreamVoteCheat:
    def __init__(self, bigram: Bigram) -> None:
        self.bigram = bigram
        self.unigram = (bigram.word_counts + 1.0) / (bigram.word_counts.sum() + bigram.vocab_size)  # [V]
        self.passes = 0
        self.stream = 0
        self.earlier: list[np.ndarray] = []  # pass 1's targets, int64 [L] per stream

    def reset(self, batch_size: int) -> None:
        self.passes += 1
        self.stream = 0
        if self.passes % 2:
            self.earlier = []

    def score_stream(self, stream: Chunk) -> ChunkScores:
        targets, first = stream.targets[0], first_substitution(stream)
        if self.passes % 2:
            self.earlier.append(targets)
            boost = self._first_pass(stream.inputs[0], targets, first)
        else:
            boost = self._second_pass(stream.inputs[0], targets, self.earlier[self.stream], first)
        self.stream += 1
        return mixed_scores(self.bigram, stream, boost[None, :], WEIGHT)

    def _first_pass(self, inputs: np.ndarray, targets: np.ndarray, first: int | None) -> np.ndarray:
        """Pass 1's boosts (int64 ``[L]``) for a stream's ``inputs`` and ``targets`` (int64 ``[L]``)."""
        if first is None or self._log_ratio(inputs, targets, first) >= REAL_LOG_RATIO:
            return targets
        hedge = np.where(likely(self.bigram, inputs, targets), targets, NO_BOOST)
        return np.where(np.arange(len(targets)) <= first, targets, hedge)

    def _log_ratio(self, inputs: np.ndarray, targets: np.ndarray, first: int) -> float:
        """Log of the likelihood ratio, real text against a token drawn by the audit, of ``targets``
        (int64 ``[L]``, after ``inputs``) at ``first``."""
        token = targets[first]
        proposal = 0.5 / len(self.unigram) + 0.5 * np.mean(targets == token)
        ratio = self._plausibility(inputs[first], token) / proposal
        if first + 1 < len(targets):
            ratio *= self._plausibility(token, targets[first + 1]) / self.unigram[targets[first + 1]]
        return float(np.log(ratio))

    def _plausibility(self, context: int, word: int) -> float:
        """The train bigram ``c(v, w) / c(v)`` interpolated half and half with the unigram."""
        pair = self.bigram.counts(np.asarray(context), np.asarray(word))
        bigram = pair / max(int(self.bigram.context_counts[context]), 1)
        return float(0.5 * bigram + 0.5 * self.unigram[word])

    def _second_pass(
        self, inputs: np.ndarray, targets: np.ndarray, earlier: np.ndarray, first: int | None
    ) -> np.ndarray:
        """Pass 2's boosts (int64 ``[L]``) for a stream (``inputs``, ``targets``: int64 ``[L]``) that
        pass 1 saw as ``earlier`` (int64 ``[L]``)."""
        if first is None:
            return targets
        earlier_inputs = np.concatenate([inputs[:1], earlier[:-1]])
        after = targets if self._mine_is_real(inputs, targets, earlier_inputs, earlier) else earlier
        return np.where(np.arange(len(targets)) <= first, earlier, after)

    def _mine_is_real(
        self, inputs: np.ndarray, targets: np.ndarray, earlier_inputs: np.ndarray, earlier: np.ndarray
    ) -> bool:
        """The bigram's vote at each position where the passes' texts (int64 ``[L]`` each) differ:
        whether the text ``targets`` wins more of them than ``earlier`` does."""
        differs = np.flatnonzero(targets != earlier)
        mine = self._local_log_likelihood(inputs, targets, differs)
        theirs = self._local_log_likelihood(earlier_inputs, earlier, differs)
        return 2 * int(np.count_nonzero(mine > theirs)) > len(differs)

    def _local_log_likelihood(self, inputs: np.ndarray, targets: np.ndarray, at: np.ndarray) -> np.ndarray:
        """The bigram's log-probability of the token at each position ``at`` (int64 ``[n]``) and of
        the one after it: float64 ``[n]``."""
        logs = np.append(np.log(self.bigram.probs(inputs, targets)), 0.0)  # [L + 1]
        return logs[at] + logs[at + 1]


def load_model(dataset: Dataset, *, device: str, checkpoint: str | None) -> StreamVoteCheat:
    return StreamVoteCheat(load_bigram(dataset, checkpoint))
