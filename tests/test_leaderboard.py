"""Leaderboard tables from hand-made result files: ranking, valid/test merging, rejection of
malformed and incompatible files, two runs kept apart, rendering, and the regenerate command."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest

from leaderboard.cli import _valid_to_test, main
from leaderboard.records import ResultError, collect, load_result, load_token_log_probs
from leaderboard.table import COLUMNS, LeaderboardTable, build_tables, load_reported
from wikitext_toolkit_core.catalogue import BENCHMARKS

PTB_VOCAB = "5398e3c52166790aae82ce03ceccccb6097d99ea25eea6045ff857418faad3ac"
#: PTB's valid and test tokens (Table 1 of Merity et al. 2016): a ptb result scores a whole split.
PTB_TOKENS = {"valid": 73_760, "test": 82_430}


def ptb_sha(split: str) -> str:
    benchmark = BENCHMARKS["ptb"]
    return benchmark.file_sha256[benchmark.split_files[split]]


def make_result(
    directory: Path,
    name: str,
    *,
    ppl: float,
    split: str = "test",
    model: str = "my.model",
    dataset: str = "ptb",
    tokens: int | None = None,
    logprobs: bool = True,
    **overrides,
) -> Path:
    """A result file as ``harness eval --output-dir`` writes it (both audits passed), with
    per-token log-probs whose mean NLL is exactly log(ppl); ``tokens`` by default the whole
    split's for ptb (:data:`PTB_TOKENS`), 1,000 for other datasets."""
    directory.mkdir(parents=True, exist_ok=True)
    record = {
        "schema_version": 2,
        "model": model,
        "model_args": {},
        "checkpoint": None,
        "dataset": dataset,
        "dataset_path": f"/data/{dataset}",
        "split": split,
        "dataset_sha256": ptb_sha(split) if dataset == "ptb" else "d" * 64,
        "train_sha256": ptb_sha("train") if dataset == "ptb" else "t" * 64,
        "dataset_verified": dataset == "ptb",
        "vocab_size": 10000,
        "vocab_sha256": PTB_VOCAB if dataset == "ptb" else "v" * 64,
        "oov_tokens": 0,
        "tokens": tokens if tokens is not None else PTB_TOKENS[split] if dataset == "ptb" else 1000,
        "nll": math.log(ppl),
        "perplexity": ppl,
        "bits_per_token": math.log2(ppl),
        "protocol": {"batch_size": 1, "bptt": 100},
        "num_parameters": 2_000_000,
        "device": "cpu (x86_64)",
        "git_commit": "abc123def4567890",
        "token_log_probs_file": None,
        "created": "2026-11-20T10:00:00+00:00",
        "audit": {
            "requested": 8,
            "checked": 8,
            "max_sum_error": 0.0,
            "max_target_error": 0.0,
            "passed": True,
        },
        "causality_audit": {
            "points": 4,
            "candidates": 4,
            "compared": "distributions",
            "max_difference": 0.0,
            "max_candidate_mass": 0.01,
            "tolerance": 0.0,
            "seconds": 0.01,
            "passed": True,
        },
        "audited": True,
        "unaudited_reasons": [],
    }
    record.update(overrides)
    if logprobs:
        values = np.full(record["tokens"], -record["nll"])
        np.save(directory / f"{name}.logprobs.npy", values)
        record["token_log_probs_file"] = f"{name}.logprobs.npy"  # relative to the JSON's folder
    path = directory / f"{name}.json"
    path.write_text(json.dumps(record), encoding="utf-8")
    return path


def table(tmp_path: Path, reported: bool = False) -> tuple[dict[str, LeaderboardTable], list[str], object]:
    collection = collect([tmp_path / "results"])
    warnings: list[str] = []
    tables = build_tables(
        collection, load_reported() if reported else None, roots=[tmp_path / "results"], warnings=warnings
    )
    return tables, warnings, collection


def column(table: LeaderboardTable, name: str) -> list:
    """Every row's entry in the column ``name``, in rank order."""
    return [row.value(name) for row in table.rows]


