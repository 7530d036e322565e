"""Every plot command renders a non-empty PNG; Figure 4's buckets are computed as documented.
The frequency plot runs end to end: real harness evaluations of a toy corpus, then the plot."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import assert_one_line_error
from test_leaderboard import make_result

from harness.cli import main as harness_main
from leaderboard import plots
from leaderboard.cli import main
from leaderboard.plots import bucket_difference, frequency_buckets
from leaderboard.training_logs import cut_training_log, join_training_logs, load_training_log

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: The figures of a training-log record that the curves do not read.
UNREAD = {"train_ppl": 1.0, "tokens_per_second": 1.0}


def assert_png(path: Path) -> None:
    data = path.read_bytes()
    assert data.startswith(PNG_SIGNATURE) and len(data) > 5000


def test_bars_from_results_and_from_a_table(tmp_path: Path) -> None:
    results = tmp_path / "results"
    make_result(results, "kn.test", model="kneser_ney", ppl=141.19)
    make_result(results, "uni.test", model="unigram", ppl=639.8)
    make_result(results, "v.valid", model="valid_only", ppl=300.0, split="valid")
    assert main(["plot", "bars", str(results), "--dataset", "ptb", "--output", str(tmp_path / "a.png")]) == 0
    assert_png(tmp_path / "a.png")
    assert main(["build", str(results), "--output-dir", str(tmp_path / "tables")]) == 0
    assert (
        main(
            [
                "plot",
                "bars",
                str(tmp_path / "tables" / "ptb.csv"),
                "--output",
                str(tmp_path / "b.png"),
                "--linear",
            ]
        )
        == 0
    )
    assert_png(tmp_path / "b.png")


def test_unaudited_and_unverified_bars_look_different_and_have_a_legend_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    figures = []
    monkeypatch.setattr(plots, "_save", lambda figure, out: figures.append(figure) or Path(out))
    frame = pd.DataFrame(
        {
            "model": ["mine", "theirs", "unchecked", "no log-probs"],
            "valid_ppl": [None, None, None, None],
            "test_ppl": [90.0, 100.0, 80.0, 1.5],
            "kind": ["user model", "reported", "unaudited", "unverified"],
        }
    )
    plots.plot_bars(frame, "ptb leaderboard", tmp_path / "bars.png")
    (axis,) = figures[0].axes
    colours = {
        label.get_text(): bar.get_facecolor() for label, bar in zip(axis.get_yticklabels(), axis.patches)
    }
    assert len(set(colours.values())) == 4  # measured here, reported, unaudited, unverified
    legend = [text.get_text() for text in axis.get_legend().get_texts()]
    assert "unaudited (measured here, not ranked)" in legend
    assert "unverified (no per-token log-probabilities, not ranked)" in legend


def test_a_table_with_a_rank_that_is_no_whole_number_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    make_result(tmp_path / "results", "m.test", ppl=100.0)
    assert main(["build", str(tmp_path / "results"), "--output-dir", str(tmp_path / "tables")]) == 0
    table = tmp_path / "tables" / "ptb.csv"
    lines = table.read_text().splitlines()
    table.write_text("\n".join([lines[0], "1.5" + lines[1][lines[1].index(",") :], *lines[2:]]) + "\n")
    capsys.readouterr()
    assert main(["plot", "bars", str(table), "--output", str(tmp_path / "bars.png")]) == 2
    assert_one_line_error(capsys, f"{table}: not a leaderboard CSV")


@pytest.mark.parametrize("figure", ["inf", "0", "0.5", "-3"])
def test_a_table_with_a_figure_that_is_no_perplexity_is_one_line(
    figure: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """A hand-edited CSV whose test perplexity is infinite or below 1: one line,
    not matplotlib's error about axis limits or a figure drawn from it."""
    make_result(tmp_path / "results", "m.test", ppl=100.0)
    assert main(["build", str(tmp_path / "results"), "--output-dir", str(tmp_path / "tables")]) == 0
    table = tmp_path / "tables" / "ptb.csv"
    frame = pd.read_csv(table, dtype=str, keep_default_na=False)
    frame.loc[0, "test_ppl"] = figure
    frame.to_csv(table, index=False)
    capsys.readouterr()
    assert main(["plot", "bars", str(table), "--output", str(tmp_path / "bars.png")]) == 2
    assert_one_line_error(capsys, f"{table}: not a leaderboard CSV (test_ppl")
    assert not (tmp_path / "bars.png").exists()


