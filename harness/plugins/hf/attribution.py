"""Subwords and word-level tokens: tokenizing a detokenized text, and attributing each subword's
log-probability to the word-level token whose piece of the text holds its last character."""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

import numpy as np

from harness.plugins.hf.detokenize import Detokenized

SEGMENTATIONS = ("pieces", "natural")


@dataclasses.dataclass(frozen=True)
class TextScores:
    """A token stream scored by the model.

    Attributes:
        word_log_probs: float64 ``[N]``, each word-level token's summed subword log-probabilities.
        word_subwords: int64 ``[N]``, subwords attributed to each token.
        word_bytes: int64 ``[N]``, UTF-8 bytes of each token's piece of the text.
        word_straddling: int64 ``[N]``, subwords attributed to each token that begin in an
            earlier token's piece (always 0 with ``segmentation=pieces``).
    """

    word_log_probs: np.ndarray
    word_subwords: np.ndarray
    word_bytes: np.ndarray
    word_straddling: np.ndarray


def encode(backend: Any, text: Detokenized, segmentation: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Tokenize ``text`` with a ``tokenizers.Tokenizer``: the subword ids and the character
    offsets ``[start, end)`` of each in ``text`` (three int64 ``[M]``). ``natural``: the whole
    text at once; ``pieces``: each word-level token's piece on its own."""
    if segmentation == "natural":
        encoding = backend.encode(text.text, add_special_tokens=False)
        offsets = np.asarray(encoding.offsets, dtype=np.int64).reshape(-1, 2)
        return np.asarray(encoding.ids, dtype=np.int64), offsets[:, 0], offsets[:, 1]
    piece_starts = np.concatenate([[0], text.piece_ends[:-1]])
    pieces = [text.text[a:b] for a, b in zip(piece_starts, text.piece_ends)]
    encodings = backend.encode_batch(pieces, add_special_tokens=False)
    lengths = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(pieces))
    ids = np.fromiter(
        itertools.chain.from_iterable(e.ids for e in encodings), dtype=np.int64, count=int(lengths.sum())
    )
    offsets = np.fromiter(
        itertools.chain.from_iterable(itertools.chain.from_iterable(e.offsets) for e in encodings),
        dtype=np.int64,
        count=2 * len(ids),
    ).reshape(-1, 2)
    shift = np.repeat(piece_starts, lengths)
    return ids, offsets[:, 0] + shift, offsets[:, 1] + shift


def attribute(
    text: Detokenized, char_starts: np.ndarray, char_ends: np.ndarray, subword_log_probs: np.ndarray
) -> TextScores:
    """Each word-level token's share of the subwords of ``text``: the subwords (character offsets
    ``char_starts``, ``char_ends`` and log-probabilities ``subword_log_probs``, ``[M]`` each) whose
    last character lies in its piece."""
    count = len(text.piece_ends)
    owner = text.piece_of_char(np.maximum(char_ends - 1, char_starts))  # the last character's piece
    straddling = text.piece_of_char(char_starts) != owner
    piece_starts = np.concatenate([[0], text.piece_ends[:-1]])
    word_bytes = np.fromiter(
        (len(text.text[a:b].encode("utf-8")) for a, b in zip(piece_starts, text.piece_ends)),
        dtype=np.int64,
        count=count,
    )
    return TextScores(
        np.bincount(owner, weights=subword_log_probs, minlength=count),
        np.bincount(owner, minlength=count).astype(np.int64),
        word_bytes,
        np.bincount(owner[straddling], minlength=count).astype(np.int64),
    )
