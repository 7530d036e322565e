"""The ``hf`` plugin's model: a ``transformers`` causal LM that scores whole word-level streams."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from harness.plugin import Chunk, ChunkScores
from harness.plugins.hf.attribution import TextScores, attribute, encode
from harness.plugins.hf.detokenize import Detokenized, detokenize
from harness.plugins.hf.lm_eval_pages import LM_EVAL, lm_eval_page
from harness.plugins.hf.windows import WindowScorer


@dataclasses.dataclass(frozen=True)
class TextSettings:
    """How word-level tokens become the subwords the model reads.

    Attributes:
        detokenizer: the style of :mod:`harness.plugins.hf.detokenize`, or ``lm-eval``
            (:mod:`harness.plugins.hf.lm_eval_pages`).
        segmentation: ``pieces`` (each token's piece tokenized on its own) or ``natural`` (the
            whole text at once).
    """

    detokenizer: str
    segmentation: str


@dataclasses.dataclass
class _Tally:
    """What one pass (``reset`` to ``reset``) has scored, for :meth:`HFCausalLM.result_metadata`."""

    words: int = 0
    subwords: int = 0
    bytes: int = 0
    log_prob: float = 0.0
    straddling: int = 0

    def add(self, scores: TextScores) -> None:
        self.words += len(scores.word_log_probs)
        self.subwords += int(scores.word_subwords.sum())
        self.bytes += int(scores.word_bytes.sum())
        self.log_prob += float(scores.word_log_probs.sum())
        self.straddling += int(scores.word_straddling.sum())


class HFCausalLM:
    """A ``transformers`` causal LM behind the harness's whole-stream seam
    (:class:`harness.plugin.StreamScorer`; see :mod:`harness.plugins.hf`).

    Args:
        scorer: the network and its windows.
        tokenizer: the network's fast tokenizer.
        vocab: the word of each id of the dataset's vocabulary.
        text: the detokenizer and the segmentation.
        checkpoint: the model's directory or hub name, for the result.
    """

    def __init__(
        self,
        scorer: WindowScorer,
        tokenizer: Any,
        *,
        vocab: Sequence[str],
        text: TextSettings,
        checkpoint: str,
    ) -> None:
        self.scorer = scorer
        self.tokenizer = tokenizer
        self.vocab = vocab
        self.text = text
        self.checkpoint = checkpoint
        self.num_parameters = sum(p.numel() for p in scorer.network.parameters())
        self._tally = _Tally()

    def reset(self, batch_size: int) -> None:
        """Start tallying a new pass (nothing else carries over between streams)."""
        self._tally = _Tally()

    def score_stream(self, stream: Chunk) -> ChunkScores:
        """Score one whole stream (``[1, L]``): its targets, detokenized, from the model's start
        token (the word before the stream, ``stream.inputs[0, 0]``, is not read)."""
        scores = self.score_tokens(stream.targets[0])
        self._tally.add(scores)
        return ChunkScores(scores.word_log_probs[None, :], None)

    def result_metadata(self) -> dict[str, Any]:
        """Subword-level figures of the pass scored since the last ``reset`` (the harness calls
        this right after the evaluation's pass), and the settings."""
        tally, windows = self._tally, self.scorer.settings
        return {
            "scoring": "subword",
            "tokenizer": type(self.tokenizer).__name__,
            "detokenizer": self.text.detokenizer,
            "segmentation": self.text.segmentation,
            "max_context": windows.max_context,
            "stride": windows.stride,
            "window_batch": windows.window_batch,
            "word_tokens": tally.words,
            "subword_tokens": tally.subwords,
            "subword_perplexity": math.exp(-tally.log_prob / tally.subwords) if tally.subwords else None,
            "bytes": tally.bytes,
            "bits_per_byte": -tally.log_prob / math.log(2) / tally.bytes if tally.bytes else None,
            "straddling_subwords": tally.straddling,
            "audits": {
                "probability": "not applicable: no distribution over the word vocabulary",
                "causality": "applies",
            },
        }

    def score_tokens(self, ids: np.ndarray) -> TextScores:
        """Score a word-level token stream (int ``[N]`` ids of the dataset's vocabulary)."""
        words = [self.vocab[i] for i in ids]
        style = self.text.detokenizer
        text = lm_eval_page(words) if style == LM_EVAL else detokenize(words, style)
        subword_ids, char_starts, char_ends = self.tokenize(text)
        return attribute(text, char_starts, char_ends, self.scorer.score(subword_ids))

    def tokenize(self, text: Detokenized) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Subword ids and their character offsets in ``text`` (three int64 ``[M]``)."""
        return encode(self.tokenizer.backend_tokenizer, text, self.text.segmentation)
