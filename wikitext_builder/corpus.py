"""From cached articles to a WikiText-layout corpus: order, split, vocabulary, files, statistics.

Articles stream from the cache (in title order) through ``render_article`` (in ``workers``
processes, results in input order) into a spool file; only their metadata stays in memory. The
split is then assigned along the seeded article order, the vocabulary counted on train with a
``Counter`` and the six text files, ``stats.json``, ``manifest.jsonl`` and ``SHA256SUMS`` written,
each atomically (temporary file, then rename).
"""

from __future__ import annotations

import collections
import hashlib
import heapq
import io
import json
import logging
import multiprocessing
import os
import random
import re
import signal
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, BinaryIO

from wikitext_builder.overlap import EXCLUDED_SPLIT, exclusion_record, skipped_from_record
from wikitext_builder.sources import ID_RANGE, MAX_ID, Article, Skipped
from wikitext_toolkit_core import bounded_json
from wikitext_toolkit_core.errors import ToolkitError
from wikitext_toolkit_core.files import CHECKSUM_FILE, file_sha256, write_atomically, write_checksum_file
from wikitext_toolkit_core.format import EOS, SPLITS, UNK
from wikitext_toolkit_core.progress import progress_bar

if TYPE_CHECKING:
    from wikitext_builder.build import Plan
    from wikitext_builder.overlap import OverlapCheck

logger = logging.getLogger(__name__)

TEXT_FILES = tuple(f"wiki.{split}.{kind}" for split in SPLITS for kind in ("tokens", "raw"))
STATS_FILE, MANIFEST_FILE = "stats.json", "manifest.jsonl"
OUTPUT_FILES = (*TEXT_FILES, STATS_FILE, MANIFEST_FILE, CHECKSUM_FILE)
SPOOL_FILE = ".render.spool"
#: Articles of more UTF-8 bytes of wikitext are skipped ("too large") before they are parsed: the
#: parser takes about 1 s and 28 bytes of memory per byte (a 50 MB article: 57 s and 1.4 GB).
#: 2 MiB is MediaWiki's own limit on a revision ($wgMaxArticleSize on Wikipedia), so no real
#: article reaches it; the largest of the shared 1,500-article pool has 261,072 bytes.
MAX_ARTICLE_BYTES = 2 * 1024 * 1024
_TITLE_LINE = re.compile(r"^ = (?!= ).* = \n$")
#: Articles handed to a render process at a time.
RENDER_CHUNK = 2
#: The most render processes per usable CPU: rendering is CPU-bound, so more would only wait for a
#: CPU, each holding a parser's memory.
WORKERS_PER_CPU = 2


# --- article order, sharding -------------------------------------------------------------------


def article_order(titles: Iterable[str], seed: int, limit: int | None = None) -> list[str]:
    """The sorted titles in a seeded shuffle, cut to ``limit``: the same for any source order."""
    order = sorted(set(titles))
    random.Random(seed).shuffle(order)
    return order[:limit] if limit is not None else order


def parse_shard(text: str) -> tuple[int, int]:
    """``"K/N"`` (1 <= K <= N) -> (K, N)."""
    match = re.fullmatch(r"(\d+)/(\d+)", text.strip())
    if not match or not 1 <= int(match.group(1)) <= int(match.group(2)):
        raise ValueError(f"--shard takes K/N with 1 <= K <= N, got {text!r}")
    return int(match.group(1)), int(match.group(2))


def shard_of(title: str, shards: int) -> int:
    """The shard (1..N) a title belongs to, by a hash stable across machines and Python runs."""
    return int.from_bytes(hashlib.sha256(title.encode("utf-8")).digest()[:8], "big") % shards + 1


# --- rendering -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rendered:
    """One article after ``render_article``: its text, or why it was skipped."""

    article: Article
    text: str | None
    skipped: Skipped | None


