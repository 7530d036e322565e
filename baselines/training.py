"""Training with the papers' recipe: resumable, time-boxed, optionally distributed.

Recipe (Merity et al. 2016, after Zaremba et al. 2014): batch 32, truncated BPTT over chunks of
100, SGD on the loss averaged over every position of a chunk, learning rate 20, gradient-norm
clipping at 0.25 (so a step moves the weights by at most 5), the learning rate halved whenever an
epoch's validation perplexity is not a new best, and a stop after 3 such epochs in a row or 64
epochs. The Pointer Sentinel-LSTM's own parameters (query projection and sentinel) train at 0.05
times the learning rate: at full rate its sentinel gate saturates at 1 within 25 steps and the
pointer never recovers (``benchmarks/pointer_gate.py``). ``--loss sum`` (summed over positions,
averaged over streams, as in Zaremba et al.'s code) with learning rate 1 and clipping at 1 keeps
the gate alive too, but trains the network far more slowly (``docs/measurements.md``, "The training recipe").

Resumption is exact: every random mask of step ``k`` of epoch ``e`` comes from a generator
seeded with ``(seed, e, k, rank)``, and a checkpoint holds the weights, the optimizer, the
schedule, the carried hidden state and the position in the data, so a run that is stopped
(``--max-minutes``, ``--max-steps``, Ctrl-C, SIGTERM; or killed, from its last periodic
checkpoint) and restarted with the same command ends with the same weights as an uninterrupted
run. After a stop by signal ``baselines train`` exits 128 plus the signal's number (130, 143), as a
shell reports it, so that ``train && eval`` does not go on with a half-trained model; a planned
stop exits 0.

The parts: this module holds the settings (:class:`TrainOptions`, :class:`Session`), one step's
pieces and :class:`Trainer`, whose loop (:meth:`Trainer._train`) reads top to bottom; the run
directory's files and resume rules are :mod:`baselines.run_directory`'s, the learning-rate
schedule :mod:`baselines.schedule`'s, and what the processes of a ``torchrun`` share
:mod:`baselines.processes`'.
"""

from __future__ import annotations

import dataclasses
import math
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from tqdm import tqdm

