"""Writing result files: :func:`result_record` builds the
:class:`wikitext_toolkit_core.result_schema.ResultRecord` of one evaluation (the schema, its version and its
validation are :mod:`wikitext_toolkit_core.result_schema`'s). This module also owns the name of the per-token
log-probability file beside a result (:func:`token_log_probs_name`) and how a result names the files it used
(:func:`portable_path`, :func:`resolve_recorded_path`).

**Paths in a result** name no machine: ``dataset_path`` and ``checkpoint`` are written relative to
the root they lie in, marked by its name: ``<repo>/...`` (the toolkit's source tree, the folder
holding the ``harness`` package: the packaged data and checkpoints), ``<data>/...`` (the data root
the dataset was found in, ``--data-dir`` or ``$HARNESS_DATA_DIR``) or ``<cache>/...`` (the user
cache, ``$HARNESS_CACHE_DIR``: downloads and training runs); a path in none of them is written
relative to the directory the command ran in, and a name that is no existing path (a hub model
name) as given. ``token_log_probs_file`` is relative to the result file's folder. A reader
resolves them against its own roots (:func:`resolve_recorded_path`); results written before
(absolute paths) still resolve as they are.
"""

from __future__ import annotations

import datetime
import hashlib
import importlib.metadata
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.plugin import find_module_spec
from wikitext_toolkit_core import __version__
from wikitext_toolkit_core.benchmarks import search_roots, user_cache_dir
from wikitext_toolkit_core.result_schema import (
    SCHEMA_VERSION,
    SCORINGS,
    AuditedRun,
    Protocol,
    ResultRecord,
    unaudited_reasons,
)

if TYPE_CHECKING:  # types only: plugins import this module's path helpers, not the evaluator
    from harness.documents import Documents
    from harness.evaluate import Evaluation
    from harness.scoring import ScoringJob

#: What the per-token log-probabilities file (float64 ``[tokens]``, ``.npy``) of the result
#: ``STEM.json`` is called when it is written beside it.
TOKEN_LOG_PROBS_SUFFIX = ".logprobs.npy"


def token_log_probs_name(result_name: str) -> str:
    """The name of the per-token file beside the result file ``result_name``: ``STEM.json`` ->
    ``STEM.logprobs.npy``."""
    return Path(result_name).stem + TOKEN_LOG_PROBS_SUFFIX


#: The toolkit's source tree: the folder holding the ``harness`` package.
SOURCE_ROOT = Path(__file__).resolve().parent.parent
#: The data roots among :func:`harness.datasets.search_roots` (``<data>`` in a recorded path).
_DATA_ROOT_LABELS = ("--data-dir", "HARNESS_DATA_DIR")


def _roots(data_dir: str | os.PathLike | None) -> list[tuple[str, Path]]:
    """The roots a recorded path may be relative to, as ``(marker, directory)``; the data roots
    in search order."""
    roots = [("<repo>", SOURCE_ROOT), ("<cache>", user_cache_dir())]
    roots += [("<data>", root) for label, root in search_roots(data_dir) if label in _DATA_ROOT_LABELS]
    return roots


def portable_path(path: str | os.PathLike, data_dir: str | os.PathLike | None = None) -> str:
    """``path`` as a result records it (see the module docstring): relative to the deepest root
    holding it (``<repo>/...``, ``<data>/...``, ``<cache>/...``), else to the working directory;
    unchanged when it is no existing path (a hub model name)."""
    if not Path(path).exists():
        return str(path)
    resolved = Path(path).resolve()
    holding = [
        (len(root.resolve().parts), marker, resolved.relative_to(root.resolve()))
        for marker, root in _roots(data_dir)
        if resolved.is_relative_to(root.resolve())
    ]
    if not holding:
        return os.path.relpath(resolved)
    _, marker, relative = max(holding, key=lambda entry: entry[0])
    return marker if relative == Path() else f"{marker}/{relative.as_posix()}"


def resolve_recorded_path(text: str, data_dir: str | os.PathLike | None = None) -> Path | None:
    """Where a path recorded by :func:`portable_path` (or an absolute one, as older results
    have) is on this machine: ``<repo>`` and ``<cache>`` are this toolkit's, ``<data>`` the first
    data root (``data_dir``, then ``$HARNESS_DATA_DIR``) where it exists (None when no data root
    is set); any other path is taken as it is (relative: to the working directory)."""
    marker, _, rest = text.partition("/")
    if marker not in ("<repo>", "<cache>", "<data>"):
        return Path(text)
    candidates = [root / rest for root_marker, root in _roots(data_dir) if root_marker == marker]
    return next((path for path in candidates if path.exists()), candidates[0] if candidates else None)


def git_commit() -> str | None:
    """The commit of the toolkit's checkout, suffixed ``-dirty`` with local changes; None when
    it is not installed from a git checkout."""
    source = Path(__file__).resolve().parent.parent
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=source, capture_output=True, text=True, check=True, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=source,
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return commit + ("-dirty" if dirty else "")


def torch_version() -> str | None:
    """The installed torch's version, without importing torch (seconds of start-up) when the
    plugin did not; None when torch is not installed."""
    if "torch" in sys.modules:
        return sys.modules["torch"].__version__
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return None


def describe_device(device: str) -> str:
    """``"cuda:0 (NVIDIA H100 80GB HBM3)"``, ``"cpu (x86_64)"``."""
    if device.startswith("cuda"):
        import torch

        return f"{device} ({torch.cuda.get_device_name(torch.device(device))})"
    return f"{device} ({platform.machine()})"


