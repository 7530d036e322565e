"""The SQLite cache of fetched revisions and of the article list, the state a build resumes from.

Two tables hold the state: ``articles`` is the article list (every listed title, the revision
pinned for it if any, its fetch status and the title its content is stored under), ``revisions``
the content (title, page id, revision id, timestamp, wikitext). Each fetched batch is committed in
one transaction, together with the status of every title it answered, so a build killed at any
point (Ctrl-C, ``kill -9``, network loss) restarts from the last committed batch: nothing fetched
is fetched again, nothing is lost and nothing is stored twice (titles are primary keys).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from wikitext_builder.sources import Article, Skipped
from wikitext_toolkit_core.errors import ToolkitError

PENDING, FETCHED, MISSING = "pending", "fetched", "missing"
CONTENT_KEY = "content_sha256"  # the source-signature field that records a local source's content

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS articles (
    title TEXT PRIMARY KEY,
    pinned_revision_id INTEGER,
    status TEXT NOT NULL DEFAULT 'pending',
    stored_as TEXT,
    reason TEXT
);
CREATE TABLE IF NOT EXISTS revisions (
    title TEXT PRIMARY KEY,
    page_id INTEGER,
    revision_id INTEGER,
    timestamp TEXT,
    wikitext TEXT NOT NULL
);
"""


class CacheError(ToolkitError):
    """A cache that cannot serve this build (one-line message)."""


@dataclass(frozen=True)
class Entry:
    """One listed title's state: status, the title its content is stored under, why it is missing."""

    status: str
    stored_as: str | None
    reason: str | None


