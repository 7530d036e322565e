"""Where articles come from: the MediaWiki API, an XML dump, a folder, or a JSON-lines pool.

Every source yields :class:`Article` records, and a :class:`Skipped` for each record it cannot
use (a pool record or dump page without a title, or with a field of the wrong type), so that
none is dropped silently and none is coerced. The API is a *listed* source: the
article list comes first (category members) and the content is then fetched in batches of titles
or revision ids, so that a build can commit batch after batch and resume. The offline sources are
*streamed*: they are read once, in order, and never held whole in memory; :func:`file_sha256` and
:func:`folder_sha256` key a cache to their content.
"""

from __future__ import annotations

import bz2
import gzip
import hashlib
import importlib.metadata
import io
import json
import math
import os
import re
import sys
import time
import xml.etree.ElementTree as ElementTree
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, cast

import requests

from wikitext_toolkit_core import bounded_json, files
from wikitext_toolkit_core.errors import ToolkitError

DEFAULT_API_URL = "https://en.wikipedia.org/w/api.php"
PROJECT_URL = "https://github.com/wikitext-toolkit/wikitext-toolkit"
try:
    _VERSION = importlib.metadata.version("wikitext-toolkit")
except importlib.metadata.PackageNotFoundError:  # a source tree that is not installed
    _VERSION = "0+unknown"
USER_AGENT = (
    f"wikitext-toolkit/{_VERSION} (wikitext_builder; {PROJECT_URL}) python-requests/{requests.__version__}"
)
BATCH_SIZE = 50  # titles or revision ids per request: the API's limit for ordinary clients
ARTICLE_KINDS = {"good": "Good articles", "featured": "Featured articles"}
POOL_CLASSES = {"good": "GA", "featured": "FA"}
_MARKER = re.compile(r"\{\{\s*(good|featured)[ _]article\s*(?:\||\}\})", re.IGNORECASE)
_REDIRECT = re.compile(r"\s*#redirect", re.IGNORECASE)
_RETRYABLE_STATUS = {429, 500, 502, 503, 504}
_OS_REASON = re.compile(r"\[Errno -?\d+\] [^'\")]+")
# what reading a damaged file raises: a truncated .gz/.bz2 (EOFError), a corrupt one (OSError,
# zlib.error), an unreadable one (OSError)
_READ_ERRORS = (EOFError, OSError, zlib.error)
#: The page and revision ids a cache can store (SQLite's INTEGER is 64-bit signed); others are malformed.
MAX_ID = 2**63 - 1
ID_RANGE = "an integer from 0 to 2^63-1"
_SURROGATE = re.compile("[\ud800-\udfff]")  # json.loads makes one of an unpaired \uD800 escape
#: The builder's packaged sample: a few real Good/Featured articles (``--sample``; see its README).
SAMPLE_DIR = Path(__file__).resolve().parent / "sample"
#: What an unreachable API's error suggests instead.
LOCAL_SOURCES = (
    "without the network, build from local articles with --folder DIR, --jsonl FILE or --dump FILE, "
    "or from the packaged sample with --sample"
)


class SourceError(ToolkitError):
    """An unreadable or malformed source (one-line message)."""


class ApiError(SourceError):
    """The API answered with an error that retrying cannot fix."""


class ApiUnreachable(SourceError):
    """The API kept failing (network, 429, 5xx, maxlag) for every allowed attempt, or could not
    be connected to before it had ever answered."""


@dataclass(frozen=True)
class Article:
    """One page's wikitext and its provenance (ids and timestamp are None when unknown)."""

    title: str
    wikitext: str
    page_id: int | None = None
    revision_id: int | None = None
    timestamp: str | None = None


