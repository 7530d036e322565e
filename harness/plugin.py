"""The plugin protocol: how the harness talks to a language model.

A plugin is any importable module (``baselines.kneser_ney``, ``my_pkg.my_model``), or a name
registered in the ``harness.models`` entry-point group, that exposes a factory (``load_model``,
or any other attribute named as ``module:attribute``)::

    def load_model(dataset: Dataset, *, device: str, checkpoint: str | None,
                   **model_args) -> LanguageModel | StreamScorer

``dataset`` gives the vocabulary (``dataset.vocab``) and, for models that train on load, the
train split (``dataset.tokens("train").ids``). A factory that cannot serve the dataset (no
checkpoint for it, say) raises :class:`ModelUnavailable` with a one-line hint on how to get one.

``model_args`` are ``--model-args k=v,...``, each value read as a literal (:func:`parse_model_args`:
a bool, an integer, a float, ``None`` or a string) by the harness's own process, which hands them
to the factory as they are (to a worker process, :mod:`harness.worker`, already parsed). A factory
declares the ones it takes once, as a frozen dataclass of their names, types and defaults
(:func:`declared_model_args`), and each call is checked against it before the factory runs: an
unknown name, a wrong type or a value out of range is a one-line :class:`PluginError`. A factory
without a declaration gets Python's check of its signature.

The returned model scores a split in one of two ways:

- **chunk by chunk** (:class:`LanguageModel`): the split is ``B`` contiguous streams, fed in
  chunks of ``T`` positions, in order. The model keeps whatever state it needs across chunks
  (hidden states, pointer windows, caches); the harness calls :meth:`LanguageModel.reset` before
  each pass over a split.
- **a whole stream at a time** (:class:`StreamScorer`): the harness hands over each stream in
  full and the model scores it from a fresh state, as a model that reads whole texts does
  (lm-evaluation-harness's rolling log-likelihood). A model with ``score_stream`` is always
  scored this way, by the evaluation and by the causality audit alike, so the audit checks the
  code that produced the figure. Its ``reset(batch_size)``, if it has one, is still called
  before each pass (to tally a pass's figures for ``result_metadata``, say).

Inputs are numpy arrays, so a model needs no torch; scores may be numpy arrays or torch tensors
(on any device).
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.machinery
import importlib.metadata
import importlib.util
import inspect
import json
import math
import operator
import os
import sys
import traceback
import types
import typing
from collections.abc import Callable
from typing import Annotated, Any, Protocol, TypeVar, runtime_checkable

import numpy as np

from wikitext_toolkit_core.errors import ToolkitError
from wikitext_toolkit_core.files import DatasetError
from wikitext_toolkit_core.result_schema import adaptation_problem
from wikitext_toolkit_core.threads import ThreadRequest, set_torch_threads

PLUGIN_GROUP = "harness.models"
FACTORY_NAME = "load_model"


class ModelUnavailable(ToolkitError):
    """Raised by a factory that cannot serve a dataset; the message says how to get a model."""


class PluginError(ToolkitError):
    """A plugin that cannot be loaded or that broke the protocol; the message is one line."""


@dataclasses.dataclass(frozen=True)
class Chunk:
    """``T`` consecutive positions of ``B`` streams.

    Attributes:
        inputs: int64 ``[B, T]``; ``inputs[b, t]`` is the token preceding ``targets[b, t]``.
            The first input of the first stream is the implicit ``<eos>`` before the split.
        targets: int64 ``[B, T]``, the tokens to predict.
        mask: bool ``[B, T]``, true where ``targets`` is a real prediction. Padding only ever
            follows the last real position of a stream, so it can never influence a real one.
        distribution_mask: bool ``[B, T]`` or None; where true (a subset of ``mask``) the
            harness also asks for the full distribution, to audit it.
    """

    inputs: np.ndarray
    targets: np.ndarray
    mask: np.ndarray
    distribution_mask: np.ndarray | None = None


@dataclasses.dataclass(frozen=True)
class ChunkScores:
    """A model's answer for one :class:`Chunk`.

    Attributes:
        target_log_probs: float ``[B, T]``, natural-log probability of each target
            (values at padded positions are ignored).
        distributions: float ``[K, V]`` log-probabilities over the whole vocabulary at the
            ``K`` positions of ``chunk.distribution_mask``, in row-major order
            (``np.nonzero(distribution_mask)``); None when the model cannot give them.
    """

    target_log_probs: Any
    distributions: Any = None


@runtime_checkable
class LanguageModel(Protocol):
    """What a plugin's factory returns. May also have ``num_parameters: int`` and a
    ``result_metadata()`` method (see :func:`plugin_metadata`)."""

    def reset(self, batch_size: int) -> None:
        """Forget all state; the next chunk starts ``batch_size`` new streams."""

    def score(self, chunk: Chunk) -> ChunkScores:
        """Score the next chunk of the streams, updating the model's state."""


