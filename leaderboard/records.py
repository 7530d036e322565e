"""Reading harness result files: validation, rejection of incompatible ones, and their runs.

A *result file* is the JSON that ``python -m harness eval --output/--output-dir`` writes; its
schema (keys, version, the per-token file's name, which audits apply) is :mod:`harness.results`'s.
One result is one (model, dataset, split) evaluation; a *run* is the set of results that share
everything but the split (see :func:`run_key`), so that the valid and test figures of one trained
model land on one leaderboard row.
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

from core.catalogue import BENCHMARKS
from harness.results import (
    KEYS_ADDED_IN_2,
    REQUIRED_KEYS,
    SUPPORTED_SCHEMA_VERSIONS,
    token_log_probs_name,
    unaudited_reasons,
)
from leaderboard.contamination import CleanFigures, attach_reports, is_report

#: Relative tolerance between a result's nll and the mean of its per-token log-probabilities.
TOKEN_LOG_PROBS_RTOL = 1e-9

#: How deeply a result's JSON may nest: a harness result nests a few levels, and one nested about
#: a thousand deep exhausts Python's recursion when the leaderboard reads or compares it.
MAX_NESTING = 32

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

    @property
    def unaudited_reasons(self) -> list[str]:
        """Why this result's figure is not covered by the audits that apply; empty when they all
        passed (:func:`harness.results.unaudited_reasons`)."""
        if self.data["schema_version"] >= 2:
            return list(self.data["unaudited_reasons"])  # validated against the audit records
        return unaudited_reasons(self.data)


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


def _nesting(value: Any) -> int:
    """How many levels of JSON arrays and objects ``value`` nests (0 for a number or a string),
    counted without recursion."""
    deepest, pending = 0, [(value, 0)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, depth + 1)
            pending.extend(
                (child, depth + 1) for child in (item.values() if isinstance(item, dict) else item)
            )
    return deepest


def _too_deep(path: Path) -> str:
    return f"{path}: not a harness result (JSON nested more than {MAX_NESTING} levels deep)"


def validate(data: Any, path: Path) -> Result:
    """``data`` as a :class:`Result`, or :class:`ResultError` saying what is wrong with it."""
    if not isinstance(data, dict):
        raise ResultError(f"{path}: not a harness result (a JSON {type(data).__name__}, not an object)")
    if _nesting(data) > MAX_NESTING:  # deeper would exhaust the recursion of json.dumps later
        raise ResultError(_too_deep(path))
    if is_report(data):
        raise ResultError(f"{path}: a contamination report (harness contamination), not a harness result")
    if "schema_version" not in data and "perplexity" not in data:
        raise NotAResult(f"{path}: not a harness result file (no schema_version or perplexity)")
    missing = [key for key in REQUIRED_KEYS if key not in data]
    if missing:
        raise ResultError(f"{path}: missing key{'s' if len(missing) > 1 else ''} {', '.join(missing)}")
    version = data["schema_version"]
    if version not in SUPPORTED_SCHEMA_VERSIONS:
        raise ResultError(
            f"{path}: schema_version {version!r} is not supported "
            f"(this leaderboard reads {', '.join(map(str, SUPPORTED_SCHEMA_VERSIONS))})"
        )
    for key, types in REQUIRED_KEYS.items():
        value = data[key]
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            wanted = " or ".join("null" if t is type(None) else t.__name__ for t in types)
            raise ResultError(f"{path}: {key} must be {wanted}, got {value!r}")
    for key in ("batch_size", "bptt"):
        if not isinstance(data["protocol"].get(key), int):
            raise ResultError(f"{path}: protocol.{key} missing or not an integer")
    if version >= 2:
        for key, types in KEYS_ADDED_IN_2.items():
            if not isinstance(data.get(key), types):
                raise ResultError(f"{path}: {key} missing or not a {types[0].__name__}")
        if data["audited"] != (not unaudited_reasons(data)) or data["audited"] == bool(
            data["unaudited_reasons"]
        ):
            raise ResultError(
                f"{path}: audited is {str(data['audited']).lower()} but the audit "
                "records say otherwise (file edited by hand?)"
            )
    if data["tokens"] <= 0:
        raise ResultError(f"{path}: tokens must be positive, got {data['tokens']}")
    nll, ppl = float(data["nll"]), float(data["perplexity"])
    if not (math.isfinite(nll) and math.isfinite(ppl)) or nll < 0 or ppl < 1:
        raise ResultError(f"{path}: nll {nll!r} / perplexity {ppl!r} out of range")
    if not math.isclose(math.log(ppl), nll, rel_tol=1e-6, abs_tol=1e-9):
        raise ResultError(f"{path}: perplexity {ppl} is not exp(nll {nll}) (file edited by hand?)")
    bits = data.get("bits_per_token")
    if bits is not None and not (
        isinstance(bits, (int, float)) and math.isclose(bits * math.log(2), nll, rel_tol=1e-6, abs_tol=1e-9)
    ):
        raise ResultError(f"{path}: bits_per_token {bits!r} is not nll / ln 2 (file edited by hand?)")
    num_parameters = data.get("num_parameters")
    if num_parameters is not None and (not isinstance(num_parameters, int) or num_parameters < 0):
        raise ResultError(f"{path}: num_parameters must be a non-negative integer or null")
    return Result(path, data)


def read_json(path: Path) -> Any:
    """The parsed JSON of a file, or :class:`ResultError` naming it when it cannot be read or
    parsed."""
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
    except RecursionError:  # the decoder recurses once per level of nesting
        raise ResultError(_too_deep(path)) from None
    return data


def load_result(path: str | Path) -> Result:
    """Read and validate one result file."""
    path = Path(path)
    return validate(read_json(path), path)


@dataclasses.dataclass
class Collection:
    """The usable results of a directory and the files rejected, each with a one-line reason.

    ``results`` holds the audited results, plus the unaudited ones when they were asked for
    (``collect(..., include_unaudited=True)``; :attr:`Result.unaudited_reasons` tells them apart).
    """

    results: list[Result]
    rejected: list[str]  # one-line messages, each naming the file
    notes: list[str]  # files skipped for a benign reason (e.g. a train-split result)
    unaudited: list[str] = dataclasses.field(default_factory=list)  # kept out, one line each
    #: The contamination reports that fit a result in ``results``, by the result's path.
    contamination: dict[Path, CleanFigures] = dataclasses.field(default_factory=dict)


def _release_mismatch(result: Result) -> str | None:
    """Why a result that names a benchmark cannot be ranked under that name: its split file is
    not the release's (when the harness knows the release's checksum), or it was not verified
    against any checksum (when it does not); None when it can, or names no benchmark."""
    name, split = result["dataset"], result.split
    benchmark = BENCHMARKS.get(name)
    if benchmark is None or split not in benchmark.split_files:
        return None
    expected = benchmark.file_sha256.get(benchmark.split_files[split])
    if expected is not None and result["dataset_sha256"] != expected:
        return (
            f"dataset_sha256 is not that of the {name} release's {split} file: not ranked "
            f"under the name {name}"
        )
    expected_train = benchmark.file_sha256.get(benchmark.split_files["train"])
    recorded_train = result.get("train_sha256")
    if expected_train is not None and recorded_train is not None and recorded_train != expected_train:
        return (
            f"train_sha256 is not that of the {name} release's train file (the vocabulary "
            f"and any model trained on load come from it): not ranked under the name {name}"
        )
    if expected is None and result.get("dataset_verified") is not True:
        return (
            f"its {name} {split} file was not verified against a checksum of the release: "
            f"not ranked under the name {name}"
        )
    return None


def check_token_log_probs(result: Result) -> None:
    """When the result's per-token log-probability file is present, check that ``tokens``,
    ``nll`` and ``perplexity`` agree with it; :class:`ResultError` naming the file otherwise."""
    path = find_token_log_probs(result)
    if path is not None:
        _read_token_log_probs(result, path)


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
        first_seen: dict[str, int] = {}
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
                    "incompatible with them, skipped"
                )
    return kept


def collect(paths: Iterable[str | Path], include_unaudited: bool = False) -> Collection:
    """Every result file under ``paths`` (directories searched recursively for ``*.json``),
    validated; incompatible files are rejected by name, never merged (JSON objects that are not
    result files at all, with neither ``schema_version`` nor ``perplexity``, are named in
    ``notes`` instead, so that metadata beside the results does not fail a strict build):

    - unreadable, non-JSON, missing keys, wrong types, unsupported ``schema_version``, figures
      that contradict each other or the audit records;
    - ``tokens``, ``nll`` or ``perplexity`` that disagree with the per-token log-probability
      file, when it is present;
    - a benchmark split whose ``dataset_sha256`` is not the release's (or, for a benchmark whose
      release checksums the harness does not know, one that was not verified);
    - within one dataset, a ``vocab_sha256`` that differs from the one most results share, and
      within one dataset split, a ``dataset_sha256`` that differs likewise.

    Results that do not show both audits passed are kept out (named in ``unaudited``) unless
    ``include_unaudited``. Contamination reports among the files are matched to the results they
    name (:func:`leaderboard.contamination.attach_reports`): those that fit go to
    ``contamination``, the others are rejected or noted by name.
    """
    files: list[Path] = []
    for path in map(Path, paths):
        if path.is_dir():
            files.extend(sorted(p for p in path.rglob("*.json") if p.is_file()))
        else:
            files.append(path)
    results, rejected, notes, unaudited = [], [], [], []
    reports: list[tuple[Path, dict[str, Any]]] = []
    for file in files:
        try:
            data = read_json(file)
            if is_report(data):
                reports.append((file, data))
                continue
            result = validate(data, file)
            if result.split in TABLE_SPLITS:
                check_token_log_probs(result)
        except NotAResult as error:  # e.g. a gate-analysis JSON beside the results: named, skipped
            notes.append(f"{error}; skipped")
            continue
        except ResultError as error:
            rejected.append(str(error))
            continue
        if result.split not in TABLE_SPLITS:
            notes.append(f"{file}: a {result.split}-split result; only valid and test are tabulated")
            continue
        mismatch = _release_mismatch(result)
        if mismatch is not None:
            rejected.append(f"{file}: {mismatch}; skipped")
            continue
        if result.unaudited_reasons and not include_unaudited:
            unaudited.append(
                f"{file}: unaudited ({'; '.join(result.unaudited_reasons)}): kept "
                "out of the ranking (--include-unaudited shows it, marked)"
            )
            continue
        results.append(result)
    results = _reject_minorities(results, "dataset", "vocab_sha256", rejected)
    results = _reject_minorities(results, "dataset/split", "dataset_sha256", rejected)
    results.sort(key=lambda r: str(r.path))
    attached = attach_reports(reports, results)
    return Collection(
        results, rejected + attached.rejected, notes + attached.notes, unaudited, attached.figures
    )


def find_token_log_probs(result: Result) -> Path | None:
    """Where the result's per-token log-probabilities are: ``token_log_probs_file`` as written
    (absolute, or relative to the JSON's folder), else a file of that name beside the JSON (a
    results folder that was moved or copied), else the name
    :func:`harness.results.token_log_probs_name` gives it beside the JSON; None when none of these
    exists."""
    recorded = result.get("token_log_probs_file")
    folder = result.path.parent
    candidates: list[Path] = []
    if recorded:
        recorded_path = Path(recorded)
        candidates.append(recorded_path if recorded_path.is_absolute() else folder / recorded_path)
        candidates.append(folder / recorded_path.name)
    candidates.append(folder / token_log_probs_name(result.path.name))
    return next((candidate for candidate in candidates if candidate.is_file()), None)


def token_log_probs_path(result: Result) -> Path:
    """:func:`find_token_log_probs`, or :class:`ResultError` saying where it looked."""
    path = find_token_log_probs(result)
    if path is not None:
        return path
    recorded = result.get("token_log_probs_file")
    if not recorded:
        raise ResultError(
            f"{result.path}: no token_log_probs_file recorded and no "
            f"{token_log_probs_name(result.path.name)} beside it (rerun harness eval "
            "with --output-dir or --save-token-logprobs)"
        )
    raise ResultError(
        f"{result.path}: token log-probabilities {recorded} not found (also looked in {result.path.parent})"
    )


def load_token_log_probs(result: Result) -> np.ndarray:
    """The result's per-token log-probabilities (float64 ``[tokens]``), checked against the
    result's token count and mean NLL so that a stale or foreign file is refused."""
    return _read_token_log_probs(result, token_log_probs_path(result))