@dataclass(frozen=True)
class Overlap:
    """How much of one benchmark article an article of the corpus holds: the share ``overlap``
    of the checked n-grams of ``article`` (its title as in the benchmark's ``split``) that it
    contains (``--exclude-overlap``, :mod:`wikitext_builder.overlap`)."""

    benchmark: str
    split: str
    article: str
    overlap: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Skipped:
    """An article left out of the corpus, named by its ``title`` or, for a source record without
    one, by ``record`` (``FILE:LINE``, or ``FILE:page N`` in a dump); ``reason`` is one of a few
    fixed phrases (``"no title"``, ``"duplicate title"``, ``"malformed record"``, ``"malformed
    page"``, ``"missing page"``, ``"too large"``, ``"malformed markup"``, ``"benchmark
    overlap"``, ...), by which ``stats.json`` counts them, ``detail`` says more where there is
    more to say, and ``overlaps`` names the benchmark articles an excluded article overlaps."""

    reason: str
    title: str | None = None
    record: str | None = None
    detail: str = ""
    overlaps: tuple[Overlap, ...] = ()

    def to_json(self) -> dict[str, Any]:
        fields = {
            "title": self.title,
            "record": self.record,
            "reason": self.reason,
            "detail": self.detail,
            "overlaps": [overlap.to_json() for overlap in self.overlaps],
        }
        return {key: value for key, value in fields.items() if value}


@dataclass
class Batch:
    """What one batch request returned, by requested key (a title, or a revision id as text).

    ``found`` holds the article of each key that has one, under the title the API resolved it to
    (normalization and redirects followed); ``missing`` the reason for each key that has none.
    """

    found: dict[str, Article] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)


def parse_kinds(text: str) -> tuple[str, ...]:
    """``"good,featured"`` -> ``("featured", "good")``; unknown kinds raise SourceError."""
    kinds = {kind.strip().lower() for kind in text.split(",") if kind.strip()}
    unknown = kinds - set(ARTICLE_KINDS)
    if not kinds or unknown:
        raise SourceError(
            f"--articles takes a comma-separated subset of {','.join(ARTICLE_KINDS)}, got {text!r}"
        )
    return tuple(sorted(kinds))


