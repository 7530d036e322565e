"""End-to-end builds: from the API (a local server), undisturbed, disturbed, killed and resumed,
sharded and merged, rebuilt from a manifest; from folders and pools; and loaded by the harness."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from builder_fixtures.fake_mediawiki import FakeMediaWikiServer, FakeWiki, Page, article_text, write_folder
from conftest import assert_one_line_error

from harness.datasets import load_dataset
from wikitext_builder.build import fill_from_stream
from wikitext_builder.cache import Cache
from wikitext_builder.cli import main
from wikitext_builder.corpus import OUTPUT_FILES, TEXT_FILES, article_order, corpus_statistics, shard_of
from wikitext_builder.sources import Article

REPO = Path(__file__).resolve().parent.parent
OFFLINE_API = ["--api-url", "http://127.0.0.1:9/w/api.php", "--max-attempts", "1"]  # a closed port
FAST = [
    "--retry-backoff",
    "0.01",
    "--timeout",
    "0.5",
    "--quiet",
    "--valid-articles",
    "2",
    "--test-articles",
    "2",
    "--min-count",
    "2",
]


def shared_wikipedia() -> Path:
    root = Path(os.environ.get("WIKITEXT_SHARED_DIR") or REPO.parent / "shared") / "wikipedia"
    if not root.is_dir():
        pytest.skip(f"shared Wikipedia material not found at {root} (set WIKITEXT_SHARED_DIR)")
    return root


def make_wiki(**options) -> FakeWiki:
    """12 articles in two categories, one listed page missing, one listed redirect to a listed page."""
    wiki = FakeWiki.with_articles(12, redirects={"Old Town A00": "Town A00"}, **options)
    wiki.categories["Good articles"] += ["Old Town A00", "Vanished town"]
    return wiki


def outputs(directory: Path) -> dict[str, bytes]:
    return {name: (directory / name).read_bytes() for name in OUTPUT_FILES}


def build(url: str, out: Path, *extra: str) -> int:
    return main(["--api-url", url, "--output-dir", str(out), *FAST, *extra])


@pytest.fixture
def reference(tmp_path: Path) -> tuple[FakeWiki, Path]:
    """An undisturbed build from the API."""
    wiki = make_wiki()
    with FakeMediaWikiServer(wiki) as server:
        assert build(server.url, tmp_path / "reference", "--batch-size", "5") == 0
    return wiki, tmp_path / "reference"


def test_api_build_is_complete_and_reports_missing(reference, capsys) -> None:
    _, out = reference
    manifest = [json.loads(line) for line in (out / "manifest.jsonl").read_text().splitlines()]
    titles = [record["title"] for record in manifest]
    assert sorted(titles) == [f"Town {chr(65 + i)}{i:02d}" for i in range(12)]  # redirect stored once
    assert [r["split"] for r in manifest].count("valid") == 2 and len(set(titles)) == 12
    stats = json.loads((out / "stats.json").read_text())
    assert stats["builder"]["skipped"] == [
        {"title": "Old Town A00", "reason": "duplicate title", "detail": "resolves to 'Town A00'"},
        {"title": "Vanished town", "reason": "missing page"},
    ]
    assert stats["articles"] == {"train": 8, "valid": 2, "test": 2}
    assert stats == {**corpus_statistics(out), "builder": stats["builder"]}
    checksums = dict(line.split("  ")[::-1] for line in (out / "SHA256SUMS").read_text().splitlines())
    assert sorted(checksums) == sorted(TEXT_FILES)


@pytest.mark.parametrize("seed", ["0", "1"])  # the redirect after its target in the order, before it
def test_a_listed_redirect_to_a_listed_article_is_named(seed: str, tmp_path: Path, capsys) -> None:
    order = article_order(
        [title for listed in make_wiki().categories.values() for title in listed], int(seed)
    )
    assert (order.index("Old Town A00") < order.index("Town A00")) == (seed == "1")
    with FakeMediaWikiServer(make_wiki()) as server:
        assert build(server.url, tmp_path / "out", "--seed", seed) == 0
    stats = json.loads((tmp_path / "out" / "stats.json").read_text())
    assert {"title": "Old Town A00", "reason": "duplicate title", "detail": "resolves to 'Town A00'"} in (
        stats["builder"]["skipped"]
    )
    assert "(1 duplicate title, 1 missing page)" in capsys.readouterr().err


def test_disturbed_build_is_identical_to_undisturbed(reference, tmp_path: Path, capsys) -> None:
    _, expected = reference
    faults = {2: "429", 4: "maxlag", 6: "500", 8: "503", 9: "drop", 11: "slow", 12: "drop"}
    wiki = make_wiki(faults=faults, slow_seconds=1.0, retry_after_429="1", retry_after_maxlag="1")
    with FakeMediaWikiServer(wiki) as server:
        assert build(server.url, tmp_path / "disturbed", "--batch-size", "5") == 0
    assert outputs(tmp_path / "disturbed") == outputs(expected)
    assert len(wiki.log) > len(faults)


def test_build_killed_mid_way_resumes_without_refetching(reference, tmp_path: Path) -> None:
    _, expected = reference
    out = tmp_path / "killed"
    wiki = make_wiki(block_at_batch=3)
    with FakeMediaWikiServer(wiki) as server:
        command = [
            sys.executable,
            "-m",
            "wikitext_builder",
            "--api-url",
            server.url,
            "--output-dir",
            str(out),
            *FAST,
            "--batch-size",
            "5",
        ]
        process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            assert wiki.blocked.wait(60), "the build never reached its third batch"
            os.kill(process.pid, signal.SIGKILL)
            process.wait(10)
        finally:
            process.kill()
        wiki.release.set()
        batches = wiki.batches()
        assert len(batches) == 3  # two committed, the third in flight when killed
        committed = set("|".join(batches[:2]).split("|"))
        assert not (out / "wiki.train.tokens").exists()
        wiki.block_at_batch = None
        del wiki.log[:]
        rerun = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert rerun.returncode == 0, rerun.stderr
    assert outputs(out) == outputs(expected)
    refetched = set("|".join(params["titles"] for params in wiki.revision_requests()).split("|"))
    assert refetched and not refetched & committed
    assert not any(params.get("list") == "categorymembers" for params in wiki.log)


def test_shards_merge_into_the_unsharded_corpus(reference, tmp_path: Path, capsys) -> None:
    _, expected = reference
    wiki = make_wiki()
    caches = []
    with FakeMediaWikiServer(wiki) as server:
        for k in (1, 2):
            assert build(server.url, tmp_path / "shards", "--shard", f"{k}/2") == 0
            caches.append(str(tmp_path / "shards" / f"cache.shard-{k}-of-2.sqlite"))
    for k, path in enumerate(caches, start=1):
        with Cache(Path(path)) as cache:
            fetched = [
                row[0]
                for row in cache.connection.execute("SELECT title FROM articles WHERE status != 'pending'")
            ]
        assert fetched and all(shard_of(title, 2) == k for title in fetched)  # each its own titles
    assert main(["merge", "--output-dir", str(tmp_path / "merged"), "--quiet", *caches]) == 0
    assert outputs(tmp_path / "merged") == outputs(expected)
    assert main(["merge", "--output-dir", str(tmp_path / "half"), caches[0]]) == 2
    assert "missing or repeated: 2/2" in capsys.readouterr().err


def test_merge_refuses_an_unsharded_cache_whose_build_stopped_early(tmp_path: Path, capsys) -> None:
    lines = [json.dumps({"title": f"Town {i:03d}", "wikitext": article_text("Town", i)}) for i in range(80)]
    pool = tmp_path / "pool.jsonl"
    pool.write_text("\n".join([*lines, "not json", *lines]) + "\n")  # stops after a committed batch
    assert main(["--jsonl", str(pool), "--output-dir", str(tmp_path / "out"), *FAST]) == 2
    capsys.readouterr()
    cache = tmp_path / "out" / "cache.sqlite"
    assert main(["merge", "--output-dir", str(tmp_path / "merged"), "--quiet", str(cache)]) == 2
    assert capsys.readouterr().err == (
        f"error: {cache}: an incomplete cache (its build stopped early); rerun that build first\n"
    )
    assert not (tmp_path / "merged" / "wiki.train.tokens").exists()


def test_shard_membership_is_a_stable_partition() -> None:
    titles = [f"Article {i}" for i in range(200)]
    shards = [shard_of(title, 3) for title in titles]
    assert set(shards) == {1, 2, 3} and shards == [shard_of(title, 3) for title in titles]
    assert (
        shard_of("Aristotle", 4) == int.from_bytes(hashlib.sha256(b"Aristotle").digest()[:8], "big") % 4 + 1
    )


def test_rebuild_from_manifest_fetches_exact_revisions(reference, tmp_path: Path, capsys) -> None:
    _, expected = reference
    manifest = tmp_path / "manifest.jsonl"
    gone = {
        "title": "Deleted town",
        "page_id": 1,
        "revision_id": 99_999,
        "timestamp": None,
        "split": "train",
        "sha256": "0" * 64,
    }
    manifest.write_text((expected / "manifest.jsonl").read_text() + json.dumps(gone) + "\n")
    wiki = make_wiki()
    (tmp_path / "stats.json").write_bytes((expected / "stats.json").read_bytes())  # its --min-count
    with FakeMediaWikiServer(wiki) as server:
        rebuild = ["--api-url", server.url, "--output-dir", str(tmp_path / "again"), "--quiet"]
        assert main([*rebuild, "--from-manifest", str(manifest)]) == 0
    again, before = outputs(tmp_path / "again"), outputs(expected)
    assert {name: again[name] for name in TEXT_FILES + ("SHA256SUMS", "manifest.jsonl")} == {
        name: before[name] for name in TEXT_FILES + ("SHA256SUMS", "manifest.jsonl")
    }
    stats = json.loads(again["stats.json"])
    assert stats["builder"]["skipped"] == [{"title": "Deleted town", "reason": "revision not found"}]
    assert (
        f"skipped 1 article (1 revision not found); each named in {tmp_path / 'again' / 'stats.json'}\n"
        in capsys.readouterr().err
    )
    assert wiki.revision_requests() and all("revids" in params for params in wiki.revision_requests())


def test_a_rebuild_from_a_manifest_keeps_its_min_count_and_split_sizes(tmp_path: Path, capsys) -> None:
    first, again = tmp_path / "first", tmp_path / "again"
    alone = tmp_path / "alone" / "manifest.jsonl"  # a manifest without its corpus's stats.json
    with FakeMediaWikiServer(make_wiki()) as server:
        options = ["--api-url", server.url, "--quiet"]
        sizes = ["--valid-articles", "3", "--test-articles", "1"]
        assert main([*options, *sizes, "--min-count", "1", "--seed", "-5", "--output-dir", str(first)]) == 0
        capsys.readouterr()
        for option in (["--seed", "5"], sizes[:2], sizes[2:]):
            rebuild = [*options, *option, "--from-manifest", str(first / "manifest.jsonl")]
            assert main([*rebuild, "--output-dir", str(again)]) == 2
            assert_one_line_error(
                capsys, f"--from-manifest fixes the articles and their split; drop {option[0]}"
            )
        assert (
            main([*options, "--from-manifest", str(first / "manifest.jsonl"), "--output-dir", str(again)])
            == 0
        )
        alone.parent.mkdir()
        alone.write_bytes((first / "manifest.jsonl").read_bytes())
        capsys.readouterr()
        assert main([*options, "--from-manifest", str(alone), "--output-dir", str(tmp_path / "default")]) == 0
    for name in (*TEXT_FILES, "SHA256SUMS", "manifest.jsonl"):
        assert (again / name).read_bytes() == (first / name).read_bytes(), name
    settings = [
        json.loads((out / "stats.json").read_text())["builder"]["settings"]
        for out in (first, again, tmp_path / "default")
    ]
    assert settings[1] == {**settings[0], "from_manifest": True}  # the seed of the corpus rebuilt
    assert settings[2]["seed"] is None  # no stats.json beside the manifest to say it
    assert (settings[1]["min_count"], settings[1]["valid_articles"], settings[1]["test_articles"]) == (
        1,
        3,
        1,
    )
    assert settings[2]["min_count"] == 3
    assert f"note: no {alone.parent / 'stats.json'} beside the manifest" in capsys.readouterr().err
    stats = alone.with_name("stats.json")
    stats.write_text(json.dumps({"builder": {"settings": {"min_count": "3", "seed": 1}}}), encoding="utf-8")
    assert main(["--from-manifest", str(alone), "--output-dir", str(tmp_path / "bad")]) == 2
    assert_one_line_error(capsys, f"{stats}: no builder.settings.min_count (a positive integer)")


def test_a_manifest_whose_title_holds_a_unicode_line_separator_rebuilds(tmp_path: Path) -> None:
    wiki = make_wiki()
    title = "Town\u2028Q\u0085R\u2029S"  # line breaks to str.splitlines, not to JSON lines
    wiki.pages[title] = Page(3000, 80_000, "2024-02-01T12:00:00Z", article_text(title, 40))
    wiki.categories["Good articles"].append(title)
    first, again = tmp_path / "first", tmp_path / "again"
    with FakeMediaWikiServer(wiki) as server:
        assert build(server.url, first) == 0
        rebuild = ["--api-url", server.url, "--quiet", "--output-dir", str(again)]
        assert main([*rebuild, "--from-manifest", str(first / "manifest.jsonl")]) == 0
    assert title in (first / "manifest.jsonl").read_text(encoding="utf-8")
    for name in (*TEXT_FILES, "SHA256SUMS", "manifest.jsonl"):
        assert (again / name).read_bytes() == (first / name).read_bytes(), name


@pytest.mark.parametrize("source", ["--folder", "--sample"])
def test_a_manifest_of_local_articles_is_refused_naming_the_rebuild(
    source: str, tmp_path: Path, capsys
) -> None:
    local = [source, str(write_folder(tmp_path / "folder", 6))] if source == "--folder" else [source]
    first = tmp_path / "first"
    assert main([*local, "--output-dir", str(first), *FAST[4:]]) == 0
    capsys.readouterr()
    rebuild = [*OFFLINE_API, "--quiet", "--output-dir", str(tmp_path / "again")]
    assert main([*rebuild, "--from-manifest", str(first / "manifest.jsonl")]) == 2
    assert_one_line_error(
        capsys,
        f"{first / 'manifest.jsonl'}:1: no revision id: its corpus was built from local articles",
        "rebuild it with the same --folder, --jsonl, --dump or --sample command",
    )


def test_article_order_ignores_source_order_and_follows_seed() -> None:
    titles = [f"T{i}" for i in range(50)]
    assert article_order(titles, 7) == article_order(reversed(titles), 7)
    assert article_order(titles, 7) != article_order(titles, 8)
    assert article_order(titles, 7, limit=10) == article_order(titles, 7)[:10]


def test_workers_give_identical_output_and_bad_markup_is_skipped(tmp_path: Path, capsys) -> None:
    folder = write_folder(tmp_path / "folder", 10)
    (folder / "Broken_town.wikitext").write_text("'''Broken''' town {{Infobox place|name=x\n")
    for workers in (1, 2):
        assert (
            main(
                [
                    "--folder",
                    str(folder),
                    "--output-dir",
                    str(tmp_path / f"w{workers}"),
                    "--workers",
                    str(workers),
                    *FAST,
                ]
            )
            == 0
        )
    assert outputs(tmp_path / "w1") == outputs(tmp_path / "w2")
    assert "skipped 1 article (1 malformed markup)" in capsys.readouterr().err
    stats = json.loads((tmp_path / "w1" / "stats.json").read_text())
    [skip] = stats["builder"]["skipped"]
    assert skip["title"] == "Broken town" and skip["reason"] == "malformed markup"
    assert skip["detail"] and not skip["detail"].startswith("Broken town")
    assert stats["articles"] == {"train": 6, "valid": 2, "test": 2}  # valid/test filled despite the skip


def test_jsonl_pool_in_any_order_gives_the_same_corpus(tmp_path: Path, capsys) -> None:
    records = [
        {
            "source_index": i,
            "title_guess": f"town {chr(65 + i)}{i:02d}",
            "class": "GA" if i % 2 else "FA",
            "wikitext": article_text(f"Town {chr(65 + i)}{i:02d}", i),
        }
        for i in range(10)
    ]
    records.append({**records[3], "wikitext": "a later duplicate"})
    for name, ordered in (("forward", records), ("backward", records[-2::-1] + [records[-1]])):
        with gzip.open(tmp_path / f"{name}.jsonl.gz", "wt") as handle:
            handle.writelines(json.dumps(record) + "\n" for record in ordered)
        assert (
            main(["--jsonl", str(tmp_path / f"{name}.jsonl.gz"), "--output-dir", str(tmp_path / name), *FAST])
            == 0
        )
    assert outputs(tmp_path / "forward") == outputs(tmp_path / "backward")
    assert json.loads((tmp_path / "forward" / "stats.json").read_text())["builder"]["skipped"] == [
        {"title": "Town D03", "reason": "duplicate title"}
    ]
    assert "skipped 1 article (1 duplicate title)" in capsys.readouterr().err
    assert (
        main(
            [
                "--jsonl",
                str(tmp_path / "forward.jsonl.gz"),
                "--articles",
                "good",
                "--output-dir",
                str(tmp_path / "good"),
                *FAST,
            ]
        )
        == 0
    )
    assert json.loads((tmp_path / "good" / "stats.json").read_text())["articles"]["train"] == 1


def test_interrupted_stream_resumes_without_duplicates(tmp_path: Path) -> None:
    articles = [Article(f"T{i:03d}", f"text {i}") for i in range(120)]

    def interrupted():
        yield from articles[:70]
        raise KeyboardInterrupt

    with Cache(tmp_path / "cache.sqlite") as cache:
        assert cache.connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        with pytest.raises(KeyboardInterrupt):
            fill_from_stream(cache, interrupted(), None, progress=False)
        assert not cache.list_complete
        stored = cache.connection.execute("SELECT count(*) FROM revisions").fetchone()[0]
        assert stored == 50  # the committed batch; the 20 after it were never committed
        fill_from_stream(cache, iter(articles), None, progress=False)
        assert cache.list_complete
        assert cache.connection.execute("SELECT count(*) FROM revisions").fetchone()[0] == 120
        assert len(cache.entries()) == 120


def test_cache_refuses_another_source(tmp_path: Path, capsys) -> None:
    folder = write_folder(tmp_path / "folder", 6)
    common = ["--output-dir", str(tmp_path / "out"), *FAST, "--valid-articles", "1", "--test-articles", "1"]
    assert main(["--folder", str(folder), *common]) == 0
    (tmp_path / "pool.jsonl").write_text(json.dumps({"title": "Town", "wikitext": "A town."}) + "\n")
    assert main(["--jsonl", str(tmp_path / "pool.jsonl"), *common]) == 2
    assert "was filled from" in capsys.readouterr().err


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["--shard", "3/2"], "--shard takes K/N"),
        (["--folder", "/nonexistent/folder"], "not a directory"),
        (["--folder", ".", "--api-url", "http://x"], "does not go with"),
        (["--limit", "0"], "argument --limit: must be at least 1"),
        (["--min-count", "0"], "argument --min-count: must be at least 1"),
        (["--valid-articles", "-1"], "argument --valid-articles: must not be negative"),
        (["--batch-size", "0"], "argument --batch-size: must be at least 1"),
        (["--batch-size", "51"], "argument --batch-size: must be 1..50"),
        # refused by argparse, not by time.sleep(-1) after the first failure or by a retried timeout
        ([*OFFLINE_API, "--max-attempts", "2", "--retry-backoff", "-1"], "argument --retry-backoff: must be"),
        ([*OFFLINE_API, "--timeout", "0"], "argument --timeout: must be a finite number greater than 0"),
        # refused while planning, before any request
        ([*OFFLINE_API, "--limit", "4", "--valid-articles", "2", "--test-articles", "2"], "--limit 4, and"),
        (["--out", "x"], "unrecognized arguments: --out"),  # no abbreviation of --output-dir
    ],
)
def test_bad_options_give_one_line_errors(arguments, message, tmp_path: Path, capsys) -> None:
    assert main([*arguments, "--output-dir", str(tmp_path / "o"), "--quiet"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: ") and message in error and error.count("\n") == 1


def test_real_articles_build_validates_and_loads_in_the_harness(tmp_path: Path, capsys) -> None:
    source = shared_wikipedia() / "ga_fa"
    folder = tmp_path / "few"
    folder.mkdir()
    for name in ("Cyclone_Joy", "Turquoise_parrot", "Titanium", "Arts_Club_of_Chicago", "Hurricane_Hattie"):
        (folder / f"{name}.wikitext").symlink_to(source / f"{name}.wikitext")
    out = tmp_path / "corpus"
    assert (
        main(
            [
                "--folder",
                str(folder),
                "--output-dir",
                str(out),
                "--quiet",
                "--valid-articles",
                "1",
                "--test-articles",
                "1",
            ]
        )
        == 0
    )
    stats = json.loads((out / "stats.json").read_text())
    dataset = load_dataset(str(out))
    for split in ("train", "valid", "test"):
        assert len(dataset.tokens(split).ids) == stats["tokens"][split]
        assert dataset.is_verified(split)  # checked against the SHA256SUMS the builder wrote
    assert len(dataset.vocab) == stats["vocabulary_size"]
    assert main(["validate", str(out)]) == 0
    capsys.readouterr()
    assert main(["stats", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["tokens"] == stats["tokens"]


def test_builder_imports_no_torch_and_only_the_shared_cli_plumbing_of_harness() -> None:
    code = (
        "import sys, wikitext_builder, wikitext_builder.cli, wikitext_builder.render; "
        "print(*(m for m in sys.modules if m == 'torch' or m.split('.')[0] == 'harness'))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    # harness/__init__ pulls in the plugin contract (numpy only); beside it, only the shared CLI
    # plumbing, the file helpers (atomic writes, checksums) and the format constants; no torch.
    assert set(result.stdout.split()) <= {
        "harness",
        "wikitext_toolkit_core.cli",
        "wikitext_toolkit_core.files",
        "wikitext_toolkit_core.format",
        "harness.plugin",
    }, result.stdout


def test_validate_command_reports_planted_violations(tmp_path: Path, capsys) -> None:
    folder = write_folder(tmp_path / "folder", 6)
    out = tmp_path / "out"
    assert (
        main(
            [
                "--folder",
                str(folder),
                "--output-dir",
                str(out),
                *FAST,
                "--valid-articles",
                "1",
                "--test-articles",
                "1",
            ]
        )
        == 0
    )
    assert main(["validate", str(out)]) == 0
    lines = (out / "wiki.valid.tokens").read_text().splitlines(keepends=True)
    lines[3] = lines[3].replace(" ", "  ", 2)  # a double space in a paragraph line
    (out / "wiki.valid.tokens").write_text("".join(lines))
    capsys.readouterr()
    assert main(["validate", str(out)]) == 1
    report = capsys.readouterr().out.splitlines()
    assert report and all(line.startswith(f"{out / 'wiki.valid.tokens'}:4: ") for line in report)
    assert main(["validate", str(tmp_path / "folder")]) == 2


def test_network_loss_stops_with_one_line_error_and_the_rerun_resumes(
    reference, tmp_path: Path, capsys
) -> None:
    _, expected = reference
    out = tmp_path / "lost"
    wiki = make_wiki(outage_from_batch=3)
    with FakeMediaWikiServer(wiki) as server:
        assert build(server.url, out, "--batch-size", "5", "--max-attempts", "2") == 2
        retrying, error = capsys.readouterr().err.splitlines()
        assert retrying == (
            f"retrying: MediaWiki API at {server.url}: HTTP 503; up to 1 more attempt over "
            "about 0.01 s (--max-attempts, --retry-backoff)"
        )
        assert error == f"error: MediaWiki API at {server.url} unreachable after 2 attempts: HTTP 503"
        committed = set("|".join(wiki.batches()[:2]).split("|"))
        wiki.outage_from_batch = None
        del wiki.log[:]
        assert build(server.url, out, "--batch-size", "5") == 0
    assert outputs(out) == outputs(expected)
    assert not set("|".join(wiki.batches()).split("|")) & committed


def test_interrupted_listing_resumes_from_its_continuation(reference, tmp_path: Path, capsys) -> None:
    _, expected = reference
    out = tmp_path / "listing"
    wiki = make_wiki(faults={2: "503"})  # the second categorymembers response never comes
    with FakeMediaWikiServer(wiki) as server:
        assert build(server.url, out, "--batch-size", "5", "--max-attempts", "1") == 2
        assert "unreachable after 1 attempts: HTTP 503" in capsys.readouterr().err
        wiki.faults = {}
        del wiki.log[:]
        assert build(server.url, out, "--batch-size", "5") == 0
    assert wiki.log[0]["cmtitle"] == "Category:Featured articles" and wiki.log[0]["cmcontinue"] == "page|3"
    assert outputs(out) == outputs(expected)


def test_render_command_prints_the_article(tmp_path: Path, capsys) -> None:
    from wikitext_builder.render import render_article

    path = write_folder(tmp_path / "folder", 1) / "Town_A00.wikitext"
    assert main(["render", "--title", "Town A00", str(path)]) == 0
    assert capsys.readouterr().out == render_article("Town A00", path.read_text())
    (tmp_path / "bad.wikitext").write_text("{{Infobox town|name=x\n")
    assert main(["render", str(tmp_path / "bad.wikitext")]) == 2
    assert capsys.readouterr().err.startswith("error: ")


def test_stats_command_reproduces_table_1_on_wikitext_2(real_data_dir: Path, capsys) -> None:
    assert main(["stats", str(real_data_dir / "wikitext-2"), "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["tokens"] == {"train": 2_088_628, "valid": 217_646, "test": 245_569}
    assert stats["articles"] == {"train": 600, "valid": 60, "test": 60}
    assert stats["vocabulary_size"] == 33_278 and round(stats["unk_rate"]["train"], 3) == 0.026


def test_unk_mapping_keeps_heading_markers() -> None:
    from wikitext_builder.corpus import _map_line

    vocabulary = {"the", "river"}
    assert _map_line(" = = The river = = \n", vocabulary) == " = = <unk> river = = \n"
    assert _map_line(" = Rare = \n", set()) == " = <unk> = \n"
    assert _map_line(" x = the \n", vocabulary) == " <unk> <unk> the \n"
    assert _map_line(" = = \n", set()) == " <unk> <unk> \n"  # not a heading: nothing between
    assert _map_line(" \n", vocabulary) == " \n"


@pytest.mark.parametrize(
    "arguments, expected",
    [
        (["--preset", "wikitext-2"], (720, 60, 60)),
        (["--preset", "wikitext-103"], (28_595, 60, 60)),
        (["--preset", "wikitext-2", "--valid-articles", "10", "--limit", "100"], (100, 10, 60)),
        ([], (None, 60, 60)),
    ],
)
def test_presets_set_sizes_that_options_override(arguments, expected) -> None:
    from wikitext_builder.cli import _plan_from_args, build_parser

    plan = _plan_from_args(build_parser().parse_args(["build", *arguments]))
    assert (plan.limit, plan.valid_articles, plan.test_articles) == expected
