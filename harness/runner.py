"""One evaluation, from its request to its results: :class:`EvaluationRequest` says what is scored,
how, and where its results go; :func:`run` resolves it (the plugin or model object, the datasets,
the result files and what they may replace, the worker or in-process choice), scores each split,
checks and saves its record and returns the results. ``python -m harness eval``
(:mod:`harness.cli`) and :func:`harness.api.evaluate_model` are shells over it: each turns its
inputs into a request and presents what :func:`run` returns.

The layers below it, for code that scores in its own way (docs/harness.md, "Evaluating from
Python"): :func:`harness.scoring.score_split` scores one split of a dataset with a loaded model and
makes its record; :func:`harness.evaluate.evaluate` scores token ids with a model under a
protocol, audited, and makes no record.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from harness.datasets import Dataset, load_dataset
from harness.passes import ModelPasses, SameModel
from harness.plugin import (
    MODEL_METHODS,
    Model,
    ModelUnavailable,
    PluginError,
    create_model,
    is_model,
    load_factory,
    locate_plugin,
    set_model_threads,
)
from harness.protocol import DEFAULT_PROTOCOL, DEFAULT_SPLITS, EvaluationProtocol
from harness.results import token_log_probs_name
from harness.scoring import (
    ScoringJob,
    check_output_directory,
    check_replaceable,
    result_paths,
    save_scores,
    score_split,
)
from harness.worker import DatasetFiles, PluginLoad, WorkerPlugin
from wikitext_toolkit_core.allocator import retain_freed_memory
from wikitext_toolkit_core.cli import UsageError, check_not_an_input, check_output_file
from wikitext_toolkit_core.devices import resolve_device
from wikitext_toolkit_core.result_schema import ResultRecord
from wikitext_toolkit_core.threads import ThreadRequest


@dataclasses.dataclass(frozen=True)
class DatasetChoice:
    """The datasets an evaluation scores.

    Attributes:
        sources: in order, each a benchmark name or a directory (``--dataset``), or a loaded
            :class:`harness.datasets.Dataset`, which keeps its token streams for the next request.
        data_dir: ``--data-dir``, where a benchmark is looked for first (None: none given).
        skip_unavailable: a dataset the plugin cannot serve (:class:`ModelUnavailable`) is
            reported and skipped rather than an error (the command line's default datasets: those
            found, not those named).
    """

    sources: tuple[str | Dataset, ...]
    data_dir: str | None = None
    skip_unavailable: bool = False


@dataclasses.dataclass(frozen=True)
class ModelLoading:
    """How the model is made and where it runs.

    Attributes:
        device: ``--device`` (``auto``: ``cuda`` when there is one), given to the factory and
            recorded; a model object runs where its owner put it, so this names that device.
        checkpoint: ``--checkpoint``, given to the factory and recorded (None: none named).
        model_args: the factory's keyword arguments (``--model-args``, parsed), recorded; for a
            model object, recorded only.
        in_process: ``--in-process``: a plugin is loaded in this process rather than in a fresh
            worker process for each pass (with the causality audit off it is loaded here either
            way, as a model object always is).
        threads: ``--threads``, applied to torch once the model is made; None: torch's own choice.
        own_process: the harness owns this process (the command line's): on a CPU it keeps freed
            memory for the next chunk, in this process and in its workers
            (:func:`wikitext_toolkit_core.allocator.retain_freed_memory`).
    """

    device: str = "cpu"
    checkpoint: str | None = None
    model_args: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    in_process: bool = False
    threads: ThreadRequest | None = None
    own_process: bool = False


@dataclasses.dataclass(frozen=True)
class OptionNames:
    """How messages name the settings of :class:`ResultFiles` that both callers have: as options
    of the command line or as keywords of :func:`harness.api.evaluate_model`."""

    output_dir: str
    overwrite: str


COMMAND_LINE_NAMES = OptionNames(output_dir="--output-dir", overwrite="--overwrite")
KEYWORD_NAMES = OptionNames(output_dir="output_dir", overwrite="overwrite=True")


@dataclasses.dataclass(frozen=True)
class ResultFiles:
    """Where the results are written, and which results there they may replace.

    Attributes:
        directory: ``--output-dir``: each split's record and ``.logprobs.npy``, named by
            :func:`harness.scoring.result_paths` (None: none).
        record: ``--output``: the record of the one split scored (None: none).
        token_log_probs: ``--save-token-logprobs``: its per-token file; None: beside ``record``
            (``STEM.logprobs.npy``), or nowhere without one.
        overwrite: ``--overwrite``: replace a result in ``directory`` of another dataset of the
            same name, of other plugin code or of another checkpoint (otherwise refused before
            anything is scored; a rerun of the same code replaces its result either way).
        names: how messages name ``directory`` and ``overwrite``.
    """

    directory: str | os.PathLike[str] | None = None
    record: str | None = None
    token_log_probs: str | None = None
    overwrite: bool = False
    names: OptionNames = KEYWORD_NAMES


@dataclasses.dataclass(frozen=True)
class EvaluationRequest:
    """One evaluation: the splits of ``data`` scored by ``model`` under ``protocol``.

    Attributes:
        model: a plugin, named as on the command line (a registered name, ``module`` or
            ``module:attribute``); or a model object (``reset(batch_size)`` and ``score(chunk)``,
            or ``score_stream(stream)``), recorded as its class's ``module:qualname``.
        data: the datasets scored.
        splits: the splits of each, in order, each once.
        protocol: how each split is scored and audited.
        loading: how the model is made and where it runs.
        files: where the results are written.
        progress: show each pass's progress on stderr (a bar on a terminal, else a line a minute).
    """

    model: str | Model
    data: DatasetChoice
    splits: tuple[str, ...] = DEFAULT_SPLITS
    protocol: EvaluationProtocol = DEFAULT_PROTOCOL
    loading: ModelLoading = ModelLoading()
    files: ResultFiles = ResultFiles()
    progress: bool = True


@dataclasses.dataclass(frozen=True)
class SplitResult:
    """One split scored by :func:`run`.

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


class RunReport:
    """What :func:`run` tells its caller as it goes. This one tells nothing (what
    :func:`harness.api.evaluate_model` uses); the command line's prints."""

    def scored(self, record: ResultRecord) -> None:
        """A split has been scored and its record checked; its files are written next."""

    def skipped(self, dataset: Dataset, unavailable: ModelUnavailable) -> None:
        """The plugin cannot serve ``dataset``, which is skipped
        (:attr:`DatasetChoice.skip_unavailable`)."""


def checked_protocol(
    name: str, batch_size: int, bptt: int, audit: int, causality_audit: int, causality_tolerance: float | None
) -> EvaluationProtocol:
    """The protocol of the options ``--protocol``, ``--batch-size``, ``--bptt``, ``--audit``,
    ``--causality-audit`` and ``--causality-tolerance`` (:func:`harness.api.evaluate_model`'s
    keywords of those names, whose types it has checked), each checked as the command line's parser
    checks it; ValueError, naming the keyword, otherwise."""
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
    # EvaluationProtocol checks the name, and batch_size with it
    return EvaluationProtocol(name, batch_size, bptt, audit, causality_audit, causality_tolerance)


#: The report of a caller told nothing.
SILENT = RunReport()


def run(request: EvaluationRequest, report: RunReport = SILENT) -> list[SplitResult]:
    """Score each split of each dataset of ``request``, save each where its files say and return
    them, in order (none for a dataset the plugin cannot serve, when ``skip_unavailable``).
    What can be refused is refused before any model is made: the result files, the plugin (found,
    not imported, when it runs in worker processes), ``model_args`` that JSON cannot hold, the
    device, the datasets and splits, and the results the files would replace.

    Raises:
        DatasetError, PluginError, ModelUnavailable, DeviceError: an unknown split or dataset, a
            plugin that cannot be loaded or breaks the protocol or an audit, a model unavailable
            for a dataset (unless skipped), a missing device.
        UsageError: a result file that cannot be written, two results written to one file, or a
            result in place that only ``overwrite`` replaces.
    """
    files = request.files
    _check_files(files)  # before anything, a download included
    plugin, factory = _identify(request)
    model_args = _recordable_model_args(request.loading.model_args)
    _check_single_evaluation(request)
    device = resolve_device(request.loading.device)
    if request.loading.own_process and device == "cpu":  # plugins free the same large tensors at every chunk
        retain_freed_memory()
    datasets = [_loaded(source, request.data.data_dir) for source in request.data.sources]
    jobs = _jobs(request, plugin, model_args, device, datasets)
    _check_result_files(files, request.data.sources, jobs)
    if not files.overwrite:
        for job in (job for dataset_jobs in jobs for job in dataset_jobs):
            _check_replaceable(files, job)
    _check_not_inputs(files, datasets, request.loading.checkpoint)
    return [
        result for dataset_jobs in jobs for result in _scored_dataset(request, factory, dataset_jobs, report)
    ]


def _identify(request: EvaluationRequest) -> tuple[str, Callable[..., Model] | None]:
    """The recorded name of the request's model and the factory that makes it in this process;
    no factory for a plugin that runs in worker processes, which is found without importing it
    (:func:`harness.plugin.locate_plugin`). A model object is named by its class's
    ``module:qualname`` and made by a factory that returns it; PluginError for an object that is
    no model."""
    model = request.model
    if isinstance(model, str):
        in_worker = not request.loading.in_process and request.protocol.causality_points > 0
        return (locate_plugin(model), None) if in_worker else load_factory(model)
    if not is_model(model):
        raise PluginError(f"{type(model).__name__} is no plugin name nor a model: it has no {MODEL_METHODS}")
    return f"{type(model).__module__}:{type(model).__qualname__}", lambda *_, **__: model


def _recordable_model_args(model_args: Mapping[str, Any]) -> dict[str, Any]:
    """``model_args`` as the record holds them; PluginError, before any work, when JSON cannot
    hold them as they are (a NaN, a numpy number, a key that is no string, a tuple)."""
    arguments = dict(model_args)
    try:
        text = json.dumps(arguments, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise PluginError(f"model_args {arguments!r}: not recordable in JSON: {error}") from None
    if json.loads(text) != arguments:
        raise PluginError(f"model_args {arguments!r}: not recordable in JSON, which reads them as {text}")
    return arguments


def _loaded(source: str | Dataset, data_dir: str | None) -> Dataset:
    """The dataset ``source`` names (looked for in ``data_dir`` first), or ``source`` itself."""
    return source if isinstance(source, Dataset) else load_dataset(source, data_dir)


def _jobs(
    request: EvaluationRequest, plugin: str, model_args: dict[str, Any], device: str, datasets: list[Dataset]
) -> list[list[ScoringJob]]:
    """What is scored: for each of ``datasets``, a job for each split of ``request``, in order."""
    return [
        [
            ScoringJob(
                plugin=plugin,
                model_args=model_args,
                checkpoint=request.loading.checkpoint,
                dataset=dataset,
                split=split,
                protocol=request.protocol,
                device=device,
                data_dir=request.data.data_dir,
            )
            for split in request.splits
        ]
        for dataset in datasets
    ]


def _token_file(files: ResultFiles) -> str | None:
    """Where the per-token log-probabilities of a single-file evaluation go: ``token_log_probs``,
    else beside ``record`` (``STEM.logprobs.npy``: a saved result always keeps its per-token file,
    which ``leaderboard`` verifies and ``compare`` tests), else nowhere."""
    if files.token_log_probs is not None or files.record is None:
        return files.token_log_probs
    return str(Path(files.record).with_name(token_log_probs_name(Path(files.record).name)))


def _single_files(files: ResultFiles) -> list[tuple[str, str]]:
    """The single files of ``files`` that are written, each with its option: ``--output`` and the
    per-token file (:func:`_token_file`)."""
    named = [("--output", files.record), ("--save-token-logprobs", _token_file(files))]
    return [(option, path) for option, path in named if path is not None]


def _check_files(files: ResultFiles) -> None:
    """Refuse, before any work, result files that cannot be written or that name one file twice."""
    given = [("--output", files.record), ("--save-token-logprobs", files.token_log_probs)]
    if files.directory is not None and any(path is not None for _, path in given):
        options = " or ".join(option for option, path in given if path is not None)
        raise UsageError(f"--output-dir names its own files; it does not go with {options}: drop one")
    for option, path in _single_files(files):
        check_output_file(path, option)
    record, token_file = files.record, _token_file(files)
    if record is not None and token_file is not None and Path(record).resolve() == Path(token_file).resolve():
        raise UsageError(f"--output and --save-token-logprobs name the same file ({record}); name two files")
    if files.directory is not None:
        check_output_directory(files.directory, files.names.output_dir)


def _check_single_evaluation(request: EvaluationRequest) -> None:
    """Refuse single result files, or a checkpoint, for more than one evaluation."""
    counts = (("--dataset", len(request.data.sources)), ("--split", len(request.splits)))
    several = [option for option, count in counts if count != 1]
    if _single_files(request.files) and several:
        raise UsageError(
            "--output and --save-token-logprobs take one dataset and one split (the default --split "
            f"is {' and '.join(DEFAULT_SPLITS)}); name one with {' and '.join(several)}, or use "
            "--output-dir for several"
        )
    if request.loading.checkpoint is not None and len(request.data.sources) != 1:
        raise UsageError("--checkpoint belongs to one dataset: name exactly one with --dataset")


def _directory_paths(directory: str | os.PathLike[str], job: ScoringJob) -> tuple[Path, Path]:
    """The record and per-token files of ``job`` in ``directory`` (:func:`result_paths`)."""
    return result_paths(directory, job.plugin, job.model_args, job.dataset.name, job.split, job.protocol.name)


def _file_paths(files: ResultFiles, job: ScoringJob) -> tuple[Path | None, Path | None]:
    """Where ``job``'s record (JSON) and token log-probabilities (.npy) go, if anywhere."""
    if files.directory is not None:
        return _directory_paths(files.directory, job)
    token_file = _token_file(files)
    return (
        None if files.record is None else Path(files.record),
        None if token_file is None else Path(token_file),
    )


def _check_result_files(
    files: ResultFiles, sources: tuple[str | Dataset, ...], jobs: list[list[ScoringJob]]
) -> None:
    """Refuse, before scoring, the files of ``files.directory`` that cannot be written (a name too
    long, a directory in the way) and two evaluations written to one file (two datasets of one
    name: one named twice, or two directories of one base name); ``jobs``: those of each of
    ``sources``."""
    if files.directory is None:
        return
    writers: dict[Path, str] = {}
    for source, dataset_jobs in zip(sources, jobs):
        name = source if isinstance(source, str) else source.name
        for job in dataset_jobs:
            json_path, npy_path = _directory_paths(files.directory, job)
            for path in (json_path, npy_path):
                check_output_file(path, files.names.output_dir)
            if json_path in writers:
                raise UsageError(
                    f"--dataset {writers[json_path]} and {name} are both named {job.dataset.name}: both "
                    f"would be written to {json_path}; evaluate one of them into another --output-dir"
                )
            writers[json_path] = name


def _check_replaceable(files: ResultFiles, job: ScoringJob) -> None:
    """Refuse, before scoring, to replace a result in ``job``'s record file that only
    ``overwrite`` replaces (:func:`harness.scoring.check_replaceable`)."""
    check_replaceable(
        _file_paths(files, job)[0],
        job.plugin,
        job.checkpoint,
        scored=(job.dataset, job.split),
        data_dir=job.data_dir,
        overwrite_option=files.names.overwrite,
    )


def _check_not_inputs(files: ResultFiles, datasets: list[Dataset], checkpoint: str | None) -> None:
    """Refuse single result files that would overwrite a dataset's file or the checkpoint."""
    outputs = _single_files(files)
    if not outputs:  # a dataset object's files may be gone: it holds what it needs
        return
    for dataset in datasets:
        inputs = dataset.files() + ([Path(checkpoint)] if checkpoint else [])
        for option, path in outputs:
            check_not_an_input(path, option, inputs)


def _scored_dataset(
    request: EvaluationRequest,
    factory: Callable[..., Model] | None,
    jobs: list[ScoringJob],
    report: RunReport,
) -> list[SplitResult]:
    """Score ``jobs``, the splits of one dataset, with one model; none when the plugin cannot
    serve the dataset and ``skip_unavailable`` says to skip it."""
    for job in jobs:
        job.dataset.tokens(job.split)  # an unknown or empty split fails here, before the model is made
    try:
        model = _load_model(request, factory, jobs[0])
    except ModelUnavailable as unavailable:
        if not request.data.skip_unavailable:
            raise
        report.skipped(jobs[0].dataset, unavailable)
        return []
    with model:
        return [_scored(model, job, request, report) for job in jobs]


def _load_model(
    request: EvaluationRequest, factory: Callable[..., Model] | None, job: ScoringJob
) -> ModelPasses:
    """The model that scores ``job``'s dataset: the plugin, named as the request names it, loaded
    in a fresh worker process for each pass (no ``factory``: :class:`harness.worker.WorkerPlugin`),
    or ``factory``'s model, made here once, with the request's threads applied."""
    loading = request.loading
    if factory is None:
        load = PluginLoad(
            plugin=str(request.model),
            dataset=DatasetFiles.of(job.dataset),
            device=job.device,
            checkpoint=job.checkpoint,
            model_args=job.model_args,
            threads=loading.threads,
            retain_memory=loading.own_process and job.device == "cpu",
        )
        return WorkerPlugin(load, len(job.dataset.vocab))
    model = create_model(
        factory,
        job.plugin,
        job.dataset,
        device=job.device,
        checkpoint=job.checkpoint,
        model_args=job.model_args,
    )
    if loading.threads is not None:
        set_model_threads(loading.threads)
    return SameModel(model)


def _scored(
    model: ModelPasses, job: ScoringJob, request: EvaluationRequest, report: RunReport
) -> SplitResult:
    """Score ``job``, report its checked record, then save it and its per-token file where the
    request's files say (the result first: a failed write loses nothing)."""
    json_path, npy_path = _file_paths(request.files, job)
    record, token_log_probs = score_split(
        model, job, json_path=json_path, npy_path=npy_path, progress=request.progress
    )
    report.scored(record)
    save_scores(record, token_log_probs, json_path, npy_path)
    return SplitResult(record, token_log_probs)
