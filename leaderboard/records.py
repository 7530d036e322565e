"""Reading harness result files: validation, rejection of incompatible ones, and their runs.

A *result file* is the JSON that ``python -m harness eval --output/--output-dir`` writes; its
schema (keys, version, validation, which audits apply) is
:class:`wikitext_toolkit_core.result_schema.ResultRecord`, the per-token file's name
:func:`harness.results.token_log_probs_name`. One result is one (model, dataset, split) evaluation; a *run* is
the set of results that share everything but the split (see :func:`run_key`), so that the valid and test
figures of one trained model land on one leaderboard row.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from harness.results import token_log_probs_name
from leaderboard.clean_subset import CleanFigures, attach_reports, is_report
from wikitext_toolkit_core.catalogue import BENCHMARKS
from wikitext_toolkit_core.errors import ToolkitError
from wikitext_toolkit_core.result_schema import (
    MAX_LOG_PROB,
    InvalidResultRecord,
    NotAResultRecord,
    Protocol,
    ResultRecord,
)

#: Relative tolerance between a result's nll (and perplexity) and the mean NLL (and its exp) of
#: its per-token log-probabilities.
TOKEN_LOG_PROBS_RTOL = 1e-9

#: How deeply a result's JSON may nest: a harness result nests a few levels, and one nested about
#: a thousand deep exhausts Python's recursion when the leaderboard reads or compares it.
MAX_NESTING = 32

#: Splits that go on a leaderboard; results for other splits (train) are skipped with a note.
TABLE_SPLITS = ("valid", "test")

#: The tokens of each benchmark split on a leaderboard, as ``harness eval`` counts them (the
#: whitespace tokens of every line and one ``<eos>`` per line): Table 1 of Merity et al. 2016,
#: which the harness's tests check on the PTB and WikiText-2 release files. WikiText-103's valid
#: and test splits are WikiText-2's articles under a larger vocabulary: the same counts. A result
#: ranked under a benchmark's name must have scored its whole split.
SPLIT_TOKENS: dict[str, dict[str, int]] = {
    "ptb": {"valid": 73_760, "test": 82_430},
    "wikitext-2": {"valid": 217_646, "test": 245_569},
    "wikitext-103": {"valid": 217_646, "test": 245_569},
}


class ResultError(ToolkitError):
    """A result file that cannot be used; the message is one line naming the file."""


class NotAResult(ResultError):
    """A JSON object with neither ``schema_version`` nor ``perplexity``: some other file (gate
    analysis metadata, a config) that happens to sit among the results."""


@dataclasses.dataclass(frozen=True)
class Result:
    """One validated harness result file: where it is and what it records."""

    path: Path
    record: ResultRecord
    #: Whether :func:`collect` recomputed its figures from its per-token log-probability file
    #: (:func:`verify_figures`); False when that file is missing: an *unverified* result.
    verified: bool = False

    @property
    def split(self) -> str:
        return self.record.split

    @property
    def perplexity(self) -> float:
        return float(self.record.perplexity)

    @property
    def unaudited_reasons(self) -> list[str]:
        """Why this result's figure is not covered by the audits that apply; empty when they all
        passed (:attr:`wikitext_toolkit_core.result_schema.ResultRecord.audit_gaps`)."""
        return self.record.audit_gaps


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def protocol_setting(protocol: Protocol) -> str:
    """The protocol as a run sets it, the same for each split it scores: its
    :attr:`~wikitext_toolkit_core.result_schema.Protocol.identity` (``KIND/BATCH_SIZE/BPTT``),
    except that the documents protocol's ``batch_size``, each split's number of documents, is
    left out (``documents/BPTT``)."""
    if protocol.kind == "documents":
        return f"{protocol.kind}/{protocol.bptt}"
    return protocol.identity


def run_key(result: Result) -> tuple[str, ...]:
    """What makes two results (of different splits) the same run: the same model module, model
    arguments, checkpoint, dataset (name and vocabulary) and evaluation protocol
    (:func:`protocol_setting`). A valid and a test result with equal keys are merged into one
    row; anything that differs keeps them apart."""
    record = result.record
    return (
        record.model,
        _canonical(record.model_args),
        record.checkpoint or "",
        record.dataset,
        record.vocab_sha256,
        protocol_setting(record.protocol),
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
    """``data`` as a :class:`Result`, or :class:`ResultError` saying what is wrong with it
    (:meth:`wikitext_toolkit_core.result_schema.ResultRecord.from_json`'s message, after the file's name)."""
    if isinstance(data, dict) and _nesting(data) > MAX_NESTING:  # would exhaust json.dumps later
        raise ResultError(_too_deep(path))
    try:  # JSON's \ud800 escapes give strings that no table or figure can write
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as error:
        bad = ascii(error.object[error.start : error.end])
        raise ResultError(f"{path}: not a harness result (a string holds {bad}: {error.reason})") from None
    if is_report(data):
        raise ResultError(f"{path}: a contamination report (harness contamination), not a harness result")
    try:
        return Result(path, ResultRecord.from_json(data))
    except NotAResultRecord as error:
        raise NotAResult(f"{path}: {error}") from None
    except InvalidResultRecord as error:
        raise ResultError(f"{path}: {error}") from None


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
    except ValueError:  # an integer longer than Python converts
        raise ResultError(
            f"{path}: not a harness result (an integer of more than {sys.get_int_max_str_digits():,} digits)"
        ) from None
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
    unverified: list[str] = dataclasses.field(default_factory=list)  # shown unranked, one line each
    #: The contamination reports that fit a result in ``results``, by the result's path.
    contamination: dict[Path, CleanFigures] = dataclasses.field(default_factory=dict)


def _release_mismatch(result: Result) -> str | None:
    """Why a result that names a benchmark cannot be ranked under that name: its split file is
    not the release's (when the harness knows the release's checksum), or it was not verified
    against any checksum (when it does not); None when it can, or names no benchmark."""
    name, split = result.record.dataset, result.split
    benchmark = BENCHMARKS.get(name)
    if benchmark is None or split not in benchmark.split_files:
        return None
    expected = benchmark.file_sha256.get(benchmark.split_files[split])
    if expected is not None and result.record.dataset_sha256 != expected:
        return (
            f"dataset_sha256 is not that of the {name} release's {split} file: not ranked "
            f"under the name {name}"
        )
    expected_train = benchmark.file_sha256.get(benchmark.split_files["train"])
    recorded_train = result.record.train_sha256
    if expected_train is not None and recorded_train is not None and recorded_train != expected_train:
        return (
            f"train_sha256 is not that of the {name} release's train file (the vocabulary "
            f"and any model trained on load come from it): not ranked under the name {name}"
        )
    if expected is None and result.record.dataset_verified is not True:
        return (
            f"its {name} {split} file was not verified against a checksum of the release: "
            f"not ranked under the name {name}"
        )
    return None


def _split_size_mismatch(result: Result) -> str | None:
    """Why a result under a benchmark's name cannot be ranked under it: its ``tokens`` are not
    the split's (:data:`SPLIT_TOKENS`), so it did not score the whole split; None when they are,
    or the split's size is not known."""
    name, split = result.record.dataset, result.split
    expected = SPLIT_TOKENS.get(name, {}).get(split)
    if expected is None or result.record.tokens == expected:
        return None
    return (
        f"tokens {result.record.tokens:,} is not the {name} {split} split's {expected:,}: "
        f"not ranked under the name {name}"
    )


