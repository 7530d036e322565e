"""Training with the papers' recipe: its settings and the pieces of a step.

Recipe (Merity et al. 2016, after Zaremba et al. 2014): batch 32, truncated BPTT over chunks of
100, SGD on the loss averaged over every position of a chunk, learning rate 20, gradient-norm
clipping at 0.25 (so a step moves the weights by at most 5), the learning rate halved whenever an
epoch's validation perplexity is not a new best, and a stop after 3 such epochs in a row or 64
epochs. The Pointer Sentinel-LSTM's own parameters (query projection and sentinel) train at 0.05
times the learning rate: at full rate its sentinel gate saturates at 1 within 25 steps and the
pointer never recovers (``benchmarks/pointer_gate.py``). ``--loss sum`` (summed over positions,
averaged over streams, as in Zaremba et al.'s code) with learning rate 1 and clipping at 1 keeps
the gate alive too, but trains the network far more slowly (``docs/measurements.md``, "The training recipe").

This module holds the settings (:class:`TrainOptions`, :class:`Session`, :data:`PRESETS`), where a
run stands (:class:`Progress`) and one step's pieces; :class:`baselines.trainer.Trainer` trains
with them.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import torch
from torch import nn

from baselines import checkpoint as checkpoints
from baselines.models import PointerSentinelLSTM
from baselines.models.cpu_products import onednn_bfloat16
from wikitext_toolkit_core.errors import ToolkitError

#: Model hyper-parameters of each preset (the pointer adds ``window``).
PRESETS: dict[str, dict[str, Any]] = {
    "medium": {
        "embedding_size": 650,
        "hidden_size": 650,
        "num_layers": 2,
        "dropout": 0.5,
        "zoneout_hidden": 0.1,
        "zoneout_cell": 0.1,
    },
    "small": {
        "embedding_size": 200,
        "hidden_size": 200,
        "num_layers": 2,
        "dropout": 0.3,
        "zoneout_hidden": 0.05,
        "zoneout_cell": 0.05,
    },
    # The CPU preset: the best PTB validation perplexity reachable in 90 minutes on one core.
    "cpu": {
        "embedding_size": 200,
        "hidden_size": 200,
        "num_layers": 2,
        "dropout": 0.2,
        "zoneout_hidden": 0.05,
        "zoneout_cell": 0.05,
    },
    "tiny": {
        "embedding_size": 64,
        "hidden_size": 64,
        "num_layers": 2,
        "dropout": 0.1,
        "zoneout_hidden": 0.05,
        "zoneout_cell": 0.05,
    },
}


@dataclasses.dataclass(frozen=True)
class TrainOptions:
    """Everything that defines a training run; a resumed run must repeat these exactly.

    ``sampled_softmax`` words drawn per step train the run's first ``sampled_softmax_steps``
    steps with a sampled softmax (:mod:`baselines.models.sampled_softmax`); the rest, and every
    validation, use the full softmax. 0 and 0: the full softmax throughout.
    """

    kind: str
    model_config: dict[str, Any]
    batch_size: int = 32
    bptt: int = 100
    learning_rate: float = 20.0
    clip: float = 0.25
    loss: str = "mean"
    pointer_lr_scale: float = 0.05
    decay: float = 0.5
    patience: int = 3
    max_epochs: int = 64
    anneal_from: int = 0
    seed: int = 1
    eval_batch_size: int = 10
    sampled_softmax: int = 0
    sampled_softmax_steps: int = 0

    def __post_init__(self) -> None:
        if self.loss not in LOSS_REDUCTIONS:
            raise TrainingError(f"loss reduction {self.loss!r} is not one of {', '.join(LOSS_REDUCTIONS)}")
        if (self.sampled_softmax > 0) != (self.sampled_softmax_steps > 0):
            raise TrainingError(
                "--sampled-softmax and --sampled-softmax-steps go together: the words drawn per "
                "step and the run's first steps trained that way"
            )
        self._check_learning_rate()

    def _check_learning_rate(self) -> None:
        """Refuse a step size beyond the largest float32, which the weights are in (torch would
        fail on it in the first step): the learning rate, and for the pointer its own parameters'
        rate, ``pointer_lr_scale`` times it, where that is larger."""
        scaled = self.kind == PointerSentinelLSTM.kind and self.pointer_lr_scale > 1
        rate = self.learning_rate * (self.pointer_lr_scale if scaled else 1.0)
        if not rate <= LARGEST_FLOAT32:
            given = f"--lr {self.learning_rate:g}"
            if scaled:
                given += f" times --pointer-lr-scale {self.pointer_lr_scale:g}"
            raise TrainingError(
                f"{given}: a step size beyond {LARGEST_FLOAT32:.3g}, the largest float32, which the "
                "weights are in; choose a smaller --lr"
            )


def bfloat16_is_emulated(device: str) -> bool:
    """Whether bfloat16 autocast on ``device`` runs without native support: on a CPU whose
    oneDNN has no bfloat16 kernels (:func:`~baselines.models.cpu_products.onednn_bfloat16`), where
    a training step under autocast is many times slower than in float32 (11.6x measured on an
    AVX2 CPU, docs/measurements.md)."""
    return device == "cpu" and not onednn_bfloat16()


@dataclasses.dataclass(frozen=True)
class Session:
    """How this invocation runs; free to change between a run's invocations."""

    device: str = "cpu"
    amp: bool = False
    compile: bool = False
    max_minutes: float | None = None
    max_steps: int | None = None
    checkpoint_minutes: float = 10.0
    validate_every: int | None = None
    progress: bool = True


#: The largest float32 number: no weight (float32) can be stepped by more than it times a gradient.
LARGEST_FLOAT32 = float(torch.finfo(torch.float32).max)

