"""Contamination reports on the leaderboard: the clean-subset perplexity of the results that
carry one.

A *report* is the JSON that ``python -m harness contamination ... --result RESULT.json --output
REPORT.json`` writes (:mod:`harness.contamination`); the leaderboard finds reports among the
files it reads (a JSON object with ``report_version``), wherever they are. A report names the
result it was computed from (``result``, the path given to ``--result``) and belongs to that
file among the results read: the path as recorded (absolute, or relative to the working
directory or to the report's folder), else the file of that name beside the report, else, for
files moved since, the only result read of that name. It is shown only when it fits that result:
the same ``dataset``, ``split``, ``dataset_sha256``, ``tokens`` and ``model``, a
``perplexity_all`` equal to the result's ``perplexity`` within
:data:`harness.contamination.PERPLEXITY_RTOL`, and perplexities that follow from the report's own
log-probability sums and token counts. Anything else is a one-line :class:`ReportError`.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.contamination import PERPLEXITY_RTOL, REPORT_VERSION

if TYPE_CHECKING:
    from leaderboard.records import Result

_NUMBER = (int, float)
_OPTIONAL_NUMBER = (int, float, type(None))
#: The fields of a report that the leaderboard reads, with their JSON types.
REPORT_FIELDS: dict[str, tuple[type, ...]] = {
    "result": (str,),
    "dataset": (str,),
    "split": (str,),
    "dataset_sha256": (str,),
    "tokens": (int,),
    "model": (str, type(None)),
    "settings": (dict,),
    "articles": (list,),
    "contaminated": (list,),
    "perplexity_all": _NUMBER,
    "perplexity_clean": _OPTIONAL_NUMBER,
    "perplexity_contaminated": _OPTIONAL_NUMBER,
    "tokens_clean": (int,),
    "tokens_contaminated": (int,),
    "log_prob_sum_clean": _NUMBER,
    "log_prob_sum_contaminated": _NUMBER,
}
#: The fields of its ``settings`` that the leaderboard reads.
SETTINGS_FIELDS: dict[str, tuple[type, ...]] = {"threshold": _NUMBER, "ngram": (int,), "units": (str,)}
#: What a report must share with its result (keys of the report, fields of its result record).
MATCHED_FIELDS = ("dataset", "split", "dataset_sha256", "tokens", "model")


class ReportError(Exception):
    """A contamination report that cannot be shown; the message is one line naming the file."""


@dataclasses.dataclass(frozen=True)
class CleanFigures:
    """What a leaderboard row shows of one result's contamination report.

    Attributes:
        report: the report file.
        perplexity_clean: the perplexity on the split's clean units; None when every unit is
            contaminated.
        contaminated_share: the share of the split's tokens in contaminated units, in [0, 1].
        contaminated_units, units: how many units are contaminated, of how many.
        unit_kind: ``articles`` or ``blocks``.
        ngram, threshold: the report's n-gram length and contamination threshold.
    """

    report: Path
    perplexity_clean: float | None
    contaminated_share: float
    contaminated_units: int
    units: int
    unit_kind: str
    ngram: int
    threshold: float

    def note(self, split: str, report_name: str) -> str:
        """The row's note: ``test: 3 of 60 articles contaminated (13-gram overlap >= 0.5, REPORT)``."""
        return (
            f"{split}: {self.contaminated_units} of {self.units} {self.unit_kind} contaminated "
            f"({self.ngram}-gram overlap >= {self.threshold:g}, {report_name})"
        )


def is_report(data: Any) -> bool:
    """Whether parsed JSON is a contamination report rather than a result."""
    return isinstance(data, dict) and "report_version" in data


def _wrong_type(value: Any, types: tuple[type, ...]) -> bool:
    return not isinstance(value, types) or (isinstance(value, bool) and bool not in types)


def _check_fields(path: Path, data: dict[str, Any]) -> None:
    """:class:`ReportError` unless ``data`` is a report of a supported version with every field
    the leaderboard reads, of the right type."""
    if data["report_version"] != REPORT_VERSION:
        raise ReportError(
            f"{path}: contamination report_version {data['report_version']!r} is not supported "
            f"(this leaderboard reads {REPORT_VERSION})"
        )
    _check_types(path, data, REPORT_FIELDS, "")
    _check_types(path, data["settings"], SETTINGS_FIELDS, "settings.")


def _check_types(path: Path, where: dict[str, Any], fields: dict[str, tuple[type, ...]], prefix: str) -> None:
    for key, types in fields.items():
        if key not in where or _wrong_type(where[key], types):
            wanted = " or ".join("null" if t is type(None) else t.__name__ for t in types)
            raise ReportError(f"{path}: contamination report: {prefix}{key} missing or not {wanted}")


def _named_result(path: Path, data: dict[str, Any], results: dict[Path, Result]) -> Result | None:
    """The result among ``results`` (by resolved path) that the report at ``path`` names (see the
    module docstring); None when the file it names exists but is not among them;
    :class:`ReportError` when it is nowhere."""
    if "\0" in data["result"]:  # no file system takes it: Path.resolve() would raise
        raise ReportError(f"{path}: contamination report: result {data['result']!r} is no path (a NUL byte)")
    recorded = Path(data["result"])
    candidates = [recorded, path.parent / recorded, path.parent / recorded.name]
    for candidate in candidates:
        result = results.get(candidate.resolve())
        if result is not None:
            return result
    if any(candidate.is_file() for candidate in candidates):
        return None
    same_name = [result for result in results.values() if result.path.name == recorded.name]
    if len(same_name) == 1:
        return same_name[0]
    which = f"{len(same_name)} results read have that name" if same_name else "none read has that name"
    raise ReportError(f"{path}: the result it was computed from, {recorded}, is not found ({which})")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 20 else text[:13] + "...'"