class Cache:
    """A build's SQLite cache file (WAL journal, one transaction per committed batch)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.connection = sqlite3.connect(path, isolation_level=None)
            self.connection.execute("PRAGMA journal_mode=WAL")
            self.connection.execute("PRAGMA synchronous=NORMAL")
            self.connection.executescript(_SCHEMA)
        except sqlite3.DatabaseError as error:
            raise CacheError(f"{path}: not a usable cache ({error})") from None

    def close(self) -> None:
        self.connection.close()

    def __enter__(self) -> Cache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- metadata -------------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        row = self.connection.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        with self._transaction():
            self.connection.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    def bind_source(self, source: dict[str, object]) -> bool:
        """Record which source (and shard) fills this cache; refuse a cache filled by another.

        A local source's signature holds the sha256 of its content (``CONTENT_KEY``): a cache
        filled from other content of the same source is emptied, so that the build reads the
        source again and reflects it exactly. Returns whether it was emptied.
        """
        recorded = self.get_meta("source")
        if recorded is not None:
            before = json.loads(recorded)
            if _identity(before) != _identity(source):
                raise CacheError(
                    f"{self.path} was filled from {json.dumps(_identity(before), sort_keys=True)}, "
                    f"not {json.dumps(_identity(source), sort_keys=True)}; "
                    "use another --cache or delete it"
                )
            if before.get(CONTENT_KEY) == source.get(CONTENT_KEY):
                return False
        with self._transaction():
            for table in ("meta", "articles", "revisions"):
                self.connection.execute(f"DELETE FROM {table}")
            self.connection.execute(
                "INSERT INTO meta VALUES ('source', ?)", (json.dumps(source, sort_keys=True),)
            )
        return recorded is not None

    @property
    def source(self) -> dict[str, object]:
        recorded = self.get_meta("source")
        if recorded is None:
            raise CacheError(f"{self.path}: an empty cache (no build has used it)")
        return json.loads(recorded)

    @property
    def list_complete(self) -> bool:
        return self.get_meta("list_complete") == "1"

    # --- the article list -------------------------------------------------------------------
    def set_article_list(self, titles: Iterable[tuple[str, int | None]]) -> None:
        """Store the whole article list (title, pinned revision id) at once and mark it complete."""
        with self._transaction():
            self.connection.executemany(
                "INSERT OR IGNORE INTO articles (title, pinned_revision_id) VALUES (?, ?)", titles
            )
            self.connection.execute("INSERT OR REPLACE INTO meta VALUES ('list_complete', '1')")

    def add_listing(self, titles: Iterable[str], key: str, state: str) -> None:
        """One listing response in one transaction: its titles, and the listing's new state
        (where to continue, or that it is done) under meta ``key``."""
        with self._transaction():
            self.connection.executemany(
                "INSERT OR IGNORE INTO articles (title) VALUES (?)", ((title,) for title in titles)
            )
            self.connection.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, state))

    def entries(self) -> dict[str, Entry]:
        """Every listed title's state."""
        rows = self.connection.execute("SELECT title, status, stored_as, reason FROM articles")
        return {title: Entry(status, stored_as, reason) for title, status, stored_as, reason in rows}

    def holds_fetched(self) -> bool:
        """Whether the cache holds anything a rerun would otherwise fetch again: an article's
        content, or a committed response of the API's article listing."""
        query = (
            "SELECT EXISTS (SELECT 1 FROM revisions) "
            "OR EXISTS (SELECT 1 FROM meta WHERE key LIKE 'listing:%')"
        )
        return bool(self.connection.execute(query).fetchone()[0])

    def pinned_revisions(self) -> dict[str, int]:
        rows = self.connection.execute(
            "SELECT title, pinned_revision_id FROM articles WHERE pinned_revision_id IS NOT NULL"
        )
        return dict(rows)

    # --- content ----------------------------------------------------------------------------
    def commit_batch(self, found: dict[str, Article], missing: dict[str, str]) -> None:
        """Store one batch in one transaction: each listed title's article (under the article's
        title; a title already stored is kept) or its reason for missing."""
        with self._transaction():
            for listed_title, article in found.items():
                self.connection.execute(
                    "INSERT OR IGNORE INTO revisions VALUES (?, ?, ?, ?, ?)",
                    (
                        article.title,
                        article.page_id,
                        article.revision_id,
                        article.timestamp,
                        article.wikitext,
                    ),
                )
                self.connection.execute(
                    "INSERT INTO articles (title, status, stored_as) VALUES (?, ?, ?) "
                    "ON CONFLICT(title) DO UPDATE SET status = excluded.status, "
                    "stored_as = excluded.stored_as",
                    (listed_title, FETCHED, article.title),
                )
            for listed_title, reason in missing.items():
                self.connection.execute(
                    "INSERT INTO articles (title, status, reason) VALUES (?, ?, ?) "
                    "ON CONFLICT(title) DO UPDATE SET status = excluded.status, reason = excluded.reason",
                    (listed_title, MISSING, reason),
                )

    def add_listed(self, titles: Iterable[str]) -> None:
        """List titles whose content this cache does not hold (another shard's pages of a stream)."""
        with self._transaction():
            self.connection.executemany(
                "INSERT OR IGNORE INTO articles (title) VALUES (?)", ((title,) for title in titles)
            )

    def iter_articles(self, titles: set[str]) -> Iterator[Article]:
        """The stored articles among ``titles``, in title order, read one at a time."""
        connection = sqlite3.connect(self.path)  # its own connection: callers may interleave writes
        try:
            for title in sorted(titles):  # code-point order, SQLite's BINARY collation
                row = connection.execute(
                    "SELECT page_id, revision_id, timestamp, wikitext FROM revisions WHERE title = ?",
                    (title,),
                ).fetchone()
                if row is not None:
                    yield Article(
                        title=title, wikitext=row[3], page_id=row[0], revision_id=row[1], timestamp=row[2]
                    )
        finally:
            connection.close()

    def skipped(self) -> list[Skipped]:
        """What a streamed source held but the cache does not: records without a title, and the
        later records of a title seen twice (its first is kept)."""
        return [Skipped(**fields) for fields in json.loads(self.get_meta("skipped") or "[]")]

    def _transaction(self) -> _Transaction:
        return _Transaction(self.connection, self.path)


def _identity(source: dict[str, object]) -> dict[str, object]:
    """A source signature without its content digest: which source, not which version of it."""
    return {key: value for key, value in source.items() if key != CONTENT_KEY}


#: SQLite's result code of a full disk (``sqlite3.SQLITE_FULL``, which the type stubs lack).
SQLITE_FULL = 13


class _Transaction:
    """``BEGIN IMMEDIATE`` ... ``COMMIT`` (``ROLLBACK`` on error) on an autocommit connection of
    the cache at ``path``; a full disk is a :class:`CacheError` (the batch is rolled back, the
    batches committed before it stay)."""

    def __init__(self, connection: sqlite3.Connection, path: Path) -> None:
        self.connection, self.path = connection, path

    def __enter__(self) -> None:
        self.connection.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, error: BaseException | None, *rest: object) -> None:
        try:  # after some errors (a full disk) SQLite has rolled the transaction back itself
            if exc_type is None or self.connection.in_transaction:
                self.connection.execute("COMMIT" if exc_type is None else "ROLLBACK")
        except sqlite3.OperationalError as failure:
            self._raise_if_full(failure)
            raise
        if isinstance(error, sqlite3.OperationalError):
            self._raise_if_full(error)

    def _raise_if_full(self, error: sqlite3.OperationalError) -> None:
        if getattr(error, "sqlite_errorcode", None) == SQLITE_FULL:
            raise CacheError(
                f"{self.path}: the disk is full (SQLite: {error}); the batches committed before "
                "are kept: free some space and rerun the same command to resume"
            ) from None
