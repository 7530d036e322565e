"""Tuning files: the settings a tuner found for one checkpoint, beside it, where a plugin reads them.

``python -m baselines tune`` writes the neural cache's (``neural_cache.json``, :data:`NEURAL_CACHE`)
and ``tune-dynamic`` dynamic evaluation's (``dynamic_eval.json``, :data:`DYNAMIC_EVAL`). Both are a
:class:`TuningFile`, read here (:func:`read_tuning_file`, :func:`read_tuned`) and written here
(:func:`record_tuning`) only. On disk, version 1::

    {
      "format": "baselines-tuning",
      "version": 1,
      "kind": "neural_cache",
      "checkpoint": "<repo>/baselines/trained/ptb/zoneout_lstm.pt",
      "checkpoint_sha256": "bf2de9fb...",
      "dataset": "ptb",
      "best": {"100": {"theta": 0.15, "interpolation": 0.05, "perplexity": 72.75}},
      "searches": {"100": {"split": "valid", "tokens": 73760, "grid": [[...]], "seconds": 359.4}}
    }

``best`` holds each entry's tuned settings (an entry: a window of the cache; a base model and
method of dynamic evaluation, :meth:`baselines.dynamic_eval.BaseModel.key`) and the perplexity
they gave, ``searches`` the search that found them. The files that ``tune`` and ``tune-dynamic``
wrote before version 1, without ``format``, are read too, and written as version 1 when next
updated.
"""

from __future__ import annotations

import dataclasses
import json
import math
import shlex
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from baselines.models.dynamic import DynamicSettings
from harness.plugin import ModelUnavailable, PluginError
from harness.results import portable_path
from wikitext_toolkit_core.files import file_sha256, waiting_lock, write_atomically

#: The ``format`` of a tuning file, and the ``version`` of it that this toolkit reads and writes.
FORMAT = "baselines-tuning"
VERSION = 1
#: The fields of a file before version 1 that are not its run's: a cache file's other top-level
#: fields (and a first-form dynamic-evaluation file's) describe the run that tuned its entries.
_UNVERSIONED_FILE_FIELDS = ("checkpoint", "checkpoint_sha256", "dataset", "best", "searches", "grid")
#: The settings of a dynamic-evaluation entry, as :class:`DynamicSettings` takes them.
_DYNAMIC_SETTINGS = ("method", "lr", "decay", "segment")


@dataclasses.dataclass(frozen=True)
class TuningKind:
    """One kind of tuning file: what it is called, where it lies, what its entries hold.

    Attributes:
        name: the ``kind`` the file records.
        file_name: its name beside the checkpoint tuned on.
        title: how a message names it ("not a neural-cache tuning file").
        entry: how a message names one of its entries ("window 100").
        command: the ``python -m baselines`` command that writes it.
        check_settings: raises ValueError, the problem its message, unless a ``best`` entry holds
            settings its plugin can use.
    """

    name: str
    file_name: str
    title: str
    entry: str
    command: str
    check_settings: Callable[[Any], None]

    def path(self, checkpoint: Path) -> Path:
        """The tuning file of ``checkpoint``: beside it."""
        return checkpoint.parent / self.file_name


def _check_cache_settings(settings: Any) -> None:
    """Fail unless ``settings`` hold a finite ``theta`` of at least 0 and an ``interpolation`` in
    [0, 1)."""
    if not isinstance(settings, dict):
        raise ValueError("not a mapping of theta and interpolation")
    for name, high, must in (
        ("theta", math.inf, "a finite number of at least 0"),
        ("interpolation", 1.0, "at least 0 and below 1"),
    ):
        if name not in settings:
            raise ValueError(f"no {name}")
        value = settings[name]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < high:
            raise ValueError(f"{name} must be {must}, got {value!r}")


