"""The leaderboard's clean-subset columns: a result with a contamination report (made by the real
``python -m harness contamination --result`` on a small synthetic corpus) gets its clean
perplexity and contaminated share; a report that does not fit its result is refused in one line;
without reports every table stays byte for byte as it was."""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO, assert_one_line_error
from test_leaderboard import make_result

from harness.cli import main as harness_main
from harness.datasets import load_dataset
from leaderboard.cli import main
from leaderboard.table import COLUMNS, format_number, read_table

TITLES = ("Alpha", "Bravo", "Charlie", "Delta")
PLANTED = 1  # Bravo: its text is in the training corpus
BODY_LINES, LINE_WORDS = 5, 20


@dataclasses.dataclass
class Toy:
    """A WikiText-layout dataset of four test articles, a corpus holding one of them, and a
    results folder: ``m.test.json`` (random per-token scores) and ``other.test.json``."""

    root: Path
    dataset: Path
    corpus: Path
    results: Path
    result: Path
    clean_ppl: float  # computed here from the per-token scores, outside the planted article
    contaminated_pct: float


def wikitext_article(rng: np.random.Generator, title: str) -> list[str]:
    """A blank line, the ``= Title =`` heading, a blank line and a body of random words."""
    words = [f"w{number}" for number in rng.integers(0, 50_000, BODY_LINES * LINE_WORDS)]
    body = [" " + " ".join(words[i : i + LINE_WORDS]) + " " for i in range(0, len(words), LINE_WORDS)]
    return [" ", f" = {title} = ", " ", *body]


@pytest.fixture
def toy(tmp_path: Path) -> Toy:
    rng = np.random.default_rng(7)
    dataset = tmp_path / "toywiki"
    dataset.mkdir()
    articles = [wikitext_article(rng, title) for title in TITLES]
    test_lines = [line for article in articles for line in article]
    for split, lines in (
        ("train", wikitext_article(rng, "Train")),
        ("valid", articles[0]),
        ("test", test_lines),
    ):
        (dataset / f"wiki.{split}.tokens").write_text("\n".join(lines) + "\n", encoding="utf-8")
    corpus = tmp_path / "corpus.txt"
    planted = "\n".join(articles[PLANTED])
    corpus.write_text(f"Unrelated text about w1 and w2.\n{planted}\nThe end.\n")

    # The planted article's tokens, counted here: from its heading to the next heading, one
    # <eos> per line (the leading blank line of the file belongs to the first article).
    line_tokens = [len(line.split()) + 1 for line in test_lines]
    first = 1 + len(articles[0]) * PLANTED
    end = first + len(articles[PLANTED])
    tokens = sum(line_tokens)
    values = np.log(rng.uniform(1e-4, 1.0, tokens))
    start, stop = sum(line_tokens[:first]), sum(line_tokens[:end])
    clean_values = np.concatenate([values[:start], values[stop:]])

    results = tmp_path / "results"
    results.mkdir()
    np.save(results / "m.test.logprobs.npy", values)
    sha = load_dataset(str(dataset)).verify("test")
    common = {"dataset": "toywiki", "tokens": tokens, "dataset_sha256": sha}
    result = make_result(
        results,
        "m.test",
        ppl=math.exp(-values.mean()),
        logprobs=False,
        token_log_probs_file="m.test.logprobs.npy",
        **common,
    )
    make_result(results, "other.test", model="my.other", ppl=150.0, **common)
    return Toy(
        tmp_path,
        dataset,
        corpus,
        results,
        result,
        clean_ppl=math.exp(-clean_values.mean()),
        contaminated_pct=100 * (stop - start) / tokens,
    )


def make_report(toy: Toy, output: Path, result: Path | None = None) -> dict:
    """``python -m harness contamination CORPUS --dataset DIR --split test --result RESULT``."""
    argv = ["contamination", str(toy.corpus), "--dataset", str(toy.dataset), "--split", "test"]
    assert harness_main([*argv, "--result", str(result or toy.result), "--output", str(output)]) == 0
    return json.loads(output.read_text())


def build(*sources: Path, out: Path, strict: bool = False) -> int:
    argv = ["build", *map(str, sources), "--output-dir", str(out), "--no-reported"]
    return main([*argv, "--format", "csv", "markdown", "html", *(["--strict"] if strict else [])])


def rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def files(directory: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(directory.iterdir())}