def render_one(article: Article) -> Rendered:
    """Render one article; an article over ``MAX_ARTICLE_BYTES`` (never parsed), malformed markup
    or a renderer failure becomes a reported skip."""
    from wikitext_builder.render import MarkupError, render_article

    size = len(article.wikitext.encode("utf-8"))
    if size > MAX_ARTICLE_BYTES:
        return Rendered(
            article,
            None,
            Skipped(
                "too large",
                title=article.title,
                detail=(f"{size:,} bytes of wikitext, over the limit of {MAX_ARTICLE_BYTES:,} bytes"),
            ),
        )
    try:
        return Rendered(article, render_article(article.title, article.wikitext), None)
    except MarkupError as error:
        return Rendered(article, None, Skipped("malformed markup", title=article.title, detail=error.detail))
    except Exception as error:  # a renderer bug must cost one article, not a day-long build
        detail = f"{type(error).__name__}: {str(error)[:200]}".replace("\n", " ")
        return Rendered(article, None, Skipped("render failed", title=article.title, detail=detail))


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity where the system tells it, else all)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def capped_workers(asked: int, articles: int) -> tuple[int, str | None]:
    """The render processes worth starting for ``articles`` when ``--workers asked``: at most one
    per chunk of :data:`RENDER_CHUNK` articles (the rest would get no work) and
    :data:`WORKERS_PER_CPU` per usable CPU; with a one-line note when that is fewer than asked.
    The output is the same for any number, so lowering it changes nothing but the processes."""
    chunks = max(1, -(-articles // RENDER_CHUNK))
    cpus = usable_cpus()
    if asked <= min(chunks, WORKERS_PER_CPU * cpus):
        return asked, None
    if chunks <= WORKERS_PER_CPU * cpus:
        why = f"{articles:,} article{'s' * (articles != 1)}, handed out {RENDER_CHUNK} at a time"
        return chunks, f"note: --workers {asked:,} lowered to {chunks:,} ({why})"
    why = f"{WORKERS_PER_CPU} per CPU, and this build may use {cpus:,} CPU{'s' * (cpus != 1)}"
    return WORKERS_PER_CPU * cpus, f"note: --workers {asked:,} lowered to {WORKERS_PER_CPU * cpus:,} ({why})"


def render_all(
    articles: Iterable[Article], workers: int, chunksize: int = RENDER_CHUNK
) -> Iterator[Rendered]:
    """``render_one`` over ``articles`` in input order, in ``workers`` processes.

    The input is handed to the pool a window at a time, so at most a few windows of wikitext are
    in flight whatever the article count (``Pool.imap`` alone would read its input eagerly).
    """
    if workers <= 1:
        yield from map(render_one, articles)
        return
    window = workers * chunksize * 8
    iterator = iter(articles)
    with multiprocessing.Pool(workers, initializer=_ignore_interrupts) as pool:
        while True:
            batch = [article for _, article in zip(range(window), iterator)]
            if not batch:
                return
            yield from pool.imap(render_one, batch, chunksize=chunksize)


def _ignore_interrupts() -> None:
    """Workers leave Ctrl-C to the main process, which stops the pool and reports once."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def merged_articles(streams: Sequence[Iterator[Article]]) -> Iterator[Article]:
    """Several title-ordered article streams as one, each title once (the first stream's)."""
    previous = None
    for article in heapq.merge(*streams, key=lambda article: article.title):
        if article.title != previous:
            yield article
        previous = article.title


# --- corpus -----------------------------------------------------------------------------------


@dataclass
class ArticleRecord:
    """Where one rendered article lies in the spool, and its manifest fields."""

    title: str
    page_id: int | None
    revision_id: int | None
    timestamp: str | None
    sha256: str
    offset: int
    length: int
    split: str = ""


class CorpusError(ToolkitError):
    """A corpus that cannot be written as asked (one-line message)."""


@dataclass
class BuildReport:
    """What a corpus build did: articles per split, and what it had to leave out and why."""

    articles: dict[str, int]
    skipped: list[Skipped]  # every article left out, sorted by reason, then name
    statistics: dict[str, Any]
    rendered: int  # articles through the parse-and-tokenize stage (written, or skipped there)
    render_seconds: float  # its wall time


def write_corpus(
    out_dir: Path,
    articles: Iterator[Article],
    order: Sequence[str],
    plan: Plan,
    *,
    workers: int,
    skipped: Iterable[Skipped] = (),
    overlap_check: OverlapCheck | None = None,
    progress: bool = True,
) -> BuildReport:
    """Render ``articles`` (title order) and write the corpus ``plan`` describes in ``out_dir``.

    Args:
        articles: the articles to use, in title order.
        order: their titles in corpus order (the seeded shuffle, or the manifest's order).
        plan: how they are split (:class:`wikitext_builder.build.Plan`): the plan's
            ``valid_articles`` and then ``test_articles`` renderable articles are taken from the
            start of ``order``, the rest is train; with a ``manifest`` (a rebuild), each title
            goes to the split the manifest names instead. Sizes that leave no article for train
            are a :class:`CorpusError`, raised before rendering when ``order`` is too short and
            before writing when too few render. Its ``min_count`` makes the vocabulary; its
            ``seed``, ``limit`` and sizes are recorded in ``stats.json``; its ``excluded``
            records (of articles dropped by an earlier build's check) are reported again.
        workers: render processes.
        skipped: the articles left out before rendering (no title, duplicate, missing page);
            reported in ``stats.json`` with those left out here (too large, malformed markup).
        overlap_check: the plan's ``--exclude-overlap`` check, loaded: the rendered articles
            that overlap its benchmark articles are dropped before the split assignment
            (:mod:`wikitext_builder.overlap`).
    """
    valid_articles, test_articles, min_count = plan.valid_articles, plan.test_articles, plan.min_count
    fixed_splits = {title: split for title, _, split in plan.manifest} if plan.manifest is not None else None
    excluded = [json.loads(record) for record in plan.excluded]
    skipped = list(skipped)
    if fixed_splits is None:
        check_train(
            _counted(f"{len(order):,} articles", len(order), skipped),
            len(order),
            valid_articles,
            test_articles,
        )
    spool_path = out_dir / SPOOL_FILE
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        with spool_path.open("w+b") as spool:
            started = time.perf_counter()
            records, rendering_skipped = _render_to_spool(articles, spool, workers, len(order), progress)
            render_seconds = time.perf_counter() - started
            ordered = [records[title] for title in order if title in records]
            ordered, exclusions = _exclude_overlapping(spool, ordered, overlap_check, excluded, progress)
            rendering_skipped += [skipped_from_record(record) for record in exclusions]
            if fixed_splits is None:
                rendered = f"{len(ordered):,} articles rendered" + (" and kept" if exclusions else "")
                counted = _counted(rendered, len(ordered), [*skipped, *rendering_skipped])
                check_train(counted, len(ordered), valid_articles, test_articles)
            _assign_splits(ordered, valid_articles, test_articles, fixed_splits)
            if fixed_splits is not None and not any(record.split == "train" for record in ordered):
                raise CorpusError("no article of the manifest's train split could be fetched and rendered")
            vocabulary = _train_vocabulary(spool, ordered, min_count)
            for split in SPLITS:
                _write_split(out_dir, split, spool, [r for r in ordered if r.split == split], vocabulary)
        left_out = sorted([*skipped, *rendering_skipped], key=_skip_order)
        recorded_settings: dict[str, object] = {
            "seed": plan.seed,
            "limit": plan.limit,
            "valid_articles": valid_articles,
            "test_articles": test_articles,
            "from_manifest": plan.manifest is not None,
            **(overlap_check.settings if overlap_check is not None else {}),
            "min_count": min_count,
            "max_article_bytes": MAX_ARTICLE_BYTES,
        }
        statistics = _write_records(out_dir, ordered, exclusions, left_out, recorded_settings)
    except OSError as error:
        raise CorpusError(
            f"{error.filename or out_dir}: cannot write the corpus ({error.strerror})"
        ) from None
    finally:
        spool_path.unlink(missing_ok=True)
    return BuildReport(statistics["articles"], left_out, statistics, len(order), render_seconds)


def _exclude_overlapping(
    spool: IO[bytes],
    ordered: list[ArticleRecord],
    check: OverlapCheck | None,
    excluded: Sequence[dict[str, Any]],
    progress: bool,
) -> tuple[list[ArticleRecord], list[dict[str, Any]]]:
    """The articles of ``ordered`` that ``check`` keeps, and the manifest records of the dropped
    ones: those of ``excluded`` (dropped by an earlier build), then those dropped here."""
    exclusions = list(excluded)
    if check is None:
        return ordered, exclusions
    texts = ((record.title, _article_text(spool, record)) for record in ordered)
    bar = progress_bar(texts, total=len(ordered), unit="article", desc="check", show=progress, leave=True)
    overlapping = check.overlapping(bar)
    exclusions += [
        exclusion_record(_manifest_fields(record), overlapping[record.title], check.threshold)
        for record in ordered
        if record.title in overlapping
    ]
    return [record for record in ordered if record.title not in overlapping], exclusions


def _write_records(
    out_dir: Path,
    ordered: list[ArticleRecord],
    exclusions: list[dict[str, Any]],
    left_out: list[Skipped],
    settings: dict[str, object],
) -> dict[str, Any]:
    """Write ``stats.json``, ``manifest.jsonl`` and, last, ``SHA256SUMS`` of the text files
    written; returns the statistics."""
    statistics = _build_statistics(out_dir, ordered, left_out, settings)
    write_atomically(out_dir / STATS_FILE, json.dumps(statistics, indent=2, ensure_ascii=False) + "\n")
    write_atomically(out_dir / MANIFEST_FILE, _manifest_text(ordered, exclusions))
    write_checksum_file(out_dir / CHECKSUM_FILE, {name: file_sha256(out_dir / name) for name in TEXT_FILES})
    return statistics


def _build_statistics(
    out_dir: Path, ordered: list[ArticleRecord], left_out: list[Skipped], settings: dict[str, object]
) -> dict[str, Any]:
    """``stats.json``: Table 1 of the written corpus, its articles per split, and the builder's
    settings and left-out articles (each named, and counted by reason)."""
    counts = collections.Counter(record.split for record in ordered)
    statistics: dict[str, Any] = {
        **corpus_statistics(out_dir),
        "articles": {split: counts[split] for split in SPLITS},
    }
    statistics["builder"] = {
        "settings": settings,
        "skipped": [skip.to_json() for skip in left_out],
        "skipped_counts": dict(sorted(collections.Counter(skip.reason for skip in left_out).items())),
    }
    return statistics


def _manifest_fields(record: ArticleRecord) -> dict[str, Any]:
    return {
        "title": record.title,
        "page_id": record.page_id,
        "revision_id": record.revision_id,
        "timestamp": record.timestamp,
        "split": record.split,
        "sha256": record.sha256,
    }


def _manifest_text(ordered: list[ArticleRecord], exclusions: list[dict[str, Any]]) -> str:
    """``manifest.jsonl``: the corpus's articles, split by split, then the excluded ones."""
    lines = [_manifest_fields(record) for split in SPLITS for record in ordered if record.split == split]
    return "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in [*lines, *exclusions])


def _counted(counted: str, count: int, skipped: Sequence[Skipped]) -> str:
    """``counted``, and when nothing is left, why: the skipped articles by reason."""
    if count or not skipped:
        return counted
    reasons = sorted(collections.Counter(skip.reason for skip in skipped).items())
    return f"{counted} (skipped: " + ", ".join(f"{number:,} {reason}" for reason, number in reasons) + ")"


def check_train(counted: str, count: int, valid_articles: int, test_articles: int) -> None:
    """Refuse split sizes that leave no article for train (its vocabulary would be empty, and
    every token of valid and test ``<unk>``); suggest sizes that fit, a tenth each. ``counted``
    says what ``count`` counts (``"40 articles"``, ``"--limit 40"``)."""
    if count > valid_articles + test_articles:
        return
    fitting = max(1, count // 10)
    hint = (
        f"; use e.g. --valid-articles {fitting} --test-articles {fitting}"
        if count >= 3
        else "; a corpus needs at least 3"
    )
    raise CorpusError(
        f"{counted}, and --valid-articles {valid_articles} plus --test-articles "
        f"{test_articles} leave no article for train{hint}"
    )


def _skip_order(skip: Skipped) -> tuple[str, str, str]:
    return skip.reason, skip.title or "", skip.record or ""


def _render_to_spool(
    articles: Iterator[Article], spool: IO[bytes], workers: int, total: int, progress: bool
) -> tuple[dict[str, ArticleRecord], list[Skipped]]:
    """Render every article into ``spool`` in at most ``workers`` processes (:func:`capped_workers`,
    its note in the log); where each landed, and the skipped ones."""
    records: dict[str, ArticleRecord] = {}
    skipped: list[Skipped] = []
    workers, note = capped_workers(workers, total)
    if note:
        logger.warning(note)
    bar = progress_bar(
        render_all(articles, workers), total=total, unit="article", desc="render", show=progress, leave=True
    )
    for rendered in bar:
        article = rendered.article
        if rendered.skipped is not None:
            skipped.append(rendered.skipped)
            continue
        data = rendered.text.encode("utf-8")  # type: ignore[union-attr]
        records[article.title] = ArticleRecord(
            article.title,
            article.page_id,
            article.revision_id,
            article.timestamp,
            hashlib.sha256(data).hexdigest(),
            spool.tell(),
            len(data),
        )
        spool.write(data)
    return records, skipped


def _assign_splits(
    ordered: list[ArticleRecord], valid_articles: int, test_articles: int, fixed_splits: dict[str, str] | None
) -> None:
    for index, record in enumerate(ordered):
        if fixed_splits is not None:
            record.split = fixed_splits[record.title]
        else:
            record.split = (
                "valid"
                if index < valid_articles
                else "test"
                if index < valid_articles + test_articles
                else "train"
            )


def _article_text(spool: IO[bytes], record: ArticleRecord) -> str:
    spool.seek(record.offset)
    return spool.read(record.length).decode("utf-8")


def _train_vocabulary(spool: IO[bytes], ordered: list[ArticleRecord], min_count: int) -> set[str]:
    """Types of the train articles seen at least ``min_count`` times (counted per article)."""
    counts: collections.Counter[str] = collections.Counter()
    for record in ordered:
        if record.split == "train":
            counts.update(_article_text(spool, record).split())
    return {token for token, count in counts.items() if count >= min_count}


def _heading_level(tokens: list[str]) -> int:
    """n for a heading line ``= ... =`` of level n (its ``=`` runs are markup), else 0."""
    level = next((index for index, token in enumerate(tokens) if token != "="), len(tokens))
    return level if 0 < level and len(tokens) > 2 * level and tokens[-level:] == ["="] * level else 0


def _map_line(line: str, vocabulary: set[str]) -> str:
    """One line with the tokens outside ``vocabulary`` mapped to ``<unk>``; a heading's ``=``
    markers are kept whatever their count."""
    tokens = line.split()
    if not tokens:
        return " \n"
    level = _heading_level(tokens)
    words = [token if token in vocabulary else UNK for token in tokens[level : len(tokens) - level]]
    return " " + " ".join(tokens[:level] + words + tokens[len(tokens) - level :]) + " \n"


def _write_split(
    out_dir: Path, split: str, spool: IO[bytes], records: list[ArticleRecord], vocabulary: set[str]
) -> None:
    """``wiki.SPLIT.raw`` (articles as rendered) and ``wiki.SPLIT.tokens`` (``<unk>``-mapped),
    both in one pass over the spool, each written atomically."""

    def write_both(raw_file: BinaryIO, tokens_file: BinaryIO) -> None:
        raw = io.TextIOWrapper(raw_file, encoding="utf-8", newline="")
        tokens = io.TextIOWrapper(tokens_file, encoding="utf-8", newline="")
        for record in records:
            text = _article_text(spool, record)
            raw.write(text)
            tokens.writelines(_map_line(line, vocabulary) for line in text.splitlines(keepends=True))
        for wrapper in (raw, tokens):  # flush, and hand the files back to write_atomically open
            wrapper.flush()
            wrapper.detach()

    write_atomically(
        out_dir / f"wiki.{split}.raw",
        lambda raw_file: write_atomically(
            out_dir / f"wiki.{split}.tokens", lambda tokens_file: write_both(raw_file, tokens_file)
        ),
    )


# --- statistics ----------------------------------------------------------------------------------


def corpus_statistics(directory: Path) -> dict[str, Any]:
    """The paper's Table 1 quantities of a WikiText-layout directory, from its ``.tokens`` files
    (its ``.raw`` files when it has no ``.tokens``).

    Articles are counted as level-1 heading lines with a blank line on each side (the released
    files also hold a few paragraphs shaped like a title, without the blank lines around them).
    Vocabulary size counts every train type plus ``<eos>`` and ``<unk>`` (as the harness does);
    the ``<unk>`` rate is ``<unk>`` tokens over all tokens of the split (``<eos>`` included).
    A missing split is a ``FileNotFoundError``, one that is not UTF-8 a :class:`CorpusError`.
    """
    result: dict[str, dict[str, object]] = {
        "articles": {},
        "tokens": {},
        "unk_tokens": {},
        "unk_rate": {},
        "characters": {},
    }
    vocabulary: set[str] = set()
    for split in SPLITS:
        path = directory / f"wiki.{split}.tokens"
        if not path.is_file():
            path = directory / f"wiki.{split}.raw"
        if not path.is_file():
            raise FileNotFoundError(f"{directory}: no wiki.{split}.tokens or wiki.{split}.raw")
        articles = tokens = unknown = characters = 0
        previous, title_pending = "", False
        try:
            with path.open(encoding="utf-8", newline="") as handle:
                for line in handle:
                    words = line.split()
                    characters += len(line)
                    tokens += len(words) + 1
                    unknown += words.count(UNK)
                    articles += title_pending and not words
                    title_pending = previous == " \n" and bool(_TITLE_LINE.match(line))
                    previous = line
                    if split == "train":
                        vocabulary.update(words)
        except UnicodeDecodeError as error:
            raise CorpusError(f"{path}: not valid UTF-8 ({error.reason})") from None
        result["articles"][split] = articles
        result["tokens"][split] = tokens
        result["unk_tokens"][split] = unknown
        result["unk_rate"][split] = round(unknown / tokens, 6) if tokens else 0.0
        result["characters"][split] = characters
    return {**result, "vocabulary_size": len(vocabulary | {UNK, EOS})}


def format_statistics(statistics: dict[str, Any]) -> str:
    """A Table 1 style text table."""
    rows = [f"{'':<18}{'train':>14}{'valid':>12}{'test':>12}"]
    for key, label in (
        ("articles", "articles"),
        ("tokens", "tokens"),
        ("characters", "characters"),
        ("unk_rate", "<unk> rate"),
    ):
        values = statistics[key]
        cells = [f"{values[s] * 100:.2f} %" if key == "unk_rate" else f"{values[s]:,}" for s in SPLITS]
        rows.append(f"{label:<18}{cells[0]:>14}{cells[1]:>12}{cells[2]:>12}")
    rows.append(f"{'vocabulary size':<18}{statistics['vocabulary_size']:>14,}")
    return "\n".join(rows)


# --- files ---------------------------------------------------------------------------------------


#: Every file :func:`write_corpus` writes in its directory under its own name: its outputs and
#: the render spool (a build must not read any of them).
WRITTEN_FILES = (SPOOL_FILE, *OUTPUT_FILES)


def read_manifest(path: Path) -> list[dict[str, Any]]:
    """The records of a ``manifest.jsonl`` (each with title, revision_id, split: ``train``,
    ``valid``, ``test``, or ``excluded`` for an article dropped by ``--exclude-overlap``, which
    also has its ``overlaps`` and ``threshold``), for a rebuild that refetches their revisions.
    Lines end at ``"\\n"`` only: a title may hold U+0085, U+2028 or U+2029."""
    records = []
    try:
        lines = path.read_text(encoding="utf-8").split("\n")
    except OSError as error:
        raise ValueError(f"{path}: cannot read ({error.strerror})") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = bounded_json.loads(line)
            if not isinstance(record["title"], str) or record["split"] not in (*SPLITS, EXCLUDED_SPLIT):
                raise ValueError("bad title or split")
            if record["revision_id"] is not None and not 0 <= int(record["revision_id"]) <= MAX_ID:
                raise ValueError(f"revision_id {record['revision_id']} is not {ID_RANGE}")
            if record["split"] == EXCLUDED_SPLIT:
                skipped_from_record(record)  # its overlaps and threshold are readable
        except (ValueError, KeyError, TypeError, IndexError) as error:
            raise ValueError(f"{path}:{number}: not a manifest record ({error})") from None
        if record["revision_id"] is None:
            raise ValueError(
                f"{path}:{number}: no revision id: its corpus was built from local articles (--folder, "
                "--jsonl, --dump or --sample), which --from-manifest cannot refetch; rebuild it with "
                "the same --folder, --jsonl, --dump or --sample command"
            )
        records.append(record)
    if not records:
        raise ValueError(f"{path}: an empty manifest")
    return records
