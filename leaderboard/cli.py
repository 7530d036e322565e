"""``python -m leaderboard {build,regenerate,compare,site,project,plot}`` (console script
``lm-leaderboard``)."""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from leaderboard.records import (
    ACROSS_PROTOCOLS,
    ALLOW_UNAUDITED,
    Collection,
    Result,
    check_trusted,
    collect,
    load_result,
    load_verified,
    protocol_setting,
    trust_gap,
)
from wikitext_toolkit_core.cli import (
    ArgumentParser,
    UsageError,
    add_data_dir_option,
    check_not_an_input,
    check_output_dir,
    check_output_file,
    existing_file,
    non_negative_int,
    positive_int,
    run,
)
from wikitext_toolkit_core.files import DatasetError
from wikitext_toolkit_core.format import SPLITS

if TYPE_CHECKING:
    import pandas as pd

    from leaderboard.bootstrap import Comparison
    from leaderboard.table import LeaderboardTable
    from leaderboard.training_logs import ValidToTest

#: The project's committed results and the tables generated from them (``regenerate``).
DEFAULT_RESULTS = Path("results")
DEFAULT_TABLES = Path("leaderboard") / "tables"
INCLUDE_UNAUDITED_HELP = (
    "also show results that do not show both harness audits passed (kind "
    "'unaudited', never ranked); by default they are left out"
)
ALLOW_UNAUDITED_HELP = (
    "{use} results that are not audited and verified (those build leaves unranked) anyway, with "
    "a warning on stderr and {where}; by default they are refused, named"
)
#: The most bootstrap resamples ``compare`` draws: 16 MB of resampled means, and far more than an
#: interval's ends need.
MAX_SAMPLES = 1_000_000
#: The heading of a site's index unless ``--title`` names another.
SITE_TITLE = "Word-level language-model leaderboard"


def _describe(result: Result) -> str:
    record = result.record
    args = ", ".join(f"{k}={v}" for k, v in sorted(record.model_args.items()))
    text = f"{record.model} ({args})" if args else record.model
    if record.checkpoint:
        text += f" [{Path(record.checkpoint).name}]"
    return text


def _reports_shown(collection: Collection) -> str:
    """``, N contamination report(s) shown`` when any is (nothing otherwise)."""
    count = len(collection.contamination)
    return f", {count} contamination report(s) shown" if count else ""


def _report_lines(collection: Collection, warnings: list[str]) -> list[str]:
    """What stderr says about the files read: those rejected, then notes."""
    notes = collection.notes + collection.unaudited + collection.unverified + warnings
    return [f"rejected: {line}" for line in collection.rejected] + [f"note: {line}" for line in notes]


def _report(collection: Collection, warnings: list[str]) -> None:
    for line in _report_lines(collection, warnings):
        print(line, file=sys.stderr)


def _trust_gaps(results: list[Result]) -> dict[Path, str]:
    """The results (each once) that are not audited and verified, by path, each with its
    :func:`leaderboard.records.trust_gap`."""
    return {result.path: gap for result in results if (gap := trust_gap(result)) is not None}


def _check_results(results: list[Result], use: str, allowed: bool) -> str | None:
    """Refuse to ``use`` the results that are not audited and verified, naming them
    (:func:`leaderboard.records.check_trusted`), unless ``allowed``; then print the warning on
    stderr and return it (None when every result is audited and verified)."""
    gaps = [(str(path), gap) for path, gap in _trust_gaps(results).items()]
    return _warn(check_trusted(gaps, use, allowed))


def _warn(warning: str | None) -> str | None:
    """Print ``warning`` (when there is one) on stderr, and return it."""
    if warning is not None:
        print(warning, file=sys.stderr)
    return warning


def _figure_warning(gaps: list[tuple[str, str]]) -> str:
    """The warning a figure drawn with :data:`ALLOW_UNAUDITED` carries: what is drawn that is not
    audited and verified, each name with its :func:`leaderboard.records.trust_gap`."""
    named = "; ".join(f"{name}: {gap}" for name, gap in gaps)
    return f"WARNING: drawn with {ALLOW_UNAUDITED}, not audited and verified: {named}"


# ---- build / regenerate ------------------------------------------------------------------------


def _load_reported(path: Path | None) -> pd.DataFrame:
    """The published figures (``path``, else the packaged ``reported.csv``)."""
    from leaderboard.table import REPORTED_CSV, load_reported

    try:
        return load_reported(path or REPORTED_CSV)
    except ValueError as error:  # a CSV without the expected columns
        raise UsageError(f"--reported: {error}" if path is not None else str(error)) from None


def _build(
    sources: list[str], reported: pd.DataFrame | None, include_unaudited: bool, strict: bool
) -> tuple[dict[str, LeaderboardTable], Collection]:
    """One table per dataset from the result files under ``sources`` and the published figures
    ``reported`` (None: none); the files rejected are named on stderr. ``strict``: a result
    without its per-token log-probabilities is rejected rather than shown unverified."""
    from leaderboard.table import build_tables

    for source in sources:
        if not Path(source).exists():
            raise UsageError(f"{source}: no such file or directory")
    collection = collect(sources, include_unaudited, require_token_log_probs=strict)
    warnings: list[str] = []
    roots = [Path(s) for s in sources if Path(s).is_dir()]
    tables = build_tables(collection, reported, roots=roots, warnings=warnings)
    _report(collection, warnings)
    return tables, collection


