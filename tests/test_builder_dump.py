"""MediaWiki XML dumps: a small hand-made one for exact assertions, and the real dumps."""

from __future__ import annotations

import bz2
import os
import tracemalloc
from pathlib import Path

import pytest

from wikitext_builder.cli import main
from wikitext_builder.sources import SourceError, has_marker, iter_dump

REPO = Path(__file__).resolve().parent.parent

PAGE = """  <page>
    <title>{title}</title>
    <ns>{ns}</ns>
    <id>{page_id}</id>{redirect}
    <revision>
      <id>{revision_id}</id>
      <parentid>1</parentid>
      <timestamp>2016-04-0{page_id}T10:00:00Z</timestamp>
      <contributor><username>Someone</username><id>7</id></contributor>
      <model>wikitext</model>
      <format>text/x-wiki</format>
      <text bytes="100" xml:space="preserve">{text}</text>
      <sha1>abc</sha1>
    </revision>
  </page>
"""
HEADER = (
    '<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.11/" '
    'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" version="0.11" xml:lang="en">\n'
    '  <siteinfo><sitename>Wikipedia</sitename><namespaces><namespace key="0" case="first-letter" />'
    "</namespaces></siteinfo>\n"
)
BODY = (
    "'''{title}''' is a river in the north.&lt;ref&gt;A source&lt;/ref&gt; It is 12.5 km long."
    "\n\n== Course ==\nIt flows east."
)


def page(
    title: str,
    page_id: int,
    marker: str = "{{Good article}}",
    ns: int = 0,
    redirect: str = "",
    text: str | None = None,
) -> str:
    body = text if text is not None else f"{marker}\n" + BODY.format(title=title)
    return PAGE.format(
        title=title,
        ns=ns,
        page_id=page_id,
        revision_id=1000 + page_id,
        redirect=f'\n    <redirect title="{redirect}" />' if redirect else "",
        text=body,
    )


def hand_made_dump() -> str:
    return (
        HEADER
        + "".join(
            [
                page("Good river", 1),
                page("Featured river", 2, marker="{{featured article}}"),
                page("Plain river", 3, marker=""),
                page("Talk:Good river", 4, ns=1),
                page("Old river", 5, redirect="Good river", text="#REDIRECT [[Good river]] {{Good article}}"),
                page("Spaced river", 6, marker="{{ Good_article }}"),
                page("Mentions river", 7, marker="See {{Good article nominee}}."),
            ]
        )
        + "</mediawiki>\n"
    )


@pytest.fixture(params=["xml", "xml.bz2"])
def dump_file(request, tmp_path: Path) -> Path:
    data = hand_made_dump().encode("utf-8")
    path = tmp_path / f"dump.{request.param}"
    path.write_bytes(bz2.compress(data) if request.param.endswith("bz2") else data)
    return path


def test_selects_marked_articles_of_namespace_zero(dump_file: Path) -> None:
    articles = list(iter_dump(dump_file, ("good", "featured")))
    assert [a.title for a in articles] == ["Good river", "Featured river", "Spaced river"]
    first = articles[0]
    assert (first.page_id, first.revision_id, first.timestamp) == (1, 1001, "2016-04-01T10:00:00Z")
    assert first.wikitext.startswith("{{Good article}}\n'''Good river''' is a river in the north.<ref>")
    assert [a.title for a in iter_dump(dump_file, ("featured",))] == ["Featured river"]


def test_marker_matching() -> None:
    assert has_marker("{{Good article}}", ["good"]) and has_marker("{{good article|x}}", ["good"])
    assert not has_marker("{{Good article nominee}}", ["good"])
    assert not has_marker("{{Featured article}}", ["good"]) and has_marker(
        "{{featured_article}}", ["featured"]
    )


@pytest.mark.parametrize("declaration", ["", '<?xml version="1.0" encoding="utf-8"?>\n'])
def test_bare_run_of_pages_is_read(declaration: str, tmp_path: Path) -> None:
    path = tmp_path / "pages.xml"
    path.write_text(declaration + page("Good river", 1) + page("Plain river", 3, marker=""), encoding="utf-8")
    assert [a.title for a in iter_dump(path, ("good",))] == ["Good river"]


def test_broken_xml_is_a_one_line_error(tmp_path: Path) -> None:
    path = tmp_path / "broken.xml.bz2"
    path.write_bytes(bz2.compress((HEADER + page("Good river", 1))[:-40].encode()))
    with pytest.raises(SourceError, match=r"broken.xml.bz2: not a readable MediaWiki XML dump") as caught:
        list(iter_dump(path, ("good",)))
    assert "\n" not in str(caught.value)


def test_memory_stays_flat_while_streaming(tmp_path: Path) -> None:
    """Parsing 4x more pages must not take 4x more memory (each page is cleared once read)."""

    def peak(pages: int) -> int:
        path = tmp_path / f"dump{pages}.xml"
        path.write_text(
            HEADER
            + "".join(
                page(f"River {i}", i % 9 + 1, text="x" * 20_000 + "{{Good article}}") for i in range(pages)
            )
            + "</mediawiki>\n",
            encoding="utf-8",
        )
        tracemalloc.start()
        count = sum(1 for _ in iter_dump(path, ("good",)))
        peak_bytes = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert count == pages
        return peak_bytes

    small, large = peak(100), peak(400)
    assert large < small * 1.5, (small, large)


def shared_dumps() -> Path:
    root = Path(os.environ.get("WIKITEXT_SHARED_DIR") or REPO.parent / "shared") / "wikipedia" / "dumps"
    if not root.is_dir():
        pytest.skip(f"real dumps not found at {root} (set WIKITEXT_SHARED_DIR)")
    return root


@pytest.mark.parametrize(
    "name, expected",
    [
        (
            "gensim__enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2",
            {
                "Anarchism",
                "Autism",
                "Abraham Lincoln",
                "Ayn Rand",
                "Amphibian",
                "Apollo 11",
                "Apollo 8",
                "Alkali metal",
                "Anatomy",
                "Albert Einstein",
                "Azerbaijan",
                "Aikido",
            },
        ),
        ("SoothingDuck__enwiki-test.xml.bz2", {"Anarchism", "Autism", "Abraham Lincoln", "Aristotle"}),
        ("mathosphere__wikienmathsample.xml", {"Alkali metal", "Actinium", "Americium", "Atom"}),
        ("dkpro-jwpl__aawiki-20260101-pages-meta-current.xml.bz2", set()),
    ],
)
def test_real_dumps_select_their_good_and_featured_articles(name: str, expected: set[str]) -> None:
    articles = list(iter_dump(shared_dumps() / name, ("good", "featured")))
    assert {article.title for article in articles} == expected
    assert all(article.revision_id and article.page_id and article.timestamp for article in articles)


def test_build_from_a_real_dump_passes_validate(tmp_path: Path, capsys) -> None:
    dump = shared_dumps() / "mathosphere__wikienmathsample.xml"
    out = tmp_path / "corpus"
    assert (
        main(
            [
                "--dump",
                str(dump),
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
    assert main(["validate", str(out)]) == 0
    manifest = (out / "manifest.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(manifest) == 4 and all('"revision_id": 5' in line for line in manifest)
