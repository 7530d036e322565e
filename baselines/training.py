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
stop exits 0. One ``baselines train`` at a time writes a run directory (process 0 holds its lock).
Under ``torchrun`` each of the ``W`` processes trains ``B / W`` of the streams
(DistributedDataParallel, ``gloo`` on CPU, ``nccl`` on GPU).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from tqdm import tqdm

from baselines import checkpoint as checkpoints
from baselines.models import PointerSentinelLSTM, UnigramSampler
from baselines.plugin_bridge import TorchLanguageModel, detach_state
from harness.datasets import Dataset
from harness.evaluate import evaluate
from harness.plugin import PluginError
from harness.protocol import EvaluationProtocol
from wikitext_toolkit_core.errors import ToolkitError
from wikitext_toolkit_core.files import (
    exclusive_directory,
    file_sha256,
    remove_stale_temporaries,
    write_atomically,
)
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


#: How a chunk's per-position losses become the loss: ``sum`` over positions (averaged over
#: streams) or ``mean`` over all positions.
LOSS_REDUCTIONS = ("sum", "mean")


class TrainingError(ToolkitError):
    """A run that cannot start or continue; the message is one line."""


@dataclasses.dataclass(frozen=True)
class Schedule:
    """The learning-rate schedule's state after some epochs (see :func:`learning_rate_schedule`)."""

    learning_rate: float
    best_valid: float
    epochs_without_improvement: int
    finished: bool


def learning_rate_schedule(valid_history: list[float], options: TrainOptions) -> Schedule:
    """The schedule after the epochs whose validation perplexities are ``valid_history`` (the
    ``valid_ppl`` of the log's full-epoch records, in order): the rate starts at
    ``options.learning_rate`` and is multiplied by ``options.decay`` after every epoch that is
    not a new best, and, when ``options.anneal_from`` is ``k > 0``, after every epoch from the
    ``k``-th on (a time-boxed run's fixed annealing); training ends after ``options.patience``
    epochs in a row without a new best, or after ``options.max_epochs`` epochs."""
    rate, best, without = options.learning_rate, math.inf, 0
    for epoch, valid in enumerate(valid_history, start=1):
        if valid < best:
            best, without = valid, 0
        else:
            without += 1
        if without or 0 < options.anneal_from <= epoch:
            rate *= options.decay
    finished = without >= options.patience or len(valid_history) >= options.max_epochs
    return Schedule(rate, best, without, finished)


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
TRAINING_BYTES_PER_PARAMETER = 8


def check_model_fits(kind: str, model_config: dict[str, Any], device: torch.device) -> None:
    """Refuse, before any allocation, a model whose weights and gradients alone exceed the
    device's memory (``--model-args hidden_size=100000`` would otherwise fail deep inside torch,
    or swap for hours); the parameters are counted on the meta device, which holds no data."""
    with torch.device("meta"):
        parameters = sum(p.numel() for p in checkpoints.build_model(kind, model_config).parameters())
    needed = parameters * TRAINING_BYTES_PER_PARAMETER
    available = device_memory_bytes(device)
    if available is not None and needed > available:
        raise TrainingError(
            f"a {kind} of {parameters:,} parameters needs {needed / 1e9:,.1f} GB for its weights and "
            f"gradients alone; {device} has {available / 1e9:,.1f} GB: choose smaller --model-args sizes"
        )


def device_memory_bytes(device: torch.device) -> int | None:
    """The memory of ``device``: the GPU's, or this machine's physical memory (None: unknown)."""
    if device.type == "cuda":
        return int(torch.cuda.get_device_properties(device).total_memory)
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


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


