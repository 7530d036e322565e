"""``python -m leaderboard site``: the leaderboard as a static web site, built from result files.

The site needs no server and fetches nothing at view time: it works from ``file://`` as from
any static host (GitHub Pages, say). Its files, under the output directory:

- ``index.html``: one table per benchmark, ranked as ``leaderboard build`` ranks it (our rows
  beside the papers'), with sortable columns, filters by kind, unaudited and unverified rows
  flagged; per benchmark the significance matrix of its ranked rows and its bar chart; then the
  figures of ``--figures``.
- ``results/SLUG.html``: a page per result: plugin, arguments, code, checkpoint and its
  checksum, the data files' checksums, protocol, audits, hardware, commit, date, the command
  that reproduces it, and links to ``files/SLUG.json`` and ``files/SLUG.logprobs.npy``, verbatim
  copies of the result and its per-token log-probabilities.
- ``tables/DATASET.csv`` (as ``build`` writes them), ``plots/DATASET_bars.png``,
  ``figures/NAME`` (the ``--figures`` images), ``site.css`` and ``site.js``.

``SLUG`` is the result file's name and the first hex digits of its content's SHA-256, so that
rebuilding the same results gives byte-identical files (nothing records the time of the build,
and the bootstrap is seeded). Everything a result file says is escaped: a model named
``<script>`` is shown as text.

A build writes the site in a staging directory inside the output directory and then moves its
files into place, holding a lock on the directory throughout (:func:`build_site`): a second
build into the same directory waits for the first, and a build killed midway leaves only what
the next one recognises as its own and finishes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import os
import re
import shlex
import shutil
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path

from leaderboard.bootstrap import Comparison, paired_bootstrap
from leaderboard.records import Collection, Result, find_token_log_probs, load_verified
from leaderboard.table import (
    BASELINE,
    KINDS,
    NUMERIC_COLUMNS,
    UNRANKED_KINDS,
    USER_MODEL,
    LeaderboardTable,
    file_stem,
    write_tables,
)
from leaderboard.templating import render
from wikitext_toolkit_core.catalogue import BENCHMARKS
from wikitext_toolkit_core.cli import UsageError
from wikitext_toolkit_core.files import waiting_lock, write_atomically
from wikitext_toolkit_core.result_schema import ResultRecord

#: The file in a site's directory that lists the files the last build wrote, so that the next
#: build removes those it no longer writes, and never touches a directory that is not a site.
MANIFEST = ".leaderboard-site"
#: The file a build holds an ``flock`` on while it writes the site's directory.
LOCK = f"{MANIFEST}.lock"
#: The directory, in the site's, where a build writes the site before moving it into place.
STAGING = f"{MANIFEST}.staging"
#: The style sheet and script every page uses, copied from the package.
ASSETS = Path(__file__).with_name("site_assets")
#: Image files ``--figures`` embeds.
FIGURE_SUFFIXES = (".png", ".jpg", ".jpeg", ".svg", ".gif", ".webp")
#: The kinds of rows the significance matrix compares: ranked rows measured here.
COMPARED_KINDS = (BASELINE, USER_MODEL)


@dataclasses.dataclass(frozen=True)
class SiteSettings:
    """How a site is built.

    Attributes:
        title: the index's heading.
        figures: directories whose images are shown on the index, each under its file name.
        samples, seed, confidence: the paired bootstrap of the significance matrices (as
            ``leaderboard compare`` takes them).
    """

    title: str
    figures: tuple[Path, ...] = ()
    samples: int = 10_000
    seed: int = 0
    confidence: float = 0.95


@dataclasses.dataclass(frozen=True)
class Cell:
    """One comparison of a significance matrix as the index shows it: the row's model (A) against
    the column's (B).

    Attributes:
        verdict: ``better`` (A is significantly better), ``worse`` or ``tie``: the cell's class.
        title: what hovering shows: the difference, its interval and the p-value.
        background: the cell's colour (None for a tie), the stronger the larger the difference.
        difference, interval: A's minus B's test perplexity and its interval, as written.
    """

    verdict: str
    title: str
    background: str | None
    difference: str
    interval: str


@dataclasses.dataclass(frozen=True)
class Matrix:
    """A significance matrix: per model, its name and its row of cells, the ``j``-th comparing it
    with the ``j``-th model (None on the diagonal)."""

    rows: list[tuple[str, list[Cell | None]]]
    caption: str


@dataclasses.dataclass(frozen=True)
class Figure:
    """An image on the index: its path from the index, and its caption (also its ``alt``)."""

    source: str
    caption: str


@dataclasses.dataclass(frozen=True)
class Section:
    """A table's part of the index: the table, its significance matrices and its bar chart."""

    dataset: str
    table: LeaderboardTable
    matrices: list[Matrix]
    bars: Figure | None

    @property
    def stem(self) -> str:
        return file_stem(self.dataset)

    @property
    def csv(self) -> str:
        """The table's CSV, from the index."""
        return f"tables/{self.stem}.csv"


