"""The baselines' commands under faults: a second writer, Ctrl-C and SIGTERM, what a killed run
left behind (temporaries, a log record of work its checkpoint does not hold, a stop's validation
cut short), a full disk, two tunings writing one file, and sizes or rates beyond float32."""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from conftest import REPO, assert_one_line_error, write_corpus

from baselines import checkpoint as checkpoints
from baselines.cli import main as baselines_main
from baselines.run_directory import RunDirectory
from baselines.trainer import Trainer
from baselines.validation import Validation
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


def best_weights(run: Path) -> tuple[float, dict[str, torch.Tensor]]:
    """The validation perplexity and the weights of the run's ``best.pt``."""
    payload = checkpoints.load(run / checkpoints.BEST)
    return payload["valid_perplexity"], payload["model"]


@pytest.mark.parametrize("killed_in", [(Validation, "validate"), (RunDirectory, "append_log")])
@pytest.mark.parametrize("rerun", [["--max-steps", "3"], ["--max-steps", "5"]], ids=["same", "further"])
def test_a_stops_validation_cut_short_by_a_kill_is_done_by_the_rerun(
    toy, tmp_path, monkeypatch, killed_in, rerun
):
    """A kill while a --max-steps stop validates (or just before it logs the record): the rerun,
    the same command or one that trains on, validates the stopped weights first, keeps them in
    best.pt and logs them once, without training their steps again."""
    whole = tmp_path / "whole"
    assert train(toy, whole, "--max-steps", "3") == 0 and train(toy, whole, *rerun) == 0
    run = tmp_path / "run"
    cut_short = getattr(*killed_in)

    def killed(*args: object) -> None:
        raise Killed

    monkeypatch.setattr(*killed_in, killed)
    with pytest.raises(Killed):
        train(toy, run, "--max-steps", "3")
    monkeypatch.setattr(*killed_in, cut_short)
    steps = []
    step = Trainer._step
    monkeypatch.setattr(Trainer, "_step", lambda self: steps.append(step(self)))
    assert train(toy, run, *rerun) == 0
    assert len(steps) == int(rerun[1]) - 3
    assert log_records(run) == log_records(whole)
    (mine, my_weights), (theirs, their_weights) = best_weights(run), best_weights(whole)
    assert mine == theirs and my_weights.keys() == their_weights.keys()
    assert all(torch.equal(my_weights[name], their_weights[name]) for name in my_weights)


#: ``python -c FULL_DISK ROOM ARGUMENTS...``: ``python -m baselines ARGUMENTS...`` where no file
#: may grow beyond ROOM bytes; a write beyond is refused by the kernel (EFBIG), as one on a full
#: disk is (ENOSPC).
FULL_DISK = (
    "import resource, runpy, signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
    "resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[1]), resource.RLIM_INFINITY)); "
    "sys.argv = ['baselines', *sys.argv[2:]]; runpy.run_module('baselines', run_name='__main__')"
)


#: Sizes whose checkpoint holds a weight of 64 kB, which torch writes past the file's buffer: a
#: refused write of that kind comes out of ``torch.save`` as a RuntimeError that names no cause.
WIDE = ["--model-args", "embedding_size=8,hidden_size=64"]


def on_a_full_disk(room: int, *arguments: str) -> subprocess.CompletedProcess:
    """``python -m baselines ARGUMENTS`` where no file may grow beyond ``room`` bytes."""
    environment = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": str(REPO),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    return subprocess.run(
        [sys.executable, "-c", FULL_DISK, str(room), *arguments],
        capture_output=True,
        text=True,
        env=environment,
        timeout=300,
    )


def snapshot(directory: Path) -> dict[str, bytes]:
    """The name and content of each file of ``directory``."""
    return {path.name: path.read_bytes() for path in sorted(directory.iterdir()) if path.is_file()}


def assert_failed_in_one_line_naming(process: subprocess.CompletedProcess, path: Path) -> None:
    assert process.returncode == 2 and "Traceback" not in process.stderr, process.stderr[-3000:]
    last = process.stderr.splitlines()[-1]
    assert last.startswith("error: ") and f"writing {path};" in last, last


def test_a_full_disk_under_training_is_one_line_naming_the_checkpoint_and_keeps_the_saved_files(
    toy, tmp_path
):
    run = tmp_path / "run"
    assert train(toy, run, "--max-steps", "2", *WIDE) == 0
    saved = snapshot(run)
    arguments = [*TRAIN, *WIDE, "--dataset", str(toy), "--output-dir", str(run), "--threads", "1"]
    process = on_a_full_disk(4096, *arguments, "--max-steps", "4")
    assert_failed_in_one_line_naming(process, run / checkpoints.RESUME)
    now = snapshot(run)
    assert {name: now[name] for name in saved if name != "config.json"} == {
        name: content for name, content in saved.items() if name != "config.json"
    }  # config.json records the command, which ran in another process
    assert now.keys() == saved.keys()  # no temporary left behind


