"""Tuning dynamic evaluation: ``python -m baselines tune-dynamic`` and the tuning file it writes.

:func:`tune_dynamic` scores a split (never test: the command refuses it) once per point of a grid
of ``lr``, ``decay`` and ``segment`` with :class:`~baselines.dynamic_eval.DynamicLanguageModel`
exactly as the harness's evaluation feeds it (one stream, chunks of ``bptt``), and keeps the
setting of the lowest perplexity; the command records it in the checkpoint's tuning file
(``dynamic_eval.json`` beside it, :data:`baselines.tuning_files.DYNAMIC_EVAL`), under the key of
the base model and method (:meth:`BaseModel.key`), where the :mod:`baselines.dynamic_eval` plugin
reads it.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from typing import Any

import numpy as np

from baselines.dynamic_eval import PLUGIN, DynamicFactory
from baselines.models.dynamic import DynamicSettings
from harness.evaluate import evaluate
from harness.plugin import PluginError
from harness.protocol import EvaluationProtocol
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
    evaluation with ``settings``, scored by the harness's evaluation as ``harness eval
    --batch-size 1 --bptt BPTT`` scores it, without its audits (:func:`harness.evaluate.evaluate`);
    inf where an update diverged (the evaluation refuses a NaN or infinite log-probability, and
    a perplexity beyond a float)."""
    model = factory.model(settings)
    protocol = EvaluationProtocol(batch_size=1, bptt=bptt, audit_positions=0, causality_points=0)
    vocab = factory.dataset.vocab
    try:
        scored = evaluate(
            model,
            ids,
            eos_id=vocab.eos_id,
            vocab_size=len(vocab),
            protocol=protocol,
            name=PLUGIN,
            progress=False,
        )
    except PluginError:
        return math.inf
    return scored.perplexity


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
