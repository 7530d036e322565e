"""``python -m harness {eval,list,download}``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from harness import contamination, runner
from harness.causality import ACCELERATOR_TOLERANCE, SUBSTITUTIONS
from harness.datasets import Dataset, load_dataset
from harness.plugin import ModelUnavailable, discover_plugins, parse_model_args
from harness.protocol import DEFAULT_PROTOCOL, DEFAULT_SPLITS
from wikitext_toolkit_core import ngrams
from wikitext_toolkit_core.benchmarks import locate_benchmark
from wikitext_toolkit_core.catalogue import BENCHMARKS, PAPER_BENCHMARKS
from wikitext_toolkit_core.cli import (
    ArgumentParser,
    UsageError,
    add_data_dir_option,
    check_not_an_input,
    check_output_file,
    non_negative_float,
    non_negative_int,
    positive_int,
    run,
    share,
)
from wikitext_toolkit_core.files import write_atomically
from wikitext_toolkit_core.format import SPLITS
from wikitext_toolkit_core.result_schema import PROTOCOL_NAMES, ResultRecord
from wikitext_toolkit_core.threads import AUTO, THREADS_HELP, thread_request


def _summary_line(record: ResultRecord) -> str:
    """The result in one line; with the documents protocol, and lm-evaluation-harness's figures
    on a second."""
    speed = record.tokens_per_second
    documents = " (documents)" if record.protocol.kind == "documents" else ""
    line = (
        f"{record.model} on {record.dataset}/{record.split}{documents}: perplexity "
        f"{record.perplexity:.2f} ({record.nll:.4f} nats, {record.bits_per_token:.3f} "
        f"bits per token; {record.tokens:,} tokens in {record.runtime_seconds:.1f} s"
        + (f", {speed:,.0f} tokens/s" if speed else "")
        + ")"
    )
    metrics = record.document_metrics
    if metrics is None:
        return line
    return line + (
        f"\n  lm-evaluation-harness's figures over {metrics['documents']:,} documents: word_perplexity "
        f"{_figure(metrics['word_perplexity'])} ({metrics['words']:,} words), byte_perplexity "
        f"{_figure(metrics['byte_perplexity'])}, bits_per_byte {metrics['bits_per_byte']:.4f} "
        f"({metrics['bytes']:,} bytes)"
    )


def _figure(value: float | None) -> str:
    """A perplexity of the documents protocol (None: too large for a float)."""
    return "overflow" if value is None else f"{value:.4f}"


def _table(records: list[ResultRecord]) -> str:
    header = (
        f"{'dataset':<16} {'split':<6} {'tokens':>11} {'perplexity':>11} "
        f"{'nll':>8} {'bits':>7} {'seconds':>8}"
    )
    rows = [
        f"{r.dataset:<16} {r.split:<6} {r.tokens:>11,} {r.perplexity:>11.2f} "
        f"{r.nll:>8.4f} {r.bits_per_token:>7.3f} {r.runtime_seconds:>8.1f}"
        for r in records
    ]
    return "\n".join([f"model: {records[0].model}", header, *rows])


def _plan_datasets(args: argparse.Namespace) -> list[str]:
    """The datasets to evaluate: those named, else the paper benchmarks found locally."""
    if args.dataset:
        return args.dataset
    found = []
    for name in PAPER_BENCHMARKS:
        if locate_benchmark(name, args.data_dir) is None:
            print(
                f"{name}: not found locally; `python -m harness download {name}` fetches it "
                f"(about {BENCHMARKS[name].approx_mb:g} MB)",
                file=sys.stderr,
            )
        else:
            found.append(name)
    return found


def _audits_passed(record: ResultRecord) -> str:
    """The line that says that a result just scored (so of this schema) passed both audits, and
    what they checked."""
    audit, causality = record.audit or {}, record.causality_audit or {}
    probability = (
        "probability audit not applicable (subword scoring)"
        if record.scoring == "subword"
        else f"probability audit at {audit['checked']:,} positions"
    )
    evidence = f"evidence {causality['evidence']:.1f} nats, bound {causality['evidence_bound']:.1f}"
    causality_audit = f"causality audit of {causality['points']:,} substitutions ({evidence})"
    return f"audited: {probability}, {causality_audit}: passed"


def command_eval(args: argparse.Namespace) -> int:
    """Score the plugin as ``args`` ask (:func:`harness.runner.run`), printing each split's result
    as it comes and then the table; 1 when nothing could be evaluated."""
    records = [result.record for result in runner.run(_request(args), _PrintedReport())]
    if not records:
        print("nothing evaluated", file=sys.stderr)
        return 1
    if len(records) > 1 or not args.dataset:  # without --dataset: the table of what was found
        print(_table(records))
    if args.output_dir is None and args.output is None and args.save_token_logprobs is None:
        print(
            "note: nothing was saved; --output-dir DIR keeps each result with its per-token file "
            "(what `leaderboard build` and `compare` read)",
            file=sys.stderr,
        )
    return 0


def _request(args: argparse.Namespace) -> runner.EvaluationRequest:
    """The evaluation that ``eval``'s arguments ask for."""
    if args.protocol == "documents" and args.batch_size != 1:
        raise UsageError("--protocol documents scores one stream per document: --batch-size does not apply")
    return runner.EvaluationRequest(
        model=args.plugin,
        data=runner.DatasetChoice(
            sources=tuple(_plan_datasets(args)), data_dir=args.data_dir, skip_unavailable=not args.dataset
        ),
        splits=tuple(dict.fromkeys(args.split)),
        protocol=runner.checked_protocol(
            args.protocol,
            args.batch_size,
            args.bptt,
            args.audit,
            args.causality_audit,
            args.causality_tolerance,
        ),
        loading=runner.ModelLoading(
            device=args.device,
            checkpoint=args.checkpoint,
            model_args=parse_model_args(args.model_args),
            in_process=args.in_process,
            threads=args.threads,
            own_process=True,
        ),
        files=runner.ResultFiles(
            directory=args.output_dir,
            record=args.output,
            token_log_probs=args.save_token_logprobs,
            overwrite=args.overwrite,
            names=runner.COMMAND_LINE_NAMES,
        ),
    )