def result_slug(result: Result) -> str:
    """The name of a result's page and files: its file's name (made safe, at most 80
    characters) and the first 12 hex digits of its content's SHA-256."""
    digest = hashlib.sha256(result.path.read_bytes()).hexdigest()[:12]
    return f"{re.sub(r'[^A-Za-z0-9._-]+', '_', result.path.stem)[:80]}-{digest}"


# ---- building --------------------------------------------------------------------------------


def build_site(
    tables: dict[str, LeaderboardTable], collection: Collection, out: Path, settings: SiteSettings
) -> list[Path]:
    """Write the site of ``tables`` (:func:`leaderboard.table.build_tables`) to ``out``; returns
    the files written, in order. Files of an earlier build that this one does not write are
    removed.

    The site is written to ``out/STAGING`` and then moved into place (:func:`_publish`), under
    ``out/LOCK``: a second build waits for the first to finish, and what a build killed midway
    leaves (:func:`holds_a_site_or_nothing`) the next one removes or lists in its manifest."""
    out.mkdir(parents=True, exist_ok=True)
    staging = out / STAGING
    with waiting_lock(out / LOCK, f"--output-dir {out}: another build is writing this site; waiting for it"):
        shutil.rmtree(staging, ignore_errors=True)  # a killed build's
        try:
            written = _write_site(tables, collection, staging, settings)
            names = [path.relative_to(staging).as_posix() for path in written]
            _publish(staging, out, names)
            return [out / name for name in names]
        finally:
            shutil.rmtree(staging, ignore_errors=True)


def _write_site(
    tables: dict[str, LeaderboardTable], collection: Collection, out: Path, settings: SiteSettings
) -> list[Path]:
    """Write the files of the site of ``tables`` to ``out``; returns them, in order."""
    slugs = {result.path: result_slug(result) for table in tables.values() for result in table.results}
    written = [write_atomically(out / name, (ASSETS / name).read_bytes()) for name in ("site.css", "site.js")]
    for table in tables.values():
        for result in table.results:
            written += _write_result(result, slugs[result.path], out)
    written += write_tables(tables, out / "tables", ["csv"])
    sections = []
    for dataset, table in tables.items():
        bars = _write_bars(dataset, table, out)
        written += [bars] if bars else []
        figure = None if bars is None else Figure(bars.relative_to(out).as_posix(), f"{dataset} leaderboard")
        sections.append(Section(dataset, table, _significance(table, settings), figure))
    images = _copy_figures(settings.figures, out)
    written += images
    figures = [Figure(image.relative_to(out).as_posix(), image.stem) for image in images]
    index = _index_page(settings.title, sections, figures, collection, slugs)
    written.append(write_atomically(out / "index.html", index))
    return written


def _index_page(
    title: str, sections: list[Section], figures: list[Figure], collection: Collection, slugs: dict[Path, str]
) -> str:
    """The site's index: ``sections``, then ``figures``; ``slugs``: each result's page name."""
    counts = (
        f"{len(collection.results)} result file(s) read, {len(collection.rejected)} rejected, "
        f"{len(collection.unverified)} unverified, {len(collection.unaudited)} unaudited"
    )
    return render(
        "index.html",
        root="",
        title=title,
        counts=counts,
        kinds=KINDS,
        sections=sections,
        figures=figures,
        slugs=slugs,
        number_columns=NUMERIC_COLUMNS,
        unranked_kinds=UNRANKED_KINDS,
    )


