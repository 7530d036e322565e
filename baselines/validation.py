"""A training run's validations, the best weights they keep, and their log: :class:`Validation`.

A run validates at the end of each epoch (the learning-rate schedule reads these), every
``--validate-every`` steps of an epoch and at a stop, so that ``best.pt`` is never older than the
training. Each validation is a record of the training log
(:mod:`wikitext_toolkit_core.training_log`) in ``log.jsonl`` and a line on stderr; a new best
perplexity writes the weights to ``best.pt``.
"""

from __future__ import annotations

import math
import sys
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from baselines import checkpoint as checkpoints
from baselines.plugin_bridge import TorchLanguageModel
from baselines.run_state import RunState
from baselines.training import Session, TrainOptions, divergence, perplexity
from harness.datasets import Vocabulary
from harness.evaluate import evaluate
from harness.plugin import PluginError
from harness.protocol import EvaluationProtocol
from wikitext_toolkit_core.training_log import EpochEndRecord, MidEpochRecord, TrainingLogRecord


class Validation:
    """The validations of the run whose checkpointed state is ``state``, an epoch being
    ``steps_per_epoch`` steps; process 0 validates, logs and writes ``best.pt``, and the others
    learn the perplexity from it."""

    def __init__(self, state: RunState, session: Session, steps_per_epoch: int) -> None:
        self.state, self.session, self.steps_per_epoch = state, session, steps_per_epoch
        self.valid_ids = state.dataset.tokens("valid").ids  # an empty split fails here, before training

    def validate(self) -> float:
        """Validation perplexity under the harness's protocol (batch ``eval_batch_size``),
        computed by process 0 and shared with the others."""
        state = self.state
        value = torch.zeros(1, dtype=torch.float64, device=state.device)
        refusal = "no finite validation perplexity"  # what the other processes know of it
        if state.processes.writes:
            perplexity_or_nan, refusal = validation_perplexity(
                state.model, self.valid_ids, state.dataset.vocab, state.options, self.session
            )
            value[0] = perplexity_or_nan
        state.processes.share_first(value)
        if math.isnan(value.item()):
            progress = state.progress
            raise divergence(
                progress, progress.next_chunk, self.steps_per_epoch, state.options.learning_rate, refusal
            )
        return float(value.item())

    def at_epoch_end(self) -> float:
        """Validate the epoch's weights, keep them if they are the best and log them; returns
        their perplexity."""
        valid_ppl = self.validate()
        improved = valid_ppl < self.state.schedule.best_valid
        self._keep_if_best(valid_ppl)
        progress = self.state.progress
        total_seconds = progress.total_seconds + progress.epoch_seconds
        self._log(EpochEndRecord(**self._figures(valid_ppl), total_seconds=total_seconds, best=improved))
        return valid_ppl

    def due(self) -> bool:
        """Whether ``--validate-every`` asks for a validation after the step just taken (never
        after an epoch's last step: the epoch's end validates)."""
        every, step = self.session.validate_every, self.state.progress.next_chunk
        return every is not None and step % every == 0 and step < self.steps_per_epoch

    def within_epoch(self) -> None:
        """Validate the current weights mid-epoch, on a stop (so ``best.pt`` is never older than
        the training) and every ``--validate-every`` steps; a new best is written to ``best.pt``
        with a checkpoint. The schedule is untouched, so resuming stays exact."""
        step = self.state.progress.next_chunk
        if step == 0:
            return
        valid_ppl = self.validate()
        improved = self._keep_if_best(valid_ppl)  # before the record: a rerun lacking it validates again
        self._log(MidEpochRecord(**self._figures(valid_ppl), step=step, steps_per_epoch=self.steps_per_epoch))
        if improved:
            self.state.save()

    def _keep_if_best(self, valid_ppl: float) -> bool:
        """Write the weights to ``best.pt`` when ``valid_ppl`` is the run's best so far; whether
        they were."""
        state = self.state
        if valid_ppl >= state.progress.best_file_valid:
            return False
        state.progress.best_file_valid = valid_ppl
        payload = checkpoints.model_payload(state.model, state.dataset.vocab, state.dataset.name)
        payload["valid_perplexity"] = valid_ppl
        state.directory.write_best(payload)
        return True

    def _figures(self, valid_ppl: float) -> dict[str, Any]:
        """What every record of the epoch so far holds (:class:`ValidationRecord`), beside its
        validation perplexity ``valid_ppl``."""
        progress = self.state.progress
        return {
            "epoch": progress.epoch,
            "train_ppl": perplexity(progress.epoch_loss, progress.epoch_tokens),
            "valid_ppl": valid_ppl,
            "learning_rate": self.state.schedule.learning_rate,
            "tokens_per_second": progress.epoch_tokens * self.state.processes.world / progress.epoch_seconds,
            "device": self.session.device,
            "threads": torch.get_num_threads(),
            "amp": self.session.amp,
            "seconds": progress.epoch_seconds,
            "sampled_steps": self._sampled_steps(),
        }

    def _sampled_steps(self) -> int | None:
        """For a run with a sampled-softmax phase, how many of this epoch's steps so far trained
        with it (a record's ``sampled_steps``); None for a run without one."""
        options, progress = self.state.options, self.state.progress
        if not options.sampled_softmax:
            return None
        before = (progress.epoch - 1) * self.steps_per_epoch
        return max(0, min(progress.next_chunk, options.sampled_softmax_steps - before))

    def _log(self, record: TrainingLogRecord) -> None:
        """Append ``record`` to ``log.jsonl`` and print it in a line (process 0)."""
        if not self.state.processes.writes:
            return
        self.state.directory.append_log(record)
        where = f"epoch {record.epoch}" + (
            f", step {record.step}/{record.steps_per_epoch}"
            if isinstance(record, MidEpochRecord)
            else " done"
        )
        tqdm.write(
            f"{where}: valid perplexity {record.valid_ppl:.2f} (train {record.train_ppl:.2f}, "
            f"learning rate {record.learning_rate:g})",
            file=sys.stderr,
        )


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