def test_frequency_plot_end_to_end_on_harness_results(
    corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    runs = tmp_path / "runs"
    assert harness_main(["eval", "unigram", "--dataset", str(corpus), "--output-dir", str(runs / "uni")]) == 0
    assert (
        harness_main(
            [
                "eval",
                "kneser_ney",
                "--dataset",
                str(corpus),
                "--model-args",
                "order=2",
                "--output-dir",
                str(runs / "kn"),
            ]
        )
        == 0
    )
    capsys.readouterr()
    a = runs / "uni" / "harness.plugins.unigram.toy.test.json"
    b = runs / "kn" / "baselines.kneser_ney+order=2.toy.test.json"
    out = tmp_path / "fig4.png"
    assert main(["plot", "frequency", str(a), str(b), "--buckets", "3", "--output", str(out)]) == 0
    assert_png(out)
    assert "bucket  3:" in capsys.readouterr().out
    # Results of different splits cannot be compared: one line.
    valid = make_result(tmp_path / "other", "x.valid", ppl=10.0, split="valid", dataset="toy")
    assert main(["plot", "frequency", str(a), str(valid), "--output", str(out)]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_frequency_plot_errors_of_the_dataset_and_the_buckets_are_one_line(
    corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    runs = tmp_path / "runs"
    for plugin, out in (("unigram", "uni"), ("baselines.kneser_ney", "kn")):
        assert harness_main(["eval", plugin, "--dataset", str(corpus), "--output-dir", str(runs / out)]) == 0
    a = runs / "uni" / "harness.plugins.unigram.toy.test.json"
    b = runs / "kn" / "baselines.kneser_ney.toy.test.json"
    out = tmp_path / "fig4.png"
    capsys.readouterr()
    assert main(["plot", "frequency", str(a), str(b), "--buckets", "100000", "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith("error: bucket count must be between 1 and the vocabulary size")
        and err.count("\n") == 1
    )
    # The test split no longer matches the checksum beside it: one line, no traceback.
    (corpus / "SHA256SUMS").write_text(f"{'0' * 64}  wiki.test.tokens\n")
    assert main(["plot", "frequency", str(a), str(b), "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "wiki.test.tokens: sha256 mismatch" in err and err.count("\n") == 1
    assert not out.exists()


def test_frequency_buckets_equal_types_and_equal_tokens() -> None:
    # Word 0 occurs 60 times, word 1 30 times, words 2..9 once or never.
    train = np.array([0] * 60 + [1] * 30 + [2, 3, 4, 5, 6, 7, 8, 9, 2, 3])
    types = frequency_buckets(train, vocab_size=10, count=5, mode="types")
    assert list(types.types(np.array([0]))) == [2, 2, 2, 2, 2]
    assert list(types.of_word[[0, 1]]) == [0, 0] and types.of_word[9] == 4
    tokens = frequency_buckets(train, vocab_size=10, count=2, mode="tokens")
    assert tokens.of_word[0] == 0 and set(tokens.of_word[1:]) == {1}
    targets = np.array([0, 0, 9])
    difference = bucket_difference(targets, np.log([0.5, 0.5, 0.1]), np.log([0.25, 0.25, 0.2]), types)
    assert difference.mean[0] == pytest.approx(-np.log(0.5) + np.log(0.25))  # A better on frequent words
    assert difference.mean[4] == pytest.approx(-np.log(0.1) + np.log(0.2))  # B better on the rare one
    assert np.isnan(difference.mean[1]) and list(difference.tokens) == [2, 0, 0, 0, 1]
    # heldout: equal numbers of evaluated tokens, most frequent targets first.
    heldout = frequency_buckets(train, vocab_size=10, count=2, mode="heldout")
    targets = np.array([9, 0, 1, 0, 2, 0])
    assert list(heldout.assign(targets)) == [1, 0, 1, 0, 1, 0]
    assert list(heldout.types(targets)) == [1, 3]


def test_gates_histogram_from_synthetic_values(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    rng = np.random.default_rng(0)
    gates = np.concatenate([rng.beta(20, 1, 5000), rng.beta(1, 5, 500)])
    np.save(tmp_path / "gates.npy", gates)
    (tmp_path / "gates.json").write_text('{"model": "pointer_sentinel", "dataset": "ptb", "split": "test"}')
    assert main(["plot", "gates", str(tmp_path / "gates.npy"), "--output", str(tmp_path / "g.png")]) == 0
    assert_png(tmp_path / "g.png")
    np.save(tmp_path / "bad.npy", np.array([0.5, 1.5]))
    assert main(["plot", "gates", str(tmp_path / "bad.npy"), "--output", str(tmp_path / "x.png")]) == 2
    assert "within [0, 1]" in capsys.readouterr().err
    with open(tmp_path / "archive.npy", "wb") as handle:
        np.savez(handle, gates)
    assert main(["plot", "gates", str(tmp_path / "archive.npy"), "--output", str(tmp_path / "x.png")]) == 2
    assert_one_line_error(capsys, "archive.npy: not a .npy array (an .npz archive of arrays)")


def test_learning_curves_from_training_logs(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    log = tmp_path / "run" / "log.jsonl"
    log.parent.mkdir()
    records = [
        {
            "epoch": 1,
            "partial": False,
            **UNREAD,
            "valid_ppl": 400.0,
            "learning_rate": 20,
            "seconds": 600,
            "total_seconds": 600,
            "best": True,
        },
        {
            "epoch": 2,
            "partial": False,
            **UNREAD,
            "valid_ppl": 250.0,
            "learning_rate": 20,
            "seconds": 600,
            "total_seconds": 1200,
            "best": True,
        },
        {
            "epoch": 3,
            "partial": True,
            "step": 5,
            "steps_per_epoch": 20,
            **UNREAD,
            "valid_ppl": 240.0,
            "learning_rate": 20,
            "seconds": 60,
        },
    ]
    log.write_text("".join(json.dumps(record) + "\n" for record in records))
    frame = load_training_log(log)
    assert frame["minutes"].tolist() == [10, 20, 21]
    assert frame["epochs"].tolist() == [1, 2, 2.25]
    assert main(["plot", "curves", f"{log}=lstm", str(log), "--output", str(tmp_path / "c.png")]) == 0
    assert_png(tmp_path / "c.png")
    assert main(["plot", "curves", str(log), "--x", "epochs", "--output", str(tmp_path / "e.png")]) == 0
    assert_png(tmp_path / "e.png")
    (tmp_path / "bad.jsonl").write_text('{"epoch": 1}\n')
    assert main(["plot", "curves", str(tmp_path / "bad.jsonl"), "--output", str(tmp_path / "x.png")]) == 2
    assert "bad.jsonl:1: not a training-log record" in capsys.readouterr().err
    diverged = tmp_path / "diverged.jsonl"
    diverged.write_text(
        json.dumps(records[0]) + "\n" + json.dumps({**records[1], "valid_ppl": math.inf}) + "\n"
    )
    assert main(["plot", "curves", str(diverged), "--output", str(tmp_path / "x.png")]) == 2
    assert_one_line_error(
        capsys, f"{diverged}:2: not a training-log record (valid_ppl inf is not a finite number)"
    )


def test_a_warm_started_path_is_one_curve_counted_on_from_each_cut(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    def record(epoch: int, ppl: float, seconds: float, step: int | None = None) -> dict:
        figures = {**UNREAD, "valid_ppl": ppl, "learning_rate": 1}
        if step is None:
            end = {"seconds": seconds, "total_seconds": seconds, "best": True}
            return {"epoch": epoch, "partial": False, **figures, **end}
        fields = {"step": step, "steps_per_epoch": 10, "seconds": seconds}
        return {"epoch": epoch, "partial": True, **figures, **fields}

    donor, pointer = tmp_path / "donor.jsonl", tmp_path / "pointer.jsonl"
    donor_records = [
        record(1, 300, 600),
        record(2, 200, 1200, step=5),
        record(2, 190, 1500),
        record(3, 150, 2100),
    ]
    donor.write_text("".join(json.dumps(r) + "\n" for r in donor_records))
    pointer.write_text("".join(json.dumps(r) + "\n" for r in [record(1, 120, 300), record(2, 110, 600)]))
    png = tmp_path / "w.png"
    assert main(["plot", "curves", f"{donor}@2:5,{pointer}=warm", "--output", str(png)]) == 0
    assert_png(png)
    path = join_training_logs(
        [cut_training_log(load_training_log(donor), 2, 5, "donor"), load_training_log(pointer)]
    )
    assert path["valid_ppl"].tolist() == [300, 200, 120, 110]  # the donor's later records left out
    assert path["epochs"].tolist() == [1, 1.5, 2.5, 3.5]
    assert path["minutes"].tolist() == [10, 30, 35, 40]  # the mid-epoch record: 600 s + 1200 s
    assert cut_training_log(load_training_log(donor), 2, None, "donor")["valid_ppl"].tolist() == [
        300,
        200,
        190,
    ]
    assert main(["plot", "curves", f"{donor}@2:6,{pointer}", "--output", str(png)]) == 2
    assert "donor.jsonl: no validation at epoch 2 step 6 to cut the log at" in capsys.readouterr().err
    assert main(["plot", "curves", f"{tmp_path / 'none.jsonl'}@2,{pointer}", "--output", str(png)]) == 2
    assert "none.jsonl: cannot read" in capsys.readouterr().err
    assert main(["plot", "curves", f"{donor}@two", "--output", str(png)]) == 2
    assert capsys.readouterr().err == (
        f"error: {donor}@two: cannot read (No such file or directory); "
        "a cut reads LOG@EPOCH or LOG@EPOCH:STEP\n"
    )


def test_zipf_of_directory_corpora(corpus: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    for split in ("train", "valid", "test"):
        (other / f"wiki.{split}.tokens").write_text(" a a a b b c d e f g \n a b a \n", encoding="utf-8")
    assert main(["plot", "zipf", str(corpus), str(other), "--output", str(tmp_path / "z.png")]) == 0
    assert_png(tmp_path / "z.png")


def test_zipf_of_the_real_benchmarks(tmp_path: Path) -> None:
    assert main(["plot", "zipf", "ptb", "wikitext-2", "--output", str(tmp_path / "z.png")]) == 0
    assert_png(tmp_path / "z.png")