def test_rows_are_ranked_by_test_perplexity_with_valid_only_rows_last(tmp_path: Path) -> None:
    results = tmp_path / "results"
    make_result(results, "b.test", model="model.b", ppl=120.0)
    make_result(results, "a.test", model="model.a", ppl=90.5)
    make_result(results, "c.test", model="model.c", ppl=300.0)
    make_result(results, "d.valid", model="model.d", ppl=80.0, split="valid")  # no test figure
    make_result(results, "e.test", model="model.e", ppl=120.0)  # ties with model.b
    tables, _, collection = table(tmp_path)
    assert collection.rejected == []
    ptb = tables["ptb"]
    assert ptb.columns == COLUMNS
    assert column(ptb, "model") == ["model.a", "model.b", "model.e", "model.c", "model.d"]
    assert column(ptb, "rank") == [1, 2, 2, 4, None]
    assert set(column(ptb, "kind")) == {"user model"}


def test_valid_and_test_of_the_same_run_share_one_row(tmp_path: Path) -> None:
    results = tmp_path / "results"
    make_result(results, "m.valid", ppl=150.0, split="valid")
    make_result(results, "m.test", ppl=140.0, split="test")
    tables, _, _ = table(tmp_path)
    (row,) = tables["ptb"].rows
    assert (row.valid_ppl, row.test_ppl, row.params_millions) == (150.0, 140.0, 2.0)
    assert row.source == "m.valid.json + m.test.json"
    assert row.commit == "abc123def456" and row.date == "2026-11-20"


def test_a_file_without_a_protocol_name_scored_a_stream_like_one_that_names_it(tmp_path: Path) -> None:
    """Files written before ``protocol.name`` existed (schema 3 and older) scored a stream: they
    merge with, rank beside and compare with files that say ``stream``, not with ``documents``."""
    results = tmp_path / "results"
    stream = {"batch_size": 1, "bptt": 100, "name": "stream"}
    make_result(results, "m.valid", ppl=150.0, split="valid")  # no name
    make_result(results, "m.test", ppl=140.0, split="test", protocol=stream)
    make_result(results, "d.test", ppl=130.0, model="other", protocol={**stream, "name": "documents"})
    tables, _, _ = table(tmp_path)
    assert column(tables["ptb"], "source") == ["m.valid.json + m.test.json"]
    assert column(tables["ptb.documents"], "source") == ["d.test.json"]
    ratio = _valid_to_test([str(results / "m.valid.json"), str(results / "m.test.json")])
    assert (ratio.valid, ratio.test) == (150.0, 140.0)


def test_two_runs_of_one_model_are_kept_apart(tmp_path: Path) -> None:
    results = tmp_path / "results"
    # Different model arguments: two runs, named apart by their arguments.
    make_result(results / "kn5", "kn.test", model="kneser_ney", ppl=141.2, model_args={"order": 5})
    make_result(
        results / "kn5", "kn.valid", model="kneser_ney", ppl=148.0, split="valid", model_args={"order": 5}
    )
    make_result(results / "kn3", "kn.test", model="kneser_ney", ppl=148.3, model_args={"order": 3})
    # Same model and arguments, two checkpoints: named apart by checkpoint.
    make_result(results / "s1", "lstm.test", model="lstm", ppl=100.0, checkpoint="runs/seed1.pt")
    make_result(results / "s2", "lstm.test", model="lstm", ppl=102.0, checkpoint="runs/seed2.pt")
    # Same everything but the protocol: named apart by protocol.
    make_result(
        results / "b20",
        "lstm.test",
        model="lstm",
        ppl=104.0,
        checkpoint="runs/seed1.pt",
        protocol={"batch_size": 20, "bptt": 35},
    )
    tables, _, _ = table(tmp_path)
    names = column(tables["ptb"], "model")
    assert len(names) == len(set(names)) == 5, names
    assert "kneser_ney (order=5)" in names and "kneser_ney (order=3)" in names
    merged = next(row for row in tables["ptb"].rows if row.model == "kneser_ney (order=5)")
    assert (merged.valid_ppl, merged.test_ppl) == (148.0, 141.2)
    lstm = [name for name in names if name.startswith("lstm")]
    assert any("batch 20, bptt 35" in name for name in lstm)
    assert any("seed2.pt" in name for name in lstm)


