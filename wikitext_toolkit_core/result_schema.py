"""The result-file schema: what ``harness eval --output/--output-dir`` writes and ``leaderboard``
reads, as one typed object, :class:`ResultRecord`, with its version (:data:`SCHEMA_VERSION`,
:data:`SUPPORTED_SCHEMA_VERSIONS`), its JSON form (:meth:`ResultRecord.to_json`,
:meth:`ResultRecord.from_json`, which validates) and the rule that says which audits a result
needs (:func:`unaudited_reasons`) and with which settings it ranks (:func:`audit_setting_reasons`).

The harness builds a record (``harness.results.result_record``) and writes its JSON; the
leaderboard reads every file through :meth:`ResultRecord.from_json`, whose errors
(:class:`InvalidResultRecord`) are one line, without the file's name, which the reader adds.
Version-1 files (written before the causality audit) still load: the keys they lack read as
their field's default and they count as unaudited.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
import sys
import types
import typing
from collections.abc import Mapping
from typing import Any

from wikitext_toolkit_core.audit_defaults import (
    default_audit_positions,
    default_substitutions,
    default_tolerance,
)

#: 2: ``causality_audit``, ``audited``, ``unaudited_reasons``, ``audit.passed`` and
#: ``train_sha256`` (the train file's, which fixes the vocabulary) added;
#: ``model`` is ``module`` or, for a factory other than ``load_model``, ``module:attribute``.
#: 3: ``causality_audit`` is the second pass that a plugin cannot tell from the evaluation
#: (``harness.causality``: ``points`` substituted tokens, ``seed``, ``audit_pass``, ...); in
#: version 2 it was short stretches scored after a reset, which a plugin could tell apart.
#: 4: ``protocol.name`` (``stream``, or ``documents``: each article from a fresh state) and, for
#: ``documents``, ``document_metrics`` (lm-evaluation-harness's figures); an older reader, which
#: would rank the two protocols together, refuses it.
#: 5: ``plugin_process`` (:data:`PLUGIN_PROCESSES`: whether the plugin scored each pass in a fresh
#: worker process); ``causality_audit`` holds ``substitutes``, ``evidence`` and ``evidence_bound``
#: in place of ``random_mass`` and ``random_mass_bound``; ``audited`` and ``unaudited_reasons``
#: also count an audit with a setting weaker than its default, or one scored in the harness's own
#: process, as unaudited (:func:`audit_setting_reasons`, which the leaderboard applies to every
#: version).
SCHEMA_VERSION = 5
#: Versions a reader understands; version 1 predates the causality audit: such results are read
#: but count as unaudited.
SUPPORTED_SCHEMA_VERSIONS = (1, 2, 3, 4, 5)
#: ``protocol.name``: ``stream`` (the split as ``batch_size`` contiguous streams, the papers'
#: protocol) or ``documents`` (each article from a fresh state, one stream each).
PROTOCOL_NAMES = ("stream", "documents")

#: Keys every result file carries, with the JSON types they must have (None allowed where listed).
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
#: Keys a version-2 result adds, with their JSON types.
KEYS_ADDED_IN_2: dict[str, tuple[type, ...]] = {
    "audit": (dict,),
    "causality_audit": (dict,),
    "audited": (bool,),
    "unaudited_reasons": (list,),
    "train_sha256": (str,),
}

#: ``scoring`` of a result: ``word`` (a distribution over the word vocabulary, which the
#: probability audit checks) or ``subword`` (a subword model's log-probabilities attributed to the
#: word-level tokens, for which the probability audit does not apply; the causality audit does).
SCORINGS = ("word", "subword")
#: The key of ``plugin_metadata`` under which a model that learns from the text it has already
#: scored (a cache of its hidden states, weights updated on it) says how, in a few words. Such a
#: model is causal and may pass both audits, but its figures compare with other adaptive models,
#: not with static ones: the leaderboard notes it beside the figure.
TEST_TIME_ADAPTATION = "test_time_adaptation"
#: ``plugin_process`` (version 5): ``worker`` (each pass scored in a fresh worker process) or
#: ``harness`` (in the harness's own process: ``harness eval --in-process``, a model object given
#: to the API, or the causality audit off).
PLUGIN_PROCESSES = ("worker", "harness")
#: The causality audit's default number of audited positions in a version-2 record (short
#: stretches scored after a reset); from version 3 on it substitutes
#: :func:`~wikitext_toolkit_core.audit_defaults.default_substitutions` positions.
VERSION_2_CAUSALITY_POSITIONS = 4
#: The reason of a version-5 result whose causality audit ran in the harness's own process.
IN_PROCESS_REASON = (
    "scored in the harness's own process (--in-process), where a plugin can read the audit: not ranked"
)
#: Largest positive log-probability a result may hold for a token (rounding in a model's
#: log-softmax or mixture): the harness refuses more, and the leaderboard reads what it wrote.
MAX_LOG_PROB = 1e-6


def perplexity_of(nats_per_unit: float) -> float | None:
    """``e^nats_per_unit``; None where that is too large for a float."""
    return math.exp(nats_per_unit) if nats_per_unit <= math.log(sys.float_info.max) else None


class InvalidResultRecord(ValueError):
    """JSON that is not a usable result record; the message is one line, without the file's name."""


