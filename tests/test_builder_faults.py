"""Builder faults (issue 27): two builds never interleave in one directory, every malformed pool
record or dump page is named in stats.json, a killed build's temporaries are swept, an API that
cannot be reached fails at once and leaves nothing behind, the packaged sample builds offline,
and every option's help shows its default."""

from __future__ import annotations

import argparse
import contextlib
import fnmatch
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests
import tomllib
from builder_fixtures.fake_mediawiki import FakeMediaWikiServer, FakeWiki, article_text, write_folder
from conftest import assert_one_line_error
from test_builder_dump import HEADER, page

from wikitext_builder import workspace
from wikitext_builder.cache import Cache
from wikitext_builder.cli import build_parser, main
from wikitext_builder.corpus import OUTPUT_FILES
from wikitext_builder.sources import MediaWikiClient
from wikitext_toolkit_core.files import LOCK_FILE, DirectoryBusy

REPO = Path(__file__).resolve().parent.parent
SAMPLE_DIR = REPO / "wikitext_builder" / "sample"  # packaged (pyproject.toml: package-data)
SMALL = ["--quiet", "--valid-articles", "1", "--test-articles", "1", "--min-count", "1"]
FAST_API = ["--retry-backoff", "0.01", "--timeout", "30", "--batch-size", "3"]

#: Holds exclusive_directory(argv[1], "--output-dir") in a process of its own until stdin closes.
HOLD_LOCK = (
    "import sys\n"
    "from wikitext_toolkit_core.files import exclusive_directory\n"
    "with exclusive_directory(sys.argv[1], '--output-dir'):\n"
    "    print('held', flush=True)\n"
    "    sys.stdin.read()\n"
)


def outputs(directory: Path) -> dict[str, bytes]:
    return {name: (directory / name).read_bytes() for name in OUTPUT_FILES}


def closed_port_url() -> str:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}/w/api.php"


def lock_holder(directory: Path) -> subprocess.Popen[str]:
    """Another process that holds ``directory`` (until its stdin is closed)."""
    process = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(directory)],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None and process.stdout.readline() == "held\n"
    return process


def release(process: subprocess.Popen[str]) -> None:
    assert process.stdin is not None
    process.stdin.close()
    assert process.wait(30) == 0


# --- 1. two writers never interleave (Part 1 item 2) ---------------------------------------------


