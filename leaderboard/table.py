"""Leaderboard tables: the results measured here beside the published figures, ranked by test
perplexity.

Columns (every format): ``rank, model, params_millions, valid_ppl, test_ppl, kind, source,
hardware, date, commit, notes``. ``kind`` says whose figure a row is: ``reported`` (a published
figure, from ``reported.csv``), ``reproduced baseline`` (one of our result files for one of this
toolkit's own models: the ``baselines`` plugins and the reference unigram), ``user model`` (one
of our result files for any other plugin), ``subword`` (one of our result files for a subword
model scored through its attribution to the word-level tokens, e.g. the ``hf`` plugin: same
tokens and protocol, but the probability audit does not apply), ``unaudited`` (one of our
result files that does not show the audits that apply to it passed, shown only when asked for),
or ``unverified`` (one of our result files without its per-token log-probabilities, so that its
figures could not be recomputed: :attr:`records.Result.verified`).
Word-level rows are ranked by test perplexity (ties share a rank); subword rows come after them,
ranked among themselves; rows without a test figure come after their section, unranked, ordered
by valid perplexity; unaudited and unverified rows come last, never ranked.

Each table is a :class:`LeaderboardTable` of typed :class:`LeaderboardRow` s, in rank order:
what every format reads (CSV, Markdown, the HTML page of :func:`to_html` and the site).

A table gains two columns per split after ``test_ppl`` when one of its rows carries a
contamination report of that split (:mod:`leaderboard.clean_subset`): ``clean_test_ppl``, the
perplexity on the split's units that the model's training corpus does not contain, and
``test_contaminated_pct``, the percentage of the split's tokens in the units it does (likewise
``clean_valid_ppl``, ``valid_contaminated_pct``); rows without a report show ``-`` there. A
table with no report has exactly the columns above.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import re
from collections import defaultdict
from collections.abc import Hashable, Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from leaderboard.clean_subset import CleanFigures
from leaderboard.records import TABLE_SPLITS, Collection, Result, run_key
from leaderboard.templating import render
from wikitext_toolkit_core.files import write_atomically
from wikitext_toolkit_core.result_schema import Protocol, ResultRecord, adaptation_of

COLUMNS = [
    "rank",
    "model",
    "params_millions",
    "valid_ppl",
    "test_ppl",
    "kind",
    "source",
    "hardware",
    "date",
    "commit",
    "notes",
]

#: Per split, the columns of a contamination report: the clean perplexity and the percentage of
#: the split's tokens that are contaminated (in a table only when a row has such a report).
CLEAN_COLUMNS = {split: (f"clean_{split}_ppl", f"{split}_contaminated_pct") for split in TABLE_SPLITS}
#: Every contamination column, in table order.
ALL_CLEAN_COLUMNS = [column for pair in CLEAN_COLUMNS.values() for column in pair]
#: Columns written as numbers (at most two decimals).
NUMBER_COLUMNS = ("params_millions", "valid_ppl", "test_ppl", *ALL_CLEAN_COLUMNS)
#: The number columns that hold a perplexity.
PERPLEXITY_COLUMNS = ("valid_ppl", "test_ppl", *(ppl for ppl, _ in CLEAN_COLUMNS.values()))
#: Every column of numbers, the rank's included (right-aligned in Markdown, sorted as numbers on
#: the site).
NUMERIC_COLUMNS = ("rank", *NUMBER_COLUMNS)
#: What a contamination column shows for a row without a report.
NO_REPORT = "-"

REPORTED_CSV = Path(__file__).with_name("reported.csv")
REPORTED_COLUMNS = [
    "dataset",
    "model",
    "params_millions",
    "valid_ppl",
    "valid_pm",
    "test_ppl",
    "test_pm",
    "source",
    "url",
    "table",
    "date",
    "notes",
    "verified_by",
]

#: The paper benchmarks: each gets a table even with no result of ours (the reported rows).
PAPER_DATASETS = ("ptb", "wikitext-2", "wikitext-103")

#: ``kind`` of a published figure.
REPORTED = "reported"
#: ``kind`` of a result of one of this toolkit's own models (:func:`is_baseline`).
BASELINE = "reproduced baseline"
#: ``kind`` of a result of any other model.
USER_MODEL = "user model"
#: ``kind`` of a result that does not show both audits passed, whoever's model it is.
UNAUDITED = "unaudited"
#: ``kind`` of a result whose figures could not be recomputed from its per-token log-probabilities
#: (the file is missing), whoever's model it is.
UNVERIFIED = "unverified"
#: ``kind`` of a result of a subword model (its own section, ranked separately).
SUBWORD = "subword"
#: Every ``kind``, in the order ``build`` counts them.
KINDS = (BASELINE, USER_MODEL, SUBWORD, REPORTED, UNAUDITED, UNVERIFIED)
#: The kinds of rows that are shown but never ranked, after every ranked row.
UNRANKED_KINDS = (UNAUDITED, UNVERIFIED)


def is_baseline(model: str) -> bool:
    """Whether a result's ``model`` (``module`` or ``module:attribute``) is one of this toolkit's
    own models: a module of the ``baselines`` package, or the harness's reference unigram."""
    module = model.partition(":")[0]
    return module.startswith("baselines.") or module == "harness.plugins.unigram"


