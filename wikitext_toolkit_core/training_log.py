"""The training-log schema: the records ``baselines train`` appends to a run's ``log.jsonl``, one
JSON object a line, and ``leaderboard`` reads, as typed objects: :class:`EpochEndRecord` and
:class:`MidEpochRecord` (:data:`TrainingLogRecord`), with their version (:data:`SCHEMA_VERSION`,
:data:`SUPPORTED_SCHEMA_VERSIONS`), their JSON form (:meth:`ValidationRecord.to_json`,
:func:`record_from_json`, which validates) and the reading of a whole log
(:func:`read_training_log`), whose errors name the file and the line.

A record is one validation of the run's weights: at the end of an epoch (``partial`` false), or
within one (``partial`` true: every ``--validate-every`` steps, and at a stop). Version 1 is the
format the trainer has always written; its first records carried no ``schema_version``, and a
record without one reads as version 1. Each record carries its own version, so that a log that
runs of different code appended to (a run resumed by newer code) reads line by line.

Standard library only: the leaderboard reads logs without torch.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from pathlib import Path
from typing import Any, ClassVar, TypeAlias

from wikitext_toolkit_core import bounded_json

#: The version the trainer writes into each record.
SCHEMA_VERSION = 1
#: Versions a reader understands; 1 is also that of a record without ``schema_version``.
SUPPORTED_SCHEMA_VERSIONS = (1,)

#: The order of a record's keys in its line (the trainer's since version 1), the version first.
KEY_ORDER = (
    "schema_version",
    "epoch",
    "partial",
    "step",
    "steps_per_epoch",
    "train_ppl",
    "valid_ppl",
    "learning_rate",
    "tokens_per_second",
    "device",
    "threads",
    "amp",
    "seconds",
    "total_seconds",
    "best",
    "sampled_steps",
)


class InvalidTrainingLogRecord(ValueError):
    """A line that is not a training-log record; the message is one line, without the file's name."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class ValidationRecord:
    """What every record holds (the base of :class:`EpochEndRecord` and :class:`MidEpochRecord`):
    the validation perplexity of the weights after some steps of epoch ``epoch`` (counted from 1),
    and the figures of the epoch's training up to them.

    Fields with a default are those a record may lack: ``device``, ``threads`` (torch's CPU
    threads) and ``amp`` (bfloat16 autocast) of the invocation that wrote it, absent from the
    oldest logs; ``sampled_steps``, only in a run with a sampled-softmax phase, the steps of the
    epoch so far trained with it (their ``train_ppl`` is the sampled estimate).
    """

    #: Whether the record is one of a validation within an epoch (the line's ``partial``).
    partial: ClassVar[bool]

    schema_version: int = SCHEMA_VERSION
    epoch: int
    train_ppl: float
    valid_ppl: float
    learning_rate: float
    tokens_per_second: float
    device: str | None = None
    threads: int | None = None
    amp: bool | None = None
    #: Training seconds of the epoch so far, validation excluded.
    seconds: float
    sampled_steps: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The record's JSON object, its keys in :data:`KEY_ORDER`, those it lacks left out."""
        values = {**dataclasses.asdict(self), "partial": self.partial}
        return {key: values[key] for key in KEY_ORDER if values.get(key) is not None}

    def _check_values(self) -> None:
        """The figures must be in range: the epoch counted from 1, a finite validation perplexity."""
        if self.epoch < 1:
            raise InvalidTrainingLogRecord(f"epoch must be at least 1, got {self.epoch}")
        if not math.isfinite(self.valid_ppl):  # JSON's Infinity or NaN: a damaged log
            raise InvalidTrainingLogRecord(f"valid_ppl {self.valid_ppl} is not a finite number")


@dataclasses.dataclass(frozen=True, kw_only=True)
class EpochEndRecord(ValidationRecord):
    """The validation at the end of epoch ``epoch``: ``total_seconds``, the run's training
    seconds up to it (validation excluded); ``best``, whether it is the best epoch's end so far
    (the learning-rate schedule halves the rate after one that is not)."""

    partial: ClassVar[bool] = False

    total_seconds: float
    best: bool

    @property
    def epochs(self) -> float:
        """The epochs trained up to the record."""
        return self.epoch


