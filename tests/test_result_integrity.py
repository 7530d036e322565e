"""From ``harness eval`` to the leaderboard: audits recorded and enforced, plugin identity kept in
full, hand-edited results and modified benchmarks refused."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from harness import results
from harness.cli import main as harness_main
from leaderboard.cli import main as leaderboard_main
from leaderboard.records import collect, load_result
from leaderboard.table import build_tables
from wikitext_toolkit_core import result_schema as schema

TWO_FACTORIES = textwrap.dedent('''
    """Two models in one module: add-one and add-ten unigrams."""
    import numpy as np

    from harness import ChunkScores


    class Unigram:
        def __init__(self, log_probs, give_distributions):
            self.log_probs, self.give_distributions = log_probs, give_distributions

        def reset(self, batch_size):
            pass

        def score(self, chunk):
            wanted = chunk.distribution_mask
            rows = None
            if self.give_distributions and wanted is not None:
                rows = np.broadcast_to(self.log_probs, (int(wanted.sum()), len(self.log_probs)))
            return ChunkScores(self.log_probs[chunk.targets], rows)


    def _unigram(dataset, smoothing, give_distributions=True):
        counts = np.bincount(dataset.tokens("train").ids, minlength=len(dataset.vocab)) + smoothing
        return Unigram(np.log(counts / counts.sum()), give_distributions)


    def add_one(dataset, *, device, checkpoint):
        return _unigram(dataset, 1.0)


    def add_ten(dataset, *, device, checkpoint):
        return _unigram(dataset, 10.0)


    def targets_only(dataset, *, device, checkpoint):
        return _unigram(dataset, 1.0, give_distributions=False)


    def reads_targets(dataset, *, device, checkpoint):
        model = _unigram(dataset, 1.0, give_distributions=False)
        model.score = lambda chunk: ChunkScores(np.full(chunk.targets.shape, np.log(0.9)))
        return model


    load_model = add_one
''')


@pytest.fixture
def plugins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "two_factories.py").write_text(TWO_FACTORIES, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    return "two_factories"


def _eval(plugin: str, corpus: Path, out: Path, *options: str) -> int:
    return harness_main(
        [
            "eval",
            plugin,
            "--dataset",
            str(corpus),
            "--split",
            "valid",
            "test",
            "--output-dir",
            str(out),
            *options,
        ]
    )


def _records(out: Path) -> dict[str, dict]:
    return {path.name: json.loads(path.read_text()) for path in sorted(out.glob("*.json"))}


def test_two_factories_of_one_module_stay_apart_through_to_the_leaderboard(
    plugins: str, corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "results"
    for plugin in (f"{plugins}:add_one", f"{plugins}:add_ten", plugins, f"{plugins}:load_model"):
        assert _eval(plugin, corpus, out) == 0
    records = _records(out)
    assert sorted(records) == [f"{plugins}-add_one.toy.{s}.json" for s in ("test", "valid")] + [
        f"{plugins}-add_ten.toy.{s}.json" for s in ("test", "valid")
    ] + [f"{plugins}.toy.{s}.json" for s in ("test", "valid")]
    assert {r["model"] for r in records.values()} == {
        f"{plugins}:add_one",
        f"{plugins}:add_ten",
        plugins,
    }  # load_model is the module's own
    assert all(r["audited"] and r["schema_version"] == schema.SCHEMA_VERSION for r in records.values())
    frame = build_tables(collect([out]), None, roots=[out])["toy"].frame().set_index("model")
    assert sorted(frame.index) == [plugins, f"{plugins}:add_one", f"{plugins}:add_ten"]
    assert frame.loc[f"{plugins}:add_one", "test_ppl"] != frame.loc[f"{plugins}:add_ten", "test_ppl"]
    assert frame["rank"].notna().all()


def test_a_bad_factory_name_is_one_line(plugins: str, corpus: Path, capsys: pytest.CaptureFixture) -> None:
    assert harness_main(["eval", f"{plugins}:nope", "--dataset", str(corpus)]) == 2
    err = capsys.readouterr().err
    assert err == f"error: plugin '{plugins}:nope': {plugins} has no callable 'nope'\n"


def test_the_result_records_both_audits(plugins: str, corpus: Path, tmp_path: Path) -> None:
    assert (
        harness_main(
            [
                "eval",
                plugins,
                "--dataset",
                str(corpus),
                "--split",
                "test",
                "--output",
                str(tmp_path / "r.json"),
                "--causality-audit",
                "3",
            ]
        )
        == 0
    )
    record = json.loads((tmp_path / "r.json").read_text())
    assert record["audit"]["passed"] and record["audit"]["checked"] == 8
    causality = record["causality_audit"]
    assert causality["passed"] and causality["points"] == 3 and causality["audit_pass"] in ("first", "second")
    assert causality["compared"] == "targets and distributions" and causality["compared_positions"] >= 1
    assert causality["max_difference"] == 0.0 and isinstance(causality["seed"], int)
    assert causality["tolerance"] == 0.0 and causality["max_pair_mass"] <= 1
    assert causality["evidence"] <= causality["evidence_bound"]
    fewer = "causality audit of 3 substitutions, fewer than the default 6 (--causality-audit 3): not ranked"
    assert record["audited"] is False and record["unaudited_reasons"] == [fewer]  # a quarter of 25 tokens


@pytest.mark.parametrize("options", [[], ["--audit", "0"], ["--causality-audit", "0"]])
def test_what_the_harness_writes_is_the_schema_the_leaderboard_reads(
    plugins: str, corpus: Path, tmp_path: Path, options: list[str]
) -> None:
    """One schema (``wikitext_toolkit_core.result_schema``): the keys and their types and the audit rule, for
    the writer and the reader alike; the per-token file's name (``harness.results``)."""
    out = tmp_path / "results"
    assert _eval(f"{plugins}:targets_only", corpus, out, *options) == 0
    for name, record in _records(out).items():
        assert record["schema_version"] == schema.SCHEMA_VERSION
        for key, types in {**schema.REQUIRED_KEYS, **schema.KEYS_ADDED_IN_2}.items():
            assert isinstance(record[key], types), key
        assert record["unaudited_reasons"] == schema.ResultRecord.from_json(record).rule_unaudited_reasons()
        assert (out / results.token_log_probs_name(name)).is_file()
        assert load_result(out / name).unaudited_reasons == record["unaudited_reasons"]