#: How a chunk's per-position losses become the loss: ``sum`` over positions (averaged over
#: streams) or ``mean`` over all positions.
LOSS_REDUCTIONS = ("sum", "mean")


class TrainingError(ToolkitError):
    """A run that cannot start or continue; the message is one line."""


@dataclasses.dataclass
class Progress:
    """Where a run stands; saved in every training checkpoint."""

    valid_history: list[float] = dataclasses.field(default_factory=list)
    next_chunk: int = 0
    best_file_valid: float = math.inf
    epoch_loss: float = 0.0
    epoch_tokens: int = 0
    epoch_seconds: float = 0.0
    total_seconds: float = 0.0

    @property
    def epoch(self) -> int:
        """The epoch in progress, counted from 1."""
        return len(self.valid_history) + 1

    def run_steps(self, steps_per_epoch: int) -> int:
        """The training steps the run has taken, over all its invocations."""
        return (self.epoch - 1) * steps_per_epoch + self.next_chunk

    def finish_epoch(self, valid_ppl: float) -> None:
        """Count the epoch in progress as done, its validation perplexity ``valid_ppl``, and
        start the next at its first step."""
        self.total_seconds += self.epoch_seconds
        self.valid_history.append(valid_ppl)
        self.next_chunk = 0
        self.epoch_loss = self.epoch_seconds = 0.0
        self.epoch_tokens = 0


#: Bytes a float32 parameter costs in training: its value and its gradient.
TRAINING_BYTES_PER_PARAMETER = 2 * checkpoints.WEIGHT_BYTES


def check_model_fits(kind: str, model_config: dict[str, Any], device: torch.device) -> None:
    """Refuse, before any allocation, a model whose weights and gradients alone exceed the
    device's memory (``--model-args hidden_size=100000``), or whose sizes no tensor can have
    (``hidden_size=1000000000``), by :func:`checkpoints.check_fits`'s rule."""
    try:
        checkpoints.check_fits(
            kind, model_config, device, TRAINING_BYTES_PER_PARAMETER, "for its weights and gradients alone"
        )
    except ValueError as error:
        raise TrainingError(f"{error}: choose smaller --model-args sizes") from None


def chunk_loss(output: Any, reduction: str) -> torch.Tensor:
    """The training loss of one chunk (a scalar) from a model's ``LMOutput``: the target NLL
    plus the auxiliary (pointer) loss at each of the ``[B, T]`` positions, summed over positions
    and averaged over streams (``sum``) or averaged over every position (``mean``)."""
    per_position = -output.target_log_probs.float()
    if output.auxiliary_loss is not None:
        per_position = per_position + output.auxiliary_loss.float()
    return per_position.sum(dim=1).mean() if reduction == "sum" else per_position.mean()


def perplexity(nll: float, tokens: int) -> float:
    """``exp(nll / tokens)``, the perplexity of ``tokens`` targets of summed NLL ``nll``; inf where
    that exceeds a float (a diverging run)."""
    try:
        return math.exp(nll / tokens)
    except OverflowError:
        return math.inf


def parameter_groups(model: nn.Module, pointer_lr_scale: float) -> list[dict[str, Any]]:
    """SGD parameter groups, each with its ``lr_scale``: the pointer's own parameters (query
    projection and sentinel, :meth:`PointerSentinelLSTM.pointer_parameters`) at
    ``pointer_lr_scale`` times the learning rate, everything else at 1x.

    With steps of up to 5 (learning rate 20, clipping at 0.25) on the pointer's parameters the
    sentinel gate saturates at 1 within 25 steps and the pointer never recovers; at 0.05x it stays
    input-dependent (``docs/measurements.md``, "The training recipe").
    """
    own = model.pointer_parameters() if isinstance(model, PointerSentinelLSTM) else []
    own_ids = {id(parameter) for parameter in own}
    rest = [parameter for parameter in model.parameters() if id(parameter) not in own_ids]
    groups = [{"params": rest, "lr_scale": 1.0}]
    if own:
        groups.append({"params": own, "lr_scale": pointer_lr_scale})
    return groups


def step_seed(seed: int, epoch: int, chunk: int, stream: int) -> int:
    """The seed of one training step's random draws: the masks of process ``stream`` (its
    rank), or the sampled words of every process (``SAMPLED_WORDS_STREAM``)."""
    return int(np.random.SeedSequence([seed, epoch, chunk, stream]).generate_state(1)[0])


#: The ``stream`` of :func:`step_seed` that seeds a step's sampled words (no process has this rank).
SAMPLED_WORDS_STREAM = 2**31


def training_streams(ids: np.ndarray, batch_size: int) -> torch.Tensor:
    """int64 ``[B, n + 1]``: ``B`` contiguous streams of the train split, the tail of
    ``len(ids) % B`` tokens dropped; inputs are ``[:, :-1]``, targets ``[:, 1:]``."""
    per_stream = (len(ids) - 1) // batch_size
    if per_stream < 2:
        raise TrainingError(f"train split has {len(ids)} tokens: too few for batch {batch_size}")
    starts = np.arange(batch_size) * per_stream
    return torch.from_numpy(ids[starts[:, None] + np.arange(per_stream + 1)].astype(np.int64))


def divergence(
    progress: Progress, step: int, steps_per_epoch: int, learning_rate: float, what: str
) -> TrainingError:
    """The error that stops a diverged run at ``step`` of the epoch in progress, ``what`` saying how
    it showed; the run directory keeps what it held (the last good ``checkpoint.pt`` and ``best.pt``)."""
    return TrainingError(
        f"training diverged in epoch {progress.epoch} at step {step}/{steps_per_epoch} ({what}): "
        f"train with a lower --lr than {learning_rate:g} (in another --output-dir "
        "once this one holds a checkpoint)"
    )