@runtime_checkable
class StreamScorer(Protocol):
    """What a plugin's factory returns for a model that scores whole streams. May also have
    ``reset(batch_size)``, ``num_parameters`` and ``result_metadata()``."""

    def score_stream(self, stream: Chunk) -> ChunkScores:
        """Score one whole stream of ``L`` positions from a fresh state.

        ``stream`` is a :class:`Chunk` of one row: ``inputs``, ``targets`` and ``mask`` are
        ``[1, L]`` (``mask`` all true; ``inputs[0, 0]`` is the token before the stream, ``<eos>``
        at the start of a split or a document), and ``distribution_mask`` as for chunks.
        Returns :class:`ChunkScores` with ``target_log_probs`` ``[1, L]``. Nothing carries over
        from one call to the next.
        """


#: A plugin's model: scored chunk by chunk, or a whole stream at a time.
Model = LanguageModel | StreamScorer


def scores_whole_streams(model: Model) -> bool:
    """Whether the harness scores ``model`` a whole stream at a time (it has ``score_stream``)."""
    return callable(getattr(model, "score_stream", None))


def is_model(model: object) -> bool:
    """Whether ``model`` can be scored: it has ``score_stream(stream)``, or ``reset(batch_size)``
    and ``score(chunk)``."""
    return isinstance(model, (LanguageModel, StreamScorer))


#: What :func:`is_model` asks, for messages.
MODEL_METHODS = "reset(batch_size) and score(chunk) methods, nor a score_stream(stream) method"


def plugin_num_parameters(model: Model, name: str) -> int | None:
    """The model's optional ``num_parameters`` as an ``int`` (a numpy integer is one too); None
    without one. Raises :class:`PluginError` when it is no non-negative integer (a float, a bool)."""
    value = getattr(model, "num_parameters", None)
    if value is None:
        return None
    try:
        count = None if isinstance(value, bool) else operator.index(value)
    except TypeError:
        count = None
    if count is None or count < 0:
        raise PluginError(
            f"{name}: num_parameters must be a non-negative integer, got {value!r} ({type(value).__name__})"
        )
    return count


def plugin_metadata(model: Model, name: str) -> dict[str, Any] | None:
    """The model's own fields for the result JSON (``plugin_metadata``): what its optional
    ``result_metadata()`` returns, called after each pass of an evaluation (the causality audit's
    too, whose answer is not recorded: the call tells no pass from the other); None without one.
    A model that adapts to the text it has scored says how under
    :data:`~wikitext_toolkit_core.result_schema.TEST_TIME_ADAPTATION`.
    Raises :class:`PluginError` when it is not a dict that JSON can represent (a numpy number, a
    NaN), or that key holds no non-empty string."""
    method = getattr(model, "result_metadata", None)
    if method is None:
        return None
    metadata = method()
    problem = metadata_problem(metadata)
    if problem:
        raise PluginError(f"{name}: {problem}")
    return metadata


def metadata_problem(metadata: object) -> str | None:
    """What is wrong with ``metadata``, a value ``result_metadata()`` returned, for a message
    (``result_metadata() returned ...``); None when it is a dict the result can hold."""
    if not isinstance(metadata, dict):
        return f"result_metadata() returned {type(metadata).__name__}, not a dict"
    try:
        json.dumps(metadata, allow_nan=False)
    except (TypeError, ValueError) as error:
        return f"result_metadata() returned a dict that is not JSON: {error}"
    problem = adaptation_problem(metadata)
    return f"result_metadata(): {problem}" if problem else None


@dataclasses.dataclass(frozen=True)
class ModelFacts:
    """What a result records of a loaded model besides its scores.

    Attributes:
        num_parameters: its optional ``num_parameters`` (:func:`plugin_num_parameters`).
        checkpoint: its optional ``checkpoint`` attribute, as a path string (recorded when no
            checkpoint was given to the factory).
    """

    num_parameters: int | None
    checkpoint: str | None