from baselines import checkpoint as checkpoints
from baselines.models import PointerSentinelLSTM, UnigramSampler
from baselines.plugin_bridge import TorchLanguageModel, detach_state
from baselines.processes import Processes
from baselines.run_directory import RunDirectory
from baselines.schedule import Schedule, apply_learning_rate, learning_rate_schedule
from harness.datasets import Dataset, Vocabulary
from harness.evaluate import evaluate
from harness.plugin import PluginError
from harness.protocol import EvaluationProtocol
from wikitext_toolkit_core.errors import ToolkitError
from wikitext_toolkit_core.files import file_sha256
from wikitext_toolkit_core.progress import progress_bar

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
    oneDNN has no bfloat16 kernels (x86 without AVX-512, as torch's own check reads it), where
    a training step under autocast is many times slower than in float32 (11.6x measured on an
    AVX2 CPU, docs/measurements.md)."""
    return device == "cpu" and not torch.ops.mkldnn._is_mkldnn_bf16_supported()


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


class _StopRequest:
    """Turns SIGINT/SIGTERM into a flag checked between steps, so a stop is always clean;
    ``signum`` is the signal received, None while there is none."""

    def __init__(self) -> None:
        self.signum: int | None = None

    def __enter__(self) -> _StopRequest:
        self.previous = {}
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                self.previous[signum] = signal.signal(signum, self._handle)
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        self.signum = signum

    def __exit__(self, *exc: Any) -> None:
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)


class EpochBar:
    """The progress bar of the epoch in progress, with the epoch's training perplexity so far;
    closed at the epoch's end and on a stop (``show``: whether to draw it at all)."""

    def __init__(self, steps_per_epoch: int, show: bool) -> None:
        self.steps_per_epoch, self.show = steps_per_epoch, show
        self.bar: tqdm[Any] | None = None

    def __enter__(self) -> EpochBar:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()  # on an error too, before the error's line

    def open(self, epoch: int, step: int) -> None:
        """Show epoch ``epoch`` from step ``step`` on, unless its bar is open already."""
        if self.bar is None:
            self.bar = progress_bar(
                total=self.steps_per_epoch, initial=step, desc=f"epoch {epoch}", unit="step", show=self.show
            )

    def advance(self, train_ppl: float) -> None:
        """Count a step of the open bar's epoch."""
        assert self.bar is not None, "open() comes first"
        self.bar.set_postfix(ppl=f"{train_ppl:.1f}", refresh=False)
        self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def copy_weights(path: Path, model: checkpoints.CheckpointedModel, vocab: Vocabulary) -> dict[str, Any]:
    """Load into ``model`` another trained model's weights, of the same sizes and ``vocab``: all
    of them when it is of the same kind (e.g. a packaged model, trained further), else the layers
    the two share (``model.core``: embedding, LSTM layers, decoder), e.g. a Pointer Sentinel-LSTM
    from a zoneout LSTM's ``best.pt``, whose query and sentinel keep their fresh initialization.
    Returns what a run records of its source: path, SHA-256, kind, validation perplexity, the
    layers copied."""
    donor, payload = checkpoints.load_model(path, vocab=vocab)
    whole = payload["kind"] == model.kind
    source, target = (donor, model) if whole else (donor.core, model.core)
    theirs, mine = source.state_dict(), target.state_dict()
    if theirs.keys() != mine.keys() or any(theirs[name].shape != mine[name].shape for name in mine):
        sizes = ("embedding_size", "hidden_size", "num_layers", "tie_weights")
        raise TrainingError(
            f"--init-from {path}: its {payload['kind']} model does not have this model's layers "
            f"({', '.join(f'{name} {getattr(donor.config, name)}' for name in sizes)} against "
            f"{', '.join(str(getattr(model.config, name)) for name in sizes)})"
        )
    target.load_state_dict(theirs)
    return {
        "checkpoint": str(path),
        "sha256": file_sha256(path),
        "kind": payload["kind"],
        "valid_perplexity": payload.get("valid_perplexity", payload.get(checkpoints.PACKAGED_PERPLEXITY)),
        "layers": "all" if whole else "shared",
    }


def validation_perplexity(
    model: checkpoints.CheckpointedModel,
    valid_ids: np.ndarray,
    vocab: Vocabulary,
    options: TrainOptions,
    session: Session,
) -> tuple[float, str]:
    """``model``'s perplexity on the valid split ``valid_ids`` under the harness's protocol (batch
    ``options.eval_batch_size``); NaN and the harness's reason where it refuses the model's scores
    (NaN or infinite log-probabilities, a perplexity beyond a float: the weights diverged). The
    model is left in training mode."""
    device = next(model.parameters()).device
    try:
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=session.amp):
            result = evaluate(
                TorchLanguageModel(model, device),
                valid_ids,
                eos_id=vocab.eos_id,
                vocab_size=len(vocab),
                protocol=EvaluationProtocol(
                    batch_size=options.eval_batch_size,
                    bptt=options.bptt,
                    audit_positions=0,
                    causality_points=0,  # the run's own model; harness eval audits what it scores
                ),
                name="valid",
                progress=session.progress,
            )
    except PluginError as error:
        return math.nan, f"validation refused: {error}"
    finally:
        model.train()
    return result.perplexity, ""


