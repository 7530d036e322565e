"""The training loop: :class:`Trainer`, resumable, time-boxed, optionally distributed.

Resumption is exact: every random mask of step ``k`` of epoch ``e`` comes from a generator
seeded with ``(seed, e, k, rank)``, and a checkpoint holds the weights, the optimizer, the
schedule, the carried hidden state and the position in the data, so a run that is stopped
(``--max-minutes``, ``--max-steps``, Ctrl-C, SIGTERM; or killed, from its last periodic
checkpoint) and restarted with the same command ends with the same weights as an uninterrupted
run. After a stop by signal ``baselines train`` exits 128 plus the signal's number (130, 143), as a
shell reports it, so that ``train && eval`` does not go on with a half-trained model; a planned
stop exits 0.

The parts, each a module: the settings and one step's pieces (:mod:`baselines.training`), what a
checkpoint holds and how a run resumes from it (:class:`~baselines.run_state.RunState`), the
validations, the best weights and the log (:class:`~baselines.validation.Validation`), the stops
(:class:`~baselines.stops.Stops`), the run directory's files and resume rules
(:mod:`baselines.run_directory`), the learning-rate schedule (:mod:`baselines.schedule`) and what
the processes of a ``torchrun`` share (:mod:`baselines.processes`). :meth:`Trainer._train`, the
loop, reads top to bottom.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn
from tqdm import tqdm

from baselines import checkpoint as checkpoints
from baselines.models import UnigramSampler
from baselines.plugin_bridge import detach_state
from baselines.processes import Processes
from baselines.run_directory import RunDirectory
from baselines.run_state import RunState
from baselines.schedule import apply_learning_rate
from baselines.stops import Stops
from baselines.training import (
    SAMPLED_WORDS_STREAM,
    Session,
    TrainingError,
    TrainOptions,
    check_model_fits,
    chunk_loss,
    divergence,
    parameter_groups,
    perplexity,
    step_seed,
    training_streams,
)
from baselines.validation import Validation
from harness.datasets import Dataset
from wikitext_toolkit_core.progress import progress_bar


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


class Trainer:
    """One training run: its checkpointed ``state`` (:class:`RunState`: :meth:`RunState.resume`
    or :meth:`RunState.initialize_from` before training), this process's share of the train split
    (``streams``, ``chunks`` steps an epoch), its ``validation`` and the loop that trains it
    (:meth:`run`)."""

    def __init__(self, options: TrainOptions, session: Session, dataset: Dataset, run_dir: Path) -> None:
        self.options, self.session = options, session
        self.processes = Processes.current()
        if options.batch_size % self.processes.world:
            raise TrainingError(
                f"batch size {options.batch_size} is not divisible by the {self.processes.world} processes"
            )
        directory = RunDirectory(run_dir, writer=self.processes.writes)
        self.device = torch.device(session.device)
        check_model_fits(options.kind, options.model_config, self.device)
        torch.manual_seed(options.seed)
        model = checkpoints.build_model(options.kind, options.model_config).to(self.device)
        if session.compile:
            model.core.compile_step()
        optimizer = torch.optim.SGD(
            parameter_groups(model, options.pointer_lr_scale), lr=options.learning_rate
        )
        local, rank = options.batch_size // self.processes.world, self.processes.rank
        train_ids = dataset.tokens("train").ids
        streams = training_streams(train_ids, options.batch_size)
        self.sampler = (
            UnigramSampler(train_ids, len(dataset.vocab), options.sampled_softmax)
            if options.sampled_softmax
            else None
        )
        self.streams = streams[rank * local : (rank + 1) * local].to(self.device)
        self.chunks = math.ceil((self.streams.shape[1] - 1) / options.bptt)
        hidden = model.initial_state(local, self.device)
        self.state = RunState(
            options, dataset, self.processes, directory, self.device, model, optimizer, hidden
        )
        self.validation = Validation(self.state, session, self.chunks)
        self.network = self.processes.wrap(model, self.device)
        self.generator = torch.Generator(device=self.device)
        self.stop_signal: int | None = None  # set by run(): the signal that stopped it, if any

    def run(self) -> str:
        """Train until the recipe's end or a stop; returns why it ended. A SIGINT or SIGTERM
        stops it at the next step boundary, with a checkpoint, and is kept in ``stop_signal``."""
        show = self.session.progress and self.processes.writes
        with Stops(self.session, self.processes, self.device) as stops, EpochBar(self.chunks, show) as bar:
            try:
                return self._train(stops, bar)
            finally:
                self.stop_signal = stops.signum

    def _train(self, stops: Stops, bar: EpochBar) -> str:
        """The loop: a step at a time, the epoch's end once its last step is taken, a checkpoint
        every ``checkpoint_minutes``, a validation every ``validate_every`` steps, until the
        schedule finishes or a stop (``--max-minutes``, ``--max-steps``, a signal) comes; first,
        the validation of the last stop, where a kill cut it short."""
        state, progress = self.state, self.state.progress
        state.model.train()
        if state.stop_unvalidated:
            self.validation.within_epoch()
        began = last_save = time.monotonic()
        steps_taken = 0
        apply_learning_rate(state.optimizer.param_groups, state.schedule.learning_rate)
        while not state.schedule.finished:
            if progress.next_chunk == self.chunks:
                bar.close()
                self._end_epoch()
                state.save()
                last_save = time.monotonic()
                continue
            bar.open(progress.epoch, progress.next_chunk)
            reason = stops.reason(progress.run_steps(self.chunks), began)
            if reason is not None:
                bar.close()
                return self._stop(reason, steps_taken)
            self._step()
            steps_taken += 1
            bar.advance(perplexity(progress.epoch_loss, progress.epoch_tokens))
            if self.validation.due():
                self.validation.within_epoch()
            if time.monotonic() - last_save >= self.session.checkpoint_minutes * 60:
                state.save()
                last_save = time.monotonic()
        return (
            f"finished after {progress.epoch - 1} epochs; best validation perplexity "
            f"{progress.best_file_valid:.2f}"
        )

    def _stop(self, reason: str, steps_taken: int) -> str:
        """Save and validate where the run stopped (unless this invocation took no step: the last
        stop wrote it all, and :meth:`_train` began with its validation where a kill had cut that
        short); returns the stop's message."""
        progress = self.state.progress
        if steps_taken > 0 or progress.run_steps(self.chunks) == 0:
            self.state.save(stopped=True)
            if not self.validation.due():  # else this step was validated already
                self.validation.within_epoch()
        again = "a larger --max-steps" if reason.startswith("--max-steps") else "the same command"
        return (
            f"{reason}: stopped in epoch {progress.epoch} at step "
            f"{progress.next_chunk}/{self.chunks}; rerun with {again} to continue"
        )

    def _end_epoch(self) -> None:
        """Validate the epoch's weights and log them, then start the next epoch from a fresh state
        at the rate the schedule now gives."""
        state = self.state
        state.progress.finish_epoch(self.validation.at_epoch_end())
        apply_learning_rate(state.optimizer.param_groups, state.schedule.learning_rate)
        state.hidden = state.model.initial_state(self.streams.shape[0], self.device)

    def _step(self) -> None:
        """One optimizer step on the epoch's next chunk, counted in the epoch's figures."""
        options, state, progress = self.options, self.state, self.state.progress
        began, chunk, bptt = time.monotonic(), progress.next_chunk, options.bptt
        inputs = self.streams[:, chunk * bptt : (chunk + 1) * bptt]
        targets = self.streams[:, chunk * bptt + 1 : (chunk + 1) * bptt + 1]
        inputs = inputs[:, : targets.shape[1]]
        self.generator.manual_seed(step_seed(options.seed, progress.epoch, chunk, self.processes.rank))
        sample = None
        if self.sampler is not None and progress.run_steps(self.chunks) < options.sampled_softmax_steps:
            sample = self.sampler.draw(self._sample_generator(chunk), self.device)
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.session.amp):
            output = self.network(inputs, targets, state.hidden, self.generator, vocab_sample=sample)
        nll = -output.target_log_probs.float()  # [B, T]
        loss = chunk_loss(output, options.loss)
        state.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        gradient_norm = nn.utils.clip_grad_norm_(state.model.parameters(), options.clip)
        state.optimizer.step()
        self._stop_if_diverged(loss, gradient_norm, chunk)  # after the step: no GPU sync before it
        state.hidden = detach_state(output.state)
        progress.next_chunk += 1
        progress.epoch_loss += float(nll.detach().sum())
        progress.epoch_tokens += nll.numel()
        progress.epoch_seconds += time.monotonic() - began

    def _sample_generator(self, chunk: int) -> torch.Generator:
        """The CPU generator of chunk ``chunk``'s sampled words: seeded like its masks, and the
        same in every process (one draw serves all streams of a step)."""
        seed = step_seed(self.options.seed, self.state.progress.epoch, chunk, SAMPLED_WORDS_STREAM)
        return torch.Generator().manual_seed(seed)

    def _stop_if_diverged(self, loss: torch.Tensor, gradient_norm: torch.Tensor, chunk: int) -> None:
        """Raise :func:`divergence` when chunk ``chunk``'s training loss or gradient norm (scalars)
        is inf or NaN in any process: the run stops and saves nothing of the weights that step made."""
        finite = torch.isfinite(loss.detach()) & torch.isfinite(gradient_norm)
        if self.processes.any((~finite).to(torch.int32).view(1)):
            what = "a loss or gradient that is not finite"
            raise divergence(self.state.progress, chunk + 1, self.chunks, self.options.learning_rate, what)