class NotAResultRecord(InvalidResultRecord):
    """A JSON object with neither ``schema_version`` nor ``perplexity``: some other file (gate
    analysis metadata, a config) rather than a broken result."""


@dataclasses.dataclass(frozen=True)
class AuditedRun:
    """What the audit rules (:func:`unaudited_reasons`, :func:`audit_setting_reasons`) read of a
    result: its ``schema_version``, ``scoring``, ``tokens``, ``device``, ``audit`` and
    ``causality_audit`` records and ``plugin_process``, as a record holds them."""

    schema_version: int
    scoring: str
    tokens: int
    device: str | None
    audit: Any
    causality_audit: Any
    plugin_process: str | None


def unaudited_reasons(run: AuditedRun) -> list[str]:
    """Why a result's figure is not fully audited, one line each (empty when it is): the rule of
    version ``schema_version``, which the harness applies when it writes a record and the
    leaderboard checks when it reads one.

    The probability audit (``audit``) must have checked distributions, except for ``subword``
    scoring (see :data:`SCORINGS`), to which it does not apply; the causality audit
    (``causality_audit``) must have passed (a version-1 record predates it). From version 5 on,
    the audits that passed must also have their default settings and the plugin must have run in
    a worker process (:func:`audit_setting_reasons`).
    """
    reasons = _failed_audit_reasons(run.schema_version, run.scoring, run.audit, run.causality_audit)
    if run.schema_version >= 5:
        reasons += audit_setting_reasons(run)
    return reasons


def _failed_audit_reasons(schema_version: int, scoring: str, audit: Any, causality_audit: Any) -> list[str]:
    """The audits that apply to a result and are off or did not pass, one line each."""
    reasons = []
    if scoring == "subword":
        pass  # no distribution over the word vocabulary: the probability audit does not apply
    elif not isinstance(audit, dict):
        reasons.append("no probability audit recorded")
    elif not audit.get("requested"):
        reasons.append("probability audit off (--audit 0)")
    elif not _distributions_checked(audit):
        reasons.append("the plugin gives no full distributions: normalization not audited")
    if schema_version < 2:
        reasons.append("written before the causality audit (schema 1): rerun harness eval")
    elif not isinstance(causality_audit, dict) or not causality_audit.get("points"):
        reasons.append("causality audit off (--causality-audit 0)")
    elif causality_audit.get("passed") is not True:
        reasons.append("causality audit not passed")
    return reasons


def audit_setting_reasons(run: AuditedRun) -> list[str]:
    """Why a result whose audits passed does not rank, one line per setting weaker than its
    default, each ending ``not ranked``: a causality audit of fewer substitutions than
    :func:`~wikitext_toolkit_core.audit_defaults.default_substitutions` of ``tokens`` (version 2:
    fewer positions than :data:`VERSION_2_CAUSALITY_POSITIONS`) or with a tolerance looser than
    :func:`~wikitext_toolkit_core.audit_defaults.default_tolerance` of ``device``; a probability
    audit of fewer positions than
    :func:`~wikitext_toolkit_core.audit_defaults.default_audit_positions` (not for ``subword``
    scoring); and, from version 5 on, a causality audit run in the harness's own process
    (``plugin_process`` other than ``worker``). An audit that is off or failed is not looked at:
    it has its own reason (:func:`unaudited_reasons`)."""
    reasons = []
    causality_passed = run.schema_version >= 2 and _causality_passed(run.causality_audit)
    if causality_passed:
        reasons += _causality_setting_reasons(run.schema_version, run.tokens, run.device, run.causality_audit)
    if causality_passed and run.schema_version >= 5 and run.plugin_process != "worker":
        reasons.append(IN_PROCESS_REASON)
    if run.scoring != "subword" and _probability_audit_passed(run.audit):
        reasons += _probability_setting_reasons(run.tokens, run.audit)
    return reasons


