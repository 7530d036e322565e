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
import html
import math
import re
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from leaderboard.clean_subset import CleanFigures
from leaderboard.records import TABLE_SPLITS, Collection, Result, run_key
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
#: The contamination columns that hold a perplexity.
PPL_CLEAN_COLUMNS = [ppl for ppl, _ in CLEAN_COLUMNS.values()]
#: Every contamination column, in table order.
ALL_CLEAN_COLUMNS = [column for pair in CLEAN_COLUMNS.values() for column in pair]
#: Columns written as numbers (at most two decimals).
NUMBER_COLUMNS = ("params_millions", "valid_ppl", "test_ppl", *ALL_CLEAN_COLUMNS)
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


def _reported_rows(reported: pd.DataFrame, dataset: str) -> list[dict]:
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
            {
                "model": record["model"],
                "params_millions": record["params_millions"],
                "valid_ppl": record["valid_ppl"],
                "test_ppl": record["test_ppl"],
                "kind": REPORTED,
                "source": f"{record['source']}{where} {record['url']}".strip(),
                "hardware": "",
                "date": record["date"],
                "commit": "",
                "notes": "; ".join(notes),
            }
        )
    return rows


@dataclasses.dataclass
class Run:
    """The valid and/or test result of one configuration (see :func:`records.run_key`)."""

    valid: Result | None = None
    test: Result | None = None
    note: str = ""

    @property
    def results(self) -> list[Result]:
        return [r for r in (self.valid, self.test) if r is not None]


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
) -> tuple[dict[str, float], list[str]]:
    """The contamination columns of a run's row (those of the splits whose result has a report)
    and the notes naming the reports."""
    cells, notes = {}, []
    for result in run.results:
        figures = contamination.get(result.path)
        if figures is None:
            continue
        clean, share = CLEAN_COLUMNS[result.split]
        cells[clean] = math.nan if figures.perplexity_clean is None else round(figures.perplexity_clean, 2)
        cells[share] = round(100 * figures.contaminated_share, 2)
        notes.append(figures.note(result.split, _relative(figures.report, roots)))
    return cells, notes


def _run_row(run: Run, roots: list[Path], contamination: dict[Path, CleanFigures]) -> dict:
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
    return {
        "model": _display_name(first),
        "params_millions": _millions(params),
        "valid_ppl": round(run.valid.perplexity, 2) if run.valid else math.nan,
        "test_ppl": round(run.test.perplexity, 2) if run.test else math.nan,
        "kind": _kind(first, gaps, unverified),
        "source": " + ".join(_relative(r.path, roots) for r in run.results),
        "hardware": record.device or "",
        "date": dates[-1] if dates else "",
        "commit": commit,
        "notes": "; ".join(notes),
        **clean_cells,
        "_run": run,
    }


def _protocol_text(protocol: Protocol) -> str:
    """A row's protocol settings: ``batch B, bptt T``; with the documents protocol, whose batch
    is each split's number of documents, ``one stream per document, bptt T``."""
    streams = "one stream per document" if protocol.kind == "documents" else f"batch {protocol.batch_size}"
    return f"{streams}, bptt {protocol.bptt}"


def _millions(parameters: int | None) -> float:
    """A parameter count in millions for the tables: 2 decimals, or 2 significant digits below
    100,000 parameters (a tiny model is 0.017, not 0.0); NaN when not recorded."""
    if parameters is None:
        return math.nan
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


def _disambiguate(rows: list[dict]) -> None:
    """Two measured rows with the same model name get told apart in the name itself, by
    whatever differs between them: checkpoint, protocol, date and commit; a run number when
    nothing recorded does."""

    def labels(row: dict) -> dict[str, str]:
        record = (row["_run"].test or row["_run"].valid).record
        return {
            "checkpoint": Path(record.checkpoint).name if record.checkpoint else "no checkpoint",
            "protocol": _protocol_text(record.protocol),
            "when": f"{row['date']} {row['commit']}".strip() or "undated",
        }

    names: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        if row["kind"] != REPORTED:
            names[row["model"]].append(row)
    for clash in names.values():
        if len(clash) < 2:
            continue
        table = [labels(row) for row in clash]
        varying = [
            key for key in ("checkpoint", "protocol", "when") if len({entry[key] for entry in table}) > 1
        ]
        parts = [[entry[key] for key in varying] for entry in table]
        unique = len({tuple(p) for p in parts}) == len(parts)
        for number, (row, part) in enumerate(zip(clash, parts), start=1):
            if not unique:
                part = part + [f"run {number}"]
            row["model"] = f"{row['model']} [{'; '.join(part)}]"