def command_build(args: argparse.Namespace) -> int:
    from leaderboard.table import KINDS, write_tables

    out = check_output_dir(args.output_dir, "--output-dir")
    formats = list(dict.fromkeys(args.format))
    reported = None if args.no_reported else _load_reported(args.reported)
    tables, collection = _build(args.results, reported, args.include_unaudited, args.strict)
    for dataset, table in tables.items():
        kinds = Counter(row.kind for row in table.rows)
        counts = ", ".join(f"{kinds[kind]} {kind}" for kind in KINDS if kind in kinds)
        print(f"{dataset}: {len(table.rows)} rows ({counts})", flush=True)
    written = write_tables(tables, out, formats)
    print(
        f"wrote {len(written)} file(s) to {out}; {len(collection.results)} result file(s) used, "
        f"{len(collection.rejected)} rejected, {len(collection.unaudited)} unaudited kept out, "
        f"{len(collection.unverified)} unverified (unranked){_reports_shown(collection)}"
    )
    return 1 if args.strict and collection.rejected else 0


def command_regenerate(args: argparse.Namespace) -> int:
    from leaderboard.readme import update_readme
    from leaderboard.table import stale_tables, table_paths, write_tables

    results = Path(args.results)
    if not results.is_dir():
        raise UsageError(f"{results}: no results directory (put harness result JSON there)")
    out = check_output_dir(args.output_dir, "--output-dir")
    if args.readme is not None:
        check_output_file(args.readme, "--readme")
    tables, collection = _build([str(results)], _load_reported(None), args.include_unaudited, strict=True)
    formats = ["csv", "markdown"]
    before = {path: path.read_bytes() for path in table_paths(tables, out, formats) if path.is_file()}
    written = write_tables(tables, out, formats)
    changed = [path for path in written if before.get(path) != path.read_bytes()]
    stale = [] if collection.rejected else stale_tables(tables, out, formats)
    for path in stale:
        path.unlink()
    state = f"{len(changed)} changed" if changed else "all unchanged"
    removed = f", {len(stale)} removed ({', '.join(p.name for p in stale)}: no results)" if stale else ""
    print(
        f"{out}: {len(written)} file(s), {state}{removed}, from {len(collection.results)} result "
        f"file(s) ({len(collection.rejected)} rejected, {len(collection.unaudited)} unaudited kept "
        f"out{_reports_shown(collection)})"
    )
    if args.readme is not None:
        updated, unchanged = update_readme(args.readme, tables)
        parts = [f"updated {', '.join(updated)}"] if updated else []
        parts += [f"unchanged {', '.join(unchanged)}"] if unchanged else []
        print(f"{args.readme}: " + ("; ".join(parts) or "no <!-- leaderboard:DATASET:begin/end --> markers"))
    return 1 if collection.rejected else 0


# ---- compare -------------------------------------------------------------------------------------