def _read_token_log_probs(result: Result, path: Path) -> np.ndarray:
    try:
        values = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as error:
        raise ResultError(f"{path}: not a readable .npy array ({error})") from None
    if values.ndim != 1 or not np.issubdtype(values.dtype, np.floating):
        raise ResultError(f"{path}: expected a 1-D float array, got {values.dtype} {values.shape}")
    if len(values) != result["tokens"]:
        raise ResultError(
            f"{path}: {len(values)} log-probabilities for a result of "
            f"{result['tokens']} tokens ({result.path} disagrees with it)"
        )
    values = values.astype(np.float64, copy=False)
    if not np.all(np.isfinite(values)) or np.any(values > 0):
        raise ResultError(f"{path}: log-probabilities must be finite and <= 0")
    mean_nll = -float(values.mean())
    if not math.isclose(mean_nll, float(result["nll"]), rel_tol=TOKEN_LOG_PROBS_RTOL, abs_tol=1e-12):
        raise ResultError(
            f"{path}: mean NLL {mean_nll:.9g} (perplexity {math.exp(mean_nll):.6g}) "
            f"does not match the result's nll {float(result['nll']):.9g} (perplexity "
            f"{result.perplexity:.6g}) in {result.path.name}: stale, foreign or edited"
        )
    return values
