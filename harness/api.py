"""In-process evaluation: :func:`evaluate_model` scores a plugin, or a model object that implements
:class:`harness.plugin.LanguageModel` or :class:`harness.plugin.StreamScorer`, under the protocol,
audits and result schema of ``python -m harness eval``, and returns each split's record with its
per-token log-probabilities (a validation figure inside a training loop, say). Nothing is
printed: errors are raised as the harness's own exception types, with the command line's one-line
messages."""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from harness.datasets import Dataset, load_dataset
from harness.passes import ModelPasses, SameModel
from harness.plugin import (
    MODEL_METHODS,
    Model,
    PluginError,
    create_model,
    is_model,
    load_factory,
    locate_plugin,
)
from harness.protocol import DEFAULT_PROTOCOL, DEFAULT_SPLITS, EvaluationProtocol
from harness.scoring import (
    ScoringJob,
    check_output_directory,
    check_replaceable,
    result_paths,
    save_scores,
    score_split,
)
from harness.worker import DatasetFiles, PluginLoad, WorkerPlugin
from wikitext_toolkit_core.cli import check_output_file
from wikitext_toolkit_core.devices import resolve_device
from wikitext_toolkit_core.errors import ToolkitError
from wikitext_toolkit_core.result_schema import PROTOCOL_NAMES, ResultRecord


class ArgumentTypeError(ToolkitError, TypeError):
    """An argument of :func:`evaluate_model` of the wrong type; the message names it."""


@dataclasses.dataclass(frozen=True)
class SplitResult:
    """One split scored by :func:`evaluate_model`.

    Attributes:
        record: the result record, field for field what ``python -m harness eval`` writes
            (``perplexity``, ``nll``, ``tokens``, ``audit``, ``causality_audit``, ``audited``,
            ``audit_gaps``, ...).
        token_log_probs: float64 ``[N]``, the natural-log probability of each of the split's
            ``N`` tokens in stream order (what ``--save-token-logprobs`` saves).
    """

    record: ResultRecord
    token_log_probs: np.ndarray

    @property
    def perplexity(self) -> float:
        """``exp(nll)``."""
        return self.record.perplexity

    @property
    def nll(self) -> float:
        """Mean negative log-likelihood, nats per token."""
        return self.record.nll

    @property
    def tokens(self) -> int:
        """``N``, the tokens scored."""
        return self.record.tokens


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
    names = _split_names(splits)
    settings = _checked_protocol(protocol, batch_size, bptt, audit, causality_audit, causality_tolerance)
    if output_dir is not None:
        check_output_directory(output_dir, "output_dir")
    in_worker = isinstance(model, str) and not in_process and causality_audit > 0
    plugin, factory = (locate_plugin(str(model)), None) if in_worker else _identify(model)
    arguments = _recordable_model_args(model_args)
    device = resolve_device(device)
    data_root = None if data_dir is None else os.fspath(data_dir)
    data = dataset if isinstance(dataset, Dataset) else load_dataset(os.fspath(dataset), data_root)
    outputs = {
        split: _output_paths(output_dir, plugin, arguments, data.name, split, settings.name)
        for split in names
    }
    for split in names:
        data.tokens(split)  # an unknown or empty split fails here, before the model is made
    checkpoint_path = None if checkpoint is None else os.fspath(checkpoint)
    if not overwrite:
        for split, (json_path, _) in outputs.items():
            check_replaceable(
                json_path,
                plugin,
                checkpoint_path,
                scored=(data, split),
                data_dir=data_root,
                overwrite_option="overwrite=True",
            )
    job = ScoringJob(
        plugin=plugin,
        model_args=arguments,
        checkpoint=checkpoint_path,
        dataset=data,
        split=names[0],
        protocol=settings,
        device=device,
        data_dir=data_root,
    )
    with _load_model(str(model) if factory is None else factory, job) as scorer:
        return [
            _score(scorer, dataclasses.replace(job, split=split), outputs=outputs[split], progress=progress)
            for split in names
        ]


def _load_model(plugin: str | Callable[..., Model], job: ScoringJob) -> ModelPasses:
    """The model that scores ``job``: ``plugin``, named as the caller named it, loaded in a fresh
    worker process for each pass (:class:`harness.worker.WorkerPlugin`), or a factory's model,
    made here once."""
    if callable(plugin):
        return SameModel(
            create_model(
                plugin,
                job.plugin,
                job.dataset,
                device=job.device,
                checkpoint=job.checkpoint,
                model_args=job.model_args,
            )
        )
    load = PluginLoad(
        plugin=plugin,
        dataset=DatasetFiles.of(job.dataset),
        device=job.device,
        checkpoint=job.checkpoint,
        model_args=job.model_args,
        threads=None,
        retain_memory=False,
    )
    return WorkerPlugin(load, len(job.dataset.vocab))