def verify_figures(result: Result, require_token_log_probs: bool) -> Result:
    """``result``, verified: its ``tokens``, ``nll`` and ``perplexity`` recomputed from its
    per-token log-probability file must agree with what it states (:class:`ResultError` naming
    the file otherwise). Without that file it comes back unverified, or, when
    ``require_token_log_probs``, :class:`ResultError` says where it was looked for."""
    path = find_token_log_probs(result)
    if path is None:
        if require_token_log_probs:
            raise ResultError(unverifiable(result))
        return result
    _read_token_log_probs(result, path)
    return dataclasses.replace(result, verified=True)


def _reject_minorities(results: list[Result], group: str, field: str, rejected: list[str]) -> list[Result]:
    """Within each group (``"dataset"`` or ``"dataset/split"``), keep the results whose ``field``
    holds the value most of them agree on, and reject the others by name: results of one dataset
    with different vocabularies (or texts) cannot share a table. ``field`` names a checksum field
    of :class:`wikitext_toolkit_core.result_schema.ResultRecord`."""

    def value_of(result: Result) -> str:
        return getattr(result.record, field)

    def group_of(result: Result) -> str:
        return result.record.dataset if group == "dataset" else f"{result.record.dataset}/{result.split}"

    by_group: dict[str, list[Result]] = defaultdict(list)
    for result in results:
        by_group[group_of(result)].append(result)
    kept = []
    for name, members in by_group.items():
        counts = Counter(value_of(result) for result in members)
        # The majority wins; a tie goes to the value of the earliest file by path (deterministic).
        first_seen: dict[str, int] = {}
        for result in sorted(members, key=lambda r: str(r.path)):
            first_seen.setdefault(value_of(result), len(first_seen))
        majority = max(counts, key=lambda value: (counts[value], -first_seen[value]))
        for result in members:
            if value_of(result) == majority:
                kept.append(result)
            else:
                rejected.append(
                    f"{result.path}: {field} {value_of(result)[:12]}... differs from the "
                    f"{counts[majority]} other {name} result(s) ({majority[:12]}...); "
                    "incompatible with them, skipped"
                )
    return kept


