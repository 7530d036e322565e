"""Builder hardening (issue 17): rebuilds that follow their source, every article left out named,
bad input refused in one line before any work, retries announced, markup residue caught."""

from __future__ import annotations

import gzip
import json
import os
import threading
from pathlib import Path

import pytest
from builder_fixtures.fake_mediawiki import FakeMediaWikiServer, FakeWiki, article_text, write_folder
from conftest import assert_one_line_error

from wikitext_builder.cli import main
from wikitext_builder.corpus import MAX_ARTICLE_BYTES, OUTPUT_FILES, TEXT_FILES
from wikitext_builder.sources import MediaWikiClient, Skipped, iter_jsonl
from wikitext_builder.validate import ERROR, validate_lines
from wikitext_toolkit_core.files import LOCK_FILE
from wikitext_toolkit_core.format import UTF8_BOM

REPO = Path(__file__).resolve().parent.parent
SMALL = ["--quiet", "--valid-articles", "1", "--test-articles", "1", "--min-count", "1"]


def pool_record(index: int, title: str | None = None) -> dict[str, object]:
    title = f"Town {chr(65 + index)}{index:02d}" if title is None else title
    return {
        "source_index": index,
        "title_guess": title,
        "class": "GA",
        "wikitext": article_text(title or "Nameless", index),
    }


def write_pool(path: Path, records: list[dict[str, object]]) -> Path:
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.writelines(json.dumps(record) + "\n" for record in records)
    return path


def titles(out: Path) -> list[str]:
    return sorted(json.loads(line)["title"] for line in (out / "manifest.jsonl").read_text().splitlines())


# --- 1. a rebuild reflects its local source exactly ----------------------------------------------


def test_rebuild_follows_an_edited_folder(tmp_path: Path, capsys) -> None:
    folder = write_folder(tmp_path / "folder", 6)
    command = ["--folder", str(folder), "--output-dir", str(tmp_path / "out"), *SMALL]
    assert main(command) == 0
    (folder / "Town_A00.wikitext").write_text(
        article_text("Town A00", 0).replace("market", "Zanzibar market")
    )
    (folder / "Town_B01.wikitext").unlink()
    capsys.readouterr()
    assert main(command) == 0
    assert "Town B01" not in titles(tmp_path / "out")
    assert "Zanzibar" in "".join(
        (tmp_path / "out" / f"wiki.{s}.raw").read_text() for s in ("train", "valid", "test")
    )
    assert f"{folder.resolve()} changed since" in capsys.readouterr().err
    assert main(["--folder", str(folder), "--output-dir", str(tmp_path / "fresh"), *SMALL]) == 0
    for name in OUTPUT_FILES:
        assert (tmp_path / "out" / name).read_bytes() == (tmp_path / "fresh" / name).read_bytes(), name


def test_rebuild_follows_a_record_appended_to_the_pool(tmp_path: Path, capsys) -> None:
    records = [pool_record(index) for index in range(5)]
    pool = write_pool(tmp_path / "pool.jsonl.gz", records)
    command = ["--jsonl", str(pool), "--output-dir", str(tmp_path / "out"), *SMALL]
    assert main(command) == 0
    write_pool(pool, [*records, pool_record(5)])
    assert main(command) == 0
    assert titles(tmp_path / "out") == [f"Town {chr(65 + i)}{i:02d}" for i in range(6)]
    assert "changed since" in capsys.readouterr().err
    assert main(command) == 0  # unchanged: the cache is reused silently
    assert "changed since" not in capsys.readouterr().err


# --- 2. every article left out is counted and named ------------------------------------------------


def test_every_article_left_out_is_named_in_stats_and_summarised(tmp_path: Path, capsys) -> None:
    records = [pool_record(index) for index in range(5)]
    records += [pool_record(5, title=""), records[1], pool_record(7, title="Broken town")]
    records[-1]["wikitext"] = "'''Broken''' town {{Infobox place|name=x\n"
    pool = write_pool(tmp_path / "pool.jsonl.gz", records)
    assert main(["--jsonl", str(pool), "--output-dir", str(tmp_path / "out"), *SMALL]) == 0
    builder = json.loads((tmp_path / "out" / "stats.json").read_text())["builder"]
    assert [
        {key: skip[key] for key in ("title", "record", "reason") if key in skip}
        for skip in builder["skipped"]
    ] == [
        {"title": "Town B01", "reason": "duplicate title"},
        {"title": "Broken town", "reason": "malformed markup"},
        {"record": "pool.jsonl.gz:6", "reason": "no title"},
    ]
    assert builder["skipped_counts"] == {"duplicate title": 1, "malformed markup": 1, "no title": 1}
    summary = [line for line in capsys.readouterr().err.splitlines() if line.startswith("skipped")]
    assert summary == [
        (
            f"skipped 3 articles (1 duplicate title, 1 malformed markup, 1 no title); "
            f"each named in {tmp_path / 'out' / 'stats.json'}"
        )
    ]