def load_reported(path: str | Path = REPORTED_CSV) -> pd.DataFrame:
    """The versioned table of published results (one row per dataset and model)."""
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    missing = [column for column in REPORTED_COLUMNS if column not in frame.columns]
    if missing:
        raise ValueError(f"{path}: missing columns {', '.join(missing)}")
    for column in ("params_millions", "valid_ppl", "test_ppl"):
        frame[column] = pd.to_numeric(frame[column].replace("", None), errors="raise")
    return frame


def _reported_rows(reported: pd.DataFrame, dataset: str) -> list[LeaderboardRow]:
    """The rows of ``dataset``'s published figures (:func:`load_reported`)."""
    rows = []
    for record in reported[reported["dataset"] == dataset].to_dict("records"):
        notes = []
        if record["valid_pm"]:
            notes.append(f"valid ± {record['valid_pm']}")
        if record["test_pm"]:
            notes.append(f"test ± {record['test_pm']}")
        if record["notes"]:
            notes.append(record["notes"])
        where = f", {record['table']}" if record["table"] else ""
        rows.append(
            LeaderboardRow(
                model=record["model"],
                params_millions=_figure_or_none(record["params_millions"]),
                valid_ppl=_figure_or_none(record["valid_ppl"]),
                test_ppl=_figure_or_none(record["test_ppl"]),
                kind=REPORTED,
                source=f"{record['source']}{where} {record['url']}".strip(),
                date=record["date"],
                notes="; ".join(notes),
            )
        )
    return rows


def _figure_or_none(value: float) -> float | None:
    """A figure of a column pandas parsed, None where the cell was empty (NaN)."""
    return None if math.isnan(value) else float(value)


@dataclasses.dataclass
class Run:
    """The valid and/or test result of one configuration (see :func:`records.run_key`)."""

    valid: Result | None = None
    test: Result | None = None
    note: str = ""

    @property
    def results(self) -> list[Result]:
        return [r for r in (self.valid, self.test) if r is not None]


@dataclasses.dataclass(frozen=True, kw_only=True)
class LeaderboardRow:
    """One row of a leaderboard table: a field per column of :data:`COLUMNS` and
    :data:`ALL_CLEAN_COLUMNS` (a figure is None where the row has none: a published figure left
    blank, a run without that split, a result without a contamination report), and ``run``, the
    :class:`Run` behind a row measured here (None in a published figure's row)."""

    rank: int | None = None
    model: str
    params_millions: float | None
    valid_ppl: float | None
    test_ppl: float | None
    kind: str
    source: str
    hardware: str = ""
    date: str
    commit: str = ""
    notes: str
    clean_valid_ppl: float | None = None
    valid_contaminated_pct: float | None = None
    clean_test_ppl: float | None = None
    test_contaminated_pct: float | None = None
    run: Run | None = None

    def value(self, column: str) -> Any:
        """The row's figure or text in ``column`` (one of :data:`COLUMNS` or
        :data:`ALL_CLEAN_COLUMNS`)."""
        return getattr(self, column)

    def text(self, column: str) -> str:
        """The row's cell in ``column`` as every format writes it: a figure by
        :func:`number_text`, the rank as a whole number, nothing where there is none."""
        value = self.value(column)
        if column in NUMBER_COLUMNS:
            return number_text(column, value)
        return "" if value is None else str(value)

    def result_of(self, column: str) -> Result | None:
        """The result a measured row's ``column`` shows: the valid result's perplexity in
        ``valid_ppl``, the test result's in ``test_ppl``, and in ``model`` the test result (else
        the valid one), whose record names the row; None in any other column and in a
        published figure's row."""
        if self.run is None:
            return None
        named = self.run.test or self.run.valid
        return {"valid_ppl": self.run.valid, "test_ppl": self.run.test, "model": named}.get(column)


