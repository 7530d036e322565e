"""``baselines train`` under faults: a second writer, Ctrl-C and SIGTERM, and what a killed run
left behind (temporaries, a log record of work its checkpoint does not hold)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, assert_one_line_error, write_corpus

from baselines import checkpoint as checkpoints
from baselines.cli import main as baselines_main
from baselines.training import Trainer
from wikitext_toolkit_core.files import exclusive_directory

REPEATED = " the cat sat on the mat . \n the dog sat on the log . \n a cat and a dog met on a mat . \n"
#: ``baselines train`` on the toy corpus, tiny shapes; the run directory and the dataset follow.
TRAIN = [
    "train",
    "zoneout_lstm",
    "--preset",
    "tiny",
    "--model-args",
    "embedding_size=8,hidden_size=8",
    "--batch-size",
    "2",
    "--bptt",
    "6",
    "--device",
    "cpu",
]


@pytest.fixture
def toy(tmp_path: Path) -> Path:
    directory = write_corpus(tmp_path / "toy")
    (directory / "wiki.train.tokens").write_text(REPEATED * 6, encoding="utf-8")
    return directory


def train(toy: Path, run: Path, *extra: str) -> int:
    return baselines_main([*TRAIN, "--dataset", str(toy), "--output-dir", str(run), *extra])


def log_records(run: Path) -> list[tuple]:
    """``(epoch, partial, valid_ppl)`` of each record of the run's ``log.jsonl``."""
    lines = (run / checkpoints.LOG).read_text(encoding="utf-8").splitlines()
    return [(r["epoch"], r["partial"], r["valid_ppl"]) for r in map(json.loads, lines)]


def test_a_second_train_in_one_run_directory_is_refused(toy, tmp_path, capsys):
    run = tmp_path / "run"
    with exclusive_directory(run, "--output-dir"):  # a first `baselines train` is writing it
        assert train(toy, run, "--max-steps", "2") == 2
        assert_one_line_error(capsys, f"--output-dir {run}: another process is writing it")
    assert not (run / checkpoints.LOG).exists() and not (run / checkpoints.RESUME).exists()
    assert train(toy, run, "--max-steps", "2") == 0  # once it is done, the directory is free


@pytest.mark.parametrize("signum, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_saves_the_checkpoint_and_exits_128_plus_its_number(toy, tmp_path, signum, status):
    """A real process and a real signal: the run stops at a step boundary with a checkpoint and
    exits as a shell reports the signal, so that `train && eval` does not go on."""
    run = tmp_path / "run"
    endless = ["--max-epochs", "1000000", "--patience", "1000000"]
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "baselines",
            *TRAIN,
            "--dataset",
            str(toy),
            "--output-dir",
            str(run),
            *endless,
        ],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)},
    )
    try:
        deadline = time.monotonic() + 240
        while not (run / checkpoints.RESUME).exists():  # the first epoch is done: it is training
            assert process.poll() is None and time.monotonic() < deadline, process.stderr.read()
            time.sleep(0.2)
        process.send_signal(signum)
        _, err = process.communicate(timeout=120)
    finally:
        process.kill()
    assert process.returncode == status, err[-2000:]
    progress = checkpoints.load(run / checkpoints.RESUME)["training"]["progress"]
    epoch, step = len(progress["valid_history"]) + 1, progress["next_chunk"]
    assert f"{signum.name} received: stopped in epoch {epoch} at step {step}/" in err


@pytest.mark.parametrize(
    "option, reason",
    [
        (["--max-steps", "3"], "--max-steps 3 reached"),
        (["--max-minutes", "1e-6"], "--max-minutes 1e-06 reached"),
    ],
)
def test_a_planned_stop_exits_0(toy, tmp_path, capsys, option, reason):
    assert train(toy, tmp_path / "run", *option) == 0
    assert f"{reason}: stopped in epoch 1" in capsys.readouterr().err


class Killed(BaseException):
    """Stands for a kill -9: nothing after it runs."""


def test_a_run_killed_just_past_an_epoch_record_does_not_log_it_twice(toy, tmp_path, monkeypatch):
    assert train(toy, tmp_path / "whole", "--max-epochs", "2") == 0
    run = tmp_path / "run"
    assert train(toy, run, "--max-epochs", "2", "--max-steps", "3") == 0  # a checkpoint mid-epoch 1
    end_epoch = Trainer._end_epoch

    def end_epoch_then_die(self: Trainer) -> None:
        end_epoch(self)  # the epoch's record is in the log...
        raise Killed  # ...and the checkpoint that holds the epoch is never written

    monkeypatch.setattr(Trainer, "_end_epoch", end_epoch_then_die)
    with pytest.raises(Killed):
        train(toy, run, "--max-epochs", "2")
    with open(run / checkpoints.LOG, "a", encoding="utf-8") as log:
        log.write('{"epoch": 2, "par')  # and a kill in the middle of a line
    monkeypatch.setattr(Trainer, "_end_epoch", end_epoch)
    assert train(toy, run, "--max-epochs", "2") == 0
    whole = log_records(tmp_path / "whole")
    assert log_records(run) == [(1, True, log_records(run)[0][2]), *whole]


def test_the_temporaries_a_killed_run_left_are_removed(toy, tmp_path, capsys):
    finished = subprocess.Popen(["true"])
    finished.wait()  # its process id is free: what a killed writer's is
    run = tmp_path / "run"
    run.mkdir()
    stray = run / f".checkpoint.pt.{finished.pid}-0123abcd.tmp"
    stray.write_bytes(b"half a checkpoint")
    assert train(toy, run, "--max-steps", "2") == 0
    assert not stray.exists()
    assert f"removed {stray}, left by a killed run" in capsys.readouterr().err