class MediaWikiClient:
    """A polite MediaWiki Action API client: one request at a time, bounded retries.

    A connection failure before the API has answered this client at all (no network, a wrong
    ``api_url``) is not retried: :class:`ApiUnreachable` says at once what to use instead. Once
    the API has answered, every failure is retried up to ``max_attempts``.

    Args:
        api_url: the ``api.php`` endpoint.
        max_attempts: attempts per request before :class:`ApiUnreachable`.
        backoff_base: first wait in seconds after a failure; doubled after each, up to
            ``backoff_cap``. ``Retry-After`` (429, 503, maxlag) takes precedence when given.
        timeout: seconds to connect and between bytes of the response.
        user_agent: sent with every request (Wikimedia requires a contact address).
        sleep: the waiting function (tests replace it to record the waits).
        notify: receives one line at a request's first failure, saying that it is retried and
            for how long (default: printed on stderr).
    """

    def __init__(
        self,
        api_url: str = DEFAULT_API_URL,
        *,
        max_attempts: int = 8,
        backoff_base: float = 1.0,
        backoff_cap: float = 60.0,
        timeout: float = 60.0,
        user_agent: str = USER_AGENT,
        sleep: Callable[[float], None] = time.sleep,
        notify: Callable[[str], None] = lambda line: print(line, file=sys.stderr),
    ) -> None:
        self.api_url = api_url
        self.max_attempts = max_attempts
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.timeout = timeout
        self.sleep = sleep
        self.notify = notify
        self.answered = False  # whether any request got an HTTP response
        self.session = requests.Session()
        self.session.headers.update({"User-Agent": user_agent, "Accept-Encoding": "gzip"})

    def close(self) -> None:
        self.session.close()

    def _backoff(self, attempt: int) -> float:
        """The wait after failed attempt ``attempt`` (1-based) when no Retry-After is given."""
        return min(self.backoff_base * 2 ** (attempt - 1), self.backoff_cap)

    def query(self, params: dict[str, str]) -> dict[str, Any]:
        """One ``action=query`` request, retried on transient failures; the decoded JSON."""
        full = {"action": "query", "format": "json", "formatversion": "2", "maxlag": "5", **params}
        reason = ""
        for attempt in range(1, self.max_attempts + 1):
            wait = self._backoff(attempt)
            try:
                response = self.session.get(self.api_url, params=full, timeout=self.timeout)
                self.answered = True
                if response.status_code in _RETRYABLE_STATUS:
                    reason = f"HTTP {response.status_code}"
                    wait = _retry_after(response, wait)
                elif response.status_code != 200:
                    raise ApiError(f"MediaWiki API at {self.api_url} answered HTTP {response.status_code}")
                else:
                    data = response.json()
                    error = data.get("error") if isinstance(data, dict) else None
                    if error is None:
                        return data
                    if error.get("code") != "maxlag":
                        raise ApiError(f"MediaWiki API error {error.get('code')}: {error.get('info', '')}")
                    reason = f"maxlag ({error.get('info', 'replication lag')})"
                    wait = _retry_after(response, wait)
            except (
                requests.ConnectionError,
                requests.Timeout,
                requests.exceptions.ChunkedEncodingError,
                requests.exceptions.ContentDecodingError,
                ValueError,
            ) as error:
                reason = f"{type(error).__name__}: {_network_reason(error)}"
                if isinstance(error, requests.ConnectionError) and not self.answered:
                    raise ApiUnreachable(
                        f"cannot reach the MediaWiki API at {self.api_url} ({reason}); {LOCAL_SOURCES}"
                    ) from None
            if attempt < self.max_attempts:
                if attempt == 1:
                    self._announce_retries(reason)
                self.sleep(wait)
        raise ApiUnreachable(
            f"MediaWiki API at {self.api_url} unreachable after {self.max_attempts} attempts: {reason}"
        )

    def _announce_retries(self, reason: str) -> None:
        """Say, at a request's first failure, how many more attempts it gets and how long their
        backoff adds up to (Retry-After, when the server sends one, replaces a wait)."""
        total = sum(self._backoff(attempt) for attempt in range(1, self.max_attempts))
        seconds = f"{total:.2g}" if total < 10 else f"{total:.0f}"
        more = self.max_attempts - 1
        self.notify(
            f"retrying: MediaWiki API at {self.api_url}: {reason}; up to {more} more "
            f"attempt{'s' * (more != 1)} over about {seconds} s (--max-attempts, --retry-backoff)"
        )

    def query_continued(
        self, params: dict[str, str], continuation: dict[str, str] | None = None
    ) -> Iterator[dict[str, Any]]:
        """Every response of a query, following ``continue`` (all its keys passed back);
        ``continuation`` resumes it where an earlier response's ``continue`` left off."""
        continuation = dict(continuation or {})
        while True:
            data = self.query({**params, **continuation})
            yield data
            if "continue" not in data:
                return
            continuation = {key: str(value) for key, value in data["continue"].items()}

    def category_pages(
        self, category: str, continuation: dict[str, str] | None = None
    ) -> Iterator[tuple[list[str], dict[str, str] | None]]:
        """The namespace-0 titles of ``Category:<category>``, one response at a time, each with
        the continuation that fetches the rest (None after the last response)."""
        params = {
            "list": "categorymembers",
            "cmtitle": f"Category:{category}",
            "cmnamespace": "0",
            "cmtype": "page",
            "cmlimit": "max",
            "cmprop": "ids|title",
        }
        for data in self.query_continued(params, continuation):
            members = data.get("query", {}).get("categorymembers", [])
            following = data.get("continue")
            yield (
                [member["title"] for member in members if member.get("ns", 0) == 0],
                {key: str(value) for key, value in following.items()} if following else None,
            )

    def fetch_titles(self, titles: Sequence[str]) -> Batch:
        """Latest revisions of up to 50 titles, redirects and normalization resolved."""
        return self._fetch({"titles": "|".join(titles), "redirects": "1"}, titles, by_revision=False)

    def fetch_revisions(self, revision_ids: Sequence[int]) -> Batch:
        """Exact revisions by id (keys of the batch are the ids as text)."""
        keys = [str(revision_id) for revision_id in revision_ids]
        return self._fetch({"revids": "|".join(keys)}, keys, by_revision=True)

    def _fetch(self, selector: dict[str, str], keys: Sequence[str], by_revision: bool) -> Batch:
        if len(keys) > BATCH_SIZE:
            raise ValueError(f"at most {BATCH_SIZE} titles or revisions per request, got {len(keys)}")
        params = {"prop": "revisions", "rvprop": "ids|timestamp|content", "rvslots": "main", **selector}
        renamed: dict[str, str] = {}
        pages: dict[str, dict[str, Any]] = {}
        revisions: dict[str, tuple[str, dict[str, Any]]] = {}  # title or revid -> (page title, revision)
        for data in self.query_continued(params):
            query = data.get("query", {})
            for entry in query.get("normalized", []) + query.get("redirects", []):
                renamed[entry["from"]] = entry["to"]
            for page in _values(query.get("pages", [])):
                pages.setdefault(page["title"], {}).update(
                    {k: v for k, v in page.items() if k != "revisions"}
                )
                for revision in page.get("revisions", []):
                    key = str(revision["revid"]) if by_revision else page["title"]
                    revisions[key] = (page["title"], revision)
        batch = Batch()
        for key in keys:
            found = revisions.get(key if by_revision else _follow(key, renamed))
            page = pages.get(found[0] if found else _follow(key, renamed), {})
            if by_revision:
                reason = "" if found else "revision not found"
            else:
                reason = (
                    "missing page"
                    if page.get("missing", False) is not False
                    else "invalid title"
                    if page.get("invalid")
                    else ""
                    if found
                    else "no revision returned"
                )
            if reason or found is None:
                batch.missing[key] = reason
                continue
            title, revision = found
            batch.found[key] = Article(
                title=title,
                wikitext=_revision_content(revision),
                page_id=page.get("pageid"),
                revision_id=revision.get("revid"),
                timestamp=revision.get("timestamp"),
            )
        return batch


