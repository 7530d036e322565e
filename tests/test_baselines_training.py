"""Training, checkpoints, plugins and the CLI of the baselines, end to end on a toy corpus."""

from __future__ import annotations

import json
import math
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import REPO, write_corpus

from baselines import checkpoint as checkpoints
from baselines import cli as baselines_cli
from baselines import trainer, training
from baselines.cli import main as baselines_main
from baselines.models import NeuralCache
from baselines.neural_cache import cache_from_checkpoint
from baselines.plugin_bridge import TorchLanguageModel
from baselines.schedule import Schedule, learning_rate_schedule
from baselines.training import TrainOptions, bfloat16_is_emulated
from harness.cli import main as harness_main
from harness.datasets import load_dataset
from harness.evaluate import evaluate
from harness.plugin import ModelUnavailable
from leaderboard.training_logs import load_training_log
from wikitext_toolkit_core.files import file_sha256

TOY = "embedding_size=8,hidden_size=8"
REPEATED = """ the cat sat on the mat . 
 the dog sat on the log . 
 a cat and a dog met on a mat . 
"""


@pytest.fixture
def toy(tmp_path: Path) -> Path:
    """A toy corpus big enough for a few training steps of batch 2."""
    directory = write_corpus(tmp_path / "toy")
    (directory / "wiki.train.tokens").write_text(REPEATED * 6, encoding="utf-8")
    return directory


@pytest.fixture
def package_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``baselines package`` writes into ``tmp_path/trained_models``, not into the package."""
    monkeypatch.setattr(checkpoints, "PACKAGED", tmp_path / "trained_models")
    monkeypatch.setattr(checkpoints, "PACKAGED_SUMS", tmp_path / "trained_models" / "SHA256SUMS")
    return checkpoints.PACKAGED


def train(toy: Path, out: Path | None, *extra: str, kind: str = "zoneout_lstm") -> int:
    """``baselines train`` on the toy corpus; ``out`` None trains into the default directory."""
    where = [] if out is None else ["--output-dir", str(out)]
    return baselines_main(
        [
            "train",
            kind,
            "--dataset",
            str(toy),
            "--preset",
            "tiny",
            "--model-args",
            TOY,
            "--batch-size",
            "2",
            "--bptt",
            "6",
            "--device",
            "cpu",
            *where,
            *extra,
        ]
    )


def weights(path: Path) -> dict[str, torch.Tensor]:
    return checkpoints.load(path)["model"]


def epoch_records(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("kind", ["zoneout_lstm", "pointer_sentinel"])
def test_resumed_training_reproduces_the_uninterrupted_run(toy, tmp_path, kind):
    assert train(toy, tmp_path / "whole", "--max-epochs", "2", kind=kind) == 0
    assert train(toy, tmp_path / "parts", "--max-epochs", "2", "--max-steps", "5", kind=kind) == 0

    def epochs_done() -> int:
        return len(
            checkpoints.load(tmp_path / "parts" / "checkpoint.pt")["training"]["progress"]["valid_history"]
        )

    assert epochs_done() < 2
    steps = 5
    while epochs_done() < 2:
        steps += 7
        assert train(toy, tmp_path / "parts", "--max-epochs", "2", "--max-steps", str(steps), kind=kind) == 0
    whole, parts = (
        weights(tmp_path / "whole" / "checkpoint.pt"),
        weights(tmp_path / "parts" / "checkpoint.pt"),
    )
    assert whole.keys() == parts.keys()
    for name in whole:
        assert torch.equal(whole[name], parts[name]), name
    full_epochs = [record for record in epoch_records(tmp_path / "parts") if not record["partial"]]
    assert [r["valid_ppl"] for r in full_epochs] == [
        r["valid_ppl"] for r in epoch_records(tmp_path / "whole")
    ]
    assert len(full_epochs) == 2


def test_validating_within_epochs_keeps_the_best_weights_and_leaves_training_unchanged(toy, tmp_path):
    assert train(toy, tmp_path / "plain", "--max-epochs", "2") == 0
    often = ["--max-epochs", "2", "--validate-every", "2"]
    assert train(toy, tmp_path / "often", *often, "--max-steps", "4") == 0
    assert train(toy, tmp_path / "often", *often) == 0  # resumed

    plain, often = (weights(tmp_path / run / "checkpoint.pt") for run in ("plain", "often"))
    assert all(torch.equal(plain[name], often[name]) for name in plain)
    records = epoch_records(tmp_path / "often")
    epoch_ends = [r for r in records if not r["partial"]]
    assert [r["valid_ppl"] for r in epoch_ends] == [r["valid_ppl"] for r in epoch_records(tmp_path / "plain")]
    steps = [(r["epoch"], r["step"]) for r in records if r["partial"]]
    chunks = records[0]["steps_per_epoch"]
    every_two = [(epoch, step) for epoch in (1, 2) for step in range(2, chunks, 2)]
    assert steps == every_two  # the stop at step 4 validated once
    best = min(r["valid_ppl"] for r in records)
    assert checkpoints.load(tmp_path / "often" / "best.pt")["valid_perplexity"] == best


def test_training_follows_the_recipe_and_logs_each_epoch(toy, tmp_path, capsys):
    assert train(toy, tmp_path / "run", "--max-epochs", "4", "--lr", "1") == 0
    records = epoch_records(tmp_path / "run")
    assert [r["epoch"] for r in records] == [1, 2, 3, 4]
    for record in records:
        assert {"train_ppl", "valid_ppl", "learning_rate", "tokens_per_second", "seconds"} <= record.keys()
        assert record["device"] == "cpu" and record["threads"] == torch.get_num_threads()
        assert record["amp"] is False
    for previous, record in zip(records, records[1:]):  # halved exactly when not a new best
        expected = previous["learning_rate"] * (1 if previous["best"] else 0.5)
        assert record["learning_rate"] == pytest.approx(expected)
    best = checkpoints.load(tmp_path / "run" / "best.pt")
    assert best["valid_perplexity"] == pytest.approx(min(r["valid_ppl"] for r in records))
    assert "finished after 4 epochs" in capsys.readouterr().err
    assert train(toy, tmp_path / "run", "--max-epochs", "4", "--lr", "1") == 0
    assert "already finished" in capsys.readouterr().err


def test_the_schedule_is_a_function_of_the_validation_history():
    options = TrainOptions(
        kind="zoneout_lstm", model_config={}, learning_rate=20, decay=0.5, patience=2, max_epochs=6
    )
    assert learning_rate_schedule([], options) == Schedule(20, math.inf, 0, False)
    assert learning_rate_schedule([300, 200, 210, 190], options) == Schedule(10, 190, 0, False)
    assert learning_rate_schedule([300, 200, 210, 205], options) == Schedule(5, 200, 2, True)
    assert learning_rate_schedule([6, 5, 4, 3, 2, 1], options).finished


def test_fixed_annealing_decays_every_epoch_from_its_epoch_on():
    options = TrainOptions(
        kind="zoneout_lstm", model_config={}, learning_rate=20, decay=0.5, patience=2, anneal_from=3
    )
    rates = [learning_rate_schedule([9, 8, 7, 6, 5][:n], options).learning_rate for n in range(6)]
    assert rates == [20, 20, 20, 10, 5, 2.5]  # decayed after epochs 3, 4 and 5, all new bests
    # one decay per epoch when an annealed epoch is also not a new best
    assert learning_rate_schedule([9, 8, 8], options) == Schedule(10, 8, 1, False)


@pytest.mark.parametrize("emulated", [True, False])
def test_autocast_on_a_cpu_without_native_bfloat16_is_warned_of(toy, tmp_path, capsys, monkeypatch, emulated):
    monkeypatch.setattr(baselines_cli, "bfloat16_is_emulated", lambda device: emulated)
    assert train(toy, tmp_path / "run", "--amp", "on", "--max-steps", "1", "--max-epochs", "1") == 0
    assert ("warning: --amp on: this CPU has no native bfloat16" in capsys.readouterr().err) is emulated


def test_bfloat16_counts_as_native_on_cuda():
    assert not bfloat16_is_emulated("cuda")


def test_a_checkpoint_from_before_an_option_existed_resumes(toy, tmp_path, capsys):
    """A run written by code without ``anneal_from`` resumes: a missing option takes its default,
    which reproduces that code's behaviour."""
    assert train(toy, tmp_path / "run", "--max-steps", "2") == 0
    path = tmp_path / "run" / "checkpoint.pt"
    payload = checkpoints.load(path)
    del payload["training"]["identity"]["options"]["anneal_from"]
    checkpoints.save(path, payload)
    assert train(toy, tmp_path / "run", "--max-steps", "2") == 0
    assert "resuming epoch 1 step 2" in capsys.readouterr().err


