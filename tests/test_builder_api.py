"""The MediaWiki API client against a real HTTP server on 127.0.0.1 replaying API responses."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest
from builder_fixtures.fake_mediawiki import FakeMediaWikiServer, FakeWiki

from wikitext_builder.sources import PROJECT_URL, ApiError, ApiUnreachable, MediaWikiClient

REPO = Path(__file__).resolve().parent.parent


def listed(client: MediaWikiClient, category: str) -> list[str]:
    return [title for titles, _ in client.category_pages(category) for title in titles]


def make_client(url: str, sleeps: list[float] | None = None, **options) -> MediaWikiClient:
    record = sleeps if sleeps is not None else []
    options = {"backoff_base": 0.01, "timeout": 2.0, "sleep": record.append, **options}
    return MediaWikiClient(url, **options)


def test_category_listing_follows_continuation_with_etiquette() -> None:
    wiki = FakeWiki.with_articles(14, members_per_response=3)
    with FakeMediaWikiServer(wiki) as server:
        titles = listed(make_client(server.url), "Good articles")
    assert titles == sorted(wiki.categories["Good articles"])
    assert len(wiki.log) == 3  # 7 members, 3 per response
    for number, params in enumerate(wiki.log):
        assert params["list"] == "categorymembers" and params["cmtitle"] == "Category:Good articles"
        assert (params["cmnamespace"], params["cmlimit"], params["cmtype"]) == ("0", "max", "page")
        assert (params["format"], params["formatversion"], params["maxlag"]) == ("json", "2", "5")
        if number:  # every key of the previous `continue` object is passed back
            assert params["cmcontinue"] == f"page|{3 * number}" and params["continue"] == "-||"
    for headers in wiki.headers:
        assert PROJECT_URL in headers["User-Agent"] and headers["Accept-Encoding"] == "gzip"


def test_revisions_batch_resolves_redirects_normalization_missing_and_continuation() -> None:
    wiki = FakeWiki.with_articles(6, contents_per_response=2, redirects={"Old town": "Town C02"})
    requested = ["Town A00", "town_B01", "Old town", "Town D03", "No such town", "Town F05"]
    with FakeMediaWikiServer(wiki) as server:
        batch = make_client(server.url).fetch_titles(requested)
    assert set(batch.found) == {"Town A00", "town_B01", "Old town", "Town D03", "Town F05"}
    assert batch.found["town_B01"].title == "Town B01"
    assert batch.found["Old town"].title == "Town C02"
    assert batch.missing == {"No such town": "missing page"}
    page = wiki.pages["Town D03"]
    article = batch.found["Town D03"]
    assert (article.page_id, article.revision_id, article.timestamp, article.wikitext) == (
        page.page_id,
        page.revision_id,
        page.timestamp,
        page.wikitext,
    )
    params = wiki.revision_requests()
    assert len(params) == 3  # 5 pages with content, 2 per response: rvcontinue twice
    assert [p.get("rvcontinue") for p in params] == [None, "2", "4"]
    assert all(p["continue"] == "||" for p in params[1:])
    first = params[0]
    assert first["titles"] == "|".join(requested) and first["redirects"] == "1"
    assert (first["rvprop"], first["rvslots"]) == ("ids|timestamp|content", "main")


def test_revisions_by_id_report_unknown_revisions() -> None:
    wiki = FakeWiki.with_articles(3)
    with FakeMediaWikiServer(wiki) as server:
        batch = make_client(server.url).fetch_revisions([50_001, 99_999])
    assert batch.found["50001"].title == "Town B01" and batch.found["50001"].revision_id == 50_001
    assert batch.missing == {"99999": "revision not found"}
    assert wiki.log[0]["revids"] == "50001|99999" and "titles" not in wiki.log[0]


def test_more_than_fifty_titles_is_refused_before_any_request() -> None:
    with pytest.raises(ValueError, match="at most 50"):
        MediaWikiClient("http://127.0.0.1:9/").fetch_titles([f"T{i}" for i in range(51)])


def test_transient_failures_are_retried_honouring_retry_after() -> None:
    wiki = FakeWiki.with_articles(
        4, faults={1: "429", 2: "maxlag", 3: "500", 4: "503", 5: "drop", 6: "slow"}, slow_seconds=1.0
    )
    sleeps: list[float] = []
    with FakeMediaWikiServer(wiki) as server:
        titles = listed(make_client(server.url, sleeps, timeout=0.3), "Good articles")
    assert titles == sorted(wiki.categories["Good articles"])
    # Retry-After of the 429 (3 s) and of the maxlag error (5 s), then doubling backoff from 0.01 s
    assert sleeps == pytest.approx([3.0, 5.0, 0.04, 0.08, 0.16, 0.32])
    assert len(wiki.log) == 7


@pytest.mark.parametrize("retry_after", ["inf", "nan", "Wed, 21 Oct 2026 07:28:00 GMT"])
def test_a_retry_after_that_is_no_number_of_seconds_falls_back_to_the_backoff(retry_after: str) -> None:
    wiki = FakeWiki.with_articles(2, faults={1: "429"}, retry_after_429=retry_after)
    sleeps: list[float] = []
    with FakeMediaWikiServer(wiki) as server:
        titles = listed(make_client(server.url, sleeps), "Good articles")
    assert titles == sorted(wiki.categories["Good articles"])
    assert sleeps == pytest.approx([0.01])  # the first backoff, as without a Retry-After


def test_backoff_is_capped() -> None:
    wiki = FakeWiki.with_articles(2, faults={n: "500" for n in range(1, 6)})
    sleeps: list[float] = []
    with FakeMediaWikiServer(wiki) as server:
        listed(make_client(server.url, sleeps, backoff_cap=0.05), "Good articles")
    assert sleeps == pytest.approx([0.01, 0.02, 0.04, 0.05, 0.05])


def test_unreachable_api_gives_one_line_error_after_bounded_attempts() -> None:
    wiki = FakeWiki.with_articles(2, faults={n: "503" for n in range(1, 10)})
    with FakeMediaWikiServer(wiki) as server, pytest.raises(ApiUnreachable) as caught:
        listed(make_client(server.url, max_attempts=3), "Good articles")
    assert str(caught.value) == f"MediaWiki API at {server.url} unreachable after 3 attempts: HTTP 503"
    assert len(wiki.log) == 3


def test_connection_refused_after_the_api_answered_is_retried_then_reported() -> None:
    sleeps: list[float] = []
    with FakeMediaWikiServer(FakeWiki.with_articles(2)) as server:
        client = make_client(server.url, sleeps, max_attempts=2)
        listed(client, "Good articles")
    with pytest.raises(ApiUnreachable, match=r"unreachable after 2 attempts: ConnectionError") as caught:
        client.query({"list": "categorymembers"})
    assert "\n" not in str(caught.value) and sleeps == [0.01]


def test_connection_refused_before_any_answer_is_not_retried_and_names_local_sources() -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}/w/api.php"
    sleeps: list[float] = []
    with pytest.raises(ApiUnreachable) as caught:
        make_client(url, sleeps).query({"list": "categorymembers"})  # 8 attempts by default
    assert sleeps == []
    message = str(caught.value)
    assert message.startswith(f"cannot reach the MediaWiki API at {url} (ConnectionError: [Errno ")
    assert "\n" not in message
    for option in ("--folder DIR", "--jsonl FILE", "--dump FILE", "--sample"):
        assert option in message


def test_api_errors_other_than_maxlag_are_not_retried() -> None:
    wiki = FakeWiki.with_articles(2)
    with FakeMediaWikiServer(wiki) as server, pytest.raises(ApiError, match="badvalue"):
        make_client(server.url).query({"list": "nonsense"})
    assert len(wiki.log) == 1


def recorded_api() -> Path:
    root = Path(os.environ.get("WIKITEXT_SHARED_DIR") or REPO.parent / "shared") / "wikipedia" / "api"
    if not root.is_dir():
        pytest.skip(f"recorded API responses not found at {root} (set WIKITEXT_SHARED_DIR)")
    return root


def test_real_recorded_categorymembers_response_is_understood() -> None:
    """A real (formatversion=1) response: pages of other namespaces are left out."""
    cassette = json.loads(
        (
            recorded_api() / "Wikipedia-API" / "TestVcrWikiCategorymembers.test_categorymembers.json"
        ).read_text()
    )
    body = json.loads(cassette["interactions"][0]["response"]["body"]["string"])
    wiki = FakeWiki(pages={}, categories={}, recorded=[body])
    with FakeMediaWikiServer(wiki) as server:
        titles = listed(make_client(server.url), "Physics")
    members = body["query"]["categorymembers"]
    assert titles == [m["title"] for m in members if m["ns"] == 0] and "Physics" in titles
    assert "Portal:Physics" not in titles and len(titles) < len(members)


def test_real_recorded_revisions_response_is_understood() -> None:
    """A real legacy response (content under ``*``, pages keyed by id, title normalized, an
    unrelated ``continue`` followed with every key passed back)."""
    body = json.loads((recorded_api() / "kenpratt-wikipedia-client" / "Sealand_Dynasty.json").read_text())
    wiki = FakeWiki(pages={}, categories={}, recorded=[body, {"batchcomplete": "", "query": {"pages": {}}}])
    with FakeMediaWikiServer(wiki) as server:
        batch = make_client(server.url).fetch_titles(["Sealand_Dynasty"])
    article = batch.found["Sealand_Dynasty"]
    assert article.title == "Sealand Dynasty" and article.page_id == 27746595
    assert article.wikitext.startswith("The '''Sealand Dynasty'''")
    assert {key: wiki.log[1][key] for key in body["continue"]} == body["continue"]