def _retry_after(response: requests.Response, default: float) -> float:
    """The response's ``Retry-After`` in seconds; ``default`` where it has none that is a finite
    number (an HTTP date, ``inf``, ``nan``)."""
    try:
        seconds = float(response.headers.get("Retry-After", ""))
    except ValueError:
        return default
    return max(0.0, seconds) if math.isfinite(seconds) else default


def _network_reason(error: BaseException) -> str:
    """The operating system's reason inside a requests error (``[Errno 111] Connection refused``),
    which its message otherwise buries after the whole request URL; else the first line."""
    match = _OS_REASON.search(str(error))
    return match.group(0) if match else _first_line(error)


def _first_line(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0][:200]


def _values(container: Any) -> list[Any]:
    """A formatversion=2 list, or the values of a formatversion=1 dict keyed by id."""
    return list(container.values()) if isinstance(container, dict) else list(container)


def _follow(title: str, renamed: dict[str, str]) -> str:
    seen = {title}
    while title in renamed and renamed[title] not in seen:
        title = renamed[title]
        seen.add(title)
    return title


def _revision_content(revision: dict[str, Any]) -> str:
    """The main slot's wikitext (formatversion=2), or the legacy ``*`` field."""
    slot = revision.get("slots", {}).get("main", revision)
    content = slot.get("content", slot.get("*"))
    if not isinstance(content, str):
        raise ApiError(f"revision {revision.get('revid')} came back without content")
    return content


# --- offline sources -------------------------------------------------------------------------


def open_text(path: Path) -> io.BufferedIOBase:
    """A binary stream of a plain, ``.bz2`` or ``.gz`` file (decompressed on the fly)."""
    if not path.is_file():
        raise SourceError(f"{path}: no such file")
    if path.suffix == ".bz2":
        return bz2.open(path, "rb")
    if path.suffix == ".gz":
        return gzip.open(path, "rb")
    return path.open("rb")


