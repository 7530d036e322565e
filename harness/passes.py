"""Where each pass of an evaluation gets its model (:func:`harness.evaluate.evaluate`).

An audited evaluation scores a split twice, the evaluation and the causality audit, in an order
drawn at random (:mod:`harness.causality`). :class:`ModelPasses` opens the model for each pass:
:class:`SameModel` hands every pass one model object in the harness's own process (a model given
to :func:`harness.api.evaluate_model`, ``harness eval --in-process``, a trainer's validation);
:class:`harness.worker.WorkerPlugin` loads the plugin afresh in a worker process for each pass, so
that nothing in memory carries from one pass to the other and the plugin never sees the harness.
"""

from __future__ import annotations

import abc
import contextlib
import dataclasses
from collections.abc import Iterator
from typing import Any, ClassVar

from harness.plugin import ChunkScores, Model, ModelFacts, PluginError, model_facts


class ModelPasses(abc.ABC):
    """The model of an evaluation, opened for each of its passes; a context manager that lets go
    of whatever it holds between passes (:meth:`close`)."""

    #: Where the plugin runs, as a result records it (``plugin_process``): ``worker`` or ``harness``.
    plugin_process: ClassVar[str]

    @abc.abstractmethod
    def open_pass(self, name: str) -> contextlib.AbstractContextManager[Model]:
        """The model that one pass scores with, for the pass (the context); ``name`` names the
        plugin in messages."""

    @abc.abstractmethod
    def model_facts(self, name: str) -> ModelFacts:
        """What a result records of the model besides its scores (``name``: the plugin, for
        messages)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Let go of what is held between passes."""

    def __enter__(self) -> ModelPasses:
        return self

    def __exit__(self, *exception: object) -> None:
        self.close()


class SameModel(ModelPasses):
    """Every pass scores with ``model``, in this process."""

    plugin_process = "harness"

    def __init__(self, model: Model) -> None:
        self.model = model

    @contextlib.contextmanager
    def open_pass(self, name: str) -> Iterator[Model]:
        yield self.model

    def model_facts(self, name: str) -> ModelFacts:
        return model_facts(self.model, name)

    def close(self) -> None:
        """Nothing is held: the model is its owner's."""


def passes_of(model: Model | ModelPasses) -> ModelPasses:
    """``model`` as :class:`ModelPasses`: a model object is :class:`SameModel` of it."""
    return model if isinstance(model, ModelPasses) else SameModel(model)


class CallFailed(PluginError):
    """A call into a plugin run in a worker process that did not return: the plugin raised or
    called ``sys.exit`` there, or its worker ended, hung or sent a reply the harness refuses.
    The message names the plugin and the method; :func:`harness.evaluate._naming_the_plugin`
    makes a line of its own with the call's place in the split.

    Attributes:
        reason: what happened, in words that follow the call (``raised KeyError: 7 (at ...)``).
        traceback: the plugin's traceback, as the worker formatted it (None: no exception).
    """

    def __init__(self, message: str, reason: str, traceback: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.traceback = traceback


@dataclasses.dataclass(frozen=True)
class WorkerScores(ChunkScores):
    """A model's scores as a worker process converted them: float64 arrays, and whether the
    plugin gave them as tensors on an accelerator (which loosens the causality audit's
    tolerance)."""

    on_accelerator: bool = False


def scores_on_accelerator(scores: ChunkScores) -> bool:
    """Whether ``scores`` came as tensors on an accelerator: as :class:`WorkerScores` say, else
    read off the target log-probabilities' device (a torch tensor's)."""
    if isinstance(scores, WorkerScores):
        return scores.on_accelerator
    device: Any = getattr(scores.target_log_probs, "device", None)
    return getattr(device, "type", "cpu") != "cpu"
