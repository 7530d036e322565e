"""In-process evaluation: :func:`evaluate_model` scores a plugin, or a model object that implements
:class:`harness.plugin.LanguageModel` or :class:`harness.plugin.StreamScorer`, under the protocol,
audits and result schema of ``python -m harness eval``, and returns each split's record with its
per-token log-probabilities (a validation figure inside a training loop, say). Nothing is
printed: errors are raised as the harness's own exception types, with the command line's one-line
messages."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from harness.datasets import Dataset
from harness.plugin import Model
from harness.protocol import DEFAULT_PROTOCOL, DEFAULT_SPLITS
from harness.runner import (
    KEYWORD_NAMES,
    DatasetChoice,
    EvaluationRequest,
    ModelLoading,
    ResultFiles,
    SplitResult,
    checked_protocol,
    run,
)
from wikitext_toolkit_core.errors import ToolkitError
from wikitext_toolkit_core.result_schema import PROTOCOL_NAMES

__all__ = ["ArgumentTypeError", "SplitResult", "evaluate_model"]


class ArgumentTypeError(ToolkitError, TypeError):
    """An argument of :func:`evaluate_model` of the wrong type; the message names it."""


def evaluate_model(
    model: str | Model,
    dataset: str | os.PathLike[str] | Dataset,
    *,
    splits: str | Iterable[str] = DEFAULT_SPLITS,
    protocol: str = DEFAULT_PROTOCOL.name,
    batch_size: int = DEFAULT_PROTOCOL.batch_size,
    bptt: int = DEFAULT_PROTOCOL.bptt,
    audit: int = DEFAULT_PROTOCOL.audit_positions,
    causality_audit: int = DEFAULT_PROTOCOL.causality_points,
    causality_tolerance: float | None = DEFAULT_PROTOCOL.causality_tolerance,
    device: str = "cpu",
    model_args: Mapping[str, Any] | None = None,
    checkpoint: str | os.PathLike[str] | None = None,
    data_dir: str | os.PathLike[str] | None = None,
    output_dir: str | os.PathLike[str] | None = None,
    overwrite: bool = False,
    progress: bool = True,
    in_process: bool = False,
) -> list[SplitResult]:
    """Score ``splits`` of ``dataset`` with ``model`` as ``python -m harness eval`` does.

    It takes its options as keywords, beyond the limit of 8 parameters that holds elsewhere in
    the toolkit (where settings travel as objects), because each is an option of ``harness eval``
    under its name and with its default (``progress`` aside): a user passes exactly those they
    change, as on the command line (as lm-evaluation-harness's ``simple_evaluate`` takes its own).
    They are checked and gathered into an :class:`harness.runner.EvaluationRequest`, which
    :func:`harness.runner.run` scores, as it scores the command line's.

    Args:
        model: a plugin, named as on the command line (a registered name, ``module`` or
            ``module:attribute``) and made by its factory for ``dataset``; or a model object
            (``reset(batch_size)`` and ``score(chunk)``, or ``score_stream(stream)``), recorded
            as its class's ``module:qualname``.
        dataset: a benchmark name, a directory in the WikiText layout, or a loaded
            :class:`harness.datasets.Dataset`, which keeps its token streams for the next call.
        splits: the splits to score, in order (one name is one split); by default ``valid``
            and ``test``, as on the command line.
        protocol: ``--protocol``: ``stream`` or ``documents`` (then ``batch_size`` stays 1).
        batch_size, bptt, audit, causality_audit, causality_tolerance: ``--batch-size``,
            ``--bptt``, ``--audit``, ``--causality-audit``, ``--causality-tolerance``, with
            their defaults (:data:`harness.protocol.DEFAULT_PROTOCOL`).
        device: ``--device`` (``auto`` as on the command line: ``cuda`` when there is one),
            given to the factory and recorded; a model object runs where its owner put it, so
            name that device.
        model_args: the factory's keyword arguments (``--model-args``), recorded; for a model
            object, recorded only (an epoch, say).
        checkpoint: ``--checkpoint``, given to the factory and recorded.
        data_dir: ``--data-dir``, where a benchmark is looked for first.
        output_dir: ``--output-dir``: each split's record and ``.logprobs.npy`` go there.
        overwrite: ``--overwrite``: replace a result in ``output_dir`` of another dataset of
            the same name (other checksums), of other plugin code (or of code it did not record)
            or of another ``checkpoint``. Without it such a result is refused, before anything is
            scored; a rerun of the same code on the same checkpoint (or with no ``checkpoint``
            named) and dataset replaces its result either way.
        progress: show each pass's progress on stderr as the command line does (a bar on a
            terminal, else a line a minute); False: print nothing.
        in_process: ``--in-process``: load a plugin in this process rather than in a fresh
            worker process for each pass (:mod:`harness.worker`; with ``causality_audit`` 0 it
            runs here either way, as a model object always does). Its results are not ranked.
            The workers start with multiprocessing's ``spawn``, which imports the caller's main
            module: a script that names a plugin keeps its top level under
            ``if __name__ == "__main__":``.

    Returns:
        One :class:`SplitResult` per split, in the order of ``splits`` (a repeated split once).

    Raises:
        DatasetError, PluginError, ModelUnavailable, DeviceError: as the command line reports
            them (an unknown split or dataset, a plugin that cannot be loaded or breaks the
            protocol or an audit, a model unavailable for the dataset, a missing device);
            PluginError too for ``model_args`` that JSON cannot hold.
        UsageError: ``output_dir`` or a file in it cannot be written, or holds a result that
            only ``overwrite`` replaces.
        ArgumentTypeError: an argument of the wrong type (a ``TypeError`` too), named.
        ValueError: an unknown protocol, a batch size or BPTT below 1 (or above 1 with
            ``documents``), a negative audit or tolerance.
    """
    _check_argument_types(locals())
    request = EvaluationRequest(
        model=model,
        data=DatasetChoice(
            sources=(dataset if isinstance(dataset, Dataset) else os.fspath(dataset),),
            data_dir=None if data_dir is None else os.fspath(data_dir),
        ),
        splits=_split_names(splits),
        protocol=checked_protocol(protocol, batch_size, bptt, audit, causality_audit, causality_tolerance),
        loading=ModelLoading(
            device=device,
            checkpoint=None if checkpoint is None else os.fspath(checkpoint),
            model_args=model_args or {},
            in_process=in_process,
        ),
        files=ResultFiles(directory=output_dir, overwrite=overwrite, names=KEYWORD_NAMES),
        progress=progress,
    )
    return run(request)


#: The types each argument of :func:`evaluate_model` takes (but ``model``, which
#: :func:`harness.runner.run` checks, and ``splits``, :func:`_split_names`), and how a message says them; a
#: bool is no integer here (``batch_size=True``), though Python counts it as one.
_ARGUMENT_TYPES: dict[str, tuple[tuple[type, ...], str]] = {
    "dataset": ((str, os.PathLike, Dataset), "a benchmark name, a directory or a Dataset"),
    "protocol": ((str,), f"a string ({' or '.join(PROTOCOL_NAMES)})"),
    **{name: ((int,), "an integer") for name in ("batch_size", "bptt", "audit", "causality_audit")},
    "causality_tolerance": ((int, float, type(None)), "a number or None"),
    "device": ((str,), "a string"),
    "model_args": ((Mapping, type(None)), "a mapping or None"),
    **{
        name: ((str, os.PathLike, type(None)), "a path or None")
        for name in ("checkpoint", "data_dir", "output_dir")
    },
    **{name: ((bool,), "True or False") for name in ("overwrite", "progress", "in_process")},
}


def _check_argument_types(arguments: Mapping[str, Any]) -> None:
    """Raise :class:`ArgumentTypeError` for the first of ``arguments`` (:func:`evaluate_model`'s,
    by name) whose type :data:`_ARGUMENT_TYPES` does not list, naming it."""
    for name, (types, described) in _ARGUMENT_TYPES.items():
        value = arguments[name]
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            raise ArgumentTypeError(f"{name} must be {described}, got {value!r} ({type(value).__name__})")


def _split_names(splits: str | Iterable[str]) -> tuple[str, ...]:
    """The splits to score, in order, each once (a string is one split); ArgumentTypeError for
    anything but a string or an iterable of strings, ValueError for none."""
    names = [splits] if isinstance(splits, str) else list(splits) if isinstance(splits, Iterable) else None
    if names is None or not all(isinstance(name, str) for name in names):
        raise ArgumentTypeError(f"splits must be a split name or an iterable of split names, got {splits!r}")
    if not names:
        raise ValueError("splits names no split: name one or more of train, valid, test")
    return tuple(dict.fromkeys(names))