def _check_dynamic_settings(settings: Any) -> None:
    """Fail unless ``settings`` hold the ``method``, ``lr``, ``decay`` and ``segment`` of a
    :class:`DynamicSettings`."""
    if not isinstance(settings, dict):
        raise ValueError(f"not a mapping of {', '.join(_DYNAMIC_SETTINGS)}")
    for name in _DYNAMIC_SETTINGS:
        if name not in settings:
            raise ValueError(f"no {name}")
    try:
        DynamicSettings(*(settings[name] for name in _DYNAMIC_SETTINGS))
    except TypeError as error:  # a value of another type, such as a string
        raise ValueError(f"not a tuned setting ({error})") from None


#: ``neural_cache.json``: ``theta`` and ``interpolation`` by window, for ``baselines.neural_cache``.
NEURAL_CACHE = TuningKind(
    "neural_cache", "neural_cache.json", "neural-cache", "window", "tune", _check_cache_settings
)
#: ``dynamic_eval.json``: ``method``, ``lr``, ``decay`` and ``segment`` by base model and method,
#: for ``baselines.dynamic_eval``.
DYNAMIC_EVAL = TuningKind(
    "dynamic_eval",
    "dynamic_eval.json",
    "dynamic-evaluation",
    "entry",
    "tune-dynamic",
    _check_dynamic_settings,
)


@dataclasses.dataclass(frozen=True)
class TuningFile:
    """A tuning file's content.

    Attributes:
        kind: what was tuned.
        checkpoint: the checkpoint tuned on, as results record paths (:func:`portable_path`).
        checkpoint_sha256: that file's sha256; a file that records none (an early one) was tuned
            on no checkpoint there is (:meth:`tuned_on`).
        dataset: the dataset tuned on.
        best: each entry's tuned settings and the perplexity they gave, checked
            (:attr:`TuningKind.check_settings`).
        searches: each entry's search that found them (split, tokens, grid, seconds, ...).
    """

    kind: TuningKind
    checkpoint: str | None
    checkpoint_sha256: str | None
    dataset: str | None
    best: dict[str, dict[str, Any]]
    searches: dict[str, dict[str, Any]]

    def tuned_on(self, checkpoint: Path) -> bool:
        """Whether the file was tuned on ``checkpoint``: the sha256 it records is that file's."""
        return self.checkpoint_sha256 == file_sha256(checkpoint)

    def to_json(self) -> str:
        """The file's text, version 1."""
        record = {
            "format": FORMAT,
            "version": VERSION,
            "kind": self.kind.name,
            "checkpoint": self.checkpoint,
            "checkpoint_sha256": self.checkpoint_sha256,
            "dataset": self.dataset,
            "best": self.best,
            "searches": self.searches,
        }
        return json.dumps(record, indent=2) + "\n"


def read_tuning_file(path: Path, kind: TuningKind) -> TuningFile | None:
    """The tuning file ``path`` of ``kind`` (version 1 or an earlier form), its entries checked;
    None without a file.

    Raises:
        PluginError: one line naming the file: it is not a tuning file of ``kind`` (not JSON,
            another kind, another version, a field of another type), or an entry holds no usable
            settings (the message names the entry).
    """
    if not path.is_file():
        return None
    try:
        tuning = _from_record(json.loads(path.read_text(encoding="utf-8")), kind)
    except ValueError as error:  # not UTF-8, not JSON, or not of this form
        raise PluginError(f"{path}: not a {kind.title} tuning file ({error})") from None
    for key, settings in tuning.best.items():
        try:
            kind.check_settings(settings)
        except ValueError as error:
            raise PluginError(f"{path}: {kind.entry} {key}: {error}") from None
    return tuning


