"""``hf``: any Hugging Face ``transformers`` causal LM, scored on the word-level benchmarks.

``python -m harness eval hf --model-args model=PATH_OR_NAME,max_context=1024,stride=512``
(install with ``pip install -e ".[hf]"``). For each word-level token stream the plugin:

1. **Detokenizes** the tokens into running text (:mod:`harness.plugins.hf.detokenize`:
   ``wikitext`` for WikiText and builder corpora, ``ptb`` for PTB, chosen from the dataset's file
   layout unless ``detokenizer=`` says otherwise). Token ``t`` owns one *piece* of the text (its
   separator and surface form). ``<unk>`` is scored as the literal text ``<unk>``.
2. **Tokenizes** the text into subwords ``s_1 .. s_M``, with character offsets (a fast tokenizer
   is required). ``segmentation=pieces`` (default) tokenizes every piece on its own, so no
   subword crosses a word-token boundary and the text up to token ``t`` is tokenized the same
   whatever follows: the scores are exactly causal. ``segmentation=natural`` tokenizes the whole
   text at once (the model's usual tokenization, as lm-evaluation-harness does); a subword may
   then cover the end of one word-level token and the start of the next (GPT-2's pre-tokenizer
   cuts `` <unk>,`` into `` <``, ``unk``, ``>,``), which makes the earlier token's score depend
   on the next one, and the harness's causality audit can reject that: use it with
   ``--causality-audit 0``.
3. **Scores** ``[BOS] s_1 .. s_M`` with sliding windows of ``max_context`` positions advancing by
   ``stride``: the first window scores ``s_1 .. s_max_context`` from BOS; window ``j >= 1`` reads
   ``x_{j*stride} ..`` and scores the next ``stride`` subwords, so every subword sees at least
   ``max_context - stride + 1`` earlier positions and never a later one. Where a subword's
   context starts depends only on its index, never on the text's length. ``stride =
   max_context`` gives disjoint windows (contexts of 1 .. ``max_context``). Windows are run
   ``window_batch`` at a time, always ``max_context`` long (the last one padded on the right,
   which a causal model ignores), so a score never depends on how much text follows.
4. **Attributes** each subword's log-probability to the word-level token whose piece holds the
   subword's last character (its offsets). The word-level token's log-probability is the sum of
   its subwords', so the harness's sum over the ``N`` word-level tokens is exactly the model's
   log-probability of the subword sequence, and the per-token file, the bootstrap and the
   frequency buckets work as for any plugin.

The harness's perplexity is then ``exp(-log p(text) / N)``, per word-level token of the
benchmark (``<eos>`` included): the Megatron-LM convention. :meth:`HFCausalLM.result_metadata`
adds, under ``plugin_metadata`` in the result JSON, the subword count and perplexity
(``exp(-log p / M)``), bits per UTF-8 byte of the text (``-log2 p / bytes``), the detokenizer,
segmentation, window and stride, and which audits apply: the probability audit cannot (no
distribution over the word vocabulary), the causality audit does.

Scoring is precomputed per stream: on the first chunk after ``reset``, the plugin finds the split
(test, valid, then train up to :data:`TRAIN_SEARCH_BYTES`) whose streams begin with the tokens fed
so far and scores each whole stream once; chunks are then served from it while they match, and
the search is repeated with all the tokens fed when they stop matching (two splits can share
their first chunk). Streams that match no split (the causality audit's pass, from its first
substituted token on) are scored from the tokens fed so far ("live"), at most :data:`LIVE_LIMIT`
tokens: the audit of a longer split fails, and such a split is scored with the audit off.
"""

from __future__ import annotations

import dataclasses
import inspect
import itertools
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch

from core.files import DatasetError
from harness.datasets import Dataset
from harness.plugin import Chunk, ChunkScores, PluginError, positive_int_arg
from harness.plugins.hf.detokenize import STYLES, Detokenized, detokenize
from harness.streams import stream_bounds

