"""``python -m wikitext_builder --exclude-overlap NAME[:SPLITS]``: the builder drops the articles
that overlap a benchmark's articles, names them in ``stats.json`` and ``manifest.jsonl``, keeps
the split sizes asked for, reproduces the exclusion from its manifest, and without the option
writes what it wrote before."""

from __future__ import annotations

import json
import lzma
import re
import subprocess
import sys
from pathlib import Path

import pytest
from builder_fixtures.fake_mediawiki import FakeMediaWikiServer, FakeWiki, Page, write_folder
from conftest import assert_one_line_error

from wikitext_builder.cli import main
from wikitext_builder.corpus import OUTPUT_FILES, TEXT_FILES, article_order
from wikitext_toolkit_core.benchmarks import COMPRESSED_SUFFIX, PACKAGED_DATA

REPO = Path(__file__).resolve().parent.parent
PLANTED = "Du Fu"  # a WikiText-2 test article, 4,833 tokens
SPLIT_SIZES = ["--valid-articles", "1", "--test-articles", "1", "--min-count", "1", "--quiet"]


def wikitext2_article(title: str, split: str = "test") -> list[str]:
    """The lines of one article of the packaged WikiText-2 ``split``, its title line first."""
    path = PACKAGED_DATA / "wikitext-2" / f"wiki.{split}.tokens{COMPRESSED_SUFFIX}"
    lines = lzma.open(path, "rt", encoding="utf-8").read().split("\n")
    start = lines.index(f" = {title} = ")
    end = next(
        index
        for index in range(start + 2, len(lines) - 1)
        if re.fullmatch(r" = [^=].* = ", lines[index]) and lines[index - 1] == lines[index + 1] == " "
    )
    return lines[start:end]


def detokenized_wikitext(lines: list[str]) -> str:
    """A WikiText article (without its title line) as a Wikipedia editor would write it: the
    ``@-@`` splits and the tokenisation undone, ``= = H = =`` headings as ``== H ==``, and each
    ``<unk>`` spelled out (as a word the benchmark's vocabulary lacked)."""
    out = []
    for line in lines[1:]:
        tokens = ["Qarluq" if token == "<unk>" else token for token in line.split()]
        level = next((i for i, token in enumerate(tokens) if token != "="), 0)
        words = tokens[level : len(tokens) - level]
        text = " ".join(words)
        for split, joined in ((" @-@ ", "-"), (" @,@ ", ","), (" @.@ ", ".")):
            text = text.replace(split, joined)
        text = re.sub(r" ([.,;:?!)]|'s\b|n't\b)", r"\1", text).replace("( ", "(")
        out.append(f"{'=' * level} {text} {'=' * level}" if level else text)
    return "\n\n".join(line for line in out if line) + "\n"


def titles_first(titles: list[str], first: str) -> int:
    """A seed whose article order starts with ``first`` (so it would be the valid article)."""
    return next(seed for seed in range(1000) if article_order(titles, seed)[0] == first)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """Six small town articles and the detokenised WikiText-2 test article ``Du Fu``."""
    directory = write_folder(tmp_path / "articles", 6)
    (directory / "Du_Fu.wikitext").write_text(detokenized_wikitext(wikitext2_article(PLANTED)))
    return directory


def build(folder: Path, out: Path, *extra: str) -> int:
    titles = [path.stem.replace("_", " ") for path in folder.glob("*.wikitext")]
    seed = str(titles_first(titles, PLANTED))
    return main(["--folder", str(folder), "--output-dir", str(out), "--seed", seed, *SPLIT_SIZES, *extra])


def manifest(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "manifest.jsonl").read_text().splitlines()]