def _confidence(text: str) -> float:
    """A confidence level strictly between 0 and 1."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1 (0.95 for 95%), got {text}")
    return value


def _samples(text: str) -> int:
    """A number of bootstrap resamples: at least 1 and at most :data:`MAX_SAMPLES`."""
    value = positive_int(text)
    if value > MAX_SAMPLES:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_SAMPLES:,}, got {value:,}")
    return value


def _block_length(text: str) -> int | None:
    """``auto`` (None: the bootstrap's default) or a positive number of tokens."""
    return None if text == "auto" else positive_int(text)


def command_compare(args: argparse.Namespace) -> int:
    from leaderboard.bootstrap import minimum_samples, paired_bootstrap
    from leaderboard.provenance import check_comparable, check_same_protocol

    needed = minimum_samples(args.confidence)
    if args.samples < needed:
        raise UsageError(
            f"--samples {args.samples} is too few for a {100 * args.confidence:g}% "
            f"interval: at least {needed:,} (5 resamples beyond each end)"
        )
    a, b = load_result(args.a), load_result(args.b)
    check_comparable(a, b)
    check_same_protocol(a, b, args.across_protocols)
    (a, log_a), (b, log_b) = load_verified(a), load_verified(b)
    warning = _check_results([a, b], "compare", args.allow_unaudited)
    try:
        result = paired_bootstrap(
            log_a,
            log_b,
            samples=args.samples,
            seed=args.seed,
            block_length=args.block_length,
            confidence=args.confidence,
        )
    except ValueError as error:  # a --block-length longer than the tokens compared
        raise UsageError(str(error)) from None
    _print_comparison(a, b, result, args.confidence, warning)
    return 0


def _print_comparison(
    a: Result, b: Result, result: Comparison, confidence: float, warning: str | None = None
) -> None:
    """Both perplexities, their difference with its interval, the p-value and the verdict
    (:attr:`leaderboard.bootstrap.Comparison.significant`: whether the NLL interval excludes 0);
    first the ``warning`` line when there is one (results compared with :data:`ALLOW_UNAUDITED`)."""
    if warning is not None:
        print(warning)
    level = f"{100 * confidence:g}%"
    print(f"A: {_describe(a)} on {_scored_on(a)}: perplexity {result.ppl_a:.2f}")
    print(f"B: {_describe(b)} on {_scored_on(b)}: perplexity {result.ppl_b:.2f}")
    print(_code_line(a.record.plugin_code, b.record.plugin_code))
    low, high = result.ppl_ci
    nlow, nhigh = result.nll_ci
    print(
        f"A - B: {result.ppl_diff:+.2f} perplexity, {level} CI [{low:+.2f}, {high:+.2f}]; "
        f"mean NLL {result.nll_diff:+.4f} nats/token, {level} CI [{nlow:+.4f}, {nhigh:+.4f}]"
    )
    method = (
        "i.i.d. tokens" if result.block_length == 1 else f"circular blocks of {result.block_length:,} tokens"
    )
    p_text = (
        f"p <= {result.p_floor:.2g} (the smallest {result.samples:,} resamples can show)"
        if result.p_value <= result.p_floor
        else f"p = {result.p_value:.4g}"
    )
    verdict = (
        ("A is better" if result.ppl_diff < 0 else "B is better")
        if result.significant
        else "no significant difference"
    )
    print(
        f"{p_text}: two-sided paired bootstrap, {result.samples:,} resamples of {method} over "
        f"{result.tokens:,} tokens, seed {result.seed}; {verdict} at the {level} level"
    )


def _scored_on(result: Result) -> str:
    """What ``compare`` says a result scored: ``DATASET/SPLIT (KIND protocol)``, KIND
    ``stream`` for a file that names no protocol."""
    return f"{result.record.dataset}/{result.split} ({result.record.protocol.kind} protocol)"


def _code_line(a: dict[str, Any] | None, b: dict[str, Any] | None) -> str:
    """Whether two results' plugins ran the same code (their ``plugin_code`` records)."""
    if a is None or b is None:
        missing = " and ".join(name for name, code in (("A", a), ("B", b)) if code is None)
        return f"code: not recorded for {missing} (a result written before 2026-11-28)"
    if a["sha256"] == b["sha256"]:
        return f"code: the same plugin code ({a['source']} {a['path']}, sha256 {a['sha256'][:12]})"
    return (
        f"code: different plugin code (A {a['sha256'][:12]} from {a['path']}, "
        f"B {b['sha256'][:12]} from {b['path']})"
    )


# ---- plots ---------------------------------------------------------------------------------------


def _figure_file(text: str) -> str:
    """A figure's ``--output``: a file name whose extension names a format matplotlib writes
    (none: PNG), checked before any work."""
    import matplotlib.figure

    suffix = Path(text).suffix[1:].lower()
    formats = matplotlib.figure.Figure().canvas.get_supported_filetypes()
    if suffix and suffix not in formats:
        raise argparse.ArgumentTypeError(
            f"{text}: matplotlib cannot write .{suffix} figures (use one of .{', .'.join(sorted(formats))})"
        )
    return text


def command_plot_bars(args: argparse.Namespace) -> int:
    from leaderboard.plots import plot_bars
    from leaderboard.table import read_table, unchecked_rows

    sources = [Path(source) for source in args.source]
    check_output_file(args.output, "--output", inputs=sources)
    report: list[str] = []  # what stderr says about the result files read
    missing = [str(source) for source in sources if not source.exists()]
    if missing:
        raise UsageError(f"{', '.join(missing)}: no such file or directory")
    tables = [source for source in sources if source.is_file() and source.suffix == ".csv"]
    if tables and len(sources) > 1:
        raise UsageError("a table CSV is drawn alone: name one table, or result directories only")
    if tables:
        try:
            table = read_table(tables[0])
        except ValueError as error:  # not a leaderboard CSV
            raise UsageError(str(error)) from None
        dataset = args.dataset or tables[0].stem
    else:
        dataset, table, report = _bars_from_results(sources, args.dataset, args.no_reported)
    unchecked = unchecked_rows(table)
    warning = check_trusted(unchecked, "plot", args.allow_unaudited)  # before the notes: one line
    for line in report:
        print(line, file=sys.stderr)
    _warn(warning)
    figure_warning = _figure_warning(unchecked) if warning else None
    try:
        path = plot_bars(
            table.frame(),
            args.title or f"{dataset} leaderboard",
            args.output,
            log=args.log,
            warning=figure_warning,
        )
    except ValueError as error:  # no row with a perplexity
        raise UsageError(str(error)) from None
    print(f"wrote {path}")
    return 0


def _bars_from_results(
    sources: list[Path], dataset: str | None, no_reported: bool
) -> tuple[str, LeaderboardTable, list[str]]:
    """The table of ``dataset`` (default: the one dataset with results) built from the result
    files under ``sources`` (as ``build`` takes them), its unaudited and unverified rows included
    (``plot bars`` refuses them unless :data:`ALLOW_UNAUDITED`), and the lines stderr says about
    the files read."""
    from leaderboard.table import PAPER_DATASETS, REPORTED, build_tables

    source = " ".join(str(path) for path in sources)  # for messages
    collection = collect(sources, include_unaudited=True)
    warnings: list[str] = []
    # No roots: each row's source is the path of its files, which a refusal names.
    tables = build_tables(collection, None if no_reported else _load_reported(None), warnings=warnings)
    if dataset is None:
        measured = {d for d, table in tables.items() if any(row.kind != REPORTED for row in table.rows)}
        found = [d for d in tables if d not in PAPER_DATASETS or d in measured]
        if len(found) != 1:
            raise UsageError(
                f"{source} holds results for {', '.join(found) or 'no dataset'}: pick one with --dataset"
            )
        dataset = found[0]
    if dataset not in tables:
        raise UsageError(f"no {dataset} rows in {source} (datasets: {', '.join(tables)})")
    return dataset, tables[dataset], _report_lines(collection, warnings)


def command_plot_frequency(args: argparse.Namespace) -> int:
    from leaderboard.plots import bucket_difference, frequency_buckets, plot_frequency
    from leaderboard.provenance import check_comparable, load_scored_dataset

    check_output_file(args.output, "--output", inputs=[args.a, args.b])
    a, b = load_result(args.a), load_result(args.b)
    check_comparable(a, b)
    (a, log_a), (b, log_b) = load_verified(a), load_verified(b)
    warning = _check_results([a, b], "plot", args.allow_unaudited)
    dataset = load_scored_dataset(a, args.dataset, args.data_dir)
    check_not_an_input(args.output, "--output", dataset.files())
    targets = dataset.tokens(a.split).ids
    if len(targets) != len(log_a):
        raise UsageError(f"{dataset.directory} {a.split} has {len(targets)} tokens, the results {len(log_a)}")
    try:
        buckets = frequency_buckets(
            dataset.tokens("train").ids, len(dataset.vocab), args.buckets, args.bucketing
        )
    except ValueError as error:  # more buckets than words
        raise UsageError(str(error)) from None
    result = bucket_difference(targets, log_a, log_b, buckets)
    for number, (mean, tokens, types) in enumerate(zip(result.mean, result.tokens, result.types), 1):
        print(
            f"bucket {number:>2}: {types:>6,} words, {tokens:>8,} tokens, mean NLL(A) - NLL(B) {mean:+.4f}",
            flush=True,
        )
    title = args.title or (
        f"{a.record.dataset}/{a.split}: mean difference in log perplexity by word frequency"
    )
    unchecked = [(path.name, gap) for path, gap in _trust_gaps([a, b]).items()]
    figure_warning = _figure_warning(unchecked) if warning else None
    path = plot_frequency(result, _describe(a), _describe(b), title, args.output, warning=figure_warning)
    print(f"wrote {path}")
    return 0


def command_plot_gates(args: argparse.Namespace) -> int:
    from leaderboard.plots import gates_title, load_gates, plot_gates

    check_output_file(args.output, "--output", inputs=[args.gates])
    try:
        gates = load_gates(args.gates)
    except ValueError as error:
        raise UsageError(str(error)) from None
    title = args.title if args.title is not None else gates_title(args.gates)
    path = plot_gates(gates, title, args.output, bins=args.bins)
    print(f"wrote {path}")
    return 0


#: Where a training log is cut in ``plot curves``: (epoch, step), step None for the epoch's end.
LogCut = tuple[int, int | None]


def _log_part(part: str) -> tuple[str, LogCut | None]:
    """``LOG.jsonl[@EPOCH[:STEP]]`` -> (the log, the cut or None)."""
    path, at, cut = part.rpartition("@")
    match = re.fullmatch(r"(\d+)(?::(\d+))?", cut) if at else None
    if match is None:
        return part, None
    return path, (int(match[1]), int(match[2]) if match[2] is not None else None)


def _curve_spec(spec: str) -> tuple[list[tuple[str, LogCut | None]], str]:
    """``LOG[@CUT][,LOG[@CUT]...][=LABEL]`` -> (each log with its cut, the label; default: the
    first log's :func:`_log_label`)."""
    paths, _, label = spec.partition("=")
    parts = [_log_part(part) for part in paths.split(",")]
    return parts, label or _log_label(Path(parts[0][0]))


def _log_label(path: Path) -> str:
    """A log's default label: its run directory's name for a run's ``log.jsonl``, else its own
    name without ``.log.jsonl`` (``results/ptb/training/zoneout_lstm-medium.log.jsonl``)."""
    if path.name == "log.jsonl":
        return path.parent.name
    return path.name.removesuffix(".jsonl").removesuffix(".log")


def _training_curve(parts: list[tuple[str, LogCut | None]]) -> pd.DataFrame:
    """One curve of ``plot curves``: its logs, each cut where given, joined in order."""
    from leaderboard.training_logs import cut_training_log, join_training_logs, load_training_log

    frames = []
    for path, cut in parts:
        try:
            frame = load_training_log(path)
            frames.append(cut_training_log(frame, *cut, path) if cut else frame)
        except OSError as error:
            hint = "; a cut reads LOG@EPOCH or LOG@EPOCH:STEP" if "@" in Path(path).name else ""
            raise UsageError(f"{path}: cannot read ({error.strerror}){hint}") from None
        except ValueError as error:
            raise UsageError(str(error)) from None
    return join_training_logs(frames)


def command_plot_curves(args: argparse.Namespace) -> int:
    from leaderboard.plots import plot_curves

    specs = [_curve_spec(spec) for spec in args.logs]
    check_output_file(args.output, "--output", inputs=[path for parts, _ in specs for path, _ in parts])
    curves = [(label, _training_curve(parts)) for parts, label in specs]
    path = plot_curves(curves, args.title or "validation perplexity during training", args.output, args.x)
    print(f"wrote {path}")
    return 0


def _valid_to_test(paths: list[str]) -> ValidToTest:
    """``--test-ratio VALID.json TEST.json``: one model's two results on one dataset."""
    from leaderboard.training_logs import ValidToTest

    valid, test = (load_result(path) for path in paths)
    if (valid.split, test.split) != ("valid", "test"):
        raise UsageError(
            f"--test-ratio: give a valid result, then a test result ({paths[0]} is {valid.split}, "
            f"{paths[1]} is {test.split})"
        )
    fields = ("model", "model_args", "checkpoint", "dataset", "vocab_sha256", "scoring")
    differing = [field for field in fields if getattr(valid.record, field) != getattr(test.record, field)]
    if protocol_setting(valid.record.protocol) != protocol_setting(test.record.protocol):
        differing.append("protocol")
    if differing:
        raise UsageError(
            f"--test-ratio: {paths[0]} and {paths[1]} are not one model scored alike on one dataset "
            f"(they differ in {', '.join(differing)})"
        )
    return ValidToTest(valid.record.model, valid.record.dataset, valid.perplexity, test.perplexity)


def command_project(args: argparse.Namespace) -> int:
    from leaderboard.training_logs import describe_projection, hours_by_device, last_epoch_pace, project_run

    parts, name = _curve_spec(args.log)
    run = _training_curve(parts)
    references = _references(args.reference, name, run, args.log)
    try:
        projection = project_run(run, name, references)
    except ValueError as error:
        raise UsageError(str(error)) from None
    valid_to_test = _valid_to_test(args.test_ratio) if args.test_ratio else None
    lines = describe_projection(projection, name, hours_by_device(run), last_epoch_pace(run), valid_to_test)
    print("\n".join(lines))
    return 0


def _references(specs: list[str], name: str, run: pd.DataFrame, run_spec: str) -> dict[str, pd.DataFrame]:
    """``project``'s ``--reference`` curves by label, each label and each log once: a label
    taken (by the run ``name`` too) is refused, and so is a log whose records are those of
    another reference or of the run (``run_spec``), under any path or label: one run counted
    twice would weigh twice."""
    references: dict[str, pd.DataFrame] = {}
    given = {f"the run ({run_spec})": run}
    for spec in specs:
        parts, label = _curve_spec(spec)
        if label in references or label == name:
            raise UsageError(f"--reference {spec}: the label {label!r} is taken; give it another (LOG=LABEL)")
        frame = _training_curve(parts)
        same = next((other for other, seen in given.items() if frame.equals(seen)), None)
        if same is not None:
            raise UsageError(f"--reference {spec}: the same log as {same}; each run counts once")
        references[label] = frame
        given[f"--reference {spec}"] = frame
    return references


def command_plot_zipf(args: argparse.Namespace) -> int:
    from harness.datasets import load_dataset
    from leaderboard.plots import plot_zipf, rank_frequency
    from wikitext_toolkit_core.format import EOS

    check_output_file(args.output, "--output")
    corpora = []
    for name in args.corpora:
        try:
            dataset = (
                load_dataset(name, args.data_dir, download=False)
                if not Path(name).is_dir()
                else load_dataset(name)
            )
            check_not_an_input(args.output, "--output", dataset.files())
            ids = dataset.tokens(args.split).ids
        except DatasetError as error:
            hint = "" if args.data_dir else " (pass --data-dir DIR)"
            raise UsageError(f"{error}{hint}") from None
        exclude = [] if args.include_eos else [dataset.vocab[EOS]]
        corpora.append((dataset.name, rank_frequency(ids, len(dataset.vocab), exclude)))
    title = args.title or (
        f"Zipf plot of the {args.split} split" + ("" if args.include_eos else " (<eos> left out)")
    )
    path = plot_zipf(corpora, title, args.output)
    print(f"wrote {path}")
    return 0


# ---- site ----------------------------------------------------------------------------------------


def command_site(args: argparse.Namespace) -> int:
    from leaderboard.bootstrap import minimum_samples
    from leaderboard.site import SiteSettings, build_site, figure_images
    from leaderboard.table import build_tables

    confidence = SiteSettings.confidence
    if args.samples < minimum_samples(confidence):
        raise UsageError(
            f"--samples {args.samples} is too few for the matrices' {100 * confidence:g}% intervals: "
            f"at least {minimum_samples(confidence):,}"
        )
    out = check_output_dir(args.output_dir, "--output-dir", inputs=args.results)
    _check_site_dir(out, [Path(source) for source in args.results])
    for directory in args.figures:
        if not Path(directory).is_dir():
            raise UsageError(f"--figures {directory}: no such directory")
        figure_images(Path(directory))  # a symbolic link among them is refused before any work
    for source in args.results:
        if not Path(source).exists():
            raise UsageError(f"{source}: no such file or directory")
    reported = None if args.no_reported else _load_reported(None)
    collection = collect(args.results, include_unaudited=True)
    warnings: list[str] = []
    roots = [Path(s) for s in args.results if Path(s).is_dir()]
    tables = build_tables(collection, reported, roots=roots, warnings=warnings)
    _report(collection, warnings)
    settings = SiteSettings(
        title=args.title, figures=tuple(Path(d) for d in args.figures), samples=args.samples, seed=args.seed
    )
    written = build_site(tables, collection, out, settings)
    pages = sum(1 for path in written if path.parent.name == "results")
    print(
        f"wrote {len(written)} file(s) to {out}: {len(tables)} table(s), {pages} result page(s), "
        f"{len(settings.figures)} figure folder(s); open {out / 'index.html'}"
    )
    return 0


# ---- parser --------------------------------------------------------------------------------------


TITLE_HELP = "the figure's title (default: {default})"


def _add_no_reported_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-reported", action="store_true", help="only the rows measured here, no published figures"
    )