@dataclasses.dataclass(frozen=True)
class LeaderboardTable:
    """One dataset's leaderboard: its rows in rank order (:func:`rank`)."""

    rows: tuple[LeaderboardRow, ...]

    @property
    def columns(self) -> list[str]:
        """:data:`COLUMNS`, with each split's :data:`CLEAN_COLUMNS` after ``test_ppl`` when a row
        has a contamination report of that split."""
        clean = [
            column
            for pair in CLEAN_COLUMNS.values()
            if any(row.value(pair[1]) is not None for row in self.rows)
            for column in pair
        ]
        at = COLUMNS.index("test_ppl") + 1
        return COLUMNS[:at] + clean + COLUMNS[at:]

    @property
    def results(self) -> list[Result]:
        """The results behind the measured rows, in row order."""
        return [result for row in self.rows if row.run is not None for result in row.run.results]

    def cells(self) -> list[list[str]]:
        """Every row's cells (:meth:`LeaderboardRow.text`) in :attr:`columns`, as the CSV, the
        Markdown and the HTML table write them."""
        columns = self.columns
        return [[row.text(column) for column in columns] for row in self.rows]

    def frame(self) -> pd.DataFrame:
        """The table as a DataFrame of its :attr:`columns` (for pandas and the bar chart):
        figures as floats, NaN where a row has none, ``rank`` as nullable integers."""
        columns = self.columns
        values = [[row.value(column) for column in columns] for row in self.rows]
        frame = pd.DataFrame(values, columns=columns)
        figures = [column for column in columns if column in NUMBER_COLUMNS]
        frame[figures] = frame[figures].astype(float)
        frame["rank"] = frame["rank"].astype("Int64")
        return frame


def _same_figures(a: Result, b: Result) -> bool:
    return (
        a.record.dataset_sha256 == b.record.dataset_sha256
        and a.record.tokens == b.record.tokens
        and math.isclose(a.record.nll, b.record.nll, rel_tol=1e-12, abs_tol=0.0)
    )


def _dedupe(results: list[Result], warnings: list[str]) -> list[Result]:
    """Drop exact repeats (same split, same figures: a copied file), keeping the newest."""
    kept: list[Result] = []
    for result in sorted(results, key=lambda r: r.record.created or "", reverse=True):
        twin = next((k for k in kept if _same_figures(k, result)), None)
        if twin is None:
            kept.append(result)
        else:
            warnings.append(f"{result.path}: same run and figures as {twin.path}; counted once")
    return kept


def group_runs(results: Iterable[Result], warnings: list[str] | None = None) -> list[Run]:
    """Merge valid and test results of the same run (:func:`records.run_key`) into one
    :class:`Run`. Two results of the same split and key with different figures are different
    runs (e.g. a retrained checkpoint at the same path): they are paired by ``git_commit`` and
    folder when that decides it, otherwise each gets its own row and a note, never a guessed
    pairing."""
    warnings = [] if warnings is None else warnings
    groups: dict[tuple, dict[str, list[Result]]] = defaultdict(lambda: defaultdict(list))
    for result in results:
        groups[run_key(result)][result.split].append(result)
    runs = []
    for splits in groups.values():
        valid = _dedupe(splits.get("valid", []), warnings)
        test = _dedupe(splits.get("test", []), warnings)
        if len(valid) <= 1 and len(test) <= 1:
            runs.append(Run(valid[0] if valid else None, test[0] if test else None))
            continue
        # Ambiguous: pair within (commit, folder), the results one ``harness eval --output-dir``
        # invocation writes together; whatever is still ambiguous stays unpaired.
        by_origin: dict[tuple, dict[str, list[Result]]] = defaultdict(lambda: defaultdict(list))
        for result in valid + test:
            origin = (result.record.git_commit or "", str(result.path.parent.resolve()))
            by_origin[origin][result.split].append(result)
        for commit_splits in by_origin.values():
            v, t = commit_splits.get("valid", []), commit_splits.get("test", [])
            if len(v) <= 1 and len(t) <= 1:
                runs.append(Run(v[0] if v else None, t[0] if t else None))
                continue
            note = (
                f"one of {len(v)} valid and {len(t)} test results of the same configuration, "
                "commit and folder; not paired"
            )
            for result in v + t:
                warnings.append(f"{result.path}: {note}")
                runs.append(
                    Run(
                        result if result.split == "valid" else None,
                        result if result.split == "test" else None,
                        note,
                    )
                )
    return runs


