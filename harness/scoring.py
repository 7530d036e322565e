"""One split scored by a loaded plugin model: what is scored (:class:`ScoringJob`), the result
record, the files it is saved to, the names those files get in an output directory and which
saved result one may replace."""

from __future__ import annotations

import dataclasses
import json
import os
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np

from harness.datasets import Dataset
from harness.documents import Documents, split_documents
from harness.evaluate import evaluate
from harness.passes import ModelPasses, passes_of
from harness.plugin import Model
from harness.protocol import EvaluationProtocol
from harness.results import plugin_code, portable_path, result_record, token_log_probs_name
from wikitext_toolkit_core import bounded_json
from wikitext_toolkit_core.cli import UsageError
from wikitext_toolkit_core.files import DatasetError, write_atomically
from wikitext_toolkit_core.result_schema import ResultRecord


@dataclasses.dataclass(frozen=True)
class ScoringJob:
    """What one evaluation scores, and how and where: one split of one dataset, by one model,
    under one protocol. ``python -m harness eval`` and :func:`harness.api.evaluate_model` make one
    per split; :func:`score_split` scores it and :func:`harness.results.result_record` records it.

    Attributes:
        plugin: the model's recorded name (the result's ``model``): a plugin as it was loaded
            (``module`` or ``module:attribute``), or a model object's ``module:qualname``.
        model_args: the factory's keyword arguments (``--model-args``), as recorded.
        checkpoint: the checkpoint given to the factory (``--checkpoint``); None when none was
            named (the record then names the model's own ``checkpoint`` attribute, if any).
        dataset: the loaded dataset.
        split: the split of ``dataset`` scored (``train``, ``valid`` or ``test``).
        protocol: how it is scored: streams, chunks and audits.
        device: the device the model runs on, resolved (``cpu``, ``cuda:0``; never ``auto``).
        data_dir: the ``--data-dir`` the dataset was looked for in (None: none given); recorded
            paths under it are written relative to it (:func:`harness.results.portable_path`).
    """

    plugin: str
    model_args: dict[str, Any]
    checkpoint: str | None
    dataset: Dataset
    split: str
    protocol: EvaluationProtocol
    device: str
    data_dir: str | None


def result_paths(
    output_dir: str | os.PathLike,
    plugin: str,
    model_args: dict[str, Any],
    dataset: str,
    split: str,
    protocol: str = "stream",
) -> tuple[Path, Path]:
    """The record (JSON) and token log-probabilities (.npy) of one evaluation in ``output_dir``:
    ``PLUGIN[+ARG=VALUE...].DATASET.SPLIT.json`` (``.SPLIT.documents.json`` with the documents
    protocol) and its ``.logprobs.npy``, each ``ARG`` and ``VALUE`` percent-encoded (every
    character but letters, digits and ``_.-~``: ``/`` is ``%2F``), so that both are files directly
    in ``output_dir`` whatever the model arguments."""
    arguments = "".join(
        f"+{quote(str(key), safe='')}={quote(str(value), safe='')}"
        for key, value in sorted(model_args.items())
    )
    identity = plugin.replace(":", "-")  # module:attribute, a portable file name
    suffix = "" if protocol == "stream" else f".{protocol}"
    record = Path(output_dir) / f"{identity}{arguments}.{dataset}.{split}{suffix}.json"
    return record, record.with_name(token_log_probs_name(record.name))