def _add_include_unaudited_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--include-unaudited", action="store_true", help=INCLUDE_UNAUDITED_HELP)


def _add_allow_unaudited_option(parser: argparse.ArgumentParser, *aliases: str, use: str, where: str) -> None:
    """:data:`ALLOW_UNAUDITED` (and ``aliases``, its former names): ``use`` (a verb) results that
    are not audited and verified anyway, with a warning on stderr and ``where``."""
    parser.add_argument(
        ALLOW_UNAUDITED,
        *aliases,
        dest="allow_unaudited",
        action="store_true",
        help=ALLOW_UNAUDITED_HELP.format(use=use, where=where),
    )


def _add_figure_output_option(parser: argparse.ArgumentParser) -> None:
    """A figure's ``--output PNG``, its format checked before any work."""
    parser.add_argument("--output", required=True, type=_figure_file, metavar="PNG", help="the figure")


def _add_title_option(parser: argparse.ArgumentParser, default: str) -> None:
    parser.add_argument("--title", help=TITLE_HELP.format(default=default))


def _add_build_parser(commands: Any) -> None:
    build = commands.add_parser(
        "build",
        help="one table per dataset from result files",
        description="Read every harness result JSON under RESULTS and write "
        "one ranked table per dataset, published figures beside them.",
    )
    build.add_argument(
        "results",
        nargs="+",
        metavar="RESULTS",
        help="result directories or files; contamination reports among them (harness contamination "
        "--result) add their results' clean perplexity",
    )
    build.add_argument("--output-dir", required=True, metavar="DIR", help="where the tables go")
    build.add_argument(
        "--format",
        nargs="+",
        choices=["csv", "markdown", "html"],
        default=["csv"],
        help="the files written per dataset (default: csv)",
    )
    build.add_argument(
        "--reported",
        type=existing_file,
        metavar="CSV",
        help="published figures (default: the packaged reported.csv)",
    )
    _add_no_reported_option(build)
    build.add_argument(
        "--strict",
        action="store_true",
        help="reject results without their per-token log-probabilities (by default shown "
        "unranked, kind 'unverified'), and exit 1 when any file was rejected",
    )
    _add_include_unaudited_option(build)
    build.set_defaults(handler=command_build)


