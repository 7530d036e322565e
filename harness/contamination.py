"""Contamination check: how much of a benchmark split a training corpus contains, by word n-grams,
and the perplexity on the clean part of the split.

``python -m harness contamination CORPUS... --dataset NAME --split SPLIT --output REPORT.json``
(:mod:`harness.cli`) calls this module; the matching itself (units, normalisation, wildcards,
the streamed scan) is :mod:`wikitext_toolkit_core.ngrams`, which the builder's overlap filter shares.

- :func:`corpus_files` and :func:`corpus_documents` read what a user trained on: plain text files
  (optionally ``.gz``, ``.xz``, ``.bz2``), JSON lines (``.jsonl``, ``.jsonl.gz``, ...) with a
  text field, a builder corpus directory (its ``wiki.*.tokens``) or a directory of such files.
- :func:`read_scored_result` and :func:`split_perplexity` split a saved result's per-token
  log-probabilities into the clean and contaminated units, with no re-run.
- :func:`contamination_report` and :func:`format_report` make the report and its table.

Standard library and numpy only: it imports neither torch nor the evaluator.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import math
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np

from wikitext_toolkit_core import bounded_json
from wikitext_toolkit_core.format import SPLITS
from wikitext_toolkit_core.ngrams import SEED_WORDS, ContaminationError, Document, Overlaps, TestSide

#: Defaults of the command line.
DEFAULT_THRESHOLD = 0.5
DEFAULT_TEXT_FIELD = "text"
#: Bytes of a text file read at a time.
READ_BLOCK_BYTES = 1 << 23
#: Documents named per unit in the report (those holding most of its n-grams).
REPORTED_SOURCES = 3
#: Relative tolerance between a result's perplexity and that of its per-token file.
PERPLEXITY_RTOL = 1e-9
#: Version of the report's layout.
REPORT_VERSION = 1

_OPENERS = {".gz": gzip.open, ".xz": lzma.open, ".bz2": bz2.open}
_READ_ERRORS = (OSError, EOFError, zlib.error, lzma.LZMAError)


# ---- reading a corpus ---------------------------------------------------------------------------


def _is_json_lines(path: Path) -> bool:
    name = path.name
    for suffix in _OPENERS:
        name = name.removesuffix(suffix)
    return name.endswith(".jsonl")


def _open_binary(path: Path) -> IO[bytes]:
    """``path``'s bytes, decompressed by its suffix (``.gz``, ``.xz``, ``.bz2``)."""
    opener = _OPENERS.get(path.suffix)
    return opener(path, "rb") if opener else path.open("rb")  # type: ignore[operator]


def corpus_files(paths: Sequence[str | Path]) -> list[Path]:
    """The files of the corpus arguments, in order: a file as it is; a builder corpus directory
    (one holding ``wiki.*.tokens``) as its ``wiki.{train,valid,test}.tokens``; any other directory
    as every file under it (sorted, hidden ones left out)."""
    files: list[Path] = []
    for path in map(Path, paths):
        if path.is_file():
            files.append(path)
        elif path.is_dir():
            splits = [
                path / f"wiki.{split}.tokens" for split in SPLITS if (path / f"wiki.{split}.tokens").is_file()
            ]
            found = splits or sorted(
                file
                for file in path.rglob("*")
                if file.is_file() and not any(part.startswith(".") for part in file.relative_to(path).parts)
            )
            if not found:
                raise ContaminationError(f"corpus {path}: an empty directory (no files to read)")
            files.extend(found)
        else:
            raise ContaminationError(f"corpus {path}: no such file or directory")
    return files


def _text_pieces(path: Path) -> Iterator[str]:
    """A text file's text, about :data:`READ_BLOCK_BYTES` at a time, cut after a newline (else a
    space); a binary or non-UTF-8 file is a one-line :class:`ContaminationError`."""
    offset, carry = 0, b""  # where carry, an unfinished line, starts
    try:
        with _open_binary(path) as handle:
            for block in iter(lambda: handle.read(READ_BLOCK_BYTES), b""):
                nul = block.find(b"\0")
                if nul >= 0:
                    where = offset + len(carry) + nul
                    raise ContaminationError(
                        f"corpus {path}: binary data (a NUL byte at byte {where}), not text"
                    )
                data = carry + block
                cut = data.rfind(b"\n") + 1 or data.rfind(b" ") + 1  # a line, else a word, stays whole
                yield _decoded(data[:cut], offset, path)
                carry, offset = data[cut:], offset + cut
            yield _decoded(carry, offset, path)
    except _READ_ERRORS as error:
        raise ContaminationError(f"corpus {path}: cannot read it ({_reason(error)})") from None