def check_replaceable(
    json_path: Path | None,
    plugin: str,
    checkpoint: str | os.PathLike | None,
    *,
    data_dir: str | os.PathLike | None,
    overwrite_option: str,
) -> None:
    """Refuse, before scoring, to replace the result at ``json_path`` with one of other plugin code
    or another ``checkpoint`` (a rerun of the same code on the same checkpoint replaces it; with
    no ``checkpoint`` named, the checkpoint is not compared); a result that recorded no code counts
    as other code. A :class:`wikitext_toolkit_core.cli.UsageError` names the result and ``overwrite_option``,
    the option that replaces any (``--overwrite`` on the command line). Nothing at ``json_path``, or no
    result there, is no reason to refuse (the write itself reports a file it cannot replace)."""
    if json_path is None or not json_path.is_file():
        return
    try:
        existing = bounded_json.loads(json_path.read_bytes())
    except (OSError, ValueError):
        existing = None
    if not isinstance(existing, dict):
        return
    recorded_code = (existing.get("plugin_code") or {}).get("sha256")
    current_code = (plugin_code(plugin) or {}).get("sha256")
    why = None
    if recorded_code is None:
        why = "code it did not record (written before 2026-11-28)"
    elif recorded_code != current_code:
        why = f"other plugin code ({recorded_code[:12]}, now {str(current_code)[:12]})"
    elif checkpoint is not None and existing.get("checkpoint") != portable_path(checkpoint, data_dir):
        why = f"another checkpoint ({existing.get('checkpoint')})"
    if why is not None:
        raise UsageError(
            f"{json_path}: holds a result of {why}; pass {overwrite_option} to replace it, or write elsewhere"
        )


def score_split(
    model: Model | ModelPasses,
    job: ScoringJob,
    *,
    json_path: Path | None,
    npy_path: Path | None,
    progress: bool = True,
) -> tuple[ResultRecord, np.ndarray]:
    """Score ``job`` with ``model`` (a model object, or :class:`harness.passes.ModelPasses`: a
    plugin loaded in a worker process for each pass); returns the result record and the
    per-token log-probabilities (float64 ``[N]``, stream order). The record names the
    log-probabilities' file relative to ``json_path``'s folder when both paths are given (nothing
    is written here: :func:`save_scores`). Raises :class:`harness.plugin.PluginError` when the
    model's ``num_parameters`` (checked before scoring) or metadata cannot be recorded."""
    passes = passes_of(model)
    facts = passes.model_facts(job.plugin)
    dataset, split = job.dataset, job.split
    documents = split_documents_of(dataset, split) if job.protocol.name == "documents" else None
    evaluation = evaluate(
        passes,
        dataset.tokens(split).ids,
        eos_id=dataset.vocab.eos_id,
        vocab_size=len(dataset.vocab),
        protocol=job.protocol,
        documents=None if documents is None else (documents.starts, documents.lengths),
        name=f"{job.plugin} {dataset.name}/{split}",
        progress=progress,
    )
    record = result_record(
        dataclasses.replace(job, checkpoint=job.checkpoint or facts.checkpoint),
        evaluation,
        documents=documents,
        num_parameters=facts.num_parameters,
        token_log_probs_file=(
            os.path.relpath(npy_path, json_path.parent) if npy_path and json_path else None
        ),
    )
    return record, evaluation.token_log_probs


def split_documents_of(dataset: Dataset, split: str) -> Documents:
    """The documents of ``split`` (:func:`harness.documents.split_documents` of its file's text,
    a leading byte-order mark dropped as the token stream drops it); a
    :class:`wikitext_toolkit_core.files.DatasetError` when it has no article heading."""
    documents = split_documents(dataset.read_bytes(split).decode("utf-8-sig"))
    if documents is None:
        raise DatasetError(
            f"{dataset.path(split)}: no article heading (a line ' = Title = '): the documents "
            "protocol scores WikiText-style articles; score this split with --protocol stream"
        )
    tokens = len(dataset.tokens(split).ids)
    if int(documents.lengths.sum()) != tokens:  # the two readings of one file must agree
        raise DatasetError(
            f"{dataset.path(split)}: its documents hold {int(documents.lengths.sum()):,} tokens, "
            f"its token stream {tokens:,}: the documents protocol cannot score it"
        )
    return documents


def save_scores(
    record: ResultRecord, token_log_probs: np.ndarray, json_path: Path | None, npy_path: Path | None
) -> None:
    """Write the token log-probabilities to ``npy_path`` and the record to ``json_path``, each
    where given (the log-probabilities first: the record names their file). The record is
    serialised, and read back as the leaderboard reads it, before either file is written, so a
    record that cannot be saved leaves no file behind."""
    text = json.dumps(record.to_json(), indent=2, allow_nan=False) + "\n"
    ResultRecord.from_json(json.loads(text))
    if npy_path is not None:
        write_atomically(npy_path, partial(np.save, arr=token_log_probs))
    if json_path is not None:
        write_atomically(json_path, text)