def _add_regenerate_parser(commands: Any) -> None:
    regen = commands.add_parser(
        "regenerate",
        help="the project's committed tables, in one go",
        description="Rebuild the committed leaderboard (csv and markdown) "
        f"from {DEFAULT_RESULTS}/ and remove the tables of datasets it no longer has; exit 1 "
        "when a file was rejected (and remove nothing). Like build --strict, it rejects results "
        "without their per-token log-probabilities.",
    )
    regen.add_argument(
        "--results",
        default=str(DEFAULT_RESULTS),
        metavar="DIR",
        help=f"the result files (default: {DEFAULT_RESULTS})",
    )
    regen.add_argument(
        "--output-dir",
        default=str(DEFAULT_TABLES),
        metavar="DIR",
        help=f"where the tables go (default: {DEFAULT_TABLES})",
    )
    regen.add_argument(
        "--readme",
        type=existing_file,
        metavar="README.md",
        help="also refresh the tables between <!-- leaderboard:DATASET:begin/end --> markers "
        "(default: no README)",
    )
    _add_include_unaudited_option(regen)
    regen.set_defaults(handler=command_regenerate)


def _add_compare_parser(commands: Any) -> None:
    compare = commands.add_parser(
        "compare",
        help="paired bootstrap of two results' perplexities",
        description="Paired bootstrap over the per-token log-probabilities "
        "of two results on the same dataset split.",
    )
    compare.add_argument("a", metavar="A.json", help="a result file")
    compare.add_argument("b", metavar="B.json", help="a result file of the same dataset split")
    compare.add_argument(
        "--samples",
        type=_samples,
        default=10_000,
        help=f"bootstrap resamples, at least 10 / (1 - confidence), at most {MAX_SAMPLES:,} "
        "(default: 10,000)",
    )
    compare.add_argument(
        "--seed", type=non_negative_int, default=0, help="seed of the resampling (default: 0)"
    )
    compare.add_argument(
        "--block-length",
        type=_block_length,
        default="auto",
        metavar="N|auto",
        help="tokens per resampled block; 1: i.i.d. tokens (default: auto, ceil(sqrt(N)))",
    )
    compare.add_argument(
        "--confidence", type=_confidence, default=0.95, help="level of the intervals (default: 0.95)"
    )
    _add_allow_unaudited_option(compare, use="compare", where="first on stdout")
    compare.add_argument(
        ACROSS_PROTOCOLS,
        dest="across_protocols",
        action="store_true",
        help="compare results scored under different protocols (stream and documents) anyway; "
        "by default refused",
    )
    compare.set_defaults(handler=command_compare)


