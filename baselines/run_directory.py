"""A training run's directory: its files, who writes them, and the rules a resumed run follows.

``checkpoint.pt`` holds all a run needs to go on (weights, optimizer, schedule, carried hidden
state, position in the data); ``best.pt`` the weights of the best validation perplexity so far,
which the plugins load; ``log.jsonl`` one record per validation
(:mod:`wikitext_toolkit_core.training_log`; :mod:`baselines.checkpoint` names the files and
writes them atomically). One ``baselines train`` at a time writes a run
directory: process 0 holds its lock (:func:`holding_run_dir`) and is its only writer.

The resume rules: a run continues from ``checkpoint.pt`` exactly where that was written, and
the log's records of work the checkpoint does not hold (a run killed after logging and before
saving left them) are dropped, since the resumed run does that work again and logs it again.
``best.pt`` may be newer than the checkpoint (a kill between writing the one and the other):
its perplexity is read back so that it is never replaced by worse weights. A stop's checkpoint
says so (``stopped``) and the validation of its weights follows it; where the log holds no
record of that validation (a kill cut it short), the resumed run does it before training on.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch.distributed as dist

from baselines import checkpoint as checkpoints
from harness.datasets import Vocabulary
from wikitext_toolkit_core.files import exclusive_directory, remove_stale_temporaries, write_atomically
from wikitext_toolkit_core.training_log import (
    InvalidTrainingLogRecord,
    MidEpochRecord,
    TrainingLogRecord,
    record_from_line,
)

logger = logging.getLogger(__name__)


class RunDirectory:
    """The files of the run in ``path``; only a ``writer`` (process 0) writes them."""

    def __init__(self, path: Path, writer: bool) -> None:
        self.path, self.writer = path, writer

    def load_checkpoint(self, vocab: Vocabulary) -> dict[str, Any] | None:
        """The payload of ``checkpoint.pt`` (None when the run has none), trained with ``vocab``."""
        path = self.path / checkpoints.RESUME
        if not path.exists():
            return None
        payload = checkpoints.load(path)
        checkpoints.check_vocabulary(payload, vocab, path)
        return payload

    def best_perplexity(self) -> float:
        """The validation perplexity ``best.pt`` records (inf without one)."""
        path = self.path / checkpoints.BEST
        recorded = checkpoints.load(path).get("valid_perplexity") if path.is_file() else None
        return float(recorded) if isinstance(recorded, (int, float)) else math.inf

    def write_checkpoint(self, payload: dict[str, Any]) -> None:
        if self.writer:
            checkpoints.save(self.path / checkpoints.RESUME, payload)

    def write_best(self, payload: dict[str, Any]) -> None:
        if self.writer:
            checkpoints.save(self.path / checkpoints.BEST, payload)

    def append_log(self, record: TrainingLogRecord) -> None:
        """Append ``record`` to ``log.jsonl``, on disk before the run goes on; a write the file
        system refuses (a full disk) is its ``OSError``, naming the file."""
        if not self.writer:
            return
        path = self.path / checkpoints.LOG
        try:
            with open(path, "a", encoding="utf-8") as log:
                log.write(json.dumps(record.to_json()) + "\n")
                log.flush()
                os.fsync(log.fileno())
        except OSError as error:
            error.filename = error.filename or str(path)
            raise

    def logged_validation(self, epoch: int, step: int) -> bool:
        """Whether ``log.jsonl`` records the validation at step ``step`` of epoch ``epoch``."""
        return any(
            isinstance(record, MidEpochRecord) and (record.epoch, record.step) == (epoch, step)
            for record in map(_record, self._log_lines())
        )

    def drop_log_records_beyond(self, epochs_done: int, step: int) -> None:
        """Rewrite ``log.jsonl`` without the records of work beyond ``epochs_done`` full epochs
        and ``step`` steps of the next (and without a last line cut short by a kill)."""
        if not self.writer:
            return
        lines = self._log_lines()
        kept = [line for line in lines if _within(_record(line), epochs_done, step)]
        if kept != lines:
            write_atomically(self.path / checkpoints.LOG, "".join(kept))

    def _log_lines(self) -> list[str]:
        """The lines of ``log.jsonl``, each with its newline (none where the run has no log)."""
        path = self.path / checkpoints.LOG
        return path.read_text(encoding="utf-8").splitlines(keepends=True) if path.is_file() else []


def _record(line: str) -> TrainingLogRecord | None:
    """The training-log record of ``line``; None for a line that is none (one cut short by a kill)."""
    try:
        return record_from_line(line) if line.endswith("\n") else None
    except InvalidTrainingLogRecord:
        return None


def _within(record: TrainingLogRecord | None, epochs_done: int, step: int) -> bool:
    """Whether ``record`` describes work of the first ``epochs_done`` epochs and ``step`` steps of
    the next."""
    if isinstance(record, MidEpochRecord):
        return (record.epoch, record.step) <= (epochs_done + 1, step)
    return record is not None and record.epoch <= epochs_done


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
            logger.info("removed %s, left by a killed run", path)
        yield
