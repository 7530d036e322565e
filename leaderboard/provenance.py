"""What a result was scored on: whether two results can be compared token by token, and the
dataset (with the vocabulary) behind one of them."""

from __future__ import annotations

from pathlib import Path

from harness.datasets import Dataset, load_dataset
from harness.results import resolve_recorded_path
from leaderboard.records import ACROSS_PROTOCOLS, Result, ResultError
from wikitext_toolkit_core.catalogue import BENCHMARKS
from wikitext_toolkit_core.files import DatasetError

#: The fields of their records two results must share to be compared token by token.
COMPARED_FIELDS = ("dataset", "split", "tokens", "vocab_sha256", "dataset_sha256")


def check_comparable(a: Result, b: Result) -> None:
    """Fail unless ``a`` and ``b`` scored the same tokens of the same split (:data:`COMPARED_FIELDS`)."""
    for field in COMPARED_FIELDS:
        value_a, value_b = getattr(a.record, field), getattr(b.record, field)
        if value_a != value_b:
            raise ResultError(
                f"{a.path} and {b.path} are not comparable: {_difference(field, value_a, value_b)}"
            )


def check_same_protocol(a: Result, b: Result, allowed: bool) -> None:
    """Fail unless ``a`` and ``b`` were scored under the same protocol (its
    :attr:`~wikitext_toolkit_core.result_schema.Protocol.kind`: ``stream`` for a file that names
    none) or ``allowed`` (:data:`~leaderboard.records.ACROSS_PROTOCOLS`)."""
    kind_a, kind_b = a.record.protocol.kind, b.record.protocol.kind
    if kind_a != kind_b and not allowed:
        raise ResultError(
            f"{a.path} and {b.path} are not comparable: protocol differs ({kind_a} vs {kind_b}); "
            f"pass {ACROSS_PROTOCOLS} to compare them anyway"
        )


def _difference(field: str, value_a: object, value_b: object) -> str:
    """What differs between two results, for :func:`check_comparable`'s message."""
    if field == "tokens":
        return f"they scored different numbers of tokens ({value_a:,} vs {value_b:,})"
    return f"{field} differs ({value_a} vs {value_b})"


def load_scored_dataset(result: Result, override: str | None, data_dir: str | None) -> Dataset:
    """The dataset ``result`` was scored on (``override``: a benchmark name or directory), with
    the vocabulary the result was scored with; a dataset that cannot be found or has another
    vocabulary is a :class:`ResultError` saying which option to pass."""
    name = override or result.record.dataset
    try:
        if name in BENCHMARKS:
            dataset = load_dataset(name, data_dir, download=False)
        elif Path(name).is_dir():
            dataset = load_dataset(name, data_dir)
        else:
            recorded = result.record.dataset_path
            directory = resolve_recorded_path(recorded, data_dir) if recorded else None
            if directory is None or not directory.is_dir():
                raise ResultError(f"{result.path}: dataset {name!r} not found; pass --dataset DIR")
            dataset = load_dataset(str(directory), data_dir)
        vocab_sha = dataset.vocab.sha256()
    except DatasetError as error:
        hint = "pass --dataset DIR" if data_dir else "pass --data-dir DIR or --dataset DIR"
        raise ResultError(f"{error} ({hint})") from None
    if vocab_sha != result.record.vocab_sha256:
        raise ResultError(
            f"{result.path}: the vocabulary of {dataset.directory} is not the one "
            "the result was scored with (vocab_sha256 differs)"
        )
    return dataset