class Trainer:
    """One training run in ``run_dir`` (see :mod:`baselines.checkpoint` for its files)."""

    def __init__(self, options: TrainOptions, session: Session, dataset: Dataset, run_dir: Path) -> None:
        self.options, self.session, self.dataset, self.run_dir = options, session, dataset, run_dir
        self.rank = dist.get_rank() if dist.is_initialized() else 0
        self.world = dist.get_world_size() if dist.is_initialized() else 1
        if options.batch_size % self.world:
            raise TrainingError(
                f"batch size {options.batch_size} is not divisible by the {self.world} processes"
            )
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
        local = options.batch_size // self.world
        train_ids = dataset.tokens("train").ids
        streams = training_streams(train_ids, options.batch_size)
        self.sampler = (
            UnigramSampler(train_ids, len(dataset.vocab), options.sampled_softmax)
            if options.sampled_softmax
            else None
        )
        self.streams = streams[self.rank * local : (self.rank + 1) * local].to(self.device)
        self.chunks = math.ceil((self.streams.shape[1] - 1) / options.bptt)
        self.valid_ids = dataset.tokens("valid").ids
        self.state: Any = self.model.initial_state(local, self.device)
        self.network: nn.Module = self.model
        if self.world > 1:
            self.network = nn.parallel.DistributedDataParallel(
                self.model, device_ids=[self.device.index] if self.device.type == "cuda" else None
            )
        self.generator = torch.Generator(device=self.device)
        self.stop_signal: int | None = None  # set by run(): the signal that stopped it, if any
        self.initialized_from: dict[str, Any] | None = None  # see initialize_from; kept in checkpoints

    @property
    def schedule(self) -> Schedule:
        return learning_rate_schedule(self.progress.valid_history, self.options)

    # ----------------------------------------------------------------- checkpoints
    def identity(self) -> dict[str, Any]:
        """What a resumed run must share with the run that wrote the checkpoint."""
        return {"options": dataclasses.asdict(self.options), "world_size": self.world}

    def resume(self) -> bool:
        """Load ``checkpoint.pt`` if the run directory has one (True when it did), and drop the
        log's records of the work it does not hold: a run killed after logging an epoch and
        before saving it left them, and this run repeats that work and logs it again."""
        found = self._load_checkpoint()
        if self.rank == 0:
            self._drop_unsaved_log_records()
        return found

    def _load_checkpoint(self) -> bool:
        path = self.run_dir / checkpoints.RESUME
        if not path.exists():
            return False
        payload = checkpoints.load(path)
        checkpoints.check_vocabulary(payload, self.dataset.vocab, path)
        saved = _with_default_options(payload["training"]["identity"])
        mine = self.identity()
        if saved != mine:
            changed = sorted(
                key
                for key in set(saved["options"]) | set(mine["options"])
                if saved["options"].get(key) != mine["options"].get(key)
            )
            if saved["world_size"] != mine["world_size"]:
                changed.append("world_size")
            raise TrainingError(
                f"{self.run_dir} holds a run with different settings "
                f"({', '.join(changed)}): rerun it with its own settings "
                "or choose another --output-dir"
            )
        self.model.load_state_dict(payload["model"])
        self.optimizer.load_state_dict(payload["training"]["optimizer"])
        self.initialized_from = payload["training"].get("initialized_from")
        self.progress = Progress(**payload["training"]["progress"])
        self.progress.best_file_valid = min(self.progress.best_file_valid, self._best_file_perplexity())
        states = payload["training"]["states"]
        self.state = self.model.restore_state(_to_device(states[self.rank], self.device))
        return True

    def _best_file_perplexity(self) -> float:
        """The validation perplexity ``best.pt`` records: lower than the checkpoint's when a kill
        came between writing the one and the other, and then it must not be overwritten."""
        path = self.run_dir / checkpoints.BEST
        recorded = checkpoints.load(path).get("valid_perplexity") if path.is_file() else None
        return float(recorded) if isinstance(recorded, (int, float)) else math.inf

    def _drop_unsaved_log_records(self) -> None:
        """Rewrite ``log.jsonl`` without the records beyond ``self.progress`` (and without a last
        line cut short by a kill)."""
        path = self.run_dir / checkpoints.LOG
        if not path.is_file():
            return
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        kept = [line for line in lines if line.endswith("\n") and self._is_saved(line)]
        if kept != lines:
            write_atomically(path, "".join(kept))

    def _is_saved(self, line: str) -> bool:
        """Whether the log record ``line`` describes work that ``self.progress`` holds."""
        try:
            record = json.loads(line)
            if record.get("partial"):
                return (record["epoch"], record["step"]) <= (self.progress.epoch, self.progress.next_chunk)
            return record["epoch"] <= len(self.progress.valid_history)
        except (ValueError, KeyError, TypeError, AttributeError):
            return False  # not a record: a line cut short by a kill

    def _gather_states(self) -> list[Any]:
        state = detach_state(self.state)
        if self.world == 1:
            return [_to_device(state, "cpu")]
        gathered: list[Any] = [None] * self.world
        dist.all_gather_object(gathered, _to_device(state, "cpu"))
        return gathered

    def save(self) -> None:
        """Write ``checkpoint.pt`` (all processes join; rank 0 writes)."""
        states = self._gather_states()
        if self.rank != 0:
            return
        payload = checkpoints.model_payload(self.model, self.dataset.vocab, self.dataset.name)
        payload["training"] = {
            "identity": self.identity(),
            "optimizer": self.optimizer.state_dict(),
            "progress": dataclasses.asdict(self.progress),
            "states": states,
            "initialized_from": self.initialized_from,
        }
        checkpoints.save(self.run_dir / checkpoints.RESUME, payload)

    def initialize_from(self, path: Path) -> None:
        """Start this new run from another trained model of the same sizes: all of its weights when
        it is of this run's kind (e.g. a packaged model, trained further), else the layers the two
        share (``model.core``: embedding, LSTM layers, decoder), e.g. a Pointer Sentinel-LSTM from a
        zoneout LSTM's ``best.pt``, whose query and sentinel keep their fresh initialization. The
        source is recorded (path, SHA-256, kind, validation perplexity, the layers copied)."""
        donor, payload = checkpoints.load_model(path, vocab=self.dataset.vocab)
        whole = payload["kind"] == self.options.kind
        theirs, mine = (
            (donor.state_dict(), self.model.state_dict())
            if whole
            else (donor.core.state_dict(), self.model.core.state_dict())
        )
        if theirs.keys() != mine.keys() or any(theirs[name].shape != mine[name].shape for name in mine):
            sizes = ("embedding_size", "hidden_size", "num_layers", "tie_weights")
            raise TrainingError(
                f"--init-from {path}: its {payload['kind']} model does not have this model's layers "
                f"({', '.join(f'{name} {getattr(donor.config, name)}' for name in sizes)} against "
                f"{', '.join(str(getattr(self.model.config, name)) for name in sizes)})"
            )
        (self.model if whole else self.model.core).load_state_dict(theirs)
        self.initialized_from = {
            "checkpoint": str(path),
            "sha256": file_sha256(path),
            "kind": payload["kind"],
            "valid_perplexity": payload.get("valid_perplexity", payload.get(checkpoints.PACKAGED_PERPLEXITY)),
            "layers": "all" if whole else "shared",
        }

    def _save_best(self, valid_ppl: float) -> None:
        if self.rank == 0:
            payload = checkpoints.model_payload(self.model, self.dataset.vocab, self.dataset.name)
            payload["valid_perplexity"] = valid_ppl
            checkpoints.save(self.run_dir / checkpoints.BEST, payload)

    def _log(self, record: dict[str, Any]) -> None:
        """Append a validation's ``record`` to ``log.jsonl`` and print it in a line (process 0)."""
        if self.rank != 0:
            return
        with open(self.run_dir / checkpoints.LOG, "a", encoding="utf-8") as log:
            log.write(json.dumps(record) + "\n")
        where = f"epoch {record['epoch']}" + (
            f", step {record['step']}/{record['steps_per_epoch']}" if record["partial"] else " done"
        )
        tqdm.write(
            f"{where}: valid perplexity {record['valid_ppl']:.2f} (train {record['train_ppl']:.2f}, "
            f"learning rate {record['learning_rate']:g})",
            file=sys.stderr,
        )

    # ----------------------------------------------------------------- the loop
    def validate(self) -> float:
        """Validation perplexity under the harness's protocol (batch ``eval_batch_size``),
        computed by process 0 and broadcast to the others."""
        value = torch.zeros(1, dtype=torch.float64, device=self.device)
        refusal = "no finite validation perplexity"  # what the other processes know of it
        if self.rank == 0:
            perplexity_or_nan, refusal = self._validate_here()
            value[0] = perplexity_or_nan
        if self.world > 1:
            dist.broadcast(value, src=0)
        if math.isnan(value.item()):
            raise self._diverged(self.progress.next_chunk, refusal)
        return float(value.item())

    def _validate_here(self) -> tuple[float, str]:
        """The validation perplexity; NaN and the harness's reason where it refuses the model's
        scores (NaN or infinite log-probabilities, a perplexity beyond a float: the weights
        diverged)."""
        scorer = TorchLanguageModel(self.model, self.device)
        try:
            with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.session.amp):
                result = evaluate(
                    scorer,
                    self.valid_ids,
                    eos_id=self.dataset.vocab.eos_id,
                    vocab_size=len(self.dataset.vocab),
                    protocol=EvaluationProtocol(
                        batch_size=self.options.eval_batch_size,
                        bptt=self.options.bptt,
                        audit_positions=0,
                        causality_points=0,  # the run's own model; harness eval audits what it scores
                    ),
                    name="valid",
                    progress=self.session.progress,
                )
        except PluginError as error:
            return math.nan, f"validation refused: {error}"
        finally:
            self.model.train()
        return result.perplexity, ""

    def _step(self, chunk: int) -> tuple[float, int]:
        """One optimizer step on chunk ``chunk``; returns the summed target NLL and its tokens."""
        bptt = self.options.bptt
        inputs = self.streams[:, chunk * bptt : (chunk + 1) * bptt]
        targets = self.streams[:, chunk * bptt + 1 : (chunk + 1) * bptt + 1]
        inputs = inputs[:, : targets.shape[1]]
        self.generator.manual_seed(step_seed(self.options.seed, self.progress.epoch, chunk, self.rank))
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
        return float(nll.detach().sum()), nll.numel()

    def sample_generator(self, chunk: int) -> torch.Generator:
        """The CPU generator of chunk ``chunk``'s sampled words: seeded like its masks, and the
        same in every process (one draw serves all streams of a step)."""
        seed = step_seed(self.options.seed, self.progress.epoch, chunk, SAMPLED_WORDS_STREAM)
        return torch.Generator().manual_seed(seed)

    def _stop_if_diverged(self, loss: torch.Tensor, gradient_norm: torch.Tensor, chunk: int) -> None:
        """Raise :meth:`_diverged` when chunk ``chunk``'s training loss or gradient norm (scalars) is
        inf or NaN in any process: the run stops and saves nothing of the weights that step made."""
        finite = torch.isfinite(loss.detach()) & torch.isfinite(gradient_norm)
        diverged = (~finite).to(torch.int32).view(1)
        if self.world > 1:  # every process must stop at the same step
            dist.all_reduce(diverged, op=dist.ReduceOp.MAX)
        if diverged.item():
            raise self._diverged(chunk + 1, "a loss or gradient that is not finite")

    def _diverged(self, step: int, what: str) -> TrainingError:
        """The error that stops a diverged run at ``step`` of this epoch, ``what`` saying how it
        showed; the run directory keeps what it held (the last good ``checkpoint.pt`` and ``best.pt``)."""
        return TrainingError(
            f"training diverged in epoch {self.progress.epoch} at step {step}/{self.chunks} ({what}): "
            f"train with a lower --lr than {self.options.learning_rate:g} (in another --output-dir "
            "once this one holds a checkpoint)"
        )

    def _apply_learning_rate(self) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = self.schedule.learning_rate * group["lr_scale"]

    def _run_steps(self) -> int:
        """The training steps this run has taken, over all its invocations."""
        return (self.progress.epoch - 1) * self.chunks + self.progress.next_chunk

    def _should_stop(self, began: float, stop: _StopRequest) -> str | None:
        reason = None
        if stop.signum is not None:
            reason = f"{signal.Signals(stop.signum).name} received"
        elif self.session.max_steps is not None and self._run_steps() >= self.session.max_steps:
            reason = f"--max-steps {self.session.max_steps} reached"
        elif (
            self.session.max_minutes is not None and time.monotonic() - began >= self.session.max_minutes * 60
        ):
            reason = f"--max-minutes {self.session.max_minutes:g} reached"
        if self.world > 1:  # every process must stop at the same step
            flag = torch.tensor([0 if reason is None else 1], device=self.device)  # nccl: on the GPU
            dist.all_reduce(flag, op=dist.ReduceOp.MAX)
            if flag.item() and reason is None:
                reason = "another process stopped"
        return reason

    def run(self) -> str:
        """Train until the recipe's end or a stop; returns why it ended. A SIGINT or SIGTERM
        stops it at the next step boundary, with a checkpoint, and is kept in ``stop_signal``."""
        with _StopRequest() as stop:
            try:
                return self._train(stop)
            finally:
                self.stop_signal = stop.signum

    def _train(self, stop: _StopRequest) -> str:
        self.model.train()
        began = time.monotonic()
        last_save = began
        steps = 0
        self._apply_learning_rate()
        while not self.schedule.finished:
            epoch = self.progress.epoch
            with progress_bar(
                total=self.chunks,
                initial=self.progress.next_chunk,
                desc=f"epoch {epoch}",
                unit="step",
                show=self.session.progress and self.rank == 0,
            ) as bar:  # closed on an error too, before the error's line
                while self.progress.next_chunk < self.chunks:
                    reason = self._should_stop(began, stop)
                    if reason is not None:
                        bar.close()
                        if steps > 0 or self._run_steps() == 0:  # else the last stop wrote it all
                            self.save()
                            if not self._validation_due():  # else this step was validated already
                                self._validate_partial()
                        again = (
                            "a larger --max-steps" if reason.startswith("--max-steps") else "the same command"
                        )
                        return (
                            f"{reason}: stopped in epoch {epoch} at step "
                            f"{self.progress.next_chunk}/{self.chunks}; rerun with {again} to continue"
                        )
                    step_began = time.monotonic()
                    loss, tokens = self._step(self.progress.next_chunk)
                    self.progress.next_chunk += 1
                    self.progress.epoch_loss += loss
                    self.progress.epoch_tokens += tokens
                    self.progress.epoch_seconds += time.monotonic() - step_began
                    steps += 1
                    bar.set_postfix(
                        ppl=f"{perplexity(self.progress.epoch_loss, self.progress.epoch_tokens):.1f}",
                        refresh=False,
                    )
                    bar.update(1)
                    if self._validation_due():
                        self._validate_partial()
                    if time.monotonic() - last_save >= self.session.checkpoint_minutes * 60:
                        self.save()
                        last_save = time.monotonic()
            self._end_epoch()
            self.save()
            last_save = time.monotonic()
        return (
            f"finished after {self.progress.epoch - 1} epochs; best validation perplexity "
            f"{self.progress.best_file_valid:.2f}"
        )

    def _end_epoch(self) -> None:
        progress = self.progress
        valid_ppl = self.validate()
        rate = self.schedule.learning_rate
        improved = valid_ppl < self.schedule.best_valid
        if valid_ppl < progress.best_file_valid:
            progress.best_file_valid = valid_ppl
            self._save_best(valid_ppl)
        progress.total_seconds += progress.epoch_seconds
        self._log(
            {
                "epoch": progress.epoch,
                "partial": False,
                "train_ppl": perplexity(progress.epoch_loss, progress.epoch_tokens),
                "valid_ppl": valid_ppl,
                "learning_rate": rate,
                "tokens_per_second": progress.epoch_tokens * self.world / progress.epoch_seconds,
                "device": self.session.device,
                "threads": torch.get_num_threads(),
                "seconds": progress.epoch_seconds,
                "total_seconds": progress.total_seconds,
                "best": improved,
                **self._sampled_steps_record(),
            }
        )
        progress.valid_history.append(valid_ppl)
        self._apply_learning_rate()
        progress.next_chunk = 0
        progress.epoch_loss = progress.epoch_seconds = 0.0
        progress.epoch_tokens = 0
        self.state = self.model.initial_state(self.streams.shape[0], self.device)

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

    def _validation_due(self) -> bool:
        """Whether ``--validate-every`` asks for a validation after the step just taken (never
        after an epoch's last step: the epoch's end validates)."""
        every, step = self.session.validate_every, self.progress.next_chunk
        return every is not None and step % every == 0 and step < self.chunks

    def _validate_partial(self) -> None:
        """Validate the current weights mid-epoch, on a stop (so ``best.pt`` is never older than
        the training) and every ``--validate-every`` steps; a new best is written to ``best.pt``
        with a checkpoint. The schedule is untouched, so resuming stays exact."""
        progress = self.progress
        if progress.next_chunk == 0:
            return
        valid_ppl = self.validate()
        self._log(
            {
                "epoch": progress.epoch,
                "partial": True,
                "step": progress.next_chunk,
                "steps_per_epoch": self.chunks,
                "train_ppl": perplexity(progress.epoch_loss, progress.epoch_tokens),
                "valid_ppl": valid_ppl,
                "learning_rate": self.schedule.learning_rate,
                "tokens_per_second": progress.epoch_tokens * self.world / progress.epoch_seconds,
                "device": self.session.device,
                "threads": torch.get_num_threads(),
                "seconds": progress.epoch_seconds,
                **self._sampled_steps_record(),
            }
        )
        if valid_ppl < progress.best_file_valid:
            progress.best_file_valid = valid_ppl
            self._save_best(valid_ppl)
            self.save()


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


@contextlib.contextmanager
def holding_run_dir(run_dir: Path, option: str) -> Iterator[None]:
    """Hold the run directory for the body: process 0, which writes it (alone, under torchrun),
    locks it against a second ``baselines train`` and removes the temporaries a killed run left
    (``option`` names the directory in the error of a run that finds it held)."""
    if dist.is_initialized() and dist.get_rank() != 0:
        yield
        return
    with exclusive_directory(run_dir, option):
        for path in remove_stale_temporaries(run_dir):
            print(f"removed {path}, left by a killed run", file=sys.stderr)
        yield


@contextlib.contextmanager
def distributed(device: str):
    """Join the process group when launched by ``torchrun`` (``WORLD_SIZE`` > 1); yields the
    device this process trains on."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        yield device
        return
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if device.startswith("cuda"):
        torch.cuda.set_device(local_rank)
        device = f"cuda:{local_rank}"
    dist.init_process_group("nccl" if device.startswith("cuda") else "gloo")
    try:
        yield device
    finally:
        dist.destroy_process_group()