def model_facts(model: Model, name: str) -> ModelFacts:
    """The :class:`ModelFacts` of ``model``; a :class:`PluginError` naming ``name`` when its
    ``num_parameters`` is no non-negative integer or its ``checkpoint`` no path."""
    checkpoint = getattr(model, "checkpoint", None)
    if checkpoint is not None and not isinstance(checkpoint, (str, bytes, os.PathLike)):
        raise PluginError(f"{name}: checkpoint must be a path or None, got {type(checkpoint).__name__}")
    return ModelFacts(
        num_parameters=plugin_num_parameters(model, name),
        checkpoint=None if checkpoint is None else os.fsdecode(checkpoint),
    )


def describe_exception(error: BaseException) -> str:
    """An exception raised in a plugin's code, in one line: its type, its message and where it
    was raised (the innermost frame; a :class:`SyntaxError`'s message names its line itself)."""
    message = " ".join(str(error).split())
    text = f"{type(error).__name__}: {message}" if message else type(error).__name__
    frames = traceback.extract_tb(error.__traceback__)
    if frames and not isinstance(error, SyntaxError):
        text += f" (at {frames[-1].filename}:{frames[-1].lineno})"
    return text


def set_model_threads(request: ThreadRequest) -> int | None:
    """Give torch the threads ``--threads`` asks for, when the model uses it (its plugin has
    imported torch by the time its factory returns: call it then); returns the count set, None
    without torch. The harness itself never imports torch."""
    torch: Any = sys.modules.get("torch")
    return None if torch is None else set_torch_threads(request, torch)


def discover_plugins() -> dict[str, str]:
    """Plugins registered in the ``harness.models`` entry-point group: name -> target."""
    return {entry.name: entry.value for entry in importlib.metadata.entry_points(group=PLUGIN_GROUP)}


def load_factory(name: str) -> tuple[str, Callable[..., Model]]:
    """Find a plugin's factory by entry-point name, ``module`` or ``module:attribute``.

    Returns the plugin's identity (what results record as ``model``) and its factory. The
    identity is the module path for a module's own ``load_model`` factory and
    ``module:attribute`` for any other, so that two factories of one module stay apart.
    """
    target, module_name, attribute = _plugin_target(name)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name == module_name or module_name.startswith(f"{error.name}."):
            raise _no_plugin(name) from None
        hint = " (pip install 'wikitext-toolkit[torch]')" if error.name == "torch" else ""
        raise PluginError(f"plugin {name!r} failed to import: {error}{hint}") from None
    except Exception as error:  # a syntax error, a failing import, a raise at import
        raise PluginError(f"plugin {name!r} failed to import: {describe_exception(error)}") from None
    factory: Any = module
    for part in (attribute or FACTORY_NAME).split("."):
        factory = getattr(factory, part, None)
    if not callable(factory):
        if attribute:
            raise PluginError(f"plugin {target!r}: {module_name} has no callable {attribute!r}")
        raise PluginError(
            f"plugin {target!r} has no {FACTORY_NAME}(dataset, *, device, checkpoint, **model_args) factory"
        )
    return _identity(module_name, attribute), factory


def locate_plugin(name: str) -> str:
    """The identity :func:`load_factory` gives plugin ``name``, found without importing it nor the
    packages above it (none of its code runs in this process: :mod:`harness.worker` runs it);
    a :class:`PluginError` when ``name`` names no module that can be found. Whether it imports
    and has its factory is for the process that loads it to find."""
    _, module_name, attribute = _plugin_target(name)
    if find_module_spec(module_name) is None:
        raise _no_plugin(name)
    return _identity(module_name, attribute)


def find_module_spec(module_name: str) -> importlib.machinery.ModuleSpec | None:
    """The spec of module ``module_name`` (``a.b.c``), found as an import would find it but
    without running any code: a top-level name through the import system, each name below it in
    the folders of the one above (:func:`importlib.util.find_spec` would import the packages
    above it); None when there is none."""
    top, *below = module_name.split(".")
    try:
        spec = importlib.util.find_spec(top)
        for depth in range(len(below)):
            if spec is None or spec.submodule_search_locations is None:
                return None
            submodule = ".".join([top, *below[: depth + 1]])
            spec = importlib.machinery.PathFinder.find_spec(submodule, list(spec.submodule_search_locations))
    except (ImportError, ValueError):  # an empty name, a module whose spec is unset
        return None
    return spec


def _plugin_target(name: str) -> tuple[str, str, str]:
    """What plugin ``name`` (a registered name, ``module`` or ``module:attribute``) names: its
    target (``module[:attribute]``), module and attribute (empty: the factory's default name);
    a :class:`PluginError` when it names no module."""
    target = discover_plugins().get(name, name)
    module_name, _, attribute = (part.strip() for part in target.partition(":"))
    if not module_name:
        raise PluginError(
            f"plugin {name!r} names no module: give a module path (my_pkg.my_model), "
            f"module:attribute or a registered plugin (registered: {_known_plugins()})"
        )
    return target, module_name, attribute


