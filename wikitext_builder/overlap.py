"""The builder's overlap filter: ``--exclude-overlap NAME[:SPLITS]`` drops the articles of the
corpus being built that overlap a benchmark's articles.

An article is dropped when it holds at least ``--exclude-threshold`` (default
:data:`DEFAULT_THRESHOLD`) of the checked 13-grams of one article of a named benchmark split,
matched as ``python -m harness contamination`` matches them (:mod:`wikitext_toolkit_core.ngrams`: both sides
normalised alike, a benchmark ``<unk>`` a wildcard). The check reads each article as
rendered (what the corpus would hold), after rendering and before the split assignment, so the
valid and test splits keep the sizes asked for; every split is filled from the articles kept.
A dropped article is named in ``stats.json`` (reason ``benchmark overlap``, with the benchmark
articles it overlaps) and in ``manifest.jsonl`` (split ``excluded``), so a rebuild from the
manifest drops it again.

Only :func:`load_check` imports :mod:`wikitext_toolkit_core.ngrams` and
:mod:`wikitext_toolkit_core.benchmarks` (numpy): a build without the option imports neither.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wikitext_builder.sources import Overlap, Skipped, SourceError
from wikitext_toolkit_core.format import SPLITS

if TYPE_CHECKING:
    from wikitext_toolkit_core.ngrams import TestSide

#: Share of a benchmark article's n-grams that an article of the corpus must hold to be dropped.
#: On 60 older revisions (2006-2015) of WikiText-2 articles, rendered, 56 hold at least 0.2 of
#: their WikiText-2 article (the 4 others were largely rewritten: 0.047 to 0.128); across the
#: shared 1,500-article pool, the most an article holds of an unrelated WikiText-2 valid/test
#: article is 0.107 (a sibling in a series of near-identical articles: another Boat Race).
DEFAULT_THRESHOLD = 0.2
#: The benchmark splits checked when ``NAME`` comes without ``:SPLITS``.
DEFAULT_SPLITS = ("valid", "test")
#: The reason of a dropped article in ``stats.json``, and its split in ``manifest.jsonl``.
REASON, EXCLUDED_SPLIT = "benchmark overlap", "excluded"


def parse_specs(values: Sequence[str]) -> tuple[str, ...]:
    """The ``--exclude-overlap`` values (each ``NAME[:SPLITS]``, several comma-separated; a bare
    split name after ``NAME:SPLIT`` adds to its splits: ``wikitext-2:valid,test``) as
    ``NAME:SPLIT,...`` strings, one per benchmark, splits in file order; a directory ``NAME`` is
    made absolute (a merge elsewhere finds it). A ``ValueError`` names a bad value."""
    from wikitext_toolkit_core.catalogue import BENCHMARKS

    chosen: dict[str, set[str]] = {}
    for value in values:
        current: set[str] | None = None  # the splits of the last NAME:SPLIT, which bare splits extend
        for item in (part.strip() for part in value.split(",")):
            if current is not None and item in SPLITS:
                current.add(item)
                continue
            name, colon, split = item.rpartition(":") if ":" in item else (item, "", "")
            if not name:
                raise ValueError(f"--exclude-overlap {value}: a benchmark name is missing")
            if colon and split not in SPLITS:
                raise ValueError(f"--exclude-overlap {value}: unknown split {split!r} ({', '.join(SPLITS)})")
            if name not in BENCHMARKS:
                if not Path(name).is_dir():
                    raise ValueError(
                        f"--exclude-overlap {value}: {name!r} is neither a benchmark "
                        f"({', '.join(BENCHMARKS)}) nor a directory"
                    )
                name = str(Path(name).resolve())
            current = chosen.setdefault(name, set())
            current.update([split] if colon else DEFAULT_SPLITS)
            current = current if colon else None
    return tuple(f"{name}:{','.join(s for s in SPLITS if s in splits)}" for name, splits in chosen.items())


class OverlapCheck:
    """The benchmark splits of ``--exclude-overlap``, held in memory as one test side.

    Attributes:
        test: the units (articles) of every split checked, in order.
        origins: per unit, its benchmark and split.
        threshold: the share of a benchmark article's n-grams that makes an article overlap.
        files: the benchmark split files read (inputs a build must not overwrite).
        settings: what ``stats.json`` records (``exclude_overlap``: the benchmarks as parsed,
            the threshold, the n-gram length and each split file's sha256).
    """

    def __init__(
        self,
        test: TestSide,
        origins: list[tuple[str, str]],
        threshold: float,
        files: list[Path],
        settings: dict[str, Any],
    ) -> None:
        self.test, self.origins, self.threshold = test, origins, threshold
        self.files, self.settings = files, settings

    def overlapping(self, articles: Iterable[tuple[str, str]]) -> dict[str, tuple[Overlap, ...]]:
        """Of ``articles`` (title, rendered text; streamed once), those holding at least
        ``threshold`` of a benchmark article's n-grams, with every such benchmark article,
        most overlapped first."""
        from wikitext_toolkit_core.ngrams import Document

        overlaps = self.test.scan(Document(title, [text]) for title, text in articles)
        found: dict[str, list[Overlap]] = {}
        for unit, sources in enumerate(overlaps.sources):
            benchmark, split = self.origins[unit]
            for title, count in sources:  # most first
                share = count / int(overlaps.ngrams[unit])
                if share < self.threshold:
                    break
                article = self.test.units[unit].title
                found.setdefault(title, []).append(Overlap(benchmark, split, article, share))
        return {title: tuple(sorted(items, key=lambda item: -item.overlap)) for title, items in found.items()}


def load_check(specs: Sequence[str], threshold: float) -> OverlapCheck:
    """The check of the benchmark splits ``specs`` (from :func:`parse_specs`), each split file
    verified against its checksum (a missing benchmark is downloaded, as ``python -m harness
    download`` does); a benchmark that cannot be read, or a split without articles, is a
    one-line :class:`SourceError`."""
    from wikitext_toolkit_core.benchmarks import SplitFiles, find_dataset
    from wikitext_toolkit_core.files import DatasetError
    from wikitext_toolkit_core.ngrams import ContaminationError, TestSide

    sides, origins, files, sha256 = [], [], [], {}
    for spec in specs:
        name, _, splits = spec.rpartition(":")
        try:
            dataset = find_dataset(name, SplitFiles)
            for split in splits.split(","):
                sha256[f"{dataset.name}/{split}"] = dataset.verify(split)
                try:
                    side = TestSide.from_split(dataset, split, units="articles")
                except ContaminationError:
                    raise SourceError(
                        f"--exclude-overlap {name}:{split}: {dataset.path(split)} holds no articles "
                        "(level-1 headings ' = Title = ' between blank lines)"
                    ) from None
                sides.append(side)
                origins += [(dataset.name, split)] * len(side.units)
                files.append(dataset.path(split))
        except DatasetError as error:
            raise SourceError(f"--exclude-overlap {spec}: {error}") from None
    test = TestSide.joined(sides)
    settings = {"benchmarks": list(specs), "threshold": threshold, "ngram": test.ngram, "sha256": sha256}
    return OverlapCheck(test, origins, threshold, files, {"exclude_overlap": settings})


def exclusion_record(fields: dict[str, Any], overlaps: Sequence[Overlap], threshold: float) -> dict[str, Any]:
    """The ``manifest.jsonl`` record of a dropped article: its manifest ``fields`` (title, page
    id, revision id, timestamp, sha256), split ``excluded``, the benchmark articles it overlaps
    and the threshold."""
    return {
        **fields,
        "split": EXCLUDED_SPLIT,
        "overlaps": [overlap.to_json() for overlap in overlaps],
        "threshold": threshold,
    }


def skipped_from_record(record: dict[str, Any]) -> Skipped:
    """The ``stats.json`` entry of a dropped article, from its manifest record."""
    overlaps = tuple(Overlap(**overlap) for overlap in record["overlaps"])
    top = overlaps[0]
    detail = (
        f"overlap {top.overlap:.3f} with {top.benchmark}/{top.split} article {top.article!r} "
        f"(threshold {record['threshold']:g})"
    )
    return Skipped(REASON, title=record["title"], detail=detail, overlaps=overlaps)
