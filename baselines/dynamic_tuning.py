"""Tuning dynamic evaluation: ``python -m baselines tune-dynamic`` and the tuning file it writes.

:func:`tune_dynamic` scores a split (never test: the command refuses it) once per point of a grid
of ``lr``, ``decay`` and ``segment`` with :class:`~baselines.dynamic_eval.DynamicLanguageModel`
exactly as the harness's evaluation feeds it (one stream, chunks of ``bptt``), and keeps the
setting of the lowest perplexity; the command writes it to ``dynamic_eval.json`` beside the
checkpoint, under the key of the base model and method (:meth:`BaseModel.key`), where the
:mod:`baselines.dynamic_eval` plugin reads it (:func:`record_tuning`, one writer at a time).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from baselines import checkpoint as checkpoints
from baselines.dynamic_eval import DynamicFactory, read_tuning_record
from baselines.models.dynamic import DynamicSettings
from harness.plugin import PluginError
from harness.results import portable_path
from harness.streams import stream_grid
from wikitext_toolkit_core.files import file_sha256, waiting_lock, write_atomically
from wikitext_toolkit_core.progress import progress_bar


@dataclasses.dataclass(frozen=True)
class DynamicGrid:
    """The settings :func:`tune_dynamic` searches: every ``(segment, lr, decay)`` triple.

    Attributes:
        method: ``sgd`` or ``rms``.
        lrs: the step sizes ``eta`` tried.
        decays: the decays ``lambda`` tried, each in [0, 1].
        segments: the positions per update tried.
        bptt: positions per chunk, as the evaluation's protocol sends them.
    """

    method: str
    lrs: list[float]
    decays: list[float]
    segments: list[int]
    bptt: int = 100


def perplexity(factory: DynamicFactory, settings: DynamicSettings, ids: np.ndarray, bptt: int) -> float:
    """The perplexity of ``ids`` (int ``[N]``, one stream from ``<eos>``) under dynamic
    evaluation with ``settings``, in chunks of ``bptt``."""
    model = factory.model(settings)
    grid = stream_grid(ids, eos_id=factory.dataset.vocab.eos_id, batch_size=1)
    model.reset(1)
    total = 0.0
    for block in grid.chunks(bptt):
        scores = model.score(block.chunk).target_log_probs.double().cpu().numpy()
        total += float(scores[block.chunk.mask].sum())
    model.reset(1)  # the trained weights back in the shared module
    with np.errstate(over="ignore", invalid="ignore"):
        return float(np.exp(-total / len(ids)))  # inf or NaN where an update diverged


def tune_dynamic(
    factory: DynamicFactory, ids: np.ndarray, grid: DynamicGrid, *, progress: bool = True
) -> dict[str, Any]:
    """Score ``ids`` (int ``[N]``) at every point of ``grid``; the best is the lowest perplexity.

    Returns:
        ``{"method", "static_perplexity", "grid": [{"lr", "decay", "segment", "perplexity"}, ...],
        "best": {"method", "lr", "decay", "segment", "perplexity"}, "tokens", "protocol"}``.
    """
    points = list(itertools.product(grid.segments, grid.lrs, grid.decays))
    static = perplexity(factory, DynamicSettings(grid.method, 0.0, 0.0, None), ids, grid.bptt)
    searched = []
    for segment, lr, decay in progress_bar(points, desc="tune-dynamic", unit="setting", show=progress):
        try:
            settings = DynamicSettings(grid.method, lr, decay, segment)
        except ValueError as error:
            raise PluginError(f"tune-dynamic: {error}") from None
        value = perplexity(factory, settings, ids, grid.bptt)
        searched.append({"lr": lr, "decay": decay, "segment": segment, "perplexity": value})
    finite = [point for point in searched if math.isfinite(point["perplexity"])]
    if not finite:
        raise PluginError("tune-dynamic: every setting of the grid gave a non-finite perplexity")
    best = min(finite, key=lambda point: point["perplexity"])
    return {
        "method": grid.method,
        "static_perplexity": static,
        "grid": searched,
        "best": {"method": grid.method, **best},
        "tokens": len(ids),
        "protocol": {"batch_size": 1, "bptt": grid.bptt},
    }


def record_tuning(
    output: Path, checkpoint: Path, dataset: str, key: str, best: dict[str, Any], search: dict[str, Any]
) -> None:
    """Write the ``best`` setting and the ``search`` of entry ``key`` (a :meth:`BaseModel.key`)
    into the tuning file ``output`` of ``checkpoint``, keeping the file's other entries where they
    were tuned on that checkpoint.

    The file is read again and replaced holding an ``flock`` on ``.NAME.lock`` beside it, for
    which a second ``tune-dynamic`` writing it (in this process or another) waits, so that
    neither drops the other's entry (a read-modify-write).
    """
    waiting = f"waiting for another `baselines tune-dynamic` to finish writing {output}"
    with waiting_lock(output.with_name(f".{output.name}.lock"), waiting):
        previous = read_tuning_record(output)
        if not checkpoints.tuned_on(previous, checkpoint):
            previous = {}
        searches = previous.get("searches")
        record = {
            "checkpoint": portable_path(checkpoint),
            "checkpoint_sha256": file_sha256(checkpoint),
            "dataset": dataset,
            "best": {**previous.get("best", {}), key: best},
            "searches": {**(searches if isinstance(searches, dict) else {}), key: search},
        }
        write_atomically(output, json.dumps(record, indent=2) + "\n")
