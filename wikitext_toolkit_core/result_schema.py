"""The result-file schema: what ``harness eval --output/--output-dir`` writes and ``leaderboard``
reads, as one typed object, :class:`ResultRecord`, with its version (:data:`SCHEMA_VERSION`,
:data:`SUPPORTED_SCHEMA_VERSIONS`), its JSON form (:meth:`ResultRecord.to_json`,
:meth:`ResultRecord.from_json`, which validates) and the rule that says which audits a result
needs (:func:`unaudited_reasons`).

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

#: 2: ``causality_audit``, ``audited``, ``unaudited_reasons``, ``audit.passed`` and
#: ``train_sha256`` (the train file's, which fixes the vocabulary) added;
#: ``model`` is ``module`` or, for a factory other than ``load_model``, ``module:attribute``.
#: 3: ``causality_audit`` is the second pass that a plugin cannot tell from the evaluation
#: (``harness.causality``: ``points`` substituted tokens, ``seed``, ``audit_pass``, ...); in
#: version 2 it was short stretches scored after a reset, which a plugin could tell apart.
#: 4: ``protocol.name`` (``stream``, or ``documents``: each article from a fresh state) and, for
#: ``documents``, ``document_metrics`` (lm-evaluation-harness's figures); an older reader, which
#: would rank the two protocols together, refuses it.
SCHEMA_VERSION = 4
#: Versions a reader understands; version 1 predates the causality audit: such results are read
#: but count as unaudited.
SUPPORTED_SCHEMA_VERSIONS = (1, 2, 3, 4)
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


def unaudited_reasons(*, schema_version: int, scoring: str, audit: Any, causality_audit: Any) -> list[str]:
    """Why a result's figure is not fully audited, one line each (empty when every audit that
    applies passed): the rule the harness applies when it writes a record and the leaderboard
    when it reads one.

    The probability audit (``audit``) must have checked distributions, except for ``subword``
    scoring (see :data:`SCORINGS`), to which it does not apply; the causality audit
    (``causality_audit``) must have passed (a version-1 record predates it).
    """
    reasons = []
    if scoring == "subword":
        pass  # no distribution over the word vocabulary: the probability audit does not apply
    elif not isinstance(audit, dict):
        reasons.append("no probability audit recorded")
    elif not audit.get("requested"):
        reasons.append("probability audit off (--audit 0)")
    elif audit.get("passed", audit.get("checked", 0) > 0) is not True:  # version 1: no "passed"
        reasons.append("the plugin gives no full distributions: normalization not audited")
    if schema_version < 2:
        reasons.append("written before the causality audit (schema 1): rerun harness eval")
    elif not isinstance(causality_audit, dict) or not causality_audit.get("points"):
        reasons.append("causality audit off (--causality-audit 0)")
    elif causality_audit.get("passed") is not True:
        reasons.append("causality audit not passed")
    return reasons


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

    def rule_unaudited_reasons(self) -> list[str]:
        """:func:`unaudited_reasons` applied to this record's audit records."""
        return unaudited_reasons(
            schema_version=self.schema_version,
            scoring=self.scoring,
            audit=self.audit,
            causality_audit=self.causality_audit,
        )

    @property
    def audit_gaps(self) -> list[str]:
        """Why this result's figure is not covered by the audits that apply; empty when they all
        passed: the recorded ``unaudited_reasons`` (version 2, checked against the audit records
        when read), else the rule applied (version 1)."""
        if self.unaudited_reasons is not None and self.schema_version >= 2:
            return list(self.unaudited_reasons)
        return self.rule_unaudited_reasons()

    def _check_audited(self) -> None:
        """A version-2 record's ``audited`` must agree with its audit records and its reasons."""
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
    ``unaudited_reasons`` holds strings, ``scoring`` is one of :data:`SCORINGS` and
    ``plugin_metadata``'s :data:`TEST_TIME_ADAPTATION`, if any, is a non-empty string."""
    for key, json_types in OPTIONAL_KEYS.items():
        if key in data:
            _check_type(key, data[key], json_types)
    reasons = data.get("unaudited_reasons") or []
    if not all(isinstance(reason, str) for reason in reasons):
        raise InvalidResultRecord(f"unaudited_reasons must be a list of strings, got {reasons!r}")
    if data.get("scoring", "word") not in SCORINGS:
        raise InvalidResultRecord(f"scoring {data['scoring']!r} is not one of {', '.join(SCORINGS)}")
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