def test_the_planted_benchmark_article_is_dropped_and_named(folder: Path, tmp_path: Path, capsys) -> None:
    assert build(folder, tmp_path / "plain") == 0
    assert [r["title"] for r in manifest(tmp_path / "plain") if r["split"] == "valid"] == [PLANTED]
    assert build(folder, tmp_path / "out", "--exclude-overlap", "wikitext-2") == 0
    out = tmp_path / "out"
    stats = json.loads((out / "stats.json").read_text())
    (dropped,) = stats["builder"]["skipped"]
    assert dropped["title"] == PLANTED and dropped["reason"] == "benchmark overlap"
    (overlap,) = dropped["overlaps"]
    assert overlap["benchmark"] == "wikitext-2" and overlap["split"] == "test"
    assert overlap["article"] == PLANTED and overlap["overlap"] >= 0.9
    assert "wikitext-2/test article 'Du Fu'" in dropped["detail"]
    assert stats["builder"]["skipped_counts"] == {"benchmark overlap": 1}
    settings = stats["builder"]["settings"]["exclude_overlap"]
    assert settings["benchmarks"] == ["wikitext-2:valid,test"] and settings["threshold"] == 0.2
    assert sorted(settings["sha256"]) == ["wikitext-2/test", "wikitext-2/valid"]
    # every town is kept, and valid and test keep the sizes asked for
    assert stats["articles"] == {"train": 4, "valid": 1, "test": 1}
    records = manifest(out)
    assert sorted(r["title"] for r in records[:-1]) == [f"Town {chr(65 + i)}{i:02d}" for i in range(6)]
    assert records[-1]["title"] == PLANTED and records[-1]["split"] == "excluded"
    assert records[-1]["overlaps"] == dropped["overlaps"] and records[-1]["threshold"] == 0.2
    corpus = "".join((out / name).read_text() for name in TEXT_FILES)
    assert "Tang dynasty" not in corpus and "Town A00" in corpus
    assert "skipped 1 article (1 benchmark overlap)" in capsys.readouterr().err


def test_a_benchmark_directory_and_chosen_splits(folder: Path, tmp_path: Path, real_data_dir: Path) -> None:
    benchmark = real_data_dir / "wikitext-2"
    assert build(folder, tmp_path / "valid-only", "--exclude-overlap", f"{benchmark}:valid") == 0
    assert json.loads((tmp_path / "valid-only" / "stats.json").read_text())["builder"]["skipped"] == []
    assert build(folder, tmp_path / "out", "--exclude-overlap", f"{benchmark}:valid,test") == 0
    stats = json.loads((tmp_path / "out" / "stats.json").read_text())
    assert [s["title"] for s in stats["builder"]["skipped"]] == [PLANTED]
    assert stats["builder"]["settings"]["exclude_overlap"]["benchmarks"] == [
        f"{benchmark.resolve()}:valid,test"
    ]


def test_without_the_option_the_output_is_unchanged(tmp_path: Path) -> None:
    """Nothing overlaps: the corpus with the check is the corpus without it, byte for byte, but
    for the settings that stats.json records; without the option, no check is loaded at all."""
    folder = write_folder(tmp_path / "towns", 6)
    plain, checked = tmp_path / "plain", tmp_path / "checked"
    assert main(["--folder", str(folder), "--output-dir", str(plain), *SPLIT_SIZES]) == 0
    assert (
        main(
            [
                "--folder",
                str(folder),
                "--output-dir",
                str(checked),
                *SPLIT_SIZES,
                "--exclude-overlap",
                "wikitext-2",
            ]
        )
        == 0
    )
    for name in OUTPUT_FILES:
        if name != "stats.json":
            assert (plain / name).read_bytes() == (checked / name).read_bytes(), name
    stats = json.loads((checked / "stats.json").read_text())
    del stats["builder"]["settings"]["exclude_overlap"]
    assert stats == json.loads((plain / "stats.json").read_text())
    assert "exclude" not in (plain / "stats.json").read_text()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--exclude-overlap", "nosuch"], "--exclude-overlap nosuch: 'nosuch' is neither a benchmark"),
        (["--exclude-overlap", "wikitext-2:dev"], "--exclude-overlap wikitext-2:dev: unknown split 'dev'"),
        (["--exclude-overlap", "wikitext-2:valid,tset"], "'tset' is neither a benchmark"),
        (["--exclude-overlap", ":test"], "a benchmark name is missing"),
        (["--exclude-overlap", "ptb"], "--exclude-overlap ptb:valid: "),
        (["--exclude-threshold", "0.5"], "--exclude-threshold goes with --exclude-overlap"),
        (["--exclude-overlap", "wikitext-2", "--exclude-threshold", "0"], "must be greater than 0"),
        (["--exclude-overlap", "wikitext-2", "--exclude-threshold", "1.5"], "at most 1"),
    ],
)
def test_bad_values_are_one_line_errors_before_any_work(
    folder: Path, tmp_path: Path, capsys, options: list[str], message: str
) -> None:
    out = tmp_path / "out"
    assert build(folder, out, *options) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and message in err, err
    assert not out.exists()


def planted_wiki() -> FakeWiki:
    """Eight town articles and, as a Good article (revision 70000), the planted one."""
    wiki = FakeWiki.with_articles(8)
    text = detokenized_wikitext(wikitext2_article(PLANTED))
    wiki.pages[PLANTED] = Page(2000, 70_000, "2024-02-01T12:00:00Z", text)
    wiki.categories["Good articles"].append(PLANTED)
    return wiki