def test_a_title_seen_three_times_counts_two_duplicates_built_whole_or_in_shards(
    tmp_path: Path, capsys
) -> None:
    records = [pool_record(index) for index in range(5)]
    pool = write_pool(tmp_path / "pool.jsonl.gz", [*records, records[1], records[1], records[2]])
    assert main(["--jsonl", str(pool), "--output-dir", str(tmp_path / "whole"), *SMALL]) == 0
    caches = []
    for k in (1, 2):
        cache = tmp_path / f"shard-{k}.sqlite"
        shard = ["--shard", f"{k}/2", "--cache", str(cache)]
        assert main(["--jsonl", str(pool), "--output-dir", str(tmp_path / "s"), *shard, *SMALL]) == 0
        caches.append(str(cache))
    assert main(["merge", "--output-dir", str(tmp_path / "merged"), "--quiet", *caches]) == 0
    for out in ("whole", "merged"):
        builder = json.loads((tmp_path / out / "stats.json").read_text())["builder"]
        assert builder["skipped_counts"] == {"duplicate title": 3}, out
        assert [skip["title"] for skip in builder["skipped"]] == ["Town B01", "Town B01", "Town C02"]
    assert "skipped 3 articles (3 duplicate title)" in capsys.readouterr().err


def test_a_skipped_title_with_markup_is_not_repeated_in_the_detail(tmp_path: Path) -> None:
    records = [pool_record(index) for index in range(5)]
    records.append(pool_record(5, title="Broken&nbsp;town"))
    records[-1]["wikitext"] = "'''Broken''' town {{Infobox place|name=x\n"
    pool = write_pool(tmp_path / "pool.jsonl.gz", records)
    assert main(["--jsonl", str(pool), "--output-dir", str(tmp_path / "out"), *SMALL]) == 0
    (skip,) = json.loads((tmp_path / "out" / "stats.json").read_text())["builder"]["skipped"]
    assert skip["title"] == "Broken&nbsp;town" and skip["reason"] == "malformed markup"
    assert skip["detail"].startswith("unbalanced template markup near"), skip


def test_real_pool_names_its_records_without_a_title(tmp_path: Path, capsys) -> None:
    shared = Path(os.environ.get("WIKITEXT_SHARED_DIR") or REPO.parent / "shared")
    pool = shared / "wikipedia" / "pool" / "ga_fa_pool.jsonl.gz"
    if not pool.is_file():
        pytest.skip(f"the shared pool is not at {pool} (set WIKITEXT_SHARED_DIR)")
    skipped = [item for item in iter_jsonl(pool, ("good", "featured")) if isinstance(item, Skipped)]
    assert len(skipped) == 21 and {skip.reason for skip in skipped} == {"no title"}
    assert skipped[0].record == f"{pool.name}:32" and skipped[0].detail == "source_index 603"


# --- 3. an empty train split is an error -------------------------------------------------------------


def test_split_sizes_that_leave_train_empty_are_refused_with_sizes_that_fit(tmp_path: Path, capsys) -> None:
    folder = write_folder(tmp_path / "folder", 12)
    assert (
        main(
            [
                "--folder",
                str(folder),
                "--output-dir",
                str(tmp_path / "out"),
                "--quiet",
                "--valid-articles",
                "6",
                "--test-articles",
                "6",
            ]
        )
        == 2
    )
    assert_one_line_error(
        capsys,
        "12 articles",
        "--valid-articles 6",
        "--test-articles 6",
        "no article for train",
        "--valid-articles 1 --test-articles 1",
    )
    assert not (tmp_path / "out" / "wiki.train.tokens").exists()