#: Longest stream (word-level tokens) scored live, i.e. re-scored from its start at each chunk.
LIVE_LIMIT = 5000
#: Train splits larger than this are not searched for the stream being scored.
TRAIN_SEARCH_BYTES = 64 << 20
SEGMENTATIONS = ("pieces", "natural")
#: Tokens whose pieces a tokenizer must reproduce when they are tokenized one by one.
_PROBE = (
    "=",
    "=",
    "Probe",
    "=",
    "=",
    "<eos>",
    "<eos>",
    "The",
    "cat",
    "'s",
    "role",
    "@-@",
    "playing",
    "(",
    "<unk>",
    ")",
    ",",
    "1",
    "@,@",
    "000",
    ".",
    "<eos>",
)
DTYPES = ("float32", "bfloat16", "float16")


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


@dataclasses.dataclass
class _Pass:
    """What one stream set (``reset`` to ``reset``) has scored, for :meth:`result_metadata`."""

    words: int = 0
    subwords: int = 0
    bytes: int = 0
    log_prob: float = 0.0
    straddling: int = 0

    def add(self, scores: TextScores, begin: int, end: int) -> None:
        self.words += end - begin
        self.subwords += int(scores.word_subwords[begin:end].sum())
        self.bytes += int(scores.word_bytes[begin:end].sum())
        self.log_prob += float(scores.word_log_probs[begin:end].sum())
        self.straddling += int(scores.word_straddling[begin:end].sum())


@dataclasses.dataclass
class _Stream:
    """One stream: the tokens fed so far and, while they match it, its precomputed scores."""

    fed: list[int]
    reference_ids: np.ndarray | None = None
    reference: TextScores | None = None


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


def window_plan(num_subwords: int, max_context: int, stride: int) -> list[tuple[int, int, int]]:
    """The windows over positions ``0 .. M`` (``x_0`` = BOS, ``x_p`` = subword ``p``).

    Returns ``(input_start, first_target, end_target)`` per window: it reads
    ``x[input_start : end_target - 1]`` (at most ``max_context`` positions) and scores the
    targets ``first_target .. end_target - 1``. The first window starts at 0 and scores up to
    ``max_context`` targets; window ``j >= 1`` starts at ``j * stride`` and scores ``stride``.
    """
    plan = []
    first, end = 1, min(max_context, num_subwords) + 1
    start = 0
    while first < end:
        plan.append((start, first, end))
        start += stride
        first, end = end, min(start + max_context, num_subwords) + 1
    return plan


