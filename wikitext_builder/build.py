"""The build pipeline: fill a cache from a source, then turn one or more caches into a corpus.

The article set is planned the same way whatever the source: every listed title, sorted, in a
seeded shuffle (:func:`~wikitext_builder.corpus.article_order`), cut to ``limit``; with
``shard=(K, N)`` a cache fetches only the planned titles whose stable hash falls in shard K, and
:func:`build_corpus` over the N shard caches plans the same set again and writes one corpus.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from wikitext_builder.cache import FETCHED, MISSING, PENDING, Cache, CacheError, Entry
from wikitext_builder.corpus import BuildReport, article_order, merged_articles, shard_of, write_corpus
from wikitext_builder.overlap import DEFAULT_THRESHOLD, load_check
from wikitext_builder.sources import ARTICLE_KINDS, BATCH_SIZE, Article, MediaWikiClient, Skipped
from wikitext_toolkit_core.progress import progress_bar

if TYPE_CHECKING:
    from wikitext_builder.overlap import OverlapCheck

PRESETS = {"wikitext-2": (600, 60, 60), "wikitext-103": (28_475, 60, 60)}
COMMIT_EVERY = 50  # streamed articles per committed transaction


@dataclass(frozen=True)
class Plan:
    """How the article set is chosen and split; recorded in a cache so merges reuse it.

    ``exclude_overlap`` (``NAME:SPLIT,...`` strings, :func:`~wikitext_builder.overlap.parse_specs`)
    and ``exclude_threshold`` are the ``--exclude-overlap`` check; ``excluded`` the manifest
    records (JSON text) of the articles an earlier build's check dropped, for a rebuild from its
    manifest.
    """

    seed: int | None = 0  # None: a rebuild from a manifest whose seed is not recorded
    limit: int | None = None
    valid_articles: int = 60
    test_articles: int = 60
    min_count: int = 3
    manifest: tuple[tuple[str, int, str], ...] | None = None  # (title, revision id, split)
    exclude_overlap: tuple[str, ...] = ()
    exclude_threshold: float = DEFAULT_THRESHOLD
    excluded: tuple[str, ...] = ()

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Plan:
        fields = json.loads(text)
        manifest = fields.pop("manifest")
        for key in ("exclude_overlap", "excluded"):  # absent from a plan recorded before them
            fields[key] = tuple(fields.get(key, ()))
        return cls(**fields, manifest=tuple(map(tuple, manifest)) if manifest is not None else None)

    def listed_order(self, titles: Iterable[str]) -> list[str]:
        """The planned titles in corpus order."""
        if self.manifest is not None:
            return [title for title, _, _ in self.manifest]
        if self.seed is None:
            raise ValueError("a plan without a manifest needs a seed")
        return article_order(titles, self.seed, self.limit)


def _in_shard(title: str, shard: tuple[int, int] | None) -> bool:
    return shard is None or shard_of(title, shard[1]) == shard[0]


def _batches(items: Sequence[str], size: int) -> Iterator[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


# --- filling a cache -------------------------------------------------------------------------


def fill_from_api(
    cache: Cache,
    client: MediaWikiClient,
    kinds: Sequence[str],
    plan: Plan,
    shard: tuple[int, int] | None,
    batch_size: int = BATCH_SIZE,
    progress: bool = True,
) -> None:
    """List the articles (once, resumably), then fetch every planned, pending one in batches of
    ``batch_size`` (at most 50), committing each batch; titles fetched by an earlier
    (interrupted) run are not fetched again."""
    if not cache.list_complete:
        if plan.manifest is not None:
            cache.set_article_list((title, revision_id) for title, revision_id, _ in plan.manifest)
        else:
            for kind in kinds:
                _list_category(cache, client, kind)
            cache.set_meta("list_complete", "1")
    entries = cache.entries()
    planned = [title for title in plan.listed_order(entries) if _in_shard(title, shard)]
    pending = sorted(title for title in planned if entries[title].status == PENDING)
    pinned = cache.pinned_revisions()
    bar = progress_bar(total=len(pending), unit="article", desc="fetch", show=progress, leave=True)
    with bar:
        for titles in _batches(pending, batch_size):
            if pinned:
                batch = client.fetch_revisions([pinned[title] for title in titles])
                by_id = {str(pinned[title]): title for title in titles}
                found = {
                    by_id[key]: dataclasses.replace(article, title=by_id[key])
                    for key, article in batch.found.items()
                }
                missing = {by_id[key]: reason for key, reason in batch.missing.items()}
            else:
                batch = client.fetch_titles(titles)
                found, missing = batch.found, batch.missing
            cache.commit_batch(found, missing)
            bar.update(len(titles))


def _list_category(cache: Cache, client: MediaWikiClient, kind: str) -> None:
    """List one category into the cache, committing each response with its continuation, so an
    interrupted listing resumes where it stopped."""
    key = f"listing:{kind}"
    state = cache.get_meta(key)
    if state == "done":
        return
    start = json.loads(state) if state else None
    for titles, continuation in client.category_pages(ARTICLE_KINDS[kind], start):
        cache.add_listing(titles, key, json.dumps(continuation) if continuation else "done")


def fill_from_stream(
    cache: Cache, articles: Iterable[Article | Skipped], shard: tuple[int, int] | None, progress: bool = True
) -> None:
    """Store a streamed source's articles (this shard's content, every title listed), committing
    every 50; a rerun after an interruption reads the source again but stores only what is new.
    A title seen twice keeps its first article; the later ones are recorded as skipped, with the
    records the source itself skipped (a record without a title)."""
    if cache.list_complete:
        return
    known = cache.entries()
    seen: set[str] = set()
    skipped: list[Skipped] = []
    found: dict[str, Article] = {}
    elsewhere: list[str] = []
    for article in progress_bar(articles, unit="article", desc="read", show=progress, leave=True):
        if isinstance(article, Skipped):
            skipped.append(article)
            continue
        if article.title in seen:
            skipped.append(Skipped("duplicate title", title=article.title))
            continue
        seen.add(article.title)
        if article.title in known:
            continue
        if _in_shard(article.title, shard):
            found[article.title] = article
        else:
            elsewhere.append(article.title)
        if len(found) + len(elsewhere) >= COMMIT_EVERY:
            cache.commit_batch(found, {})
            cache.add_listed(elsewhere)
            found, elsewhere = {}, []
    cache.commit_batch(found, {})
    cache.add_listed(elsewhere)
    cache.set_meta("skipped", json.dumps([skip.to_json() for skip in skipped], ensure_ascii=False))
    cache.set_meta("list_complete", "1")


# --- from caches to a corpus -------------------------------------------------------------------


def _cache_shard(cache: Cache) -> tuple[int, int] | None:
    shard = cache.source.get("shard")
    if not isinstance(shard, (list, tuple)):
        return None
    index, count = shard
    return int(index), int(count)


def check_shards(caches: Sequence[Cache]) -> None:
    """The caches must be one unsharded cache or the N shards of one build, each complete (its
    build read the whole source, or listed every article): an interrupted one would give a
    partial corpus."""
    if len(caches) > 1 or _cache_shard(caches[0]) is not None:
        _check_one_build(caches)
    incomplete = next((cache.path for cache in caches if not cache.list_complete), None)
    if incomplete is not None:
        raise CacheError(
            f"{incomplete}: an incomplete cache (its build stopped early); rerun that build first"
        )


def _check_one_build(caches: Sequence[Cache]) -> None:
    """Several caches must be the N shards of one build (same source and plan, shards 1..N)."""
    sources = {
        json.dumps({k: v for k, v in cache.source.items() if k != "shard"}, sort_keys=True)
        for cache in caches
    }
    plans = {cache.get_meta("plan") for cache in caches}
    shards = [_cache_shard(cache) for cache in caches]
    if len(sources) != 1 or len(plans) != 1:
        raise CacheError("the caches come from different sources or plans; merge the shards of one build")
    if None in shards or len({n for _, n in shards}) != 1:  # type: ignore[misc]
        raise CacheError("merge takes the shard caches of one --shard K/N build")
    count = shards[0][1]  # type: ignore[index]
    absent = sorted(set(range(1, count + 1)) - {k for k, _ in shards})  # type: ignore[misc]
    if absent or len(shards) != count:
        raise CacheError(
            f"merge needs each of the {count} shards once; "
            f"missing or repeated: {', '.join(f'{k}/{count}' for k in absent) or 'repeated'}"
        )


def build_corpus(
    out_dir: Path,
    caches: Sequence[Cache],
    plan: Plan,
    workers: int,
    progress: bool = True,
    overlap_check: OverlapCheck | None = None,
) -> BuildReport:
    """Write the corpus of the planned articles held by ``caches`` (one cache, or N shards),
    without those that overlap the benchmark articles of the plan's ``exclude_overlap``
    (``overlap_check``: that check, when the caller has loaded it already)."""
    if overlap_check is None and plan.exclude_overlap:
        overlap_check = load_check(plan.exclude_overlap, plan.exclude_threshold)
    owners: dict[str, Entry] = {}
    for cache in caches:
        shard = _cache_shard(cache)
        for title, entry in cache.entries().items():
            if _in_shard(title, shard):
                owners[title] = entry
    placed: dict[str, str] = {}  # stored title -> the listed title that placed it, in corpus order
    # every shard read the whole stream (check_shards: one source), so each cache holds the same
    # skipped records; one cache's list counts each once (a title seen three times: twice)
    skipped = list(caches[0].skipped())
    for title in plan.listed_order(owners):
        owner = owners.get(title)
        if owner is None or owner.status == PENDING:
            raise CacheError(
                f"{title!r} was never fetched: rerun the build (or its shard) to complete the cache"
            )
        if owner.status == MISSING:
            skipped.append(Skipped(owner.reason or "missing page", title=title))
        elif owner.status == FETCHED and owner.stored_as is not None:
            if owner.stored_as in placed:
                skipped.append(_resolved_twice(title, placed[owner.stored_as], owner.stored_as))
            else:
                placed[owner.stored_as] = title
    order = list(placed)
    articles = merged_articles([cache.iter_articles(set(order)) for cache in caches])
    return write_corpus(
        out_dir,
        articles,
        order,
        plan,
        workers=workers,
        skipped=skipped,
        overlap_check=overlap_check,
        progress=progress,
    )


def _resolved_twice(title: str, placed_by: str, stored: str) -> Skipped:
    """The skip of listed ``title``, which the API resolved (a redirect, a page moved while the
    list was made) to the article ``stored`` that listed ``placed_by`` already brought in: named
    by whichever of the two is not the article's own title."""
    named, other = (placed_by, title) if title == stored else (title, placed_by)
    also = "" if other == stored else f", as {other!r} does"
    return Skipped("duplicate title", title=named, detail=f"resolves to {stored!r}{also}")