def has_marker(wikitext: str, kinds: Iterable[str]) -> bool:
    """Whether the wikitext carries a ``{{Good article}}``/``{{Featured article}}`` of ``kinds``."""
    wanted = set(kinds)
    return any(match.group(1).lower() in wanted for match in _MARKER.finditer(wikitext))


def iter_dump(path: Path, kinds: Iterable[str]) -> Iterator[Article | Skipped]:
    """Namespace-0, non-redirect pages of a MediaWiki XML dump that carry a wanted marker, and a
    :class:`Skipped` for each such page without a title or with an ``<ns>`` or ``<id>`` that is
    not a number, or an ``<id>`` outside 0..2^63-1 (named ``FILE:page N``, the Nth ``<page>`` of
    the file).

    The dump is parsed incrementally (``iterparse``), each page cleared once read, so memory does
    not grow with the dump. A file that is a bare run of ``<page>`` elements is read too.
    """
    kinds = tuple(kinds)
    pages = 0
    try:
        with open_text(path) as raw:
            stream = _single_rooted(raw)
            root = None
            for event, element in ElementTree.iterparse(stream, events=("start", "end")):
                if root is None:
                    root = element
                if event != "end" or _local(element.tag) != "page":
                    continue
                pages += 1
                found = _dump_page(element, kinds, f"{path.name}:page {pages}")
                root.clear()
                if found is not None:
                    yield found
    except (ElementTree.ParseError, *_READ_ERRORS) as error:
        raise SourceError(f"{path}: not a readable MediaWiki XML dump ({_first_line(error)})") from None


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _dump_page(page: ElementTree.Element, kinds: tuple[str, ...], record: str) -> Article | Skipped | None:
    """The page's article; None for a page not selected (another namespace, a redirect, no text,
    no wanted marker); a :class:`Skipped` named ``record`` for a selected page that is malformed
    (an ``<ns>`` or ``<id>`` that is not a number, an ``<id>`` outside 0..2^63-1) or has an empty
    or missing title."""
    fields = {_local(child.tag): child for child in page}
    namespace = _text(fields.get("ns")) or "0"
    revision = fields.get("revision")
    if "redirect" in fields or revision is None or _integer(namespace) not in (0, None):
        return None
    revision_fields = {_local(child.tag): child for child in revision}
    text = _text(revision_fields.get("text"))
    if not text or _REDIRECT.match(text) or not has_marker(text, kinds):
        return None
    title = _text(fields.get("title"))
    page_id, revision_id = _text(fields.get("id")), _text(revision_fields.get("id"))
    for tag, value in (("<ns>", namespace), ("<id>", page_id), ("revision <id>", revision_id)):
        problem = _number_problem(tag, value) if value else ""
        if problem:
            detail = f"{tag} is {value.strip()[:40]!r}, {problem}"
            return Skipped(
                "malformed page", title=title if title.strip() else None, record=record, detail=detail
            )
    if not title.strip():
        return Skipped("no title", record=record, detail=f"page id {page_id}" if page_id else "")
    return Article(
        title=title,
        wikitext=text,
        page_id=_integer(page_id),
        revision_id=_integer(revision_id),
        timestamp=_text(revision_fields.get("timestamp")) or None,
    )


def _number_problem(tag: str, value: str) -> str:
    """Why a dump page's ``<ns>`` or id field ``tag`` is unusable (not a number, or an id outside
    0..``MAX_ID``), or ``""``."""
    number = _integer(value)
    if number is None:
        return "not a number"
    return f"not {ID_RANGE}" if tag != "<ns>" and not 0 <= number <= MAX_ID else ""


def _integer(text: str) -> int | None:
    """The integer a dump field spells (``" 12 "``), or None when it is empty or not one."""
    try:
        return int(text)
    except ValueError:
        return None


def _text(element: ElementTree.Element | None) -> str:
    return (element.text or "") if element is not None else ""