def _reason(error: BaseException) -> str:
    text = str(error).splitlines()[0] if str(error) else ""
    return text or type(error).__name__


def _decoded(data: bytes, offset: int, path: Path) -> str:
    """``data`` (bytes from ``offset`` of ``path``) as text, or a one-line error."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ContaminationError(
            f"corpus {path}: not UTF-8 text (invalid byte at {offset + error.start})"
        ) from None


def _json_documents(path: Path, text_field: str) -> Iterator[Document]:
    """One document per JSON line (``FILE:LINE``), its text the record's ``text_field``."""
    number = 0
    try:
        with _open_binary(path) as handle:
            for number, line in enumerate(handle, start=1):
                if line.strip():
                    yield Document(f"{path}:{number}", [_record_text(line, text_field, f"{path}:{number}")])
    except _READ_ERRORS as error:
        raise ContaminationError(
            f"corpus {path}: cannot read it after line {number} ({_reason(error)})"
        ) from None


def _record_text(line: bytes, text_field: str, where: str) -> str:
    try:
        record = bounded_json.loads(line)
    except ValueError as error:  # UnicodeDecodeError included
        raise ContaminationError(f"corpus {where}: not a JSON line ({_reason(error)})") from None
    if not isinstance(record, dict):
        raise ContaminationError(f"corpus {where}: not a JSON object")
    if text_field not in record:
        fields = ", ".join(map(str, list(record)[:8])) or "none"
        raise ContaminationError(f"corpus {where}: no {text_field!r} field (--text-field; it has: {fields})")
    text = record[text_field]
    if not isinstance(text, str):
        raise ContaminationError(f"corpus {where}: field {text_field!r} is not a string")
    return text


def corpus_documents(files: Sequence[Path], text_field: str = DEFAULT_TEXT_FIELD) -> Iterator[Document]:
    """The documents of the corpus ``files`` (see :func:`corpus_files`), read lazily: one per
    JSON line of a ``.jsonl`` file, one per other (text) file."""
    for path in files:
        if _is_json_lines(path):
            yield from _json_documents(path, text_field)
        else:
            yield Document(str(path), _text_pieces(path))


# ---- perplexity on the clean part ---------------------------------------------------------------


def read_scored_result(
    path: Path, *, dataset: str, split: str, sha256: str, tokens: int
) -> tuple[dict[str, Any], np.ndarray]:
    """A saved evaluation (``harness eval --output`` or ``--output-dir``) of ``dataset``/``split``
    (the split file of checksum ``sha256``, ``tokens`` tokens) and its per-token log-probabilities
    (float64 ``[tokens]``), checked against the record (dataset, split, checksum, token count
    and perplexity, within :data:`PERPLEXITY_RTOL`); one-line errors otherwise."""
    try:
        record = bounded_json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ContaminationError(f"--result {path}: not a readable JSON result ({_reason(error)})") from None
    if not isinstance(record, dict) or not {"dataset", "split", "tokens", "perplexity"} <= record.keys():
        raise ContaminationError(
            f"--result {path}: not a harness result (no dataset, split, tokens, perplexity)"
        )
    if (record["dataset"], record["split"]) != (dataset, split):
        raise ContaminationError(
            f"--result {path}: a result of {record['dataset']}/{record['split']}, not of {dataset}/{split}"
        )
    if record.get("dataset_sha256") != sha256:
        raise ContaminationError(
            f"--result {path}: scored another version of the {dataset} {split} file (sha256)"
        )
    values = _token_log_probs(path, record)
    if len(values) != tokens or record["tokens"] != tokens:
        raise ContaminationError(
            f"--result {path}: {len(values)} per-token log-probabilities and {record['tokens']} tokens "
            f"recorded, for a split of {tokens} tokens"
        )
    perplexity = math.exp(-math.fsum(values) / tokens)
    if not math.isclose(perplexity, float(record["perplexity"]), rel_tol=PERPLEXITY_RTOL):
        raise ContaminationError(
            f"--result {path}: its per-token log-probabilities give perplexity {perplexity:.6f}, the "
            f"result says {float(record['perplexity']):.6f}: the per-token file is not this result's"
        )
    return record, values


