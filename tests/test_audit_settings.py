"""Only default audits rank (issue 73): a result whose causality audit substituted fewer tokens or
accepted a looser tolerance than the defaults, whose probability audit checked fewer positions,
or (schema 5) that was scored in the harness's own process, is read, shown unranked with its
settings in its notes by ``build``, ``compare`` and ``site``, and never ranked; the defaults rank.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from conftest import assert_one_line_error
from test_leaderboard import PTB_TOKENS, make_result
from test_results_schema import committed_result_files

from leaderboard.cli import main
from wikitext_toolkit_core.result_schema import (
    IN_PROCESS_REASON,
    AuditedRun,
    InvalidResultRecord,
    ResultRecord,
    audit_setting_reasons,
    unaudited_reasons,
)

#: A version-4 causality audit with the default settings on a PTB split.
CAUSALITY_4 = {
    "points": 1000,
    "seed": 12345,
    "audit_pass": "second",
    "compared": "targets and distributions",
    "compared_positions": 40,
    "max_difference": 0.0,
    "max_pair_mass": 0.05,
    "random_mass": 0.1,
    "random_mass_bound": 18.8,
    "tolerance": 0.0,
    "seconds": 1.0,
    "passed": True,
}
#: The version-5 causality audit: check 3's evidence in place of the random mass.
CAUSALITY_5 = {
    **{key: value for key, value in CAUSALITY_4.items() if not key.startswith("random_mass")},
    "substitutes": "trigram of the split",
    "evidence": 0.5,
    "evidence_bound": 13.8,
}
#: A probability audit with the default settings.
PROBABILITY = {"requested": 8, "checked": 8, "max_sum_error": 0.0, "max_target_error": 0.0, "passed": True}
STREAM = {"batch_size": 1, "bptt": 100, "name": "stream"}


def version_4(**changes: Any) -> dict[str, Any]:
    """The fields of a version-4 result (audited by the rule of its version: its settings are
    not part of it) with ``changes``."""
    return {"schema_version": 4, "protocol": STREAM, "causality_audit": CAUSALITY_4, **changes}


def version_5(**changes: Any) -> dict[str, Any]:
    """The fields of a version-5 result scored in a worker process, with ``changes``, its
    ``audited`` and ``unaudited_reasons`` as the harness writes them."""
    fields = {
        "schema_version": 5,
        "protocol": STREAM,
        "audit": PROBABILITY,
        "causality_audit": CAUSALITY_5,
        "plugin_process": "worker",
        **changes,
    }
    reasons = unaudited_reasons(
        AuditedRun(
            schema_version=5,
            scoring="word",
            tokens=PTB_TOKENS["test"],
            device="cpu (x86_64)",
            audit=fields["audit"],
            causality_audit=fields["causality_audit"],
            plugin_process=fields["plugin_process"],
        )
    )
    return {**fields, "audited": not reasons, "unaudited_reasons": reasons}


#: Results with one setting weaker than its default, by model name, each with its reason.
NON_DEFAULT = {
    "few.substitutions": (
        version_4(causality_audit={**CAUSALITY_4, "points": 9}),
        "causality audit of 9 substitutions, fewer than the default 1,000 (--causality-audit 9): not ranked",
    ),
    "loose.tolerance": (
        version_4(causality_audit={**CAUSALITY_4, "tolerance": 1e300}),
        "causality tolerance 1e+300, looser than the default 0 (--causality-tolerance): not ranked",
    ),
    "one.position": (
        version_4(audit={**PROBABILITY, "requested": 1, "checked": 1}),
        "probability audit of 1 position, fewer than the default 8 (--audit 1): not ranked",
    ),
    "in.process": (version_5(plugin_process="harness"), IN_PROCESS_REASON),
    "version5.few": (
        version_5(causality_audit={**CAUSALITY_5, "points": 9}),
        "causality audit of 9 substitutions, fewer than the default 1,000 (--causality-audit 9): not ranked",
    ),
}


@pytest.fixture
def results(tmp_path: Path) -> Path:
    """Two results with the default settings (versions 4 and 5), each beaten by every result of
    :data:`NON_DEFAULT`."""
    directory = tmp_path / "results"
    make_result(directory, "default4.test", model="default4", ppl=100.0, **version_4())
    make_result(directory, "default5.test", model="default5", ppl=101.0, **version_5())
    for ppl, (model, (fields, _)) in enumerate(NON_DEFAULT.items(), start=50):
        make_result(directory, f"{model}.test", model=model, ppl=float(ppl), **fields)
    return directory


def built(results: Path, out: Path, *options: str) -> pd.DataFrame:
    """The PTB table ``leaderboard build`` writes for ``results``, by model."""
    assert main(["build", str(results), "--output-dir", str(out), "--no-reported", *options]) == 0
    return pd.read_csv(out / "ptb.csv").set_index("model")


def test_build_keeps_them_out_naming_the_setting(
    results: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    table = built(results, tmp_path / "tables")
    assert table["rank"].to_dict() == {"default4": 1, "default5": 2}
    err = capsys.readouterr().err
    assert "rejected" not in err  # a version-4 file claiming "audited" is read, not refused
    for model, (_, reason) in NON_DEFAULT.items():
        assert f"{model}.test.json: unaudited ({reason}): kept out of the ranking" in err


def test_build_shows_them_unranked_with_the_setting_in_their_notes(results: Path, tmp_path: Path) -> None:
    table = built(results, tmp_path / "tables", "--include-unaudited")
    assert table.loc[["default4", "default5"], "rank"].tolist() == [1, 2]
    for model, (_, reason) in NON_DEFAULT.items():
        row = table.loc[model]
        assert pd.isna(row["rank"]) and row["kind"] == "unaudited"
        assert f"unaudited: {reason}" in row["notes"]


@pytest.mark.parametrize("model", NON_DEFAULT)
def test_compare_refuses_them_naming_the_setting(
    results: Path, model: str, capsys: pytest.CaptureFixture
) -> None:
    reason = NON_DEFAULT[model][1]
    pair = [str(results / "default4.test.json"), str(results / f"{model}.test.json")]
    assert main(["compare", *pair, "--samples", "200"]) == 2
    assert_one_line_error(capsys, f"{model}.test.json: unaudited ({reason}): refused", "--allow-unaudited")
    assert main(["compare", *pair, "--samples", "200", "--allow-unaudited"]) == 0
    assert reason in capsys.readouterr().err.splitlines()[0]


def test_the_site_flags_them_unranked_with_the_setting(results: Path, tmp_path: Path) -> None:
    out = tmp_path / "site"
    assert main(["site", str(results), "--output-dir", str(out), "--samples", "1000", "--no-reported"]) == 0
    index = (out / "index.html").read_text(encoding="utf-8")
    matrix = index[index.index('<table class="matrix">') :]
    matrix = matrix[: matrix.index("</table>")]
    assert matrix.count('<th scope="row">') == 2  # the two results with the default settings
    for model, (_, reason) in NON_DEFAULT.items():
        assert model not in matrix and html.escape(f"unaudited: {reason}") in index
        (page,) = (out / "results").glob(f"{model}.test-*.html")
        assert html.escape(f"not audited: {reason}") in page.read_text(encoding="utf-8")


def reasons(**changes: Any) -> list[str]:
    """:func:`audit_setting_reasons` of a version-4 word-level result on a PTB test split, with
    the default settings but for ``changes``."""
    inputs = {
        "schema_version": 4,
        "scoring": "word",
        "tokens": PTB_TOKENS["test"],
        "device": "cpu (x86_64)",
        "audit": PROBABILITY,
        "causality_audit": CAUSALITY_4,
        "plugin_process": None,
        **changes,
    }
    return audit_setting_reasons(AuditedRun(**inputs))


def test_the_default_settings_give_no_reason() -> None:
    assert reasons() == [] and reasons(schema_version=5, plugin_process="worker") == []
    assert reasons(causality_audit={**CAUSALITY_4, "points": 5000}) == []  # more than the default


def test_a_small_splits_capped_substitutions_are_the_default() -> None:
    """The harness substitutes at most a quarter of the positions: 25 of 100 tokens."""
    small = {"tokens": 100}
    assert reasons(**small, causality_audit={**CAUSALITY_4, "points": 25}) == []
    assert reasons(**small, causality_audit={**CAUSALITY_4, "points": 24}) == [
        "causality audit of 24 substitutions, fewer than the default 25 (--causality-audit 24): not ranked"
    ]
    assert reasons(tokens=3, causality_audit={**CAUSALITY_4, "points": 1}) == []  # at least one
    assert reasons(tokens=5, audit={**PROBABILITY, "requested": 5, "checked": 5}) == []  # every position


def test_the_tolerance_default_is_0_on_the_cpu_and_looser_on_an_accelerator() -> None:
    accelerator = {**CAUSALITY_4, "tolerance": 1e-4}
    looser = "causality tolerance 0.0001, looser than the default 0 (--causality-tolerance): not ranked"
    assert reasons(causality_audit=accelerator) == [looser]
    assert reasons(causality_audit=accelerator, device=None) == [looser]
    assert reasons(causality_audit=accelerator, device="cuda:0 (NVIDIA H100 80GB HBM3)") == []
    assert reasons(causality_audit={**accelerator, "tolerance": 1e-3}, device="cuda:0 (NVIDIA H100)") == [
        "causality tolerance 0.001, looser than the default 0.0001 (--causality-tolerance): not ranked"
    ]


def test_audits_that_are_off_or_do_not_apply_are_not_looked_at() -> None:
    off = {"requested": 0, "checked": 0, "max_sum_error": 0.0, "max_target_error": 0.0, "passed": False}
    assert reasons(audit=off, causality_audit={**CAUSALITY_4, "points": 0, "passed": False}) == []
    assert reasons(schema_version=5, causality_audit=None) == []  # no process reason without the audit
    assert (
        reasons(scoring="subword", audit={**PROBABILITY, "requested": 1, "checked": 0, "passed": False}) == []
    )
    no_rows = {**PROBABILITY, "requested": 2, "checked": 0, "passed": False}  # stopped asking after one chunk
    assert reasons(audit=no_rows) == []


def test_a_version_2_audit_is_held_to_its_own_default_of_4_positions() -> None:
    version_2 = {"points": 4, "candidates": 4, "tolerance": 0.0, "passed": True}
    assert reasons(schema_version=2, causality_audit=version_2) == []
    assert reasons(schema_version=2, causality_audit={**version_2, "points": 1}) == [
        "causality audit of 1 position, fewer than the default 4 (--causality-audit 1): not ranked"
    ]


def record_data(**changes: Any) -> dict[str, Any]:
    """The JSON of an audited version-2 result on a PTB test split, with ``changes``."""
    fields = {
        "schema_version": 2,
        "model": "my.model",
        "model_args": {},
        "checkpoint": None,
        "dataset": "ptb",
        "split": "test",
        "dataset_sha256": "d" * 64,
        "vocab_size": 10000,
        "vocab_sha256": "v" * 64,
        "tokens": PTB_TOKENS["test"],
        "nll": 0.0,
        "perplexity": 1.0,
        "protocol": STREAM,
        "train_sha256": "t" * 64,
        "device": "cpu (x86_64)",
        "audit": PROBABILITY,
        "audited": True,
        "unaudited_reasons": [],
    }
    return {**fields, **changes}


def test_a_version_4_file_with_fewer_substitutions_is_read_and_counts_as_unaudited() -> None:
    record = ResultRecord.from_json(record_data(**version_4(causality_audit={**CAUSALITY_4, "points": 9})))
    assert record.audited is True and record.audit_gaps == [NON_DEFAULT["few.substitutions"][1]]


def test_a_version_5_file_must_count_its_settings_as_the_harness_does() -> None:
    honest = record_data(**version_5(causality_audit={**CAUSALITY_5, "points": 9}))
    assert ResultRecord.from_json(honest).audit_gaps == honest["unaudited_reasons"]
    edited = {**honest, "audited": True, "unaudited_reasons": []}
    with pytest.raises(InvalidResultRecord, match="audited is true but the audit records say otherwise"):
        ResultRecord.from_json(edited)
    with pytest.raises(InvalidResultRecord, match="audited is true but the audit records say otherwise"):
        ResultRecord.from_json(record_data(**{**version_5(), "plugin_process": "harness"}))


@pytest.mark.parametrize("path", committed_result_files(), ids=lambda path: path.name)
def test_the_committed_results_have_the_default_settings(path: Path) -> None:
    record = ResultRecord.from_json(json.loads(path.read_text(encoding="utf-8")))
    assert record.audit_gaps == []
