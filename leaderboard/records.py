"""Reading harness result files: validation, rejection of incompatible ones, and their runs.

A *result file* is the JSON that ``python -m harness eval --output/--output-dir`` writes (schema in
``harness/results.py``). One result is one (model, dataset, split) evaluation; a *run* is the set of
results that share everything but the split (see :func:`run_key`), so that the valid and test
figures of one trained model land on one leaderboard row.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

#: Result-file schema versions this package understands (``harness.results.SCHEMA_VERSION``).
SUPPORTED_SCHEMA_VERSIONS = (1,)

#: Keys a result file must carry, with the JSON types they must have (None allowed where listed).
REQUIRED_KEYS: dict[str, tuple[type, ...]] = {
    "schema_version": (int,),
    "model": (str,),
    "model_args": (dict,),
    "checkpoint": (str, type(None)),
    "dataset": (str,),
    "split": (str,),
    "dataset_sha256": (str,),
    "vocab_size": (int,),
    "vocab_sha256": (str,),
    "tokens": (int,),
    "nll": (int, float),
    "perplexity": (int, float),
    "protocol": (dict,),
}

#: Splits that go on a leaderboard; results for other splits (train) are skipped with a note.
TABLE_SPLITS = ("valid", "test")


class ResultError(Exception):
    """A result file that cannot be used; the message is one line naming the file."""


class NotAResult(ResultError):
    """A JSON object with neither ``schema_version`` nor ``perplexity``: some other file (gate
    analysis metadata, a config) that happens to sit among the results."""


@dataclasses.dataclass(frozen=True)
class Result:
    """One validated harness result file."""

    path: Path
    data: dict[str, Any]

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)

    @property
    def split(self) -> str:
        return self.data["split"]

    @property
    def perplexity(self) -> float:
        return float(self.data["perplexity"])


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def run_key(result: Result) -> tuple[str, ...]:
    """What makes two results (of different splits) the same run: the same model module, model
    arguments, checkpoint, dataset (name and vocabulary) and evaluation protocol. A valid and a
    test result with equal keys are merged into one row; anything that differs keeps them apart."""
    return (
        result["model"],
        _canonical(result["model_args"]),
        result["checkpoint"] or "",
        result["dataset"],
        result["vocab_sha256"],
        _canonical(result["protocol"]),
    )


def validate(data: Any, path: Path) -> Result:
    """``data`` as a :class:`Result`, or :class:`ResultError` saying what is wrong with it."""
    if not isinstance(data, dict):
        raise ResultError(f"{path}: not a harness result (a JSON {type(data).__name__}, not an object)")
    if "schema_version" not in data and "perplexity" not in data:
        raise NotAResult(f"{path}: not a harness result file (no schema_version or perplexity)")
    missing = [key for key in REQUIRED_KEYS if key not in data]
    if missing:
        raise ResultError(f"{path}: missing key{'s' if len(missing) > 1 else ''} {', '.join(missing)}")
    version = data["schema_version"]
    if version not in SUPPORTED_SCHEMA_VERSIONS:
        raise ResultError(f"{path}: schema_version {version!r} is not supported "
                          f"(this leaderboard reads {', '.join(map(str, SUPPORTED_SCHEMA_VERSIONS))})")
    for key, types in REQUIRED_KEYS.items():
        value = data[key]
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            wanted = " or ".join("null" if t is type(None) else t.__name__ for t in types)
            raise ResultError(f"{path}: {key} must be {wanted}, got {value!r}")
    for key in ("batch_size", "bptt"):
        if not isinstance(data["protocol"].get(key), int):
            raise ResultError(f"{path}: protocol.{key} missing or not an integer")
    if data["tokens"] <= 0:
        raise ResultError(f"{path}: tokens must be positive, got {data['tokens']}")
    nll, ppl = float(data["nll"]), float(data["perplexity"])
    if not (math.isfinite(nll) and math.isfinite(ppl)) or nll < 0 or ppl < 1:
        raise ResultError(f"{path}: nll {nll!r} / perplexity {ppl!r} out of range")
    if not math.isclose(math.log(ppl), nll, rel_tol=1e-6, abs_tol=1e-9):
        raise ResultError(f"{path}: perplexity {ppl} is not exp(nll {nll}) (file edited by hand?)")
    num_parameters = data.get("num_parameters")
    if num_parameters is not None and (not isinstance(num_parameters, int) or num_parameters < 0):
        raise ResultError(f"{path}: num_parameters must be a non-negative integer or null")
    return Result(path, data)


def load_result(path: str | Path) -> Result:
    """Read and validate one result file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ResultError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as error:
        raise ResultError(f"{path}: cannot read ({error})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise ResultError(f"{path}: not valid JSON (line {error.lineno}: {error.msg})") from None
    return validate(data, path)


@dataclasses.dataclass
class Collection:
    """The usable results of a directory and the files rejected, each with a one-line reason."""

    results: list[Result]
    rejected: list[str]  # one-line messages, each naming the file
    notes: list[str]  # files skipped for a benign reason (e.g. a train-split result)


def _known_split_sha256(dataset: str, split: str) -> str | None:
    """The canonical checksum of a paper benchmark's split file, when the harness knows it."""
    try:
        from harness.datasets import BENCHMARKS
    except ImportError:  # pragma: no cover - the harness is part of this package
        return None
    benchmark = BENCHMARKS.get(dataset)
    if benchmark is None or split not in benchmark.split_files:
        return None
    return benchmark.file_sha256.get(benchmark.split_files[split])


def _reject_minorities(results: list[Result], group: str, field: str, rejected: list[str]) -> list[Result]:
    """Within each group (``"dataset"`` or ``"dataset/split"``), keep the results whose ``field``
    holds the value most of them agree on, and reject the others by name: results of one dataset
    with different vocabularies (or texts) cannot share a table."""
    def group_of(result: Result) -> str:
        return result["dataset"] if group == "dataset" else f"{result['dataset']}/{result.split}"

    by_group: dict[str, list[Result]] = defaultdict(list)
    for result in results:
        by_group[group_of(result)].append(result)
    kept = []
    for name, members in by_group.items():
        counts = Counter(result[field] for result in members)
        # The majority wins; a tie goes to the value of the earliest file by path (deterministic).
        first_seen = {}
        for result in sorted(members, key=lambda r: str(r.path)):
            first_seen.setdefault(result[field], len(first_seen))
        majority = max(counts, key=lambda value: (counts[value], -first_seen[value]))
        for result in members:
            if result[field] == majority:
                kept.append(result)
            else:
                rejected.append(
                    f"{result.path}: {field} {result[field][:12]}... differs from the "
                    f"{counts[majority]} other {name} result(s) ({majority[:12]}...); "
                    "incompatible with them, skipped")
    return kept


def collect(paths: Iterable[str | Path]) -> Collection:
    """Every result file under ``paths`` (directories searched recursively for ``*.json``),
    validated; incompatible files are rejected by name, never merged (JSON objects that are not
    result files at all, with neither ``schema_version`` nor ``perplexity``, are named in
    ``notes`` instead, so that metadata beside the results does not fail a strict build):

    - unreadable, non-JSON, missing keys, wrong types, unsupported ``schema_version``;
    - a paper benchmark split whose ``dataset_sha256`` is not the canonical file's;
    - within one dataset, a ``vocab_sha256`` that differs from the one most results share, and
      within one dataset split, a ``dataset_sha256`` that differs likewise.
    """
    files: list[Path] = []
    for path in map(Path, paths):
        if path.is_dir():
            files.extend(sorted(p for p in path.rglob("*.json") if p.is_file()))
        else:
            files.append(path)
    results, rejected, notes = [], [], []
    for file in files:
        try:
            result = load_result(file)
        except NotAResult as error:  # e.g. a gate-analysis JSON beside the results: named, skipped
            notes.append(f"{error}; skipped")
            continue
        except ResultError as error:
            rejected.append(str(error))
            continue
        if result.split not in TABLE_SPLITS:
            notes.append(f"{file}: a {result.split}-split result; only valid and test are tabulated")
            continue
        expected = _known_split_sha256(result["dataset"], result.split)
        if expected is not None and result["dataset_sha256"] != expected:
            rejected.append(f"{file}: dataset_sha256 is not that of the canonical "
                            f"{result['dataset']} {result.split} file; skipped")
            continue
        results.append(result)
    results = _reject_minorities(results, "dataset", "vocab_sha256", rejected)
    results = _reject_minorities(results, "dataset/split", "dataset_sha256", rejected)
    results.sort(key=lambda r: str(r.path))
    return Collection(results, rejected, notes)


def token_log_probs_path(result: Result) -> Path:
    """Where the result's per-token log-probabilities are: ``token_log_probs_file`` as written
    (absolute, or relative to the JSON's folder), else a file of that name beside the JSON (a
    results folder that was moved or copied), else ``STEM.logprobs.npy`` beside it."""
    recorded = result.get("token_log_probs_file")
    folder = result.path.parent
    candidates: list[Path] = []
    if recorded:
        recorded_path = Path(recorded)
        candidates.append(recorded_path if recorded_path.is_absolute() else folder / recorded_path)
        candidates.append(folder / recorded_path.name)
    stem = result.path.name[:-len(".json")] if result.path.name.endswith(".json") else result.path.stem
    candidates.append(folder / f"{stem}.logprobs.npy")
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    if not recorded:
        raise ResultError(f"{result.path}: no token_log_probs_file recorded and no {stem}.logprobs.npy "
                          "beside it (rerun harness eval with --output-dir or --save-token-logprobs)")
    raise ResultError(f"{result.path}: token log-probabilities {recorded} not found "
                      f"(also looked in {folder})")


def load_token_log_probs(result: Result) -> np.ndarray:
    """The result's per-token log-probabilities (float64 ``[tokens]``), checked against the
    result's token count and mean NLL so that a stale or foreign file is refused."""
    path = token_log_probs_path(result)
    try:
        values = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as error:
        raise ResultError(f"{path}: not a readable .npy array ({error})") from None
    if values.ndim != 1 or not np.issubdtype(values.dtype, np.floating):
        raise ResultError(f"{path}: expected a 1-D float array, got {values.dtype} {values.shape}")
    if len(values) != result["tokens"]:
        raise ResultError(f"{path}: {len(values)} log-probabilities for a result of {result['tokens']} tokens")
    values = values.astype(np.float64, copy=False)
    if not np.all(np.isfinite(values)) or np.any(values > 0):
        raise ResultError(f"{path}: log-probabilities must be finite and <= 0")
    mean_nll = -float(values.mean())
    if not math.isclose(mean_nll, float(result["nll"]), rel_tol=1e-6, abs_tol=1e-9):
        raise ResultError(f"{path}: mean NLL {mean_nll:.6f} does not match the result's nll "
                          f"{float(result['nll']):.6f} (stale or foreign file)")
    return values