def _args_text(model_args: dict) -> str:
    return ", ".join(f"{key}={value}" for key, value in sorted(model_args.items()))


def _display_name(result: Result) -> str:
    args = _args_text(result.record.model_args)
    return f"{result.record.model} ({args})" if args else result.record.model


def _relative(path: Path, roots: list[Path]) -> str:
    for root in roots:
        try:
            return str(path.resolve().relative_to(root.resolve()))
        except ValueError:
            continue
    return str(path)


def _clean_cells(
    run: Run, roots: list[Path], contamination: dict[Path, CleanFigures]
) -> tuple[dict[str, Any], list[str]]:
    """The contamination columns of a run's row (those of the splits whose result has a report),
    by column, and the notes naming the reports."""
    cells: dict[str, Any] = {}
    notes = []
    for result in run.results:
        figures = contamination.get(result.path)
        if figures is None:
            continue
        clean, share = CLEAN_COLUMNS[result.split]
        cells[clean] = None if figures.perplexity_clean is None else round(figures.perplexity_clean, 2)
        cells[share] = round(100 * figures.contaminated_share, 2)
        notes.append(figures.note(result.split, _relative(figures.report, roots)))
    return cells, notes


def _run_row(run: Run, roots: list[Path], contamination: dict[Path, CleanFigures]) -> LeaderboardRow:
    """The row of a run measured here."""
    first = run.test or run.valid
    assert first is not None
    record = first.record
    params = record.num_parameters
    commit = record.git_commit or ""
    if commit:
        commit = commit[:12] + ("-dirty" if commit.endswith("-dirty") else "")
    notes = []
    gaps = list(dict.fromkeys(reason for r in run.results for reason in r.unaudited_reasons))
    if gaps:
        notes.append(f"unaudited: {', '.join(gaps)}")
    unverified = [r.split for r in run.results if not r.verified]
    if unverified:
        notes.append(
            f"unverified: {'/'.join(unverified)} figures not recomputed (no per-token log-probabilities)"
        )
    adaptations = dict.fromkeys(filter(None, (adaptation_of(r.record.plugin_metadata) for r in run.results)))
    notes += [f"test-time adaptation (uses the test text seen so far): {how}" for how in adaptations]
    if record.model_args:
        notes.append(f"args {_args_text(record.model_args)}")
    if record.checkpoint:
        notes.append(f"checkpoint {record.checkpoint}")
    if record.plugin_code is not None:
        notes.append(f"code {record.plugin_code['sha256'][:12]}")
    notes.append(_protocol_text(record.protocol))
    notes.append(f"vocab {record.vocab_size} ({record.vocab_sha256[:8]})")
    if any(r.record.dataset_verified is False for r in run.results):
        notes.append("dataset files unverified (no known checksum)")
    if run.note:
        notes.append(run.note)
    clean_cells, clean_notes = _clean_cells(run, roots, contamination)
    notes += clean_notes
    dates = sorted((r.record.created or "")[:10] for r in run.results)
    return LeaderboardRow(
        model=_display_name(first),
        params_millions=_millions(params),
        valid_ppl=round(run.valid.perplexity, 2) if run.valid else None,
        test_ppl=round(run.test.perplexity, 2) if run.test else None,
        kind=_kind(first, gaps, unverified),
        source=" + ".join(_relative(r.path, roots) for r in run.results),
        hardware=record.device or "",
        date=dates[-1] if dates else "",
        commit=commit,
        notes="; ".join(notes),
        run=run,
        **clean_cells,
    )


def _protocol_text(protocol: Protocol) -> str:
    """A row's protocol settings: ``batch B, bptt T``; with the documents protocol, whose batch
    is each split's number of documents, ``one stream per document, bptt T``."""
    streams = "one stream per document" if protocol.kind == "documents" else f"batch {protocol.batch_size}"
    return f"{streams}, bptt {protocol.bptt}"