def test_mean_loss_is_the_summed_loss_scaled_by_the_chunk_length(toy, tmp_path):
    """``--loss mean`` at learning rate ``T * lr`` takes the step ``--loss sum`` takes at ``lr``."""
    assert (
        train(toy, tmp_path / "sum", "--max-steps", "1", "--loss", "sum", "--lr", "0.1", "--clip", "1e9") == 0
    )
    assert (
        train(toy, tmp_path / "mean", "--max-steps", "1", "--loss", "mean", "--lr", "0.6", "--clip", "1e9")
        == 0
    )  # bptt 6
    assert train(toy, tmp_path / "still", "--max-steps", "0") == 0  # the initial weights
    summed, mean = weights(tmp_path / "sum" / "checkpoint.pt"), weights(tmp_path / "mean" / "checkpoint.pt")
    initial = weights(tmp_path / "still" / "checkpoint.pt")
    assert any(not torch.allclose(summed[name], initial[name]) for name in summed)
    for name in summed:
        torch.testing.assert_close(summed[name], mean[name], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind, groups", [("pointer_sentinel", 2), ("zoneout_lstm", 1)])
def test_the_pointer_trains_at_its_own_learning_rate_scale(toy, tmp_path, kind, groups):
    assert (
        train(
            toy, tmp_path / "run", "--max-epochs", "3", "--lr", "4", "--pointer-lr-scale", "0.25", kind=kind
        )
        == 0
    )
    saved = checkpoints.load(tmp_path / "run" / "checkpoint.pt")["training"]
    options = TrainOptions(**saved["identity"]["options"])
    rate = learning_rate_schedule(saved["progress"]["valid_history"], options).learning_rate
    param_groups = saved["optimizer"]["param_groups"]
    assert [group["lr"] for group in param_groups] == pytest.approx([rate, rate * 0.25][:groups])
    if kind == "pointer_sentinel":
        model, _ = checkpoints.load_model(tmp_path / "run" / "checkpoint.pt")
        assert len(param_groups[1]["params"]) == len(model.pointer_parameters()) == 3


def test_a_pointer_starts_from_a_trained_zoneout_lstms_layers_and_records_it(toy, tmp_path, capsys):
    assert train(toy, tmp_path / "lstm", "--max-steps", "3") == 0
    donor = tmp_path / "lstm" / "best.pt"
    assert train(toy, tmp_path / "fresh", "--max-steps", "0", kind="pointer_sentinel") == 0
    assert (
        train(toy, tmp_path / "warm", "--max-steps", "0", "--init-from", str(donor), kind="pointer_sentinel")
        == 0
    )
    assert f"starting from the layers of {donor}" in capsys.readouterr().err

    warm, fresh, lstm = (weights(tmp_path / run / "checkpoint.pt") for run in ("warm", "fresh", "lstm"))
    core = [name for name in warm if name.startswith("core.")]
    assert core and all(torch.equal(warm[name], lstm[name]) for name in core)
    assert not torch.equal(fresh["core.embedding.weight"], lstm["core.embedding.weight"])
    for name in warm.keys() - set(core):  # the pointer's own query and sentinel start fresh
        assert torch.equal(warm[name], fresh[name]), name
    source = {
        "checkpoint": str(donor),
        "sha256": file_sha256(donor),
        "kind": "zoneout_lstm",
        "valid_perplexity": checkpoints.load(donor)["valid_perplexity"],
        "layers": "shared",
    }
    assert json.loads((tmp_path / "warm" / "config.json").read_text())["initialized_from"] == source

    # resumed, the run continues from its own weights and still names its source
    assert (
        train(toy, tmp_path / "warm", "--max-steps", "2", "--init-from", str(donor), kind="pointer_sentinel")
        == 0
    )
    assert not torch.equal(
        weights(tmp_path / "warm" / "checkpoint.pt")["core.embedding.weight"], lstm["core.embedding.weight"]
    )
    assert json.loads((tmp_path / "warm" / "config.json").read_text())["initialized_from"] == source


def test_a_run_starts_from_all_the_weights_of_a_packaged_model_of_its_kind(
    toy, tmp_path, capsys, package_dir
):
    assert train(toy, tmp_path / "trained", "--max-steps", "3", kind="pointer_sentinel") == 0
    best = tmp_path / "trained" / "best.pt"
    package = checkpoints.package(best, checkpoints.load(best)["dataset"], "int8")
    start = ["--max-steps", "0", "--init-from", str(package)]
    assert train(toy, tmp_path / "more", *start, kind="pointer_sentinel") == 0
    assert f"starting from the weights of {package}" in capsys.readouterr().err

    shipped, _ = checkpoints.load_model(package)
    started = weights(tmp_path / "more" / "checkpoint.pt")
    assert started.keys() == shipped.state_dict().keys()
    assert all(torch.equal(started[name], value) for name, value in shipped.state_dict().items())
    recorded = json.loads((tmp_path / "more" / "config.json").read_text())["initialized_from"]
    assert (recorded["kind"], recorded["layers"]) == ("pointer_sentinel", "all")
    assert recorded["valid_perplexity"] == checkpoints.load(best)["valid_perplexity"] is not None


def test_a_damaged_package_named_explicitly_is_refused_by_every_command(toy, tmp_path, capsys, package_dir):
    """A packaged file is checked against ``SHA256SUMS`` however it is reached, not only by default."""
    assert train(toy, tmp_path / "run", "--max-steps", "1", kind="pointer_sentinel") == 0
    package = checkpoints.package(tmp_path / "run" / "best.pt", "toy")
    payload = checkpoints.load(package)
    payload["model"]["core.decoder.bias"] = payload["model"]["core.decoder.bias"] + 5  # still loads
    torch.save(payload, package)
    named = ["--dataset", str(toy), "--device", "cpu"]
    gates = ["--save-gates", str(tmp_path / "gates.npy")]
    commands = [
        # in-process: a worker would not see this test's monkeypatched package directory
        (
            harness_main,
            ["eval", "baselines.pointer_sentinel", *named, "--checkpoint", str(package), "--in-process"],
        ),
        (baselines_main, ["calibrate", str(package), *named, "--output", str(tmp_path / "out.pt")]),
        (baselines_main, ["analyze", "pointer_sentinel", *named, "--checkpoint", str(package), *gates]),
        (baselines_main, ["train", "pointer_sentinel", *named, "--init-from", str(package)]),
    ]
    capsys.readouterr()
    for main, command in commands:
        assert main(command) == 2, command
        error = capsys.readouterr().err
        assert error.startswith(f"error: packaged checkpoint {package}: sha256 mismatch"), command
        assert error.count("\n") == 1, command


def test_packaging_a_package_keeps_its_stored_weights_and_refuses_another_precision(
    toy, tmp_path, capsys, package_dir
):
    assert train(toy, tmp_path / "run", "--max-steps", "2", kind="pointer_sentinel") == 0
    best = tmp_path / "run" / "best.pt"
    dataset = checkpoints.load(best)["dataset"]
    for precision in checkpoints.PRECISIONS:
        first = checkpoints.load(checkpoints.package(best, dataset, precision))
        shutil.copy(package_dir / dataset / "pointer_sentinel.pt", tmp_path / "package.pt")
        again = checkpoints.load(checkpoints.package(tmp_path / "package.pt", dataset, precision))
        assert again.keys() == first.keys()
        assert again["valid_perplexity_float32"] == first["valid_perplexity_float32"] is not None
        for key in ("model", checkpoints.INT8_SCALES):
            stored, restored = first.get(key, {}), again.get(key, {})
            assert stored.keys() == restored.keys()
            assert all(torch.equal(stored[name], restored[name]) for name in stored)
    package = ["package", str(tmp_path / "package.pt"), "--dataset", dataset, "--precision", "float16"]
    capsys.readouterr()
    assert baselines_main(package) == 2
    assert capsys.readouterr().err.strip() == (
        f"error: checkpoint {tmp_path / 'package.pt'} is a package in int8; package the float32 "
        "checkpoint it came from to store it in float16"
    )


def test_starting_from_a_model_of_other_sizes_is_a_one_line_error(toy, tmp_path, capsys):
    assert train(toy, tmp_path / "lstm", "--max-steps", "1") == 0
    capsys.readouterr()
    other = ["--model-args", "embedding_size=12,hidden_size=12"]
    donor = str(tmp_path / "lstm" / "best.pt")
    assert train(toy, tmp_path / "pointer", *other, "--init-from", donor, kind="pointer_sentinel") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"error: --init-from {donor}: its zoneout_lstm model does not have this model's layers "
        "(embedding_size 8, hidden_size 8, num_layers 2, tie_weights True against 12, 12, 2, True)"
    ]
    assert (
        train(toy, tmp_path / "pointer", "--init-from", str(tmp_path / "none.pt"), kind="pointer_sentinel")
        == 2
    )
    assert "does not exist" in capsys.readouterr().err