@dataclasses.dataclass(frozen=True, kw_only=True)
class MidEpochRecord(ValidationRecord):
    """A validation within epoch ``epoch``, after its step ``step`` of ``steps_per_epoch``."""

    partial: ClassVar[bool] = True

    step: int
    steps_per_epoch: int

    @property
    def epochs(self) -> float:
        """The epochs trained up to the record, a fraction."""
        return self.epoch - 1 + self.step / self.steps_per_epoch

    def _check_values(self) -> None:
        super()._check_values()
        if not 1 <= self.step <= self.steps_per_epoch:
            raise InvalidTrainingLogRecord(
                f"step {self.step} is not within the epoch's steps_per_epoch {self.steps_per_epoch}"
            )


#: A line of a training log.
TrainingLogRecord: TypeAlias = EpochEndRecord | MidEpochRecord

#: The JSON types a field of each type takes (see :func:`_of_json_type`), and the type's name.
_JSON_TYPES: dict[type, tuple[type, ...]] = {int: (int,), float: (int, float), bool: (bool,), str: (str,)}
_TYPE_NAMES = {int: "an integer", float: "a number", bool: "true or false", str: "a string"}


def record_from_json(data: Any) -> TrainingLogRecord:
    """The record of a parsed log line, validated: :class:`InvalidTrainingLogRecord` (one line)
    when it is no JSON object, its version is not supported, a key its kind needs is missing, a
    value is of the wrong type or out of range."""
    if not isinstance(data, dict):
        raise InvalidTrainingLogRecord(f"a JSON {type(data).__name__}, not an object")
    version = data.get("schema_version", 1)
    if isinstance(version, bool) or version not in SUPPORTED_SCHEMA_VERSIONS:
        raise InvalidTrainingLogRecord(
            f"schema_version {version!r} is not supported "
            f"(this reader reads {', '.join(map(str, SUPPORTED_SCHEMA_VERSIONS))})"
        )
    partial = data.get("partial")
    if not isinstance(partial, bool):
        raise InvalidTrainingLogRecord(f"partial missing or not true or false (got {partial!r})")
    kind = MidEpochRecord if partial else EpochEndRecord
    fields = dataclasses.fields(kind)
    missing = [field.name for field in fields if field.name not in data and _required(field)]
    if missing:
        raise InvalidTrainingLogRecord(f"missing key{'s' if len(missing) > 1 else ''} {', '.join(missing)}")
    hints = typing.get_type_hints(kind)
    values = {
        field.name: _checked(field.name, data[field.name], hints[field.name])
        for field in fields
        if field.name in data
    }
    record = kind(**{**values, "schema_version": version})
    record._check_values()
    return record


def _required(field: dataclasses.Field[Any]) -> bool:
    """Whether every record of its kind has the field (it has no default)."""
    return field.default is dataclasses.MISSING and field.name != "schema_version"


def _checked(name: str, value: Any, hint: Any) -> Any:
    """``value``, the value of field ``name`` annotated ``hint`` (``X`` or ``X | None``), checked
    to be of its JSON type; a number as a float."""
    json_type = next(part for part in typing.get_args(hint) or (hint,) if part is not type(None))
    if not _of_json_type(value, json_type):
        raise InvalidTrainingLogRecord(f"{name} must be {_TYPE_NAMES[json_type]}, got {value!r}")
    try:
        return float(value) if json_type is float else value
    except OverflowError:
        raise InvalidTrainingLogRecord(f"{name} must be a number a float holds") from None


def _of_json_type(value: Any, json_type: type) -> bool:
    """Whether ``value`` is of ``json_type`` as a log holds it (a number field takes an integer
    too; a boolean is no number)."""
    return isinstance(value, bool) == (json_type is bool) and isinstance(value, _JSON_TYPES[json_type])


def record_from_line(line: str) -> TrainingLogRecord:
    """The record of one line of a log (:func:`record_from_json`); JSON that does not parse is an
    :class:`InvalidTrainingLogRecord` too."""
    try:
        data = bounded_json.loads(line)
    except ValueError as error:
        raise InvalidTrainingLogRecord(str(error)) from None
    return record_from_json(data)


def read_training_log(path: str | Path) -> list[TrainingLogRecord]:
    """The records of the training log ``path``, in order (blank lines skipped).

    Raises:
        ValueError: a path that is no regular file (a FIFO would block the read forever,
            ``/dev/zero`` never ends), or a line that is not a record: one line naming the file
            and the line.
        OSError: the file cannot be read.
    """
    path = Path(path)
    if path.exists() and not path.is_file():
        raise ValueError(f"{path}: not a regular file; a training log is a file")
    records = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append(record_from_line(line))
        except InvalidTrainingLogRecord as error:
            raise ValueError(f"{path}:{number}: not a training-log record ({error})") from None
    return records