#: The types each argument of :func:`evaluate_model` takes (but ``model``, which
#: :func:`_identify` checks, and ``splits``, :func:`_split_names`), and how a message says them; a
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


def _split_names(splits: str | Iterable[str]) -> list[str]:
    """The splits to score, in order, each once (a string is one split); ArgumentTypeError for
    anything but a string or an iterable of strings, ValueError for none."""
    names = [splits] if isinstance(splits, str) else list(splits) if isinstance(splits, Iterable) else None
    if names is None or not all(isinstance(name, str) for name in names):
        raise ArgumentTypeError(f"splits must be a split name or an iterable of split names, got {splits!r}")
    if not names:
        raise ValueError("splits names no split: name one or more of train, valid, test")
    return list(dict.fromkeys(names))


def _checked_protocol(
    name: str, batch_size: int, bptt: int, audit: int, causality_audit: int, causality_tolerance: float | None
) -> EvaluationProtocol:
    """The protocol, its values (of the types :func:`_check_argument_types` checked) checked as the
    command line's options are; ValueError otherwise."""
    for option, value, least in (
        ("batch_size", batch_size, 1),
        ("bptt", bptt, 1),
        ("audit", audit, 0),
        ("causality_audit", causality_audit, 0),
    ):
        if value < least:
            raise ValueError(f"{option} must be an integer of at least {least}, got {value!r}")
    if causality_tolerance is not None and not 0 <= causality_tolerance < math.inf:
        raise ValueError(
            f"causality_tolerance must be a finite number of at least 0, got {causality_tolerance}"
        )
    return EvaluationProtocol(  # which checks the name, and batch_size with it
        name=name,
        batch_size=batch_size,
        bptt=bptt,
        audit_positions=audit,
        causality_points=causality_audit,
        causality_tolerance=causality_tolerance,
    )


def _identify(model: str | Model) -> tuple[str, Callable[..., Model]]:
    """The recorded name and the factory of a plugin (loaded as the command line loads it), or
    of a model object: its class's ``module:qualname`` and a factory that returns it whatever
    the arguments. PluginError for an object that is no model."""
    if isinstance(model, str):
        return load_factory(model)
    if not is_model(model):
        raise PluginError(f"{type(model).__name__} is no plugin name nor a model: it has no {MODEL_METHODS}")
    return f"{type(model).__module__}:{type(model).__qualname__}", lambda *_, **__: model


def _recordable_model_args(model_args: Mapping[str, Any] | None) -> dict[str, Any]:
    """``model_args`` as the record holds them; PluginError, before any work, when JSON cannot
    hold them as they are (a NaN, a numpy number, a key that is no string, a tuple)."""
    arguments = dict(model_args or {})
    try:
        text = json.dumps(arguments, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise PluginError(f"model_args {arguments!r}: not recordable in JSON: {error}") from None
    if json.loads(text) != arguments:
        raise PluginError(f"model_args {arguments!r}: not recordable in JSON, which reads them as {text}")
    return arguments


def _output_paths(
    output_dir: str | os.PathLike[str] | None,
    plugin: str,
    model_args: dict[str, Any],
    dataset: str,
    split: str,
    protocol: str,
) -> tuple[Path, Path] | tuple[None, None]:
    """The record (JSON) and log-probabilities (.npy) files of one split in ``output_dir``,
    checked writable, as ``--output-dir`` names them; (None, None) without an output directory."""
    if output_dir is None:
        return None, None
    json_path, npy_path = result_paths(output_dir, plugin, model_args, dataset, split, protocol)
    for path in (json_path, npy_path):
        check_output_file(path, "output_dir")
    return json_path, npy_path


def _score(
    model: ModelPasses, job: ScoringJob, *, outputs: tuple[Path, Path] | tuple[None, None], progress: bool
) -> SplitResult:
    """Score ``job``, check its record as the command line does and save both where asked
    (``outputs``: the record's and the log-probabilities' files, or neither)."""
    json_path, npy_path = outputs
    record, token_log_probs = score_split(
        model, job, json_path=json_path, npy_path=npy_path, progress=progress
    )
    save_scores(record, token_log_probs, json_path, npy_path)
    return SplitResult(record, token_log_probs)
