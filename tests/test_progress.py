"""Progress that works in log files (issue 47, item 5): a tqdm bar on a terminal; elsewhere
(``2>log``, ``nohup``) a line at most every ``LOG_INTERVAL_SECONDS``, each ending in a newline,
with the count, the rate and the time left, and a last line when the work ends."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import tqdm.std
from builder_fixtures.fake_mediawiki import article_text
from conftest import write_corpus
from test_baselines_training import REPEATED, train

from harness.cli import main as harness_main
from wikitext_builder.cli import main as builder_main
from wikitext_toolkit_core import progress
from wikitext_toolkit_core.progress import progress_bar

EVAL = ["eval", "harness.plugins.unigram", "--split", "test", "--bptt", "2"]  # 25 test tokens: 13 chunks
#: A log line of the evaluation: its description, percentage, count/total, [elapsed<left, rate].
EVAL_LINE = re.compile(
    r"harness\.plugins\.unigram toy/test( causality audit)?: +\d+% [\d.]+/25\.0 "
    r"\[(\d\d:\d\d)<(\d\d:\d\d|\?), (([\d.]+k?|\?)tok/s|[\d.]+s/tok)\]\n"
)


def evaluate_tiny(corpus: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """What ``harness eval`` of the unigram plugin on ``corpus`` writes on stderr."""
    assert harness_main([*EVAL, "--dataset", str(corpus)]) == 0
    return capsys.readouterr().err


def log_lines(err: str, start: str) -> list[str]:
    """The lines of ``err`` that begin with ``start``, each with its newline (a ``\\r`` ends no
    line: a terminal's bar, redrawn in place, is none)."""
    return re.findall(rf"^{re.escape(start)}[^\n]*\n", err, flags=re.MULTILINE)


def test_an_evaluation_into_a_log_file_leaves_a_line_per_refresh(corpus, capsys, monkeypatch) -> None:
    monkeypatch.setattr(progress, "LOG_INTERVAL_SECONDS", 0)
    err = evaluate_tiny(corpus, capsys)
    assert "\r" not in err
    lines = log_lines(err, "harness.plugins.unigram")
    assert all(EVAL_LINE.fullmatch(line) for line in lines), lines
    scoring = [line for line in lines if "causality audit" not in line]
    assert len(scoring) == 1 + 13 + 1  # the start, each chunk, the end
    assert re.search(r"100% 25\.0/25\.0 \[00:00<00:00, [\d.]+k?tok/s\]\n$", scoring[-1]), scoring[-1]


def test_log_lines_come_at_most_once_an_interval_and_end_with_a_last_one(corpus, capsys, monkeypatch) -> None:
    """A slow evaluation (a fake clock: 25 s gone at each look at it, over ten minutes for each
    pass) leaves a line a minute or less often, then its last line."""
    seconds = iter(range(0, 10**6, 25))
    monkeypatch.setattr(tqdm.std, "time", lambda: float(next(seconds)))
    err = evaluate_tiny(corpus, capsys)
    for start in ("harness.plugins.unigram toy/test causality audit:", "harness.plugins.unigram toy/test:"):
        lines = log_lines(err, start)
        assert all(EVAL_LINE.fullmatch(line) for line in lines), lines
        elapsed = [elapsed_seconds(line) for line in lines]
        interval = progress.LOG_INTERVAL_SECONDS
        assert len(lines) >= 3 and elapsed[0] >= interval, lines
        assert all(later - earlier >= interval for earlier, later in zip(elapsed[:-2], elapsed[1:-1])), lines
        assert " 100% 25.0/25.0 " in lines[-1]


def elapsed_seconds(line: str) -> int:
    """The time elapsed that a progress line shows (``[MM:SS<...``), in seconds."""
    minutes, seconds = re.findall(r"\[(\d\d):(\d\d)<", line)[0]
    return int(minutes) * 60 + int(seconds)


def test_a_run_shorter_than_the_interval_prints_no_progress(corpus, capsys) -> None:
    err = evaluate_tiny(corpus, capsys)
    assert log_lines(err, "harness.plugins.unigram") == []
    audited, saved = err.splitlines()  # the audits' line, then the note
    assert audited.startswith("toy/test: audited: ") and audited.endswith(": passed"), err
    assert saved.startswith("note: nothing was saved"), err


def test_a_terminal_gets_a_bar_redrawn_in_place_and_gone_when_done(corpus, capsys, monkeypatch) -> None:
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    err = evaluate_tiny(corpus, capsys)
    assert "\rharness.plugins.unigram toy/test:" in err and "|" in err  # a bar, redrawn
    assert err.splitlines()[-1].startswith("note: nothing was saved"), err  # the bar cleared itself
    assert log_lines(err, "harness.plugins.unigram") == []  # no line of its own


def test_no_progress_when_not_shown(capsys, monkeypatch) -> None:
    monkeypatch.setattr(progress, "LOG_INTERVAL_SECONDS", 0)
    for terminal in (True, False):
        monkeypatch.setattr(sys.stderr, "isatty", lambda terminal=terminal: terminal)
        for _ in progress_bar(range(3), desc="hidden", unit="item", show=False):
            pass
    assert capsys.readouterr().err == ""


@pytest.fixture
def toy(tmp_path: Path) -> Path:
    """The training tests' toy corpus: 14 steps an epoch at batch 2, BPTT 6."""
    directory = write_corpus(tmp_path / "toy")
    (directory / "wiki.train.tokens").write_text(REPEATED * 6, encoding="utf-8")
    return directory


def test_training_into_a_log_file_leaves_a_line_per_refresh(toy, tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setattr(progress, "LOG_INTERVAL_SECONDS", 0)
    assert train(toy, tmp_path / "run", "--max-steps", "3") == 0
    err = capsys.readouterr().err
    assert "\r" not in err
    lines = log_lines(err, "epoch 1:")
    step = r"epoch 1: +\d+% \d+/14 \[\d\d:\d\d<(\d\d:\d\d|\?), +([\d.]+|\?)(step/s|s/step)(, ppl=[\d.]+)?\]\n"
    assert all(re.fullmatch(step, line) for line in lines), lines
    assert [line.split()[3] for line in lines] == ["0/14", "1/14", "2/14", "3/14", "3/14"]


def test_training_shorter_than_the_interval_prints_no_progress(toy, tmp_path, capsys) -> None:
    assert train(toy, tmp_path / "run", "--max-steps", "3") == 0
    assert "epoch 1:" not in capsys.readouterr().err  # the validation's line is "epoch 1, step 3/14: ..."


def test_a_build_into_a_log_file_shows_its_stages_unless_quiet(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setattr(progress, "LOG_INTERVAL_SECONDS", 0)
    pool = tmp_path / "pool.jsonl"
    articles = [{"title": f"Town {i:02d}", "wikitext": article_text("Town", i)} for i in range(12)]
    pool.write_text("".join(json.dumps(article) + "\n" for article in articles))
    sizes = ["--valid-articles", "2", "--test-articles", "2", "--min-count", "2", "--workers", "1"]
    for quiet, out in ((False, "loud"), (True, "quiet")):
        command = ["--jsonl", str(pool), "--output-dir", str(tmp_path / out), *sizes]
        assert builder_main(command + ["--quiet"] * quiet) == 0
        err = capsys.readouterr().err
        assert "\r" not in err
        stages = {line.split(":")[0] for line in err.splitlines() if re.search(r"article/s\]$", line)}
        assert stages == (set() if quiet else {"read", "render"}), err