def token_log_probs_file(path: Path, record: dict[str, Any]) -> Path:
    """The per-token file that the result ``record``, read from ``path``, names
    (``token_log_probs_file``: absolute or relative to the result's folder; else, as older results
    record it, relative to the working directory; else by its name beside the result)."""
    recorded = record.get("token_log_probs_file")
    if not recorded:
        raise ContaminationError(
            f"--result {path}: no per-token log-probabilities recorded (rerun harness eval with "
            "--output-dir or --save-token-logprobs)"
        )
    candidates = [path.parent / recorded, Path(recorded), path.parent / Path(recorded).name]
    found = next((candidate for candidate in candidates if candidate.is_file()), None)
    if found is None:
        raise ContaminationError(
            f"--result {path}: its per-token file {recorded} is missing (also looked beside it)"
        )
    return found


def _token_log_probs(path: Path, record: dict[str, Any]) -> np.ndarray:
    """The values of :func:`token_log_probs_file`, as float64 ``[N]``."""
    found = token_log_probs_file(path, record)
    try:
        values = np.load(found, allow_pickle=False)
    except (OSError, ValueError) as error:
        raise ContaminationError(
            f"--result {path}: {found} is not a readable .npy array ({_reason(error)})"
        ) from None
    if values.ndim != 1 or not np.issubdtype(values.dtype, np.floating):
        raise ContaminationError(f"--result {path}: {found} is not a 1-D float array")
    return values.astype(np.float64, copy=False)


def split_perplexity(
    token_log_probs: np.ndarray, unit_tokens: np.ndarray, contaminated: np.ndarray
) -> dict[str, Any]:
    """Perplexity of the whole split, of its clean units and of its contaminated ones.

    Args:
        token_log_probs: float64 ``[N]``, in split order.
        unit_tokens: int64 ``[U]``: each unit's tokens (consecutive ranges, summing to ``N``).
        contaminated: bool ``[U]``.

    The sums are exactly rounded (``math.fsum``) and ``perplexity_all`` is
    ``exp(-(log_prob_sum_clean + log_prob_sum_contaminated) / tokens)``, so the parts recombine
    to it exactly; a part with no tokens has perplexity None.
    """
    in_contaminated = np.repeat(contaminated, unit_tokens)
    sums = {
        part: math.fsum(token_log_probs[mask])
        for part, mask in (("clean", ~in_contaminated), ("contaminated", in_contaminated))
    }
    counts = {"clean": int((~in_contaminated).sum()), "contaminated": int(in_contaminated.sum())}

    def perplexity(total: float, count: int) -> float | None:
        return math.exp(-total / count) if count else None

    return {
        "perplexity_all": perplexity(sums["clean"] + sums["contaminated"], len(token_log_probs)),
        "perplexity_clean": perplexity(sums["clean"], counts["clean"]),
        "perplexity_contaminated": perplexity(sums["contaminated"], counts["contaminated"]),
        "tokens_clean": counts["clean"],
        "tokens_contaminated": counts["contaminated"],
        "log_prob_sum_clean": sums["clean"],
        "log_prob_sum_contaminated": sums["contaminated"],
    }


# ---- the report ---------------------------------------------------------------------------------


