"""Training with the papers' recipe: resumable, time-boxed, optionally distributed.

Recipe (Merity et al. 2016, after Zaremba et al. 2014): batch 32, truncated BPTT over chunks of
100, SGD, gradient-norm clipping at 1, the learning rate halved whenever an epoch's validation
perplexity is not a new best, and a stop after 3 such epochs in a row or 64 epochs. As in Zaremba
et al.'s code, the loss is summed over the positions of a chunk and averaged over its streams, and
the learning rate starts at 1, so a clipped step moves the weights by at most 1. (With the loss
averaged over positions and a learning rate of 20, steps of up to 20 saturate the pointer's
sentinel gate within a few steps, after which it never recovers.)

Resumption is exact: every random mask of step ``k`` of epoch ``e`` comes from a generator
seeded with ``(seed, e, k, rank)``, and a checkpoint holds the weights, the optimizer, the
schedule, the carried hidden state and the position in the data, so a run that is stopped
(``--max-minutes``, ``--max-steps``, Ctrl-C, SIGTERM; or killed, from its last periodic
checkpoint) and restarted with the same command ends with the same weights as an uninterrupted
run. Under ``torchrun`` each of the ``W`` processes trains ``B / W`` of the streams
(DistributedDataParallel, ``gloo`` on CPU, ``nccl`` on GPU).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from tqdm import tqdm

from harness.datasets import Dataset
from harness.evaluate import evaluate
from baselines import checkpoint as checkpoints
from baselines.scoring import TorchLanguageModel, detach_state

#: Model hyper-parameters of each preset (the pointer adds ``window``).
PRESETS: dict[str, dict[str, Any]] = {
    "medium": {"embedding_size": 650, "hidden_size": 650, "num_layers": 2, "dropout": 0.5,
               "zoneout_hidden": 0.1, "zoneout_cell": 0.1},
    "small": {"embedding_size": 200, "hidden_size": 200, "num_layers": 2, "dropout": 0.3,
              "zoneout_hidden": 0.05, "zoneout_cell": 0.05},
    "tiny": {"embedding_size": 64, "hidden_size": 64, "num_layers": 2, "dropout": 0.1,
             "zoneout_hidden": 0.05, "zoneout_cell": 0.05},
}


@dataclasses.dataclass(frozen=True)
class TrainOptions:
    """Everything that defines a training run; a resumed run must repeat these exactly."""

    kind: str
    model_config: dict[str, Any]
    batch_size: int = 32
    bptt: int = 100
    learning_rate: float = 1.0
    clip: float = 1.0
    decay: float = 0.5
    patience: int = 3
    max_epochs: int = 64
    seed: int = 1
    eval_batch_size: int = 10


@dataclasses.dataclass(frozen=True)
class Session:
    """How this invocation runs; free to change between a run's invocations."""

    device: str = "cpu"
    amp: bool = False
    compile: bool = False
    max_minutes: float | None = None
    max_steps: int | None = None
    checkpoint_minutes: float = 10.0
    progress: bool = True


class TrainingError(Exception):
    """A run that cannot start or continue; the message is one line."""


@dataclasses.dataclass
class Progress:
    """Where a run stands; saved in every training checkpoint."""

    epoch: int = 1
    next_chunk: int = 0
    learning_rate: float = 0.0
    best_valid: float = math.inf
    epochs_without_improvement: int = 0
    best_file_valid: float = math.inf
    finished: bool = False
    epoch_loss: float = 0.0
    epoch_tokens: int = 0
    epoch_seconds: float = 0.0
    total_seconds: float = 0.0


def step_seed(seed: int, epoch: int, chunk: int, rank: int) -> int:
    """The seed of the masks of one training step of one process."""
    return int(np.random.SeedSequence([seed, epoch, chunk, rank]).generate_state(1)[0])


def training_streams(ids: np.ndarray, batch_size: int) -> torch.Tensor:
    """int64 ``[B, n + 1]``: ``B`` contiguous streams of the train split, the tail of
    ``len(ids) % B`` tokens dropped; inputs are ``[:, :-1]``, targets ``[:, 1:]``."""
    per_stream = (len(ids) - 1) // batch_size
    if per_stream < 2:
        raise TrainingError(f"train split has {len(ids)} tokens: too few for batch {batch_size}")
    starts = np.arange(batch_size) * per_stream
    return torch.from_numpy(ids[starts[:, None] + np.arange(per_stream + 1)].astype(np.int64))


class _StopRequest:
    """Turns SIGINT/SIGTERM into a flag checked between steps, so a stop is always clean."""

    def __init__(self) -> None:
        self.requested = False

    def __enter__(self) -> _StopRequest:
        self.previous = {}
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                self.previous[signum] = signal.signal(signum, self._handle)
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        self.requested = True

    def __exit__(self, *exc: Any) -> None:
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)