def _input_files(paths: Iterable[str | Path]) -> tuple[dict[Path, bool], list[str]]:
    """The ``*.json`` files that ``paths`` name or hold (directories searched recursively), each
    once (a file named twice, or also found in a directory named, is read the first time), in
    order, each with whether it was named itself; and a note for each file named that is not
    ``*.json`` (a training log, per-token log-probabilities: a shell glob names them too), which
    is skipped."""
    files: dict[Path, tuple[Path, bool]] = {}  # by resolved path
    notes = []
    for path in map(Path, paths):
        if path.is_dir():
            found = sorted(p for p in path.rglob("*.json") if p.is_file())
        elif path.suffix == ".json":
            found = [path]
        else:
            found = []
            notes.append(f"{path}: not a .json file, so not a harness result; skipped")
        for file in found:
            files.setdefault(file.resolve(), (file, file is path))
    return dict(files.values()), notes


def _not_results_note(skipped: list[tuple[Path, NotAResult]]) -> list[str]:
    """One note for the JSON files found in the directories searched that are not results at all
    (configs, other tools' reports): its reason when there is one, else their number and folders."""
    if len(skipped) < 2:
        return [f"{error}; skipped" for _, error in skipped]
    folders = ", ".join(sorted({str(file.parent) for file, _ in skipped}))
    return [
        f"{len(skipped)} JSON files that are not harness results (no schema_version or "
        f"perplexity) skipped, in {folders}"
    ]


def collect(
    paths: Iterable[str | Path], include_unaudited: bool = False, require_token_log_probs: bool = False
) -> Collection:
    """Every result file under ``paths`` (directories searched recursively for ``*.json``; files
    named that are not ``*.json`` are noted and skipped; a file found twice is read once),
    validated; incompatible files are rejected by name, never merged (JSON objects that are not
    result files at all, with neither ``schema_version`` nor ``perplexity``, are noted instead,
    so that metadata beside the results does not fail a strict build: by name when named, and
    those found in the directories searched in one note):

    - unreadable, non-JSON, missing keys, wrong types, unsupported ``schema_version``, figures
      that contradict each other or the audit records;
    - ``tokens``, ``nll`` or ``perplexity`` that disagree with the per-token log-probability
      file (:func:`verify_figures`), and, when ``require_token_log_probs``, a result without
      that file;
    - a benchmark split whose ``dataset_sha256`` is not the release's (or, for a benchmark whose
      release checksums the harness does not know, one that was not verified), or whose
      ``tokens`` are not the split's (:data:`SPLIT_TOKENS`);
    - within one dataset, a ``vocab_sha256`` that differs from the one most results share, and
      within one dataset split, a ``dataset_sha256`` that differs likewise.

    Results that do not show both audits passed are kept out (named in ``unaudited``) unless
    ``include_unaudited``. Results without their per-token file are kept unverified
    (:attr:`Result.verified`, named in ``unverified``) unless ``require_token_log_probs``.
    Contamination reports among the files are matched to the results they name
    (:func:`leaderboard.clean_subset.attach_reports`): those that fit go to ``contamination``,
    the others are rejected or noted by name.
    """
    files, notes = _input_files(paths)
    results, rejected, unaudited = [], [], []
    found_not_results: list[tuple[Path, NotAResult]] = []
    reports: list[tuple[Path, dict[str, Any]]] = []
    for file, named in files.items():
        try:
            data = read_json(file)
            if is_report(data):
                reports.append((file, data))
                continue
            result = validate(data, file)
            if result.split in TABLE_SPLITS:
                result = verify_figures(result, require_token_log_probs)
        except NotAResult as error:  # e.g. a gate-analysis JSON beside the results: skipped
            if named:
                notes.append(f"{error}; skipped")
            else:
                found_not_results.append((file, error))
            continue
        except ResultError as error:
            rejected.append(str(error))
            continue
        if result.split not in TABLE_SPLITS:
            notes.append(f"{file}: a {result.split}-split result; only valid and test are tabulated")
            continue
        mismatch = _release_mismatch(result) or _split_size_mismatch(result)
        if mismatch is not None:
            rejected.append(f"{file}: {mismatch}; skipped")
            continue
        gap = audit_gap(result)
        if gap is not None and not include_unaudited:
            unaudited.append(f"{file}: {gap}: kept out of the ranking (--include-unaudited shows it, marked)")
            continue
        results.append(result)
    results = _reject_minorities(results, "dataset", "vocab_sha256", rejected)
    results = _reject_minorities(results, "dataset/split", "dataset_sha256", rejected)
    results.sort(key=lambda r: str(r.path))
    unverified = [
        f"{unverifiable(result)}: shown unranked, kind 'unverified' (--strict refuses it)"
        for result in results
        if not result.verified
    ]
    attached = attach_reports(reports, results)
    notes += _not_results_note(found_not_results)
    return Collection(
        results, rejected + attached.rejected, notes + attached.notes, unaudited, unverified, attached.figures
    )


