"""A researcher's daily loop (issue 47): figures that are never lost, and training that says
how it goes."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

from conftest import write_corpus
from test_baselines_training import REPEATED, train
from test_harness_faults import _plugin
from test_leaderboard import make_result

from harness.cli import main as harness_main
from leaderboard.cli import main as leaderboard_main

UNIGRAM = "harness.plugins.unigram"


def test_output_keeps_the_per_token_file_beside_the_result(corpus, tmp_path, capsys):
    assert (
        harness_main(
            [
                "eval",
                UNIGRAM,
                "--dataset",
                str(corpus),
                "--split",
                "test",
                "--output",
                str(tmp_path / "r.json"),
            ]
        )
        == 0
    )
    assert (tmp_path / "r.logprobs.npy").is_file()
    assert "nothing was saved" not in capsys.readouterr().err
    assert leaderboard_main(["compare", str(tmp_path / "r.json"), str(tmp_path / "r.json")]) == 0
    assert "not found" not in capsys.readouterr().err


def test_an_evaluation_that_keeps_nothing_says_how_to_keep_it(corpus, capsys):
    assert harness_main(["eval", UNIGRAM, "--dataset", str(corpus)]) == 0
    assert capsys.readouterr().err.splitlines()[-1].startswith("note: nothing was saved; --output-dir DIR")


def test_training_prints_each_validation(tmp_path: Path, capsys) -> None:
    toy = write_corpus(tmp_path / "toy")
    (toy / "wiki.train.tokens").write_text(REPEATED * 6, encoding="utf-8")
    assert train(toy, tmp_path / "run", "--max-epochs", "2", "--validate-every", "5") == 0
    lines = [line for line in capsys.readouterr().err.splitlines() if "valid perplexity" in line]
    assert [line.split(":")[0] for line in lines] == [
        "epoch 1, step 5/14", "epoch 1, step 10/14", "epoch 1 done",
        "epoch 2, step 5/14", "epoch 2, step 10/14", "epoch 2 done",
    ]  # fmt: skip


def test_two_versions_of_a_plugin_record_different_code_and_compare_says_so(
    corpus, tmp_path, monkeypatch, capsys
):
    name = _plugin(tmp_path, monkeypatch, "evolving")
    assert (
        harness_main(
            ["eval", name, "--dataset", str(corpus), "--split", "test", "--output", str(tmp_path / "v1.json")]
        )
        == 0
    )
    source = tmp_path / "plugins" / f"{name}.py"
    source.write_text(source.read_text() + "\n# version 2: a changed comment is changed code\n")
    monkeypatch.delitem(sys.modules, name, raising=False)  # imported here only by --in-process
    importlib.invalidate_caches()
    assert (
        harness_main(
            ["eval", name, "--dataset", str(corpus), "--split", "test", "--output", str(tmp_path / "v2.json")]
        )
        == 0
    )
    codes = [json.loads((tmp_path / f"v{n}.json").read_text())["plugin_code"] for n in (1, 2)]
    assert codes[0]["source"] == "module" and codes[0]["sha256"] != codes[1]["sha256"]
    capsys.readouterr()
    compare = ["compare", "--allow-unaudited"]  # the test plugin gives no full distributions
    assert leaderboard_main([*compare, str(tmp_path / "v1.json"), str(tmp_path / "v2.json")]) == 0
    assert "code: different plugin code" in capsys.readouterr().out
    assert leaderboard_main([*compare, str(tmp_path / "v1.json"), str(tmp_path / "v1.json")]) == 0
    assert "code: the same plugin code" in capsys.readouterr().out


def test_a_result_of_other_code_is_not_replaced_without_overwrite(corpus, tmp_path, monkeypatch, capsys):
    name = _plugin(tmp_path, monkeypatch, "rewritten")
    out = ["--dataset", str(corpus), "--output-dir", str(tmp_path / "results")]
    assert harness_main(["eval", name, *out]) == 0
    assert harness_main(["eval", name, *out]) == 0  # the same code again: a rerun replaces its result
    source = tmp_path / "plugins" / f"{name}.py"
    source.write_text(source.read_text() + "\n# version 2\n")
    monkeypatch.delitem(sys.modules, name, raising=False)  # imported here only by --in-process
    importlib.invalidate_caches()
    capsys.readouterr()
    assert harness_main(["eval", name, *out]) == 2
    err = capsys.readouterr().err
    assert "holds a result of other plugin code" in err and "--overwrite" in err
    assert harness_main(["eval", name, *out, "--overwrite"]) == 0


def test_a_tiny_models_parameters_are_not_shown_as_zero(tmp_path):
    make_result(tmp_path / "results", "tiny.test", ppl=100.0, num_parameters=17_069)
    assert leaderboard_main(["build", str(tmp_path / "results"), "--output-dir", str(tmp_path / "t")]) == 0
    rows = (tmp_path / "t" / "ptb.csv").read_text().splitlines()
    assert any(",0.017," in row and "my.model" in row for row in rows), rows


def test_plot_bars_takes_several_result_directories_and_colours_user_models_apart(tmp_path, monkeypatch):
    import matplotlib.axes

    from leaderboard import plots

    make_result(tmp_path / "ours", "baseline.test", ppl=120.0, model="baselines.kneser_ney")
    make_result(tmp_path / "mine", "mine.test", ppl=90.0, model="my.model")
    drawn: list = []
    barh = matplotlib.axes.Axes.barh
    monkeypatch.setattr(
        matplotlib.axes.Axes, "barh", lambda self, *a, **k: drawn.append(k["color"]) or barh(self, *a, **k)
    )
    out = tmp_path / "bars.png"
    argv = ["plot", "bars", str(tmp_path / "ours"), str(tmp_path / "mine"), "--dataset", "ptb"]
    assert leaderboard_main([*argv, "--no-reported", "--output", str(out)]) == 0
    assert out.is_file()
    assert sorted(drawn[0]) == sorted([plots.USER_MODEL_COLOUR, plots.REPRODUCED_COLOUR])