def test_a_non_finite_loss_stops_the_run_in_one_line_and_keeps_its_saved_files(
    toy, tmp_path, capsys, monkeypatch
):
    assert train(toy, tmp_path / "run", "--max-steps", "2") == 0
    saved = {name: file_sha256(tmp_path / "run" / name) for name in (checkpoints.RESUME, checkpoints.BEST)}
    finite_loss = training.chunk_loss
    monkeypatch.setattr(
        trainer, "chunk_loss", lambda output, reduction: finite_loss(output, reduction) * math.inf
    )
    capsys.readouterr()
    assert train(toy, tmp_path / "run", "--checkpoint-minutes", "1e-9") == 2  # else saved after the step
    error = capsys.readouterr().err.splitlines()[-1]
    assert error.startswith("error: training diverged in epoch 1 at step 3/")
    assert error.endswith(
        "(a loss or gradient that is not finite): train with a lower --lr than 20 "
        "(in another --output-dir once this one holds a checkpoint)"
    )
    assert {name: file_sha256(tmp_path / "run" / name) for name in saved} == saved


def test_a_run_whose_validation_overflows_stops_in_one_line(toy, tmp_path, capsys):
    """A learning rate far too high: the training perplexity reads inf, not an OverflowError,
    and the validation that no float holds stops the run with the same advice."""
    assert train(toy, tmp_path / "run", "--max-epochs", "1", "--lr", "1e4", "--clip", "1e4") == 2
    error = capsys.readouterr().err.splitlines()[-1]
    assert error.startswith("error: training diverged in epoch 1 at step ")
    assert "(validation refused: valid: mean negative log-likelihood " in error
    assert error.endswith(
        "too large for a float (at most 709.78 nats)): train with a lower --lr than 10000 "
        "(in another --output-dir once this one holds a checkpoint)"
    )
    assert not (tmp_path / "run" / checkpoints.BEST).exists()  # never diverged weights


def test_a_perplexity_beyond_a_float_is_inf():
    assert training.perplexity(2.0 * 3, 3) == math.exp(2.0)
    assert training.perplexity(710.0, 1) == math.inf


def test_resuming_with_other_settings_is_refused(toy, tmp_path, capsys):
    assert train(toy, tmp_path / "run", "--max-steps", "2") == 0
    assert train(toy, tmp_path / "run", "--max-steps", "2", "--lr", "5") == 2
    assert "different settings (learning_rate)" in capsys.readouterr().err


def test_plugins_say_how_to_train_and_score_the_run_it_names(toy, capsys):
    assert harness_main(["eval", "baselines.pointer_sentinel", "--dataset", str(toy)]) == 2
    message = capsys.readouterr().err
    assert f"python -m baselines train pointer_sentinel --dataset {toy}" in message
    # no --output-dir: the default run directory, scored when named
    assert train(toy, None, "--max-steps", "3", kind="pointer_sentinel") == 0
    best = checkpoints.default_run_dir("pointer_sentinel", "toy") / checkpoints.BEST
    capsys.readouterr()
    command = ["eval", "baselines.pointer_sentinel", "--dataset", str(toy), "--split", "valid"]
    assert harness_main([*command, "--checkpoint", str(best)]) == 0
    assert "perplexity" in capsys.readouterr().out


def test_checkpoint_for_another_vocabulary_is_a_clear_error(toy, tmp_path, capsys):
    assert train(toy, tmp_path / "run", "--max-steps", "2") == 0
    other = write_corpus(tmp_path / "other")
    (other / "wiki.train.tokens").write_text(" completely different words here \n", encoding="utf-8")
    code = harness_main(
        [
            "eval",
            "baselines.zoneout_lstm",
            "--dataset",
            str(other),
            "--checkpoint",
            str(tmp_path / "run" / "best.pt"),
        ]
    )
    assert code == 2
    assert "different vocabulary" in capsys.readouterr().err


@pytest.mark.parametrize(
    "content", [b"", b"not a zip file", b"PK\x03\x04garbage", b"hello world, a text file\n", b"text\n"]
)
def test_corrupt_checkpoint_is_a_one_line_error(toy, tmp_path, capsys, content):
    broken = tmp_path / "broken.pt"
    broken.write_bytes(content)
    assert (
        harness_main(["eval", "baselines.zoneout_lstm", "--dataset", str(toy), "--checkpoint", str(broken)])
        == 2
    )
    error = capsys.readouterr().err.strip()
    assert error.startswith("error: checkpoint") and "corrupt" in error and "\n" not in error