def test_a_rebuild_from_the_manifest_reproduces_the_exclusion(tmp_path: Path, capsys) -> None:
    """An API build drops the planted article; the rebuild from its manifest, without the
    option, neither fetches nor keeps it, names it again, and writes the same manifest."""
    wiki = planted_wiki()
    first, again = tmp_path / "first", tmp_path / "again"
    with FakeMediaWikiServer(wiki) as server:
        options = ["--api-url", server.url, "--quiet"]
        first_build = [*options, *SPLIT_SIZES, "--exclude-overlap", "wikitext-2:test"]
        assert main([*first_build, "--output-dir", str(first)]) == 0
        del wiki.log[:]
        assert (
            main([*options, "--output-dir", str(again), "--from-manifest", str(first / "manifest.jsonl")])
            == 0
        )
    assert manifest(first)[-1]["split"] == "excluded" and manifest(first)[-1]["revision_id"] == 70_000
    for name in (*TEXT_FILES, "SHA256SUMS", "manifest.jsonl"):
        assert (first / name).read_bytes() == (again / name).read_bytes(), name
    skipped = [json.loads((out / "stats.json").read_text())["builder"]["skipped"] for out in (first, again)]
    assert skipped[0] == skipped[1] and [s["title"] for s in skipped[0]] == [PLANTED]
    requested = "|".join(params.get("revids", "") for params in wiki.revision_requests())
    assert requested and "70000" not in requested


def test_sharded_builds_record_the_option_and_merge_applies_it(tmp_path: Path) -> None:
    wiki = planted_wiki()
    caches = []
    with FakeMediaWikiServer(wiki) as server:
        options = ["--api-url", server.url, *SPLIT_SIZES, "--exclude-overlap", "wikitext-2"]
        assert main([*options, "--output-dir", str(tmp_path / "whole")]) == 0
        for k in (1, 2):
            assert main([*options, "--output-dir", str(tmp_path / "shards"), "--shard", f"{k}/2"]) == 0
            caches.append(str(tmp_path / "shards" / f"cache.shard-{k}-of-2.sqlite"))
    assert main(["merge", "--output-dir", str(tmp_path / "merged"), "--quiet", *caches]) == 0
    for name in OUTPUT_FILES:
        assert (tmp_path / "whole" / name).read_bytes() == (tmp_path / "merged" / name).read_bytes(), name
    assert manifest(tmp_path / "merged")[-1]["title"] == PLANTED


def test_a_merge_never_overwrites_the_corpus_it_checks_against(folder: Path, tmp_path: Path, capsys) -> None:
    benchmark = tmp_path / "benchmark"
    assert (
        main(
            [
                "--folder",
                str(write_folder(tmp_path / "towns", 5)),
                "--output-dir",
                str(benchmark),
                *SPLIT_SIZES,
            ]
        )
        == 0
    )
    before = {path.name: path.read_bytes() for path in benchmark.iterdir() if path.is_file()}
    caches = []
    for k in (1, 2):
        assert (
            build(folder, tmp_path / "shards", "--exclude-overlap", str(benchmark), "--shard", f"{k}/2") == 0
        )
        caches.append(str(tmp_path / "shards" / f"cache.shard-{k}-of-2.sqlite"))
    capsys.readouterr()
    assert main(["merge", "--output-dir", str(benchmark), "--quiet", *caches]) == 2
    assert_one_line_error(capsys, f"--output-dir {benchmark}: would overwrite ", "an input of this command")
    assert {path.name: path.read_bytes() for path in benchmark.iterdir() if path.is_file()} == before


def test_a_build_with_the_check_imports_no_torch(folder: Path, tmp_path: Path) -> None:
    code = (
        "import sys; from wikitext_builder.cli import main; "
        f"status = main(['--folder', {str(folder)!r}, *{SPLIT_SIZES!r}, '--output-dir', *sys.argv[1:]]); "
        "print(status, 'torch' in sys.modules, 'wikitext_toolkit_core.ngrams' in sys.modules, "
        "any(name.partition('.')[0] == 'harness' for name in sys.modules))"
    )
    for out, extra, loaded in (
        (tmp_path / "a", [], "False"),
        (tmp_path / "b", ["--exclude-overlap", "wikitext-2"], "True"),
    ):
        result = subprocess.run(
            [sys.executable, "-c", code, str(out), *extra],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout.splitlines()[-1].split() == ["0", "False", loaded, "False"], result.stdout
