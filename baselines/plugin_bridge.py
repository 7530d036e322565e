"""The bridge between the baselines' torch modules and the harness's plugin protocol."""

from __future__ import annotations

import logging
import math
import shlex
from pathlib import Path
from typing import Any

import torch

from baselines import checkpoint as checkpoints
from baselines.checkpoint import CheckpointedModel
from baselines.models import NeuralCache
from harness.datasets import Dataset
from harness.plugin import Chunk, ChunkScores, ModelUnavailable
from wikitext_toolkit_core.files import file_sha256

logger = logging.getLogger(__name__)


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
        calibration: dict[str, Any] | None = None,
    ) -> None:
        self.module = module.to(device).eval()
        self.device = torch.device(device)
        self.checkpoint = None if checkpoint is None else str(checkpoint)  # for the result JSON
        self.metadata = {} if checkpoint is None else _describe_checkpoint(checkpoint)
        if calibration is not None:  # what `baselines calibrate` fitted, as the checkpoint records it
            self.metadata["calibration"] = calibration
        self.num_parameters = sum(parameter.numel() for parameter in module.parameters())
        self.state: Any = None

    def reset(self, batch_size: int) -> None:
        self.state = self.module.initial_state(batch_size, self.device)

    def result_metadata(self) -> dict[str, Any]:
        """For the result JSON's ``plugin_metadata``: which checkpoint file was scored, and its
        ``calibration`` record when it has one."""
        return self.metadata

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


#: What a missing model's message proposes to train on a CPU: the ``tiny`` preset at batch 20 x
#: BPTT 35 (many updates per minute), stopped after :data:`CPU_RECIPE_MINUTES`; on PTB it lands
#: far below the unigram (README, "A first training run").
CPU_RECIPE_MINUTES = 5
CPU_RECIPE = [
    "--preset",
    "tiny",
    "--batch-size",
    "20",
    "--bptt",
    "35",
    "--max-minutes",
    str(CPU_RECIPE_MINUTES),
]
#: ... and on a GPU: the paper's ``medium`` preset, an hour at a time.
GPU_RECIPE_MINUTES = 60
GPU_RECIPE = ["--preset", "medium", "--device", "cuda", "--max-minutes", str(GPU_RECIPE_MINUTES)]
#: About how long a run takes beyond its ``--max-minutes``: start-up and the closing validation
#: (on a GPU; on a CPU see :func:`cpu_recipe_minutes`).
RECIPE_OVERHEAD_MINUTES = 2
#: The CPU recipe's closing validation is its softmax: one thread validates the ``tiny`` preset
#: at about this many (valid token x vocabulary word) per second (7.3e7 on PTB, 7.1e7 on
#: WikiText-2, CPU seconds on an AVX2 CPU; docs/measurements.md).
TINY_VALIDATION_RATE = 7e7


def cpu_recipe_minutes(valid_tokens: int, vocab_size: int) -> int:
    """About how long the CPU recipe runs on a dataset of ``valid_tokens`` validation tokens and
    ``vocab_size`` words: its ``--max-minutes``, a minute of start-up and the closing validation
    (7 minutes on PTB, 8 on WikiText-2, 20 on WikiText-103)."""
    validation_minutes = valid_tokens * vocab_size / TINY_VALIDATION_RATE / 60
    return CPU_RECIPE_MINUTES + 1 + math.ceil(validation_minutes)


def dataset_argument(dataset: Dataset) -> str:
    """What names ``dataset`` on a command line: its benchmark name, else its directory."""
    return dataset.name if dataset.canonical else str(dataset.directory)


def _describe_checkpoint(path: Path) -> dict[str, Any]:
    """Beside a result's ``checkpoint`` path: the file's sha256 and whether it is the one shipped
    in the package."""
    return {
        "checkpoint_sha256": file_sha256(path),
        "checkpoint_packaged": checkpoints.is_packaged(path),
    }


def resolve_checkpoint(
    kind: str, dataset: Dataset, checkpoint: str | None, *, device: str, command: list[str]
) -> Path:
    """The checkpoint of a ``kind`` model to load for ``dataset``: ``checkpoint`` when given, else
    the one shipped in the package (which :func:`checkpoints.load` checks against its sha256).

    A run that ``baselines train`` wrote is used only when named: it never silently replaces the
    packaged model. Without either, :class:`ModelUnavailable` says how to train one on this
    machine (``device``) and how to name it, in the user's ``command`` (its words, without
    ``--checkpoint``).
    """
    if checkpoint is not None:
        return Path(checkpoint)
    packaged = checkpoints.packaged_checkpoint(kind, dataset.name)
    if packaged is None:
        raise ModelUnavailable(_how_to_get(kind, dataset, device, command))
    return packaged


def announce_checkpoint(kind: str, path: Path) -> None:
    """Say in the log (INFO) which checkpoint file of a ``kind`` model is used (once it has loaded: an
    error stays one line)."""
    packaged = checkpoints.is_packaged(path)  # then PACKAGED/DATASET/KIND.pt
    where = f"the packaged {path.parent.name} checkpoint" if packaged else "checkpoint"
    logger.info("%s: using %s %s", kind, where, path)


def _how_to_get(kind: str, dataset: Dataset, device: str, command: list[str]) -> str:
    """The one-line message of a missing model: the command that trains one on this machine, with
    about how long it takes, and then the user's command naming the run's best weights."""
    best = checkpoints.default_run_dir(kind, dataset.name) / checkpoints.BEST
    named = f"`{shlex.join([*command, '--checkpoint', str(best)])}`"
    if best.is_file():
        return f"no packaged {kind} for {dataset.name}; your run's {best} is used only when named: {named}"
    if device.startswith("cuda"):
        recipe, minutes, machine = GPU_RECIPE, GPU_RECIPE_MINUTES + RECIPE_OVERHEAD_MINUTES, "this GPU"
    else:
        minutes = cpu_recipe_minutes(len(dataset.tokens("valid").ids), len(dataset.vocab))
        recipe, machine = CPU_RECIPE, "this CPU"
    train = shlex.join(
        ["python", "-m", "baselines", "train", kind, "--dataset", dataset_argument(dataset), *recipe]
    )
    return (
        f"no packaged {kind} for {dataset.name}: train one on {machine} in about {minutes} minutes "
        f"with `{train}` (rerun it to train on), then name it: {named}"
    )


def load_plugin_model(
    kind: str, dataset: Dataset, *, device: str, checkpoint: str | None
) -> TorchLanguageModel:
    """What the ``zoneout_lstm`` and ``pointer_sentinel`` plugins return."""
    command = ["python", "-m", "harness", "eval", f"baselines.{kind}", "--dataset", dataset_argument(dataset)]
    path = resolve_checkpoint(kind, dataset, checkpoint, device=device, command=command)
    module, payload = checkpoints.load_model(path, dataset.vocab, kind=kind)
    announce_checkpoint(kind, path)
    return TorchLanguageModel(module, device, checkpoint=path, calibration=payload.get("calibration"))