def test_a_directory_as_checkpoint_is_a_one_line_error(toy, tmp_path, capsys):
    assert (
        harness_main(["eval", "baselines.zoneout_lstm", "--dataset", str(toy), "--checkpoint", str(tmp_path)])
        == 2
    )
    assert (
        capsys.readouterr().err.strip()
        == f"error: checkpoint {tmp_path} is a directory, not a checkpoint file"
    )


@pytest.mark.parametrize("option", ["--batch-size", "--bptt"])
def test_train_refuses_a_zero_size(toy, tmp_path, capsys, option):
    assert train(toy, tmp_path / "run", option, "0") == 2
    assert capsys.readouterr().err.strip() == f"error: argument {option}: must be at least 1, got 0"


NOT_NEGATIVE = "must be a finite number of at least 0, got"


@pytest.mark.parametrize(
    "command, error",
    [
        ("train zoneout_lstm --max-minutes -1", f"--max-minutes: {NOT_NEGATIVE} -1"),
        ("train zoneout_lstm --max-minutes nan", f"--max-minutes: {NOT_NEGATIVE} nan"),
        ("train zoneout_lstm --max-steps -2", "--max-steps: must not be negative, got -2"),
        ("train zoneout_lstm --seed -1", "--seed: must not be negative, got -1"),
        (f"train zoneout_lstm --seed {2**64}", f"--seed: must be below 2**64, got {2**64}"),
        (
            "train zoneout_lstm --checkpoint-minutes 0",
            "--checkpoint-minutes: must be a finite number greater than 0, got 0",
        ),
        ("train zoneout_lstm --patience 0", "--patience: must be at least 1, got 0"),
        ("train zoneout_lstm --max-epochs 0", "--max-epochs: must be at least 1, got 0"),
        ("train pointer_sentinel --pointer-lr-scale -0.1", f"--pointer-lr-scale: {NOT_NEGATIVE} -0.1"),
        ("tune --thetas 0.1 inf", f"--thetas: {NOT_NEGATIVE} inf"),
        ("tune --interpolations 0.1 1.5", "--interpolations: must be at least 0 and below 1, got 1.5"),
        ("analyze neural_cache --interpolation 1", "--interpolation: must be at least 0 and below 1, got 1"),
        ("analyze neural_cache --theta -1", f"--theta: {NOT_NEGATIVE} -1"),
    ],
)
def test_out_of_range_settings_are_refused_before_any_work(toy, capsys, command, error):
    """A lambda of 1.5 would tune a grid of negative probabilities for minutes; a negative
    time limit would stop a run before its first step."""
    assert baselines_main([*command.split(), "--dataset", str(toy)]) == 2
    assert capsys.readouterr().err == f"error: argument {error}\n"


@pytest.mark.parametrize(
    "model_args, message",
    [
        ("dropout=1.5", "dropout must be in [0, 1), got 1.5"),
        ("zoneout_cell=high", "zoneout_cell must be a number, got 'high'"),
        ("hidden_size=0", "hidden_size must be at least 1, got 0"),
        ("tie_weights=3", "tie_weights must be true or false, got 3"),
        ("window=50", "zoneout_lstm has no field window (its fields: vocab_size, "),
        ("vocab_size=5", "vocab_size is the dataset's vocabulary size; it cannot be set"),
    ],
)
def test_train_refuses_bad_model_args_in_one_line(toy, tmp_path, capsys, model_args, message):
    assert train(toy, tmp_path / "run", "--model-args", model_args) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --model-args: {message}") and err.count("\n") == 1, err
    assert not (tmp_path / "run").exists()


def test_a_checkpoint_with_a_bad_config_is_a_one_line_error(toy, tmp_path, capsys):
    assert train(toy, tmp_path / "run", "--max-steps", "1") == 0
    payload = checkpoints.load(tmp_path / "run" / "best.pt")
    payload["config"]["dropout"] = 2.0
    torch.save(payload, tmp_path / "bad.pt")
    capsys.readouterr()
    assert (
        harness_main(
            [
                "eval",
                "baselines.zoneout_lstm",
                "--dataset",
                str(toy),
                "--checkpoint",
                str(tmp_path / "bad.pt"),
            ]
        )
        == 2
    )
    assert (
        capsys.readouterr().err
        == f"error: checkpoint {tmp_path / 'bad.pt'}: dropout must be in [0, 1), got 2.0\n"
    )


def test_tune_and_analyze_on_an_empty_split_name_the_file(toy, tmp_path, capsys):
    assert train(toy, tmp_path / "run", "--max-steps", "1", kind="pointer_sentinel") == 0
    assert train(toy, tmp_path / "lstm", "--max-steps", "1") == 0
    (toy / "wiki.valid.tokens").write_text("", encoding="utf-8")
    attention = ["--save-attention", str(tmp_path / "attention.json")]
    capsys.readouterr()
    commands = [
        [
            "tune",
            "--checkpoint",
            str(tmp_path / "lstm" / "best.pt"),
            "--output",
            str(tmp_path / "tuning.json"),
        ],
        ["analyze", "pointer_sentinel", "--checkpoint", str(tmp_path / "run" / "best.pt"), *attention],
        [
            "analyze",
            "neural_cache",
            "--checkpoint",
            str(tmp_path / "lstm" / "best.pt"),
            "--theta",
            "0.1",
            "--interpolation",
            "0.1",
            *attention,
        ],
    ]
    for command in commands:
        assert baselines_main([*command, "--dataset", str(toy), "--device", "cpu"]) == 2
        assert capsys.readouterr().err == (
            f"error: {toy / 'wiki.valid.tokens'}: the valid split is empty (no tokens): nothing to score\n"
        )
    assert not (tmp_path / "tuning.json").exists()


def test_train_refuses_an_empty_valid_split_before_training(toy, tmp_path, capsys):
    (toy / "wiki.valid.tokens").write_text("", encoding="utf-8")
    assert train(toy, tmp_path / "run") == 2
    assert capsys.readouterr().err == (
        f"error: {toy / 'wiki.valid.tokens'}: the valid split is empty (no tokens): nothing to score\n"
    )
    assert not (tmp_path / "run" / "best.pt").exists()


@pytest.mark.parametrize(
    "option, value, message",
    [
        ("--lr", "-1", "argument --lr: must be a finite number greater than 0, got -1"),
        ("--lr", "0", "argument --lr: must be a finite number greater than 0, got 0"),
        ("--lr", "nan", "argument --lr: must be a finite number greater than 0, got nan"),
        ("--clip", "-1", "argument --clip: must be a finite number greater than 0, got -1"),
        ("--clip", "x", "argument --clip: 'x' is not a number"),
    ],
)
def test_train_refuses_a_bad_learning_rate_or_clip_in_one_line(toy, tmp_path, capsys, option, value, message):
    assert train(toy, tmp_path / "run", option, value) == 2
    assert capsys.readouterr().err == f"error: {message}\n"
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", '{"best": [1]}'])
def test_tune_refuses_a_corrupt_tuning_file_before_tuning(toy, tmp_path, capsys, monkeypatch, content):
    assert train(toy, tmp_path / "run", "--max-steps", "1") == 0
    tuning = tmp_path / "run" / "neural_cache.json"
    tuning.write_text(content, encoding="utf-8")

    def never(*args, **kwargs):
        raise AssertionError("tuned despite the corrupt tuning file")

    monkeypatch.setattr("baselines.cli.tune", never)
    capsys.readouterr()
    command = ["tune", "--dataset", str(toy), "--checkpoint", str(tmp_path / "run" / "best.pt")]
    assert baselines_main([*command, "--windows", "3", "--device", "cpu"]) == 2
    assert capsys.readouterr().err.startswith(f"error: {tuning}: not a neural-cache tuning file (")
    assert tuning.read_text(encoding="utf-8") == content


