"""Rebuild WikiText-style corpora from Wikipedia Good and Featured articles.

``python -m wikitext_builder --articles good,featured`` lists the articles through the MediaWiki
API (or reads them from an XML dump, a folder of ``.wikitext`` files or a JSON-lines pool), keeps
every fetched revision in a resumable SQLite cache, renders each article to WikiText form
(:mod:`wikitext_builder.render`), and writes ``wiki.{train,valid,test}.{tokens,raw}`` with
``stats.json``, ``manifest.jsonl`` and ``SHA256SUMS``. The package never imports torch.
"""

from wikitext_builder.build import PRESETS, Plan, build_corpus, fill_from_api, fill_from_stream
from wikitext_builder.cache import Cache, CacheError
from wikitext_builder.corpus import MAX_ARTICLE_BYTES, CorpusError, corpus_statistics, write_corpus
from wikitext_builder.sources import (
    Article,
    MediaWikiClient,
    Skipped,
    SourceError,
    iter_dump,
    iter_folder,
    iter_jsonl,
)

__all__ = [
    "MAX_ARTICLE_BYTES",
    "PRESETS",
    "Article",
    "Cache",
    "CacheError",
    "CorpusError",
    "MediaWikiClient",
    "Plan",
    "Skipped",
    "SourceError",
    "build_corpus",
    "corpus_statistics",
    "fill_from_api",
    "fill_from_stream",
    "iter_dump",
    "iter_folder",
    "iter_jsonl",
    "write_corpus",
]