def test_when_no_article_renders_the_error_says_why(tmp_path: Path, capsys) -> None:
    records = [pool_record(index) for index in range(4)]
    for record in records[:3]:
        record["wikitext"] = "Text {{Infobox place|name=x\n"
    records[3]["wikitext"] = "#REDIRECT [[Town A00]]\n"
    pool = write_pool(tmp_path / "pool.jsonl.gz", [*records, pool_record(4, title="")])
    assert main(["--jsonl", str(pool), "--output-dir", str(tmp_path / "out"), *SMALL]) == 2
    assert_one_line_error(
        capsys, "0 articles rendered (skipped: 4 malformed markup, 1 no title)", "no article for train"
    )


def test_a_byte_order_mark_is_neither_a_bad_record_nor_text(tmp_path: Path) -> None:
    """A pool or a folder whose files an editor saved with a UTF-8 byte-order mark builds the
    corpus it builds without one: the mark is not read as a broken first record, nor rendered
    into the first article's text."""
    folder = write_folder(tmp_path / "folder", 4)
    marked_folder = tmp_path / "marked-folder"
    marked_folder.mkdir()
    for path in folder.iterdir():
        (marked_folder / path.name).write_bytes(UTF8_BOM + path.read_bytes())
    pool = tmp_path / "pool.jsonl"
    pool.write_text("".join(json.dumps(pool_record(index)) + "\n" for index in range(4)))
    marked_pool = tmp_path / "marked-pool.jsonl"
    marked_pool.write_bytes(UTF8_BOM + pool.read_bytes())
    for option, plain, marked in (("--folder", folder, marked_folder), ("--jsonl", pool, marked_pool)):
        outputs = [tmp_path / option / source.name for source in (plain, marked)]
        for source, output in zip((plain, marked), outputs):
            assert main([option, str(source), "--output-dir", str(output), *SMALL]) == 0, source
        for name in TEXT_FILES:
            assert (outputs[0] / name).read_bytes() == (outputs[1] / name).read_bytes(), (option, name)


def test_stats_of_a_file_that_is_not_utf8_is_a_assert_one_line_error(tmp_path: Path, capsys) -> None:
    for split in ("train", "valid", "test"):
        (tmp_path / f"wiki.{split}.tokens").write_bytes(b" \n = T = \n \n text . \n \n")
    (tmp_path / "wiki.valid.tokens").write_bytes(b" \n = T = \n \n caf\xe9 . \n \n")
    assert main(["stats", str(tmp_path)]) == 2
    assert_one_line_error(capsys, f"{tmp_path / 'wiki.valid.tokens'}: not valid UTF-8")


# --- 4. a truncated pool ---------------------------------------------------------------------------


def test_a_folder_file_named_in_another_encoding_is_a_one_line_error(tmp_path: Path, capsys) -> None:
    folder = write_folder(tmp_path / "folder", 4)
    (folder / os.fsdecode(b"Caf\xe9.wikitext")).write_text(article_text("Cafe", 5))  # Latin-1 name
    assert main(["--folder", str(folder), "--output-dir", str(tmp_path / "out"), *SMALL]) == 2
    assert_one_line_error(capsys, f"{folder}/Caf\\xe9.wikitext: a file name that is not valid UTF-8")
    assert not (tmp_path / "out").exists()


def test_truncated_gzip_pool_is_a_assert_one_line_error(tmp_path: Path, capsys) -> None:
    pool = write_pool(tmp_path / "pool.jsonl.gz", [pool_record(index) for index in range(30)])
    pool.write_bytes(pool.read_bytes()[:-200])
    assert main(["--jsonl", str(pool), "--output-dir", str(tmp_path / "out"), *SMALL]) == 2
    assert_one_line_error(capsys, f"{pool}: ", "truncated or corrupt")


# --- 5. outputs checked before any work ------------------------------------------------------------


def test_unwritable_out_is_refused_before_reading_the_source(tmp_path: Path, capsys) -> None:
    folder = write_folder(tmp_path / "folder", 4)
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert (
        main(
            [
                "--folder",
                str(folder),
                "--output-dir",
                str(blocker / "out"),
                "--cache",
                str(tmp_path / "cache.sqlite"),
                *SMALL,
            ]
        )
        == 2
    )
    assert_one_line_error(capsys, f"{blocker / 'out'}: ", "not a directory")
    assert not (tmp_path / "cache.sqlite").exists()  # refused before the cache was filled
    assert (
        main(
            [
                "--folder",
                str(folder),
                "--output-dir",
                str(tmp_path / "out"),
                "--cache",
                str(blocker / "cache.sqlite"),
                *SMALL,
            ]
        )
        == 2
    )
    assert_one_line_error(capsys, f"{blocker / 'cache.sqlite'}: ", "not a directory")