@pytest.mark.parametrize(
    "settings, problem",
    [
        ({"theta": 0.1}, "no interpolation"),
        ({"theta": "a", "interpolation": 0.1}, "theta must be a finite number of at least 0, got 'a'"),
        ({"theta": -1, "interpolation": 0.1}, "theta must be a finite number of at least 0, got -1"),
        ({"theta": 0.1, "interpolation": 1.0}, "interpolation must be at least 0 and below 1, got 1.0"),
        ([0.1, 0.2], "not a mapping of theta and interpolation"),
    ],
)
def test_a_malformed_tuning_entry_is_one_line_naming_the_file_and_window(
    toy, tmp_path, capsys, settings, problem
):
    assert train(toy, tmp_path / "run", "--max-steps", "1") == 0
    best, tuning = tmp_path / "run" / "best.pt", tmp_path / "run" / "neural_cache.json"
    tuning.write_text(json.dumps({"best": {"5": settings}}), encoding="utf-8")
    named = ["--dataset", str(toy), "--checkpoint", str(best), "--device", "cpu"]
    capsys.readouterr()
    for main, command in (
        (
            baselines_main,
            [
                "analyze",
                "neural_cache",
                "--window",
                "5",
                "--save-attention",
                str(tmp_path / "a.json"),
                *named,
            ],
        ),
        (harness_main, ["eval", "baselines.neural_cache", "--model-args", "window=5", *named]),
    ):
        assert main(command) == 2
        assert capsys.readouterr().err == f"error: {tuning}: window 5: {problem}\n", command


@pytest.mark.parametrize(
    "device, message",
    [
        ("tpu", "--device 'tpu' is not a device (auto, cpu, cuda or cuda:N)"),
        ("cuda", "--device cuda: CUDA is not available on this machine (use --device cpu)"),
    ],
)
def test_devices_are_checked_before_any_work(toy, tmp_path, capsys, device, message):
    if device == "cuda" and torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    assert harness_main(["eval", "unigram", "--dataset", str(toy), "--device", device]) == 2
    assert capsys.readouterr().err.strip() == f"error: {message}"
    assert (
        baselines_main(
            [
                "train",
                "zoneout_lstm",
                "--dataset",
                str(toy),
                "--device",
                device,
                "--output-dir",
                str(tmp_path / "run"),
            ]
        )
        == 2
    )
    assert capsys.readouterr().err.strip() == f"error: {message}"


def test_checkpoint_holding_code_is_refused(toy, tmp_path, capsys):
    evil = tmp_path / "evil.pt"
    torch.save({"format": checkpoints.FORMAT, "payload": Path("not/allowed")}, evil)
    assert (
        harness_main(["eval", "baselines.zoneout_lstm", "--dataset", str(toy), "--checkpoint", str(evil)])
        == 2
    )
    assert "holds Python objects other than tensors" in capsys.readouterr().err


def test_a_cache_tuned_on_another_checkpoint_is_refused_until_tuned_again(toy, tmp_path, capsys):
    """A checkpoint retrained in place of the tuned one does not inherit the tuned theta and lambda."""
    assert train(toy, tmp_path / "run", "--max-steps", "2") == 0
    best, tuning = tmp_path / "run" / "best.pt", tmp_path / "run" / "neural_cache.json"
    grid = ["--thetas", "0.5", "--interpolations", "0.2", "--device", "cpu"]
    tune = ["tune", "--dataset", str(toy), "--checkpoint", str(best), *grid]
    assert baselines_main([*tune, "--windows", "3", "5"]) == 0
    payload = checkpoints.load(best)
    name = next(name for name, tensor in payload["model"].items() if tensor.is_floating_point())
    payload["model"][name] = payload["model"][name] + 0.01
    checkpoints.save(best, payload)  # retrained, in place
    scoring = ["eval", "baselines.neural_cache", "--dataset", str(toy), "--checkpoint", str(best)]
    capsys.readouterr()
    assert harness_main([*scoring, "--model-args", "window=3"]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"error: {tuning} was tuned on another checkpoint than {best} ("), error
    assert f"run `{shlex.join(['python', '-m', 'baselines', 'tune', '--dataset', str(toy)])}" in error
    assert baselines_main([*tune, "--windows", "3"]) == 0
    replaced = f"note: {tuning} was tuned on another checkpoint: its entries are replaced"
    assert replaced in capsys.readouterr().err
    record = json.loads(tuning.read_text(encoding="utf-8"))
    assert list(record["best"]) == ["3"] and record["checkpoint_sha256"] == file_sha256(best)
    assert harness_main([*scoring, "--split", "valid", "--model-args", "window=3"]) == 0


def test_tune_grid_agrees_with_the_plugin(toy, tmp_path, capsys):
    assert train(toy, tmp_path / "run", "--max-steps", "4") == 0
    capsys.readouterr()
    best = tmp_path / "run" / "best.pt"
    assert (
        baselines_main(
            [
                "tune",
                "--dataset",
                str(toy),
                "--checkpoint",
                str(best),
                "--windows",
                "3",
                "20",
                "--thetas",
                "0.0",
                "0.5",
                "--interpolations",
                "0.0",
                "0.1",
                "0.2",
                "--device",
                "cpu",
            ]
        )
        == 0
    )
    tuning = json.loads((tmp_path / "run" / "neural_cache.json").read_text())
    searches = tuning["searches"]
    edges = capsys.readouterr().err
    for window in ("3", "20"):  # a best theta of 0.5 or lambda of 0.2 is at the grid's edge
        chosen = tuning["best"][window]
        for name, option, edge in (("theta", "--thetas", 0.5), ("interpolation", "--interpolations", 0.2)):
            note = f"note: window {window}: the best {name}, {edge:g}, is the largest of {option}"
            assert (note in edges) == (chosen[name] == edge), (note, edges)
    assert "note: window 20: the best interpolation, 0.2," in edges  # the grid stops short of the best
    assert "smallest" not in edges  # 0 is the bound of both, not an edge to widen
    dataset = load_dataset(str(toy))
    lstm, _ = checkpoints.load_model(best, dataset.vocab)
    valid = dataset.tokens("valid").ids
    for window in (3, 20):
        for i, theta in enumerate((0.0, 0.5)):  # theta 0: a uniform cache over the window
            for j, interpolation in enumerate((0.0, 0.1, 0.2)):
                cache = TorchLanguageModel(NeuralCache(lstm, window, theta, interpolation), "cpu")
                result = evaluate(
                    cache, valid, eos_id=dataset.vocab.eos_id, vocab_size=len(dataset.vocab), progress=False
                )
                assert searches[str(window)]["grid"][i][j] == pytest.approx(result.perplexity, rel=1e-6)
    # The plugin reads the tuned theta and lambda for its window.
    capsys.readouterr()
    assert (
        harness_main(
            [
                "eval",
                "baselines.neural_cache",
                "--dataset",
                str(toy),
                "--split",
                "valid",
                "--checkpoint",
                str(best),
                "--model-args",
                "window=20",
            ]
        )
        == 0
    )
    assert f"{tuning['best']['20']['perplexity']:.2f}" in capsys.readouterr().out


