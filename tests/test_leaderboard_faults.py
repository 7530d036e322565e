"""The leaderboard under odd inputs and for a newcomer: JSON nested too deeply to read among the
results, rows labelled by whose model they are, site builds killed, run at once or blocked in
their output directory, a symbolic link among the figures, a dataset name too long for a file
name, and ``project`` given a log that is no regular file or one log twice."""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import REPO, assert_one_line_error
from test_leaderboard import make_result
from test_site import files_of
from test_training_projection import write_log

from leaderboard.cli import main
from leaderboard.records import collect
from leaderboard.site import MANIFEST
from leaderboard.table import build_tables


def _deep_result(good: Path, depth: int) -> str:
    """The result ``good`` with ``model_args`` nested ``depth`` levels deep."""
    record = json.loads(good.read_text(encoding="utf-8"))
    record["model_args"] = json.loads('{"a": ' * depth + "1" + "}" * depth)
    return json.dumps(record)


@pytest.mark.parametrize("nesting", ["array of 100,000", "result of 950"])
def test_json_nested_too_deeply_is_rejected_in_one_line(tmp_path, capsys, nesting):
    """100,000 levels exhaust the decoder; 950 load but would exhaust ``json.dumps`` later.
    Either is named and skipped like any other malformed result, and the build goes on."""
    results = tmp_path / "results"
    good = make_result(results, "good.test", ppl=100.0)
    deep = results / "deep.json"
    text = "[" * 100_000 + "]" * 100_000 if nesting.startswith("array") else _deep_result(good, 950)
    deep.write_text(text, encoding="utf-8")
    out = tmp_path / "tables"
    assert main(["build", str(results), "--output-dir", str(out), "--no-reported"]) == 0
    captured = capsys.readouterr()
    message = "not a harness result (JSON nested more than 32 levels deep)"
    assert captured.err == f"rejected: {deep}: {message}\n"
    assert "1 result file(s) used, 1 rejected" in captured.out
    assert main(["compare", str(deep), str(good)]) == 2
    assert capsys.readouterr().err == f"error: {deep}: {message}\n"


def test_rows_are_labelled_by_whose_model_they_are(tmp_path, capsys):
    results = tmp_path / "results"
    make_result(results, "lstm.test", model="baselines.zoneout_lstm", ppl=104.0)
    make_result(results, "unigram.test", model="harness.plugins.unigram", ppl=640.0)
    make_result(results, "mine.test", model="my_pkg.my_model:large", ppl=90.0)
    table = build_tables(collect([results]), None)["ptb"]
    assert [(row.model, row.kind) for row in table.rows] == [
        ("my_pkg.my_model:large", "user model"),
        ("baselines.zoneout_lstm", "reproduced baseline"),
        ("harness.plugins.unigram", "reproduced baseline"),
    ]
    assert main(["build", str(results), "--output-dir", str(tmp_path / "tables"), "--format", "html"]) == 0
    assert "ptb: 25 rows (2 reproduced baseline, 1 user model, 22 reported)" in capsys.readouterr().out
    html = (tmp_path / "tables" / "ptb.html").read_text(encoding="utf-8")
    assert '<tr class="user-model">' in html and '<tr class="reproduced-baseline">' in html


# ---- the site's output directory ---------------------------------------------------------------

#: ``python -m leaderboard ARGS...`` with ``leaderboard.site.HOOK`` wrapped: on its first call the
#: process kills itself (``kill``, a ``kill -9`` at a known point), or (``pause``) touches
#: ``FLAG.ready`` and waits for ``FLAG.go`` (at most two minutes) before going on.
#: Arguments: HOOK, ``kill`` or ``pause``, FLAG, then the command line.
HOOKED_LEADERBOARD = """
import os, signal, sys, time
from pathlib import Path
import leaderboard.site as site
hook, action, flag = sys.argv[1:4]
original = getattr(site, hook)
def hooked(*args, **kwargs):
    if action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    Path(flag + ".ready").touch()
    deadline = time.monotonic() + 120
    while not Path(flag + ".go").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return original(*args, **kwargs)
setattr(site, hook, hooked)
from leaderboard.cli import main
sys.exit(main(sys.argv[4:]))
"""
#: Seconds a test waits for a site build in another process.
PROCESS_TIMEOUT = 300


def site_arguments(results: Path, out: Path) -> list[str]:
    """``leaderboard site`` of ``results`` into ``out``, quickly (our rows only, few resamples)."""
    return ["site", str(results), "--output-dir", str(out), "--samples", "1000", "--no-reported"]


def leaderboard_process(arguments: list[str], stderr: Path) -> subprocess.Popen:
    """``python -m leaderboard`` (or ``python -c`` a script, arguments ``-c SCRIPT ...``) in
    another process, its stderr written to the file ``stderr``."""
    command = [sys.executable, *(arguments if arguments[0] == "-c" else ["-m", "leaderboard", *arguments])]
    with stderr.open("w") as errors:
        return subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=errors)


