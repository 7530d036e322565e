"""Harness plugin: the trained Pointer Sentinel-LSTM (the model: :mod:`baselines.models.pointer`).

``python -m harness eval baselines.pointer_sentinel --dataset ptb`` loads the packaged checkpoint;
``--checkpoint CKPT`` any other, e.g. the ``best.pt`` of a run of
``python -m baselines train pointer_sentinel``, which is used only when named.
"""

from __future__ import annotations

from baselines.models import PointerSentinelLSTM
from baselines.plugin_bridge import TorchLanguageModel, load_plugin_model
from harness.datasets import Dataset


def load_model(dataset: Dataset, *, device: str, checkpoint: str | None) -> TorchLanguageModel:
    """Harness factory: the trained Pointer Sentinel-LSTM for ``dataset``."""
    return load_plugin_model(PointerSentinelLSTM.kind, dataset, device=device, checkpoint=checkpoint)