def _mismatch(data: dict[str, Any], result: Result) -> str | None:
    """How the report differs from the result it names; None when it fits."""
    for key in MATCHED_FIELDS:
        recorded = getattr(result.record, key)
        if data[key] != recorded:
            return f"its {key} {_shown(data[key])} is not its result's ({_shown(recorded)})"
    if not math.isclose(data["perplexity_all"], result.perplexity, rel_tol=PERPLEXITY_RTOL):
        return (
            f"its perplexity_all {data['perplexity_all']:.6f} is not its result's perplexity "
            f"{result.perplexity:.6f} (another evaluation, or the result was re-run since)"
        )
    return None


def _perplexity(log_prob_sum: float, tokens: int) -> float | None:
    """``exp(-log_prob_sum / tokens)``, None for no tokens, inf when it overflows."""
    if not tokens:
        return None
    try:
        return math.exp(-log_prob_sum / tokens)
    except OverflowError:
        return math.inf


def _inconsistency(data: dict[str, Any]) -> str | None:
    """How the report's perplexities disagree with its own sums and token counts; None when
    they agree (the parts recombine to ``perplexity_all``)."""
    clean, dirty = data["tokens_clean"], data["tokens_contaminated"]
    if min(clean, dirty) < 0 or clean + dirty != data["tokens"]:
        return f"tokens_clean {clean} and tokens_contaminated {dirty} do not add up to its tokens"
    sums = data["log_prob_sum_clean"], data["log_prob_sum_contaminated"]
    parts = (
        ("perplexity_clean", sums[0], clean),
        ("perplexity_contaminated", sums[1], dirty),
        ("perplexity_all", sums[0] + sums[1], data["tokens"]),
    )
    for key, log_prob_sum, tokens in parts:
        expected, recorded = _perplexity(log_prob_sum, tokens), data[key]
        if expected is None or recorded is None:
            agrees = expected is recorded  # both None: a part with no tokens
        else:
            agrees = math.isclose(recorded, expected, rel_tol=PERPLEXITY_RTOL)
        if not agrees:
            return f"its {key} does not follow from its log-probability sums and token counts (edited?)"
    return None


def check_report(path: Path, data: dict[str, Any], result: Result) -> CleanFigures:
    """The figures of the report at ``path`` (parsed: ``data``) for ``result``, the result it
    names; :class:`ReportError` when it does not fit it (see the module docstring)."""
    problem = _mismatch(data, result) or _inconsistency(data)
    if problem is not None:
        raise ReportError(f"{path}: a contamination report that does not fit {result.path}: {problem}")
    settings = data["settings"]
    return CleanFigures(
        report=path,
        perplexity_clean=data["perplexity_clean"],
        contaminated_share=data["tokens_contaminated"] / data["tokens"],
        contaminated_units=len(data["contaminated"]),
        units=len(data["articles"]),
        unit_kind=settings["units"],
        ngram=settings["ngram"],
        threshold=settings["threshold"],
    )


@dataclasses.dataclass
class Attached:
    """Reports matched to results: ``figures`` by result path, and the reports not shown, each
    with a one-line reason (``rejected``: unusable or not fitting; ``notes``: benign)."""

    figures: dict[Path, CleanFigures]
    rejected: list[str]
    notes: list[str]


def attach_reports(reports: list[tuple[Path, dict[str, Any]]], results: list[Result]) -> Attached:
    """Match each ``(path, parsed report)`` to the result among ``results`` that it names and
    check that it fits it. A report made without ``--result`` (no perplexities), or whose result
    is not among ``results`` (rejected, unaudited, or not read), is noted; a malformed report, one
    whose result is missing or that does not fit its result, is rejected; so are all the reports
    of a result that has more than one."""
    by_path = {result.path.resolve(): result for result in results}
    found: dict[Path, list[CleanFigures]] = defaultdict(list)
    attached = Attached({}, [], [])
    for path, data in reports:
        if "perplexity_all" not in data:
            attached.notes.append(
                f"{path}: a contamination report without perplexities (made without --result); not shown"
            )
            continue
        try:
            _check_fields(path, data)
            result = _named_result(path, data, by_path)
            if result is None:
                attached.notes.append(
                    f"{path}: its result {data['result']} is not on the leaderboard (rejected, "
                    "unaudited or not among the files read); not shown"
                )
                continue
            figures = check_report(path, data, result)
            found[result.path].append(figures)
        except ReportError as error:
            attached.rejected.append(str(error))
    for result_path, candidates in found.items():
        if len(candidates) == 1:
            attached.figures[result_path] = candidates[0]
        else:
            names = ", ".join(str(candidate.report) for candidate in candidates)
            attached.rejected.append(
                f"{result_path}: {len(candidates)} contamination reports ({names}); which one applies "
                "is ambiguous, none shown"
            )
    return attached
