"""The leaderboard verifies what it ranks: a result's figures are recomputed from its per-token
log-probabilities (a result without them is shown unverified and unranked, and ``--strict``
refuses it), its token count must be its benchmark split's, and its protocol and date must be
real values."""

from __future__ import annotations

import csv
import json
import math
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from test_leaderboard import PTB_TOKENS, make_result

from leaderboard.cli import main
from leaderboard.records import collect
from leaderboard.table import build_tables

COMMITTED_PTB = Path(__file__).resolve().parent.parent / "results" / "ptb"
POINTER_TEST = "baselines.pointer_sentinel.ptb.test"


def committed_copy(tmp_path: Path) -> Path:
    """A copy of the committed PTB results of the pointer and KN-5 (valid and test, with their
    per-token log-probabilities)."""
    results = tmp_path / "results"
    results.mkdir()
    for model in ("baselines.pointer_sentinel", "baselines.kneser_ney"):
        for path in COMMITTED_PTB.glob(f"{model}.ptb.*"):
            shutil.copy(path, results / path.name)
    return results


def edit(path: Path, **fields: object) -> None:
    """Rewrite the result file ``path`` with ``fields`` changed, as a hand edit would."""
    record = json.loads(path.read_text(encoding="utf-8"))
    record.update(fields)
    path.write_text(json.dumps(record), encoding="utf-8")


def claim(perplexity: float) -> dict[str, float]:
    """A result's figures edited to ``perplexity``, consistently with each other."""
    return {"perplexity": perplexity, "nll": math.log(perplexity), "bits_per_token": math.log2(perplexity)}


def build(results: Path, out: Path, *options: str) -> int:
    return main(["build", str(results), "--output-dir", str(out), *options])


def csv_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def test_a_result_without_its_token_log_probs_is_unverified_unranked_and_refused_by_strict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    results = tmp_path / "results"
    make_result(results, "kn.test", model="baselines.kneser_ney", ppl=141.0)
    bare = make_result(results, "lstm.test", model="baselines.zoneout_lstm", ppl=80.0, logprobs=False)
    collection = collect([results])
    assert collection.rejected == [] and len(collection.results) == 2
    assert [result.verified for result in collection.results] == [True, False]
    kn, lstm = build_tables(collection, None)["ptb"].rows
    assert (kn.model, kn.kind, kn.rank) == ("baselines.kneser_ney", "reproduced baseline", 1)
    assert (lstm.model, lstm.kind, lstm.rank) == ("baselines.zoneout_lstm", "unverified", None)
    assert "unverified: test figures not recomputed (no per-token log-probabilities)" in lstm.notes

    out = tmp_path / "tables"
    assert build(results, out, "--no-reported") == 0
    captured = capsys.readouterr()
    assert f"note: {bare}: no token_log_probs_file recorded and no lstm.test.logprobs.npy" in captured.err
    assert "shown unranked, kind 'unverified' (--strict refuses it)" in captured.err
    assert "1 unverified (unranked)" in captured.out
    assert [(row["rank"], row["kind"]) for row in csv_rows(out / "ptb.csv")] == [
        ("1", "reproduced baseline"),
        ("", "unverified"),
    ]

    assert build(results, out, "--no-reported", "--strict") == 1
    rejected = [line for line in capsys.readouterr().err.splitlines() if line.startswith("rejected:")]
    assert len(rejected) == 1
    assert rejected[0].startswith(f"rejected: {bare}: no token_log_probs_file recorded")
    assert rejected[0].endswith("its figures cannot be verified without them")
    assert [row["kind"] for row in csv_rows(out / "ptb.csv")] == ["reproduced baseline"]

    monkeypatch.chdir(tmp_path)  # regenerate is as strict: the committed tables are verified
    assert main(["regenerate"]) == 1