def rank(frame: pd.DataFrame) -> pd.DataFrame:
    """Sort into sections (word-level rows, then subword rows, then unaudited and unverified rows),
    each by test perplexity (rows without one after, by valid perplexity), and number the rows
    with a test figure 1, 2, ... within the word-level and within the subword section (equal
    figures share a rank); unaudited and unverified rows get none."""
    sections = {SUBWORD: 1, **{kind: 2 for kind in UNRANKED_KINDS}}
    section = frame["kind"].map(sections).fillna(0).astype(int).rename("_section")
    frame = (
        frame.join(section)
        .sort_values(
            ["_section", "test_ppl", "valid_ppl", "kind", "model"], na_position="last", kind="mergesort"
        )
        .reset_index(drop=True)
    )
    ranks = (
        frame["test_ppl"]
        .where(frame["_section"] < 2)
        .groupby(frame["_section"])
        .rank(method="min", na_option="keep")
    )
    frame["rank"] = ranks.astype("Int64")
    return frame.drop(columns="_section")


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
) -> dict[str, pd.DataFrame]:
    """One ranked table per dataset: the paper benchmarks (reported rows, when ``reported`` is
    given) and every dataset with a usable result (builder corpora included); results of the
    documents protocol in a table of their own (:func:`table_name`)."""
    tables = ranked_tables(collection, reported, roots, warnings)
    return {dataset: frame[table_columns(frame)] for dataset, frame in tables.items()}


def ranked_tables(
    collection: Collection,
    reported: pd.DataFrame | None,
    roots: list[Path] | None = None,
    warnings: list[str] | None = None,
) -> dict[str, pd.DataFrame]:
    """:func:`build_tables`'s tables with one more column, ``run``: the :class:`Run` behind each
    measured row (None in a reported row), for what shows each result apart (the site)."""
    roots = roots or []
    runs = group_runs(collection.results, warnings)
    by_dataset: dict[str, list[dict]] = defaultdict(list)
    for run in runs:
        first = run.results[0]  # group_runs never yields a run without results
        by_dataset[table_name(first.record)].append(_run_row(run, roots, collection.contamination))
    datasets = list(PAPER_DATASETS) if reported is not None else []
    datasets += sorted(name for name in by_dataset if name not in datasets)
    tables = {}
    for dataset in datasets:
        rows = by_dataset.get(dataset, [])
        _disambiguate(rows)
        rows = [{"run" if k == "_run" else k: v for k, v in row.items()} for row in rows]
        if reported is not None:
            rows += [{**row, "run": None} for row in _reported_rows(reported, dataset)]
        if not rows:
            continue
        columns = [c for c in COLUMNS if c != "rank"] + ALL_CLEAN_COLUMNS + ["run"]
        tables[dataset] = rank(pd.DataFrame(rows, columns=columns))
    return tables


def table_columns(frame: pd.DataFrame) -> list[str]:
    """:data:`COLUMNS`, with each split's :data:`CLEAN_COLUMNS` after ``test_ppl`` when a row of
    ``frame`` has a contamination report of that split."""
    clean = [
        column
        for pair in CLEAN_COLUMNS.values()
        if pair[1] in frame.columns and frame[pair[1]].notna().any()
        for column in pair
    ]
    at = COLUMNS.index("test_ppl") + 1
    return COLUMNS[:at] + clean + COLUMNS[at:]


# ---- rendering -------------------------------------------------------------------------------


def format_number(value) -> str:
    """Perplexities and sizes as written: at most two decimals, at least one (100.0, 141.19);
    two significant digits below 0.1 (0.017 million parameters, not 0.02)."""
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
        return ""
    if isinstance(value, (int,)) and not isinstance(value, bool):
        return str(value)
    if 0 < abs(float(value)) < 0.1:
        return f"{float(value):.2g}"
    text = f"{float(value):.2f}".rstrip("0")
    return text + "0" if text.endswith(".") else text


def number_text(column: str, value) -> str:
    """A number column's text; ``-`` in a contamination column of a row without a report."""
    text = format_number(value)
    return (text or NO_REPORT) if column in ALL_CLEAN_COLUMNS else text


def _cells(frame: pd.DataFrame) -> list[list[str]]:
    rows = []
    for record in frame.to_dict("records"):
        cells = []
        for column in frame.columns:
            value = record[column]
            if column in NUMBER_COLUMNS:
                cells.append(number_text(column, value))
            elif column == "rank":
                cells.append("" if value is pd.NA or pd.isna(value) else str(int(value)))
            else:
                cells.append(
                    "" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)
                )
        rows.append(cells)
    return rows