def hooked_site(
    hook: str, action: str, flag: Path, results: Path, out: Path, stderr: Path
) -> subprocess.Popen:
    """A site build in another process, with ``hook`` wrapped as :data:`HOOKED_LEADERBOARD` says."""
    script = ["-c", HOOKED_LEADERBOARD, hook, action, str(flag)]
    return leaderboard_process([*script, *site_arguments(results, out)], stderr)


def two_models(directory: Path, prefix: str) -> Path:
    """Two audited and verified PTB test results, models ``PREFIX.a`` and ``PREFIX.b``."""
    make_result(directory, f"{prefix}.a.test", model=f"{prefix}.a", ppl=80.0)
    make_result(directory, f"{prefix}.b.test", model=f"{prefix}.b", ppl=90.0)
    return directory


def assert_one_complete_site(out: Path, prefix: str) -> None:
    """``out`` holds one whole site of the results ``two_models(..., prefix)`` made: the files its
    manifest lists, no others (no build leftovers), and the pages of those results alone."""
    listed = set((out / MANIFEST).read_text(encoding="utf-8").splitlines())
    assert listed == set(files_of(out)) - {MANIFEST}
    pages = sorted(path.name for path in (out / "results").iterdir())
    assert len(pages) == 2 and all(name.startswith(f"{prefix}.") for name in pages), pages
    assert all(f'href="results/{name}"' in (out / "index.html").read_text(encoding="utf-8") for name in pages)


def wait_for(condition: Callable[[], bool], process: subprocess.Popen) -> None:
    """Wait until ``condition`` holds or ``process`` has ended (at most :data:`PROCESS_TIMEOUT`)."""
    deadline = time.monotonic() + PROCESS_TIMEOUT
    while not condition() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)


def test_a_first_site_build_killed_midway_is_finished_by_the_next(tmp_path: Path) -> None:
    """``kill -9`` while the first build writes: what it left is the site's own, so the same
    command run again builds the site (rather than refusing a directory that holds files)."""
    results, out = two_models(tmp_path / "results", "my"), tmp_path / "site"
    killed = hooked_site("_write_bars", "kill", tmp_path / "flag", results, out, tmp_path / "killed.err")
    assert killed.wait(timeout=PROCESS_TIMEOUT) == -signal.SIGKILL
    assert out.is_dir() and any(out.iterdir())  # it left something behind
    assert main(site_arguments(results, out)) == 0
    assert_one_complete_site(out, "my")


@pytest.mark.parametrize("pause", ["before writing", "while writing"])
def test_two_site_builds_at_once_leave_one_complete_site(tmp_path: Path, pause: str) -> None:
    """The first build pauses before it writes anything (the second then builds its whole site),
    or while it writes (the second waits for it to finish): either way both succeed, and the
    directory holds the site of the build that finished last, every file listed."""
    first, second = two_models(tmp_path / "first", "first"), two_models(tmp_path / "second", "second")
    out, flag, errors = tmp_path / "site", tmp_path / "flag", tmp_path / "second.err"
    hook = "build_site" if pause == "before writing" else "_write_bars"
    early = hooked_site(hook, "pause", flag, first, out, tmp_path / "first.err")
    try:
        wait_for(lambda: Path(f"{flag}.ready").exists(), early)
        late = leaderboard_process(site_arguments(second, out), errors)
        if pause == "while writing":  # the second build waits for the first one's lock
            wait_for(lambda: "waiting" in errors.read_text(encoding="utf-8"), late)
        else:
            late.wait(timeout=PROCESS_TIMEOUT)
        Path(f"{flag}.go").touch()
        assert late.wait(timeout=PROCESS_TIMEOUT) == 0, errors.read_text(encoding="utf-8")
        waited = "another build is writing this site; waiting for it" in errors.read_text(encoding="utf-8")
        assert waited == (pause == "while writing")
        assert early.wait(timeout=PROCESS_TIMEOUT) == 0, (tmp_path / "first.err").read_text(encoding="utf-8")
    finally:
        Path(f"{flag}.go").touch()
        early.wait(timeout=PROCESS_TIMEOUT)
    assert_one_complete_site(out, "first" if pause == "before writing" else "second")


@pytest.mark.parametrize("listed", ["results", "gone"])
def test_a_manifest_entry_that_is_a_directory_is_left_alone(tmp_path: Path, listed: str) -> None:
    """A name in the manifest that is now a directory (one of the site's folders, or a folder
    made where a file was) is no file of the site's: the next build leaves it and its contents
    alone and lists only its own files."""
    results, out = two_models(tmp_path / "results", "my"), tmp_path / "site"
    assert main(site_arguments(results, out)) == 0
    (out / "gone").mkdir()
    (out / "gone" / "mine.txt").write_text("not the site's", encoding="utf-8")
    with (out / MANIFEST).open("a", encoding="utf-8") as manifest:
        manifest.write(f"{listed}\n")
    assert main(site_arguments(results, out)) == 0
    assert (out / "gone" / "mine.txt").is_file() and (out / "results").is_dir()
    assert listed not in (out / MANIFEST).read_text(encoding="utf-8").splitlines()