class _Chain(io.RawIOBase):
    """A read-only stream of several byte sources one after the other."""

    def __init__(self, parts: Iterable[bytes | io.BufferedIOBase]) -> None:
        self.parts = iter(parts)
        self.current: io.BufferedIOBase | None = None

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while True:
            if self.current is None:
                part = next(self.parts, None)
                if part is None:
                    return 0
                self.current = io.BytesIO(part) if isinstance(part, bytes) else part
            data = self.current.read(len(buffer))
            if data:
                buffer[: len(data)] = data
                return len(data)
            self.current = None


def _single_rooted(raw: io.BufferedIOBase) -> io.BufferedReader:
    """The stream itself, or wrapped in ``<mediawiki>`` when it starts with a bare ``<page>``
    (after its XML declaration, if any, which stays first)."""
    head = raw.read(4096)
    start = head.lstrip()
    declaration = b""
    if start.startswith(b"<?xml"):
        declaration = start[: start.find(b"?>") + 2]
        start = start[len(declaration) :].lstrip()
    parts: list[bytes | io.BufferedIOBase] = [head, raw]
    if start.startswith(b"<page"):
        parts = [declaration, b"<mediawiki>", start, raw, b"</mediawiki>"]
    return io.BufferedReader(_Chain(parts), buffer_size=1 << 16)


def _folder_files(directory: Path) -> list[Path]:
    """The ``*.wikitext`` files of a folder source, in name order; a name that is not valid UTF-8
    is a SourceError naming the file."""
    if not directory.is_dir():
        raise SourceError(f"{directory}: not a directory")
    paths = sorted(directory.glob("*.wikitext"))
    if not paths:
        raise SourceError(f"{directory}: no .wikitext files")
    undecodable = next((path for path in paths if _SURROGATE.search(path.name)), None)
    if undecodable is not None:  # its title would be garbage, and its name cannot be hashed
        shown = os.fsencode(undecodable).decode("utf-8", "backslashreplace")
        raise SourceError(f"{shown}: a file name that is not valid UTF-8; rename the file")
    return paths


def iter_folder(directory: Path) -> Iterator[Article]:
    """Every ``*.wikitext`` file of a folder, in name order (a leading byte-order mark left out);
    the title is the file name with underscores read as spaces."""
    for path in _folder_files(directory):
        try:
            text = path.read_text(encoding="utf-8-sig")
        except UnicodeDecodeError as error:
            raise SourceError(f"{path}: not valid UTF-8 at byte {error.start}") from None
        except OSError as error:
            raise SourceError(f"{path}: cannot read ({error.strerror})") from None
        yield Article(title=path.stem.replace("_", " "), wikitext=text)


def iter_jsonl(path: Path, kinds: Iterable[str]) -> Iterator[Article | Skipped]:
    """Articles of a JSON-lines pool (``title_guess`` or ``title``, ``class`` GA/FA, ``wikitext``),
    optionally gzip- or bz2-compressed. Records of other classes are not selected; a title's
    first letter is capitalized as MediaWiki does.

    A line that is not a JSON object with a ``wikitext`` field is not a pool: a one-line
    :class:`SourceError`. A record that is one but cannot be used is a :class:`Skipped` named
    ``FILE:LINE``: ``"no title"`` (with its ``source_index`` when it has one), or ``"malformed
    record"`` for a field of the wrong type (a ``wikitext`` that is null, a number or a list, a
    ``class`` that is not a string, ids that are not integers from 0 to 2^63-1) or text holding a
    lone surrogate.
    """
    classes = {POOL_CLASSES[kind] for kind in kinds}
    for number, line in _numbered_lines(path):
        if not line.strip():
            continue
        try:
            record = bounded_json.loads(line)
            title = record.get("title") or record.get("title_guess") or ""
            wikitext = record["wikitext"]
        except (ValueError, KeyError, AttributeError) as error:
            raise SourceError(f"{path}:{number}: not a pool record ({_first_line(error)})") from None
        pool_class = record.get("class", "")
        if isinstance(pool_class, str) and pool_class not in classes | {""}:
            continue
        name = f"{path.name}:{number}"
        problem = _pool_record_problem(record, title, wikitext)
        if problem:
            clean_title = isinstance(title, str) and title.strip() and not _SURROGATE.search(title)
            yield Skipped(
                "malformed record", title=title.strip() if clean_title else None, record=name, detail=problem
            )
            continue
        title = title.strip()
        if not title:
            index = record.get("source_index")
            yield Skipped(
                "no title", record=name, detail=f"source_index {index}" if index is not None else ""
            )
            continue
        yield Article(
            title=title[:1].upper() + title[1:],  # MediaWiki's capital
            wikitext=wikitext,
            page_id=record.get("page_id"),
            revision_id=record.get("revision_id"),
            timestamp=record.get("timestamp"),
        )