def _millions(parameters: int | None) -> float | None:
    """A parameter count in millions for the tables: 2 decimals, or 2 significant digits below
    100,000 parameters (a tiny model is 0.017, not 0.0); None when not recorded."""
    if parameters is None:
        return None
    millions = parameters / 1e6
    return round(millions, 2) if millions >= 0.1 else float(f"{millions:.2g}")


def _kind(result: Result, gaps: list[str], unverified: list[str]) -> str:
    """The ``kind`` of a result's row (see the module docstring); ``gaps``: its unaudited reasons,
    ``unverified``: the splits of its row whose figures were not recomputed."""
    if gaps:
        return UNAUDITED
    if unverified:
        return UNVERIFIED
    if result.record.scoring == "subword":
        return SUBWORD
    return BASELINE if is_baseline(result.record.model) else USER_MODEL


def _disambiguate(rows: list[LeaderboardRow]) -> list[LeaderboardRow]:
    """``rows`` (measured here), those with the same model name told apart in the name itself, by
    whatever differs between them: checkpoint, protocol, date and commit; a run number when
    nothing recorded does."""
    clashes: dict[str, list[int]] = defaultdict(list)
    for index, row in enumerate(rows):
        clashes[row.model].append(index)
    named = list(rows)
    for indices in clashes.values():
        if len(indices) < 2:
            continue
        table = [_labels(rows[index]) for index in indices]
        varying = [
            key for key in ("checkpoint", "protocol", "when") if len({entry[key] for entry in table}) > 1
        ]
        parts = [[entry[key] for key in varying] for entry in table]
        unique = len({tuple(p) for p in parts}) == len(parts)
        for number, (index, part) in enumerate(zip(indices, parts), start=1):
            if not unique:
                part = part + [f"run {number}"]
            named[index] = dataclasses.replace(rows[index], model=f"{rows[index].model} [{'; '.join(part)}]")
    return named


def _labels(row: LeaderboardRow) -> dict[str, str]:
    """What may tell a measured row apart from another of the same name."""
    first = row.result_of("model")
    assert first is not None  # a row measured here
    record = first.record
    return {
        "checkpoint": Path(record.checkpoint).name if record.checkpoint else "no checkpoint",
        "protocol": _protocol_text(record.protocol),
        "when": f"{row.date} {row.commit}".strip() or "undated",
    }


#: The section of the rows that are never ranked, after every other.
UNRANKED_SECTION = 2
#: The section of the rows of each kind not ranked with the word-level rows (section 0): subword
#: rows after them, ranked among themselves; then the rows never ranked.
SECTIONS = {SUBWORD: 1, **dict.fromkeys(UNRANKED_KINDS, UNRANKED_SECTION)}


def rank(rows: Iterable[LeaderboardRow]) -> tuple[LeaderboardRow, ...]:
    """Sort into sections (word-level rows, then subword rows, then unaudited and unverified rows),
    each by test perplexity (rows without one after, by valid perplexity), and number the rows
    with a test figure 1, 2, ... within the word-level and within the subword section (equal
    figures share a rank); unaudited and unverified rows get none."""
    ordered = sorted(rows, key=_rank_order)
    return tuple(dataclasses.replace(row, rank=_rank_among(row, ordered)) for row in ordered)


def _section(row: LeaderboardRow) -> int:
    return SECTIONS.get(row.kind, 0)


def _rank_order(row: LeaderboardRow) -> tuple:
    """Section, test perplexity, valid perplexity (a row without one after those with), kind
    and model name."""
    return (_section(row), *_none_last(row.test_ppl), *_none_last(row.valid_ppl), row.kind, row.model)


def _none_last(figure: float | None) -> tuple[bool, float]:
    """A sort key that puts a missing figure after every figure."""
    return (figure is None, 0.0 if figure is None else figure)


def _rank_among(row: LeaderboardRow, rows: list[LeaderboardRow]) -> int | None:
    """``row``'s rank: 1 plus the number of rows of its section with a lower test perplexity;
    None without a test figure or in the section never ranked."""
    test, section = row.test_ppl, _section(row)
    if test is None or section == UNRANKED_SECTION:
        return None
    lower = [
        other
        for other in rows
        if _section(other) == section and other.test_ppl is not None and other.test_ppl < test
    ]
    return 1 + len(lower)


def table_name(record: ResultRecord) -> str:
    """The table a result goes in: its dataset's, or with the documents protocol, whose figures
    are never ranked beside the stream protocol's, ``DATASET.documents``."""
    if record.protocol.kind == "stream":
        return record.dataset
    return f"{record.dataset}.{record.protocol.kind}"