def _write_result(result: Result, slug: str, out: Path) -> list[Path]:
    """A result's page and the copies of its files."""
    files = [write_atomically(out / "files" / f"{slug}.json", result.path.read_bytes())]
    log_probs = find_token_log_probs(result)
    if log_probs is not None:
        files.append(write_atomically(out / "files" / f"{slug}.logprobs.npy", log_probs.read_bytes()))
    page = _result_page(result, slug, log_probs is not None)
    return [write_atomically(out / "results" / f"{slug}.html", page), *files]


def _write_bars(dataset: str, table: LeaderboardTable, out: Path) -> Path | None:
    """The table's bar chart (None when no row has a perplexity)."""
    from leaderboard.plots import plot_bars

    try:
        bars = out / "plots" / f"{file_stem(dataset)}_bars.png"
        return plot_bars(table.frame(), f"{dataset} leaderboard", bars)
    except ValueError:  # no row with a perplexity
        return None


def figure_images(directory: Path) -> list[Path]:
    """The images ``--figures`` copies from ``directory``: its regular files with an image
    suffix (:data:`FIGURE_SUFFIXES`), sorted by name.

    Raises:
        UsageError: one of them is a symbolic link, which could point anywhere (``/etc/passwd``)
            while the site is public.
    """
    images = sorted(path for path in directory.iterdir() if path.suffix.lower() in FIGURE_SUFFIXES)
    for image in images:
        if image.is_symlink():
            raise UsageError(
                f"--figures {directory}: {image.name} is a symbolic link; the site copies regular "
                "files only (copy the image there instead)"
            )
    return [image for image in images if image.is_file()]


def _copy_figures(directories: Sequence[Path], out: Path) -> list[Path]:
    """The images of ``directories`` (:func:`figure_images`; a name taken by an earlier directory
    gets its directory's position as a prefix), copied to ``out/figures``."""
    copied: list[Path] = []
    for number, directory in enumerate(directories, start=1):
        for image in figure_images(directory):
            target = out / "figures" / image.name
            if target in copied:
                target = target.with_name(f"{number}-{image.name}")
            copied.append(write_atomically(target, image.read_bytes()))
    return copied


# ---- the site's directory ----------------------------------------------------------------------


def holds_a_site_or_nothing(out: Path) -> bool:
    """Whether a site may be built in the existing directory ``out``: it holds a site (its
    manifest), or nothing but what a build killed before writing its manifest leaves (the lock,
    the staging directory, a temporary of the manifest)."""
    return (out / MANIFEST).is_file() or all(_is_the_builds_own(entry.name) for entry in out.iterdir())


def _is_the_builds_own(name: str) -> bool:
    """Whether a name in a site's directory is one of a build's own files rather than the
    site's: the manifest, the lock, the staging directory, or a temporary of the manifest
    (``.MANIFEST.PID-RANDOM.tmp``, :func:`wikitext_toolkit_core.files.write_atomically`)."""
    return name in (MANIFEST, LOCK, STAGING) or (name.startswith(f".{MANIFEST}.") and name.endswith(".tmp"))


def _publish(staging: Path, out: Path, names: list[str]) -> None:
    """Move the files of a site built in ``staging`` (``names``, relative paths) into ``out``,
    remove those the previous build wrote and this one did not, and list this one's in the
    manifest. While the files move, the manifest lists the files of both builds, so that a build
    killed meanwhile leaves none of its files unlisted."""
    _check_nothing_in_the_way(out, names)
    previous = _listed_files(out)
    _write_manifest(out, previous | set(names))
    for name in names:
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        os.replace(staging / name, out / name)
    _remove_files(out, previous - set(names))
    _write_manifest(out, names)


def _check_nothing_in_the_way(out: Path, names: Iterable[str]) -> None:
    """Refuse, in one line, a directory where the site writes a file, or a file where it keeps
    a folder: neither is the site's own (it makes neither), so neither is removed."""
    for name in sorted(names):
        for folder in Path(name).parents[:-1]:  # the last parent is "." (``out`` itself)
            if os.path.lexists(out / folder) and not (out / folder).is_dir():
                raise UsageError(
                    f"--output-dir {out}: {folder.as_posix()} is a file, where the site keeps a folder; "
                    "move it away or choose another directory"
                )
        if (out / name).is_dir() and not (out / name).is_symlink():
            raise UsageError(
                f"--output-dir {out}: {name} is a directory, where the site writes a file; move it "
                "away or choose another directory"
            )


