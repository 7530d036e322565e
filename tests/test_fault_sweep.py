"""Faults of the 2026-11-27 sweep (issue 45, item 3): each is one ``error:`` line and exit
status 2, found before any work where it can be, with nothing lost."""

from __future__ import annotations

import errno
import os

import pytest
import tomllib
from conftest import REPO, assert_one_line_error, write_corpus
from test_harness_faults import _plugin
from test_leaderboard import make_result

from baselines.cli import main as baselines_main
from harness.cli import main as harness_main
from harness.scoring import result_paths
from leaderboard.cli import main as leaderboard_main
from wikitext_builder.cache import Cache, CacheError
from wikitext_builder.sources import Article
from wikitext_toolkit_core import startup

UNIGRAM = "harness.plugins.unigram"


@pytest.mark.parametrize("value", ["nan", "inf", "-Infinity", "1e400"])
def test_a_non_finite_model_argument_is_refused_before_any_work(corpus, capsys, value):
    status = harness_main(["eval", UNIGRAM, "--dataset", str(corpus), "--model-args", f"smoothing={value}"])
    assert status == 2
    assert_one_line_error(capsys, f"--model-args smoothing={value}: not a finite number")


def test_an_output_name_too_long_for_the_file_system_is_refused_before_scoring(corpus, tmp_path, capsys):
    status = harness_main(
        ["eval", UNIGRAM, "--dataset", str(corpus), "--output-dir", str(tmp_path / "out"),
         "--model-args", "note=" + "x" * 300]
    )  # fmt: skip
    assert status == 2
    assert_one_line_error(capsys, "--output-dir", "the file name is")


def test_a_directory_named_like_the_result_is_refused_before_scoring(corpus, tmp_path, capsys):
    record, _ = result_paths(tmp_path / "out", UNIGRAM, {}, "toy", "test")
    record.mkdir(parents=True)
    assert (
        harness_main(["eval", UNIGRAM, "--dataset", str(corpus), "--output-dir", str(tmp_path / "out")]) == 2
    )
    assert_one_line_error(capsys, "is a directory")


@pytest.mark.parametrize("where", ["FAIL_LOAD", "FAIL_SCORE", "FAIL_RESET"])
def test_sys_exit_inside_a_plugin_is_an_error_not_a_silent_success(
    corpus, tmp_path, monkeypatch, capsys, where
):
    name = _plugin(tmp_path, monkeypatch, f"exits_in_{where.lower()}", **{where: "import sys; sys.exit(0)"})
    assert harness_main(["eval", name, "--dataset", str(corpus)]) == 2
    assert_one_line_error(capsys, "called sys.exit(0)")


def test_scores_on_the_meta_device_are_an_error(corpus, tmp_path, monkeypatch, capsys):
    meta = "import torch; return ChunkScores(torch.empty(chunk.targets.shape, device='meta'))"
    name = _plugin(tmp_path, monkeypatch, "meta_scores", FAIL_SCORE=meta)
    assert harness_main(["eval", name, "--dataset", str(corpus)]) == 2
    assert_one_line_error(capsys, "meta device")