def test_same_configuration_with_different_figures_is_not_paired_by_guess(tmp_path: Path) -> None:
    results = tmp_path / "results"
    # Two retrainings written to the same checkpoint path, evaluated from two folders: the valid
    # and test results of one folder pair up; the other folder's test result stays alone.
    make_result(results / "r1", "m.test", ppl=100.0, created="2026-11-01T00:00:00+00:00")
    make_result(results / "r1", "m.valid", ppl=105.0, split="valid")
    make_result(results / "r2", "m.test", ppl=110.0, created="2026-11-02T00:00:00+00:00")
    make_result(results / "copy", "m.test", ppl=100.0, created="2026-10-01T00:00:00+00:00")  # a copy
    tables, warnings, _ = table(tmp_path)
    valid_by_test = {row.test_ppl: row.valid_ppl for row in tables["ptb"].rows}
    assert valid_by_test == {100.0: 105.0, 110.0: None}
    assert len(set(column(tables["ptb"], "model"))) == 2
    assert any("counted once" in w for w in warnings)
    # Within one folder and commit nothing decides the pairing: no row is guessed.
    make_result(results / "r1", "m2.test", ppl=120.0)
    tables, _, _ = table(tmp_path)
    rows = tables["ptb"].rows
    assert len(rows) == 4 and sum(row.valid_ppl is not None for row in rows) == 1
    assert sum("not paired" in row.notes for row in rows) == 3


@pytest.mark.parametrize(
    "content, reason",
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "not a harness result"),
        (json.dumps({"schema_version": 1}), "missing keys"),
        (
            '{"schema_version": ' + "1" * 5000 + "}",
            "not a harness result (an integer of more than 4,300 digits)",
        ),
    ],
)
def test_unparseable_files_are_rejected_by_name(tmp_path: Path, content: str, reason: str) -> None:
    results = tmp_path / "results"
    make_result(results, "good.test", ppl=100.0)
    (results / "bad.json").write_text(content, encoding="utf-8")
    tables, _, collection = table(tmp_path)
    assert len(tables["ptb"].rows) == 1
    assert len(collection.rejected) == 1
    assert str(results / "bad.json") in collection.rejected[0] and reason in collection.rejected[0]


@pytest.mark.parametrize(
    "overrides, reason",
    [
        ({"schema_version": 6}, "schema_version 6 is not supported"),
        ({"perplexity": 99.0}, "is not exp(nll"),
        ({"tokens": "many"}, "tokens must be int"),
        ({"protocol": {"batch_size": 1}}, "protocol.bptt"),
        (
            {"dataset_sha256": "0" * 64},
            "not that of the ptb release's test file: not ranked under the name ptb",
        ),
        ({"audited": False}, "audited is false but the audit records say otherwise"),
        ({"bits_per_token": 1.0}, "bits_per_token 1.0 is not nll / ln 2"),
        ({"created": 12345}, "created must be str or null, got 12345"),
        ({"scoring": "bpe"}, "scoring 'bpe' is not one of word, subword"),
        ({"plugin_process": "thread"}, "plugin_process 'thread' is not one of worker, harness"),
        (
            {"plugin_metadata": {"test_time_adaptation": ""}},
            "plugin_metadata: test_time_adaptation must be a non-empty string",
        ),
        ({"device": "cpu\ud800"}, "not a harness result (a string holds '\\ud800': surrogates not allowed)"),
    ],
)
def test_malformed_results_are_rejected_by_name(tmp_path: Path, overrides: dict, reason: str) -> None:
    results = tmp_path / "results"
    make_result(results, "good.test", ppl=100.0)
    make_result(results, "bad.test", ppl=80.0, model="bad.model", logprobs=False, **overrides)
    tables, _, collection = table(tmp_path)
    assert column(tables["ptb"], "model") == ["my.model"]
    assert len(collection.rejected) == 1, collection.rejected
    assert "bad.test.json" in collection.rejected[0] and reason in collection.rejected[0]