def _known_plugins() -> str:
    """The registered plugins' names, for messages."""
    return ", ".join(sorted(discover_plugins())) or "none"


def _no_plugin(name: str) -> PluginError:
    """The error for a plugin ``name`` that is no module to be found nor a registered plugin."""
    registered = _known_plugins()
    return PluginError(
        f"no plugin {name!r}: not an importable module nor a registered plugin (registered: {registered})"
    )


def _identity(module_name: str, attribute: str) -> str:
    """What a result records as the plugin: the module for its own ``load_model`` factory,
    ``module:attribute`` for any other, so that two factories of one module stay apart."""
    return module_name if attribute in ("", FACTORY_NAME) else f"{module_name}:{attribute}"


def parse_model_args(text: str | None) -> dict[str, Any]:
    """``"order=5,name=x,flag=true"`` -> ``{"order": 5, "name": "x", "flag": True}``."""
    args: dict[str, Any] = {}
    for item in filter(None, (text or "").split(",")):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise PluginError(f"--model-args: {item!r} is not key=value")
        args[key.strip()] = _literal(value.strip())
        if isinstance(args[key.strip()], float) and not math.isfinite(args[key.strip()]):
            raise PluginError(
                f"--model-args {item.strip()}: not a finite number (the result records its arguments "
                "in JSON, which has no NaN or infinity)"
            )
    return args


@dataclasses.dataclass(frozen=True)
class AtLeast:
    """The least value of an integer model argument: ``Annotated[int, AtLeast(1)]``."""

    least: int

    def accepts(self, value: Any) -> bool:
        return bool(value >= self.least)

    def describe(self) -> str:
        named = {0: "a non-negative integer", 1: "a positive integer"}
        return named.get(self.least, f"an integer of at least {self.least}")


@dataclasses.dataclass(frozen=True)
class OneOf:
    """The values a string model argument may take: ``Annotated[str, OneOf(("sgd", "rms"))]``."""

    choices: tuple[str, ...]

    def accepts(self, value: Any) -> bool:
        return value in self.choices

    def describe(self) -> str:
        return f"one of {', '.join(self.choices)}"


#: A model argument that is an integer of at least 1, or of at least 0.
PositiveInt = Annotated[int, AtLeast(1)]
NonNegativeInt = Annotated[int, AtLeast(0)]
#: The types a declared model argument may have (alone, in ``Annotated`` or in a union with
#: ``None``), each as a message names it: those of the values ``--model-args`` gives.
_DECLARABLE_TYPES: dict[Any, str] = {
    bool: "true or false",
    int: "an integer",
    float: "a number",
    str: "a string",
}

_Arguments = TypeVar("_Arguments")
_Model = TypeVar("_Model")


def declared_model_args(
    plugin: str, declaration: type[_Arguments]
) -> Callable[[Callable[..., _Model]], Callable[..., _Model]]:
    """Declare a factory's ``--model-args`` once: the fields of the frozen dataclass
    ``declaration``, each with its name, type and default (its docstring says what each does)::

        @dataclasses.dataclass(frozen=True)
        class KneserNeyArgs:
            order: PositiveInt = 5

        @declared_model_args("kneser_ney", KneserNeyArgs)
        def load_model(dataset, *, device, checkpoint, model_args: KneserNeyArgs): ...

    The factory made takes ``(dataset, *, device, checkpoint, **model_args)``, as every factory
    does, checks ``model_args`` (:func:`_check_model_args`: one line for an unknown name or a
    value of the wrong type or out of range) and only then calls the decorated factory, with
    ``model_args`` as one ``declaration``, its defaults filled in. Whoever calls the factory, the
    harness (in a worker process or in its own) or a tuner, gets the same checks. A type is
    ``bool``, ``int``, ``float`` (an integer is a number too), ``str``, one of those in
    ``Annotated`` with :class:`AtLeast` or :class:`OneOf`, or a union of those with ``None``;
    ``plugin`` names the plugin in messages."""
    declared = _declared_types(declaration)

    def declare(body: Callable[..., _Model]) -> Callable[..., _Model]:
        def factory(dataset: Any, *, device: str, checkpoint: str | None, **model_args: Any) -> _Model:
            _check_model_args(plugin, declared, model_args)
            return body(dataset, device=device, checkpoint=checkpoint, model_args=declaration(**model_args))

        for attribute in ("__module__", "__name__", "__qualname__", "__doc__"):
            setattr(factory, attribute, getattr(body, attribute))
        return factory

    return declare