class _PrintedReport(runner.RunReport):
    """``eval``'s lines as the run goes: each split's audits (stderr) and result (stdout), and
    each dataset skipped (stderr)."""

    def scored(self, record: ResultRecord) -> None:
        where = f"{record.dataset}/{record.split}"
        for reason in record.audit_gaps:
            print(f"{where}: unaudited: {reason}", file=sys.stderr)
        if not record.audit_gaps:
            print(f"{where}: {_audits_passed(record)}", file=sys.stderr)
        print(_summary_line(record), flush=True)

    def skipped(self, dataset: Dataset, unavailable: ModelUnavailable) -> None:
        print(f"{dataset.name}: {unavailable}", file=sys.stderr)


def command_list(args: argparse.Namespace) -> int:
    print("datasets:")
    for name, benchmark in BENCHMARKS.items():
        directory = locate_benchmark(name, args.data_dir)
        where = str(directory) if directory else f"downloadable (about {benchmark.approx_mb:g} MB)"
        print(f"  {name:<17} {where}")
        print(f"  {'':<17} cite: {benchmark.citation}")
    print("  DIR               any directory with wiki.{train,valid,test}.tokens (wikitext_builder output)")
    print("plugins (harness.models entry points; any importable module path works too):")
    for name, target in sorted(discover_plugins().items()):
        print(f"  {name:<17} {target}")
    return 0


def command_download(args: argparse.Namespace) -> int:
    for name in args.names:
        if name not in BENCHMARKS:
            raise UsageError(f"unknown benchmark {name!r} (known: {', '.join(BENCHMARKS)})")
        dataset = load_dataset(name, args.data_dir)
        for split in SPLITS:
            dataset.verify(split)
        print(f"{name}: {dataset.directory} (checksums verified)")
    return 0


def command_contamination(args: argparse.Namespace) -> int:
    """Look for the split's units in the corpus; with ``--result``, split its perplexity."""
    check_output_file(args.output, "--output")
    files = contamination.corpus_files(args.corpus)
    dataset = load_dataset(args.dataset, args.data_dir)
    sha256 = dataset.verify(args.split)
    check_not_an_input(args.output, "--output", [*dataset.files(), *files, *filter(None, [args.result])])
    block_lines = args.block_lines or ngrams.DEFAULT_BLOCK_LINES
    test = ngrams.TestSide.from_split(
        dataset, args.split, units=args.units, ngram=args.ngram, block_lines=block_lines
    )
    if args.block_lines is not None and test.kind != "blocks":
        raise UsageError(f"--block-lines applies to --units blocks; {dataset.name} is cut into {test.kind}")
    scored = None
    if args.result is not None:  # checked before the scan
        scored = contamination.read_scored_result(
            args.result, dataset=dataset.name, split=args.split, sha256=sha256, tokens=test.tokens
        )
        per_token = contamination.token_log_probs_file(args.result, scored[0])
        check_not_an_input(args.output, "--output", [per_token])
    overlaps = test.scan(contamination.corpus_documents(files, args.text_field))
    settings = {
        "corpus": [str(path) for path in args.corpus],
        "threshold": args.threshold,
        "block_lines": block_lines if test.kind == "blocks" else None,
        "text_field": args.text_field,
    }
    report = contamination.contamination_report(
        test, overlaps, dataset=dataset.name, split=args.split, sha256=sha256, settings=settings
    )
    if scored is not None:
        record, token_log_probs = scored
        flags = contamination.contaminated_units(report)
        split = contamination.split_perplexity(token_log_probs, test.unit_tokens(), flags)
        report.update({"result": str(args.result), "model": record.get("model"), **split})
    print(contamination.format_report(report))  # the report first: a failed write loses nothing
    write_atomically(args.output, json.dumps(report, indent=2) + "\n")
    return 0