def test_a_leaking_plugin_is_refused_by_the_cli_in_one_line(
    plugins: str, corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    assert _eval(f"{plugins}:reads_targets", corpus, tmp_path / "out") == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {plugins}:reads_targets toy/valid: causality audit failed at token ")
    assert (
        "the probabilities it gives the real token and another one there, after the same text, sum to 1.8 > 1"
        in err
    )
    assert "it reads the token it predicts, or its scores are not normalised" in err and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "plugin, options, reason",
    [
        (":targets_only", [], "the plugin gives no full distributions: normalization not audited"),
        ("", ["--audit", "0"], "probability audit off (--audit 0)"),
        ("", ["--causality-audit", "0"], "causality audit off (--causality-audit 0)"),
    ],
)
def test_unaudited_results_are_flagged_and_kept_out_of_the_ranking_unless_asked(
    plugins: str,
    corpus: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture,
    plugin: str,
    options: list[str],
    reason: str,
) -> None:
    out = tmp_path / "results"
    assert _eval(f"{plugins}:add_ten", corpus, out) == 0  # an audited run beside it
    assert _eval(f"{plugins}{plugin}", corpus, out, *options) == 0
    assert f"unaudited: {reason}" in capsys.readouterr().err
    unaudited = [r for r in _records(out).values() if not r["audited"]]
    assert len(unaudited) == 2 and all(r["unaudited_reasons"] == [reason] for r in unaudited)

    tables = tmp_path / "tables"
    assert (
        leaderboard_main(
            [
                "build",
                str(out),
                "--output-dir",
                str(tables),
                "--no-reported",
                "--format",
                "markdown",
                "--strict",
            ]
        )
        == 0
    )
    captured = capsys.readouterr()
    assert captured.err.count("kept out of the ranking") == 2 and reason in captured.err
    assert "2 unaudited kept out" in captured.out
    markdown = (tables / "toy.md").read_text()
    assert markdown.count("| user model |") == 1 and "unaudited" not in markdown

    assert (
        leaderboard_main(
            [
                "build",
                str(out),
                "--output-dir",
                str(tables),
                "--no-reported",
                "--format",
                "markdown",
                "--include-unaudited",
            ]
        )
        == 0
    )
    rows = (tables / "toy.md").read_text().splitlines()[2:]
    assert rows[0].startswith("| 1 | two_factories:add_ten |")
    assert rows[1].startswith("|  | ") and "| unaudited |" in rows[1]
    assert f"unaudited: {reason}" in rows[1]


def test_a_hand_edited_result_is_rejected_naming_the_log_prob_file(
    plugins: str, corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "results"
    assert _eval(plugins, corpus, out) == 0
    path = out / f"{plugins}.toy.test.json"
    record = json.loads(path.read_text())
    record.update(nll=0.0, perplexity=1.0, bits_per_token=0.0)  # "perplexity 1.00"
    path.write_text(json.dumps(record))
    collection = collect([out])
    (rejected,) = collection.rejected
    assert rejected.startswith(str(out / f"{plugins}.toy.test.logprobs.npy") + ": mean NLL")
    assert "does not match the result's nll 0 (perplexity 1)" in rejected
    assert [r.split for r in collection.results] == ["valid"]
    # A token count edited alone is caught too (14 of 15 tokens: the audits' defaults stay the same).
    record = json.loads((out / f"{plugins}.toy.valid.json").read_text())
    record["tokens"] -= 1
    (out / f"{plugins}.toy.valid.json").write_text(json.dumps(record))
    assert any("log-probabilities for a result of" in line for line in collect([out]).rejected)
    assert leaderboard_main(["build", str(out), "--output-dir", str(tmp_path / "t"), "--strict"]) == 1


def test_a_modified_benchmark_is_not_ranked_under_its_name(
    plugins: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    fake = tmp_path / "copy" / "ptb"  # a directory that happens to be called ptb
    fake.mkdir(parents=True)
    for split in ("train", "valid", "test"):
        (fake / f"ptb.{split}.txt").write_text(" the cat sat \n", encoding="utf-8")
    out = tmp_path / "results"
    assert _eval(plugins, fake, out) == 0
    records = _records(out)
    assert {r["dataset"] for r in records.values()} == {"ptb"}
    assert not any(r["dataset_verified"] for r in records.values())
    collection = collect([out])
    assert collection.results == [] and len(collection.rejected) == 2
    assert all(
        "dataset_sha256 is not that of the ptb release's" in line and "not ranked under the name ptb" in line
        for line in collection.rejected
    )
    # The release's test file with another train file (so another vocabulary) is not ptb either.
    path = out / f"{plugins}.ptb.test.json"
    record = json.loads(path.read_text())
    record["dataset_sha256"] = "dd65dff31e70846b2a6030a87482edcd5d199130cdcfa1f3dccbb033728deee0"
    path.write_text(json.dumps(record))
    assert any(
        line.startswith(str(path))
        and "train_sha256 is not that of the ptb release's train file" in line
        and "not ranked under the name ptb" in line
        for line in collect([out]).rejected
    )