def _causality_setting_reasons(
    schema_version: int, tokens: int, device: str | None, causality_audit: dict[str, Any]
) -> list[str]:
    """The settings of a causality audit that passed weaker than its defaults, one line each."""
    reasons = []
    points = causality_audit["points"]
    if schema_version == 2:
        default, unit = min(VERSION_2_CAUSALITY_POSITIONS, tokens), "position"
    else:
        default, unit = default_substitutions(tokens), "substitution"
    if isinstance(points, int) and points < default:
        reasons.append(
            f"causality audit of {_count(points, unit)}, fewer than the default {default:,} "
            f"(--causality-audit {points}): not ranked"
        )
    tolerance, default_limit = causality_audit.get("tolerance"), default_tolerance(device)
    if isinstance(tolerance, (int, float)) and tolerance > default_limit:
        reasons.append(
            f"causality tolerance {tolerance:g}, looser than the default {default_limit:g} "
            "(--causality-tolerance): not ranked"
        )
    return reasons


def _probability_setting_reasons(tokens: int, audit: dict[str, Any]) -> list[str]:
    """The probability audit's positions, when fewer than its default: one line, else none."""
    requested, default = audit["requested"], default_audit_positions(tokens)
    if not isinstance(requested, int) or requested >= default:
        return []
    return [
        f"probability audit of {_count(requested, 'position')}, fewer than the default {default:,} "
        f"(--audit {requested}): not ranked"
    ]


def _probability_audit_passed(audit: Any) -> bool:
    """Whether the probability audit ``audit`` was on and checked distributions."""
    return isinstance(audit, dict) and bool(audit.get("requested")) and _distributions_checked(audit)


def _distributions_checked(audit: dict[str, Any]) -> bool:
    """Whether the probability audit ``audit`` checked distributions (version 1 records no
    ``passed``: whether it ``checked`` any)."""
    return audit.get("passed", audit.get("checked", 0) > 0) is True


def _causality_passed(causality_audit: Any) -> bool:
    """Whether the causality audit ``causality_audit`` was on and passed."""
    return (
        isinstance(causality_audit, dict)
        and bool(causality_audit.get("points"))
        and causality_audit.get("passed") is True
    )


def _count(number: int, unit: str) -> str:
    """``1 position``, ``1,000 substitutions``."""
    return f"{number:,} {unit}{'' if number == 1 else 's'}"