#: The option with which ``compare`` and the plots use results that are not audited and
#: verified (:func:`trust_gap`): they go on, with a warning, where they refuse them otherwise.
ALLOW_UNAUDITED = "--allow-unaudited"

#: The option with which ``compare`` pairs results scored under different protocols (stream and
#: documents: :func:`leaderboard.provenance.check_same_protocol`), which it refuses otherwise.
ACROSS_PROTOCOLS = "--across-protocols"

#: :func:`trust_gap` of a result whose figures were not recomputed from its per-token file.
UNVERIFIED_GAP = "unverified (figures not recomputed: no per-token log-probabilities)"


def audit_gap(result: Result) -> str | None:
    """``unaudited (REASONS)`` when the audits that apply to ``result`` did not all pass
    (:attr:`Result.unaudited_reasons`); None when they did."""
    reasons = result.unaudited_reasons
    return f"unaudited ({'; '.join(reasons)})" if reasons else None


def trust_gap(result: Result) -> str | None:
    """Why ``result``'s figures are not to be taken as measured: its :func:`audit_gap`, else
    :data:`UNVERIFIED_GAP` when they were not recomputed from its per-token log-probabilities
    (:attr:`Result.verified`); None for a result both audited and verified, as ``build`` ranks."""
    return audit_gap(result) or (None if result.verified else UNVERIFIED_GAP)


def check_trusted(gaps: Sequence[tuple[str, str]], use: str, allowed: bool) -> str | None:
    """Refuse to ``use`` (``compare``, ``plot``) the results that ``gaps`` names, each with its
    :func:`trust_gap`: :class:`ResultError`, one line naming each and why, unless ``allowed``
    (:data:`ALLOW_UNAUDITED`); then the warning line to show beside what is made of them. None
    when ``gaps`` is empty."""
    if not gaps:
        return None
    named = "; ".join(f"{name}: {gap}" for name, gap in gaps)
    if not allowed:
        them = "it" if len(gaps) == 1 else "them"
        raise ResultError(f"{named}: refused; pass {ALLOW_UNAUDITED} to {use} {them} anyway, with a warning")
    return f"WARNING: {named}: used anyway ({ALLOW_UNAUDITED}); figures not audited and verified may be wrong"


def find_token_log_probs(result: Result) -> Path | None:
    """Where the result's per-token log-probabilities are: ``token_log_probs_file`` as written
    (absolute, or relative to the JSON's folder), else a file of that name beside the JSON (a
    results folder that was moved or copied), else the name
    :func:`harness.results.token_log_probs_name` gives it beside the JSON; None when none of these
    exists."""
    recorded = result.record.token_log_probs_file
    folder = result.path.parent
    candidates: list[Path] = []
    if recorded:
        recorded_path = Path(recorded)
        candidates.append(recorded_path if recorded_path.is_absolute() else folder / recorded_path)
        candidates.append(folder / recorded_path.name)
    candidates.append(folder / token_log_probs_name(result.path.name))
    return next((candidate for candidate in candidates if candidate.is_file()), None)