def test_grid_edge_notes_name_each_setting_a_wider_grid_could_improve():
    axes = [("lr", "--lrs", [1e-4, 3e-4], 0.0, math.inf), ("segment", "--segments", [50, 100], 1, 100)]
    notes = baselines_cli.grid_edge_notes("zoneout_lstm/rms", {"lr": 1e-4, "segment": 100}, axes)
    assert notes == [
        "note: zoneout_lstm/rms: the best lr, 0.0001, is the smallest of --lrs: the best value may "
        "lie beyond it; widen --lrs and tune again"
    ]  # segment 100 is the bound (the BPTT), not an edge to widen
    assert baselines_cli.grid_edge_notes("w", {"lr": 3e-4, "segment": 50}, axes) == [
        "note: w: the best lr, 0.0003, is the largest of --lrs: the best value may lie beyond it; "
        "widen --lrs and tune again",
        "note: w: the best segment, 50, is the smallest of --segments: the best value may lie beyond "
        "it; widen --segments and tune again",
    ]
    assert (
        baselines_cli.grid_edge_notes("w", {"lr": 2e-4}, [("lr", "--lrs", [1e-4, 2e-4, 3e-4], 0.0, math.inf)])
        == []
    )
    assert (
        baselines_cli.grid_edge_notes("w", {"lr": 2e-4}, [("lr", "--lrs", [2e-4], 0.0, math.inf)]) == []
    )  # no grid
    past_bound = [("segment", "--segments", [50, 200], 1, 100)]  # past the BPTT, a segment acts as the BPTT
    assert baselines_cli.grid_edge_notes("w", {"segment": 200}, past_bound) == []


def test_neural_cache_without_tuning_says_how_to_tune(toy, tmp_path, capsys):
    assert train(toy, tmp_path / "my run", "--max-steps", "2") == 0
    best = str(tmp_path / "my run" / "best.pt")
    assert harness_main(["eval", "baselines.neural_cache", "--dataset", str(toy), "--checkpoint", best]) == 2
    tune = [
        "python",
        "-m",
        "baselines",
        "tune",
        "--dataset",
        str(toy),
        "--checkpoint",
        best,
        "--windows",
        "100",
    ]
    assert f"run `{shlex.join(tune)}` or give theta and interpolation" in capsys.readouterr().err


def test_the_cache_plugin_and_analyze_resolve_theta_and_lambda_alike(toy, tmp_path, capsys):
    """One resolution (``cache_from_checkpoint``): given values win, the tuning file fills the
    others, out-of-range values are one-line errors."""
    assert train(toy, tmp_path / "run", "--max-steps", "2") == 0
    best = tmp_path / "run" / "best.pt"
    settings = {"theta": 0.5, "interpolation": 0.2, "perplexity": 10.0}
    (tmp_path / "run" / "neural_cache.json").write_text(
        json.dumps({"checkpoint_sha256": file_sha256(best), "best": {"5": settings}})
    )
    dataset = load_dataset(str(toy))
    cache = cache_from_checkpoint(best, dataset, 5)
    assert (cache.window, cache.theta, cache.interpolation) == (5, 0.5, 0.2)
    assert cache_from_checkpoint(best, dataset, 5, interpolation=0.3).interpolation == 0.3
    with pytest.raises(ModelUnavailable, match="python -m baselines tune"):
        cache_from_checkpoint(best, dataset, 7, theta=0.5)
    attention = tmp_path / "attention.json"
    assert (
        baselines_main(
            [
                "analyze",
                "neural_cache",
                "--dataset",
                str(toy),
                "--checkpoint",
                str(best),
                "--window",
                "5",
                "--save-attention",
                str(attention),
                "--device",
                "cpu",
            ]
        )
        == 0
    )
    capsys.readouterr()
    for command in (
        ["analyze", "neural_cache", "--window", "5", "--interpolation", "1.5", "--device", "cpu"],
        ["analyze", "neural_cache", "--window", "7", "--device", "cpu"],
    ):
        named = ["--dataset", str(toy), "--checkpoint", str(best), "--save-attention", str(attention)]
        assert baselines_main([*command, *named]) == 2
        assert capsys.readouterr().err.count("\n") == 1


@pytest.mark.parametrize(
    "options, error",
    [
        ("pointer_sentinel --save-gates G.npy --window 50", "--window: the pointer sentinel has no cache"),
        ("pointer_sentinel --save-gates G.npy --theta 0.1", "--theta: the pointer sentinel has no cache"),
        (
            "pointer_sentinel --save-attention A.json --interpolation 0.1",
            "--interpolation: the pointer sentinel has no cache",
        ),
        (
            "pointer_sentinel",
            "analyze pointer_sentinel writes nothing without --save-gates or --save-attention",
        ),
        ("neural_cache --window 5", "analyze neural_cache writes nothing without --save-attention"),
    ],
)
def test_analyze_refuses_options_it_would_ignore_and_a_run_that_writes_nothing(
    toy, tmp_path, capsys, monkeypatch, options, error
):
    monkeypatch.chdir(tmp_path)
    assert baselines_main(["analyze", *options.split(), "--dataset", str(toy), "--device", "cpu"]) == 2
    assert capsys.readouterr().err == f"error: {error}\n"
    assert list(tmp_path.iterdir()) == [toy]


def test_analyze_refuses_a_span_beyond_the_split_before_any_work(toy, tmp_path, capsys):
    tokens = len(load_dataset(str(toy)).tokens("valid").ids)
    gates = tmp_path / "gates.npy"
    command = ["analyze", "pointer_sentinel", "--dataset", str(toy), "--save-gates", str(gates)]
    assert baselines_main([*command, "--span", f"{tokens}:{tokens + 10}", "--device", "cpu"]) == 2
    assert capsys.readouterr().err == (
        f"error: --span {tokens}:{tokens + 10}: the valid split has {tokens:,} tokens, so a span must "
        f"begin below {tokens}\n"
    )
    assert not gates.exists()


@pytest.mark.parametrize(
    "model_args, message",
    [
        ("window=abc", "window must be a positive integer, got 'abc'"),
        ("window=2.5", "window must be a positive integer, got 2.5"),
        ("theta=abc", "theta must be a number, got 'abc'"),
        ("interpolation=true", "interpolation must be a number, got True"),
    ],
)
def test_the_cache_plugin_refuses_bad_arguments_in_one_line(toy, tmp_path, capsys, model_args, message):
    assert (
        harness_main(
            [
                "eval",
                "baselines.neural_cache",
                "--dataset",
                str(toy),
                "--checkpoint",
                str(tmp_path / "best.pt"),
                "--model-args",
                model_args,
            ]
        )
        == 2
    )
    assert capsys.readouterr().err == f"error: neural_cache: {message}\n"