def test_a_result_edited_to_perplexity_1_5_without_its_token_log_probs_is_not_ranked(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """The hand edit that used to top the table: a committed baseline's test result claiming
    perplexity 1.5, its per-token file deleted."""
    results = committed_copy(tmp_path)
    edit(results / f"{POINTER_TEST}.json", **claim(1.5))
    (results / f"{POINTER_TEST}.logprobs.npy").unlink()
    out = tmp_path / "tables"
    assert build(results, out) == 0
    rows = csv_rows(out / "ptb.csv")
    (edited,) = [row for row in rows if row["test_ppl"] == "1.5"]
    assert edited["kind"] == "unverified" and edited["rank"] == ""
    assert rows[0]["rank"] == "1" and rows[0]["test_ppl"] != "1.5"
    assert rows.index(edited) > max(index for index, row in enumerate(rows) if row["rank"])
    capsys.readouterr()

    assert build(results, out, "--strict") == 1
    (rejected,) = [line for line in capsys.readouterr().err.splitlines() if line.startswith("rejected:")]
    assert rejected.startswith(f"rejected: {results / POINTER_TEST}.json: token log-probabilities ")
    assert "not found" in rejected and rejected.endswith("its figures cannot be verified without them")
    assert "1.5" not in [row["test_ppl"] for row in csv_rows(out / "ptb.csv")]


@pytest.mark.parametrize(
    "edited",
    [
        pytest.param(lambda stated: claim(60.0), id="perplexity, nll and bits edited together"),
        pytest.param(
            lambda stated: {"perplexity": stated * (1 + 1e-7)},
            id="perplexity alone, within exp(nll)'s tolerance",
        ),
    ],
)
def test_an_edited_figure_beside_its_token_log_probs_is_rejected(
    tmp_path: Path, edited: Callable[[float], dict[str, float]]
) -> None:
    results = committed_copy(tmp_path)
    path = results / f"{POINTER_TEST}.json"
    edit(path, **edited(json.loads(path.read_text(encoding="utf-8"))["perplexity"]))
    collection = collect([results])
    (rejected,) = collection.rejected
    assert rejected.startswith(f"{results / POINTER_TEST}.logprobs.npy: mean NLL ")
    assert "does not match the result's nll" in rejected and "stale, foreign or edited" in rejected
    assert [result.path.name for result in collection.results if result.split == "test"] == [
        "baselines.kneser_ney.ptb.test.json"
    ]


def test_a_token_count_other_than_the_splits_is_rejected(tmp_path: Path) -> None:
    """A result whose per-token file agrees with it, but that scored 1,000 tokens of PTB test."""
    results = tmp_path / "results"
    make_result(results, "whole.test", model="model.whole", ppl=100.0)
    part = make_result(results, "part.test", model="model.part", ppl=50.0, tokens=1000)
    make_result(results, "corpus.test", ppl=70.0, tokens=1000, dataset="my-corpus")  # size unknown
    collection = collect([results])
    assert collection.rejected == [
        f"{part}: tokens 1,000 is not the ptb test split's {PTB_TOKENS['test']:,}: not ranked "
        "under the name ptb; skipped"
    ]
    assert sorted(result.path.name for result in collection.results) == [
        "corpus.test.json",
        "whole.test.json",
    ]


@pytest.mark.parametrize(
    "protocol, message",
    [
        ({"batch_size": 0, "bptt": 100}, "protocol.batch_size must be a positive integer, got 0"),
        ({"batch_size": 1, "bptt": -35}, "protocol.bptt must be a positive integer, got -35"),
        ({"batch_size": True, "bptt": 100}, "protocol.batch_size missing or not an integer"),
    ],
)
def test_a_protocol_that_is_no_evaluation_is_rejected_naming_the_field(
    tmp_path: Path, protocol: dict, message: str
) -> None:
    results = tmp_path / "results"
    make_result(results, "good.test", ppl=100.0)
    bad = make_result(results, "bad.test", model="bad.model", ppl=50.0, protocol=protocol)
    collection = collect([results])
    assert collection.rejected == [f"{bad}: {message}"]
    assert [result.path for result in collection.results] == [results / "good.test.json"]


@pytest.mark.parametrize("created", ["2026-02-30T10:00:00+00:00", "yesterday", ""])
def test_a_date_that_is_no_date_is_rejected_naming_the_field(tmp_path: Path, created: str) -> None:
    results = tmp_path / "results"
    make_result(results, "good.test", ppl=100.0)
    bad = make_result(results, "bad.test", model="bad.model", ppl=50.0, created=created)
    collection = collect([results])
    assert collection.rejected == [
        f"{bad}: created {created!r} is not a date and time (ISO 8601, as harness eval writes it)"
    ]
    assert [result.path for result in collection.results] == [results / "good.test.json"]
