"""The bridge between the baselines' torch modules and the harness's plugin protocol."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import torch

from baselines import checkpoint as checkpoints
from baselines.checkpoint import CheckpointedModel
from baselines.models import NeuralCache
from harness.plugin import Chunk, ChunkScores, ModelUnavailable


def detach_state(state: Any) -> Any:
    """The same nested tuples/lists of tensors, cut from the autograd graph."""
    if isinstance(state, torch.Tensor):
        return state.detach()
    if isinstance(state, tuple) and hasattr(state, "_fields"):  # a NamedTuple
        return type(state)(*(detach_state(item) for item in state))
    if isinstance(state, (list, tuple)):
        return type(state)(detach_state(item) for item in state)
    raise TypeError(f"cannot detach a {type(state).__name__}")


class TorchLanguageModel:
    """A harness :class:`~harness.LanguageModel` around a baseline module.

    The module's ``forward(inputs, targets, state, distribution_rows=...)`` returns an
    :class:`~baselines.models.LMOutput`; its ``initial_state(B, device)`` starts streams.
    """

    def __init__(
        self,
        module: CheckpointedModel | NeuralCache,
        device: str | torch.device,
        checkpoint: Path | None = None,
    ) -> None:
        self.module = module.to(device).eval()
        self.device = torch.device(device)
        self.checkpoint = None if checkpoint is None else str(checkpoint)  # for the result JSON
        self.num_parameters = sum(parameter.numel() for parameter in module.parameters())
        self.state: Any = None

    def reset(self, batch_size: int) -> None:
        self.state = self.module.initial_state(batch_size, self.device)

    @torch.inference_mode()
    def score(self, chunk: Chunk) -> ChunkScores:
        inputs = torch.from_numpy(chunk.inputs).to(self.device)
        targets = torch.from_numpy(chunk.targets).to(self.device)
        rows = (
            None
            if chunk.distribution_mask is None
            else torch.from_numpy(chunk.distribution_mask).to(self.device)
        )
        output = self.module(inputs, targets, self.state, distribution_rows=rows)
        self.state = output.state
        return ChunkScores(output.target_log_probs, output.distributions)


def resolve_checkpoint(kind: str, dataset: Any, checkpoint: str | None) -> Path:
    """``checkpoint``; else the best checkpoint ``baselines train`` wrote for this dataset; else
    the one shipped in the package (checked against its sha256), which is announced on stderr."""
    if checkpoint is not None:
        return Path(checkpoint)
    default = checkpoints.default_run_dir(kind, dataset.name) / checkpoints.BEST
    if default.is_file():
        return default
    packaged = checkpoints.packaged_checkpoint(kind, dataset.name)
    if packaged is None:
        raise ModelUnavailable(
            f"no trained {kind} for {dataset.name} (looked for {default} and a packaged one): run "
            f"`python -m baselines train {kind} --dataset {dataset.name}` or pass --checkpoint"
        )
    checkpoints.verify_packaged(packaged)
    print(
        f"{kind}: no --checkpoint and no trained run at {default}; using the packaged "
        f"{dataset.name} checkpoint {packaged}",
        file=sys.stderr,
    )
    return packaged


def load_plugin_model(kind: str, dataset: Any, *, device: str, checkpoint: str | None) -> TorchLanguageModel:
    """What the ``zoneout_lstm`` and ``pointer_sentinel`` plugins return."""
    path = resolve_checkpoint(kind, dataset, checkpoint)
    module, _ = checkpoints.load_model(path, dataset.vocab, kind=kind)
    return TorchLanguageModel(module, device, checkpoint=path)