def test_analyze_writes_gates_and_attention(toy, tmp_path):
    assert train(toy, tmp_path / "run", "--max-steps", "3", kind="pointer_sentinel") == 0
    gates, attention = tmp_path / "gates.npy", tmp_path / "attention.json"
    assert (
        baselines_main(
            [
                "analyze",
                "pointer_sentinel",
                "--dataset",
                str(toy),
                "--checkpoint",
                str(tmp_path / "run" / "best.pt"),
                "--span",
                "2:6",
                "--save-gates",
                str(gates),
                "--save-attention",
                str(attention),
                "--device",
                "cpu",
            ]
        )
        == 0
    )
    values = np.load(gates)
    assert values.shape == (load_dataset(str(toy)).tokens("valid").ids.shape[0],)
    assert ((values > 0) & (values <= 1)).all()
    positions = json.loads(attention.read_text())["positions"]
    assert [p["position"] for p in positions] == [2, 3, 4, 5]
    for position in positions:
        assert sum(weight for _, weight in position["attended"]) + position["gate"] == pytest.approx(
            1.0, abs=1e-5
        )


def test_calibrate_writes_the_bias_that_the_plugin_then_scores(toy, tmp_path, capsys, package_dir):
    assert train(toy, tmp_path / "run", "--max-steps", "3", kind="pointer_sentinel") == 0
    best, calibrated = tmp_path / "run" / "best.pt", tmp_path / "calibrated.pt"
    before = file_sha256(best)
    calibrate = ["calibrate", str(best), "--dataset", str(toy), "--device", "cpu"]
    fit = ["--split", "valid", "--batch-size", "1", "--output", str(calibrated)]  # the harness's layout
    capsys.readouterr()
    assert baselines_main([*calibrate, *fit]) == 0
    assert capsys.readouterr().out.startswith("sentinel bias ")
    payload = checkpoints.load(calibrated)
    record = payload["calibration"]
    assert payload["config"]["sentinel_bias"] == record["sentinel_bias"] == record["shift"] != 0
    assert (record["split"], record["tokens"]) == ("valid", len(load_dataset(str(toy)).tokens("valid").ids))
    assert record["perplexity_after"] < record["perplexity_before"]
    assert file_sha256(best) == before
    assert weights(calibrated).keys() == weights(best).keys()

    scored = ["eval", "baselines.pointer_sentinel", "--dataset", str(toy), "--split", "valid"]
    assert (
        harness_main([*scored, "--checkpoint", str(calibrated), "--output-dir", str(tmp_path / "out")]) == 0
    )
    (result,) = (tmp_path / "out").glob("*.valid.json")
    scores = json.loads(result.read_text())
    assert scores["perplexity"] == pytest.approx(record["perplexity_after"], rel=1e-6)
    assert scores["plugin_metadata"]["calibration"] == record

    shipped = checkpoints.load(checkpoints.package(calibrated, payload["dataset"], "int8"))
    assert (shipped["config"], shipped["calibration"]) == (payload["config"], record)


def test_calibrate_refuses_other_models_and_its_own_input(toy, tmp_path, capsys):
    assert train(toy, tmp_path / "lstm", "--max-steps", "1") == 0
    assert train(toy, tmp_path / "pointer", "--max-steps", "1", kind="pointer_sentinel") == 0
    capsys.readouterr()
    for checkpoint, output, message in [
        (
            tmp_path / "lstm" / "best.pt",
            tmp_path / "out.pt",
            "holds a zoneout_lstm model, not pointer_sentinel",
        ),
        (tmp_path / "pointer" / "best.pt", tmp_path / "pointer" / "best.pt", "--output"),
    ]:
        command = ["calibrate", str(checkpoint), "--dataset", str(toy), "--output", str(output)]
        assert baselines_main(command) == 2
        error = capsys.readouterr().err.strip()
        assert error.startswith("error: ") and message in error and "\n" not in error
    assert not (tmp_path / "out.pt").exists()


def test_distributed_training_matches_one_process(toy, tmp_path):
    """Two gloo processes with half the streams each take the same steps as one process
    (no dropout or zoneout, so the only difference is the order of the gradient sums)."""
    settings = [
        "--model-args",
        TOY + ",dropout=0,zoneout_hidden=0,zoneout_cell=0",
        "--max-epochs",
        "1",
        "--lr",
        "1",
    ]
    assert (
        baselines_main(
            [
                "train",
                "zoneout_lstm",
                "--dataset",
                str(toy),
                "--preset",
                "tiny",
                "--batch-size",
                "2",
                "--bptt",
                "6",
                "--device",
                "cpu",
                "--output-dir",
                str(tmp_path / "single"),
                *settings,
            ]
        )
        == 0
    )
    environment = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node",
            "2",
            "-m",
            "baselines",
            "train",
            "zoneout_lstm",
            "--dataset",
            str(toy),
            "--preset",
            "tiny",
            "--batch-size",
            "2",
            "--bptt",
            "6",
            "--device",
            "cpu",
            "--output-dir",
            str(tmp_path / "ddp"),
            *settings,
        ],
        capture_output=True,
        text=True,
        env=environment,
        timeout=300,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert "2 process(es)" in completed.stderr
    single, ddp = weights(tmp_path / "single" / "checkpoint.pt"), weights(tmp_path / "ddp" / "checkpoint.pt")
    for name in single:
        torch.testing.assert_close(single[name], ddp[name], rtol=1e-4, atol=1e-5)


def test_the_gpu_code_path_runs_on_cpu(toy, tmp_path):
    """What a GPU run executes, with tiny shapes on CPU: two processes under torchrun (the same
    process-group code; gloo stands in for nccl), the step compiled by torch.compile, bfloat16
    autocast, a stop mid-epoch agreed through the device-side stop flag, validation on process 0
    broadcast to the other, and a resume to the end of the run."""
    environment = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "2",
        "-m",
        "baselines",
        "train",
        "pointer_sentinel",
        "--dataset",
        str(toy),
        "--preset",
        "tiny",
        "--model-args",
        TOY,
        "--batch-size",
        "2",
        "--bptt",
        "6",
        "--device",
        "cpu",
        "--amp",
        "on",
        "--compile",
        "on",
        "--max-epochs",
        "2",
        "--output-dir",
        str(tmp_path / "run"),
    ]
    outcomes = []
    for extra in (["--max-steps", "3"], []):
        completed = subprocess.run(
            command + extra, capture_output=True, text=True, env=environment, timeout=600
        )
        assert completed.returncode == 0, completed.stderr[-2000:]
        outcomes.append(completed.stderr)
    assert "--max-steps 3 reached: stopped in epoch 1 at step 3/" in outcomes[0]
    assert "finished after 2 epochs" in outcomes[1]
    records = epoch_records(tmp_path / "run")
    assert [(r["epoch"], r["partial"]) for r in records] == [(1, True), (1, False), (2, False)]
    assert all(math.isfinite(r["valid_ppl"]) for r in records)
    for tensor in weights(tmp_path / "run" / "best.pt").values():
        assert torch.isfinite(tensor.float()).all()


