"""Interpolated modified Kneser-Ney n-gram model (Chen & Goodman 1999), numpy only.

Follows SRILM's ``ngram-count -order N -kndiscount -interpolate -unk`` with no count cut-offs:

* each line is a sentence: its context starts at a sentence-start symbol ``<s>``, the ``<eos>``
  closing it is predicted (as SRILM's ``</s>``), and n-grams never cross sentence boundaries;
* ``<unk>`` is an ordinary word;
* the highest order uses raw counts, lower orders use continuation counts ``N1+(. g)``, except
  for n-grams starting with ``<s>``, which have no left context and keep their raw counts;
* each order has three discounts ``D1, D2, D3+`` from its count-of-counts
  (``Y = n1 / (n1 + 2 n2)``, ``Dr = r - (r + 1) Y n_{r+1} / n_r``);
* ``p_k(w | h) = (max(c(hw) - D(c(hw)), 0) + gamma(h) p_{k-1}(w | h')) / c(h)`` with
  ``gamma(h) = D1 N1(h.) + D2 N2(h.) + D3+ N3+(h.)``, backing off entirely where ``h`` was
  never seen, and the unigram level interpolated with the uniform distribution.

The model trains from the dataset's train split when loaded (PTB: a few seconds). It scores
a chunk of every stream at once; at a stream's start its sentence context is unknown and the
history is truncated (with the default batch size 1 only the implicit ``<eos>`` precedes the
first token, so every history is exact).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from harness.datasets import Dataset
from harness.plugin import Chunk, ChunkScores, PluginError, PositiveInt, declared_model_args

_MIN_DISCOUNT = 0.05  # keeps back-off mass positive on degenerate (tiny) corpora


@dataclasses.dataclass(frozen=True)
class _OrderTable:
    """The n-grams of one order k >= 2.

    Attributes:
        width: number of word ids including ``<s>`` (``V + 1``).
        keys: int64 ``[G]``, sorted: ``history_id * width + word`` of each distinct n-gram,
            ``history_id`` being the id of its first k - 1 words in the previous order
            (for k = 2, the word id itself).
        adjusted: int64 ``[G]``, the counts the order is estimated from.
        history_total: float64 ``[H]``, ``c(h)``: sum of ``adjusted`` per history id.
        history_backoff: float64 ``[H]``, ``gamma(h)`` per history id.
        discounts: float64 ``[4]``: ``0, D1, D2, D3+``, indexed by ``min(count, 3)``.
    """

    width: int
    keys: np.ndarray
    adjusted: np.ndarray
    history_total: np.ndarray
    history_backoff: np.ndarray
    discounts: np.ndarray

    def lookup(self, history: np.ndarray, word: np.ndarray) -> np.ndarray:
        """Ids of the n-grams ``(history, word)`` (broadcastable int64 arrays); -1 where the
        n-gram is unseen or ``history`` is -1."""
        keys = history * self.width + word
        if len(self.keys) == 0:
            return np.full(keys.shape, -1, dtype=np.int64)
        index = np.minimum(np.searchsorted(self.keys, keys), len(self.keys) - 1)
        return np.where((history >= 0) & (self.keys[index] == keys), index, -1)

    def interpolate(self, history: np.ndarray, word: np.ndarray, lower: np.ndarray) -> np.ndarray:
        """``p_k(word | history)`` from ``lower`` = ``p_{k-1}(word | shorter history)``;
        ``lower`` itself where the history is unknown or was never seen as a history."""
        known = history >= 0
        safe_history = np.where(known, history, 0)
        total = np.where(known, self.history_total[safe_history], 0.0)
        ngram = self.lookup(history, word)
        count = np.where(ngram >= 0, self.adjusted[np.maximum(ngram, 0)], 0)
        discounted = count - self.discounts[np.minimum(count, 3)]
        mixed = (discounted + self.history_backoff[safe_history] * lower) / np.where(total > 0, total, 1.0)
        return np.where(total > 0, mixed, lower)


def _discounts(adjusted: np.ndarray) -> np.ndarray:
    """``[0, D1, D2, D3+]`` from the count-of-counts ``n1..n4`` of ``adjusted`` (zeros ignored)."""
    n = np.bincount(np.minimum(adjusted, 5), minlength=6)[1:5].astype(np.float64)
    y = n[0] / (n[0] + 2 * n[1]) if n[0] + 2 * n[1] > 0 else 0.5
    discounts = [0.0]
    for r in (1, 2, 3):
        value = r - (r + 1) * y * n[r] / n[r - 1] if n[r - 1] > 0 else r / 2
        discounts.append(float(np.clip(value, _MIN_DISCOUNT, r)))
    return np.array(discounts)


def _with_sentence_starts(ids: np.ndarray, eos_id: int, start_id: int) -> tuple[np.ndarray, np.ndarray]:
    """Insert ``<s>`` before every sentence of a stream whose sentences end in ``<eos>``.

    Returns the token array ``[M]`` and each position's distance from its sentence's ``<s>``.
    """
    starts = np.concatenate([[0], np.nonzero(ids == eos_id)[0] + 1])
    starts = starts[starts < len(ids)]
    tokens = np.insert(ids, starts, start_id)
    is_start = tokens == start_id
    start_positions = np.nonzero(is_start)[0]
    distance = np.arange(len(tokens)) - start_positions[np.cumsum(is_start) - 1]
    return tokens, distance


class KneserNeyModel:
    """An order-N interpolated modified Kneser-Ney model over a vocabulary of ``V`` words.

    Args:
        train_ids: int64 ``[N_train]``, the train stream, sentences closed by ``eos_id``.
        vocab_size: ``V``; word ids are ``0 .. V-1`` and ``V`` is used for ``<s>``.
        eos_id: id of ``<eos>``.
        order: N >= 1.

    Raises:
        ValueError: ``order`` is below 1, or longer than the longest sentence (with ``<s>``).
    """

    def __init__(self, train_ids: np.ndarray, vocab_size: int, eos_id: int, order: int = 5) -> None:
        if order < 1:
            raise ValueError(f"order must be >= 1, got {order}")
        self.order = order
        self.vocab_size = vocab_size
        self.eos_id = eos_id
        self.start_id = vocab_size
        width = vocab_size + 1
        tokens, distance = _with_sentence_starts(np.asarray(train_ids, dtype=np.int64), eos_id, self.start_id)
        longest = int(distance.max()) + 1  # tokens of the longest sentence, <s> included
        if order > longest:
            raise ValueError(
                f"order {order}: the longest sentence of the training text is {longest} tokens with "
                f"<s>, so no {order}-gram exists; at most {longest}"
            )
        # ids[k][i]: id of the k-gram ending at position i (-1 where it would cross a sentence
        # start); keys/raw/representative: per distinct k-gram, its key, raw count and one
        # position where it ends.
        ids = {1: tokens}
        raw = {1: np.bincount(tokens, minlength=width)}
        keys, representative = {}, {}
        for k in range(2, order + 1):
            positions = np.nonzero(distance >= k - 1)[0]
            gram_keys = ids[k - 1][positions - 1] * width + tokens[positions]
            keys[k], first, inverse, raw[k] = np.unique(
                gram_keys, return_index=True, return_inverse=True, return_counts=True
            )
            ids[k] = np.full(len(tokens), -1, dtype=np.int64)
            ids[k][positions] = inverse
            representative[k] = positions[first]
        adjusted = {}
        for k in range(1, order + 1):
            if k == order:
                adjusted[k] = raw[k]
                continue
            continuation = np.bincount(ids[k][representative[k + 1]], minlength=len(raw[k]))
            if k == 1:
                adjusted[k] = continuation
            else:
                starts_sentence = distance[representative[k]] == k - 1
                adjusted[k] = np.where(starts_sentence, raw[k], continuation)
        unigram = adjusted[1].copy()
        unigram[self.start_id] = 0  # <s> is never predicted
        unigram = unigram[:vocab_size]
        discounts = _discounts(unigram)
        backoff = discounts[np.minimum(unigram, 3)].sum()
        self.unigram = (unigram - discounts[np.minimum(unigram, 3)] + backoff / vocab_size) / unigram.sum()
        self.tables: list[_OrderTable] = []
        for k in range(2, order + 1):
            history = keys[k] // width
            histories = len(raw[k - 1])
            counts = adjusted[k]
            discounts = _discounts(counts)
            self.tables.append(
                _OrderTable(
                    width=width,
                    keys=keys[k],
                    adjusted=counts,
                    history_total=np.bincount(history, weights=counts, minlength=histories),
                    history_backoff=np.bincount(
                        history, weights=discounts[np.minimum(counts, 3)], minlength=histories
                    ),
                    discounts=discounts,
                )
            )
        self.num_parameters = vocab_size + sum(len(table.keys) for table in self.tables)
        self._context = np.full((max(order - 1, 0), 1), -1, dtype=np.int64)

    def reset(self, batch_size: int) -> None:
        # _context[k - 1, b]: id of the k-gram ending at stream b's last input (-1: unknown).
        self._context = np.full((max(self.order - 1, 0), batch_size), -1, dtype=np.int64)

    def _histories(self, inputs: np.ndarray) -> list[np.ndarray]:
        """Ids of the (k-1)-grams ending at each input, for k = 2..N (int64 ``[B, T]`` each),
        updating the carried context."""
        words = np.where(inputs == self.eos_id, self.start_id, inputs)
        histories = [words]
        for k, table in enumerate(self.tables[:-1], start=2):
            previous = np.concatenate([self._context[k - 2][:, None], histories[-1][:, :-1]], axis=1)
            grams = table.lookup(previous, words)
            histories.append(np.where(words == self.start_id, -1, grams))
        if self.order > 1:
            self._context = np.stack([history[:, -1] for history in histories])
        return histories

    def _probabilities(self, histories: list[np.ndarray], words: np.ndarray) -> np.ndarray:
        """``p(words | histories)``; ``histories`` and ``words`` broadcast together."""
        probabilities = self.unigram[words]
        for table, history in zip(self.tables, histories):
            probabilities = table.interpolate(history, words, probabilities)
        return probabilities

    def score(self, chunk: Chunk) -> ChunkScores:
        histories = self._histories(chunk.inputs)
        log_probs = np.log(self._probabilities(histories, chunk.targets))
        distributions = None
        if chunk.distribution_mask is not None:
            where = np.nonzero(chunk.distribution_mask)
            words = np.arange(self.vocab_size)[None, :]
            rows = self._probabilities([history[where][:, None] for history in histories], words)
            distributions = np.log(rows)
        return ChunkScores(log_probs, distributions)


@dataclasses.dataclass(frozen=True)
class KneserNeyArgs:
    """The plugin's ``--model-args``.

    Attributes:
        order: the n-gram order.
    """

    order: PositiveInt = 5


@declared_model_args("kneser_ney", KneserNeyArgs)
def load_model(
    dataset: Dataset, *, device: str, checkpoint: str | None, model_args: KneserNeyArgs
) -> KneserNeyModel:
    """Train an order-``order`` model on ``dataset``'s train split (``device`` is unused)."""
    if checkpoint is not None:
        raise PluginError("kneser_ney trains from the train split on load; it takes no --checkpoint")
    ids = dataset.tokens("train").ids
    return KneserNeyModel(ids, len(dataset.vocab), dataset.vocab.eos_id, model_args.order)