class Trainer:
    """One training run in ``run_dir`` (see :mod:`baselines.checkpoint` for its files)."""

    def __init__(self, options: TrainOptions, session: Session, dataset: Dataset,
                 run_dir: Path) -> None:
        self.options, self.session, self.dataset, self.run_dir = options, session, dataset, run_dir
        self.rank = dist.get_rank() if dist.is_initialized() else 0
        self.world = dist.get_world_size() if dist.is_initialized() else 1
        if options.batch_size % self.world:
            raise TrainingError(f"batch size {options.batch_size} is not divisible by the "
                                f"{self.world} processes")
        self.device = torch.device(session.device)
        torch.manual_seed(options.seed)
        self.model = checkpoints.build_model(options.kind, options.model_config).to(self.device)
        if session.compile:
            self.model.core.compile_step()
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=options.learning_rate)
        self.progress = Progress(learning_rate=options.learning_rate)
        local = options.batch_size // self.world
        streams = training_streams(dataset.tokens("train").ids, options.batch_size)
        self.streams = streams[self.rank * local:(self.rank + 1) * local].to(self.device)
        self.chunks = math.ceil((self.streams.shape[1] - 1) / options.bptt)
        self.valid_ids = dataset.tokens("valid").ids
        self.state: Any = self.model.initial_state(local, self.device)
        self.network: nn.Module = self.model
        if self.world > 1:
            self.network = nn.parallel.DistributedDataParallel(
                self.model, device_ids=[self.device.index] if self.device.type == "cuda" else None)
        self.generator = torch.Generator(device=self.device)

    # ----------------------------------------------------------------- checkpoints
    def identity(self) -> dict[str, Any]:
        """What a resumed run must share with the run that wrote the checkpoint."""
        return {"options": dataclasses.asdict(self.options), "world_size": self.world}

    def resume(self) -> bool:
        """Load ``checkpoint.pt`` if the run directory has one; True when it did."""
        path = self.run_dir / checkpoints.RESUME
        if not path.exists():
            return False
        payload = checkpoints.load(path)
        checkpoints.check_vocabulary(payload, self.dataset.vocab, path)
        saved = payload["training"]["identity"]
        mine = self.identity()
        if saved != mine:
            changed = sorted(key for key in set(saved["options"]) | set(mine["options"])
                             if saved["options"].get(key) != mine["options"].get(key))
            if saved["world_size"] != mine["world_size"]:
                changed.append("world_size")
            raise TrainingError(f"{self.run_dir} holds a run with different settings "
                                f"({', '.join(changed)}): rerun it with its own settings "
                                "or choose another --out")
        self.model.load_state_dict(payload["model"])
        self.optimizer.load_state_dict(payload["training"]["optimizer"])
        self.progress = Progress(**payload["training"]["progress"])
        states = payload["training"]["states"]
        self.state = self.model.restore_state(_to_device(states[self.rank], self.device))
        return True

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
        }
        checkpoints.save(self.run_dir / checkpoints.RESUME, payload)

    def _save_best(self, valid_ppl: float) -> None:
        if self.rank == 0:
            payload = checkpoints.model_payload(self.model, self.dataset.vocab, self.dataset.name)
            payload["valid_perplexity"] = valid_ppl
            checkpoints.save(self.run_dir / checkpoints.BEST, payload)

    def _log(self, record: dict[str, Any]) -> None:
        if self.rank == 0:
            with open(self.run_dir / checkpoints.LOG, "a", encoding="utf-8") as log:
                log.write(json.dumps(record) + "\n")

    # ----------------------------------------------------------------- the loop
    def validate(self) -> float:
        """Validation perplexity under the harness's protocol (batch ``eval_batch_size``)."""
        scorer = TorchLanguageModel(self.model, self.device)
        try:
            with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.session.amp):
                result = evaluate(scorer, self.valid_ids, eos_id=self.dataset.vocab.eos_id,
                                  vocab_size=len(self.dataset.vocab),
                                  batch_size=self.options.eval_batch_size, bptt=self.options.bptt,
                                  audit_positions=0, name="valid", progress=self.session.progress)
        finally:
            self.model.train()
        return result.perplexity

    def _step(self, chunk: int) -> tuple[float, int]:
        """One optimizer step on chunk ``chunk``; returns the summed target NLL and its tokens."""
        bptt = self.options.bptt
        inputs = self.streams[:, chunk * bptt:(chunk + 1) * bptt]
        targets = self.streams[:, chunk * bptt + 1:(chunk + 1) * bptt + 1]
        inputs = inputs[:, :targets.shape[1]]
        self.generator.manual_seed(step_seed(self.options.seed, self.progress.epoch, chunk,
                                             self.rank))
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.session.amp):
            output = self.network(inputs, targets, self.state, self.generator)
        nll = -output.target_log_probs.float()  # [B, T]
        loss = nll.sum(dim=1).mean()  # summed over positions, averaged over streams
        if output.auxiliary_loss is not None:
            loss = loss + output.auxiliary_loss.float().sum(dim=1).mean()
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(self.model.parameters(), self.options.clip)
        self.optimizer.step()
        self.state = detach_state(output.state)
        return float(nll.detach().sum()), nll.numel()

    def _should_stop(self, began: float, steps: int, stop: _StopRequest) -> str | None:
        reason = None
        if stop.requested:
            reason = "interrupted"
        elif self.session.max_steps is not None and steps >= self.session.max_steps:
            reason = f"--max-steps {self.session.max_steps} reached"
        elif self.session.max_minutes is not None and \
                time.monotonic() - began >= self.session.max_minutes * 60:
            reason = f"--max-minutes {self.session.max_minutes:g} reached"
        if self.world > 1:  # every process must stop at the same step
            flag = torch.tensor([0 if reason is None else 1])
            dist.all_reduce(flag, op=dist.ReduceOp.MAX)
            if flag.item() and reason is None:
                reason = "another process stopped"
        return reason

    def run(self) -> str:
        """Train until the recipe's end or a stop; returns why it ended."""
        self.model.train()
        began = time.monotonic()
        last_save = began
        steps = 0
        for group in self.optimizer.param_groups:
            group["lr"] = self.progress.learning_rate
        with _StopRequest() as stop:
            while not self.progress.finished:
                epoch = self.progress.epoch
                bar = tqdm(total=self.chunks, initial=self.progress.next_chunk,
                           desc=f"epoch {epoch}", unit="step", leave=False,
                           disable=True if not self.session.progress or self.rank else None)
                while self.progress.next_chunk < self.chunks:
                    reason = self._should_stop(began, steps, stop)
                    if reason is not None:
                        bar.close()
                        self.save()
                        self._validate_partial()
                        return f"{reason}: stopped in epoch {epoch} at step " \
                               f"{self.progress.next_chunk}/{self.chunks}; rerun the same command " \
                               "to continue"
                    step_began = time.monotonic()
                    loss, tokens = self._step(self.progress.next_chunk)
                    self.progress.next_chunk += 1
                    self.progress.epoch_loss += loss
                    self.progress.epoch_tokens += tokens
                    self.progress.epoch_seconds += time.monotonic() - step_began
                    steps += 1
                    bar.update(1)
                    bar.set_postfix(ppl=f"{math.exp(self.progress.epoch_loss / self.progress.epoch_tokens):.1f}")
                    if time.monotonic() - last_save >= self.session.checkpoint_minutes * 60:
                        self.save()
                        last_save = time.monotonic()
                bar.close()
                self._end_epoch()
                self.save()
                last_save = time.monotonic()
        return f"finished after {self.progress.epoch - 1} epochs; best validation perplexity " \
               f"{self.progress.best_file_valid:.2f}"

    def _end_epoch(self) -> None:
        progress = self.progress
        valid_ppl = self.validate()
        improved = valid_ppl < progress.best_valid
        if improved:
            progress.best_valid = valid_ppl
            progress.epochs_without_improvement = 0
        else:
            progress.epochs_without_improvement += 1
        if valid_ppl < progress.best_file_valid:
            progress.best_file_valid = valid_ppl
            self._save_best(valid_ppl)
        progress.total_seconds += progress.epoch_seconds
        self._log({"epoch": progress.epoch, "partial": False,
                   "train_ppl": math.exp(progress.epoch_loss / progress.epoch_tokens),
                   "valid_ppl": valid_ppl, "learning_rate": progress.learning_rate,
                   "tokens_per_second": progress.epoch_tokens * self.world / progress.epoch_seconds,
                   "seconds": progress.epoch_seconds, "total_seconds": progress.total_seconds,
                   "best": improved})
        if not improved:
            progress.learning_rate *= self.options.decay
            for group in self.optimizer.param_groups:
                group["lr"] = progress.learning_rate
        progress.finished = (progress.epochs_without_improvement >= self.options.patience
                             or progress.epoch >= self.options.max_epochs)
        progress.epoch += 1
        progress.next_chunk = 0
        progress.epoch_loss = progress.epoch_seconds = 0.0
        progress.epoch_tokens = 0
        self.state = self.model.initial_state(self.streams.shape[0], self.device)

    def _validate_partial(self) -> None:
        """On a stop mid-epoch, validate the current weights so ``best.pt`` is never older than
        the training; the schedule is untouched, so resuming stays exact."""
        if self.progress.next_chunk == 0:
            return
        valid_ppl = self.validate()
        progress = self.progress
        self._log({"epoch": progress.epoch, "partial": True, "step": progress.next_chunk,
                   "steps_per_epoch": self.chunks,
                   "train_ppl": math.exp(progress.epoch_loss / progress.epoch_tokens),
                   "valid_ppl": valid_ppl, "learning_rate": progress.learning_rate,
                   "tokens_per_second": progress.epoch_tokens * self.world / progress.epoch_seconds,
                   "seconds": progress.epoch_seconds})
        if valid_ppl < progress.best_file_valid:
            progress.best_file_valid = valid_ppl
            self._save_best(valid_ppl)
            self.save()


def _to_device(state: Any, device: torch.device | str) -> Any:
    """The state as nested lists of tensors on ``device`` (what ``weights_only`` can load)."""
    if isinstance(state, torch.Tensor):
        return state.to(device)
    return [_to_device(item, device) for item in state]


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
