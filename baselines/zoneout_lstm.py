"""Harness plugin: the trained zoneout LSTM (the model: :mod:`baselines.models.zoneout`).

``python -m harness eval baselines.zoneout_lstm --dataset ptb`` loads the packaged checkpoint;
``--checkpoint CKPT`` any other, e.g. the ``best.pt`` of a run of
``python -m baselines train zoneout_lstm``, which is used only when named.
"""

from __future__ import annotations

from baselines.models import ZoneoutLSTM
from baselines.plugin_bridge import TorchLanguageModel, load_plugin_model
from harness.datasets import Dataset


def load_model(dataset: Dataset, *, device: str, checkpoint: str | None) -> TorchLanguageModel:
    """Harness factory: the trained zoneout LSTM for ``dataset`` (see the module docstring)."""
    return load_plugin_model(ZoneoutLSTM.kind, dataset, device=device, checkpoint=checkpoint)
