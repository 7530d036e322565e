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
import html
import json
import math
import os
import re
import shlex
import shutil
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path

import pandas as pd

from leaderboard.bootstrap import Comparison, paired_bootstrap
from leaderboard.records import Collection, Result, find_token_log_probs, load_verified
from leaderboard.table import (
    BASELINE,
    KINDS,
    NUMBER_COLUMNS,
    UNRANKED_KINDS,
    USER_MODEL,
    Run,
    file_stem,
    number_text,
    table_columns,
    write_tables,
)
from wikitext_toolkit_core.catalogue import BENCHMARKS
from wikitext_toolkit_core.cli import UsageError
from wikitext_toolkit_core.files import waiting_lock, write_atomically

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
    """One comparison of a significance matrix: row model A against column model B."""

    comparison: Comparison
    a: str
    b: str


def result_slug(result: Result) -> str:
    """The name of a result's page and files: its file's name (made safe, at most 80
    characters) and the first 12 hex digits of its content's SHA-256."""
    digest = hashlib.sha256(result.path.read_bytes()).hexdigest()[:12]
    return f"{re.sub(r'[^A-Za-z0-9._-]+', '_', result.path.stem)[:80]}-{digest}"


# ---- building --------------------------------------------------------------------------------


def build_site(
    tables: dict[str, pd.DataFrame], collection: Collection, out: Path, settings: SiteSettings
) -> list[Path]:
    """Write the site of ``tables`` (:func:`leaderboard.table.ranked_tables`, each row's ``run``
    kept) to ``out``; returns the files written, in order. Files of an earlier build that this
    one does not write are removed.

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
    tables: dict[str, pd.DataFrame], collection: Collection, out: Path, settings: SiteSettings
) -> list[Path]:
    """Write the files of the site of ``tables`` to ``out``; returns them, in order."""
    slugs = {result.path: result_slug(result) for frame in tables.values() for result in _results(frame)}
    written = [write_atomically(out / name, (ASSETS / name).read_bytes()) for name in ("site.css", "site.js")]
    for frame in tables.values():
        for result in _results(frame):
            written += _write_result(result, slugs[result.path], out)
    plain = {dataset: frame[table_columns(frame)] for dataset, frame in tables.items()}
    written += write_tables(plain, out / "tables", ["csv"])
    sections = []
    for dataset, frame in tables.items():
        bars = _write_bars(dataset, plain[dataset], out)
        written += [bars] if bars else []
        matrices = _significance(frame, settings)
        sections.append(_table_section(dataset, frame, slugs, matrices, bars, out, settings))
    figures = _copy_figures(settings.figures, out)
    written += figures
    index = _page(settings.title, _index_body(settings.title, sections, figures, collection, out), "")
    written.append(write_atomically(out / "index.html", index))
    return written


def _results(frame: pd.DataFrame) -> list[Result]:
    """The results behind a table's measured rows, in row order."""
    return [result for run in frame["run"] if isinstance(run, Run) for result in run.results]


def _write_result(result: Result, slug: str, out: Path) -> list[Path]:
    """A result's page and the copies of its files."""
    files = [write_atomically(out / "files" / f"{slug}.json", result.path.read_bytes())]
    log_probs = find_token_log_probs(result)
    if log_probs is not None:
        files.append(write_atomically(out / "files" / f"{slug}.logprobs.npy", log_probs.read_bytes()))
    page = _page(_result_title(result), _result_body(result, slug, log_probs is not None), "../")
    return [write_atomically(out / "results" / f"{slug}.html", page), *files]


def _write_bars(dataset: str, frame: pd.DataFrame, out: Path) -> Path | None:
    """The table's bar chart (None when no row has a perplexity)."""
    from leaderboard.plots import plot_bars

    try:
        return plot_bars(frame, f"{dataset} leaderboard", out / "plots" / f"{file_stem(dataset)}_bars.png")
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


def _significance(frame: pd.DataFrame, settings: SiteSettings) -> list[list[list[Cell | None]]]:
    """Per group of ranked rows measured here that scored the same test tokens under the same
    protocol (two rows or more), the paired bootstrap of every pair: ``matrix[i][j]`` compares
    row ``i`` (A) with row ``j`` (B); None on the diagonal."""
    groups: dict[tuple, list[tuple[str, Result]]] = defaultdict(list)
    for _, row in frame.iterrows():
        run = row["run"]
        if row["kind"] in COMPARED_KINDS and not pd.isna(row["rank"]) and run.test is not None:
            groups[_comparable(run.test)].append((str(row["model"]), run.test))
    return [_matrix(members, settings) for members in groups.values() if len(members) > 1]