def train_pointer(toy: Path, run: Path) -> None:
    """A Pointer Sentinel-LSTM of one step on the toy corpus, in ``run``."""
    pointer = ["train", "pointer_sentinel", *TRAIN[2:], *WIDE, "--max-steps", "1"]
    assert baselines_main([*pointer, "--dataset", str(toy), "--output-dir", str(run)]) == 0


def test_a_full_disk_under_calibrate_is_one_line_naming_the_output_and_keeps_the_previous_one(toy, tmp_path):
    run, output = tmp_path / "run", tmp_path / "calibrated.pt"
    train_pointer(toy, run)
    shutil.copyfile(run / checkpoints.BEST, output)  # a calibration written earlier
    previous = output.read_bytes()
    calibrate = ["calibrate", str(run / checkpoints.BEST), "--dataset", str(toy), "--output", str(output)]
    process = on_a_full_disk(4096, *calibrate, "--device", "cpu", "--threads", "1")
    assert_failed_in_one_line_naming(process, output)
    assert output.read_bytes() == previous
    assert sorted(path.name for path in tmp_path.iterdir() if path.name.startswith(".calibrated")) == []


def test_a_full_disk_under_the_training_log_is_one_line_naming_it(toy, tmp_path, monkeypatch, capsys):
    """The disk fills as a validation's record is appended to ``log.jsonl``: one line naming it,
    and the rerun, room made, logs that validation once."""
    fsync = os.fsync

    def full_for_the_log(descriptor: int) -> None:
        if os.readlink(f"/proc/self/fd/{descriptor}").endswith(checkpoints.LOG):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        fsync(descriptor)

    run = tmp_path / "run"
    monkeypatch.setattr(os, "fsync", full_for_the_log)
    assert train(toy, run, "--max-steps", "2") == 2
    err = capsys.readouterr().err.splitlines()[-1]
    assert err.startswith(f"error: No space left on device writing {run / checkpoints.LOG}; "), err
    monkeypatch.setattr(os, "fsync", fsync)
    assert train(toy, run, "--max-steps", "2") == 0
    assert train(toy, tmp_path / "whole", "--max-steps", "2") == 0
    assert log_records(run) == log_records(tmp_path / "whole")


@pytest.mark.parametrize(
    "kind, options, message",
    [
        ("zoneout_lstm", ["--lr", "1e308"], "--lr 1e+308: "),
        (
            "pointer_sentinel",
            ["--lr", "1e37", "--pointer-lr-scale", "100"],
            "--lr 1e+37 times --pointer-lr-scale 100: ",
        ),
        ("pointer_sentinel", ["--model-args", "sentinel_bias=1e308"], "--model-args sentinel_bias=1e+308: "),
    ],
)
def test_a_rate_or_value_beyond_float32_is_refused_before_training(
    toy, tmp_path, capsys, kind, options, message
):
    run = tmp_path / "run"
    command = ["train", kind, *TRAIN[2:], "--dataset", str(toy), "--output-dir", str(run)]
    assert baselines_main([*command, *options]) == 2
    assert_one_line_error(capsys, message, "float32")
    assert not run.exists()


def test_a_dynamic_evaluation_rate_beyond_float32_is_one_line(toy, tmp_path, capsys):
    assert train(toy, tmp_path / "run", "--max-steps", "1") == 0
    checkpoint = tmp_path / "run" / checkpoints.BEST
    capsys.readouterr()
    command = ["tune-dynamic", "--dataset", str(toy), "--checkpoint", str(checkpoint), "--lrs", "1e308"]
    assert (
        baselines_main([*command, "--decays", "0", "--bptt", "6", "--threads", "1", "--device", "cpu"]) == 2
    )
    assert "error: tune-dynamic: lr must be " in capsys.readouterr().err
    assert not (checkpoint.parent / "dynamic_eval.json").exists()


def test_a_hidden_size_beyond_any_tensor_is_refused_before_any_allocation(toy, tmp_path, capsys):
    run = tmp_path / "run"
    command = ["train", *TRAIN[1:], "--dataset", str(toy), "--output-dir", str(run)]
    assert baselines_main([*command, "--model-args", f"hidden_size={10**9}"]) == 2
    assert_one_line_error(capsys, "zoneout_lstm of these sizes", "2**63 bytes", "choose smaller --model-args")


@pytest.mark.parametrize("hidden_size", [10**6, 10**9])
def test_a_checkpoint_claiming_sizes_beyond_the_machine_is_refused_before_it_is_built(
    toy, tmp_path, capsys, hidden_size
):
    assert train(toy, tmp_path / "run", "--max-steps", "1") == 0
    claimed = checkpoints.load(tmp_path / "run" / checkpoints.BEST)
    claimed["config"]["hidden_size"] = hidden_size
    checkpoints.save(tmp_path / "claimed.pt", claimed)
    capsys.readouterr()
    assert train(toy, tmp_path / "new", "--init-from", str(tmp_path / "claimed.pt")) == 2
    assert_one_line_error(capsys, f"checkpoint {tmp_path / 'claimed.pt'}: ", "zoneout_lstm")