def _pool_record_problem(record: dict[str, Any], title: object, wikitext: object) -> str:
    """What makes a pool record unusable (``"wikitext is null, not text"``), or ``""``."""
    text, integer = ((str,), "text"), ((int, type(None)), "an integer or null")
    fields: list[tuple[str, object, tuple[tuple[type, ...], str]]] = [
        ("class", record.get("class", ""), text),
        ("title", title, text),
        ("wikitext", wikitext, text),
        ("page_id", record.get("page_id"), integer),
        ("revision_id", record.get("revision_id"), integer),
        ("timestamp", record.get("timestamp"), ((str, type(None)), "text or null")),
    ]
    for field_name, value, (types, wanted) in fields:
        if not isinstance(value, types) or isinstance(value, bool):
            return f"{field_name} is {_json_kind(value)}, not {wanted}"
        if isinstance(value, str) and (surrogate := _SURROGATE.search(value)):
            return (
                f"{field_name} holds a lone surrogate (U+{ord(surrogate.group()):04X}) "
                f"at character {surrogate.start()}"
            )
        if isinstance(value, int) and not 0 <= value <= MAX_ID:  # an id (the only integer fields)
            return f"{field_name} is {_json_kind(value)[:40]}, not {ID_RANGE} or null"
    return ""


def _json_kind(value: object) -> str:
    """How a JSON value reads in a message: ``null``, ``42``, ``a list``, ``an object``, ..."""
    if value is None or isinstance(value, (bool, int, float)):
        return json.dumps(value)
    return "a string" if isinstance(value, str) else "a list" if isinstance(value, list) else "an object"


def _numbered_lines(path: Path) -> Iterator[tuple[int, str]]:
    """The 1-based lines of a text file, decompressed, without a leading byte-order mark (as an
    editor may save one); a damaged file is a one-line SourceError."""
    number = 0
    try:
        with open_text(path) as raw:
            text = io.TextIOWrapper(cast(BinaryIO, raw), encoding="utf-8-sig")
            for number, line in enumerate(text, start=1):
                yield number, line
    except UnicodeDecodeError:
        raise SourceError(f"{path}: not valid UTF-8 after line {number}") from None
    except _READ_ERRORS as error:
        raise SourceError(
            f"{path}: truncated or corrupt after line {number} ({_first_line(error)})"
        ) from None


def folder_sha256(directory: Path) -> str:
    """The sha256 of a folder source's content: the name and sha256 of each ``*.wikitext`` file.
    A cache records it (or :func:`file_sha256` of a file source), so that a build from an edited
    source reads it again instead of reusing what it read before."""
    digest = hashlib.sha256()
    for file in _folder_files(directory):
        digest.update(file.name.encode("utf-8") + b"\0" + bytes.fromhex(file_sha256(file)))
    return digest.hexdigest()


def file_sha256(path: Path) -> str:
    """:func:`wikitext_toolkit_core.files.file_sha256`, where a missing or unreadable file is a
    SourceError."""
    if not path.is_file():
        raise SourceError(f"{path}: no such file")
    try:
        return files.file_sha256(path)
    except OSError as error:
        raise SourceError(f"{path}: cannot read ({error.strerror})") from None