def _comparable(result: Result) -> tuple:
    """What two results must share to be compared token by token, protocol included."""
    record = result.record
    return (record.protocol.identity, record.vocab_sha256, record.dataset_sha256, record.tokens)


def _matrix(members: list[tuple[str, Result]], settings: SiteSettings) -> list[list[Cell | None]]:
    log_probs = [load_verified(result)[1] for _, result in members]
    size = len(members)
    matrix: list[list[Cell | None]] = [[None] * size for _ in range(size)]
    for i in range(size):
        for j in range(i + 1, size):
            comparison = paired_bootstrap(
                log_probs[i],
                log_probs[j],
                samples=settings.samples,
                seed=settings.seed,
                confidence=settings.confidence,
            )
            matrix[i][j] = Cell(comparison, members[i][0], members[j][0])
            matrix[j][i] = Cell(_mirrored(comparison), members[j][0], members[i][0])
    return matrix


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


# ---- HTML --------------------------------------------------------------------------------------


def _e(value: object) -> str:
    """``value`` as HTML text, quotes included."""
    return html.escape(str(value), quote=True)


def _page(title: str, body: str, root: str) -> str:
    """A complete page; ``root``: the relative path from the page to the site's top."""
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{_e(title)}</title>\n"
        '<link rel="icon" href="data:,">\n'  # no favicon request
        f'<link rel="stylesheet" href="{root}site.css">\n'
        f'<script src="{root}site.js" defer></script>\n</head>\n<body>\n{body}\n</body>\n</html>\n'
    )


def _index_body(
    title: str, sections: list[str], figures: list[Path], collection: Collection, out: Path
) -> str:
    counts = (
        f"{len(collection.results)} result file(s) read, {len(collection.rejected)} rejected, "
        f"{len(collection.unverified)} unverified, {len(collection.unaudited)} unaudited"
    )
    filters = "".join(
        f'<label><input type="checkbox" value="{_e(kind)}" checked> {_e(kind)}</label>' for kind in KINDS
    )
    parts = [
        f"<h1>{_e(title)}</h1>",
        f'<p class="muted">{_e(counts)}. Word-level rows are ranked by test perplexity; '
        "unaudited and unverified rows are flagged and never ranked. Click a column's heading to "
        "sort by it.</p>",
        f'<fieldset id="filters"><legend>Show</legend>{filters}</fieldset>',
        *sections,
    ]
    if figures:
        images = "".join(_figure(path.relative_to(out).as_posix(), path.stem) for path in figures)
        parts.append(f'<section id="figures"><h2>Figures</h2>{images}</section>')
    return "\n".join(parts)


def _figure(source: str, caption: str) -> str:
    return (
        f'<figure><img src="{_e(source)}" alt="{_e(caption)}"><figcaption>{_e(caption)}</figcaption></figure>'
    )


def _table_section(
    dataset: str,
    frame: pd.DataFrame,
    slugs: dict[Path, str],
    matrices: list[list[list[Cell | None]]],
    bars: Path | None,
    out: Path,
    settings: SiteSettings,
) -> str:
    columns = table_columns(frame)
    head = "".join(
        f'<th data-type="{"number" if c == "rank" or c in NUMBER_COLUMNS else "text"}">'
        f'<button type="button">{_e(c)}</button></th>'
        for c in columns
    )
    rows = "\n".join(_row(row, columns, slugs) for _, row in frame.iterrows())
    csv = f"tables/{file_stem(dataset)}.csv"
    parts = [
        f'<section id="{_e(file_stem(dataset))}"><h2>{_e(dataset)}</h2>',
        f'<p><a href="{_e(csv)}">{_e(csv)}</a></p>',
        f'<table class="leaderboard" data-dataset="{_e(dataset)}"><thead><tr>{head}</tr></thead>'
        f"<tbody>\n{rows}\n</tbody></table>",
    ]
    parts += [_matrix_html(matrix, settings) for matrix in matrices]
    if bars is not None:
        parts.append(_figure(bars.relative_to(out).as_posix(), f"{dataset} leaderboard"))
    parts.append("</section>")
    return "\n".join(parts)