#: A plugin's package of more Python files than this is no plugin's own code: only its module is hashed.
MAX_PACKAGE_FILES = 2_000


def plugin_code(plugin: str) -> dict[str, Any] | None:
    """What code a plugin ran, as a result records it (``plugin_code``): the SHA-256 of its
    top-level package's Python files (``*.py`` under it, each with its relative path), or of its
    module's file when it is a module of its own; ``source`` (``package`` or ``module``), ``path``
    (as :func:`portable_path` records it) and ``files``. None when the module has no file."""
    module_name = plugin.partition(":")[0]
    file = _module_file(module_name)
    if file is None:
        return None
    roots = _package_folders(module_name.partition(".")[0])
    files = sorted((path.relative_to(root).as_posix(), path) for root in roots for path in root.rglob("*.py"))
    source, where = "package", roots[0] if roots else None
    if where is None or len(files) > MAX_PACKAGE_FILES:
        source, where, files = "module", Path(file), [(Path(file).name, Path(file))]
    digest = hashlib.sha256()
    for name, path in files:
        digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return {"sha256": digest.hexdigest(), "source": source, "path": portable_path(where), "files": len(files)}


def _module_file(module_name: str) -> str | None:
    """The file of module ``module_name``: the imported module's, else where an import would find
    it (:func:`harness.plugin.find_module_spec`: a plugin run in a worker process is never
    imported here); None when it has none."""
    module = sys.modules.get(module_name)
    if module is not None:
        return getattr(module, "__file__", None)
    spec = find_module_spec(module_name)
    return spec.origin if spec is not None and spec.has_location else None


def _package_folders(package: str) -> list[Path]:
    """The folders of top-level package ``package`` (its ``__path__``, imported or found as
    :func:`_module_file` finds it); none for a module that is no package."""
    module = sys.modules.get(package)
    if module is not None:
        return [Path(entry) for entry in getattr(module, "__path__", [])]
    spec = find_module_spec(package)
    return [Path(entry) for entry in (spec.submodule_search_locations or [])] if spec is not None else []


def result_record(
    job: ScoringJob,
    evaluation: Evaluation,
    *,
    num_parameters: int | None,
    token_log_probs_file: str | None,
    documents: Documents | None = None,
) -> ResultRecord:
    """The record of ``job`` scored as ``evaluation``
    (:class:`wikitext_toolkit_core.result_schema.ResultRecord`, which owns the file's keys and their order).
    ``scoring`` is the plugin metadata's (``evaluation.metadata``) ``scoring`` (see
    :data:`wikitext_toolkit_core.result_schema.SCORINGS`), ``word`` when it gives none. ``documents``: the
    split's documents under the documents protocol, whose number is the recorded batch size and which give the
    ``document_metrics``. The job's ``checkpoint`` and the dataset's directory are recorded by
    :func:`portable_path` (relative to the job's ``data_dir``); ``token_log_probs_file`` as given
    (relative to the result file's folder); ``plugin_process`` is the evaluation's."""
    plugin, dataset, split, data_dir = job.plugin, job.dataset, job.split, job.data_dir
    plugin_metadata = evaluation.metadata
    protocol = Protocol(
        batch_size=job.protocol.batch_size if documents is None else len(documents.starts),
        bptt=job.protocol.bptt,
        name=job.protocol.name,
    )
    stream = dataset.tokens(split)
    scoring = (plugin_metadata or {}).get("scoring", "word")
    if scoring not in SCORINGS:
        raise ValueError(f"plugin metadata: scoring {scoring!r} is not one of {', '.join(SCORINGS)}")
    audit, causality_audit = evaluation.audit.to_json(), evaluation.causality.to_json()
    device = describe_device(job.device)
    reasons = unaudited_reasons(
        AuditedRun(
            schema_version=SCHEMA_VERSION,
            scoring=scoring,
            tokens=evaluation.tokens,
            device=device,
            audit=audit,
            causality_audit=causality_audit,
            plugin_process=evaluation.plugin_process,
        )
    )
    return ResultRecord(
        schema_version=SCHEMA_VERSION,
        model=plugin,
        model_args=job.model_args,
        checkpoint=None if job.checkpoint is None else portable_path(job.checkpoint, data_dir),
        dataset=dataset.name,
        dataset_path=portable_path(dataset.directory, data_dir),
        split=split,
        dataset_sha256=stream.sha256,
        train_sha256=dataset.verify("train"),
        dataset_verified=dataset.is_verified(split),
        vocab_size=len(dataset.vocab),
        vocab_sha256=dataset.vocab.sha256(),
        oov_tokens=stream.oov_tokens,
        tokens=evaluation.tokens,
        nll=evaluation.nll,
        perplexity=evaluation.perplexity,
        bits_per_token=evaluation.bits_per_token,
        protocol=protocol,
        document_metrics=None if documents is None else documents.metrics(evaluation.total_log_prob),
        audit=audit,
        causality_audit=causality_audit,
        scoring=scoring,
        audited=not reasons,
        unaudited_reasons=reasons,
        num_parameters=num_parameters,
        runtime_seconds=evaluation.seconds,
        tokens_per_second=evaluation.tokens / evaluation.seconds if evaluation.seconds else None,
        device=device,
        plugin_process=evaluation.plugin_process,
        torch_version=torch_version(),
        package_version=__version__,
        git_commit=git_commit(),
        token_log_probs_file=token_log_probs_file,
        plugin_metadata=plugin_metadata,
        plugin_code=plugin_code(plugin),
        created=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    )