def test_a_second_build_into_a_directory_being_built_is_refused_and_the_first_is_intact(
    tmp_path: Path, capsys
) -> None:
    out = tmp_path / "out"
    wiki = FakeWiki.with_articles(12, block_at_batch=2)
    with FakeMediaWikiServer(wiki) as server:
        command = ["--api-url", server.url, *FAST_API, *SMALL]
        first = subprocess.Popen(
            [sys.executable, "-m", "wikitext_builder", *command, "--output-dir", str(out), "--seed", "1"],
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert wiki.blocked.wait(60), "the first build never reached its second batch"
            wiki.block_at_batch = None
            before = sorted(path.name for path in out.iterdir())
            assert main([*command, "--output-dir", str(out), "--seed", "2"]) == 2
            assert_one_line_error(capsys, f"--output-dir {out}: another process is writing it")
            assert sorted(path.name for path in out.iterdir()) == before  # nothing written
        finally:
            wiki.release.set()
            _, stderr = first.communicate(timeout=120)
        assert first.returncode == 0, stderr
        assert main([*command, "--output-dir", str(tmp_path / "alone"), "--seed", "1"]) == 0
    assert outputs(out) == outputs(tmp_path / "alone")


def test_a_build_sharing_a_cache_directory_with_a_running_build_is_refused(tmp_path: Path, capsys) -> None:
    folder = write_folder(tmp_path / "folder", 5)
    caches = tmp_path / "caches"
    holder = lock_holder(caches)  # a build that writes caches/shared.sqlite, into another corpus
    try:
        command = ["--folder", str(folder), "--cache", str(caches / "shared.sqlite"), *SMALL]
        assert main([*command, "--output-dir", str(tmp_path / "out")]) == 2
        assert_one_line_error(capsys, f"the directory of --cache {caches}: another process is writing it")
        assert not (caches / "shared.sqlite").exists() and not (tmp_path / "out").exists()
    finally:
        release(holder)
    assert main([*command, "--output-dir", str(tmp_path / "out")]) == 0


def test_a_build_refused_a_shared_cache_directory_never_removes_the_running_builds_cache(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    """The running build creates its cache between this build's look for it and its lock: the
    cache is the other build's, and stays."""
    folder = write_folder(tmp_path / "folder", 5)
    caches, shared = tmp_path / "caches", tmp_path / "caches" / "shared.sqlite"
    real_lock = workspace.exclusive_directory

    @contextlib.contextmanager
    def the_other_build_got_there_first(directory, what):
        if Path(directory) == caches:
            Cache(shared).close()  # what the running build's Cache(...) creates, still empty
            raise DirectoryBusy(f"{what} {directory}: another process is writing it")
        with real_lock(directory, what) as held:
            yield held

    monkeypatch.setattr(workspace, "exclusive_directory", the_other_build_got_there_first)
    command = ["--folder", str(folder), "--cache", str(shared), "--output-dir", str(tmp_path / "out")]
    assert main([*command, *SMALL]) == 2
    assert_one_line_error(capsys, "another process is writing it")
    assert shared.is_file() and not (tmp_path / "out").exists()


def test_a_merge_into_a_directory_being_built_is_refused(tmp_path: Path, capsys) -> None:
    folder = write_folder(tmp_path / "folder", 5)
    caches = []
    for shard in ("1/2", "2/2"):
        cache = tmp_path / f"shard-{shard[0]}.sqlite"
        shards = ["--shard", shard, "--cache", str(cache), "--output-dir", str(tmp_path / "s")]
        assert main(["--folder", str(folder), *shards, *SMALL]) == 0
        caches.append(str(cache))
    capsys.readouterr()
    holder = lock_holder(tmp_path / "merged")
    try:
        assert main(["merge", "--output-dir", str(tmp_path / "merged"), "--quiet", *caches]) == 2
        assert_one_line_error(capsys, "--output-dir", "another process is writing it")
    finally:
        release(holder)
    assert not (tmp_path / "merged" / "wiki.train.tokens").exists()


# --- 2. malformed records and pages are skipped and named (Part 1 item 4) --------------------------


def pool_lines(bad: str) -> str:
    """Five good GA records, then ``bad`` (a JSON line, written as given) as line 6."""
    good = [
        json.dumps({"title": f"Town {chr(65 + i)}", "class": "GA", "wikitext": article_text(f"Town {i}", i)})
        for i in range(5)
    ]
    return "\n".join([*good, bad]) + "\n"


@pytest.mark.parametrize(
    "bad, title, detail",
    [
        (
            '{"title": "Null town", "class": "GA", "wikitext": null}',
            "Null town",
            "wikitext is null, not text",
        ),
        (
            '{"title": "Number town", "class": "GA", "wikitext": 42}',
            "Number town",
            "wikitext is 42, not text",
        ),
        ('{"title": "List town", "wikitext": ["a"]}', "List town", "wikitext is a list, not text"),
        ('{"title": "Cl town", "class": ["GA"], "wikitext": "x"}', "Cl town", "class is a list, not text"),
        (
            '{"title": "Cd town", "class": {"a": 1}, "wikitext": "x"}',
            "Cd town",
            "class is an object, not text",
        ),
        (
            '{"title": "Sur town", "class": "GA", "wikitext": "abc \\ud800 def"}',
            "Sur town",
            "wikitext holds a lone surrogate (U+D800) at character 4",
        ),
        (
            '{"title": "Sur \\udc00 town", "wikitext": "abc"}',
            None,
            "title holds a lone surrogate (U+DC00) at character 4",
        ),
        ('{"title": 5, "wikitext": "abc"}', None, "title is 5, not text"),
        (
            '{"title": "Id town", "page_id": [1], "wikitext": "a"}',
            "Id town",
            "page_id is a list, not an integer or null",
        ),
        (
            '{"title": "Id town", "page_id": "12", "wikitext": "a"}',
            "Id town",
            "page_id is a string, not an integer or null",
        ),
        (  # beyond SQLite's INTEGER: an OverflowError at the cache before
            '{"title": "Id town", "page_id": 99999999999999999999, "wikitext": "a"}',
            "Id town",
            "page_id is 99999999999999999999, not an integer from 0 to 2^63-1 or null",
        ),
        (
            '{"title": "Id town", "revision_id": -1, "wikitext": "a"}',
            "Id town",
            "revision_id is -1, not an integer from 0 to 2^63-1 or null",
        ),
    ],
)
def test_a_malformed_pool_record_is_skipped_and_named(
    bad: str, title: str | None, detail: str, tmp_path: Path, capsys
) -> None:
    pool = tmp_path / "pool.jsonl"
    pool.write_text(pool_lines(bad), encoding="utf-8")
    assert main(["--jsonl", str(pool), "--output-dir", str(tmp_path / "out"), *SMALL]) == 0
    stats = json.loads((tmp_path / "out" / "stats.json").read_text(encoding="utf-8"))
    expected = {"record": "pool.jsonl:6", "reason": "malformed record", "detail": detail}
    assert stats["builder"]["skipped"] == [{**expected, **({"title": title} if title else {})}]
    assert sum(stats["articles"].values()) == 5  # only the good records, none coerced
    assert "skipped 1 article (1 malformed record)" in capsys.readouterr().err


def test_a_malformed_record_of_another_class_is_not_selected(tmp_path: Path) -> None:
    pool = tmp_path / "pool.jsonl"
    pool.write_text(pool_lines('{"title": "B town", "class": "B", "wikitext": null}'), encoding="utf-8")
    assert main(["--jsonl", str(pool), "--output-dir", str(tmp_path / "out"), *SMALL]) == 0
    assert json.loads((tmp_path / "out" / "stats.json").read_text())["builder"]["skipped"] == []


def test_a_line_that_is_no_pool_record_is_still_refused_in_one_line(tmp_path: Path, capsys) -> None:
    pool = tmp_path / "pool.jsonl"
    pool.write_text(pool_lines('["not", "an", "object"]'), encoding="utf-8")
    assert main(["--jsonl", str(pool), "--output-dir", str(tmp_path / "out"), *SMALL]) == 2
    assert_one_line_error(capsys, f"{pool}:6: not a pool record")


@pytest.mark.parametrize(
    "spelled, malformed, reason, detail",
    [
        ("<ns>0</ns>", "<ns>abc</ns>", "malformed page", "<ns> is 'abc', not a number"),
        ("<id>27</id>", "<id>x27</id>", "malformed page", "<id> is 'x27', not a number"),
        ("<id>1027</id>", "<id>r1027</id>", "malformed page", "revision <id> is 'r1027', not a number"),
        (
            "<id>27</id>",
            "<id>99999999999999999999</id>",
            "malformed page",
            "<id> is '99999999999999999999', not an integer from 0 to 2^63-1",
        ),
        (
            "<id>1027</id>",
            "<id>9223372036854775808</id>",
            "malformed page",
            "revision <id> is '9223372036854775808', not an integer from 0 to 2^63-1",
        ),
        ("<title>Bad river</title>", "<title></title>", "no title", "page id 27"),
        ("<title>Bad river</title>", "", "no title", "page id 27"),  # no <title> at all
    ],
)
def test_a_malformed_dump_page_is_skipped_and_named(
    spelled: str, malformed: str, reason: str, detail: str, tmp_path: Path, capsys
) -> None:
    dump = tmp_path / "dump.xml"
    pages = "".join(page(f"River {chr(65 + i)}", i + 1) for i in range(5))
    bad = page("Bad river", 27).replace(spelled, malformed, 1)
    dump.write_text(HEADER + pages + bad + "</mediawiki>\n", encoding="utf-8")
    assert main(["--dump", str(dump), "--output-dir", str(tmp_path / "out"), *SMALL]) == 0
    stats = json.loads((tmp_path / "out" / "stats.json").read_text(encoding="utf-8"))
    expected = {"record": "dump.xml:page 6", "reason": reason, "detail": detail}
    named = {"title": "Bad river"} if reason == "malformed page" else {}
    assert stats["builder"]["skipped"] == [{**expected, **named}]
    assert sum(stats["articles"].values()) == 5
    assert f"skipped 1 article (1 {reason})" in capsys.readouterr().err


# --- 3. a killed build's temporaries are swept by the next (Part 1 item 8) -------------------------


def test_the_next_build_removes_the_temporaries_a_killed_build_left(tmp_path: Path) -> None:
    folder = write_folder(tmp_path / "folder", 5)
    out = tmp_path / "out"
    command = ["--folder", str(folder), "--output-dir", str(out), *SMALL]
    assert main(command) == 0
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # its pid names no live process now
    left = [out / f".wiki.train.tokens.{dead.pid}-0123abcd.tmp", out / f".stats.json.{dead.pid}-89abcdef.tmp"]
    for path in left:
        path.write_text("half a file")
    assert main(command) == 0
    assert [path for path in left if path.exists()] == []


# --- 4. an API out of reach fails at once and leaves nothing behind (Part 2 item 2) ----------------


def test_an_unreachable_api_fails_at_once_naming_the_local_sources(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    before = sorted(tmp_path.iterdir())
    url = closed_port_url()
    assert main(["--articles", "good,featured", "--api-url", url, "--retry-backoff", "0.01", "--quiet"]) == 2
    error = assert_one_line_error(capsys, f"cannot reach the MediaWiki API at {url} (ConnectionError: ")
    for option in ("--folder DIR", "--jsonl FILE", "--dump FILE", "--sample"):
        assert option in error
    assert sorted(tmp_path.iterdir()) == before  # no wikitext-corpus/, no cache.sqlite


def test_an_unreachable_api_is_not_retried_with_the_default_settings() -> None:
    waits: list[float] = []
    client = MediaWikiClient(closed_port_url(), sleep=waits.append)  # 8 attempts, 127 s of waits
    with pytest.raises(Exception, match="cannot reach the MediaWiki API"):
        client.query({"list": "categorymembers"})
    assert waits == []


def test_a_failed_build_removes_the_directories_it_created_and_keeps_those_it_found(
    tmp_path: Path, capsys
) -> None:
    offline = ["--api-url", closed_port_url(), "--retry-backoff", "0.01", "--quiet"]
    assert main([*offline, "--output-dir", str(tmp_path / "new" / "deeper" / "out")]) == 2
    assert sorted(tmp_path.iterdir()) == []
    found = tmp_path / "found"
    found.mkdir()
    (found / "notes.txt").write_text("mine")
    assert main([*offline, "--output-dir", str(found), "--cache", str(tmp_path / "c" / "x.sqlite")]) == 2
    assert sorted(path.name for path in found.iterdir() if path.name != LOCK_FILE) == ["notes.txt"]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["found"]
    capsys.readouterr()


# --- 5. the packaged sample builds a small corpus offline (Part 2 item 2) ---------------------------


def test_the_sample_builds_a_valid_corpus_offline_in_seconds(tmp_path: Path, capsys, monkeypatch) -> None:
    def no_network(*args: object, **kwargs: object) -> None:
        raise AssertionError("the sample must need no network")

    monkeypatch.setattr(requests.Session, "request", no_network)
    out = tmp_path / "sample-corpus"
    started = time.perf_counter()
    assert main(["--sample", "--output-dir", str(out), "--quiet"]) == 0
    seconds = time.perf_counter() - started
    stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
    assert stats["articles"] == {"train": 4, "valid": 1, "test": 1}
    assert stats["builder"]["skipped"] == []
    assert seconds < 60, f"the sample took {seconds:.0f} s"
    assert main(["validate", "--strict", str(out)]) == 0
    capsys.readouterr()


def test_the_sample_is_small_packaged_and_attributed() -> None:
    files = sorted(SAMPLE_DIR.glob("*.wikitext"))
    assert 3 <= len(files) <= 6 and sum(path.stat().st_size for path in files) < 1_000_000
    readme = (SAMPLE_DIR / "README.md").read_text(encoding="utf-8")
    assert "CC BY-SA 3.0" in readme and "https://creativecommons.org/licenses/by-sa/3.0/" in readme
    for path in files:
        assert f"`{path.name}`" in readme and f"https://en.wikipedia.org/wiki/{path.stem}" in readme
    package_data = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    for path in [*files, SAMPLE_DIR / "README.md"]:
        relative = path.relative_to(SAMPLE_DIR.parent).as_posix()
        assert any(fnmatch.fnmatch(relative, pattern) for pattern in package_data["wikitext_builder"]), (
            relative
        )


def test_the_sample_does_not_go_with_an_api_url(tmp_path: Path, capsys) -> None:
    assert main(["--sample", "--api-url", "http://x", "--output-dir", str(tmp_path / "o")]) == 2
    assert_one_line_error(capsys, "does not go with", "--sample")


# --- 6. every option's help shows its default (Part 2 item 5) --------------------------------------


def test_every_option_that_takes_a_value_shows_its_default() -> None:
    commands = next(
        action for action in build_parser()._actions if isinstance(action, argparse._SubParsersAction)
    )
    missing = [
        f"{name} {action.option_strings[0]}"
        for name, parser in commands.choices.items()
        for action in parser._actions
        if action.option_strings and action.nargs != 0 and "default" not in (action.help or "")
    ]
    assert missing == []