def test_read_only_cache_is_refused_before_any_work(tmp_path: Path, capsys, read_only: Path) -> None:
    folder = write_folder(tmp_path / "folder", 4)
    cache = read_only / "cache.sqlite"
    arguments = ["--folder", str(folder), "--output-dir", str(tmp_path / "out"), "--cache", str(cache)]
    assert main([*arguments, *SMALL]) == 2
    assert_one_line_error(capsys, f"--cache {cache}: cannot write in {read_only} (permission denied)")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "case", ["out is the folder", "out holds the pool", "cache is the pool", "out holds the manifest"]
)
def test_out_that_would_overwrite_an_input_is_refused(case: str, tmp_path: Path, capsys) -> None:
    folder = write_folder(tmp_path / "folder", 4)
    pool = tmp_path / "manifest.jsonl"
    pool.write_text("".join(json.dumps(pool_record(index)) + "\n" for index in range(4)))
    arguments = {
        "out is the folder": ["--folder", str(folder), "--output-dir", str(folder)],
        "out holds the pool": ["--jsonl", str(pool), "--output-dir", str(tmp_path)],
        "cache is the pool": [
            "--jsonl",
            str(pool),
            "--output-dir",
            str(tmp_path / "out"),
            "--cache",
            str(pool),
        ],
        "out holds the manifest": [
            "--from-manifest",
            str(tmp_path / "manifest.jsonl"),
            "--output-dir",
            str(tmp_path),
            "--api-url",
            "http://127.0.0.1:9/w/api.php",
        ],
    }[case]
    if case == "out holds the manifest":  # the corpus would write its own manifest.jsonl over it
        pool.write_text(
            json.dumps({"title": "Town A00", "page_id": 1, "revision_id": 7, "split": "train"}) + "\n"
        )
    before = {path: path.read_bytes() for path in [pool, *folder.iterdir()]}
    assert main([*arguments, *(["--quiet"] if case == "out holds the manifest" else SMALL)]) == 2
    assert_one_line_error(capsys, "an input of this command")
    assert {path: path.read_bytes() for path in before} == before
    assert not any(folder.glob("wiki.*")) and not (tmp_path / "out").exists()


@pytest.mark.parametrize("name", ["stats.json", "wiki.train.tokens", ".lock"])
def test_a_cache_that_is_one_of_the_corpus_files_is_refused(name: str, tmp_path: Path, capsys) -> None:
    folder = write_folder(tmp_path / "folder", 4)
    out = tmp_path / "out"
    arguments = ["--folder", str(folder), "--output-dir", str(out), "--cache", str(out / name)]
    assert main([*arguments, *SMALL]) == 2
    assert_one_line_error(capsys, f"--cache {out / name}: is the build's own {name} in --output-dir {out}")
    assert not out.exists()


# --- 6. validate reports markup residue --------------------------------------------------------------


@pytest.mark.parametrize(
    "residue",
    [
        "[ [ Avon | the Avon ] ]",
        "the Avon ] ] .",
        "{ { cite web } }",
        "< ref > x",
        "< / ref >",
        "' ' ' Town ' ' '",
        "a & nbsp ; b",
        "[[Avon]]",
        "{{reflist}}",
        "x <ref>",
        "'''Town'''",
        "{ | class = wikitable",
        "_ _ NOTOC _ _",
        "[ http : / / www.example.org the site ]",
        "[http://www.example.org the site]",
    ],
)
def test_validate_reports_markup_residue(residue: str) -> None:
    lines = [" \n", " = Town = \n", " \n", f" The town lies on the river {residue} here . \n", " \n"]
    errors = [v for v in validate_lines(lines) if v.severity == ERROR]
    assert [v.line_number for v in errors] == [4], errors
    assert errors[0].message.startswith("wikitext markup residue ") and errors[0].message.endswith(
        " (markup that rendering should have removed)"
    )


