"""What killed and concurrent writers leave (issue 45, item 3): the temporary file that a
``kill -9`` leaves beside a file is removed by the next :func:`wikitext_toolkit_core.files.write_atomically`
of that file, never one that a live writer is still writing; and two ``baselines package`` at once
both keep their ``SHA256SUMS`` entry."""

from __future__ import annotations

import fcntl
import multiprocessing
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from baselines import checkpoint as checkpoints
from wikitext_toolkit_core import files
from wikitext_toolkit_core.files import (
    file_sha256,
    parse_checksum_file,
    remove_stale_temporaries,
    write_atomically,
)


def dead_pid() -> int:
    """The id of a process that has exited and been reaped: what a killed writer's is."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


@pytest.fixture
def live_pid() -> Iterator[int]:
    """The id of a process that runs for the whole test: a concurrent writer's."""
    process = subprocess.Popen(["sleep", "60"])
    try:
        yield process.pid
    finally:
        process.kill()
        process.wait()


def temporary(target: Path, pid: int, suffix: str = "0a1b2c3d") -> Path:
    """The temporary that process ``pid`` writing ``target`` makes, with half a file in it."""
    path = target.with_name(f".{target.name}.{pid}-{suffix}.tmp")
    path.write_bytes(b"half a file")
    return path


# ---- a killed writer's temporary ------------------------------------------------------------------


def test_the_next_write_of_a_file_removes_the_temporary_a_killed_writer_left(tmp_path: Path) -> None:
    target, dead = tmp_path / "result.json", dead_pid()
    stale = [temporary(target, dead), temporary(target, dead, "ffff0000")]
    others = [
        temporary(tmp_path / "other.json", dead),  # another file's: its own next write removes it
        tmp_path / f"result.json.{dead}-0a1b2c3d.tmp",  # not named as a temporary
        tmp_path / f".result.json.{dead}-0a1b2c3d.tmp.bak",
    ]
    for path in others[1:]:
        path.write_text("x")
    write_atomically(target, "{}\n")
    assert target.read_text() == "{}\n"
    assert not any(path.exists() for path in stale)
    assert all(path.exists() for path in others)


def test_a_live_writers_temporary_is_kept(tmp_path: Path, live_pid: int) -> None:
    """A concurrent writer's (a live PID), and one whose PID another program now has: the safe side."""
    target = tmp_path / "result.json"
    kept = [temporary(target, live_pid), temporary(target, os.getppid()), temporary(target, os.getpid())]
    write_atomically(target, "{}\n")
    assert all(path.read_bytes() == b"half a file" for path in kept)
    assert remove_stale_temporaries(tmp_path) == []


def test_a_temporary_whose_writer_holds_its_lock_is_kept_though_its_pid_looks_dead(tmp_path: Path) -> None:
    """A writer of another PID namespace (a container, a machine sharing the directory) has a PID
    that names no process here; the lock it holds on its temporary says it is at work."""
    target = tmp_path / "result.json"
    locked = temporary(target, dead_pid())
    with locked.open("rb") as writer:
        fcntl.flock(writer.fileno(), fcntl.LOCK_EX)
        write_atomically(target, "{}\n")
        assert remove_stale_temporaries(tmp_path) == []
        assert locked.exists()
    write_atomically(target, "{}\n")  # its writer is gone now
    assert not locked.exists()


