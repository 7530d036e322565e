"""Builder sweep (issue 45, item 3): a title shaped like heading markup keeps the corpus valid and
its articles counted; ``--workers`` never starts more processes than there is work or CPU for."""

from __future__ import annotations

import json
import multiprocessing
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from builder_fixtures.fake_mediawiki import article_text, write_folder

from wikitext_builder import corpus
from wikitext_builder.cli import main
from wikitext_builder.corpus import corpus_statistics
from wikitext_builder.render import render_article
from wikitext_builder.tokenize import heading_tokens

SMALL = ["--quiet", "--valid-articles", "1", "--test-articles", "1", "--min-count", "1"]
#: Titles whose "=" signs at either end would read as heading markup -> their title line.
HEADING_SHAPED_TITLES = {
    " = = Evil = = ": " = Evil = \n",
    "Evil =": " = Evil = \n",
    "= (album)": " = ( album ) = \n",
    "E = mc2": " = E = mc2 = \n",  # an "=" inside the title stays
}


def add_article(folder: Path, title: str, index: int) -> None:
    """A ``--folder`` article titled ``title`` (its file name: the title, spaces as underscores)."""
    (folder / f"{title.replace(' ', '_')}.wikitext").write_text(article_text(title.strip(), index))


def test_heading_tokens_drop_only_the_equals_signs_at_the_ends() -> None:
    assert heading_tokens(" = = Evil = = ") == ["Evil"]
    assert heading_tokens("==Evil==") == ["Evil"]
    assert heading_tokens("E = mc2") == ["E", "=", "mc2"]
    assert heading_tokens("= =") == []


@pytest.mark.parametrize(("title", "title_line"), HEADING_SHAPED_TITLES.items())
def test_a_heading_shaped_title_renders_as_one_level_1_title(title: str, title_line: str) -> None:
    lines = render_article(title, article_text("Evil", 3)).splitlines(keepends=True)
    assert lines[:3] == [" \n", title_line, " \n"]
    assert " = = History = = \n" in lines


def test_a_section_heading_keeps_its_level() -> None:
    text = article_text("Town", 1).replace("== History ==", "== = History = ==")
    assert " = = History = = \n" in render_article("Town", text).splitlines(keepends=True)


def test_a_corpus_with_heading_shaped_titles_passes_strict_and_counts_them(tmp_path: Path, capsys) -> None:
    folder = write_folder(tmp_path / "articles", 4)
    for index, title in enumerate([*HEADING_SHAPED_TITLES, "="]):
        add_article(folder, title, index)
    out = tmp_path / "corpus"
    assert main(["--folder", str(folder), "--output-dir", str(out), *SMALL]) == 0
    capsys.readouterr()
    assert main(["validate", "--strict", str(out)]) == 0
    stats = json.loads((out / "stats.json").read_text())
    assert sum(stats["articles"].values()) == 8
    assert corpus_statistics(out)["articles"] == stats["articles"]
    assert stats["builder"]["skipped"] == [
        {"title": "=", "reason": "malformed markup", "detail": "empty title (nothing but '=' signs)"}
    ]
    titles = {json.loads(line)["title"] for line in (out / "manifest.jsonl").read_text().splitlines()}
    assert set(HEADING_SHAPED_TITLES) <= titles  # the exact titles


class RecordingPool:
    """Stands in for ``multiprocessing.Pool``: records the processes asked for and renders in
    this process."""

    processes: list[int] = []

    def __init__(self, processes: int, initializer: Callable[[], None] | None = None) -> None:
        RecordingPool.processes.append(processes)

    def __enter__(self) -> RecordingPool:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def imap(self, function: Callable[[Any], Any], items: Iterable[Any], chunksize: int = 1) -> Iterator[Any]:
        return map(function, items)


@pytest.fixture
def pools(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The processes of each render pool started (none really is), on a machine of 64 CPUs."""
    monkeypatch.setattr(multiprocessing, "Pool", RecordingPool)
    monkeypatch.setattr(RecordingPool, "processes", [])
    monkeypatch.setattr(corpus, "usable_cpus", lambda: 64)
    return RecordingPool.processes


def build_twelve(tmp_path: Path, workers: int) -> int:
    """A build of 12 articles with ``--workers workers``; its exit status."""
    folder = write_folder(tmp_path / "articles", 12)
    out = tmp_path / "corpus"
    return main(["--folder", str(folder), "--output-dir", str(out), "--workers", str(workers), *SMALL])


def test_workers_are_lowered_to_the_chunks_of_articles(tmp_path: Path, capsys, pools: list[int]) -> None:
    assert build_twelve(tmp_path, 1000) == 0
    assert pools == [6]
    notes = [line for line in capsys.readouterr().err.splitlines() if line.startswith("note:")]
    assert notes == ["note: --workers 1,000 lowered to 6 (12 articles, handed out 2 at a time)"]


def test_workers_are_lowered_to_two_per_cpu(
    tmp_path: Path, capsys, pools: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(corpus, "usable_cpus", lambda: 1)
    assert build_twelve(tmp_path, 1000) == 0
    assert pools == [2]
    assert "note: --workers 1,000 lowered to 2 (2 per CPU, and this build may use 1 CPU)\n" in (
        capsys.readouterr().err
    )


def test_workers_that_have_work_are_started_as_asked(tmp_path: Path, capsys, pools: list[int]) -> None:
    assert build_twelve(tmp_path, 6) == 0
    assert pools == [6]
    assert "note:" not in capsys.readouterr().err