#: Runs stopped after 5 steps by the code of commit c8f7350, before the ``core`` package and the
#: plugin moves, with ``train(toy, RUN, "--max-epochs", "2", "--max-steps", "5")``.
RUNS_BEFORE_CORE = Path(__file__).parent / "data" / "run_before_core"


@pytest.mark.parametrize("kind", ["zoneout_lstm", "pointer_sentinel"])
def test_a_run_written_by_older_code_resumes_to_the_uninterrupted_weights(toy, tmp_path, kind):
    shutil.copytree(RUNS_BEFORE_CORE / kind, tmp_path / "old")
    assert train(toy, tmp_path / "old", "--max-epochs", "2", kind=kind) == 0
    assert train(toy, tmp_path / "whole", "--max-epochs", "2", kind=kind) == 0
    whole, resumed = (
        weights(tmp_path / "whole" / "checkpoint.pt"),
        weights(tmp_path / "old" / "checkpoint.pt"),
    )
    assert whole.keys() == resumed.keys()
    for name in whole:
        # Bit-identical on the CPU that wrote the runs; float32 kernels of another CPU round the
        # first 5 steps differently, and 28 steps carry it on (4e-7 on an AVX2-only CPU, 1.1e-5
        # for the pointer on another AVX-512 one); runs that differ in their random streams
        # (another --seed) differ by about 1.
        torch.testing.assert_close(resumed[name], whole[name], rtol=0, atol=1e-4, msg=name)


def test_a_log_written_before_the_schema_versions_goes_on_with_versioned_records(toy, tmp_path):
    """A run whose log holds records without ``schema_version`` (written by code before the
    training-log schema, version 1), resumed: the resume rules read them (the stop's validation is
    not done again; a record beyond the checkpoint, left by a kill, is dropped), the run appends
    records with their version, and the leaderboard reads the two alike."""
    run, every = tmp_path / "run", ["--max-epochs", "2", "--validate-every", "4"]
    assert train(toy, run, *every, "--max-steps", "9") == 0
    unversioned = [
        {key: value for key, value in record.items() if key != "schema_version"}
        for record in epoch_records(run)
    ]
    beyond = {**unversioned[-1], "step": 12}  # logged by a run killed before its checkpoint
    (run / "log.jsonl").write_text("".join(json.dumps(record) + "\n" for record in [*unversioned, beyond]))
    assert train(toy, run, *every) == 0
    records = epoch_records(run)
    assert records[: len(unversioned)] == unversioned
    assert [record.get("schema_version") for record in records[len(unversioned) :]] == [1] * (
        len(records) - len(unversioned)
    )
    steps = [(record["epoch"], record.get("step")) for record in records]
    assert steps[: len(unversioned) + 1] == [(1, 4), (1, 8), (1, 9), (1, 12)]
    assert load_training_log(run / "log.jsonl")["valid_ppl"].tolist() == [r["valid_ppl"] for r in records]


def test_a_best_file_newer_than_the_checkpoint_is_not_overwritten_by_a_worse_one(toy, tmp_path):
    """A kill between writing ``best.pt`` and the ``checkpoint.pt`` that records it: the resumed
    run must keep the better weights rather than replace them with its next validation's."""
    run = tmp_path / "run"
    assert train(toy, run, "--max-epochs", "2", "--max-steps", "3") == 0
    early = checkpoints.load(run / "checkpoint.pt")
    early["training"]["progress"]["best_file_valid"] = math.inf  # saved before any validation
    assert train(toy, run, "--max-epochs", "2") == 0
    best = checkpoints.load(run / "best.pt")
    best["valid_perplexity"] = 1.0  # a better model, written just before the kill
    checkpoints.save(run / "best.pt", best)
    checkpoints.save(run / "checkpoint.pt", early)
    assert train(toy, run, "--max-epochs", "2") == 0
    assert checkpoints.load(run / "best.pt")["valid_perplexity"] == 1.0


def test_max_steps_counts_the_runs_steps_so_a_rerun_after_a_stop_ends_where_one_run_would(
    toy, tmp_path, capsys
):
    assert train(toy, tmp_path / "whole", "--max-steps", "5") == 0
    run = tmp_path / "run"
    assert train(toy, run, "--max-steps", "3") == 0  # a stop before the end, as Ctrl-C would
    assert train(toy, run, "--max-steps", "5") == 0  # the recipe's command, rerun
    progress = checkpoints.load(run / "checkpoint.pt")["training"]["progress"]
    assert (len(progress["valid_history"]), progress["next_chunk"]) == (0, 5)
    whole = weights(tmp_path / "whole" / "checkpoint.pt")
    assert all(torch.equal(whole[name], weights(run / "checkpoint.pt")[name]) for name in whole)
    records = epoch_records(run)
    capsys.readouterr()
    assert train(toy, run, "--max-steps", "5") == 0  # done: nothing trained, validated or logged
    err = capsys.readouterr().err
    assert "--max-steps 5 reached: stopped in epoch 1 at step 5/" in err
    assert "rerun with a larger --max-steps to continue" in err
    assert epoch_records(run) == records


@pytest.mark.parametrize("kind", ["zoneout_lstm", "pointer_sentinel"])
def test_a_sampled_softmax_phase_trains_its_steps_then_the_full_softmax_and_resumes_exactly(
    toy, tmp_path, monkeypatch, kind
):
    sampled = ["--max-epochs", "2", "--sampled-softmax", "5", "--sampled-softmax-steps", "16"]
    draws = []
    original = trainer.UnigramSampler.draw
    monkeypatch.setattr(
        trainer.UnigramSampler, "draw", lambda self, *a: draws.append(1) or original(self, *a)
    )
    assert train(toy, tmp_path / "whole", *sampled, kind=kind) == 0
    assert len(draws) == 16  # then the full softmax, to the end of epoch 2
    assert train(toy, tmp_path / "parts", *sampled, "--max-steps", "7", kind=kind) == 0
    assert train(toy, tmp_path / "parts", *sampled, "--max-steps", "19", kind=kind) == 0
    assert train(toy, tmp_path / "parts", *sampled, kind=kind) == 0
    whole, parts = (weights(tmp_path / run / "checkpoint.pt") for run in ("whole", "parts"))
    assert all(torch.equal(whole[name], parts[name]) for name in whole)
    streams = training.training_streams(load_dataset(str(toy)).tokens("train").ids, 2)
    chunks = math.ceil((streams.shape[1] - 1) / 6)
    assert chunks < 16 < 2 * chunks  # the phase ends within epoch 2
    assert [r["sampled_steps"] for r in epoch_records(tmp_path / "whole")] == [chunks, 16 - chunks]
    assert train(toy, tmp_path / "plain", "--max-epochs", "2", kind=kind) == 0
    plain = weights(tmp_path / "plain" / "checkpoint.pt")
    assert not all(torch.equal(whole[name], plain[name]) for name in whole)
    assert "sampled_steps" not in epoch_records(tmp_path / "plain")[0]


@pytest.mark.parametrize("option", [["--sampled-softmax", "100"], ["--sampled-softmax-steps", "100"]])
def test_a_sampled_softmax_without_its_steps_or_size_is_one_line(toy, tmp_path, capsys, option):
    assert train(toy, tmp_path / "run", *option) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith("error: --sampled-softmax and --sampled-softmax-steps go together")
        and err.count("\n") == 1
    )
    assert not (tmp_path / "run").exists()