def build_tables(
    collection: Collection,
    reported: pd.DataFrame | None,
    roots: list[Path] | None = None,
    warnings: list[str] | None = None,
) -> dict[str, LeaderboardTable]:
    """One ranked table per dataset: the paper benchmarks (reported rows, when ``reported`` is
    given) and every dataset with a usable result (builder corpora included); results of the
    documents protocol in a table of their own (:func:`table_name`). Each measured row keeps the
    :class:`Run` behind it (:attr:`LeaderboardRow.run`), for what shows each result apart (the
    site)."""
    roots = roots or []
    by_dataset: dict[str, list[LeaderboardRow]] = defaultdict(list)
    for run in group_runs(collection.results, warnings):
        first = run.results[0]  # group_runs never yields a run without results
        by_dataset[table_name(first.record)].append(_run_row(run, roots, collection.contamination))
    datasets = list(PAPER_DATASETS) if reported is not None else []
    datasets += sorted(name for name in by_dataset if name not in datasets)
    tables = {}
    for dataset in datasets:
        rows = _disambiguate(by_dataset.get(dataset, []))
        if reported is not None:
            rows += _reported_rows(reported, dataset)
        if rows:
            tables[dataset] = LeaderboardTable(rank(rows))
    return tables


# ---- rendering -------------------------------------------------------------------------------


def format_number(value: float | None) -> str:
    """Perplexities and sizes as written: at most two decimals, at least one (100.0, 141.19);
    two significant digits below 0.1 (0.017 million parameters, not 0.02); nothing for None."""
    if value is None:
        return ""
    if 0 < abs(float(value)) < 0.1:
        return f"{float(value):.2g}"
    text = f"{float(value):.2f}".rstrip("0")
    return text + "0" if text.endswith(".") else text


def number_text(column: str, value: float | None) -> str:
    """A number column's text; ``-`` in a contamination column of a row without a report."""
    text = format_number(value)
    return (text or NO_REPORT) if column in ALL_CLEAN_COLUMNS else text