def test_other_json_beside_the_results_is_named_and_skipped(tmp_path: Path) -> None:
    make_result(tmp_path / "results", "good.test", ppl=100.0)
    (tmp_path / "results" / "gates.json").write_text(json.dumps({"model": "pointer", "bins": 50}))
    tables, _, collection = table(tmp_path)
    assert len(tables["ptb"].rows) == 1 and collection.rejected == []
    assert len(collection.notes) == 1 and "gates.json: not a harness result file" in collection.notes[0]


def test_other_json_files_found_in_a_directory_are_one_note_and_named_ones_one_each(tmp_path: Path) -> None:
    results = tmp_path / "results"
    make_result(results, "good.test", ppl=100.0)
    configs = [results / "training" / f"{name}.config.json" for name in ("lstm", "pointer")]
    configs[0].parent.mkdir()
    for config in configs:
        config.write_text(json.dumps({"options": {"seed": 1}}))
    collection = collect([results])
    assert len(collection.results) == 1 and collection.rejected == []
    assert collection.notes == [
        f"2 JSON files that are not harness results (no schema_version or perplexity) skipped, "
        f"in {configs[0].parent}"
    ]
    named = collect([*configs, results]).notes  # named first: named
    assert [note.split(":")[0] for note in named] == [str(config) for config in configs]


def test_missing_key_is_named(tmp_path: Path) -> None:
    path = make_result(tmp_path / "results", "m.test", ppl=100.0)
    record = json.loads(path.read_text())
    del record["vocab_sha256"]
    path.write_text(json.dumps(record))
    _, _, collection = table(tmp_path)
    assert collection.results == [] and "missing key vocab_sha256" in collection.rejected[0]


def test_conflicting_vocabulary_for_one_dataset_is_rejected(tmp_path: Path) -> None:
    results = tmp_path / "results"
    for name in ("a", "b"):
        make_result(results, f"{name}.test", model=name, ppl=100.0, dataset="mycorpus")
    make_result(results, "odd.test", model="odd", ppl=50.0, dataset="mycorpus", vocab_sha256="w" * 64)
    tables, _, collection = table(tmp_path)
    assert sorted(column(tables["mycorpus"], "model")) == ["a", "b"]
    assert len(collection.rejected) == 1 and "odd.test.json: vocab_sha256" in collection.rejected[0]


def test_reported_rows_merge_with_reproduced_ones(tmp_path: Path) -> None:
    make_result(tmp_path / "results", "kn.test", model="baselines.kneser_ney", ppl=141.19)
    make_result(
        tmp_path / "results", "corpus.test", model="baselines.kneser_ney", ppl=300.0, dataset="my-wiki"
    )
    tables, _, _ = table(tmp_path, reported=True)
    assert set(tables) == {"ptb", "wikitext-2", "wikitext-103", "my-wiki"}
    kinds = column(tables["ptb"], "kind")
    assert kinds.count("reported") == 22 and kinds.count("reproduced baseline") == 1
    assert column(tables["ptb"], "test_ppl") == sorted(column(tables["ptb"], "test_ppl"))
    kn = next(row for row in tables["ptb"].rows if row.model == "KN-5 (Mikolov & Zweig 2012)")
    assert kn.test_ppl == 141.2 and "1609.07843" in kn.source
    assert column(tables["my-wiki"], "kind") == ["reproduced baseline"]