@dataclasses.dataclass(frozen=True)
class Protocol:
    """How the split was scored: as ``batch_size`` parallel streams, chunks of ``bptt`` tokens;
    ``name`` says what the streams are (:data:`PROTOCOL_NAMES`; None in a file before version 4,
    which scored a stream: :attr:`kind`). With ``documents``, ``batch_size`` is the number of
    documents."""

    batch_size: int
    bptt: int
    name: str | None = None

    @property
    def kind(self) -> str:
        """The protocol's name, ``stream`` for a file that records none."""
        return self.name or "stream"

    @property
    def identity(self) -> str:
        """What two results must share to have been scored alike, however their files wrote it
        (a file with no name scored a stream): ``KIND/BATCH_SIZE/BPTT``."""
        return f"{self.kind}/{self.batch_size}/{self.bptt}"

    def to_json(self) -> dict[str, Any]:
        """The ``protocol`` object of a result file (with its ``name`` when it has one)."""
        sizes: dict[str, Any] = {"batch_size": self.batch_size, "bptt": self.bptt}
        return sizes if self.name is None else {**sizes, "name": self.name}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Protocol:
        """The protocol of a result file's ``protocol`` object; :class:`InvalidResultRecord`
        when a size is missing, not an integer (a boolean is none) or not positive (no
        evaluation scores zero streams or windows of zero tokens), or the name is unknown."""
        for size in ("batch_size", "bptt"):
            value = data.get(size)
            if not isinstance(value, int) or isinstance(value, bool):
                raise InvalidResultRecord(f"protocol.{size} missing or not an integer")
            if value < 1:
                raise InvalidResultRecord(f"protocol.{size} must be a positive integer, got {value}")
        name = data.get("name")
        if name is not None and name not in PROTOCOL_NAMES:
            raise InvalidResultRecord(f"protocol.name {name!r} is not one of {', '.join(PROTOCOL_NAMES)}")
        return cls(batch_size=data["batch_size"], bptt=data["bptt"], name=name)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ResultRecord:
    """One evaluation of one model on one dataset split: a result file, field for field, in the
    order the file lists them (see ``docs/harness.md``, "Results JSON").

    Fields with a default are those an older file may lack (version 1, or written before the
    field existed); they read as that default. ``audit`` and ``causality_audit`` are the audit
    records as ``harness.evaluate`` writes them (``Audit.to_json``, ``CausalityAudit.to_json``).
    """

    schema_version: int
    model: str
    model_args: dict[str, Any]
    checkpoint: str | None
    dataset: str
    dataset_path: str | None = None
    split: str
    dataset_sha256: str
    train_sha256: str | None = None
    dataset_verified: bool | None = None
    vocab_size: int
    vocab_sha256: str
    oov_tokens: int | None = None
    tokens: int
    nll: float
    perplexity: float
    bits_per_token: float | None = None
    protocol: Protocol
    document_metrics: dict[str, Any] | None = None
    audit: dict[str, Any] | None = None
    causality_audit: dict[str, Any] | None = None
    scoring: str = "word"
    audited: bool | None = None
    unaudited_reasons: list[str] | None = None
    num_parameters: int | None = None
    runtime_seconds: float | None = None
    tokens_per_second: float | None = None
    device: str | None = None
    plugin_process: str | None = None
    torch_version: str | None = None
    package_version: str | None = None
    git_commit: str | None = None
    token_log_probs_file: str | None = None
    plugin_metadata: dict[str, Any] | None = None
    plugin_code: dict[str, Any] | None = None
    created: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The JSON object of the result file, its keys in field order."""
        return {**dataclasses.asdict(self), "protocol": self.protocol.to_json()}

    @classmethod
    def from_json(cls, data: Any) -> ResultRecord:
        """The record of a parsed result file, validated: :class:`NotAResultRecord` when ``data``
        is no result at all, :class:`InvalidResultRecord` (one line) when a key is missing or of
        the wrong type (:data:`REQUIRED_KEYS`, :data:`KEYS_ADDED_IN_2`, :data:`OPTIONAL_KEYS`), the
        version or the ``scoring`` is not supported, the protocol's batch size or BPTT is not a
        positive integer, ``created`` is no date, or figures contradict each other or the audit
        records."""
        _check_required_keys(data)
        _check_required_types(data)
        if data["schema_version"] >= 2:
            _check_types_added_in_2(data)
        _check_optional_types(data)
        protocol = Protocol.from_json(data["protocol"])
        recorded = {field.name: data[field.name] for field in dataclasses.fields(cls) if field.name in data}
        record = cls(**{**recorded, "protocol": protocol})
        record._check_audited()
        record._check_figures()
        record._check_document_metrics()
        record._check_created()
        return record

    def _audited_run(self) -> AuditedRun:
        """What :func:`unaudited_reasons` and :func:`audit_setting_reasons` read of this record."""
        return AuditedRun(
            schema_version=self.schema_version,
            scoring=self.scoring,
            tokens=self.tokens,
            device=self.device,
            audit=self.audit,
            causality_audit=self.causality_audit,
            plugin_process=self.plugin_process,
        )

    def rule_unaudited_reasons(self) -> list[str]:
        """:func:`unaudited_reasons` applied to this record (the rule of its own version)."""
        return unaudited_reasons(self._audited_run())

    @property
    def audit_gaps(self) -> list[str]:
        """Why this result's figure is not covered by the audits that apply, with their default
        settings; empty when it is, as the leaderboard ranks: the recorded ``unaudited_reasons``
        (version 2 on, checked against the audit records when read; else the rule applied), with
        the :func:`audit_setting_reasons` of every version."""
        recorded = self.unaudited_reasons if self.schema_version >= 2 else None
        reasons = self.rule_unaudited_reasons() if recorded is None else recorded
        return list(dict.fromkeys([*reasons, *audit_setting_reasons(self._audited_run())]))

    def _check_audited(self) -> None:
        """A record's ``audited`` (version 2 on) must agree with its reasons and with the rule of
        its own version (:func:`unaudited_reasons`: the audits' settings count from version 5)."""
        if self.schema_version < 2:
            return
        if self.audited != (not self.rule_unaudited_reasons()) or self.audited == bool(
            self.unaudited_reasons
        ):
            raise InvalidResultRecord(
                f"audited is {str(self.audited).lower()} but the audit "
                "records say otherwise (file edited by hand?)"
            )

    def _check_figures(self) -> None:
        """``tokens``, ``nll``, ``perplexity``, ``bits_per_token`` and ``num_parameters`` must be
        in range and agree with each other."""
        if self.tokens <= 0:
            raise InvalidResultRecord(f"tokens must be positive, got {self.tokens}")
        nll, ppl = float(self.nll), float(self.perplexity)
        if not (math.isfinite(nll) and math.isfinite(ppl)) or nll < 0 or ppl < 1:
            raise InvalidResultRecord(f"nll {nll!r} / perplexity {ppl!r} out of range")
        if not math.isclose(math.log(ppl), nll, rel_tol=1e-6, abs_tol=1e-9):
            raise InvalidResultRecord(f"perplexity {ppl} is not exp(nll {nll}) (file edited by hand?)")
        bits = self.bits_per_token
        if bits is not None and not math.isclose(bits * math.log(2), nll, rel_tol=1e-6, abs_tol=1e-9):
            raise InvalidResultRecord(f"bits_per_token {bits!r} is not nll / ln 2 (file edited by hand?)")
        parameters = self.num_parameters
        if parameters is None:
            return
        if isinstance(parameters, bool) or not isinstance(parameters, int) or parameters < 0:
            raise InvalidResultRecord("num_parameters must be a non-negative integer or null")
        if parameters > MAX_PARAMETERS:
            raise InvalidResultRecord(
                f"num_parameters has {len(str(parameters))} digits: no model's count (at most 10**15)"
            )

    def _check_document_metrics(self) -> None:
        """``document_metrics`` belongs to the ``documents`` protocol, and its figures must agree
        with the log-likelihood (``tokens * nll`` nats) and its counts (a perplexity too large
        for a float is null)."""
        metrics = self.document_metrics
        if metrics is None:
            return
        if self.protocol.kind != "documents":
            raise InvalidResultRecord(f"document_metrics in a result of the {self.protocol.kind} protocol")
        counts = [metrics.get("words"), metrics.get("bytes")]
        if not all(isinstance(count, int) and not isinstance(count, bool) and count > 0 for count in counts):
            raise InvalidResultRecord("document_metrics.words and .bytes must be positive integers")
        words, size = (int(count) for count in counts)  # type: ignore[arg-type]  # checked above
        nats = self.tokens * float(self.nll)
        expected = {
            "word_perplexity": perplexity_of(nats / words),
            "byte_perplexity": perplexity_of(nats / size),
            "bits_per_byte": nats / size / math.log(2),
        }
        for key, value in expected.items():
            recorded = metrics.get(key)
            agrees = (
                recorded is None
                if value is None
                else isinstance(recorded, (int, float)) and math.isclose(recorded, value, rel_tol=1e-6)
            )
            if not agrees:
                raise InvalidResultRecord(
                    f"document_metrics.{key} {recorded!r} disagrees with the log-likelihood (edited by hand?)"
                )

    def _check_created(self) -> None:
        """``created``, when recorded, must be a real date and time in ISO 8601, as the harness
        writes it (``2026-11-20T10:00:00+00:00``): the tables show its date."""
        if self.created is None:
            return
        try:
            datetime.datetime.fromisoformat(self.created)
        except ValueError:
            raise InvalidResultRecord(
                f"created {self.created!r} is not a date and time (ISO 8601, as harness eval writes it)"
            ) from None


#: The largest parameter count a result may record: 10**15, a thousand times today's largest models.
MAX_PARAMETERS = 10**15


def _check_required_keys(data: Any) -> None:
    """``data`` must be a JSON object with every key of :data:`REQUIRED_KEYS` and a supported
    ``schema_version``."""
    if not isinstance(data, dict):
        raise InvalidResultRecord(f"not a harness result (a JSON {type(data).__name__}, not an object)")
    if "schema_version" not in data and "perplexity" not in data:
        raise NotAResultRecord("not a harness result file (no schema_version or perplexity)")
    missing = [key for key in REQUIRED_KEYS if key not in data]
    if missing:
        raise InvalidResultRecord(f"missing key{'s' if len(missing) > 1 else ''} {', '.join(missing)}")
    version = data["schema_version"]
    if version not in SUPPORTED_SCHEMA_VERSIONS:
        raise InvalidResultRecord(
            f"schema_version {version!r} is not supported "
            f"(this leaderboard reads {', '.join(map(str, SUPPORTED_SCHEMA_VERSIONS))})"
        )


def _check_type(key: str, value: Any, json_types: tuple[type, ...]) -> None:
    """``value``, the value of ``key``, must be of one of ``json_types`` (a boolean is no number;
    a number must be one a float holds)."""
    if not isinstance(value, json_types) or (isinstance(value, bool) and bool not in json_types):
        wanted = " or ".join("null" if t is type(None) else t.__name__ for t in json_types)
        raise InvalidResultRecord(f"{key} must be {wanted}, got {value!r}")
    if float in json_types and isinstance(value, int) and abs(value) > sys.float_info.max:
        digits = len(str(abs(value)))
        raise InvalidResultRecord(f"{key} must be a number a float holds, got an integer of {digits} digits")


def _check_required_types(data: dict[str, Any]) -> None:
    """The keys of :data:`REQUIRED_KEYS` must have their JSON types."""
    for key, json_types in REQUIRED_KEYS.items():
        _check_type(key, data[key], json_types)


def _json_types(hint: Any) -> tuple[type, ...]:
    """The JSON types of a :class:`ResultRecord` field annotated ``hint``: ``float`` takes an
    integer too, ``X | None`` takes null, ``dict[...]`` and ``list[...]`` are their container."""
    if isinstance(hint, types.UnionType):
        return tuple(json_type for part in typing.get_args(hint) for json_type in _json_types(part))
    origin = typing.get_origin(hint) or hint
    return (int, float) if origin is float else (origin,)


#: The keys a result file may lack (see :class:`ResultRecord`), with the JSON types they must have
#: when present, from the fields' annotations.
OPTIONAL_KEYS: dict[str, tuple[type, ...]] = {
    name: _json_types(hint)
    for name, hint in typing.get_type_hints(ResultRecord).items()
    if name not in REQUIRED_KEYS
}


def _check_optional_types(data: dict[str, Any]) -> None:
    """The keys of :data:`OPTIONAL_KEYS` that ``data`` has must have their JSON types;
    ``unaudited_reasons`` holds strings, ``scoring`` is one of :data:`SCORINGS`,
    ``plugin_process`` one of :data:`PLUGIN_PROCESSES` and ``plugin_metadata``'s
    :data:`TEST_TIME_ADAPTATION`, if any, is a non-empty string."""
    for key, json_types in OPTIONAL_KEYS.items():
        if key in data:
            _check_type(key, data[key], json_types)
    reasons = data.get("unaudited_reasons") or []
    if not all(isinstance(reason, str) for reason in reasons):
        raise InvalidResultRecord(f"unaudited_reasons must be a list of strings, got {reasons!r}")
    if data.get("scoring", "word") not in SCORINGS:
        raise InvalidResultRecord(f"scoring {data['scoring']!r} is not one of {', '.join(SCORINGS)}")
    if data.get("plugin_process") not in (None, *PLUGIN_PROCESSES):
        raise InvalidResultRecord(
            f"plugin_process {data['plugin_process']!r} is not one of {', '.join(PLUGIN_PROCESSES)}"
        )
    problem = adaptation_problem(data.get("plugin_metadata"))
    if problem:
        raise InvalidResultRecord(f"plugin_metadata: {problem}")


def adaptation_of(plugin_metadata: dict[str, Any] | None) -> str | None:
    """How the model adapted to the text it had scored (:data:`TEST_TIME_ADAPTATION`); None for a
    static model."""
    return (plugin_metadata or {}).get(TEST_TIME_ADAPTATION)


def adaptation_problem(plugin_metadata: Any) -> str | None:
    """What is wrong with ``plugin_metadata``'s :data:`TEST_TIME_ADAPTATION` (it must be a
    non-empty string when present); None when nothing is."""
    if not isinstance(plugin_metadata, dict) or TEST_TIME_ADAPTATION not in plugin_metadata:
        return None
    value = plugin_metadata[TEST_TIME_ADAPTATION]
    if isinstance(value, str) and value.strip():
        return None
    return f"{TEST_TIME_ADAPTATION} must be a non-empty string saying how the model adapts, got {value!r}"


def _check_types_added_in_2(data: dict[str, Any]) -> None:
    """The keys of :data:`KEYS_ADDED_IN_2` must be present with their JSON types."""
    for key, json_types in KEYS_ADDED_IN_2.items():
        if not isinstance(data.get(key), json_types):
            raise InvalidResultRecord(f"{key} missing or not a {json_types[0].__name__}")