def _add_bars_parser(plots: Any) -> None:
    bars = plots.add_parser("bars", help="a leaderboard as a bar chart")
    bars.add_argument(
        "source",
        nargs="+",
        metavar="RESULTS_DIR|TABLE.csv",
        help="result directories (several, as build takes them: yours beside results/), or one table "
        "build wrote",
    )
    bars.add_argument(
        "--dataset",
        help="which dataset's table, for a results directory (default: the one dataset with results)",
    )
    _add_figure_output_option(bars)
    _add_no_reported_option(bars)
    _add_allow_unaudited_option(
        bars, "--include-unaudited", use="draw", where="in the figure (their bars in colours of their own)"
    )
    scale = bars.add_mutually_exclusive_group()
    scale_default = "(default: log when the largest figure is over 5 times the smallest)"
    scale.add_argument(
        "--log", dest="log", action="store_true", default=None, help=f"log perplexity axis {scale_default}"
    )
    scale.add_argument(
        "--linear", dest="log", action="store_false", help=f"linear perplexity axis {scale_default}"
    )
    _add_title_option(bars, "DATASET leaderboard")
    bars.set_defaults(handler=command_plot_bars)


def _add_frequency_parser(plots: Any) -> None:
    frequency = plots.add_parser("frequency", help="the paper's Figure 4: difference by word frequency")
    frequency.add_argument("a", metavar="A.json", help="the reference model (e.g. the LSTM)")
    frequency.add_argument("b", metavar="B.json", help="the model compared with it; > 0 means B is better")
    _add_figure_output_option(frequency)
    frequency.add_argument("--buckets", type=positive_int, default=10, help="frequency buckets (default: 10)")
    frequency.add_argument(
        "--bucketing",
        choices=["types", "tokens", "heldout"],
        default="types",
        help="what each bucket holds the same amount of: distinct words (types, our reading of "
        "the paper), train tokens, or evaluated tokens (heldout) (default: types)",
    )
    add_data_dir_option(frequency)
    frequency.add_argument(
        "--dataset", metavar="NAME|DIR", help="where the corpus is (default: the result's dataset)"
    )
    _add_allow_unaudited_option(frequency, use="draw", where="in the figure")
    _add_title_option(frequency, "the dataset split and what is shown")
    frequency.set_defaults(handler=command_plot_frequency)


