"""One split scored by a loaded plugin model: what is scored (:class:`ScoringJob`), the result
record, the files it is saved to, the names those files get in an output directory and which
saved result one may replace."""

from __future__ import annotations

import dataclasses
import json
import os
from functools import partial
from pathlib import Path
from typing import Any, BinaryIO
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
from wikitext_toolkit_core.cli import UsageError, check_output_dir
from wikitext_toolkit_core.files import DatasetError, check_files_can_be_created, write_atomically
from wikitext_toolkit_core.result_schema import ResultRecord


@dataclasses.dataclass(frozen=True)
class ScoringJob:
    """What one evaluation scores, and how and where: one split of one dataset, by one model,
    under one protocol. :func:`harness.runner.run` (``python -m harness eval``,
    :func:`harness.api.evaluate_model`) makes one per split; :func:`score_split` scores it and
    :func:`harness.results.result_record` records it.

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


def check_output_directory(output_dir: str | os.PathLike, option: str) -> Path:
    """Refuse, before any work, an output directory (``option``: ``--output-dir`` or ``output_dir``)
    that is named by the empty string (which would be the working directory) or that cannot be
    created or written in (:func:`wikitext_toolkit_core.cli.check_output_dir`), its file system
    included (``/proc``, which root's permissions allow); returns the path."""
    if not os.fspath(output_dir):
        raise UsageError(f"{option} is empty: name a directory ('.' for the working directory)")
    path = check_output_dir(output_dir, option)
    try:
        check_files_can_be_created(path)
    except OSError as error:
        folder = Path(error.filename).parent if error.filename else path  # of the file it tried
        raise UsageError(f"{option} {path}: cannot create files in {folder} ({error.strerror})") from None
    return path


def check_replaceable(
    json_path: Path | None,
    plugin: str,
    checkpoint: str | os.PathLike | None,
    *,
    scored: tuple[Dataset, str],
    data_dir: str | os.PathLike | None,
    overwrite_option: str,
) -> None:
    """Refuse, before scoring, to replace the result at ``json_path`` with one of another dataset of
    the same name (``scored``: the dataset and split to score; another checksum of that split or of
    its training split), of other plugin code or of another ``checkpoint`` (a rerun of the same
    code on the same checkpoint replaces it; with no ``checkpoint`` named, the checkpoint is not
    compared); a result that recorded no code counts as other code. A
    :class:`wikitext_toolkit_core.cli.UsageError` names the result and ``overwrite_option``, the
    option that replaces any (``--overwrite`` on the command line). Nothing at ``json_path``, or no
    result there, is no reason to refuse (the write itself reports a file it cannot replace)."""
    if json_path is None or not json_path.is_file():
        return
    try:
        existing = bounded_json.loads(json_path.read_bytes())
    except (OSError, ValueError):
        existing = None
    if not isinstance(existing, dict):
        return
    why = _other_dataset(existing, *scored) or _other_model(existing, plugin, checkpoint, data_dir)
    if why is not None:
        raise UsageError(
            f"{json_path}: holds a result of {why}; pass {overwrite_option} to replace it, or write elsewhere"
        )


def _other_dataset(existing: dict[str, Any], dataset: Dataset, split: str) -> str | None:
    """What differs between the dataset of the saved result ``existing`` and ``split`` of
    ``dataset`` when both have one name (as in an output directory, whose files are named by it),
    for a message: the checksum of the split or of its training split (which makes the
    vocabulary), each where the result records it; None when neither does, or the names differ."""
    if existing.get("dataset") != dataset.name:
        return None
    for key, checked in (("dataset_sha256", split), ("train_sha256", "train")):
        recorded, current = existing.get(key), dataset.verify(checked)
        if recorded is not None and recorded != current:
            changed = f"{checked} split {str(recorded)[:12]}, now {current[:12]}"
            return f"another dataset named {dataset.name} ({changed})"
    return None


def _other_model(
    existing: dict[str, Any],
    plugin: str,
    checkpoint: str | os.PathLike | None,
    data_dir: str | os.PathLike | None,
) -> str | None:
    """What differs between the model of the saved result ``existing`` and ``plugin`` on
    ``checkpoint``, for a message: its code (code not recorded counts as other code) or, when
    ``checkpoint`` is named, its checkpoint; None when neither does."""
    recorded_code = (existing.get("plugin_code") or {}).get("sha256")
    current_code = (plugin_code(plugin) or {}).get("sha256")
    if recorded_code is None:
        return "code it did not record (written before 2026-11-28)"
    if recorded_code != current_code:
        return f"other plugin code ({recorded_code[:12]}, now {str(current_code)[:12]})"
    if checkpoint is not None and existing.get("checkpoint") != portable_path(checkpoint, data_dir):
        return f"another checkpoint ({existing.get('checkpoint')})"
    return None


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
    a leading byte-order mark dropped as the token stream drops it and ``\\r\\n`` line ends read
    as ``\\n``, as lm-evaluation-harness's pages have them, so that its bytes are counted the same
    either way); a :class:`wikitext_toolkit_core.files.DatasetError` when it has no article heading."""
    text = dataset.read_bytes(split).decode("utf-8-sig").replace("\r\n", "\n")
    documents = split_documents(text)
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
        write_atomically(npy_path, partial(write_npy, array=token_log_probs))
    if json_path is not None:
        write_atomically(json_path, text)


def write_npy(handle: BinaryIO, array: np.ndarray) -> None:
    """Write ``array`` to the binary file ``handle`` as ``np.save`` does (``.npy``, format 1.0),
    through the file's own writes: those raise the file system's ``OSError`` (a full disk's
    ``ENOSPC``) where numpy's ``tofile`` reports a short write with no error number."""
    contiguous = np.ascontiguousarray(array)
    np.lib.format.write_array_header_1_0(handle, np.lib.format.header_data_from_array_1_0(contiguous))
    handle.write(contiguous.data)