def _add_contamination_parser(commands: Any, data_dir: argparse.ArgumentParser) -> None:
    check = commands.add_parser(
        "contamination",
        parents=[data_dir],
        help="how much of a benchmark split a training corpus contains",
        description="Find the units of a benchmark split (WikiText articles, PTB blocks of lines) whose "
        "word n-grams a training corpus contains; with --result, the perplexity on the clean part.",
    )
    check.add_argument(
        "corpus",
        nargs="+",
        type=Path,
        metavar="CORPUS",
        help="text files (.gz/.xz/.bz2 too), .jsonl[.gz] files, builder corpus directories "
        "(their wiki.*.tokens) or directories of such files",
    )
    check.add_argument(
        "--dataset",
        required=True,
        metavar="NAME",
        help=f"benchmark ({', '.join(BENCHMARKS)}) or directory (required)",
    )
    check.add_argument("--split", required=True, choices=SPLITS, help="the split to check (required)")
    check.add_argument("--output", required=True, metavar="REPORT.json", help="write the report (required)")
    _add_overlap_options(check)
    check.set_defaults(handler=command_contamination)


def _add_overlap_options(check: argparse.ArgumentParser) -> None:
    """The contamination check's options: what counts as an overlap, the units, a result to split."""
    check.add_argument(
        "--ngram",
        type=positive_int,
        default=ngrams.DEFAULT_NGRAM,
        metavar="N",
        help=f"n-gram length in words (default {ngrams.DEFAULT_NGRAM}; "
        f"{ngrams.MIN_NGRAM} to {ngrams.MAX_NGRAM:,})",
    )
    check.add_argument(
        "--threshold",
        type=share,
        default=contamination.DEFAULT_THRESHOLD,
        metavar="X",
        help="a unit is contaminated when this share of its n-grams is in the corpus "
        f"(default {contamination.DEFAULT_THRESHOLD})",
    )
    check.add_argument(
        "--result",
        type=Path,
        metavar="RESULT.json",
        help="a saved evaluation of this split with its per-token log-probabilities: report its "
        "perplexity on the clean and the contaminated units (default: none)",
    )
    check.add_argument(
        "--units",
        choices=ngrams.UNIT_KINDS,
        default="auto",
        help="articles (level-1 headings) or blocks of lines (default auto: blocks for PTB, else articles)",
    )
    check.add_argument(
        "--block-lines",
        type=positive_int,
        metavar="N",
        help=f"lines per block with --units blocks (default {ngrams.DEFAULT_BLOCK_LINES})",
    )
    check.add_argument(
        "--text-field",
        default=contamination.DEFAULT_TEXT_FIELD,
        metavar="NAME",
        help=f"the text field of .jsonl records (default {contamination.DEFAULT_TEXT_FIELD})",
    )


def _add_eval_parser(commands: Any, data_dir: argparse.ArgumentParser) -> None:
    evaluation = commands.add_parser(
        "eval",
        parents=[data_dir],
        help="evaluate a plugin",
        description="Evaluate a language-model plugin under the papers' protocol.",
    )
    evaluation.add_argument("plugin", help="module path (my_pkg.my_model) or registered plugin name")
    evaluation.add_argument(
        "--dataset",
        nargs="+",
        metavar="NAME",
        help=f"benchmarks ({', '.join(BENCHMARKS)}) or directories; default: "
        "every paper benchmark found locally",
    )
    evaluation.add_argument(
        "--split",
        nargs="+",
        choices=SPLITS,
        default=list(DEFAULT_SPLITS),
        help=f"the splits to score, in order (default {' '.join(DEFAULT_SPLITS)}, as the papers report)",
    )
    evaluation.add_argument(
        "--checkpoint", help="passed to the plugin's factory (default none: the plugin's own choice)"
    )
    evaluation.add_argument(
        "--model-args", metavar="K=V,...", help="keyword arguments for the factory (default none)"
    )
    evaluation.add_argument(
        "--device", default="auto", help="cpu, cuda, cuda:1, ... (default auto: cuda when there is one)"
    )
    evaluation.add_argument(
        "--threads", type=thread_request, default=AUTO, metavar="N|auto", help=THREADS_HELP
    )
    evaluation.add_argument(
        "--in-process",
        action="store_true",
        help="run the plugin in the harness's own process, for debugging (its results are not ranked); "
        "default: each pass in a fresh worker process (with the causality audit off: in the harness's)",
    )
    _add_protocol_options(evaluation)
    _add_eval_output_options(evaluation)
    evaluation.set_defaults(handler=command_eval)


