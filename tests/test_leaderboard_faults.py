"""The leaderboard under odd inputs and for a newcomer: JSON nested too deeply to read among the
results, and rows labelled by whose model they are."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_leaderboard import make_result

from leaderboard.cli import main
from leaderboard.records import collect
from leaderboard.table import build_tables


def _deep_result(good: Path, depth: int) -> str:
    """The result ``good`` with ``model_args`` nested ``depth`` levels deep."""
    record = json.loads(good.read_text(encoding="utf-8"))
    record["model_args"] = json.loads('{"a": ' * depth + "1" + "}" * depth)
    return json.dumps(record)


@pytest.mark.parametrize("nesting", ["array of 100,000", "result of 950"])
def test_json_nested_too_deeply_is_rejected_in_one_line(tmp_path, capsys, nesting):
    """100,000 levels exhaust the decoder; 950 load but would exhaust ``json.dumps`` later.
    Either is named and skipped like any other malformed result, and the build goes on."""
    results = tmp_path / "results"
    good = make_result(results, "good.test", ppl=100.0)
    deep = results / "deep.json"
    text = "[" * 100_000 + "]" * 100_000 if nesting.startswith("array") else _deep_result(good, 950)
    deep.write_text(text, encoding="utf-8")
    out = tmp_path / "tables"
    assert main(["build", str(results), "--output-dir", str(out), "--no-reported"]) == 0
    captured = capsys.readouterr()
    message = "not a harness result (JSON nested more than 32 levels deep)"
    assert captured.err == f"rejected: {deep}: {message}\n"
    assert "1 result file(s) used, 1 rejected" in captured.out
    assert main(["compare", str(deep), str(good)]) == 2
    assert capsys.readouterr().err == f"error: {deep}: {message}\n"


def test_rows_are_labelled_by_whose_model_they_are(tmp_path, capsys):
    results = tmp_path / "results"
    make_result(results, "lstm.test", model="baselines.zoneout_lstm", ppl=104.0)
    make_result(results, "unigram.test", model="harness.plugins.unigram", ppl=640.0)
    make_result(results, "mine.test", model="my_pkg.my_model:large", ppl=90.0)
    table = build_tables(collect([results]), None)["ptb"]
    assert table[["model", "kind"]].values.tolist() == [
        ["my_pkg.my_model:large", "user model"],
        ["baselines.zoneout_lstm", "reproduced baseline"],
        ["harness.plugins.unigram", "reproduced baseline"],
    ]
    assert main(["build", str(results), "--output-dir", str(tmp_path / "tables"), "--format", "html"]) == 0
    assert "ptb: 25 rows (2 reproduced baseline, 1 user model, 22 reported)" in capsys.readouterr().out
    html = (tmp_path / "tables" / "ptb.html").read_text(encoding="utf-8")
    assert '<tr class="user-model">' in html and '<tr class="reproduced-baseline">' in html
