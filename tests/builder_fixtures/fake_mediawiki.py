"""A MediaWiki Action API stand-in on 127.0.0.1 for the builder's tests.

It answers ``list=categorymembers`` and ``prop=revisions`` (by titles or revids) in the
``formatversion=2`` shapes of the real API (see ``../shared/wikipedia/api/``), paginated so that
continuation is exercised, gzip-compressed when asked, and can inject faults: 429 with
``Retry-After``, ``maxlag`` errors (HTTP 200 with a ``Retry-After``), 500/503, a connection dropped
mid-response, a response slower than the client's timeout, and a block (the test is signalled and
the request waits) used to kill a build mid-way. Every request is logged.
"""

from __future__ import annotations

import gzip
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

CONTINUE_MARK = "||"


@dataclass
class Page:
    page_id: int
    revision_id: int
    timestamp: str
    wikitext: str


def article_text(title: str, index: int) -> str:
    """A short, varied Good-article-like wikitext."""
    return (
        f"{{{{Good article}}}}\n{{{{Infobox place|name={title}|population={index * 1000}}}}}\n"
        f"'''{title}''' is a small town in the north of the county, on the river "
        f"[[Avon|the Avon]].<ref>{{{{cite web|title=Census}}}}</ref> It had "
        f"{index * 1234 + 5:,} people in {1900 + index}.\n\n"
        f"== History ==\nThe town was founded in the {index + 10}th century and grew "
        f"around its market. Its church is a well-known landmark.\n\n"
        f"== Geography ==\nThe town lies {index + 2}.{index} km from the coast, "
        f"next to the old road.\n\n== References ==\n{{{{reflist}}}}\n"
    )


def write_folder(directory: Path, count: int) -> Path:
    """A ``--folder`` source: ``count`` articles "Town A00", "Town B01", ... (``article_text``)."""
    directory.mkdir()
    for index in range(count):
        title = f"Town {chr(65 + index % 26)}{index:02d}"
        (directory / f"{title.replace(' ', '_')}.wikitext").write_text(article_text(title, index))
    return directory