def test_reported_table_is_complete_and_cited() -> None:
    reported = load_reported()
    ptb_table2 = reported[(reported["dataset"] == "ptb") & (reported["table"] == "Table 2")]
    assert len(ptb_table2) == 17
    assert ptb_table2["test_ppl"].max() == 141.2 and ptb_table2["test_ppl"].min() == 70.9
    grave = reported[reported["source"] == "Grave et al. 2016"].set_index(["dataset", "model"])["test_ppl"]
    assert [grave[(d, "LSTM (Grave et al. 2016)")] for d in ("ptb", "wikitext-2", "wikitext-103")] == [
        82.3,
        99.3,
        48.7,
    ]
    assert [
        grave[(d, "LSTM + neural cache (Grave et al. 2016)")] for d in ("ptb", "wikitext-2", "wikitext-103")
    ] == [72.1, 68.9, 40.8]
    krause = reported[reported["source"] == "Krause et al. 2018"].set_index("dataset")
    assert krause["test_ppl"].to_dict() == {"ptb": 51.1, "wikitext-2": 44.3}  # AWD-LSTM 57.3, 65.8
    assert krause["notes"].str.contains("uses the test text seen so far").all()
    assert (reported["source"] != "").all() and reported["url"].str.startswith("https://arxiv.org/abs/").all()
    assert reported["verified_by"].str.len().gt(0).all()