def read_tuned(checkpoint: Path, kind: TuningKind, retune: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The tuned settings by entry in the tuning file of ``kind`` beside ``checkpoint``; {}
    without a file.

    Raises:
        PluginError: see :func:`read_tuning_file`.
        ModelUnavailable: the file was tuned on another checkpoint (the message says to run
            ``retune``, the command that tunes this one).
    """
    path = kind.path(checkpoint)
    tuning = read_tuning_file(path, kind)
    if tuning is None:
        return {}
    if not tuning.tuned_on(checkpoint):
        raise ModelUnavailable(
            f"{path} was tuned on another checkpoint than {checkpoint} (its checkpoint_sha256 "
            f"differs): run `{shlex.join(retune)}` to tune this one"
        )
    return tuning.best


def record_tuning(
    path: Path,
    kind: TuningKind,
    *,
    checkpoint: Path,
    dataset: str,
    best: Mapping[str, dict[str, Any]],
    searches: Mapping[str, dict[str, Any]],
) -> None:
    """Write entries' tuned ``best`` settings and their ``searches`` into the tuning file ``path``
    of ``checkpoint``, keeping its other entries where it was tuned on that checkpoint (an entry
    tuned again takes its new values), as version 1.

    The file is read again and replaced holding an ``flock`` on ``.NAME.lock`` beside it, for
    which a second tuner writing it (in this process or another) waits, so that neither drops
    the other's entries (a read-modify-write).
    """
    waiting = f"waiting for another `baselines {kind.command}` to finish writing {path}"
    with waiting_lock(path.with_name(f".{path.name}.lock"), waiting):
        previous = read_tuning_file(path, kind)
        if previous is None or not previous.tuned_on(checkpoint):
            previous = TuningFile(kind, None, None, None, {}, {})
        tuning = TuningFile(
            kind,
            portable_path(checkpoint),
            file_sha256(checkpoint),
            dataset,
            best={**previous.best, **best},
            searches={**previous.searches, **searches},
        )
        write_atomically(path, tuning.to_json())


def _from_record(record: Any, kind: TuningKind) -> TuningFile:
    """The :class:`TuningFile` of a file's JSON ``record``, version 1 or earlier (its entries not
    yet checked).

    Raises:
        ValueError: the record is not a tuning file of ``kind`` (the message says why).
    """
    if not isinstance(record, dict):
        raise ValueError("not a JSON object")
    if "format" in record:
        _check_version(record, kind)
        searches = _mapping(record, "searches")
    else:
        searches = _unversioned_searches(record)
    return TuningFile(
        kind,
        _text(record, "checkpoint"),
        _text(record, "checkpoint_sha256"),
        _text(record, "dataset"),
        _mapping(record, "best", required=True),
        searches,
    )


def _check_version(record: dict[str, Any], kind: TuningKind) -> None:
    """Fail unless ``record`` says it is a tuning file of ``kind``, version 1."""
    if record["format"] != FORMAT:
        raise ValueError(f"its format is {record['format']!r}, not {FORMAT!r}")
    if record.get("version") != VERSION:
        raise ValueError(f"version {record.get('version')!r}: this toolkit reads version {VERSION}")
    if record.get("kind") != kind.name:
        raise ValueError(f"its kind is {record.get('kind')!r}")


def _unversioned_searches(record: dict[str, Any]) -> dict[str, Any]:
    """Each entry's search in a file as ``tune`` and ``tune-dynamic`` wrote them before version 1:
    its entry under ``searches`` (dynamic evaluation), or, for the entries of the one run whose
    fields lie at the top level, those fields with the entry's grid (``grid`` of the neural cache
    by window; a list under ``searches`` in dynamic evaluation's first form)."""
    run = {name: value for name, value in record.items() if name not in _UNVERSIONED_FILE_FIELDS}
    grids = {**_mapping(record, "grid"), **_mapping(record, "searches")}
    return {key: found if isinstance(found, dict) else {**run, "grid": found} for key, found in grids.items()}


def _mapping(record: dict[str, Any], name: str, *, required: bool = False) -> dict[str, Any]:
    """The mapping field ``name`` of ``record`` ({} where it has none and none is ``required``)."""
    if required and name not in record:
        raise ValueError(f"no {name}")
    value = record.get(name, {})
    if not isinstance(value, dict):
        raise ValueError(f"{name} is not a mapping")
    return value


def _text(record: dict[str, Any], name: str) -> str | None:
    """The string field ``name`` of ``record`` (None where it has none)."""
    value = record.get(name)
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{name} is not a string")
    return value
