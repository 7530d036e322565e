"""One atomic writer (:func:`wikitext_toolkit_core.files.write_atomically`) for every file the harness, the
baselines and the leaderboard write: a failure in the middle of a write, Ctrl-C included, leaves
the previous file as it was and no temporary file behind."""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from test_leaderboard import make_result

from baselines import checkpoint as checkpoints
from leaderboard import plots
from leaderboard.cli import main as leaderboard_main
from wikitext_toolkit_core import files
from wikitext_toolkit_core.files import LOCK_FILE, DirectoryBusy, exclusive_directory, write_atomically


def leftovers(directory: Path) -> list[Path]:
    """Temporary files left under ``directory``."""
    return [path for path in directory.rglob("*") if path.name.endswith(".tmp")]


def fill_the_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make every later atomic write fail after writing its bytes, before they are on disk."""

    def fsync(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(files.os, "fsync", fsync)


def test_text_bytes_and_a_writer_function_are_written(tmp_path: Path) -> None:
    assert write_atomically(tmp_path / "a" / "b.txt", "é\n") == tmp_path / "a" / "b.txt"
    assert (tmp_path / "a" / "b.txt").read_bytes() == "é\n".encode()
    write_atomically(tmp_path / "c.bin", b"\x00\xff")
    assert (tmp_path / "c.bin").read_bytes() == b"\x00\xff"
    write_atomically(tmp_path / "d.json", lambda handle: handle.write(json.dumps([1]).encode()))
    assert json.loads((tmp_path / "d.json").read_text()) == [1]
    assert leftovers(tmp_path) == []


def test_a_new_file_gets_the_usual_permissions(tmp_path: Path) -> None:
    umask = os.umask(0o022)
    try:
        write_atomically(tmp_path / "record.json", "{}")
    finally:
        os.umask(umask)
    assert (tmp_path / "record.json").stat().st_mode & 0o777 == 0o644


@pytest.mark.parametrize("failure", [RuntimeError("a bug mid-write"), KeyboardInterrupt()])
def test_a_failure_mid_write_keeps_the_previous_file_and_leaves_no_temporary(
    tmp_path: Path, failure: BaseException
) -> None:
    target = tmp_path / "record.json"
    target.write_text("previous")

    def write_half_then_fail(handle) -> None:
        handle.write(b'{"half": ')
        raise failure

    with pytest.raises(type(failure)):
        write_atomically(target, write_half_then_fail)
    assert target.read_text() == "previous"
    assert leftovers(tmp_path) == []


def test_a_directory_in_the_way_is_an_error_that_leaves_no_temporary(tmp_path: Path) -> None:
    (tmp_path / "a-directory").mkdir()
    with pytest.raises(OSError):
        write_atomically(tmp_path / "a-directory", b"{}")
    assert leftovers(tmp_path) == []


def test_checkpoint_save_that_fails_mid_write_keeps_the_previous_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "run" / checkpoints.BEST
    checkpoints.save(path, {"format": checkpoints.FORMAT, "model": {"w": torch.ones(3)}})

    def save_half(payload, handle) -> None:  # the first bytes of a checkpoint, then Ctrl-C
        handle.write(b"PK\x03\x04" + bytes(64))
        raise KeyboardInterrupt

    monkeypatch.setattr(torch, "save", save_half)
    with pytest.raises(KeyboardInterrupt):
        checkpoints.save(path, {"format": checkpoints.FORMAT, "model": {"w": torch.zeros(3)}})
    monkeypatch.undo()
    assert torch.equal(checkpoints.load(path)["model"]["w"], torch.ones(3))
    assert leftovers(tmp_path) == [] and not list(tmp_path.rglob("*.partial"))


def test_tables_that_fail_mid_write_keep_the_previous_tables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    results, out = tmp_path / "results", tmp_path / "tables"
    make_result(results, "first.test", ppl=100.0)
    build = ["build", str(results), "--output-dir", str(out), "--no-reported"]
    assert leaderboard_main(build) == 0
    before = {path.name: path.read_bytes() for path in out.iterdir()}
    make_result(results, "second.test", ppl=90.0, model="other.model")
    fill_the_disk(monkeypatch)
    assert leaderboard_main(build) == 2  # one line: "error: No space left on device writing ..."
    assert {path.name: path.read_bytes() for path in out.iterdir()} == before
    assert leftovers(tmp_path) == []


def test_a_figure_that_fails_mid_write_keeps_the_previous_figure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "gates.png"
    out.write_bytes(b"previous")
    fill_the_disk(monkeypatch)
    with pytest.raises(OSError, match="No space left"):
        plots.plot_gates(np.linspace(0, 1, 100), "gates", out)
    assert out.read_bytes() == b"previous"
    assert leftovers(tmp_path) == []


def test_a_second_writer_of_a_directory_is_refused_until_the_first_is_done(tmp_path):
    with exclusive_directory(tmp_path / "out", "--output-dir"):
        with pytest.raises(DirectoryBusy, match=r"^--output-dir .*out: another process is writing it"):
            with exclusive_directory(tmp_path / "out", "--output-dir"):
                pass
    with exclusive_directory(tmp_path / "out", "--output-dir"):  # released
        pass


def test_a_lock_file_unlinked_under_a_waiting_writer_is_not_a_second_lock(tmp_path, monkeypatch):
    """A writer that opened ``.lock`` just before its holder removed it must not lock the removed
    file while the next writer locks the new one."""
    directory = tmp_path / "out"
    directory.mkdir()
    real_flock, unlinked = fcntl.flock, []

    def flock_after_unlink(fd, operation):
        if not unlinked:  # the first open's file disappears before it is locked
            (directory / LOCK_FILE).unlink()
            unlinked.append(fd)
        return real_flock(fd, operation)

    monkeypatch.setattr(fcntl, "flock", flock_after_unlink)
    with exclusive_directory(directory, "--output-dir"):
        assert (directory / LOCK_FILE).exists()
        monkeypatch.setattr(fcntl, "flock", real_flock)
        with pytest.raises(DirectoryBusy):  # the file on disk is the one held
            with exclusive_directory(directory, "--output-dir"):
                pass