def _row(row: pd.Series, columns: list[str], slugs: dict[Path, str]) -> str:
    run = row["run"] if isinstance(row["run"], Run) else None
    kind = str(row["kind"])
    cells = []
    for column in columns:
        value = row[column]
        if column == "rank" or column in NUMBER_COLUMNS:
            cells.append(_number_cell(column, value, run, slugs))
        elif column == "model":
            cells.append(_model_cell(str(value), kind, run, slugs))
        elif column == "source":
            cells.append(_source_cell(str(value), run, slugs))
        else:
            cells.append(f'<td class="{_e(column)}">{_e(value)}</td>')
    css = "kind-" + re.sub(r"[^a-z]+", "-", kind)
    return f'<tr class="{css}" data-kind="{_e(kind)}">{"".join(cells)}</tr>'


def _number_cell(column: str, value: object, run: Run | None, slugs: dict[Path, str]) -> str:
    missing = value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))
    text = str(int(value)) if column == "rank" and not missing else number_text(column, value)  # type: ignore[call-overload]
    sort_value = "" if missing else repr(float(value))  # type: ignore[arg-type]
    result = {"valid_ppl": run.valid, "test_ppl": run.test}.get(column) if run else None
    if result is not None:
        text = f'<a href="results/{_e(slugs[result.path])}.html">{_e(text)}</a>'
    else:
        text = _e(text)
    return f'<td class="number" data-value="{sort_value}">{text}</td>'


def _model_cell(name: str, kind: str, run: Run | None, slugs: dict[Path, str]) -> str:
    flag = f'<span class="flag">{_e(kind)}</span>' if kind in UNRANKED_KINDS else ""
    first = (run.test or run.valid) if run else None
    text = _e(name) if first is None else f'<a href="results/{_e(slugs[first.path])}.html">{_e(name)}</a>'
    return f'<td class="model" data-value="{_e(name)}">{flag}{text}</td>'


def _source_cell(text: str, run: Run | None, slugs: dict[Path, str]) -> str:
    """A measured row's source files as links to their pages; a published figure's source with
    its address as a link."""
    if run is not None:
        links = [f'<a href="results/{_e(slugs[r.path])}.html">{_e(r.path.name)}</a>' for r in run.results]
        return f'<td class="source">{"<br>".join(links)}</td>'
    parts = re.split(r"(https?://\S+)", text)
    cells = "".join(f'<a href="{_e(p)}">{_e(p)}</a>' if i % 2 else _e(p) for i, p in enumerate(parts))
    return f'<td class="source">{cells}</td>'