def test_a_writer_holds_the_lock_on_its_temporary_until_it_is_renamed(tmp_path: Path) -> None:
    target, held = tmp_path / "result.json", []

    def write(handle) -> None:
        (path,) = tmp_path.glob(".result.json.*.tmp")
        with path.open("rb") as other:
            with pytest.raises(BlockingIOError):
                fcntl.flock(other.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        held.append(path)
        handle.write(b"{}\n")

    write_atomically(target, write)
    assert held and target.read_text() == "{}\n" and list(tmp_path.glob("*.tmp")) == []


def test_a_temporary_a_sweeper_removed_before_its_writer_locked_it_is_made_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sweeper of another PID namespace may lock and remove a temporary just created: the writer
    then writes a new one, not one that has no name."""
    real_flock, swept = fcntl.flock, []

    def sweep_first(fd: int, operation: int) -> None:
        if not swept:
            (path,) = tmp_path.glob(".result.json.*.tmp")
            path.unlink()
            swept.append(path)
        real_flock(fd, operation)

    monkeypatch.setattr(files.fcntl, "flock", sweep_first)
    write_atomically(tmp_path / "result.json", "{}\n")
    assert swept and (tmp_path / "result.json").read_text() == "{}\n"
    assert list(tmp_path.glob("*.tmp")) == []


# ---- baselines package --------------------------------------------------------------------------


@pytest.fixture
def package_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``package`` writes into ``tmp_path/trained``, and a slow checksum widens the time between
    its reading ``SHA256SUMS`` and its writing it, where a second ``package`` could slip in."""
    monkeypatch.setattr(checkpoints, "PACKAGED", tmp_path / "trained")
    monkeypatch.setattr(checkpoints, "PACKAGED_SUMS", tmp_path / "trained" / "SHA256SUMS")

    def slow_sha256(path: Path) -> str:
        time.sleep(0.02)
        return file_sha256(path)

    monkeypatch.setattr(checkpoints, "file_sha256", slow_sha256)
    return checkpoints.PACKAGED


def tiny_checkpoint(directory: Path, dataset: str) -> Path:
    """A checkpoint of a two-by-two model trained on ``dataset``."""
    path = directory / f"{dataset}.pt"
    payload = {
        "format": checkpoints.FORMAT,
        "kind": "zoneout_lstm",
        "config": {},
        "vocab": ["a", "b"],
        "vocab_sha256": "0" * 64,
        "dataset": dataset,
        "model": {"weight": torch.ones(2, 2)},
        "valid_perplexity": 2.0,
    }
    checkpoints.save(path, payload)
    return path


def package_all(sources: list[Path]) -> None:
    """``package`` each of ``sources`` (a worker: a thread, or a process)."""
    for source in sources:
        checkpoints.package(source, source.stem)


def assert_all_listed(package_dir: Path, datasets: list[str]) -> None:
    """``SHA256SUMS`` lists every packaged model with its file's checksum."""
    sums = parse_checksum_file(package_dir / "SHA256SUMS")
    expected = {
        f"{name}/zoneout_lstm.pt": file_sha256(package_dir / name / "zoneout_lstm.pt") for name in datasets
    }
    assert sums == expected
    assert [path.name for path in package_dir.iterdir() if path.name.startswith(".")] == []


def worker_sources(tmp_path: Path, workers: int, each: int) -> list[list[Path]]:
    """``each`` tiny checkpoints for each of ``workers`` packagers, all of different datasets."""
    return [
        [tiny_checkpoint(tmp_path, f"set{worker}x{index}") for index in range(each)]
        for worker in range(workers)
    ]


def test_packages_made_in_threads_at_once_keep_every_checksum(tmp_path: Path, package_dir: Path) -> None:
    sources = worker_sources(tmp_path, workers=4, each=3)
    threads = [threading.Thread(target=package_all, args=(batch,)) for batch in sources]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert_all_listed(package_dir, [path.stem for batch in sources for path in batch])


def test_packages_made_in_processes_at_once_keep_every_checksum(tmp_path: Path, package_dir: Path) -> None:
    sources = worker_sources(tmp_path, workers=3, each=3)
    context = multiprocessing.get_context("fork")  # the workers inherit the patched package_dir
    workers = [context.Process(target=package_all, args=(batch,)) for batch in sources]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    assert [worker.exitcode for worker in workers] == [0] * len(workers)
    assert_all_listed(package_dir, [path.stem for batch in sources for path in batch])


def test_packaging_removes_the_temporary_a_killed_packaging_left_in_trained(
    tmp_path: Path, package_dir: Path
) -> None:
    source = tiny_checkpoint(tmp_path, "ptb")
    (package_dir / "ptb").mkdir(parents=True)
    stale = [
        temporary(package_dir / "ptb" / "zoneout_lstm.pt", dead_pid()),
        temporary(package_dir / "SHA256SUMS", dead_pid()),
    ]
    checkpoints.package(source, "ptb")
    assert not any(path.exists() for path in stale)
    assert_all_listed(package_dir, ["ptb"])
