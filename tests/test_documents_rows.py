"""One run, one row, under the documents protocol too (its ``batch_size`` is each split's number
of documents, not a setting of the run), and ``compare`` names each result's protocol and refuses
to pair two protocols unless told to."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import assert_one_line_error
from test_leaderboard import make_result, table

from leaderboard.cli import _valid_to_test, main


def documents(count: int) -> dict:
    """The ``protocol`` of a documents result over ``count`` documents."""
    return {"batch_size": count, "bptt": 100, "name": "documents"}


def test_a_documents_run_is_one_row_whatever_each_split_has_of_documents(tmp_path: Path) -> None:
    results = tmp_path / "results"
    make_result(results, "m.valid.documents", ppl=150.0, split="valid", protocol=documents(61))
    make_result(results, "m.test.documents", ppl=140.0, protocol=documents(63))
    tables, warnings, collection = table(tmp_path)
    assert collection.rejected == [] and warnings == []
    frame = tables["ptb.documents"].frame()
    assert len(frame) == 1
    row = frame.iloc[0]
    assert (row["valid_ppl"], row["test_ppl"], row["rank"]) == (150.0, 140.0, 1)
    assert row["source"] == "m.valid.documents.json + m.test.documents.json"
    assert "one stream per document, bptt 100" in row["notes"] and "batch 6" not in row["notes"]
    ratio = _valid_to_test([str(results / "m.valid.documents.json"), str(results / "m.test.documents.json")])
    assert (ratio.valid, ratio.test) == (150.0, 140.0)


def test_documents_runs_of_another_bptt_stay_apart(tmp_path: Path) -> None:
    results = tmp_path / "results"
    make_result(results, "m.valid.documents", ppl=150.0, split="valid", protocol=documents(61))
    make_result(results, "m.test.documents", ppl=140.0, protocol={**documents(63), "bptt": 35})
    tables, _, _ = table(tmp_path)
    assert len(tables["ptb.documents"].rows) == 2


def test_stream_runs_of_different_batch_sizes_stay_two_rows(tmp_path: Path) -> None:
    results = tmp_path / "results"
    make_result(results, "m.valid", ppl=150.0, split="valid", protocol={"batch_size": 10, "bptt": 100})
    make_result(results, "m.test", ppl=140.0, protocol={"batch_size": 1, "bptt": 100})
    tables, _, _ = table(tmp_path)
    frame = tables["ptb"].frame()
    assert frame["source"].tolist() == ["m.test.json", "m.valid.json"]
    assert frame["model"].tolist() == ["my.model [batch 1, bptt 100]", "my.model [batch 10, bptt 100]"]
    assert "batch 1, bptt 100" in frame.iloc[0]["notes"]


def _pair(tmp_path: Path, protocol_a: dict | None, protocol_b: dict | None) -> list[str]:
    """Two test results of 400 tokens, A better than B, under these protocols (None: a file that
    names no protocol, as before schema 4), each with its per-token file."""
    paths, rng = [], np.random.default_rng(0)
    for name, nll, protocol in (("a", 4.0, protocol_a), ("b", 4.5, protocol_b)):
        values = rng.normal(-nll, 0.1, 400)
        values += -nll - values.mean()  # mean NLL exactly nll
        path = make_result(
            tmp_path / "results",
            f"{name}.test",
            model=f"model.{name}",
            dataset="toy",
            tokens=400,
            ppl=float(np.exp(nll)),
            protocol=protocol or {"batch_size": 1, "bptt": 100},
        )
        np.save(tmp_path / "results" / f"{name}.test.logprobs.npy", values)
        paths.append(str(path))
    return paths


def test_compare_names_each_results_protocol(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    a, b = _pair(tmp_path, documents(63), documents(63))
    assert main(["compare", a, b, "--samples", "200"]) == 0
    out = capsys.readouterr().out
    assert "A: model.a on toy/test (documents protocol): perplexity" in out
    assert "B: model.b on toy/test (documents protocol): perplexity" in out


def test_compare_refuses_two_protocols_unless_told(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    a, b = _pair(tmp_path, documents(63), None)  # a file without a protocol name scored a stream
    assert main(["compare", a, b, "--samples", "200"]) == 2
    assert_one_line_error(
        capsys, f"{a} and {b} are not comparable", "(documents vs stream)", "--across-protocols"
    )
    assert main(["compare", a, b, "--samples", "200", "--across-protocols"]) == 0
    out = capsys.readouterr().out
    assert "A: model.a on toy/test (documents protocol): perplexity" in out
    assert "B: model.b on toy/test (stream protocol): perplexity" in out