def _add_protocol_options(evaluation: argparse.ArgumentParser) -> None:
    """The options of ``eval`` that set how a split is scored and audited."""
    evaluation.add_argument(
        "--protocol",
        choices=PROTOCOL_NAMES,
        default=DEFAULT_PROTOCOL.name,
        help="stream: the split as --batch-size contiguous streams (default; the papers' protocol); "
        "documents: each article of a WikiText-style split from a fresh state, with "
        "lm-evaluation-harness's word_perplexity, byte_perplexity and bits_per_byte",
    )
    evaluation.add_argument(
        "--batch-size",
        type=positive_int,
        default=DEFAULT_PROTOCOL.batch_size,
        help="contiguous streams scored together (default %(default)s, the papers' test protocol)",
    )
    evaluation.add_argument(
        "--bptt",
        type=positive_int,
        default=DEFAULT_PROTOCOL.bptt,
        help="positions per chunk (default %(default)s)",
    )
    evaluation.add_argument(
        "--audit",
        type=non_negative_int,
        default=DEFAULT_PROTOCOL.audit_positions,
        metavar="N",
        help="positions whose full distribution is checked (default %(default)s; 0: off)",
    )
    evaluation.add_argument(
        "--causality-audit",
        type=non_negative_int,
        default=DEFAULT_PROTOCOL.causality_points,
        metavar="N",
        help="tokens substituted at random in the causality audit's second pass over the split, "
        "which checks that no score depends on the token it predicts or a later one (default "
        f"{SUBSTITUTIONS:,}, at most a quarter of the split; 0: off, and the pass is not run)",
    )
    evaluation.add_argument(
        "--causality-tolerance",
        type=non_negative_float,
        metavar="X",
        help="largest pass-to-pass change of a log-probability accepted by the "
        "causality audit (default 0, or "
        f"{ACCELERATOR_TOLERANCE:g} for scores on an accelerator)",
    )


def _add_eval_output_options(evaluation: argparse.ArgumentParser) -> None:
    """The options of ``eval`` that say where its results are written."""
    evaluation.add_argument(
        "--output",
        metavar="FILE.json",
        help="write the result record, and its per-token file FILE.logprobs.npy beside it unless "
        "--save-token-logprobs names another (default none: printed only)",
    )
    evaluation.add_argument(
        "--save-token-logprobs",
        metavar="FILE.npy",
        help="save the per-token log-probabilities in stream order (default none)",
    )
    evaluation.add_argument(
        "--output-dir",
        metavar="DIR",
        help="write PLUGIN[+ARG=VALUE...].DATASET.SPLIT.json and .logprobs.npy per evaluation (default none)",
    )
    evaluation.add_argument(
        "--overwrite",
        action="store_true",
        help="replace a result of another dataset of the same name, other plugin code or another "
        "checkpoint (default: refuse, naming it; a rerun of the same code on the same checkpoint and "
        "dataset replaces its result)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog="python -m harness", description="Exact word-level perplexity for any LM plugin."
    )
    commands = parser.add_subparsers(dest="command", required=True)

    data_dir = ArgumentParser(add_help=False)
    add_data_dir_option(
        data_dir,
        help="directory holding ptb/, wikitext-2/, ... (before $HARNESS_DATA_DIR, "
        "the user cache and downloading; default none)",
    )

    _add_eval_parser(commands, data_dir)

    listing = commands.add_parser("list", parents=[data_dir], help="known datasets and plugins")
    listing.set_defaults(handler=command_list)

    fetch = commands.add_parser(
        "download", parents=[data_dir], help="download and verify benchmarks into the user cache"
    )
    fetch.add_argument("names", nargs="+", metavar="NAME")
    fetch.set_defaults(handler=command_download)

    _add_contamination_parser(commands, data_dir)
    return parser


def main(argv: list[str] | None = None) -> int:
    """``lm-harness`` / ``python -m harness``; returns the exit status."""
    return run(build_parser(), argv)