def contamination_report(
    test: TestSide, overlaps: Overlaps, *, dataset: str, split: str, sha256: str, settings: dict[str, Any]
) -> dict[str, Any]:
    """The JSON-ready report (without perplexities) of ``dataset``/``split`` (its file's
    ``sha256``): every unit with its overlap, the contaminated ones (``overlap >=
    settings["threshold"]``) and their share of the split's tokens, and the ``settings``."""
    overlap, threshold = overlaps.overlap, settings["threshold"]
    articles = [
        {
            "title": unit.title,
            "first_line": unit.first_line,
            "lines": unit.lines,
            "tokens": unit.tokens,
            "ngrams": int(overlaps.ngrams[i]),
            "found": int(overlaps.found[i]),
            "unchecked": int(overlaps.unchecked[i]),
            "overlap": float(overlap[i]),
            "found_in": [
                {"document": label, "ngrams": count}
                for label, count in overlaps.sources[i][:REPORTED_SOURCES]
            ],
        }
        for i, unit in enumerate(test.units)
    ]
    contaminated = [i for i in range(len(articles)) if overlap[i] >= threshold]
    contaminated_tokens = sum(test.units[i].tokens for i in contaminated)
    return {
        "report_version": REPORT_VERSION,
        "dataset": dataset,
        "split": split,
        "dataset_sha256": sha256,
        "settings": {**settings, "ngram": test.ngram, "units": test.kind, "seed_words": SEED_WORDS},
        "corpus_documents": overlaps.documents,
        "corpus_words": overlaps.words,
        "corpus_characters": overlaps.characters,
        "tokens": test.tokens,
        "ngrams": int(overlaps.ngrams.sum()),
        "ngrams_found": int(overlaps.found.sum()),
        "ngrams_unchecked": int(overlaps.unchecked.sum()),
        "articles": articles,
        "contaminated": [
            {
                "article": i,
                "title": test.units[i].title,
                "overlap": articles[i]["overlap"],
                "tokens": test.units[i].tokens,
            }
            for i in contaminated
        ],
        "contaminated_tokens": contaminated_tokens,
        "contaminated_token_share": contaminated_tokens / test.tokens,
    }


def contaminated_units(report: dict[str, Any]) -> np.ndarray:
    """bool ``[U]``: which units of the report are contaminated."""
    flags = np.zeros(len(report["articles"]), bool)
    flags[[entry["article"] for entry in report["contaminated"]]] = True
    return flags


def format_report(report: dict[str, Any], rows: int = 10) -> str:
    """A short table: the summary; every contaminated unit, then the next most overlapping ones
    (overlap above 0) up to ``rows`` lines; the perplexities when the report has them."""
    articles, settings = report["articles"], report["settings"]
    unit = settings["units"]
    found_share = report["ngrams_found"] / max(report["ngrams"], 1)
    lines = [
        f"{report['dataset']}/{report['split']}: {len(articles)} {unit}, {report['tokens']:,} tokens; "
        f"{report['ngrams']:,} {settings['ngram']}-grams checked, {report['ngrams_found']:,} found "
        f"({found_share:.1%}) in {report['corpus_documents']:,} documents ({report['corpus_words']:,} words)",
        f"contaminated (overlap >= {settings['threshold']:g}): {len(report['contaminated'])} of "
        f"{len(articles)} {unit}, {report['contaminated_tokens']:,} tokens "
        f"({report['contaminated_token_share']:.1%} of the split)",
    ]
    ranked = sorted(range(len(articles)), key=lambda i: -articles[i]["overlap"])
    shown = [i for i in ranked[: max(rows, len(report["contaminated"]))] if articles[i]["overlap"] > 0]
    if shown:
        lines.append(f"{'overlap':>8} {'tokens':>8}  {unit[:-1]}")
        lines += [
            f"{articles[i]['overlap']:>8.3f} {articles[i]['tokens']:>8,}  {articles[i]['title']}"
            for i in shown
        ]
    if len(articles) > len(shown):
        highest = articles[ranked[len(shown)]]["overlap"]
        lines.append(f"the other {len(articles) - len(shown)} {unit}: overlap at most {highest:.3f}")
    if "perplexity_all" in report:
        parts = [("all", "perplexity_all", "tokens"), ("clean", "perplexity_clean", "tokens_clean")]
        parts.append(("contaminated", "perplexity_contaminated", "tokens_contaminated"))
        lines.append(
            "perplexity: "
            + ", ".join(
                f"{name} {_perplexity_text(report[value], report[tokens])}" for name, value, tokens in parts
            )
        )
    return "\n".join(lines)


def _perplexity_text(value: float | None, tokens: int) -> str:
    return f"{'-' if value is None else f'{value:.2f}'} ({tokens:,} tokens)"
