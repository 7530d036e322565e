"""Shared fixtures.

Tests that need the real benchmark files take them from ``--data-dir`` (default:
``$HARNESS_DATA_DIR``, else ``../shared/data`` beside the checkout) and skip when absent.
Every test runs with a private, empty user cache and no ``HARNESS_DATA_DIR``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def pytest_addoption(parser: pytest.Parser) -> None:
    default = os.environ.get("HARNESS_DATA_DIR") or str(REPO.parent / "shared" / "data")
    parser.addoption("--data-dir", default=default,
                     help="directory holding the real ptb/ and wikitext-2/ (default: %(default)s)")


@pytest.fixture
def real_data_dir(request: pytest.FixtureRequest) -> Path:
    path = Path(request.config.getoption("--data-dir"))
    if not (path / "ptb").is_dir():
        pytest.skip(f"real benchmark data not found at {path} (pass --data-dir or set HARNESS_DATA_DIR)")
    return path


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