def _declared_types(declaration: type) -> dict[str, Any]:
    """The type of each field of the dataclass ``declaration``, by name, in order; TypeError
    for a type :func:`declared_model_args` does not take."""
    hints = typing.get_type_hints(declaration, include_extras=True)
    declared = {field.name: hints[field.name] for field in dataclasses.fields(declaration)}
    for name, kind in declared.items():
        _described(kind, f"{declaration.__name__}.{name}")
    return declared


def _check_model_args(plugin: str, declared: dict[str, Any], model_args: dict[str, Any]) -> None:
    """Raise a one-line :class:`PluginError` naming ``plugin`` for ``model_args`` of names that
    ``declared`` (:func:`_declared_types`) does not hold (naming those it holds), or for the first
    whose value is not of its type."""
    unknown = sorted(set(model_args) - set(declared))
    if unknown:
        raise PluginError(
            f"{plugin}: unknown model arg(s) {', '.join(unknown)} (known: {', '.join(declared)})"
        )
    for name, value in model_args.items():
        if not _accepts(declared[name], value):
            raise PluginError(f"{plugin}: {name} must be {_described(declared[name], name)}, got {value!r}")


def _accepts(kind: Any, value: object) -> bool:
    """Whether ``value`` is of the declared type ``kind`` (a bool is no integer here, though
    Python counts it as one, and an integer is a number)."""
    if typing.get_origin(kind) is Annotated:
        base, *constraints = typing.get_args(kind)
        return _accepts(base, value) and all(constraint.accepts(value) for constraint in constraints)
    if typing.get_origin(kind) in (typing.Union, types.UnionType):
        return any(_accepts(member, value) for member in typing.get_args(kind))
    if isinstance(value, bool):
        return kind is bool
    return isinstance(value, (int, float) if kind is float else kind)


def _described(kind: Any, name: str) -> str:
    """The declared type ``kind`` in a message's words (a union's ``None`` left unsaid: a value
    given is refused for being none of the others); TypeError naming the argument ``name`` for
    a type :func:`declared_model_args` does not take."""
    if typing.get_origin(kind) is Annotated:
        base, *constraints = typing.get_args(kind)
        _described(base, name)
        return constraints[-1].describe() if constraints else _described(base, name)
    if typing.get_origin(kind) in (typing.Union, types.UnionType):
        members = [member for member in typing.get_args(kind) if member is not type(None)]
        return " or ".join(_described(member, name) for member in members)
    if kind not in _DECLARABLE_TYPES:
        raise TypeError(f"model arg {name}: {kind!r} is not a type the harness checks")
    return _DECLARABLE_TYPES[kind]


def _literal(value: str) -> Any:
    lowered = value.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("none", "null"):
        return None
    for convert in (int, float):
        try:
            return convert(value)
        except ValueError:
            pass
    return value


def create_model(
    factory: Callable[..., Model],
    plugin: str,
    dataset: Any,
    *,
    device: str,
    checkpoint: str | None,
    model_args: dict[str, Any],
) -> Model:
    """Call ``factory``, checking the arguments against its signature (a factory of
    :func:`declared_model_args` checks them against its declaration itself) and the result's type.

    Raises:
        PluginError: the factory rejects the arguments, returns no model, or raises (anything but
            the one-line errors it may raise itself: :class:`ModelUnavailable`,
            :class:`PluginError`, :class:`wikitext_toolkit_core.files.DatasetError`): one line naming the
            plugin, the exception and where it was raised.
    """
    try:
        signature: inspect.Signature | None = inspect.signature(factory)
    except ValueError:  # a builtin's may have none: calling it then reports what it rejects
        signature = None
    try:
        if signature is not None:
            signature.bind(dataset, device=device, checkpoint=checkpoint, **model_args)
    except TypeError as error:
        raise PluginError(f"plugin {plugin!r} rejects its arguments: {error}") from None
    try:
        model = factory(dataset, device=device, checkpoint=checkpoint, **model_args)
    except (ModelUnavailable, PluginError, DatasetError):
        raise
    except SystemExit as exit:
        raise PluginError(
            f"plugin {plugin!r} cannot be loaded: its factory called sys.exit({exit.code!r})"
        ) from None
    except Exception as error:
        raise PluginError(
            f"plugin {plugin!r} cannot be loaded: its factory raised {describe_exception(error)}"
        ) from None
    if not is_model(model):
        raise PluginError(
            f"plugin {plugin!r}: {FACTORY_NAME} returned {type(model).__name__}, which has no {MODEL_METHODS}"
        )
    return model