def test_a_report_beside_its_result_adds_the_clean_columns(
    toy: Toy, capsys: pytest.CaptureFixture[str]
) -> None:
    report = make_report(toy, toy.results / "m.test.contamination.json")
    assert [entry["title"] for entry in report["contaminated"]] == [TITLES[PLANTED]]
    assert math.isclose(report["perplexity_clean"], toy.clean_ppl, rel_tol=1e-12)
    capsys.readouterr()

    assert build(toy.results, out=toy.root / "out", strict=True) == 0
    out = capsys.readouterr().out
    assert "1 contamination report(s) shown" in out
    header = (toy.root / "out" / "toywiki.csv").read_text().splitlines()[0].split(",")
    assert header == [*COLUMNS[:5], "clean_test_ppl", "test_contaminated_pct", *COLUMNS[5:]]
    by_model = {row["model"]: row for row in rows(toy.root / "out" / "toywiki.csv")}
    checked = by_model["my.model"]
    assert float(checked["clean_test_ppl"]) == round(toy.clean_ppl, 2)
    assert float(checked["test_contaminated_pct"]) == round(toy.contaminated_pct, 2)
    assert (
        "test: 1 of 4 articles contaminated (13-gram overlap >= 0.5, m.test.contamination.json)"
        in (checked["notes"])
    )
    assert by_model["my.other"]["clean_test_ppl"] == by_model["my.other"]["test_contaminated_pct"] == "-"
    markdown = (toy.root / "out" / "toywiki.md").read_text()
    assert "| test_ppl | clean_test_ppl | test_contaminated_pct | kind |" in markdown
    figures = (
        f"| {format_number(round(toy.clean_ppl, 2))} | {format_number(round(toy.contaminated_pct, 2))} |"
    )
    assert figures in markdown
    assert "| 150.0 | - | - | user model |" in markdown
    assert "<th>clean_test_ppl</th>" in (toy.root / "out" / "toywiki.html").read_text()
    table = read_table(toy.root / "out" / "toywiki.csv")  # read back, as plot bars does
    assert [row.clean_test_ppl is not None for row in table.rows] == [True, False]  # my.model first