@pytest.mark.parametrize(
    "text",
    [
        "the < pre > tag",
        "[ sic ]",
        "| x | = 1",
        "the dancers ' ' naked suits '",
        "AT & T ;",
        "< <unk> > 1 < / <unk> >",
        "Category : Dover Athletic F.C. players",
    ],
)
def test_validate_accepts_what_real_wikitext_contains(text: str) -> None:
    lines = [" \n", " = Town = \n", " \n", f" {text} . \n", " \n"]
    assert validate_lines(lines) == []


# --- 7. article size limit --------------------------------------------------------------------------


def test_article_over_the_size_limit_is_skipped_before_parsing(tmp_path: Path, capsys) -> None:
    folder = write_folder(tmp_path / "folder", 4)
    (folder / "Huge_town.wikitext").write_text(
        "{{" + "x" * MAX_ARTICLE_BYTES + "\n"
    )  # unclosed: slow to parse
    assert main(["--folder", str(folder), "--output-dir", str(tmp_path / "out"), *SMALL]) == 0
    builder = json.loads((tmp_path / "out" / "stats.json").read_text())["builder"]
    assert [(skip["title"], skip["reason"]) for skip in builder["skipped"]] == [("Huge town", "too large")]
    assert "over the limit of 2,097,152 bytes" in builder["skipped"][0]["detail"]
    assert "1 too large" in capsys.readouterr().err


# --- 8. retries are announced at the first failure --------------------------------------------------


def test_first_failure_says_how_long_retries_will_go_on(tmp_path: Path, capsys) -> None:
    """The API answers the listing, then goes away: the batch's connection is dropped, and every
    retry is refused (a connection failure before the API ever answered is not retried)."""
    wiki = FakeWiki.with_articles(4, block_at_batch=1)
    with FakeMediaWikiServer(wiki) as server:
        url = server.url

        def go_away() -> None:
            wiki.blocked.wait(60)
            server.server.shutdown()
            server.server.server_close()
            wiki.release.set()  # the blocked request's connection closes without an answer

        threading.Thread(target=go_away, daemon=True).start()
        retries = ["--max-attempts", "4", "--retry-backoff", "0.01"]
        assert main(["--api-url", url, "--output-dir", str(tmp_path / "out"), *retries, *SMALL]) == 2
    retrying, error = capsys.readouterr().err.splitlines()
    assert retrying.startswith(f"retrying: MediaWiki API at {url}: ConnectionError: ")
    assert retrying.endswith("; up to 3 more attempts over about 0.07 s (--max-attempts, --retry-backoff)")
    assert error.startswith(f"error: MediaWiki API at {url} unreachable after 4 attempts: ConnectionError")
    assert error.endswith("] Connection refused")  # the reason, not the request's URL


def test_retry_notice_once_per_failing_request() -> None:
    notices: list[str] = []
    with FakeMediaWikiServer(FakeWiki.with_articles(2)) as server:
        client = MediaWikiClient(
            server.url,
            max_attempts=3,
            backoff_base=5,
            backoff_cap=8,
            sleep=lambda seconds: None,
            notify=notices.append,
        )
        client.query({"list": "categorymembers", "cmtitle": "Category:Good articles"})
    for _ in range(2):  # the API answered once, then went away: its failures are retried
        with pytest.raises(Exception, match="unreachable after 3 attempts"):
            client.query({"list": "categorymembers"})
    assert len(notices) == 2 and all(
        n.endswith("up to 2 more attempts over about 13 s (--max-attempts, --retry-backoff)") for n in notices
    )


# --- 9. no temporary files left behind --------------------------------------------------------------


def test_failed_write_leaves_no_temporary_files(tmp_path: Path, monkeypatch) -> None:
    folder = write_folder(tmp_path / "folder", 4)
    real_replace = os.replace

    def failing_replace(source: str | Path, target: str | Path) -> None:
        if Path(target).name == "wiki.test.tokens":
            raise OSError(28, "No space left on device")
        real_replace(source, target)

    monkeypatch.setattr(os, "replace", failing_replace)
    assert main(["--folder", str(folder), "--output-dir", str(tmp_path / "out"), *SMALL]) == 2
    hidden = (path.name for path in (tmp_path / "out").iterdir() if path.name.startswith("."))
    assert [name for name in hidden if name != LOCK_FILE] == []  # the lock of a build is no temporary
