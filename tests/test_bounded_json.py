"""Every JSON input is read through :mod:`wikitext_toolkit_core.bounded_json` (issue 45): a document nested
deeper than :data:`~wikitext_toolkit_core.bounded_json.MAX_DEPTH` is one ``error:`` line and exit status 2,
never a ``RecursionError`` traceback, and any other document parses exactly as :func:`json.loads`
parses it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import assert_one_line_error

from harness.cli import main as harness_main
from wikitext_builder.cli import main as builder_main
from wikitext_toolkit_core.bounded_json import MAX_DEPTH, JSONTooDeep, loads

#: Arrays within objects, 100,000 levels deep in all.
DEEP = '{"a": [' * 50_000 + "]}" * 50_000
TOO_DEEP = f"nested deeper than {MAX_DEPTH} levels"
SMALL_BUILD = ["--quiet", "--valid-articles", "1", "--test-articles", "1", "--min-count", "1"]
OFFLINE_API = ["--api-url", "http://127.0.0.1:9/w/api.php", "--max-attempts", "1"]  # a closed port


def nested(depth: int) -> str:
    """A list ``depth`` levels deep holding one number."""
    return "[" * depth + "1" + "]" * depth


# ---- the reader ----------------------------------------------------------------------------------


@pytest.mark.parametrize("document", [DEEP, DEEP.encode("utf-8"), nested(100_000), nested(MAX_DEPTH + 1)])
def test_a_document_nested_too_deep_is_refused_before_json_reads_it(document: str | bytes) -> None:
    with pytest.raises(JSONTooDeep, match=f"^{TOO_DEEP}: line 1 column ") as refused:
        loads(document)
    assert isinstance(refused.value, json.JSONDecodeError)  # a ValueError, as every reader expects
    text = document.decode() if isinstance(document, bytes) else document
    openings = [position for position, character in enumerate(text[:1_000]) if character in "[{"]
    assert refused.value.pos == openings[MAX_DEPTH]  # the first bracket past the limit


def test_the_limit_itself_is_accepted_and_may_be_lowered() -> None:
    assert loads(nested(MAX_DEPTH)) == json.loads(nested(MAX_DEPTH))
    assert loads(nested(3), max_depth=3) == [[[1]]]
    with pytest.raises(JSONTooDeep, match="nested deeper than 2 levels: line 1 column 3 "):
        loads(nested(3), max_depth=2)


def test_many_brackets_side_by_side_are_not_depth() -> None:
    document = json.dumps([[[] for _ in range(MAX_DEPTH)], {"a": [{}] * MAX_DEPTH}])
    assert loads(document) == json.loads(document)


@pytest.mark.parametrize(
    "value",
    [
        "[" * 100_000,  # brackets in a string are text
        "{" * 1_000 + "]" * 1_000,
        '"[' * 1_000,  # escaped quotes do not end the string
        "\\" * 3 + "[" * 1_000,  # nor does an escaped backslash before them
        "\\u005b" * 1_000 + "\n\t[",  # an escaped bracket, a newline, a tab
    ],
)
def test_brackets_inside_strings_are_not_counted(value: str) -> None:
    document = json.dumps({"text": value, "list": [value]})
    assert loads(document) == json.loads(document) == {"text": value, "list": [value]}


def test_an_escaped_backslash_ends_before_the_quote_that_closes_its_string() -> None:
    document = '["\\\\", ' + nested(MAX_DEPTH) + "]"  # ["\\", [[...]]]: the list is one level deeper
    assert json.loads(document)[0] == "\\"
    with pytest.raises(JSONTooDeep):
        loads(document)


@pytest.mark.parametrize(
    "document",
    [
        '{"dataset": "ptb", "split": "test", "tokens": 82430, "perplexity": 47.7, "extra": null}',
        '[1, -2.5e-3, true, false, null, "caf\\u00e9 \\ud83d\\ude00", "\\ud800", {"": []}]',
        "[NaN, Infinity, -Infinity]",
        '  \n {"a": {"b": {"c": {"d": [1, 2, {"e": "}]{["}]}}}}  \n',
        '"a string"',
        "12",
        json.dumps({"title": "Town", "wikitext": "[[Link]] {{Infobox|a=[1]}}\n" * 500}),
        b'{"a": 1}',
        b'\xef\xbb\xbf{"a": "\xc3\xa9"}',  # a UTF-8 byte-order mark, as json.loads takes bytes
        '{"a": [1, {"b": "\u00e9"}]}'.encode("utf-16"),
        '{"a": [1]}'.encode("utf-32-le"),
    ],
)
def test_a_document_parses_exactly_as_json_loads_parses_it(document: str | bytes) -> None:
    expected = json.loads(document)
    assert json.dumps(loads(document)) == json.dumps(expected)  # NaN included


@pytest.mark.parametrize(
    "document", ["", "[1, 2", '{"a": }', '["unterminated', "[1]]", "\ufeff[1]", b"\xff\xfe\x00"]
)
def test_a_document_that_is_not_json_fails_as_json_loads_fails(document: str | bytes) -> None:
    with pytest.raises(ValueError) as expected:
        json.loads(document)
    with pytest.raises(ValueError) as refused:
        loads(document)
    assert (type(refused.value), str(refused.value)) == (type(expected.value), str(expected.value))


# ---- every JSON input of the command lines -------------------------------------------------------


def contamination_argv(tmp_path: Path, corpus: Path) -> list[str]:
    output = str(tmp_path / "report.json")
    return ["contamination", str(corpus), "--dataset", "ptb", "--split", "test", "--output", output]


def assert_one_line_refusal(capsys: pytest.CaptureFixture[str], *parts: str) -> None:
    error = assert_one_line_error(capsys, *parts, TOO_DEEP)
    assert "Traceback" not in error and "RecursionError" not in error


def test_contamination_result_nested_too_deep(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus, result = tmp_path / "corpus.txt", tmp_path / "model.ptb.test.json"
    corpus.write_text("text\n", encoding="utf-8")
    result.write_text(DEEP, encoding="utf-8")
    assert harness_main([*contamination_argv(tmp_path, corpus), "--result", str(result)]) == 2
    assert_one_line_refusal(capsys, f"--result {result}: not a readable JSON result")
    assert not (tmp_path / "report.json").exists()


def test_contamination_jsonl_corpus_line_nested_too_deep(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = tmp_path / "web.jsonl"
    corpus.write_text('{"text": "fine [[ text"}\n' + DEEP + "\n", encoding="utf-8")
    assert harness_main(contamination_argv(tmp_path, corpus)) == 2
    assert_one_line_refusal(capsys, f"corpus {corpus}:2: not a JSON line")
    assert not (tmp_path / "report.json").exists()


def test_builder_jsonl_pool_line_nested_too_deep(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pool = tmp_path / "pool.jsonl"
    pool.write_text(DEEP + "\n", encoding="utf-8")
    assert builder_main(["--jsonl", str(pool), "--output-dir", str(tmp_path / "out"), *SMALL_BUILD]) == 2
    assert_one_line_refusal(capsys, f"{pool}:1: not a pool record")


def test_builder_manifest_line_nested_too_deep(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifest = tmp_path / "manifest.jsonl"
    manifest.write_text(DEEP + "\n", encoding="utf-8")
    rebuild = [*OFFLINE_API, "--quiet", "--output-dir", str(tmp_path / "again")]
    assert builder_main([*rebuild, "--from-manifest", str(manifest)]) == 2
    assert_one_line_refusal(capsys, f"{manifest}:1: not a manifest record")


@pytest.mark.parametrize("min_count", [[], ["--min-count", "1"]])
def test_builder_manifest_stats_nested_too_deep(
    min_count: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest, stats = tmp_path / "manifest.jsonl", tmp_path / "stats.json"
    record = {"title": "Town", "page_id": 1, "revision_id": 10, "timestamp": None, "split": "train"}
    manifest.write_text(json.dumps(record) + "\n", encoding="utf-8")
    stats.write_text(DEEP, encoding="utf-8")
    rebuild = [*OFFLINE_API, "--quiet", "--output-dir", str(tmp_path / "again"), *min_count]
    assert builder_main([*rebuild, "--from-manifest", str(manifest)]) == 2
    assert_one_line_refusal(capsys, f"{stats}: not JSON")