def to_markdown(frame: pd.DataFrame) -> str:
    def escape(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    columns = list(frame.columns)
    lines = [
        "| " + " | ".join(columns) + " |",
        "|" + "|".join("---:" if c == "rank" or c in NUMBER_COLUMNS else "---" for c in columns) + "|",
    ]
    lines += ["| " + " | ".join(escape(cell) for cell in row) + " |" for row in _cells(frame)]
    return "\n".join(lines) + "\n"


def to_html(frame: pd.DataFrame, title: str) -> str:
    columns = list(frame.columns)
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "\n".join(
        f'<tr class="{html.escape(row[columns.index("kind")].replace(" ", "-"))}">'
        + "".join(f"<td>{html.escape(cell)}</td>" for cell in row)
        + "</tr>"
        for row in _cells(frame)
    )
    return (
        f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{html.escape(title)}</title>\n'
        "<style>table{border-collapse:collapse;font-family:sans-serif;font-size:13px}"
        "td,th{border:1px solid #ccc;padding:3px 6px}tr.reproduced-baseline{background:#eef6ff}"
        "tr.user-model{background:#effaef}"
        "tr.unaudited,tr.unverified{background:#fff3e0;font-style:italic}</style>"
        f"</head><body>\n<h2>{html.escape(title)}</h2>\n<table>\n<thead><tr>{head}</tr></thead>\n"
        f"<tbody>\n{body}\n</tbody></table>\n</body></html>\n"
    )


def to_csv(frame: pd.DataFrame) -> str:
    out = frame.copy()
    for column in out.columns:
        if column in NUMBER_COLUMNS:
            out[column] = [number_text(column, value) for value in out[column]]
    return out.to_csv(index=False, lineterminator="\n")


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


def table_paths(tables: dict[str, pd.DataFrame], out: Path, formats: Iterable[str]) -> list[Path]:
    """The files :func:`write_tables` writes for ``tables``, in its order."""
    return [table_path(dataset, out, fmt) for dataset in tables for fmt in formats]


def stale_tables(tables: dict[str, pd.DataFrame], out: Path, formats: Iterable[str]) -> list[Path]:
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


def write_tables(tables: dict[str, pd.DataFrame], out: Path, formats: Iterable[str]) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for dataset, frame in tables.items():
        for fmt in formats:
            path = table_path(dataset, out, fmt)
            if fmt == "csv":
                text = to_csv(frame)
            elif fmt == "markdown":
                text = to_markdown(frame)
            else:
                text = to_html(frame, f"{dataset} leaderboard")
            written.append(write_atomically(path, text))
    return written


def read_table(path: str | Path) -> pd.DataFrame:
    """A leaderboard CSV written by :func:`write_tables`, numeric columns parsed."""
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    missing = [c for c in COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"{path}: not a leaderboard CSV (missing {', '.join(missing)})")
    try:
        for column in frame.columns:
            if column in NUMBER_COLUMNS:
                frame[column] = pd.to_numeric(frame[column].where(~frame[column].isin(["", NO_REPORT])))
        frame["rank"] = pd.to_numeric(frame["rank"].replace("", None)).astype("Int64")
    except (ValueError, TypeError) as error:  # TypeError: a rank that is no whole number
        raise ValueError(f"{path}: not a leaderboard CSV ({error})") from None
    perplexities = [c for c in ("valid_ppl", "test_ppl", *PPL_CLEAN_COLUMNS) if c in frame.columns]
    for column in perplexities:
        values = frame[column].dropna()
        wrong = values[~((values >= 1) & (values < math.inf))]
        if len(wrong):
            raise ValueError(f"{path}: not a leaderboard CSV ({column} {wrong.iloc[0]} is no perplexity)")
    return frame[table_columns(frame)]


def unchecked_rows(frame: pd.DataFrame) -> list[tuple[str, str]]:
    """The rows of a table that are unaudited or unverified (:data:`UNRANKED_KINDS`, as
    :func:`records.trust_gap` decides for their results), each as its source files (else its
    model) and its kind with why, for :func:`records.check_trusted`."""
    rows = frame[frame["kind"].isin(UNRANKED_KINDS)]
    return [
        (str(row["source"] or row["model"]), _kind_reason(row["kind"], row["notes"]))
        for _, row in rows.iterrows()
    ]


def _kind_reason(kind: str, notes: str) -> str:
    """``KIND (WHY)``, WHY the note of ``notes`` that begins ``KIND:`` (:func:`_run_row` writes
    one for each unranked kind); ``KIND`` alone when none does."""
    prefix = f"{kind}: "
    why = next((note[len(prefix) :] for note in str(notes).split("; ") if note.startswith(prefix)), "")
    return f"{kind} ({why})" if why else kind