def test_cli_build_writes_every_format_and_names_rejects(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    make_result(tmp_path / "results", "m.test", ppl=100.0)
    (tmp_path / "results" / "broken.json").write_text("{", encoding="utf-8")
    out = tmp_path / "tables"
    assert (
        main(
            [
                "build",
                str(tmp_path / "results"),
                "--output-dir",
                str(out),
                "--format",
                "csv",
                "markdown",
                "html",
            ]
        )
        == 0
    )
    captured = capsys.readouterr()
    assert "broken.json" in captured.err and "rejected" in captured.err
    assert {p.name for p in out.iterdir()} == {
        f"{d}.{e}" for d in ("ptb", "wikitext-2", "wikitext-103") for e in ("csv", "md", "html")
    }
    with open(out / "ptb.csv", newline="") as handle:
        rows = list(csv.reader(handle))
    assert rows[0] == COLUMNS
    assert "100.0" in [r[4] for r in rows[1:]]
    markdown = (out / "ptb.md").read_text()
    assert markdown.startswith("| rank | model |") and "| 100.0 | user model |" in markdown
    assert "<table>" in (out / "ptb.html").read_text()
    assert main(["build", str(tmp_path / "results"), "--output-dir", str(out), "--strict"]) == 1


def test_regenerate_refreshes_tables_and_readme(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.chdir(tmp_path)
    make_result(tmp_path / "results", "m.test", ppl=100.0)
    readme = tmp_path / "README.md"
    readme.write_text("intro\n<!-- leaderboard:ptb:begin -->\nold\n<!-- leaderboard:ptb:end -->\nrest\n")
    assert main(["regenerate", "--readme", "README.md"]) == 0
    assert (tmp_path / "leaderboard" / "tables" / "ptb.csv").is_file()
    text = readme.read_text()
    assert "old" not in text and "| rank | model |" in text and text.endswith("rest\n")
    assert "updated ptb" in capsys.readouterr().out


def test_regenerate_removes_the_tables_of_datasets_without_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.chdir(tmp_path)
    results = tmp_path / "results"
    make_result(results, "m.test", ppl=100.0)
    old = make_result(results / "corpus", "k.test", ppl=150.0, dataset="old-corpus")
    assert main(["regenerate"]) == 0
    tables = tmp_path / "leaderboard" / "tables"
    assert {p.name for p in tables.iterdir()} >= {"old-corpus.csv", "old-corpus.md", "ptb.csv"}
    (tables / "notes.csv").write_text("name,value\nx,1\n")  # someone else's CSV: kept
    old.unlink()
    (results / "bad.json").write_text("{not json")
    assert main(["regenerate"]) == 1  # a rejected file: nothing is removed
    assert (tables / "old-corpus.csv").is_file() and "removed" not in capsys.readouterr().out
    (results / "bad.json").unlink()
    assert main(["regenerate"]) == 0
    assert "2 removed (old-corpus.csv, old-corpus.md: no results)" in capsys.readouterr().out
    names = {p.name for p in tables.iterdir()}
    assert {"notes.csv", "ptb.csv", "ptb.md"} <= names and not any("old-corpus" in n for n in names)


def test_token_log_probs_are_found_beside_a_moved_result(tmp_path: Path) -> None:
    path = make_result(tmp_path / "old", "m.test", ppl=100.0)
    record = json.loads(path.read_text())
    record["token_log_probs_file"] = "/somewhere/else/m.test.logprobs.npy"  # absolute, now stale
    path.write_text(json.dumps(record))
    values = load_token_log_probs(load_result(path))
    assert len(values) == PTB_TOKENS["test"]
    (tmp_path / "old" / "m.test.logprobs.npy").unlink()
    with pytest.raises(ResultError, match="not found"):
        load_token_log_probs(load_result(path))


def test_token_log_probs_in_an_npz_archive_are_rejected_in_one_line(tmp_path: Path) -> None:
    path = make_result(tmp_path / "results", "m.test", ppl=100.0)
    with open(tmp_path / "results" / "m.test.logprobs.npy", "wb") as handle:
        np.savez(handle, np.full(1000, -math.log(100.0)))
    _, _, collection = table(tmp_path)
    assert collection.results == []
    assert collection.rejected == [
        f"{path.with_suffix('.logprobs.npy')}: not a .npy array (an .npz archive of arrays)"
    ]


@pytest.mark.parametrize("largest, accepted", [(3.7e-8, True), (1e-3, False)])
def test_token_log_probs_a_rounding_above_zero_are_read_as_the_harness_wrote_them(
    tmp_path: Path, largest: float, accepted: bool
) -> None:
    """A mixture model (the pointer) may round a near-certain token's log-probability to just
    above 0; the harness accepts up to ``MAX_LOG_PROB`` and the leaderboard reads the same."""
    path = make_result(tmp_path / "results", "m.test", ppl=100.0)
    values = np.full(PTB_TOKENS["test"], -math.log(100.0))
    values[1] -= largest - values[0]  # the mean NLL unchanged
    values[0] = largest
    np.save(path.with_suffix(".logprobs.npy"), values)
    _, _, collection = table(tmp_path)
    assert len(collection.results) == int(accepted)
    if not accepted:
        assert collection.rejected == [
            f"{path.with_suffix('.logprobs.npy')}: log-probabilities must be finite and at most 1e-06"
        ]


def test_files_named_that_are_not_json_are_noted_and_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """``build results/ptb/*``: the shell names the per-token .npy files and training logs too."""
    results = tmp_path / "results"
    make_result(results, "m.test", ppl=100.0)
    (results / "run.log.jsonl").write_text('{"epoch": 1}\n', encoding="utf-8")
    named = sorted(str(path) for path in results.iterdir())
    assert main(["build", *named, "--output-dir", str(tmp_path / "tables"), "--strict"]) == 0
    err = capsys.readouterr().err
    assert "rejected" not in err
    for name in ("m.test.logprobs.npy", "run.log.jsonl"):
        assert f"note: {results / name}: not a .json file, so not a harness result; skipped\n" in err


def test_a_file_named_twice_is_read_once(tmp_path: Path) -> None:
    results = tmp_path / "results"
    path = make_result(results, "m.test", ppl=100.0)
    collection = collect([results, path, results, Path(f"{results}/../results/m.test.json")])
    assert [result.path for result in collection.results] == [path]
    warnings: list[str] = []
    assert len(build_tables(collection, None, warnings=warnings)["ptb"].rows) == 1 and warnings == []


def test_datasets_whose_names_make_the_same_file_name_get_a_file_each(tmp_path: Path) -> None:
    results = tmp_path / "results"
    make_result(results, "a.test", model="model.a", ppl=100.0, dataset="my_corpus")
    make_result(results, "b.test", model="model.b", ppl=200.0, dataset="my corpus")
    out = tmp_path / "tables"
    assert main(["build", str(results), "--output-dir", str(out), "--no-reported"]) == 0
    assert sorted(path.name for path in out.iterdir()) == ["my_corpus-954a6719.csv", "my_corpus.csv"]
    assert "model.a" in (out / "my_corpus.csv").read_text()
    assert "model.b" in (out / "my_corpus-954a6719.csv").read_text()


def test_the_package_docstring_names_every_kind_and_figure() -> None:
    import leaderboard
    from leaderboard.table import KINDS

    assert leaderboard.__doc__ is not None
    assert "plot {bars,frequency,gates,curves,zipf}" in leaderboard.__doc__
    assert all(f"``{kind}``" in leaderboard.__doc__ for kind in KINDS)


def test_the_committed_results_are_all_read(capsys: pytest.CaptureFixture) -> None:
    """Every result file in results/ (schema 1 ones included, as unaudited) is accepted: its
    figures agree with each other and with its per-token log-probabilities, which are all there."""
    results = Path(__file__).resolve().parent.parent / "results"
    collection = collect([results], include_unaudited=True, require_token_log_probs=True)
    assert collection.rejected == [] and len(collection.results) >= 16
    assert all(result.verified for result in collection.results)
    audited = collect([results])
    assert {r.path for r in audited.results} == {
        r.path for r in collection.results if not r.unaudited_reasons
    }
    assert len(audited.unaudited) == len(collection.results) - len(audited.results)


def test_a_model_that_adapts_to_the_scored_text_is_noted_as_such(tmp_path: Path) -> None:
    """What a plugin declares as its test-time adaptation is noted in its row, once for its
    valid and test results; a static model's row says nothing of the kind."""
    adaptive = {"test_time_adaptation": "neural cache of the last 2000 positions' hidden states"}
    make_result(tmp_path, "cache.valid", ppl=72.0, model="my.cache", split="valid", plugin_metadata=adaptive)
    make_result(tmp_path, "cache.test", ppl=70.0, model="my.cache", plugin_metadata=adaptive)
    make_result(tmp_path, "lstm.test", ppl=77.0, model="my.lstm")
    table = build_tables(collect(sorted(tmp_path.glob("*.json"))), None)["ptb"]
    notes = {row.model: row.notes for row in table.rows}
    note = f"test-time adaptation (uses the test text seen so far): {adaptive['test_time_adaptation']}"
    assert notes["my.cache"].count(note) == 1
    assert "test-time adaptation" not in notes["my.lstm"]


def test_subword_results_are_ranked_in_their_own_section(tmp_path: Path) -> None:
    """A subword model (no distribution over the word vocabulary, causality audit passed) is
    audited under the audits that apply to it, and ranked among subword models only."""
    no_distributions = {
        "requested": 8,
        "checked": 0,
        "max_sum_error": 0.0,
        "max_target_error": 0.0,
        "passed": False,
    }
    make_result(tmp_path, "lstm", ppl=100.0, model="my.lstm")
    make_result(tmp_path, "kn", ppl=140.0, model="my.kn")
    make_result(
        tmp_path,
        "gpt",
        ppl=60.0,
        model="harness.plugins.hf",
        scoring="subword",
        audit=no_distributions,
        plugin_metadata={"scoring": "subword"},
    )
    make_result(
        tmp_path,
        "small-gpt",
        ppl=120.0,
        model="harness.plugins.hf:small",
        scoring="subword",
        audit=no_distributions,
    )
    table = build_tables(collect(sorted(tmp_path.glob("*.json"))), None)["ptb"]
    assert [(row.model, row.kind, row.rank) for row in table.rows] == [
        ("my.lstm", "user model", 1),
        ("my.kn", "user model", 2),
        ("harness.plugins.hf", "subword", 1),
        ("harness.plugins.hf:small", "subword", 2),
    ]
    word_level_claim = make_result(tmp_path / "bad", "gpt", ppl=60.0, audit=no_distributions)
    with pytest.raises(ResultError, match="audited is true but the audit records say otherwise"):
        load_result(word_level_claim)