@pytest.mark.parametrize(
    ("replaced", "message"),
    [
        ("index.html", "index.html is a directory, where the site writes a file"),
        ("results", "results is a file, where the site keeps a folder"),
    ],
)
def test_something_in_the_way_of_the_sites_files_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture, replaced: str, message: str
) -> None:
    """A folder made where the site writes a file, or a file where it keeps a folder, is not the
    site's (it made neither): the next build says so in one line and touches nothing."""
    results, out = two_models(tmp_path / "results", "my"), tmp_path / "site"
    assert main(site_arguments(results, out)) == 0
    in_the_way = out / replaced
    if in_the_way.is_dir():
        shutil.rmtree(in_the_way)
        in_the_way.write_text("not the site's", encoding="utf-8")
    else:
        in_the_way.unlink()
        in_the_way.mkdir()
        (in_the_way / "mine.txt").write_text("not the site's", encoding="utf-8")
    before = files_of(out)
    capsys.readouterr()
    assert main(site_arguments(results, out)) == 2
    assert_one_line_error(capsys, message)
    assert files_of(out) == before


def test_a_symlink_among_the_figures_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """A link in a --figures folder could point anywhere (``/etc/passwd``): the public site
    copies regular files only, and a link is named rather than followed."""
    results, out = two_models(tmp_path / "results", "my"), tmp_path / "site"
    figures, secret = tmp_path / "figures", tmp_path / "secret.png"
    figures.mkdir()
    (figures / "plot.png").write_bytes(b"an image")
    secret.write_bytes(b"not for the public")
    (figures / "leak.png").symlink_to(secret)
    assert main([*site_arguments(results, out), "--figures", str(figures)]) == 2
    assert_one_line_error(capsys, "leak.png is a symbolic link")
    assert not out.exists()


# ---- names too long for a file ---------------------------------------------------------------


def test_a_dataset_name_too_long_for_a_file_name_is_shortened(tmp_path: Path, capsys) -> None:
    """A 600-character dataset name (a result file may say anything) gets a shortened file name,
    unique by its hash; the table shows the whole name, and the other results build as usual."""
    results = tmp_path / "results"
    make_result(results, "long.test", dataset="d" * 600, ppl=100.0)
    make_result(results, "ptb.test", ppl=90.0)
    tables = tmp_path / "tables"
    assert main(["build", str(results), "--output-dir", str(tables), "--no-reported"]) == 0
    names = sorted(path.name for path in tables.iterdir())
    assert len(names) == 2 and "ptb.csv" in names and all(len(name) < 120 for name in names)
    out = tmp_path / "site"
    assert main(site_arguments(results, out)) == 0
    assert all(len(path.name) < 120 for path in out.rglob("*"))
    assert f"<h2>{'d' * 600}</h2>" in (out / "index.html").read_text(encoding="utf-8")


# ---- leaderboard project ---------------------------------------------------------------------


@pytest.mark.parametrize(("log", "where"), [("fifo", "run"), ("/dev/zero", "reference")])
def test_project_refuses_a_log_that_is_no_regular_file(tmp_path: Path, log: str, where: str) -> None:
    """A FIFO would block the read forever and ``/dev/zero`` never ends: refused in one line, at
    once (another process, its memory bounded, so that the old hang cannot stall the suite)."""
    if log == "fifo":
        os.mkfifo(tmp_path / "fifo")
        log = str(tmp_path / "fifo")
    run = str(write_log(tmp_path / "run.jsonl", 100.0, 10))
    reference = str(write_log(tmp_path / "a.jsonl", 80.0, 14, halvings=[70.0, 64.0]))
    arguments = [log, "--reference", reference] if where == "run" else [run, "--reference", log]
    finished = subprocess.run(
        [sys.executable, "-m", "leaderboard", "project", *arguments],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30)),
    )
    assert finished.returncode == 2 and finished.stdout == ""
    assert finished.stderr == f"error: {log}: not a regular file; a training log is a file\n"


@pytest.mark.parametrize("twice", ["the same path", "a copy", "the run itself"])
def test_project_refuses_one_log_given_twice(
    tmp_path: Path, capsys: pytest.CaptureFixture, twice: str
) -> None:
    """One finished run named twice (under two labels, by a copy of its log, or as the run and a
    reference) is one run, not two that agree: refused in one line rather than counted twice."""
    first = write_log(tmp_path / "a.jsonl", 80.0, 14, halvings=[70.0, 64.0])
    run = str(write_log(tmp_path / "run.jsonl", 100.0, 10))
    if twice == "the same path":
        arguments, repeated = [run, "--reference", f"{first}=one"], f"{first}=two"
    elif twice == "a copy":
        arguments, repeated = [run, "--reference", str(first)], str(shutil.copy(first, tmp_path / "b.jsonl"))
    else:
        arguments, repeated = [str(first)], f"{first}=again"
    assert main(["project", *arguments, "--reference", repeated]) == 2
    assert_one_line_error(capsys, f"--reference {repeated}: the same log as ")
