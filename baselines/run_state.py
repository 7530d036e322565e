"""What a training checkpoint holds, and how a run goes on from one: :class:`RunState`.

``checkpoint.pt`` holds a run's weights, its optimizer, where it stands (:class:`Progress`), the
hidden state its next step carries on from and the source of a warm start. A run resumed from it
restores them all, under :mod:`baselines.run_directory`'s rules, and so ends with the same weights
as an uninterrupted run.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import torch

from baselines import checkpoint as checkpoints
from baselines.plugin_bridge import detach_state
from baselines.processes import Processes
from baselines.run_directory import RunDirectory
from baselines.schedule import Schedule, learning_rate_schedule
from baselines.training import Progress, TrainingError, TrainOptions
from harness.datasets import Dataset, Vocabulary
from wikitext_toolkit_core.files import file_sha256


@dataclasses.dataclass
class RunState:
    """The state of one run that its checkpoints hold: the ``model`` and its ``optimizer``, the
    ``progress``, ``hidden`` (the state carried into the next step, of this process's streams)
    and ``initialized_from`` (a warm start's source, or None); ``stop_unvalidated`` is set by
    :meth:`resume` where a kill cut short the validation of the last stop. Process 0 writes the
    checkpoints, holding the hidden states of all processes."""

    options: TrainOptions
    dataset: Dataset
    processes: Processes
    directory: RunDirectory
    device: torch.device
    model: checkpoints.CheckpointedModel
    optimizer: torch.optim.Optimizer
    hidden: Any
    progress: Progress = dataclasses.field(default_factory=Progress)
    initialized_from: dict[str, Any] | None = None
    stop_unvalidated: bool = False

    @property
    def schedule(self) -> Schedule:
        """The learning-rate schedule after the epochs done."""
        return learning_rate_schedule(self.progress.valid_history, self.options)

    def identity(self) -> dict[str, Any]:
        """What a resumed run must share with the run that wrote the checkpoint."""
        return {"options": dataclasses.asdict(self.options), "world_size": self.processes.world}

    def resume(self) -> bool:
        """Continue from the run directory's checkpoint, if it has one (True when it did), under
        :mod:`baselines.run_directory`'s rules."""
        payload = self.directory.load_checkpoint(self.dataset.vocab)
        if payload is not None:
            saved = payload["training"]
            self._check_identity(_with_default_options(saved["identity"]))
            self.model.load_state_dict(payload["model"])
            self.optimizer.load_state_dict(saved["optimizer"])
            self.initialized_from = saved.get("initialized_from")
            self.progress = Progress(**saved["progress"])
            best_file = self.directory.best_perplexity()  # newer than the checkpoint after a kill
            self.progress.best_file_valid = min(self.progress.best_file_valid, best_file)
            states = saved["states"]
            self.hidden = self.model.restore_state(_to_device(states[self.processes.rank], self.device))
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
        states = self.processes.gather(_to_device(detach_state(self.hidden), "cpu"))
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