def missing_token_log_probs(result: Result) -> str:
    """The line that says :func:`find_token_log_probs` found no per-token log-probability file
    for ``result``: the result's name, and where the file was looked for."""
    recorded = result.record.token_log_probs_file
    if not recorded:
        return (
            f"{result.path}: no token_log_probs_file recorded and no "
            f"{token_log_probs_name(result.path.name)} beside it (rerun harness eval "
            "with --output-dir or --save-token-logprobs)"
        )
    return (
        f"{result.path}: token log-probabilities {recorded} not found (also looked in {result.path.parent})"
    )


def unverifiable(result: Result) -> str:
    """The line that says ``result``'s figures cannot be verified: its per-token
    log-probabilities were not found (:func:`missing_token_log_probs`)."""
    return f"{missing_token_log_probs(result)}; its figures cannot be verified without them"


def token_log_probs_path(result: Result) -> Path:
    """:func:`find_token_log_probs`, or :class:`ResultError` saying where it looked."""
    path = find_token_log_probs(result)
    if path is None:
        raise ResultError(missing_token_log_probs(result))
    return path


def load_token_log_probs(result: Result) -> np.ndarray:
    """The result's per-token log-probabilities (float64 ``[tokens]``), checked against the
    result's token count and mean NLL so that a stale or foreign file is refused."""
    return _read_token_log_probs(result, token_log_probs_path(result))


def load_verified(result: Result) -> tuple[Result, np.ndarray]:
    """``result``, verified (:attr:`Result.verified`), and its per-token log-probabilities, checked
    as :func:`load_token_log_probs` checks them; :class:`ResultError` naming the file when they
    are missing (:func:`unverifiable`) or disagree with it."""
    path = find_token_log_probs(result)
    if path is None:
        raise ResultError(unverifiable(result))
    return dataclasses.replace(result, verified=True), _read_token_log_probs(result, path)


def _perplexity(mean_nll: float) -> float:
    """``exp(mean_nll)``; infinite past the largest float."""
    try:
        return math.exp(mean_nll)
    except OverflowError:
        return math.inf


def _read_token_log_probs(result: Result, path: Path) -> np.ndarray:
    """The per-token log-probabilities in ``path``, refused (:class:`ResultError` naming the file)
    unless they are finite, at most :data:`MAX_LOG_PROB`, as many as ``result``'s ``tokens``, and
    their mean NLL and its perplexity are ``result``'s ``nll`` and ``perplexity``."""
    try:
        values = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as error:
        raise ResultError(f"{path}: not a readable .npy array ({error})") from None
    if not isinstance(values, np.ndarray):  # an .npz archive: np.load opens it as an NpzFile
        values.close()
        raise ResultError(f"{path}: not a .npy array (an .npz archive of arrays)")
    if values.ndim != 1 or not np.issubdtype(values.dtype, np.floating):
        raise ResultError(f"{path}: expected a 1-D float array, got {values.dtype} {values.shape}")
    if len(values) != result.record.tokens:
        raise ResultError(
            f"{path}: {len(values)} log-probabilities for a result of "
            f"{result.record.tokens} tokens ({result.path} disagrees with it)"
        )
    values = values.astype(np.float64, copy=False)
    if not np.all(np.isfinite(values)) or np.any(values > MAX_LOG_PROB):
        raise ResultError(f"{path}: log-probabilities must be finite and at most {MAX_LOG_PROB:g}")
    mean_nll = -float(values.mean())
    perplexity = _perplexity(mean_nll)
    if not (
        math.isclose(mean_nll, float(result.record.nll), rel_tol=TOKEN_LOG_PROBS_RTOL, abs_tol=1e-12)
        and math.isclose(perplexity, result.perplexity, rel_tol=TOKEN_LOG_PROBS_RTOL)
    ):
        raise ResultError(
            f"{path}: mean NLL {mean_nll:.9g} (perplexity {perplexity:.9g}) "
            f"does not match the result's nll {float(result.record.nll):.9g} (perplexity "
            f"{result.perplexity:.9g}) in {result.path.name}: stale, foreign or edited"
        )
    return values