def _add_gates_parser(plots: Any) -> None:
    gates = plots.add_parser("gates", help="histogram of pointer-sentinel gate values")
    gates.add_argument("gates", metavar="GATES.npy", help="[N] floats in [0, 1], the softmax share g")
    _add_figure_output_option(gates)
    gates.add_argument("--bins", type=positive_int, default=50, help="histogram bins (default: 50)")
    _add_title_option(
        gates,
        "'pointer sentinel gate:' and the model, dataset and split of the GATES.json "
        "beside the gates, else their file's name",
    )
    gates.set_defaults(handler=command_plot_gates)


def _add_curves_parser(plots: Any) -> None:
    curves = plots.add_parser("curves", help="learning curves from `baselines train` logs")
    curves.add_argument(
        "logs",
        nargs="+",
        metavar="LOG.jsonl[=LABEL]",
        help="training logs (log.jsonl of a run directory), each with a label (default: the run "
        "directory's name, or the file's name without .log.jsonl). A warm-started path is one "
        "curve of several logs, "
        "LOG@EPOCH[:STEP],...,LOG[=LABEL]: each log cut at its validation at the end of EPOCH (or "
        "at STEP of it), whose weights the next run started from (--init-from), and the next "
        "counted on from there",
    )
    curves.add_argument(
        "--x",
        choices=["minutes", "epochs"],
        default="minutes",
        help="the x axis: training minutes, or epochs for runs whose minutes do not compare "
        "(trained partly on a GPU) (default: minutes)",
    )
    _add_figure_output_option(curves)
    _add_title_option(curves, "validation perplexity during training")
    curves.set_defaults(handler=command_plot_curves)