def test_a_full_disk_is_one_line_naming_the_file_and_the_result_is_printed_first(
    corpus, tmp_path, monkeypatch, capsys
):
    def full(descriptor: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    out = tmp_path / "out"
    assert harness_main(["eval", UNIGRAM, "--dataset", str(corpus), "--output-dir", str(out)]) == 2
    captured = capsys.readouterr()
    assert "perplexity" in captured.out  # the figure is not lost
    *notes, last = captured.err.splitlines()
    passed = "toy/valid: audited: "  # the audits' line of the split scored before the disk filled
    assert all(line.startswith(("note: ", passed)) for line in notes), captured.err  # e.g. the token cache's
    assert last.startswith("error: No space left on device writing ") and str(out) in last
    assert not [path for path in out.iterdir() if path.name != ".lock"]  # nothing half-written


@pytest.mark.parametrize(
    "command",
    [
        ["train", "zoneout_lstm", "--threads", "100000"],
        ["calibrate", "model.pt", "--output", "x.pt", "--split", "test"],
        ["tune", "--split", "test"],
    ],
)
def test_absurd_or_test_set_options_are_refused_by_the_parser(corpus, tmp_path, monkeypatch, capsys, command):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "model.pt").write_bytes(b"")  # parsed before it is read
    assert baselines_main([*command, "--dataset", str(corpus)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert ("at most" in err) if "--threads" in command else ("invalid choice: 'test'" in err)


@pytest.mark.parametrize(
    "text, expected",
    [
        (" the cat sat . \r the dog sat . \r", "a carriage return not followed by a newline at byte 15"),
        (" the cat \0 sat . \n", "a NUL byte at byte 9: not a text file"),
    ],
)
@pytest.mark.parametrize("split", ["train", "test"])
def test_cr_only_line_ends_and_nul_bytes_are_refused_not_misread(tmp_path, capsys, text, expected, split):
    directory = write_corpus(tmp_path / "toy")
    (directory / f"wiki.{split}.tokens").write_bytes(text.encode())
    assert harness_main(["eval", UNIGRAM, "--dataset", str(directory)]) == 2
    assert_one_line_error(capsys, f"wiki.{split}.tokens: {expected}")


def test_crlf_line_ends_still_read_as_lines(tmp_path, capsys):
    lf, crlf = write_corpus(tmp_path / "lf"), write_corpus(tmp_path / "crlf")
    for split in ("train", "valid", "test"):
        path = crlf / f"wiki.{split}.tokens"
        path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    figures = []
    for directory in (lf, crlf):
        assert harness_main(["eval", UNIGRAM, "--dataset", str(directory)]) == 0
        figures.append(capsys.readouterr().out.split("perplexity")[1].split(" in ")[0])  # not the speed
    assert figures[0] == figures[1]


def test_a_batch_size_beyond_the_split_is_refused_before_any_allocation(corpus, capsys):
    assert (
        harness_main(
            ["eval", UNIGRAM, "--dataset", str(corpus), "--split", "test", "--batch-size", "1000000000"]
        )
        == 2
    )
    assert_one_line_error(capsys, "batch size 1,000,000,000 is more streams than the 25 tokens")


def test_a_kneser_ney_order_beyond_the_longest_sentence_is_one_line(corpus, capsys):
    status = harness_main(
        ["eval", "baselines.kneser_ney", "--dataset", str(corpus), "--model-args", "order=100"]
    )
    assert status == 2
    assert_one_line_error(capsys, "order 100: the longest sentence of the training text is")


def test_a_model_too_large_for_the_machine_is_refused_before_it_is_built(corpus, tmp_path, capsys):
    status = baselines_main(
        ["train", "zoneout_lstm", "--dataset", str(corpus), "--preset", "tiny", "--device", "cpu",
         "--model-args", "hidden_size=100000", "--output-dir", str(tmp_path / "run")]
    )  # fmt: skip
    assert status == 2
    assert_one_line_error(capsys, "40,051,", "parameters needs", "GB for its weights and gradients")


def test_ctrl_c_while_a_tool_imports_is_one_line_and_status_130(tmp_path, monkeypatch, capsys):
    (tmp_path / "slow_tool.py").write_text("raise KeyboardInterrupt  # Ctrl-C during `import torch`\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert startup.run_tool("slow_tool") == 130
    assert capsys.readouterr().err == "interrupted\n"


def test_every_entry_point_starts_through_the_guarded_import():
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert all(target.startswith("wikitext_toolkit_core.startup:") for target in scripts.values())
    for package in ("harness", "baselines", "leaderboard", "wikitext_builder"):
        assert "from wikitext_toolkit_core.startup import" in (REPO / package / "__main__.py").read_text()


def test_a_result_claiming_10_to_the_400_parameters_is_rejected_in_one_line(tmp_path, capsys):
    make_result(tmp_path / "results", "huge.test", ppl=100.0, num_parameters=10**400)
    assert leaderboard_main(["build", str(tmp_path / "results"), "--output-dir", str(tmp_path / "out")]) == 0
    rejected = [line for line in capsys.readouterr().err.splitlines() if "huge.test.json" in line]
    assert rejected == [
        f"rejected: {tmp_path / 'results' / 'huge.test.json'}: num_parameters has 401 digits: "
        "no model's count (at most 10**15)"
    ]


def test_a_full_disk_under_the_builders_cache_is_one_error_and_keeps_the_committed_batches(tmp_path):
    with Cache(tmp_path / "cache.sqlite") as cache:
        cache.commit_batch({"First": Article("First", "kept")}, {})
        pages = cache.connection.execute("PRAGMA page_count").fetchone()[0]
        cache.connection.execute(f"PRAGMA max_page_count = {pages}")  # a disk with no more room
        with pytest.raises(CacheError, match=r"cache.sqlite: the disk is full .* rerun the same command"):
            cache.commit_batch({"Second": Article("Second", "x" * 100_000)}, {})
        assert set(cache.entries()) == {"First"}