def _listed_files(out: Path) -> set[str]:
    """The files the manifest of the site in ``out`` lists (none without a manifest)."""
    manifest = out / MANIFEST
    return set(manifest.read_text(encoding="utf-8").splitlines()) if manifest.is_file() else set()


def _write_manifest(out: Path, names: Iterable[str]) -> None:
    """List ``names`` (relative paths) in the manifest of the site ``out``, sorted."""
    write_atomically(out / MANIFEST, "".join(f"{name}\n" for name in sorted(names)))


def _remove_files(out: Path, names: Iterable[str]) -> None:
    """Remove the files ``names`` of the site ``out``; whatever a hand-edited manifest says, only
    regular files inside ``out`` (never a directory, a link, or a file outside)."""
    top = out.resolve()
    for name in names:
        path = out / name
        folder = path.parent.resolve()
        if (folder == top or top in folder.parents) and path.is_file() and not path.is_symlink():
            path.unlink()


# ---- significance ------------------------------------------------------------------------------


def _significance(table: LeaderboardTable, settings: SiteSettings) -> list[Matrix]:
    """Per group of ranked rows measured here that scored the same test tokens under the same
    protocol (two rows or more), the paired bootstrap of every pair."""
    groups: dict[tuple, list[tuple[str, Result]]] = defaultdict(list)
    for row in table.rows:
        test = row.result_of("test_ppl")
        if row.kind in COMPARED_KINDS and row.rank is not None and test is not None:
            groups[_comparable(test)].append((row.model, test))
    return [_matrix(members, settings) for members in groups.values() if len(members) > 1]


def _comparable(result: Result) -> tuple:
    """What two results must share to be compared token by token, protocol included."""
    record = result.record
    return (record.protocol.identity, record.vocab_sha256, record.dataset_sha256, record.tokens)


def _matrix(members: list[tuple[str, Result]], settings: SiteSettings) -> Matrix:
    """The significance matrix of ``members`` (name, test result): every pair compared, both ways."""
    names = [name for name, _ in members]
    log_probs = [load_verified(result)[1] for _, result in members]
    comparisons = {
        (i, j): paired_bootstrap(
            log_probs[i],
            log_probs[j],
            samples=settings.samples,
            seed=settings.seed,
            confidence=settings.confidence,
        )
        for i, j in itertools.combinations(range(len(members)), 2)
    }
    level = f"{100 * settings.confidence:g}%"

    def cell(i: int, j: int) -> Cell | None:
        if i == j:
            return None
        comparison = comparisons[i, j] if i < j else _mirrored(comparisons[j, i])
        return _cell(comparison, names[i], names[j], level)

    rows = [(name, [cell(i, j) for j in range(len(names))]) for i, name in enumerate(names)]
    return Matrix(rows, _caption(comparisons[0, 1], level))


def _mirrored(comparison: Comparison) -> Comparison:
    """B against A from A against B: the differences and their intervals negated."""
    low, high = comparison.ppl_ci
    nll_low, nll_high = comparison.nll_ci
    return dataclasses.replace(
        comparison,
        ppl_a=comparison.ppl_b,
        ppl_b=comparison.ppl_a,
        ppl_diff=-comparison.ppl_diff,
        ppl_ci=(-high, -low),
        nll_diff=-comparison.nll_diff,
        nll_ci=(-nll_high, -nll_low),
    )


def _cell(comparison: Comparison, a: str, b: str, level: str) -> Cell:
    """How the matrix shows ``a`` against ``b``; ``level``: the intervals' confidence (``95%``)."""
    low, high = comparison.ppl_ci
    if comparison.significant:
        verdict = "better" if comparison.ppl_diff < 0 else "worse"
    else:
        verdict = "tie"
    if comparison.p_value <= comparison.p_floor:
        p_text = f"p <= {comparison.p_floor:.2g}"
    else:
        p_text = f"p = {comparison.p_value:.4g}"
    title = (
        f"{a} minus {b}: {comparison.ppl_diff:+.2f} perplexity, {level} CI [{low:+.2f}, "
        f"{high:+.2f}]; {p_text}"
    )
    strength = min(1.0, 0.25 + 2.5 * abs(comparison.nll_diff))
    colour = {"better": "46, 160, 67", "worse": "207, 34, 46"}.get(verdict)
    background = None if colour is None else f"rgba({colour}, {strength:.2f})"
    return Cell(verdict, title, background, f"{comparison.ppl_diff:+.2f}", f"[{low:+.2f}, {high:+.2f}]")