def _add_zipf_parser(plots: Any) -> None:
    zipf = plots.add_parser("zipf", help="rank-frequency plot of corpora")
    zipf.add_argument(
        "corpora", nargs="+", metavar="NAME|DIR", help="ptb, wikitext-2, ... or a builder output directory"
    )
    _add_figure_output_option(zipf)
    zipf.add_argument("--split", default="train", choices=SPLITS, help="the split counted (default: train)")
    add_data_dir_option(zipf)
    zipf.add_argument("--include-eos", action="store_true", help="count <eos> as a word")
    _add_title_option(zipf, "Zipf plot of the SPLIT split")
    zipf.set_defaults(handler=command_plot_zipf)


def _check_site_dir(out: Path, inputs: list[Path]) -> None:
    """Refuse, before any work, a site directory that holds files but no site built there, or
    that lies inside an input (its copies of the results would be read as results next time)."""
    from leaderboard.site import MANIFEST, holds_a_site_or_nothing

    for source in inputs:
        source = source.resolve()
        if source.is_dir() and (out.resolve() == source or source in out.resolve().parents):
            raise UsageError(f"--output-dir {out}: is inside {source}, an input; choose another directory")
    if out.is_dir() and not holds_a_site_or_nothing(out):
        raise UsageError(
            f"--output-dir {out}: holds files and no site built here ({MANIFEST} missing); "
            "name an empty or new directory"
        )


def _add_project_parser(commands: Any) -> None:
    project = commands.add_parser(
        "project",
        help="project where a training run will end, from finished runs of the same recipe",
        description="Fits the run's validation perplexity at its first learning rate with a "
        "falling exponential (its plateau), and scales the plateau by how far each finished "
        "reference run ended below its own plateau, both fitted on the epochs they share; each reference is "
        "also projected from the others (the backtest). The method: leaderboard/training_logs.py.",
    )
    project.add_argument(
        "log",
        metavar="LOG.jsonl[=LABEL]",
        help="the run's training log (a warm-started path: LOG@EPOCH[:STEP],...,LOG, as for plot curves)",
    )
    project.add_argument(
        "--reference",
        action="append",
        required=True,
        metavar="LOG.jsonl[=LABEL]",
        help="the log of a finished run of the same recipe (its learning rate halved at least once); "
        "repeatable",
    )
    project.add_argument(
        "--test-ratio",
        nargs=2,
        metavar=("VALID.json", "TEST.json"),
        help="one model's harness results on the run's dataset, valid then test: also carry the "
        "projection over to test by their perplexity ratio (default: validation only)",
    )
    project.set_defaults(handler=command_project)


def _add_site_parser(commands: Any) -> None:
    site = commands.add_parser(
        "site",
        help="the leaderboard as a static web site",
        description="A self-contained static site (index with sortable tables and significance "
        "matrices, a page per result, figures) that works from file:// and any static host.",
    )
    site.add_argument("results", nargs="+", metavar="RESULTS", help="result files or directories")
    site.add_argument("--output-dir", required=True, help="where the site goes (empty, new, or a site)")
    site.add_argument(
        "--figures",
        action="append",
        default=[],
        metavar="DIR",
        help="a folder of figures (PNG, SVG, ...) shown on the index, e.g. leaderboard/plots; "
        "repeatable (default: none; each table's bar chart is always drawn)",
    )
    site.add_argument("--title", default=SITE_TITLE, help="the index's heading (default: %(default)s)")
    _add_no_reported_option(site)
    site.add_argument(
        "--samples",
        type=_samples,
        default=10_000,
        help="bootstrap resamples of each significance test (default: 10000)",
    )
    site.add_argument("--seed", type=non_negative_int, default=0, help="seed of the resampling (default: 0)")
    site.set_defaults(handler=command_site)


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog="python -m leaderboard",
        description="Leaderboards, significance tests and plots from harness result files.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    _add_build_parser(commands)
    _add_regenerate_parser(commands)
    _add_compare_parser(commands)
    _add_site_parser(commands)
    _add_project_parser(commands)
    plots = commands.add_parser("plot", help="figures (PNG)").add_subparsers(dest="figure", required=True)
    for add_figure_parser in (
        _add_bars_parser,
        _add_frequency_parser,
        _add_gates_parser,
        _add_curves_parser,
        _add_zipf_parser,
    ):
        add_figure_parser(plots)
    return parser


def main(argv: list[str] | None = None) -> int:
    """``lm-leaderboard`` / ``python -m leaderboard``; returns the exit status."""
    return run(build_parser(), argv)