class HFCausalLM:
    """A ``transformers`` causal LM behind the harness's plugin protocol (module docstring)."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        dataset: Dataset,
        detokenizer: str,
        segmentation: str,
        max_context: int,
        stride: int,
        window_batch: int,
        bos_id: int,
        device: str,
        checkpoint: str,
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.dataset = dataset
        self.detokenizer = detokenizer
        self.segmentation = segmentation
        self.max_context = max_context
        self.stride = stride
        self.window_batch = window_batch
        self.bos_id = bos_id
        self.device = device
        self.checkpoint = checkpoint
        self.num_parameters = sum(p.numel() for p in model.parameters())
        self._takes_logits_to_keep = "logits_to_keep" in inspect.signature(model.forward).parameters
        self._references: dict[tuple[str, int, int], TextScores] = {}
        self._streams: list[_Stream] = []
        self._searching = True
        self._passes: list[_Pass] = []

    # --- the plugin protocol -----------------------------------------------------------------

    def reset(self, batch_size: int) -> None:
        self._streams = [_Stream([]) for _ in range(batch_size)]
        self._searching = True
        self._passes.append(_Pass())

    def score(self, chunk: Chunk) -> ChunkScores:
        begins = [len(stream.fed) for stream in self._streams]
        matching = True
        for row, stream in enumerate(self._streams):
            new = chunk.targets[row][chunk.mask[row]]  # padding only follows the real positions
            matching &= stream.reference_ids is not None and np.array_equal(
                stream.reference_ids[len(stream.fed) : len(stream.fed) + len(new)], new
            )
            stream.fed.extend(int(token) for token in new)
        if not matching and self._searching:
            self._bind_references()
        log_probs = np.zeros(chunk.targets.shape)
        current = self._passes[-1]
        for row, (stream, begin) in enumerate(zip(self._streams, begins)):
            end = len(stream.fed)
            scores = stream.reference
            if scores is None:
                if end > LIVE_LIMIT:
                    raise PluginError(
                        f"hf: a stream of {end} tokens that is no split of the dataset (test, "
                        f"valid, and train up to {TRAIN_SEARCH_BYTES >> 20} MiB are searched); "
                        f"live scoring stops at {LIVE_LIMIT} tokens: the causality audit's pass, "
                        "with its substituted tokens, is such a stream beyond them, so score a "
                        "split longer than that with --causality-audit 0 (the result is marked "
                        "unaudited)"
                    )
                scores = self.score_tokens(np.asarray(stream.fed))
            log_probs[row, : end - begin] = scores.word_log_probs[begin:end]
            current.add(scores, begin, end)
        return ChunkScores(log_probs, None)

    def result_metadata(self) -> dict[str, Any]:
        """Subword-level figures of the last pass scored (the harness calls this right after the
        evaluation's pass), and the settings."""
        scored = self._passes[-1] if self._passes else _Pass()
        self._passes.clear()
        return {
            "scoring": "subword",
            "tokenizer": type(self.tokenizer).__name__,
            "detokenizer": self.detokenizer,
            "segmentation": self.segmentation,
            "max_context": self.max_context,
            "stride": self.stride,
            "window_batch": self.window_batch,
            "word_tokens": scored.words,
            "subword_tokens": scored.subwords,
            "subword_perplexity": (math.exp(-scored.log_prob / scored.subwords) if scored.subwords else None),
            "bytes": scored.bytes,
            "bits_per_byte": (-scored.log_prob / math.log(2) / scored.bytes if scored.bytes else None),
            "straddling_subwords": scored.straddling,
            "audits": {
                "probability": "not applicable: no distribution over the word vocabulary",
                "causality": "applies",
            },
        }

    # --- scoring -----------------------------------------------------------------------------

    def score_tokens(self, ids: np.ndarray) -> TextScores:
        """Score a word-level token stream (int ``[N]`` ids of ``dataset.vocab``)."""
        vocab = self.dataset.vocab.tokens
        text = detokenize((vocab[i] for i in ids), self.detokenizer)
        subword_ids, char_starts, char_ends = self.tokenize(text)
        subword_log_probs = self.score_subwords(subword_ids)
        owner = text.piece_of_char(np.maximum(char_ends - 1, char_starts))  # last character
        straddling = text.piece_of_char(char_starts) != owner
        count = len(ids)
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

    def tokenize(self, text: Detokenized) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Subword ids and their character offsets in ``text`` (three int64 ``[M]``)."""
        return encode(self.tokenizer.backend_tokenizer, text, self.segmentation)

    def score_subwords(self, subword_ids: np.ndarray) -> np.ndarray:
        """float64 ``[M]``: ``log p(s_p | x_a .. x_{p-1})`` of each subword (windows of
        :func:`window_plan`; ``x_0`` is BOS)."""
        positions = np.concatenate([[self.bos_id], subword_ids]).astype(np.int64)
        padded = np.concatenate([positions, np.full(self.max_context, self.bos_id, np.int64)])
        scores = np.empty(len(subword_ids))
        with torch.inference_mode():
            for group in self.window_groups(len(subword_ids)):
                keep = self._logits_needed(group[0])
                inputs = torch.from_numpy(
                    np.stack(  # [windows, max_context]
                        [padded[start : start + self.max_context] for start, _, _ in group]
                    )
                )
                inputs = inputs.to(self.device)
                if self._takes_logits_to_keep:
                    logits = self.model(input_ids=inputs, logits_to_keep=keep).logits
                else:
                    logits = self.model(input_ids=inputs).logits[:, self.max_context - keep :]
                logits = logits.float()  # [windows, keep, vocabulary]
                normalizers = torch.logsumexp(logits, dim=-1)  # [windows, keep]
                # Target x_p of a window is predicted at input index p - start - 1, kept logit
                # p - first_kept; the targets of all the windows are gathered at once.
                targets = np.concatenate([np.arange(first, end) for _, first, end in group])
                rows = np.concatenate(
                    [np.full(end - first, row) for row, (_, first, end) in enumerate(group)]
                )
                offset = 1 + self.max_context - keep  # first kept logit predicts x_{start+offset}
                first_kept = np.concatenate(
                    [np.full(end - first, start + offset) for start, first, end in group]
                )
                rows_t, kept_t, ids_t = (
                    torch.from_numpy(array).to(self.device)
                    for array in (rows, targets - first_kept, positions[targets])
                )
                log_probs = logits[rows_t, kept_t, ids_t] - normalizers[rows_t, kept_t]
                scores[targets - 1] = log_probs.double().cpu().numpy()
        return scores

    def window_groups(self, num_subwords: int) -> list[list[tuple[int, int, int]]]:
        """The windows of :func:`window_plan`, in the batches they run in: up to
        ``window_batch`` consecutive windows that need the same number of logits."""
        groups: list[list[tuple[int, int, int]]] = []
        for window in window_plan(num_subwords, self.max_context, self.stride):
            if (
                groups
                and len(groups[-1]) < self.window_batch
                and self._logits_needed(groups[-1][0]) == self._logits_needed(window)
            ):
                groups[-1].append(window)
            else:
                groups.append([window])
        return groups

    def _logits_needed(self, window: tuple[int, int, int]) -> int:
        """Logits kept for a window: all ``max_context`` for the first, ``stride`` for the
        others (fixed, so that the computation never depends on the text's length)."""
        return self.max_context if window[0] == 0 else self.stride

    # --- which split is being scored -----------------------------------------------------------

    def _bind_references(self) -> None:
        """Bind every stream to the split whose streams begin with all the tokens fed so far
        (scoring that split once), or, where none does, score them live from now on: a prefix
        that no split has stays so however it grows."""
        batch = len(self._streams)
        for split in self._candidate_splits():
            ids = self.dataset.tokens(split).ids
            if len(ids) < batch:
                continue
            starts, lengths = stream_bounds(len(ids), batch)
            if all(
                len(stream.fed) <= length and np.array_equal(ids[start : start + len(stream.fed)], stream.fed)
                for start, length, stream in zip(starts, lengths, self._streams)
            ):
                for row, (start, length, stream) in enumerate(zip(starts, lengths, self._streams)):
                    key = (split, batch, row)
                    stream.reference_ids = ids[start : start + length]
                    if key not in self._references:
                        self._references[key] = self.score_tokens(stream.reference_ids)
                    stream.reference = self._references[key]
                return
        self._searching = False
        for stream in self._streams:
            stream.reference_ids = stream.reference = None

    def _candidate_splits(self) -> list[str]:
        splits = []
        for split in ("test", "valid", "train"):
            try:
                size = self.dataset.path(split).stat().st_size
            except (DatasetError, OSError):
                continue
            if split != "train" or size <= TRAIN_SEARCH_BYTES:
                splits.append(split)
        return splits


# --- loading ---------------------------------------------------------------------------------


def _default_detokenizer(dataset: Dataset) -> str:
    test_file = dataset.split_files.get("test", "")
    return "ptb" if test_file.startswith("ptb.") else "wikitext"


def _load_error(name: str, error: Exception) -> PluginError:
    path = Path(name).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            return PluginError(f"hf: {name} has no config.json: not a model saved with save_pretrained")
        return PluginError(f"hf: cannot load the model in {name}: {_first_line(error)}")
    if path.exists():
        return PluginError(f"hf: {name} is a file; model= takes a directory or a hub name")
    if name.startswith((".", "/", "~")) or name.count("/") > 1:
        return PluginError(f"hf: no such model directory: {name}")
    if os.environ.get("HF_HUB_OFFLINE"):
        reason = " (offline: HF_HUB_OFFLINE is set, so only models already in the cache load)"
    else:
        reason = f": {_first_line(error)}"
    return PluginError(
        f"hf: {name!r} is neither a local directory nor a model on the Hugging Face Hub{reason}"
    )


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _check_tokenizer(tokenizer: Any, name: str, segmentation: str) -> None:
    """Refuse a tokenizer that makes no subwords of text (a directory without its tokenizer's
    files loads an empty one), and, with ``pieces``, one that does not reproduce text tokenized
    piece by piece (one that adds a prefix to each input, as SentencePiece's "first" Metaspace
    does, or drops characters)."""
    text = detokenize(_PROBE, "wikitext")
    ids, _, _ = encode(tokenizer.backend_tokenizer, text, segmentation)
    if len(ids) == 0:
        raise PluginError(
            f"hf: the tokenizer of {name} makes no subwords of text: is it the model's own tokenizer "
            "(tokenizer.json or the files its tokenizer class reads)?"
        )
    if segmentation != "pieces":
        return
    decoded = tokenizer.decode(ids.tolist(), clean_up_tokenization_spaces=False)
    if decoded != text.text:
        raise PluginError(
            f"hf: the tokenizer of {name} does not reproduce text tokenized piece "
            f"by piece ({text.text[:24]!r} -> {decoded[:24]!r}); use "
            "segmentation=natural"
        )


def _check_embeddings(tokenizer: Any, network: Any, name: str) -> None:
    """Refuse a tokenizer with ids beyond the model's input embeddings (another model's)."""
    rows = network.get_input_embeddings().num_embeddings
    if len(tokenizer) > rows:
        raise PluginError(
            f"hf: the tokenizer of {name} has {len(tokenizer):,} subwords, the model embeddings for "
            f"{rows:,}: they are not one model's"
        )


def _available_memory(device: str) -> int | None:
    """Free bytes where the weights will live: the accelerator's, else the host's."""
    if device.startswith("cuda"):
        return torch.cuda.mem_get_info(torch.device(device))[0]
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _check_fits(config: Any, dtype: Any, device: str, name: str) -> None:
    """Refuse a model whose weights alone exceed the free memory, before loading them."""
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        skeleton = AutoModelForCausalLM.from_config(config)
    needed = sum(p.numel() for p in skeleton.parameters()) * dtype.itemsize
    available = _available_memory(device)
    if available is not None and needed > available:
        raise PluginError(
            f"hf: {name} needs {needed / 2**30:.1f} GiB for its weights in {dtype} "
            f"but {device} has {available / 2**30:.1f} GiB free"
        )


def _checked_options(
    dataset: Dataset,
    *,
    max_context: int,
    stride: int,
    window_batch: int,
    detokenizer: str,
    segmentation: str,
    dtype: str,
    trust_remote_code: bool,
) -> tuple[str, torch.dtype]:
    """:func:`load_model`'s options, checked: refuses any that is out of range or unknown;
    returns the detokenizer style (``auto``: the dataset's own) and the torch dtype."""
    for option, value in (("max_context", max_context), ("stride", stride), ("window_batch", window_batch)):
        positive_int_arg("hf", option, value)
    if not isinstance(trust_remote_code, bool):
        raise PluginError(f"hf: trust_remote_code must be true or false, got {trust_remote_code!r}")
    if stride > max_context:
        raise PluginError(f"hf: stride ({stride}) must not exceed max_context ({max_context})")
    if detokenizer == "auto":
        detokenizer = _default_detokenizer(dataset)
    if detokenizer not in STYLES:
        raise PluginError(f"hf: unknown detokenizer {detokenizer!r} (auto, {', '.join(STYLES)})")
    if segmentation not in SEGMENTATIONS:
        raise PluginError(f"hf: unknown segmentation {segmentation!r} ({', '.join(SEGMENTATIONS)})")
    if dtype not in DTYPES:
        raise PluginError(f"hf: unknown dtype {dtype!r} ({', '.join(DTYPES)})")
    return detokenizer, getattr(torch, dtype)


def _start_token(tokenizer: Any, name: str) -> int:
    """The id the scored text starts with: the tokenizer's BOS, else its EOS; refuses a
    tokenizer that gives no character offsets (not a fast one)."""
    if not tokenizer.is_fast:
        raise PluginError(
            f"hf: the tokenizer of {name} ({type(tokenizer).__name__}) gives no "
            "character offsets; the plugin needs a fast (tokenizers) tokenizer"
        )
    bos_id = tokenizer.bos_token_id
    if bos_id is None:
        bos_id = tokenizer.eos_token_id
    if bos_id is None:
        raise PluginError(
            f"hf: the tokenizer of {name} has neither a BOS nor an EOS token to start the text with"
        )
    return int(bos_id)


def _check_context(config: Any, max_context: int, name: str) -> None:
    """Refuse windows longer than the model's positions (when its config gives their number)."""
    limit = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
    if limit is not None and max_context > limit:
        raise PluginError(f"hf: max_context {max_context} exceeds the {limit} positions of {name}")


def load_model(
    dataset: Dataset,
    *,
    device: str,
    checkpoint: str | None,
    model: str | None = None,
    max_context: int = 1024,
    stride: int = 512,
    window_batch: int = 8,
    detokenizer: str = "auto",
    segmentation: str = "pieces",
    dtype: str = "float32",
    trust_remote_code: bool = False,
) -> HFCausalLM:
    """Load a causal LM (``model=`` a ``save_pretrained`` directory or a hub name, or
    ``--checkpoint DIR``) and its tokenizer; see the module docstring for the arguments."""
    try:
        import transformers
    except ImportError:
        raise PluginError('hf: needs transformers: pip install -e ".[hf]"') from None
    if (model is None) == (checkpoint is None):
        raise PluginError(
            "hf: name the model once: --model-args model=PATH_OR_HUB_NAME (or --checkpoint PATH)"
        )
    name = str(model if model is not None else checkpoint)
    detokenizer, torch_dtype = _checked_options(
        dataset,
        max_context=max_context,
        stride=stride,
        window_batch=window_batch,
        detokenizer=detokenizer,
        segmentation=segmentation,
        dtype=dtype,
        trust_remote_code=trust_remote_code,
    )
    try:
        config = transformers.AutoConfig.from_pretrained(name, trust_remote_code=trust_remote_code)
        tokenizer = transformers.AutoTokenizer.from_pretrained(name, trust_remote_code=trust_remote_code)
    except (OSError, ValueError, KeyError) as error:
        raise _load_error(name, error) from None
    bos_id = _start_token(tokenizer, name)
    _check_tokenizer(tokenizer, name, segmentation)
    _check_context(config, max_context, name)
    try:
        _check_fits(config, torch_dtype, device, name)
        network = transformers.AutoModelForCausalLM.from_pretrained(
            name, dtype=torch_dtype, trust_remote_code=trust_remote_code
        )
    except (OSError, ValueError, KeyError) as error:
        raise _load_error(name, error) from None
    _check_embeddings(tokenizer, network, name)
    network.to(device).eval()  # type: ignore[arg-type]  # transformers' decorated .to() hides its signature
    return HFCausalLM(
        network,
        tokenizer,
        dataset=dataset,
        detokenizer=detokenizer,
        segmentation=segmentation,
        max_context=max_context,
        stride=stride,
        window_batch=window_batch,
        bos_id=bos_id,
        device=device,
        checkpoint=name,
    )
