"""Harness plugin: the neural cache on a trained zoneout LSTM (the model:
:mod:`baselines.models.continuous_cache`).

``python -m harness eval baselines.neural_cache --dataset ptb --model-args window=2000`` wraps the
packaged zoneout LSTM (or the one ``--checkpoint`` names, e.g. a ``best.pt`` that ``baselines
train zoneout_lstm`` wrote) with a cache of ``window`` positions, with ``theta`` and
``interpolation`` (lambda) from ``--model-args`` or from the tuning file (``neural_cache.json``)
that ``python -m baselines tune`` (:mod:`baselines.tuning`) wrote beside the checkpoint.
"""

from __future__ import annotations

import dataclasses
import shlex
from pathlib import Path

from baselines import checkpoint as checkpoints
from baselines.models import NeuralCache, ZoneoutLSTM
from baselines.plugin_bridge import (
    TorchLanguageModel,
    announce_checkpoint,
    dataset_argument,
    resolve_checkpoint,
)
from baselines.tuning import read_tuning
from harness.datasets import Dataset
from harness.plugin import ModelUnavailable, PluginError, PositiveInt, declared_model_args
from wikitext_toolkit_core.result_schema import TEST_TIME_ADAPTATION

#: The cache's size when none is given (``--model-args window=``, ``analyze --window``).
DEFAULT_WINDOW = 100


def cache_from_checkpoint(
    checkpoint: Path,
    dataset: Dataset,
    window: int,
    *,
    theta: float | None = None,
    interpolation: float | None = None,
) -> NeuralCache:
    """A cache of ``window`` positions on the zoneout LSTM of ``checkpoint`` (checked against
    ``dataset``'s vocabulary), with ``theta`` and ``interpolation`` as given, else as tuned in
    the tuning file beside the checkpoint.

    Raises:
        ModelUnavailable: one is not given and the window was never tuned for this checkpoint
            (says how to tune it).
        PluginError: the settings are out of range.
    """
    lstm, _ = checkpoints.load_model(checkpoint, dataset.vocab, kind=ZoneoutLSTM.kind)
    assert isinstance(lstm, ZoneoutLSTM)  # load_model checked the kind
    if theta is None or interpolation is None:
        command = ["python", "-m", "baselines", "tune", "--dataset", dataset_argument(dataset)]
        command += ["--checkpoint", str(checkpoint), "--windows", str(window)]
        tuned = read_tuning(checkpoint, window, retune=command)
        if tuned is None:
            raise ModelUnavailable(
                f"no tuned neural cache for window {window} beside {checkpoint}: run "
                f"`{shlex.join(command)}` or give theta and interpolation"
            )
        theta = tuned["theta"] if theta is None else theta
        interpolation = tuned["interpolation"] if interpolation is None else interpolation
    try:
        return NeuralCache(lstm, window, theta, interpolation)
    except ValueError as error:
        raise PluginError(str(error)) from None


@dataclasses.dataclass(frozen=True)
class NeuralCacheArgs:
    """The plugin's ``--model-args``.

    Attributes:
        window: the cache's size, in positions.
        theta, interpolation: the cache's flatness and weight (lambda); None: as tuned.
    """

    window: PositiveInt = DEFAULT_WINDOW
    theta: float | None = None
    interpolation: float | None = None


@declared_model_args("neural_cache", NeuralCacheArgs)
def load_model(
    dataset: Dataset, *, device: str, checkpoint: str | None, model_args: NeuralCacheArgs
) -> TorchLanguageModel:
    """Harness factory: the zoneout LSTM for ``dataset`` with a cache of ``window`` positions."""
    window, theta, interpolation = model_args.window, model_args.theta, model_args.interpolation
    command = [
        "python",
        "-m",
        "harness",
        "eval",
        "baselines.neural_cache",
        "--dataset",
        dataset_argument(dataset),
    ]
    path = resolve_checkpoint(ZoneoutLSTM.kind, dataset, checkpoint, device=device, command=command)
    cache = cache_from_checkpoint(path, dataset, window, theta=theta, interpolation=interpolation)
    announce_checkpoint(ZoneoutLSTM.kind, path)
    model = TorchLanguageModel(cache, device, checkpoint=path)
    model.metadata[TEST_TIME_ADAPTATION] = cache_adaptation(window)
    return model


def cache_adaptation(window: int) -> str:
    """How a neural cache of ``window`` positions adapts, for the result's ``plugin_metadata``."""
    return f"a neural cache of the last {window} positions' hidden states"