class Trainer:
    """One training run: the model, its optimizer, where the run stands (:class:`Progress`) and
    the loop that trains it (:meth:`run`). Its files are a :class:`RunDirectory`'s, its learning
    rate :func:`learning_rate_schedule`'s, its processes a :class:`Processes`'."""

    def __init__(self, options: TrainOptions, session: Session, dataset: Dataset, run_dir: Path) -> None:
        self.options, self.session, self.dataset = options, session, dataset
        self.processes = Processes.current()
        if options.batch_size % self.processes.world:
            raise TrainingError(
                f"batch size {options.batch_size} is not divisible by the {self.processes.world} processes"
            )
        self.directory = RunDirectory(run_dir, writer=self.processes.writes)
        self.device = torch.device(session.device)
        check_model_fits(options.kind, options.model_config, self.device)
        torch.manual_seed(options.seed)
        self.model = checkpoints.build_model(options.kind, options.model_config).to(self.device)
        if session.compile:
            self.model.core.compile_step()
        self.optimizer = torch.optim.SGD(
            parameter_groups(self.model, options.pointer_lr_scale), lr=options.learning_rate
        )
        self.progress = Progress()
        local = options.batch_size // self.processes.world
        train_ids = dataset.tokens("train").ids
        streams = training_streams(train_ids, options.batch_size)
        self.sampler = (
            UnigramSampler(train_ids, len(dataset.vocab), options.sampled_softmax)
            if options.sampled_softmax
            else None
        )
        rank = self.processes.rank
        self.streams = streams[rank * local : (rank + 1) * local].to(self.device)
        self.chunks = math.ceil((self.streams.shape[1] - 1) / options.bptt)
        self.valid_ids = dataset.tokens("valid").ids  # an empty split fails here, before training
        self.state: Any = self.model.initial_state(local, self.device)
        self.network = self.processes.wrap(self.model, self.device)
        self.generator = torch.Generator(device=self.device)
        self.stop_signal: int | None = None  # set by run(): the signal that stopped it, if any
        self.stop_unvalidated = False  # set by resume(): a kill cut short the validation of its stop
        self.initialized_from: dict[str, Any] | None = None  # see initialize_from; kept in checkpoints

    @property
    def schedule(self) -> Schedule:
        return learning_rate_schedule(self.progress.valid_history, self.options)

    def identity(self) -> dict[str, Any]:
        """What a resumed run must share with the run that wrote the checkpoint."""
        return {"options": dataclasses.asdict(self.options), "world_size": self.processes.world}

    # ----------------------------------------------------------------- resuming and saving
    def resume(self) -> bool:
        """Continue from the run directory's checkpoint, if it has one (True when it did), under
        :mod:`baselines.run_directory`'s rules."""
        payload = self.directory.load_checkpoint(self.dataset.vocab)
        if payload is not None:
            self._check_identity(_with_default_options(payload["training"]["identity"]))
            self.model.load_state_dict(payload["model"])
            self.optimizer.load_state_dict(payload["training"]["optimizer"])
            self.initialized_from = payload["training"].get("initialized_from")
            self.progress = Progress(**payload["training"]["progress"])
            best_file = self.directory.best_perplexity()  # newer than the checkpoint after a kill
            self.progress.best_file_valid = min(self.progress.best_file_valid, best_file)
            states = payload["training"]["states"]
            self.state = self.model.restore_state(_to_device(states[self.processes.rank], self.device))
        self.directory.drop_log_records_beyond(len(self.progress.valid_history), self.progress.next_chunk)
        if payload is not None and payload["training"].get("stopped", False):
            validated = self.directory.logged_validation(self.progress.epoch, self.progress.next_chunk)
            self.stop_unvalidated = not validated
        return payload is not None

    def _check_identity(self, saved: dict[str, Any]) -> None:
        """Refuse a checkpoint written with other options or another number of processes."""
        mine = self.identity()
        if saved == mine:
            return
        names = set(saved["options"]) | set(mine["options"])
        changed = sorted(name for name in names if saved["options"].get(name) != mine["options"].get(name))
        if saved["world_size"] != mine["world_size"]:
            changed.append("world_size")
        raise TrainingError(
            f"{self.directory.path} holds a run with different settings ({', '.join(changed)}): "
            "rerun it with its own settings or choose another --output-dir"
        )

    def initialize_from(self, path: Path) -> None:
        """Start this new run from another trained model's weights (see :func:`copy_weights`)."""
        self.initialized_from = copy_weights(path, self.model, self.dataset.vocab)

    def save(self, stopped: bool = False) -> None:
        """Write ``checkpoint.pt`` (all processes join; process 0 writes); ``stopped``: a stop
        writes it, and the validation of its weights follows (see :meth:`resume`)."""
        states = self.processes.gather(_to_device(detach_state(self.state), "cpu"))
        if not self.processes.writes:
            return
        payload = checkpoints.model_payload(self.model, self.dataset.vocab, self.dataset.name)
        payload["training"] = {
            "identity": self.identity(),
            "optimizer": self.optimizer.state_dict(),
            "progress": dataclasses.asdict(self.progress),
            "states": states,
            "initialized_from": self.initialized_from,
            "stopped": stopped,
        }
        self.directory.write_checkpoint(payload)

    # ----------------------------------------------------------------- the loop
    def run(self) -> str:
        """Train until the recipe's end or a stop; returns why it ended. A SIGINT or SIGTERM
        stops it at the next step boundary, with a checkpoint, and is kept in ``stop_signal``."""
        show = self.session.progress and self.processes.writes
        with _StopRequest() as stop, EpochBar(self.chunks, show) as bar:
            try:
                return self._train(stop, bar)
            finally:
                self.stop_signal = stop.signum

    def _train(self, stop: _StopRequest, bar: EpochBar) -> str:
        """The loop: a step at a time, the epoch's end once its last step is taken, a checkpoint
        every ``checkpoint_minutes``, a validation every ``validate_every`` steps, until the
        schedule finishes or a stop (``--max-minutes``, ``--max-steps``, a signal) comes; first,
        the validation of the last stop, where a kill cut it short."""
        self.model.train()
        if self.stop_unvalidated:
            self._validate_partial()
        began = last_save = time.monotonic()
        steps_taken = 0
        apply_learning_rate(self.optimizer.param_groups, self.schedule.learning_rate)
        while not self.schedule.finished:
            if self.progress.next_chunk == self.chunks:
                bar.close()
                self._end_epoch()
                self.save()
                last_save = time.monotonic()
                continue
            bar.open(self.progress.epoch, self.progress.next_chunk)
            reason = self._stop_reason(began, stop)
            if reason is not None:
                bar.close()
                return self._stop(reason, steps_taken)
            self._step()
            steps_taken += 1
            bar.advance(perplexity(self.progress.epoch_loss, self.progress.epoch_tokens))
            if self._validation_due():
                self._validate_partial()
            if time.monotonic() - last_save >= self.session.checkpoint_minutes * 60:
                self.save()
                last_save = time.monotonic()
        return (
            f"finished after {self.progress.epoch - 1} epochs; best validation perplexity "
            f"{self.progress.best_file_valid:.2f}"
        )

    def _stop(self, reason: str, steps_taken: int) -> str:
        """Save and validate where the run stopped (unless this invocation took no step: the last
        stop wrote it all, and :meth:`_train` began with its validation where a kill had cut that
        short); returns the stop's message."""
        if steps_taken > 0 or self._run_steps() == 0:
            self.save(stopped=True)
            if not self._validation_due():  # else this step was validated already
                self._validate_partial()
        again = "a larger --max-steps" if reason.startswith("--max-steps") else "the same command"
        return (
            f"{reason}: stopped in epoch {self.progress.epoch} at step "
            f"{self.progress.next_chunk}/{self.chunks}; rerun with {again} to continue"
        )

    def _step(self) -> None:
        """One optimizer step on the epoch's next chunk, counted in the epoch's figures."""
        began, chunk, bptt = time.monotonic(), self.progress.next_chunk, self.options.bptt
        inputs = self.streams[:, chunk * bptt : (chunk + 1) * bptt]
        targets = self.streams[:, chunk * bptt + 1 : (chunk + 1) * bptt + 1]
        inputs = inputs[:, : targets.shape[1]]
        self.generator.manual_seed(
            step_seed(self.options.seed, self.progress.epoch, chunk, self.processes.rank)
        )
        sample = None
        if self.sampler is not None and self._run_steps() < self.options.sampled_softmax_steps:
            sample = self.sampler.draw(self.sample_generator(chunk), self.device)
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.session.amp):
            output = self.network(inputs, targets, self.state, self.generator, vocab_sample=sample)
        nll = -output.target_log_probs.float()  # [B, T]
        loss = chunk_loss(output, self.options.loss)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        gradient_norm = nn.utils.clip_grad_norm_(self.model.parameters(), self.options.clip)
        self.optimizer.step()
        self._stop_if_diverged(loss, gradient_norm, chunk)  # after the step: no GPU sync before it
        self.state = detach_state(output.state)
        self.progress.next_chunk += 1
        self.progress.epoch_loss += float(nll.detach().sum())
        self.progress.epoch_tokens += nll.numel()
        self.progress.epoch_seconds += time.monotonic() - began

    def sample_generator(self, chunk: int) -> torch.Generator:
        """The CPU generator of chunk ``chunk``'s sampled words: seeded like its masks, and the
        same in every process (one draw serves all streams of a step)."""
        seed = step_seed(self.options.seed, self.progress.epoch, chunk, SAMPLED_WORDS_STREAM)
        return torch.Generator().manual_seed(seed)

    def _stop_if_diverged(self, loss: torch.Tensor, gradient_norm: torch.Tensor, chunk: int) -> None:
        """Raise :meth:`_diverged` when chunk ``chunk``'s training loss or gradient norm (scalars) is
        inf or NaN in any process: the run stops and saves nothing of the weights that step made."""
        finite = torch.isfinite(loss.detach()) & torch.isfinite(gradient_norm)
        if self.processes.any((~finite).to(torch.int32).view(1)):
            raise self._diverged(chunk + 1, "a loss or gradient that is not finite")

    def _diverged(self, step: int, what: str) -> TrainingError:
        """The error that stops a diverged run at ``step`` of this epoch, ``what`` saying how it
        showed; the run directory keeps what it held (the last good ``checkpoint.pt`` and ``best.pt``)."""
        return TrainingError(
            f"training diverged in epoch {self.progress.epoch} at step {step}/{self.chunks} ({what}): "
            f"train with a lower --lr than {self.options.learning_rate:g} (in another --output-dir "
            "once this one holds a checkpoint)"
        )

    def _run_steps(self) -> int:
        """The training steps this run has taken, over all its invocations."""
        return (self.progress.epoch - 1) * self.chunks + self.progress.next_chunk

    def _stop_reason(self, began: float, stop: _StopRequest) -> str | None:
        """Why the run stops before its next step (the same in every process), None to go on."""
        reason = None
        if stop.signum is not None:
            reason = f"{signal.Signals(stop.signum).name} received"
        elif self.session.max_steps is not None and self._run_steps() >= self.session.max_steps:
            reason = f"--max-steps {self.session.max_steps} reached"
        elif (
            self.session.max_minutes is not None and time.monotonic() - began >= self.session.max_minutes * 60
        ):
            reason = f"--max-minutes {self.session.max_minutes:g} reached"
        if self.processes.world == 1:  # nothing to agree on, and no device sync at every step
            return reason
        flag = torch.tensor([0 if reason is None else 1], device=self.device)  # nccl: on the GPU
        if self.processes.any(flag) and reason is None:
            reason = "another process stopped"
        return reason

    # ----------------------------------------------------------------- validation and the log
    def validate(self) -> float:
        """Validation perplexity under the harness's protocol (batch ``eval_batch_size``),
        computed by process 0 and shared with the others."""
        value = torch.zeros(1, dtype=torch.float64, device=self.device)
        refusal = "no finite validation perplexity"  # what the other processes know of it
        if self.processes.writes:
            perplexity_or_nan, refusal = validation_perplexity(
                self.model, self.valid_ids, self.dataset.vocab, self.options, self.session
            )
            value[0] = perplexity_or_nan
        self.processes.share_first(value)
        if math.isnan(value.item()):
            raise self._diverged(self.progress.next_chunk, refusal)
        return float(value.item())

    def _end_epoch(self) -> None:
        """Validate the epoch's weights, log the epoch, and start the next one from a fresh state
        at the rate the schedule now gives."""
        progress = self.progress
        valid_ppl = self.validate()
        improved = valid_ppl < self.schedule.best_valid
        self._keep_if_best(valid_ppl)
        progress.total_seconds += progress.epoch_seconds
        self._log(
            {
                "epoch": progress.epoch,
                "partial": False,
                **self._figures(valid_ppl),
                "total_seconds": progress.total_seconds,
                "best": improved,
                **self._sampled_steps_record(),
            }
        )
        progress.valid_history.append(valid_ppl)
        apply_learning_rate(self.optimizer.param_groups, self.schedule.learning_rate)
        progress.next_chunk = 0
        progress.epoch_loss = progress.epoch_seconds = 0.0
        progress.epoch_tokens = 0
        self.state = self.model.initial_state(self.streams.shape[0], self.device)

    def _validation_due(self) -> bool:
        """Whether ``--validate-every`` asks for a validation after the step just taken (never
        after an epoch's last step: the epoch's end validates)."""
        every, step = self.session.validate_every, self.progress.next_chunk
        return every is not None and step % every == 0 and step < self.chunks

    def _validate_partial(self) -> None:
        """Validate the current weights mid-epoch, on a stop (so ``best.pt`` is never older than
        the training) and every ``--validate-every`` steps; a new best is written to ``best.pt``
        with a checkpoint. The schedule is untouched, so resuming stays exact."""
        if self.progress.next_chunk == 0:
            return
        valid_ppl = self.validate()
        improved = self._keep_if_best(valid_ppl)  # before the record: a rerun lacking it validates again
        self._log(
            {
                "epoch": self.progress.epoch,
                "partial": True,
                "step": self.progress.next_chunk,
                "steps_per_epoch": self.chunks,
                **self._figures(valid_ppl),
                **self._sampled_steps_record(),
            }
        )
        if improved:
            self.save()

    def _keep_if_best(self, valid_ppl: float) -> bool:
        """Write the weights to ``best.pt`` when ``valid_ppl`` is the run's best so far; whether
        they were."""
        if valid_ppl >= self.progress.best_file_valid:
            return False
        self.progress.best_file_valid = valid_ppl
        payload = checkpoints.model_payload(self.model, self.dataset.vocab, self.dataset.name)
        payload["valid_perplexity"] = valid_ppl
        self.directory.write_best(payload)
        return True

    def _figures(self, valid_ppl: float) -> dict[str, Any]:
        """A log record's figures of the epoch so far, beside its validation perplexity."""
        progress = self.progress
        return {
            "train_ppl": perplexity(progress.epoch_loss, progress.epoch_tokens),
            "valid_ppl": valid_ppl,
            "learning_rate": self.schedule.learning_rate,
            "tokens_per_second": progress.epoch_tokens * self.processes.world / progress.epoch_seconds,
            "device": self.session.device,
            "threads": torch.get_num_threads(),
            "amp": self.session.amp,
            "seconds": progress.epoch_seconds,
        }

    def _log(self, record: dict[str, Any]) -> None:
        """Append a validation's ``record`` to ``log.jsonl`` and print it in a line (process 0)."""
        if not self.processes.writes:
            return
        self.directory.append_log(record)
        where = f"epoch {record['epoch']}" + (
            f", step {record['step']}/{record['steps_per_epoch']}" if record["partial"] else " done"
        )
        tqdm.write(
            f"{where}: valid perplexity {record['valid_ppl']:.2f} (train {record['train_ppl']:.2f}, "
            f"learning rate {record['learning_rate']:g})",
            file=sys.stderr,
        )

    def _sampled_steps_record(self) -> dict[str, int]:
        """For a run with a sampled-softmax phase, a log record's ``sampled_steps``: how many of
        this epoch's steps so far trained with it (their ``train_ppl`` is the sampled estimate)."""
        if not self.options.sampled_softmax:
            return {}
        before = (self.progress.epoch - 1) * self.chunks
        return {
            "sampled_steps": max(
                0, min(self.progress.next_chunk, self.options.sampled_softmax_steps - before)
            )
        }


def _with_default_options(identity: dict[str, Any]) -> dict[str, Any]:
    """A checkpoint's identity with the options added since it was written at their defaults
    (which reproduce the behaviour of the code that wrote it)."""
    defaults = {
        field.name: field.default
        for field in dataclasses.fields(TrainOptions)
        if field.default is not dataclasses.MISSING
    }
    return {**identity, "options": {**defaults, **identity["options"]}}


def _to_device(state: Any, device: torch.device | str) -> Any:
    """The state as nested lists of tensors on ``device`` (what ``weights_only`` can load)."""
    if isinstance(state, torch.Tensor):
        return state.to(device)
    return [_to_device(item, device) for item in state]
