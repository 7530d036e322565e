"""What a newcomer meets: the packaged model is the default, a run of one's own is scored only when
named (and the result says which file it was), a missing model's message gives commands that
finish here, and every option's help shows its default."""

from __future__ import annotations

import argparse
import json
import logging
import re
import shlex
from pathlib import Path

import pytest
from conftest import assert_one_line_error, write_corpus

from baselines import checkpoint as checkpoints
from baselines import neural_cache, plugin_bridge, zoneout_lstm
from baselines.cli import build_parser as baselines_parser
from baselines.cli import main as baselines_main
from baselines.models import ZoneoutLSTM
from harness.cli import main as harness_main
from harness.datasets import load_dataset
from harness.plugin import ModelUnavailable
from leaderboard.cli import build_parser as leaderboard_parser
from wikitext_toolkit_core.files import file_sha256

REPEATED = " the cat sat on the mat . \n the dog sat on the log . \n a cat and a dog met on a mat . \n"


@pytest.fixture
def toy(tmp_path: Path) -> Path:
    directory = write_corpus(tmp_path / "toy")
    (directory / "wiki.train.tokens").write_text(REPEATED * 60, encoding="utf-8")
    return directory


def train_into_default_run(toy: Path) -> Path:
    """A run of one's own where ``baselines train`` puts it by default; returns its best.pt."""
    command = ["train", "zoneout_lstm", "--dataset", str(toy), "--preset", "tiny", "--max-steps", "2"]
    assert baselines_main([*command, "--batch-size", "2", "--bptt", "6", "--device", "cpu"]) == 0
    return checkpoints.default_run_dir("zoneout_lstm", "toy") / checkpoints.BEST


def test_a_run_of_ones_own_never_replaces_the_packaged_model(caplog):
    """Beside a run in the default run directory, the plugins still load the packaged model."""
    caplog.set_level(logging.INFO, logger="baselines")
    ptb = load_dataset("ptb")
    run = checkpoints.default_run_dir("zoneout_lstm", "ptb") / checkpoints.BEST
    config = {"embedding_size": 8, "hidden_size": 8, "vocab_size": len(ptb.vocab)}
    checkpoints.save(
        run,
        checkpoints.model_payload(
            ZoneoutLSTM(checkpoints.model_config("zoneout_lstm", config)), ptb.vocab, "ptb"
        ),
    )
    packaged = checkpoints.packaged_checkpoint("zoneout_lstm", "ptb")
    lstm = zoneout_lstm.load_model(ptb, device="cpu", checkpoint=None)
    cache = neural_cache.load_model(ptb, device="cpu", checkpoint=None, window=100)
    assert lstm.checkpoint == cache.checkpoint == str(packaged)
    assert lstm.result_metadata() == {"checkpoint_sha256": file_sha256(packaged), "checkpoint_packaged": True}
    assert cache.result_metadata() == {
        **lstm.result_metadata(),
        "test_time_adaptation": "a neural cache of the last 100 positions' hidden states",
    }
    assert f"zoneout_lstm: using the packaged ptb checkpoint {packaged}" in caplog.messages


def test_a_run_is_scored_when_named_and_the_result_says_which_file(toy, tmp_path, capfd):
    # capfd: the plugin writes to stderr from its worker processes
    best = train_into_default_run(toy)
    capfd.readouterr()
    evaluate = ["eval", "baselines.zoneout_lstm", "--dataset", str(toy), "--split", "valid"]
    assert harness_main(evaluate) == 2
    named = shlex.join(["python", "-m", "harness", *evaluate[:4], "--checkpoint", str(best)])
    assert_one_line_error(capfd, f"your run's {best} is used only when named: `{named}`")
    attention = ["--save-attention", str(tmp_path / "attention.json")]
    for command in (
        ["tune", "--dataset", str(toy)],
        ["analyze", "neural_cache", "--dataset", str(toy), *attention],
    ):
        assert baselines_main([*command, "--device", "cpu"]) == 2
        assert_one_line_error(capfd, f"your run's {best} is used only when named")
    result = tmp_path / "result.json"
    assert harness_main([*evaluate, "--checkpoint", str(best), "--output", str(result)]) == 0
    assert f"zoneout_lstm: using checkpoint {best}\n" in capfd.readouterr().err
    record = json.loads(result.read_text(encoding="utf-8"))
    assert record["checkpoint"].endswith("runs/zoneout_lstm/toy/best.pt")  # as the harness writes paths
    assert record["plugin_metadata"] == {"checkpoint_sha256": file_sha256(best), "checkpoint_packaged": False}


def test_without_a_model_the_message_gives_commands_that_finish_here(toy, capsys):
    """The commands of the message, run as given: a CPU recipe with its time, then the named run."""
    assert harness_main(["eval", "baselines.zoneout_lstm", "--dataset", str(toy), "--device", "cpu"]) == 2
    message = assert_one_line_error(
        capsys, "no packaged zoneout_lstm for toy: train one on this CPU in about 7 minutes"
    )
    train, evaluate = re.findall(r"`([^`]*)`", message)
    assert shlex.split(train) == [
        *("python", "-m", "baselines", "train", "zoneout_lstm", "--dataset", str(toy)),
        *plugin_bridge.CPU_RECIPE,
    ]
    assert baselines_main(shlex.split(train)[3:]) == 0
    capsys.readouterr()
    assert harness_main([*shlex.split(evaluate)[3:], "--split", "valid"]) == 0
    assert "perplexity" in capsys.readouterr().out


def test_the_cpu_recipe_time_counts_the_closing_validation_softmax():
    """PTB, WikiText-2 and WikiText-103: validation tokens and vocabulary sizes (Table 1)."""
    assert plugin_bridge.cpu_recipe_minutes(73_760, 10_000) == 7
    assert plugin_bridge.cpu_recipe_minutes(217_646, 33_278) == 8
    assert plugin_bridge.cpu_recipe_minutes(217_646, 267_735) == 20


def test_on_a_gpu_the_message_proposes_the_gpu_preset(toy):
    with pytest.raises(ModelUnavailable, match=re.escape(" ".join(plugin_bridge.GPU_RECIPE))):
        plugin_bridge.resolve_checkpoint(
            "pointer_sentinel", load_dataset(str(toy)), None, device="cuda:0", command=["x"]
        )


def _options(parser: argparse.ArgumentParser, prefix: str = "") -> list[tuple[str, argparse.Action]]:
    """Every optional argument of ``parser`` and of its subcommands, named ``SUBCOMMAND OPTION``."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, subparser in action.choices.items():
                found += _options(subparser, f"{prefix}{name} ")
        elif action.option_strings and not isinstance(action, argparse._HelpAction):
            found.append((prefix + action.option_strings[0], action))
    return found


@pytest.mark.parametrize("parser", [baselines_parser, leaderboard_parser])
def test_every_option_shows_its_default(parser):
    """Every option that may be left out says in its help what leaving it out means (a flag is
    off unless given)."""
    missing = [
        name
        for name, action in _options(parser())
        if not action.required and action.default is not False and "default" not in (action.help or "")
    ]
    assert not missing, missing
