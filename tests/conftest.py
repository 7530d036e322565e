"""Shared fixtures.

The real PTB and WikiText-2 ship in the package (``wikitext_toolkit_core/data/``), so the tests that need them
run everywhere, a fresh clone included: every test runs with a private, empty user cache and no
``HARNESS_DATA_DIR``, so ``load_dataset("ptb")`` finds the packaged copy, and
:func:`real_data_dir` gives the same files decompressed, for tests that read them as files.
"""

from __future__ import annotations

import lzma
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from wikitext_toolkit_core.benchmarks import COMPRESSED_SUFFIX, PACKAGED_DATA
from wikitext_toolkit_core.catalogue import BENCHMARKS

REPO = Path(__file__).resolve().parent.parent
#: The benchmarks shipped in the package.
PACKAGED_BENCHMARKS = ("ptb", "wikitext-2")


@pytest.fixture(scope="session")
def real_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory holding the real ``ptb/`` and ``wikitext-2/`` split files as plain text:
    the packaged copies, decompressed once per test session."""
    directory = tmp_path_factory.mktemp("real-data")
    for name in PACKAGED_BENCHMARKS:
        (directory / name).mkdir()
        for filename in BENCHMARKS[name].split_files.values():
            with (
                lzma.open(PACKAGED_DATA / name / (filename + COMPRESSED_SUFFIX)) as source,
                (directory / name / filename).open("wb") as target,
            ):
                shutil.copyfileobj(source, target)
    return directory


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "user-cache"
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(cache))
    monkeypatch.delenv("HARNESS_DATA_DIR", raising=False)
    return cache


TRAIN = """ 
 = Toy Article = 
 
 the cat sat on the mat . 
 the dog sat on the log . 
 a cat and a dog . 
 
 = = Section = = 
 
 the mat and the log were red . 
"""
VALID = """ the cat sat on the log . 
 a dog and the mat . 
"""
TEST = """ 
 the dog sat on the mat . 
 a red cat . 
 the log and a mat were on the cat . 
"""


def write_corpus(directory: Path, extension: str = "tokens", test: str = TEST) -> Path:
    """A tiny corpus in WikiText layout (``wiki.{split}.{extension}``)."""
    directory.mkdir(parents=True, exist_ok=True)
    for split, text in (("train", TRAIN), ("valid", VALID), ("test", test)):
        (directory / f"wiki.{split}.{extension}").write_text(text, encoding="utf-8")
    return directory


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    return write_corpus(tmp_path / "toy")


def assert_one_line_error(capsys: pytest.CaptureFixture[str], *parts: str) -> str:
    """The captured stderr is one ``error: ...`` line holding ``parts``; nothing on stdout."""
    captured = capsys.readouterr()
    assert captured.out == "", captured.out
    assert captured.err.startswith("error: ") and captured.err.count("\n") == 1, captured.err
    for part in parts:
        assert part in captured.err, captured.err
    return captured.err


@pytest.fixture
def read_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A directory nobody may write in. Root may write anywhere, whatever the mode, so under
    root ``os.access`` is made to refuse writes there too (the tools check it before any work)."""
    directory = tmp_path / "read-only"
    directory.mkdir()
    directory.chmod(0o555)
    if os.geteuid() == 0:
        real_access = os.access

        def access(
            path: str | os.PathLike,
            mode: int,
            *,
            dir_fd: int | None = None,
            effective_ids: bool = False,
            follow_symlinks: bool = True,
        ) -> bool:
            inside = Path(os.path.abspath(path)).is_relative_to(directory)
            if inside and mode & os.W_OK:
                return False
            return real_access(
                path, mode, dir_fd=dir_fd, effective_ids=effective_ids, follow_symlinks=follow_symlinks
            )

        monkeypatch.setattr(os, "access", access)
    yield directory
    directory.chmod(0o755)


@pytest.fixture
def float64() -> Iterator[None]:
    """torch's default dtype float64 for the test (the models' exactness checks)."""
    import torch  # here, not at the top: most tests never import torch

    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(previous)