def test_a_report_kept_apart_or_moved_with_its_result_still_finds_it(
    toy: Toy, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(toy.root)
    (toy.root / "reports").mkdir()
    make_report(toy, Path("reports/m.json"), result=Path("results/m.test.json"))  # relative paths
    assert build(Path("results"), Path("reports"), out=toy.root / "out", strict=True) == 0
    clean = format_number(round(toy.clean_ppl, 2))
    assert rows(toy.root / "out" / "toywiki.csv")[0]["clean_test_ppl"] == clean
    moved = toy.root / "elsewhere"
    shutil.copytree(toy.root / "results", moved / "kept" / "results")
    shutil.copytree(toy.root / "reports", moved / "reports")
    monkeypatch.chdir(moved)  # results/m.test.json now names nothing: found by its name
    assert build(Path("kept"), Path("reports"), out=toy.root / "out2", strict=True) == 0
    assert rows(toy.root / "out2" / "toywiki.csv")[0]["clean_test_ppl"] == clean
    assert "rejected" not in capsys.readouterr().err


def test_a_report_and_its_result_named_twice_are_read_once(
    toy: Toy, capsys: pytest.CaptureFixture[str]
) -> None:
    """A directory and a file in it, or one directory twice: each file counts once."""
    report = toy.results / "m.test.contamination.json"
    make_report(toy, report)
    capsys.readouterr()
    assert build(toy.results, report, toy.results, toy.result, out=toy.root / "out", strict=True) == 0
    captured = capsys.readouterr()
    assert captured.err == "" and "2 result file(s) used, 0 rejected" in captured.out
    assert "1 contamination report(s) shown" in captured.out
    assert rows(toy.root / "out" / "toywiki.csv")[0]["clean_test_ppl"] == format_number(
        round(toy.clean_ppl, 2)
    )


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        ({"dataset_sha256": "0" * 64}, "its dataset_sha256 '000000000000...' is not its result's"),
        ({"split": "valid"}, "its split 'valid' is not its result's ('test')"),
        ({"model": "my.other"}, "its model 'my.other' is not its result's ('my.model')"),
        ({"perplexity_all": "x1.001"}, "is not its result's perplexity"),
        ({"perplexity_clean": "x1.01"}, "its perplexity_clean does not follow from its log-probability sums"),
        ({"tokens_clean": 1}, "do not add up to its tokens"),
        ({"tokens_contaminated": None}, "contamination report: tokens_contaminated missing or not int"),
        ({"settings": {}}, "contamination report: settings.threshold missing or not int or float"),
        ({"report_version": 2}, "report_version 2 is not supported"),
        ({"result": "gone/nowhere.json"}, "gone/nowhere.json, is not found (none read has that name)"),
        (
            {"result": "m.test\0.json"},
            "contamination report: result 'm.test\\x00.json' is no path (a NUL byte)",
        ),
    ],
)
def test_a_report_that_does_not_fit_its_result_is_refused_in_one_line(
    toy: Toy, edit: dict, reason: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert build(toy.results, out=toy.root / "without", strict=True) == 0
    report_path = toy.results / "m.test.contamination.json"
    report = make_report(toy, report_path)
    for key, value in edit.items():
        scaled = isinstance(value, str) and value.startswith("x")
        report[key] = report[key] * float(value[1:]) if scaled else value
    report_path.write_text(json.dumps(report))
    capsys.readouterr()
    assert build(toy.results, out=toy.root / "with", strict=True) == 1
    rejected = [line for line in capsys.readouterr().err.splitlines() if line.startswith("rejected: ")]
    assert (
        len(rejected) == 1 and rejected[0].startswith(f"rejected: {report_path}: ") and reason in rejected[0]
    )
    assert files(toy.root / "with") == files(toy.root / "without")  # no column, nothing else changed


def test_a_re_run_result_refuses_its_old_report(toy: Toy, capsys: pytest.CaptureFixture[str]) -> None:
    make_report(toy, toy.results / "m.test.contamination.json")
    values = np.load(toy.results / "m.test.logprobs.npy") * 0.99  # evaluated again, other figures
    np.save(toy.results / "m.test.logprobs.npy", values)
    record = json.loads(toy.result.read_text())
    record.update(
        nll=-values.mean(), perplexity=math.exp(-values.mean()), bits_per_token=-values.mean() / math.log(2)
    )
    toy.result.write_text(json.dumps(record))
    capsys.readouterr()
    assert build(toy.results, out=toy.root / "out") == 0
    err = capsys.readouterr().err
    assert "a contamination report that does not fit" in err and "its perplexity_all" in err
    assert "clean_test_ppl" not in (toy.root / "out" / "toywiki.csv").read_text()


def test_two_reports_of_one_result_are_both_refused_and_one_without_perplexities_is_noted(
    toy: Toy, capsys: pytest.CaptureFixture[str]
) -> None:
    make_report(toy, toy.results / "a.contamination.json")
    make_report(toy, toy.results / "b.contamination.json")
    argv = ["contamination", str(toy.corpus), "--dataset", str(toy.dataset), "--split", "test"]
    assert harness_main([*argv, "--output", str(toy.results / "plain.contamination.json")]) == 0
    capsys.readouterr()
    assert build(toy.results, out=toy.root / "out") == 0
    err = capsys.readouterr().err
    assert "2 contamination reports" in err and "none shown" in err
    assert "a contamination report without perplexities (made without --result); not shown" in err
    assert "clean_test_ppl" not in (toy.root / "out" / "toywiki.csv").read_text()


def test_a_report_given_where_a_result_is_wanted_is_one_line(
    toy: Toy, capsys: pytest.CaptureFixture[str]
) -> None:
    report = toy.results / "m.test.contamination.json"
    make_report(toy, report)
    capsys.readouterr()
    assert main(["compare", str(report), str(toy.result)]) == 2
    assert_one_line_error(capsys, "a contamination report (harness contamination), not a harness result")


def test_without_reports_the_committed_tables_and_readme_are_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``regenerate`` (as the README's tables are made) from the committed results, which carry
    no report, writes exactly the committed tables and leaves the README's tables as they are."""
    readme = tmp_path / "README.md"
    shutil.copy(REPO / "README.md", readme)
    monkeypatch.chdir(REPO)
    out = tmp_path / "tables"
    argv = ["regenerate", "--output-dir", str(out), "--readme", str(readme)]
    assert main(argv) == 0
    assert files(out) == files(REPO / "leaderboard" / "tables")
    assert readme.read_bytes() == (REPO / "README.md").read_bytes()
    assert "contamination" not in capsys.readouterr().out