def _matrix_html(matrix: list[list[Cell | None]], settings: SiteSettings) -> str:
    names = [next(cell.a for cell in row if cell is not None) for row in matrix]
    level = f"{100 * settings.confidence:g}%"
    head = "".join(f'<th scope="col">{_e(name)}</th>' for name in names)
    rows = []
    for name, row in zip(names, matrix):
        cells = "".join(_matrix_cell(cell, level) for cell in row)
        rows.append(f'<tr><th scope="row">{_e(name)}</th>{cells}</tr>')
    first = next(cell for cell in matrix[0] if cell is not None).comparison
    caption = (
        f"Significance: row minus column test perplexity, {level} interval below each figure "
        f"(hover for the p-value); paired bootstrap, {first.samples:,} resamples of circular blocks "
        f"of {first.block_length:,} tokens over {first.tokens:,} tokens, seed {first.seed}. Green: the "
        "row model is significantly better; red: significantly worse; grey: no significant difference."
    )
    return (
        f'<table class="matrix"><caption>{_e(caption)}</caption><thead><tr><th></th>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def _matrix_cell(cell: Cell | None, level: str) -> str:
    if cell is None:
        return '<td class="self"></td>'
    result = cell.comparison
    low, high = result.ppl_ci
    verdict = ("better" if result.ppl_diff < 0 else "worse") if result.significant else "tie"
    p_text = f"p <= {result.p_floor:.2g}" if result.p_value <= result.p_floor else f"p = {result.p_value:.4g}"
    hover = (
        f"{cell.a} minus {cell.b}: {result.ppl_diff:+.2f} perplexity, {level} CI [{low:+.2f}, "
        f"{high:+.2f}]; {p_text}"
    )
    strength = min(1.0, 0.25 + 2.5 * abs(result.nll_diff))
    colour = {"better": "46, 160, 67", "worse": "207, 34, 46"}.get(verdict)
    style = f' style="background-color: rgba({colour}, {strength:.2f})"' if colour else ""
    return (
        f'<td class="{verdict}" title="{_e(hover)}"{style}>{result.ppl_diff:+.2f}'
        f"<small>[{low:+.2f}, {high:+.2f}]</small></td>"
    )


# ---- result pages ------------------------------------------------------------------------------


def _result_title(result: Result) -> str:
    record = result.record
    return f"{record.model} on {record.dataset}/{record.split}"


def _result_body(result: Result, slug: str, has_log_probs: bool) -> str:
    record = result.record
    figures = (
        f"perplexity {record.perplexity:.2f}, mean NLL {record.nll:.4f} nats per token over "
        f"{record.tokens:,} tokens"
    )
    downloads = [f'<a href="../files/{_e(slug)}.json">result JSON</a>']
    if has_log_probs:
        downloads.append(f'<a href="../files/{_e(slug)}.logprobs.npy">per-token log-probabilities (.npy)</a>')
    facts = "".join(f"<tr><th>{_e(name)}</th><td>{value}</td></tr>" for name, value in _facts(result))
    return "\n".join(
        [
            '<p><a href="../index.html">&larr; leaderboard</a></p>',
            f"<h1>{_e(_result_title(result))}</h1>",
            f"<p>{_e(figures)}</p>",
            f'<table class="facts"><tbody>{facts}</tbody></table>',
            "<h2>Reproduce</h2>",
            f"<pre><code>{_e(reproduce_command(result))}</code></pre>",
            f"<h2>Download</h2><p>{' &middot; '.join(downloads)}</p>",
        ]
    )


def _json_block(value: object) -> str:
    return f"<pre>{_e(json.dumps(value, indent=2, sort_keys=True))}</pre>"


def _code(text: object) -> str:
    return f"<code>{_e(text)}</code>"


def _facts(result: Result) -> list[tuple[str, str]]:
    """The rows of a result page's table: (heading, HTML)."""
    record = result.record
    metadata = record.plugin_metadata or {}
    args = ", ".join(f"{key}={_arg(value)}" for key, value in sorted(record.model_args.items()))
    protocol = f"{record.protocol.kind}, batch size {record.protocol.batch_size}, BPTT {record.protocol.bptt}"
    return [
        ("plugin", _code(record.model)),
        ("arguments", _code(args) if args else "none"),
        ("plugin code", _plugin_code(record.plugin_code)),
        ("checkpoint", _code(record.checkpoint) if record.checkpoint else "none"),
        ("checkpoint sha256", _optional_code(metadata.get("checkpoint_sha256"))),
        ("dataset", f"{_code(record.dataset)} ({_e(record.dataset_path or 'path not recorded')})"),
        (f"{record.split} split sha256", _code(record.dataset_sha256)),
        ("train split sha256", _optional_code(record.train_sha256)),
        ("vocabulary", f"{record.vocab_size:,} words, sha256 {_code(record.vocab_sha256)}"),
        ("data files checked", _e(DATA_CHECKS[record.dataset_verified])),
        ("protocol", _e(protocol)),
        ("audits", _e(_audit_state(result))),
        ("probability audit", _json_block(record.audit) if record.audit else "not run"),
        ("causality audit", _json_block(record.causality_audit) if record.causality_audit else "not run"),
        ("figures recomputed", _e(RECOMPUTED[result.verified])),
        (
            "hardware",
            _e(f"{record.device or 'not recorded'}; torch {record.torch_version or 'not recorded'}"),
        ),
        ("time", _e(_time(result))),
        ("commit", _optional_code(record.git_commit)),
        ("date", _e(record.created or "not recorded")),
        ("plugin metadata", _json_block(metadata) if metadata else "none"),
    ]


NOT_RECORDED = "not recorded"
#: What a result's ``dataset_verified`` says, on its page.
DATA_CHECKS = {True: "against the release's checksums", False: "no known checksum", None: "not recorded"}
#: What a result's :attr:`Result.verified` says, on its page.
RECOMPUTED = {
    True: "yes, from the per-token log-probabilities",
    False: "no: no per-token log-probabilities (unverified)",
}


def _optional_code(text: str | None) -> str:
    return _code(text) if text else "not recorded"


def _plugin_code(code: dict | None) -> str:
    if code is None:
        return "not recorded"
    return f"sha256 {_code(code['sha256'])} of {_e(code['source'])} {_code(code['path'])}"


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
        words += ["--model-args", ",".join(f"{k}={_arg(v)}" for k, v in sorted(record.model_args.items()))]
    if record.checkpoint:
        words += ["--checkpoint", path(record.checkpoint)]
    if record.protocol.kind != "stream":
        words += ["--protocol", record.protocol.kind]
    words += ["--batch-size", str(record.protocol.batch_size), "--bptt", str(record.protocol.bptt)]
    return shlex.join(words)


def _arg(value: object) -> str:
    """A model argument as ``--model-args`` spells it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "none" if value is None else str(value)
