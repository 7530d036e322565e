"""``tools/device_leg.py``: a leg of training on a lent accelerator, rehearsed on the CPU in a
scratch git repository, with the device machine played by a copy of what would travel."""

from __future__ import annotations

import importlib.util
import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import REPO, write_corpus
from test_baselines_training import REPEATED
from test_run_transfer import SIZES, write_small_run

from baselines import checkpoint as checkpoints
from baselines.cli import main as baselines_main

_spec = importlib.util.spec_from_file_location("device_leg", REPO / "tools" / "device_leg.py")
assert _spec is not None and _spec.loader is not None
device_leg = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(device_leg)


def git(*arguments: str, cwd: Path) -> str:
    return subprocess.run(["git", *arguments], cwd=cwd, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A scratch repository, the working directory: code, a packaged model, a results file."""
    root = tmp_path / "repository"
    (root / "code").mkdir(parents=True)
    (root / "code" / "module.py").write_text("VALUE = 1\n")
    (root / "code" / "model.pt").write_bytes(b"\0" * 50_000)
    (root / "code" / "logprobs.npy").write_bytes(b"\0" * 30_000)
    git("init", "-q", cwd=root)
    git("add", ".", cwd=root)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "start", cwd=root)
    monkeypatch.chdir(root)
    monkeypatch.setattr(device_leg, "THERE", tmp_path / "device-machine-tmp")
    return root


@pytest.fixture
def toy(tmp_path: Path) -> Path:
    directory = write_corpus(tmp_path / "toy")
    (directory / "wiki.train.tokens").write_text(REPEATED * 6, encoding="utf-8")
    return directory


def travelling(root: Path) -> set[str]:
    listed = git("ls-files", "--cached", "--others", "--exclude-standard", cwd=root)
    return set(listed.split())


def test_the_index_is_slimmed_and_put_back_as_it_was(repository):
    exclude = repository / ".git" / "info" / "exclude"
    before = exclude.read_text()
    device_leg.slim_index()
    assert travelling(repository) == {"code/module.py"}
    assert device_leg.travelling_bytes() == len("VALUE = 1\n")
    (repository / "code" / "module.py").write_text("VALUE = 2\n")
    git("add", "code/module.py", cwd=repository)
    committing = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "change"]
    refused = subprocess.run(committing, cwd=repository, capture_output=True, text=True)
    assert refused.returncode != 0 and "index is slimmed" in refused.stderr  # no deletions committed
    git("reset", "-q", "--", "code/module.py", cwd=repository)
    git("checkout", "--", "code/module.py", cwd=repository)
    assert device_leg.restore_index() is True
    assert git("status", "--porcelain", cwd=repository) == ""
    assert not (repository / ".git" / "hooks" / "pre-commit").exists()
    assert travelling(repository) == {"code/module.py", "code/model.pt", "code/logprobs.npy"}
    assert exclude.read_text() == before + "/.device-leg/\n"
    assert device_leg.restore_index() is False  # nothing more to put back
    assert exclude.read_text() == before + "/.device-leg/\n"


def test_the_leg_resumes_the_recorded_command_with_its_own_device_time_and_directory(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    recorded = [
        *("/repo/baselines/__main__.py", "train", "pointer_sentinel", "--dataset", "wikitext-2"),
        *("--device", "cpu", "--threads=1", "--amp", "on", "--max-minutes", "140"),
        *("--output-dir", "/home/x/runs/my run", "--sampled-softmax", "4096"),
    ]
    (run / "config.json").write_text(json.dumps({"command": shlex.join(recorded)}))
    assert device_leg.train_command(run, "cuda", 7.5)[1:] == [
        *("-m", "baselines", "train", "pointer_sentinel", "--dataset", "wikitext-2", "--amp", "on"),
        *("--sampled-softmax", "4096", "--device", "cuda", "--max-minutes", "7.5", "--output-dir", str(run)),
    ]


def test_the_calls_train_the_runs_side_by_side_within_the_device_time():
    first, second, fetch = device_leg.device_calls(["zoneout", "pointer"], 15)
    assert first == (
        'run(command="python3 tools/device_leg.py train zoneout --minutes 7.5 --background", '
        'carry=[".device-leg/zoneout"], timeout_s=300)'
    )
    assert second == (
        'run(command="python3 tools/device_leg.py train pointer --minutes 6.5 && python3 tools/device_leg.py '
        'pack zoneout pointer --out $OUT", carry=[".device-leg/pointer"], timeout_s=600)'
    )
    assert "fetch --out $OUT" in fetch
    assert "--minutes 4.5 " in device_leg.device_calls(["one"], 11.5)[0]
    with pytest.raises(device_leg.LegError, match="too little"):
        device_leg.device_calls(["zoneout"], 7)


def test_a_run_that_cannot_start_in_the_background_fails_its_call(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(device_leg, "THERE", tmp_path / "there")
    monkeypatch.chdir(tmp_path)
    run = tmp_path / "there" / "runs" / "broken"
    run.mkdir(parents=True)
    (run / "checkpoint.pt").write_bytes(b"")
    recorded = "x train zoneout_lstm --dataset no-such-dataset"
    (run / "config.json").write_text(json.dumps({"command": recorded}))
    assert device_leg.main(["train", "broken", "--minutes", "1", "--device", "cpu", "--background"]) == 2
    assert "error: the training stopped at once (exit status 2): error: " in capsys.readouterr().err


def test_what_comes_back_keeps_to_the_limits_and_the_rest_is_fetched_next(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(device_leg, "THERE", tmp_path / "there")
    back = tmp_path / "there" / "back"
    back.mkdir(parents=True)
    for index in range(5):
        (back / f"run.part{index:02d}").write_bytes(b"x" * 400)
    (back / "run.manifest.json").write_text("{}")
    monkeypatch.setattr(device_leg, "BACK_FILES", 3)
    monkeypatch.setattr(device_leg, "BACK_LIMIT", 1000)
    first, second, third = (tmp_path / name for name in ("out1", "out2", "out3"))
    for out in (first, second, third):
        out.mkdir()
    device_leg.deliver(back, first)
    assert sorted(path.name for path in first.iterdir()) == ["run.manifest.json", "run.part00", "run.part01"]
    assert "3 left: run `python tools/device_leg.py fetch --out $OUT` next" in capsys.readouterr().out
    assert device_leg.main(["fetch", "--out", str(second)]) == 0
    assert device_leg.main(["fetch", "--out", str(third)]) == 0
    assert [len(list(out.iterdir())) for out in (second, third)] == [2, 1]
    assert capsys.readouterr().out.endswith("0 left\n")
    monkeypatch.setattr(device_leg, "BACK_FILE_LIMIT", 100)
    (back / "run.part09").write_bytes(b"x" * 101)
    assert device_leg.main(["fetch", "--out", str(third)]) == 2
    assert "over the limit of one file" in capsys.readouterr().err


def train_toy(toy: Path, run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Three steps of ``baselines train`` (two epochs of 14 in all) in this process, with the
    command line it would have had."""
    argv = ["train", "zoneout_lstm", "--dataset", str(toy), "--preset", "tiny", "--model-args", SIZES]
    argv += ["--batch-size", "2", "--bptt", "6", "--max-epochs", "2", "--max-steps", "3", "--device", "cpu"]
    argv += ["--output-dir", str(run)]
    monkeypatch.setattr(sys, "argv", ["/repo/baselines/__main__.py", *argv])
    assert baselines_main(argv) == 0


def test_a_leg_goes_out_trains_comes_back_in_pieces_and_lands_in_place_of_the_run(
    repository, toy, tmp_path, monkeypatch, capsys
):
    home = tmp_path / "runs" / "toy-run"
    train_toy(toy, home, monkeypatch)
    home_best = (home / "best.pt").read_bytes()
    home_best_figure = checkpoints.load(home / "best.pt")["valid_perplexity"]
    assert device_leg.main(["send", str(home)]) == 0
    said = capsys.readouterr().out
    assert "carry .device-leg/toy-run" in said and "git's index is slimmed" in said
    assert said.rstrip().endswith("then give_back")  # the device calls to make
    stage = repository / ".device-leg" / "toy-run"
    assert "code/model.pt" not in travelling(repository)

    # the device machine: what travels, plus the carried stage; the run trains there to its end
    machine = tmp_path / "machine"
    for name in travelling(repository):
        (machine / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(repository / name, machine / name)
    shutil.copytree(stage, machine / ".device-leg" / "toy-run")
    monkeypatch.chdir(machine)
    assert device_leg.main(["train", "toy-run", "--minutes", "5", "--device", "cpu", "--background"]) == 0
    assert "training in the background" in capsys.readouterr().out
    leg = device_leg.THERE / "runs" / "toy-run"
    out = [tmp_path / "out1", tmp_path / "out2"]
    for folder in out:
        folder.mkdir()
    monkeypatch.setattr(device_leg, "BACK_FILES", 2)
    assert device_leg.main(["pack", "toy-run", "--out", str(out[0])]) == 0
    assert "finished after 2 epochs" in capsys.readouterr().out  # the end of the leg's output
    assert device_leg.main(["fetch", "--out", str(out[1])]) == 0
    assert json.loads((leg / "config.json").read_text())["command"].endswith(
        f"--device cpu --max-minutes 5.0 --output-dir {leg}"
    )

    monkeypatch.chdir(repository)
    came_back = {path: path.read_bytes() for folder in out for path in folder.iterdir()}
    assert device_leg.main(["land", "--from", *map(str, out), "--", str(home)]) == 0
    assert {path: path.read_bytes() for folder in out for path in folder.iterdir()} == came_back
    assert not list((tmp_path / "runs").glob(".toy-run.leg-pieces*"))  # the scratch folder is gone
    assert git("status", "--porcelain", cwd=repository) == ""  # the index is back
    landed = checkpoints.load(home / "checkpoint.pt")
    trained = checkpoints.load(leg / "checkpoint.pt")
    assert landed["training"]["progress"]["next_chunk"] == trained["training"]["progress"]["next_chunk"]
    for key, value in trained["model"].items():
        torch.testing.assert_close(landed["model"][key], value, rtol=2**-11, atol=1e-7)
    # no validation of the leg beat the run's best (test_run_transfer covers one that does):
    assert not (leg / "best.pt").exists()
    assert (home / "best.pt").read_bytes() == home_best  # the best left behind is the run's again
    records = [json.loads(line) for line in (home / "log.jsonl").read_text().splitlines()]
    assert min(record["valid_ppl"] for record in records) == home_best_figure
    assert (tmp_path / "runs" / "toy-run.before-leg" / "best.pt").read_bytes() == home_best
    device_leg.slim_index()  # as if sent again: a refused landing still puts the index back
    assert device_leg.main(["land", "--from", *map(str, out), "--", str(home)]) == 2
    assert "exists from an earlier leg" in capsys.readouterr().err
    assert git("status", "--porcelain", cwd=repository) == ""


def test_landing_never_deletes_the_pieces_it_lands_from(repository, tmp_path, capsys):
    """``--from RUN.leg-pieces`` (where an earlier ``land`` gathered the pieces) is read, never
    emptied: whether the landing fails, as here, or succeeds."""
    run = tmp_path / "runs" / "toy-run"
    run.mkdir(parents=True)
    pieces = tmp_path / "runs" / "toy-run.leg-pieces"
    pieces.mkdir()
    (pieces / "toy-run.manifest.json").write_text("{}")
    (pieces / "toy-run.part00").write_bytes(b"piece")
    assert device_leg.main(["land", "--from", str(pieces), "--", str(run)]) == 2
    assert "error: " in capsys.readouterr().err
    assert sorted(path.name for path in pieces.iterdir()) == ["toy-run.manifest.json", "toy-run.part00"]
    assert (pieces / "toy-run.part00").read_bytes() == b"piece"
    assert sorted(path.name for path in (tmp_path / "runs").iterdir()) == ["toy-run", "toy-run.leg-pieces"]


@pytest.mark.parametrize("command", ["pack toy-run", "fetch"])
def test_an_out_folder_that_does_not_exist_is_one_line_before_any_work(
    tmp_path, monkeypatch, command, capsys
):
    monkeypatch.setattr(device_leg, "THERE", tmp_path / "there")
    monkeypatch.chdir(tmp_path)
    run = tmp_path / "there" / "runs" / "toy-run"
    run.mkdir(parents=True)
    write_small_run(run)
    missing = tmp_path / "no-such-parent" / "out"
    assert device_leg.main([*command.split(), "--out", str(missing)]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: ") and error.count("\n") == 1 and str(missing) in error
    assert not (tmp_path / "there" / "back").exists()  # nothing packed


@pytest.mark.parametrize("minutes", ["nan", "inf", "-inf", "0", "-3", "soon"])
def test_device_minutes_that_are_not_a_finite_positive_number_are_one_line(repository, minutes, capsys):
    before = git("status", "--porcelain", cwd=repository)
    assert device_leg.main(["send", "runs/toy-run", f"--device-minutes={minutes}"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: ") and error.count("\n") == 1 and "--device-minutes" in error
    assert git("status", "--porcelain", cwd=repository) == before  # the index untouched


def test_the_calls_quote_the_names_they_print():
    name = 'my run"; rm -rf ~'
    first, second, _ = device_leg.device_calls([name, "pointer"], 15)
    command = json.loads(first.removeprefix("run(command=").split(", carry=")[0])
    assert shlex.split(command)[3] == name
    carry = json.loads(first.split(", carry=")[1].removesuffix(", timeout_s=300)"))
    assert carry == [f".device-leg/{name}"]
    command = json.loads(second.removeprefix("run(command=").split(", carry=")[0])
    assert shlex.split(command.removesuffix(" --out $OUT"))[-2:] == [name, "pointer"]
    assert command.endswith(" --out $OUT")  # the device tool's folder, for the shell to expand
