"""A researcher's daily loop (issue 47): figures that are never lost, and training that says
how it goes."""

from __future__ import annotations

from pathlib import Path

from conftest import write_corpus
from test_baselines_training import REPEATED, train

from harness.cli import main as harness_main
from leaderboard.cli import main as leaderboard_main

UNIGRAM = "harness.plugins.unigram"


def test_output_keeps_the_per_token_file_beside_the_result(corpus, tmp_path, capsys):
    assert (
        harness_main(["eval", UNIGRAM, "--dataset", str(corpus), "--output", str(tmp_path / "r.json")]) == 0
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
