"""Analysis hooks: per-token pointer gates and the attention of the pointer or the cache.

Used by the leaderboard's plots (the pointer-gate histogram; attention views in the style of
the Pointer Sentinel paper's Figures 5-12).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from baselines.models import NeuralCache, PointerSentinelLSTM
from harness.datasets import Vocabulary
from harness.streams import stream_grid
from wikitext_toolkit_core.progress import progress_bar


@torch.inference_mode()
def analyze(
    module: PointerSentinelLSTM | NeuralCache,
    ids: np.ndarray,
    vocab: Vocabulary,
    *,
    span: tuple[int, int],
    bptt: int = 100,
    device: str | torch.device = "cpu",
    top: int = 10,
    progress: bool = True,
) -> dict[str, Any]:
    """Score ``ids`` as one stream (the papers' protocol) and collect what the model attends to.

    Args:
        module: a :class:`~baselines.models.PointerSentinelLSTM` or
            :class:`~baselines.models.NeuralCache`.
        span: ``[start, end)`` token positions whose attention is reported.
        top: attended words reported per position, by weight.

    Returns:
        ``gates``: float32 ``[N]`` sentinel gate ``g`` per token (None for the cache);
        ``log_probs``: float64 ``[N]``; ``span``: one dict per position of the span with the
        target word, its probability, the gate and the ``top`` attended words (summed over the
        window positions holding each word).
    """
    module = module.to(device).eval()
    grid = stream_grid(ids, eos_id=vocab.eos_id, batch_size=1)
    state = module.initial_state(1, device)
    gates, log_probs, records = [], [], []
    chunks = grid.chunks(bptt)
    for block in progress_bar(chunks, total=len(chunks), desc="analyze", unit="chunk", show=progress):
        begin, chunk = block.begin, block.chunk
        inputs = torch.from_numpy(chunk.inputs).to(device)
        targets = torch.from_numpy(chunk.targets).to(device)
        output = module(inputs, targets, state, analyze=True)
        state = output.state
        log_probs.append(output.target_log_probs[0].double().cpu())
        analysis = output.analysis
        if "gate" in analysis:
            gates.append(analysis["gate"][0].float().cpu())
        for offset in range(inputs.shape[1]):
            position = begin + offset
            if span[0] <= position < span[1]:
                records.append(
                    _record(
                        analysis,
                        offset,
                        position,
                        int(targets[0, offset].item()),
                        output.target_log_probs[0, offset].item(),
                        vocab,
                        top,
                    )
                )
    return {
        "gates": torch.cat(gates).numpy() if gates else None,
        "log_probs": torch.cat(log_probs).numpy(),
        "span": records,
    }


def _record(
    analysis: dict[str, torch.Tensor],
    offset: int,
    position: int,
    target: int,
    log_prob: float,
    vocab: Vocabulary,
    top: int,
) -> dict[str, Any]:
    if "window_ids" in analysis:  # the pointer: weights per window slot
        weights, words = analysis["attention"][0, offset], analysis["window_ids"][0, offset]
    else:  # the cache: weights per key, keyed by the word that followed it
        weights, words = analysis["attention"][0, offset], analysis["key_targets"][0]
    present = (words >= 0) & (weights > 0)
    mass: dict[int, float] = {}
    for word, weight in zip(words[present].tolist(), weights[present].tolist()):
        mass[word] = mass.get(word, 0.0) + weight
    ranked = sorted(mass.items(), key=lambda item: -item[1])[:top]
    record = {
        "position": position,
        "target": vocab.tokens[target],
        "probability": float(np.exp(log_prob)),
        "attended": [[vocab.tokens[word], weight] for word, weight in ranked],
    }
    if "gate" in analysis:
        record["gate"] = float(analysis["gate"][0, offset])
    return record


def attention_record(
    found: dict[str, Any], *, model: str, checkpoint: Path, dataset: str, split: str, span: tuple[int, int]
) -> dict[str, Any]:
    """The ``--save-attention`` file's content: the positions of ``span`` that :func:`analyze`
    found (``found["span"]``), with the model, checkpoint and dataset split they come from."""
    return {
        "model": model,
        "checkpoint": str(checkpoint),
        "dataset": dataset,
        "split": split,
        "span": list(span),
        "positions": found["span"],
    }
