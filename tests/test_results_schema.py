"""The result schema as one typed object (``wikitext_toolkit_core.result_schema.ResultRecord``): its JSON
round trip, the committed result files (versions 1 and 2) and the one-line messages of a bad field."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import pytest

from wikitext_toolkit_core.result_schema import (
    SCHEMA_VERSION,
    InvalidResultRecord,
    NotAResultRecord,
    Protocol,
    ResultRecord,
)

COMMITTED_RESULTS = Path(__file__).resolve().parent.parent / "results"


def written_record(**overrides: Any) -> dict[str, Any]:
    """A result as ``harness eval`` writes it today: every key, in the order it writes them."""
    nll = math.log(120.0)
    record = {
        "schema_version": SCHEMA_VERSION,
        "model": "my.model",
        "model_args": {"order": 5},
        "checkpoint": "<repo>/baselines/trained/ptb/model.pt",
        "dataset": "ptb",
        "dataset_path": "<repo>/wikitext_toolkit_core/data/ptb",
        "split": "test",
        "dataset_sha256": "d" * 64,
        "train_sha256": "t" * 64,
        "dataset_verified": True,
        "vocab_size": 10000,
        "vocab_sha256": "v" * 64,
        "oov_tokens": 0,
        "tokens": 1000,
        "nll": nll,
        "perplexity": 120.0,
        "bits_per_token": nll / math.log(2),
        "protocol": {"batch_size": 1, "bptt": 100, "name": "stream"},
        "document_metrics": None,
        "audit": {
            "requested": 8,
            "checked": 8,
            "max_sum_error": 0.0,
            "max_target_error": 0.0,
            "passed": True,
        },
        "causality_audit": {
            "points": 250,  # the default: a quarter of the 1,000 tokens
            "seed": 12345,
            "audit_pass": "second",
            "substitutes": "trigram of the split",
            "compared": "targets and distributions",
            "compared_positions": 40,
            "max_difference": 0.0,
            "max_pair_mass": 0.05,
            "evidence": 0.5,
            "evidence_bound": 13.8,
            "tolerance": 0.0,
            "seconds": 0.01,
            "passed": True,
        },
        "scoring": "word",
        "audited": True,
        "unaudited_reasons": [],
        "num_parameters": 2_000_000,
        "runtime_seconds": 1.5,
        "tokens_per_second": 666.6,
        "device": "cpu (x86_64)",
        "plugin_process": "worker",
        "torch_version": "2.13.0+cpu",
        "package_version": "0.1.0",
        "git_commit": "abc123def4567890",
        "token_log_probs_file": "my.model.ptb.test.logprobs.npy",
        "plugin_metadata": {"checkpoint_sha256": "c" * 64, "checkpoint_packaged": True},
        "plugin_code": {"sha256": "d" * 64, "source": "package", "path": "<repo>/my", "files": 3},
        "created": "2026-11-20T10:00:00+00:00",
    }
    record.update(overrides)
    return record


def committed_result_files() -> list[Path]:
    """The committed JSON files under ``results/`` that are harness results."""
    files = sorted(COMMITTED_RESULTS.rglob("*.json"))
    return [path for path in files if "schema_version" in json.loads(path.read_text(encoding="utf-8"))]


def test_a_written_record_round_trips_key_for_key_in_order() -> None:
    data = written_record()
    record = ResultRecord.from_json(data)
    assert record.protocol == Protocol(batch_size=1, bptt=100, name="stream")
    assert record.audit_gaps == []
    assert json.dumps(record.to_json()) == json.dumps(data)  # same keys, order and values
    assert ResultRecord.from_json(record.to_json()) == record


def test_the_record_is_immutable() -> None:
    record = ResultRecord.from_json(written_record())
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.perplexity = 1.0  # type: ignore[misc]


def test_the_record_fields_are_the_keys_the_harness_writes() -> None:
    assert [field.name for field in dataclasses.fields(ResultRecord)] == list(written_record())


@pytest.mark.parametrize("path", committed_result_files(), ids=lambda path: path.name)
def test_every_committed_result_file_loads(path: Path) -> None:
    """Versions 1 and 2 load; what a file records comes back as it was, in its order (keys it
    predates read as their field's default)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    written = ResultRecord.from_json(data).to_json()
    assert [key for key in written if key in data] == list(data)
    assert {key: written[key] for key in data} == data


def test_a_version_1_file_loads_and_counts_as_unaudited() -> None:
    data = written_record(schema_version=1, audit={"requested": 8, "checked": 8})
    for key in ("train_sha256", "causality_audit", "scoring", "audited", "unaudited_reasons"):
        del data[key]
    record = ResultRecord.from_json(data)
    assert record.schema_version == 1 and record.causality_audit is None and record.scoring == "word"
    assert record.audit_gaps == ["written before the causality audit (schema 1): rerun harness eval"]


def test_a_file_that_is_no_result_is_told_apart() -> None:
    with pytest.raises(
        NotAResultRecord, match=r"^not a harness result file \(no schema_version or perplexity\)$"
    ):
        ResultRecord.from_json({"epochs": 3})


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([1, 2], "not a harness result (a JSON list, not an object)"),
        (
            {"schema_version": 2},
            "missing keys model, model_args, checkpoint, dataset, split, dataset_sha256, "
            "vocab_size, vocab_sha256, tokens, nll, perplexity, protocol",
        ),
        (
            written_record(schema_version=6),
            "schema_version 6 is not supported (this leaderboard reads 1, 2, 3, 4, 5)",
        ),
        (written_record(tokens=True), "tokens must be int, got True"),
        (written_record(checkpoint=5), "checkpoint must be str or null, got 5"),
        (written_record(protocol={"batch_size": 1}), "protocol.bptt missing or not an integer"),
        (
            written_record(protocol={"batch_size": False, "bptt": 100}),
            "protocol.batch_size missing or not an integer",
        ),
        (
            written_record(protocol={"batch_size": 0, "bptt": 100}),
            "protocol.batch_size must be a positive integer, got 0",
        ),
        (
            written_record(protocol={"batch_size": 1, "bptt": -1}),
            "protocol.bptt must be a positive integer, got -1",
        ),
        (written_record(audited="yes"), "audited missing or not a bool"),
        (
            written_record(audited=False),
            "audited is false but the audit records say otherwise (file edited by hand?)",
        ),
        (written_record(tokens=0), "tokens must be positive, got 0"),
        (written_record(perplexity=0.5), "nll 4.787491742782046 / perplexity 0.5 out of range"),
        (
            written_record(perplexity=121.0),
            "perplexity 121.0 is not exp(nll 4.787491742782046) (file edited by hand?)",
        ),
        (written_record(bits_per_token=1.0), "bits_per_token 1.0 is not nll / ln 2 (file edited by hand?)"),
        (written_record(num_parameters=-1), "num_parameters must be a non-negative integer or null"),
        (written_record(created=12345), "created must be str or null, got 12345"),
        (
            written_record(created="2026-11-31T10:00:00+00:00"),
            "created '2026-11-31T10:00:00+00:00' is not a date and time "
            "(ISO 8601, as harness eval writes it)",
        ),
        (written_record(git_commit=5), "git_commit must be str or null, got 5"),
        (written_record(token_log_probs_file=5), "token_log_probs_file must be str or null, got 5"),
        (written_record(device=["cpu"]), "device must be str or null, got ['cpu']"),
        (written_record(dataset_verified="yes"), "dataset_verified must be bool or null, got 'yes'"),
        (written_record(num_parameters=True), "num_parameters must be int or null, got True"),
        (written_record(runtime_seconds="1.5"), "runtime_seconds must be int or float or null, got '1.5'"),
        (written_record(plugin_metadata=[]), "plugin_metadata must be dict or null, got []"),
        (written_record(unaudited_reasons=[1]), "unaudited_reasons must be a list of strings, got [1]"),
        (written_record(scoring="bpe"), "scoring 'bpe' is not one of word, subword"),
        (written_record(plugin_process="thread"), "plugin_process 'thread' is not one of worker, harness"),
        (
            written_record(causality_audit={**written_record()["causality_audit"], "points": 9}),
            "audited is true but the audit records say otherwise (file edited by hand?)",
        ),
        (written_record(nll=10**400), "nll must be a number a float holds, got an integer of 401 digits"),
        (
            written_record(bits_per_token=-(10**309)),
            "bits_per_token must be a number a float holds, got an integer of 310 digits",
        ),
    ],
)
def test_a_bad_field_gives_one_line_naming_it(data: Any, message: str) -> None:
    with pytest.raises(InvalidResultRecord) as raised:
        ResultRecord.from_json(data)
    assert str(raised.value) == message