def _caption(comparison: Comparison, level: str) -> str:
    """A matrix's caption: how to read it, and the bootstrap's settings (its first comparison's)."""
    return (
        f"Significance: row minus column test perplexity, {level} interval below each figure "
        f"(hover for the p-value); paired bootstrap, {comparison.samples:,} resamples of circular blocks "
        f"of {comparison.block_length:,} tokens over {comparison.tokens:,} tokens, seed {comparison.seed}. "
        "Green: the row model is significantly better; red: significantly worse; grey: no significant "
        "difference."
    )


# ---- result pages ------------------------------------------------------------------------------


def _result_title(result: Result) -> str:
    record = result.record
    return f"{record.model} on {record.dataset}/{record.split}"


def _result_page(result: Result, slug: str, has_log_probs: bool) -> str:
    """A result's page; ``slug``: its name (:func:`result_slug`); ``has_log_probs``: whether the
    site holds its per-token log-probabilities."""
    record = result.record
    figures = (
        f"perplexity {record.perplexity:.2f}, mean NLL {record.nll:.4f} nats per token over "
        f"{record.tokens:,} tokens"
    )
    return render(
        "result.html",
        root="../",
        title=_result_title(result),
        record=record,
        metadata=record.plugin_metadata or {},
        arguments=_model_args(record, ", "),
        figures=figures,
        audits=_audit_state(result),
        recomputed=RECOMPUTED[result.verified],
        data_checks=DATA_CHECKS[record.dataset_verified],
        time=_time(result),
        command=reproduce_command(result),
        slug=slug,
        has_log_probs=has_log_probs,
    )


#: What a result's ``dataset_verified`` says, on its page.
DATA_CHECKS = {True: "against the release's checksums", False: "no known checksum", None: "not recorded"}
#: What a result's :attr:`Result.verified` says, on its page.
RECOMPUTED = {
    True: "yes, from the per-token log-probabilities",
    False: "no: no per-token log-probabilities (unverified)",
}


def _audit_state(result: Result) -> str:
    reasons = result.unaudited_reasons
    return "not audited: " + "; ".join(reasons) if reasons else "the audits that apply passed"


def _time(result: Result) -> str:
    record = result.record
    if not record.runtime_seconds or not record.tokens_per_second:
        return "not recorded"
    return f"{record.runtime_seconds:,.1f} s, {record.tokens_per_second:,.0f} tokens per second"


def reproduce_command(result: Result) -> str:
    """The ``python -m harness eval`` command line that scores ``result`` again, run from the
    toolkit's checkout (a recorded ``<repo>/`` path is relative to it)."""
    record = result.record

    def path(text: str) -> str:
        return text.removeprefix("<repo>/")

    dataset = record.dataset if record.dataset in BENCHMARKS else path(record.dataset_path or record.dataset)
    words = ["python", "-m", "harness", "eval", record.model, "--dataset", dataset, "--split", record.split]
    if record.model_args:
        words += ["--model-args", _model_args(record, ",")]
    if record.checkpoint:
        words += ["--checkpoint", path(record.checkpoint)]
    if record.protocol.kind != "stream":
        words += ["--protocol", record.protocol.kind]
    words += ["--batch-size", str(record.protocol.batch_size), "--bptt", str(record.protocol.bptt)]
    return shlex.join(words)


def _model_args(record: ResultRecord, separator: str) -> str:
    """A result's model arguments as ``--model-args`` spells them, sorted, joined by
    ``separator``."""
    return separator.join(f"{key}={_arg(value)}" for key, value in sorted(record.model_args.items()))


def _arg(value: object) -> str:
    """A model argument as ``--model-args`` spells it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "none" if value is None else str(value)