def to_markdown(table: LeaderboardTable) -> str:
    def escape(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    columns = table.columns
    lines = [
        "| " + " | ".join(columns) + " |",
        "|" + "|".join("---:" if c in NUMERIC_COLUMNS else "---" for c in columns) + "|",
    ]
    lines += ["| " + " | ".join(escape(cell) for cell in row) + " |" for row in table.cells()]
    return "\n".join(lines) + "\n"


def to_html(table: LeaderboardTable, title: str) -> str:
    """The table as a page of its own (``build --format html``)."""
    return render("table.html", title=title, table=table)


def to_csv(table: LeaderboardTable) -> str:
    frame = pd.DataFrame(table.cells(), columns=table.columns)
    return frame.to_csv(index=False, lineterminator="\n")


EXTENSIONS = {"csv": "csv", "markdown": "md", "html": "html"}


#: The most characters of a dataset's name that its file names keep (a builder corpus is named
#: after its directory, and a result file may name anything): beyond, a write would fail on a
#: file name longer than the file system takes.
MAX_FILE_STEM = 80


def file_stem(dataset: str) -> str:
    """A file name for a dataset name (builder corpora are named after their directory): the name
    itself when it is a safe file name (``ptb``, ``my_corpus``) of at most :data:`MAX_FILE_STEM`
    characters, else its first :data:`MAX_FILE_STEM` safe characters and the first 8 hex digits
    of its sha256 (``my corpus`` -> ``my_corpus-954a6719``), so that two names never share a
    file."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", dataset).strip("._") or "dataset"
    if stem == dataset and len(stem) <= MAX_FILE_STEM:
        return stem
    return f"{stem[:MAX_FILE_STEM]}-{hashlib.sha256(dataset.encode('utf-8')).hexdigest()[:8]}"


def table_path(dataset: str, out: Path, fmt: str) -> Path:
    """Where :func:`write_tables` writes ``dataset``'s table in format ``fmt``."""
    return out / f"{file_stem(dataset)}.{EXTENSIONS[fmt]}"


def table_paths(tables: dict[str, LeaderboardTable], out: Path, formats: Iterable[str]) -> list[Path]:
    """The files :func:`write_tables` writes for ``tables``, in its order."""
    return [table_path(dataset, out, fmt) for dataset in tables for fmt in formats]


def stale_tables(tables: dict[str, LeaderboardTable], out: Path, formats: Iterable[str]) -> list[Path]:
    """The tables in ``out`` of datasets that ``tables`` no longer has: each ``DATASET.csv`` that
    reads as a leaderboard CSV (:func:`read_table`), with its other formats beside it."""
    current = set(table_paths(tables, out, ["csv"]))
    stale = []
    for path in sorted(out.glob(f"*.{EXTENSIONS['csv']}")):
        if path in current:
            continue
        try:
            read_table(path)
        except (ValueError, pd.errors.ParserError, UnicodeDecodeError):
            continue  # not a table of ours: left alone
        siblings = (path.with_suffix(f".{EXTENSIONS[fmt]}") for fmt in formats)
        stale += [sibling for sibling in siblings if sibling.is_file()]
    return stale


def write_tables(tables: dict[str, LeaderboardTable], out: Path, formats: Iterable[str]) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for dataset, table in tables.items():
        for fmt in formats:
            path = table_path(dataset, out, fmt)
            if fmt == "csv":
                text = to_csv(table)
            elif fmt == "markdown":
                text = to_markdown(table)
            else:
                text = to_html(table, f"{dataset} leaderboard")
            written.append(write_atomically(path, text))
    return written


def read_table(path: str | Path) -> LeaderboardTable:
    """A leaderboard CSV written by :func:`write_tables`, its figures parsed."""
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    missing = [c for c in COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"{path}: not a leaderboard CSV (missing {', '.join(missing)})")
    try:
        rows = tuple(_csv_row(cells) for cells in frame.to_dict("records"))
    except ValueError as error:
        raise ValueError(f"{path}: not a leaderboard CSV ({error})") from None
    return LeaderboardTable(rows)


def _csv_row(cells: Mapping[Hashable, str]) -> LeaderboardRow:
    """The row of a leaderboard CSV's ``cells``, by column (the contamination columns may be
    absent)."""

    def figure(column: str) -> float | None:
        return _csv_figure(column, cells.get(column, ""))

    return LeaderboardRow(
        rank=_csv_rank(cells["rank"]),
        model=cells["model"],
        params_millions=figure("params_millions"),
        valid_ppl=figure("valid_ppl"),
        test_ppl=figure("test_ppl"),
        kind=cells["kind"],
        source=cells["source"],
        hardware=cells["hardware"],
        date=cells["date"],
        commit=cells["commit"],
        notes=cells["notes"],
        clean_valid_ppl=figure("clean_valid_ppl"),
        valid_contaminated_pct=figure("valid_contaminated_pct"),
        clean_test_ppl=figure("clean_test_ppl"),
        test_contaminated_pct=figure("test_contaminated_pct"),
    )


def _csv_rank(text: str) -> int | None:
    """A CSV's rank: a whole number, or empty (None)."""
    if not text:
        return None
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"rank {text!r} is no whole number") from None


def _csv_figure(column: str, text: str) -> float | None:
    """A CSV's figure in a number column: None where empty (or ``-``, no contamination report);
    a perplexity must be at least 1 and finite."""
    if text in ("", NO_REPORT):
        return None
    try:
        figure = float(text)
    except ValueError:
        raise ValueError(f"{column} {text!r} is no number") from None
    if math.isnan(figure):
        return None
    if column in PERPLEXITY_COLUMNS and not 1 <= figure < math.inf:
        raise ValueError(f"{column} {figure} is no perplexity")
    return figure


def unchecked_rows(table: LeaderboardTable) -> list[tuple[str, str]]:
    """The rows of a table that are unaudited or unverified (:data:`UNRANKED_KINDS`, as
    :func:`records.trust_gap` decides for their results), each as its source files (else its
    model) and its kind with why, for :func:`records.check_trusted`."""
    return [
        (row.source or row.model, _kind_reason(row.kind, row.notes))
        for row in table.rows
        if row.kind in UNRANKED_KINDS
    ]


def _kind_reason(kind: str, notes: str) -> str:
    """``KIND (WHY)``, WHY the note of ``notes`` that begins ``KIND:`` (:func:`_run_row` writes
    one for each unranked kind); ``KIND`` alone when none does."""
    prefix = f"{kind}: "
    why = next((note[len(prefix) :] for note in notes.split("; ") if note.startswith(prefix)), "")
    return f"{kind} ({why})" if why else kind