@dataclass
class FakeWiki:
    """The wiki's content, its pagination sizes, and the faults to inject by request number."""

    pages: dict[str, Page]
    categories: dict[str, list[str]]
    redirects: dict[str, str] = field(default_factory=dict)
    members_per_response: int = 3
    contents_per_response: int = 4
    faults: dict[int, str] = field(default_factory=dict)  # request number (1-based) -> fault
    block_at_batch: int | None = None  # the first request of the Nth revisions batch blocks
    outage_from_batch: int | None = None  # revisions requests from the Nth batch on get 503
    recorded: list[dict[str, Any]] = field(default_factory=list)  # bodies to replay first, in order
    slow_seconds: float = 1.0
    retry_after_429: str = "3"
    retry_after_maxlag: str = "5"
    log: list[dict[str, str]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    blocked: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def with_articles(cls, count: int, **options: Any) -> FakeWiki:
        titles = [f"Town {chr(65 + index % 26)}{index:02d}" for index in range(count)]
        pages = {
            title: Page(
                1000 + index,
                50_000 + index,
                f"2024-01-{index % 28 + 1:02d}T12:00:00Z",
                article_text(title, index),
            )
            for index, title in enumerate(titles)
        }
        half = count // 2
        return cls(
            pages=pages,
            categories={"Good articles": titles[:half], "Featured articles": titles[half:]},
            **options,
        )

    def revision_requests(self) -> list[dict[str, str]]:
        return [params for params in self.log if params.get("prop") == "revisions"]

    def batches(self) -> list[str]:
        """The distinct batches (``titles`` or ``revids`` values) of the revisions requests."""
        return list(dict.fromkeys(p.get("titles") or p.get("revids", "") for p in self.revision_requests()))

    # --- answers ------------------------------------------------------------------------------
    def answer(self, params: dict[str, str]) -> dict[str, Any]:
        if self.recorded:
            return self.recorded.pop(0)
        if params.get("list") == "categorymembers":
            return self._members(params)
        if params.get("prop") == "revisions":
            return self._revisions(params)
        return {"error": {"code": "badvalue", "info": "Unrecognized parameters."}}

    def _members(self, params: dict[str, str]) -> dict[str, Any]:
        category = params["cmtitle"].removeprefix("Category:")
        titles = sorted(self.categories.get(category, []))
        start = int(params.get("cmcontinue", "page|0").split("|")[1])
        chunk = titles[start : start + self.members_per_response]
        members = [
            {"pageid": self.pages[title].page_id if title in self.pages else 1, "ns": 0, "title": title}
            for title in chunk
        ]
        data: dict[str, Any] = {"query": {"categorymembers": members}}
        if start + len(chunk) < len(titles):
            data["continue"] = {"cmcontinue": f"page|{start + len(chunk)}", "continue": "-" + CONTINUE_MARK}
        else:
            data["batchcomplete"] = True
        return data

    def _revisions(self, params: dict[str, str]) -> dict[str, Any]:
        query: dict[str, Any] = {}
        if "revids" in params:
            by_revision = {page.revision_id: title for title, page in self.pages.items()}
            revision_ids = [int(value) for value in params["revids"].split("|")]
            targets = [by_revision[r] for r in revision_ids if r in by_revision]
            bad = [r for r in revision_ids if r not in by_revision]
            if bad:
                query["badrevids"] = {str(r): {"revid": r, "missing": True} for r in bad}
        else:
            targets = []
            for requested in params["titles"].split("|"):
                title = requested.replace("_", " ")
                title = title[:1].upper() + title[1:]
                if title != requested:
                    query.setdefault("normalized", []).append(
                        {"fromencoded": False, "from": requested, "to": title}
                    )
                if title in self.redirects:
                    query.setdefault("redirects", []).append({"from": title, "to": self.redirects[title]})
                    title = self.redirects[title]
                if title not in targets:
                    targets.append(title)
        start = int(params.get("rvcontinue", "0"))
        with_content = [title for title in targets if title in self.pages][
            start : start + self.contents_per_response
        ]
        pages = []
        for title in targets:
            if title not in self.pages:
                pages.append({"ns": 0, "title": title, "missing": True})
                continue
            page = self.pages[title]
            entry: dict[str, Any] = {"pageid": page.page_id, "ns": 0, "title": title}
            if title in with_content:
                entry["revisions"] = [
                    {
                        "revid": page.revision_id,
                        "parentid": page.revision_id - 7,
                        "timestamp": page.timestamp,
                        "slots": {
                            "main": {
                                "contentmodel": "wikitext",
                                "contentformat": "text/x-wiki",
                                "content": page.wikitext,
                            }
                        },
                    }
                ]
            pages.append(entry)
        query["pages"] = pages
        data: dict[str, Any] = {"query": query}
        present = [title for title in targets if title in self.pages]
        if start + self.contents_per_response < len(present):
            data["continue"] = {
                "rvcontinue": str(start + self.contents_per_response),
                "continue": CONTINUE_MARK,
            }
        else:
            data["batchcomplete"] = True
        return data


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    wiki: FakeWiki

    def log_message(self, *args: Any) -> None:  # keep the test output quiet
        pass

    def do_GET(self) -> None:  # noqa: N802 - the http.server API
        params = {key: values[-1] for key, values in parse_qs(urlsplit(self.path).query).items()}
        wiki = self.wiki
        with wiki.lock:
            wiki.log.append(params)
            wiki.headers.append(dict(self.headers))
            number = len(wiki.log)
            fault = wiki.faults.get(number)
            is_revisions = params.get("prop") == "revisions"
            starts_batch = is_revisions and "rvcontinue" not in params
            batches_seen = len(wiki.batches())
            if is_revisions and wiki.outage_from_batch is not None and batches_seen >= wiki.outage_from_batch:
                fault = "503"
        if starts_batch and wiki.block_at_batch == batches_seen:
            wiki.blocked.set()
            wiki.release.wait(30)
            self.close_connection = True
            return
        if fault == "429":
            return self._send(429, {"error": "Too many requests"}, {"Retry-After": wiki.retry_after_429})
        if fault in ("500", "503"):
            return self._send(int(fault), {"error": "Server error"}, {})
        if fault == "maxlag":
            return self._send(
                200,
                {
                    "error": {
                        "code": "maxlag",
                        "info": "Waiting for 10.64.48.35: 7 seconds lagged.",
                        "host": "10.64.48.35",
                        "lag": 7,
                    }
                },
                {"Retry-After": wiki.retry_after_maxlag, "X-Database-Lag": "7"},
            )
        if fault == "slow":
            time.sleep(wiki.slow_seconds)
        body = wiki.answer(params)
        if fault == "drop":
            return self._drop(body)
        self._send(200, body, {})

    def _encode(self, body: dict[str, Any]) -> tuple[bytes, dict[str, str]]:
        data = json.dumps(body).encode("utf-8")
        if "gzip" in self.headers.get("Accept-Encoding", ""):
            return gzip.compress(data), {"Content-Encoding": "gzip"}
        return data, {}

    def _send(self, status: int, body: dict[str, Any], headers: dict[str, str]) -> None:
        data, extra = self._encode(body)
        self.send_response(status)
        for name, value in {"Content-Type": "application/json; charset=utf-8", **extra, **headers}.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _drop(self, body: dict[str, Any]) -> None:
        """Announce the whole body, send half of it, and close the connection."""
        data, extra = self._encode(body)
        self.send_response(200)
        for name, value in {"Content-Type": "application/json; charset=utf-8", **extra}.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data[: len(data) // 2])
        self.wfile.flush()
        self.close_connection = True


class FakeMediaWikiServer:
    """Serves a :class:`FakeWiki` on 127.0.0.1 (a free port) from a background thread."""

    def __init__(self, wiki: FakeWiki) -> None:
        handler = type("Handler", (_Handler,), {"wiki": wiki})
        self.wiki = wiki
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/w/api.php"

    def __enter__(self) -> FakeMediaWikiServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wiki.release.set()
        self.server.shutdown()
        self.server.server_close()
