"""``python -m wikitext_builder [build] | render | validate | stats | merge``."""

from __future__ import annotations

import argparse
import collections
import json
import math
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeGuard

from wikitext_builder.build import PRESETS, Plan, build_corpus, check_shards, fill_from_api, fill_from_stream
from wikitext_builder.cache import CONTENT_KEY, Cache, CacheError
from wikitext_builder.corpus import (
    STATS_FILE,
    WRITTEN_FILES,
    BuildReport,
    check_train,
    corpus_statistics,
    format_statistics,
    parse_shard,
    read_manifest,
)
from wikitext_builder.overlap import DEFAULT_THRESHOLD, EXCLUDED_SPLIT, load_check, parse_specs
from wikitext_builder.sources import (
    BATCH_SIZE,
    DEFAULT_API_URL,
    SAMPLE_DIR,
    USER_AGENT,
    Article,
    MediaWikiClient,
    Skipped,
    SourceError,
    file_sha256,
    folder_sha256,
    iter_dump,
    iter_folder,
    iter_jsonl,
    parse_kinds,
)
from wikitext_builder.workspace import holding_output
from wikitext_toolkit_core import bounded_json
from wikitext_toolkit_core.cli import (
    ArgumentParser,
    UsageError,
    check_output_dir,
    check_output_file,
    non_negative_float,
    non_negative_int,
    positive_float,
    positive_int,
    run,
    share,
)
from wikitext_toolkit_core.files import LOCK_FILE

COMMANDS = ("build", "render", "validate", "stats", "merge")

#: Articles per split when the split sizes are not given: in general, and with --sample (whose
#: six articles leave four for train).
DEFAULT_SPLIT_ARTICLES, SAMPLE_SPLIT_ARTICLES = Plan.valid_articles, 1
#: The defaults of --seed and --min-count (a rebuild from a manifest takes neither default).
DEFAULT_SEED, DEFAULT_MIN_COUNT = Plan.seed, Plan.min_count


def _plan_from_args(args: argparse.Namespace) -> Plan:
    if args.from_manifest is not None:
        return _manifest_plan(args)
    limit, valid, test = args.limit, args.valid_articles, args.test_articles
    if args.preset is not None:
        train_p, valid_p, test_p = PRESETS[args.preset]
        valid = valid if valid is not None else valid_p
        test = test if test is not None else test_p
        limit = limit if limit is not None else train_p + valid + test
    default_split = SAMPLE_SPLIT_ARTICLES if args.sample else DEFAULT_SPLIT_ARTICLES
    plan = Plan(
        seed=DEFAULT_SEED if args.seed is None else args.seed,
        limit=limit,
        valid_articles=default_split if valid is None else valid,
        test_articles=default_split if test is None else test,
        min_count=DEFAULT_MIN_COUNT if args.min_count is None else args.min_count,
        **_exclusion_from_args(args),
    )
    if limit is not None:  # refused before any fetch, not once the cache is full
        check_train(f"--limit {limit:,}", limit, plan.valid_articles, plan.test_articles)
    return plan


def _manifest_plan(args: argparse.Namespace) -> Plan:
    """The plan of a rebuild from a manifest: its articles, their split (whose sizes it records)
    and the articles it excluded, with the ``--min-count`` of its corpus unless given."""
    fixed = ("--limit", "--preset", "--seed", "--valid-articles", "--test-articles")
    given = [option for option in fixed if getattr(args, option[2:].replace("-", "_")) is not None]
    if given:
        raise UsageError(f"--from-manifest fixes the articles and their split; drop {'/'.join(given)}")
    path = Path(args.from_manifest)
    try:
        records = read_manifest(path)
    except ValueError as error:
        raise UsageError(str(error)) from None
    kept = [r for r in records if r["split"] != EXCLUDED_SPLIT]
    sizes = collections.Counter(r["split"] for r in kept)
    recorded = _recorded_settings(path)
    seed = recorded.get("seed")
    return Plan(
        seed=seed if _is_int(seed) else None,  # recorded only: the manifest fixes the order
        valid_articles=sizes["valid"],
        test_articles=sizes["test"],
        min_count=_recorded_min_count(path, recorded) if args.min_count is None else args.min_count,
        manifest=tuple((r["title"], int(r["revision_id"]), r["split"]) for r in kept),
        **_exclusion_from_args(args),
        excluded=tuple(json.dumps(r, ensure_ascii=False) for r in records if r["split"] == EXCLUDED_SPLIT),
    )


def _recorded_settings(manifest: Path) -> dict[str, Any]:
    """The ``builder.settings`` of the ``stats.json`` beside ``manifest`` ({} when there is none or
    it records none); a ``stats.json`` that is not JSON is a :class:`UsageError`."""
    stats = manifest.with_name(STATS_FILE)
    try:
        recorded = bounded_json.loads(stats.read_text(encoding="utf-8"))
    except OSError:
        return {}
    except ValueError as error:  # UnicodeDecodeError and JSONTooDeep included
        raise UsageError(f"{stats}: not JSON ({error}); repair it or move it aside") from None
    try:
        settings = recorded["builder"]["settings"]
    except (KeyError, TypeError):
        return {}
    return settings if isinstance(settings, dict) else {}


def _recorded_min_count(manifest: Path, recorded: dict[str, Any]) -> int:
    """The ``--min-count`` the corpus of ``manifest`` was built with, as ``recorded`` (its
    settings) says; the default when no ``stats.json`` is beside it (:func:`_note_default_min_count`)."""
    stats = manifest.with_name(STATS_FILE)
    if not stats.is_file():
        return DEFAULT_MIN_COUNT
    value = recorded.get("min_count")
    if not _is_int(value, least=1):
        raise UsageError(
            f"{stats}: no builder.settings.min_count (a positive integer) to rebuild the manifest's "
            "corpus with; give --min-count N"
        )
    return value


def _is_int(value: Any, least: float = -math.inf) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


def _note_default_min_count(args: argparse.Namespace) -> None:
    """Say, once the build's outputs are checked, when a rebuild from a manifest takes the default
    ``--min-count`` because no ``stats.json`` beside the manifest records its corpus's."""
    stats = Path(args.from_manifest).with_name(STATS_FILE) if args.from_manifest else None
    if stats is not None and args.min_count is None and not stats.is_file():
        print(
            f"note: no {stats} beside the manifest to say which --min-count its corpus used; "
            f"rebuilding with the default {DEFAULT_MIN_COUNT} (give --min-count N for another)",
            file=sys.stderr,
        )


def _exclusion_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The plan's ``exclude_overlap`` and ``exclude_threshold`` (``--exclude-overlap``, checked
    for its syntax and that each benchmark name or directory exists)."""
    if not args.exclude_overlap:
        if args.exclude_threshold is not None:
            raise UsageError("--exclude-threshold goes with --exclude-overlap")
        return {}
    try:
        specs = parse_specs(args.exclude_overlap)
    except ValueError as error:
        raise UsageError(str(error)) from None
    threshold = DEFAULT_THRESHOLD if args.exclude_threshold is None else args.exclude_threshold
    return {"exclude_overlap": specs, "exclude_threshold": threshold}


def _local_source(args: argparse.Namespace) -> tuple[str, Path] | None:
    """The local source a build reads, as its kind (``"dump"``, ``"folder"``, ``"jsonl"``) and
    path (``--sample``: the folder of packaged articles); None for the API."""
    if args.sample:
        return "folder", SAMPLE_DIR
    return next(
        ((kind, Path(getattr(args, kind))) for kind in ("dump", "folder", "jsonl") if getattr(args, kind)),
        None,
    )


def _source_signature(
    args: argparse.Namespace,
    source: tuple[str, Path] | None,
    kinds: tuple[str, ...],
    shard: tuple[int, int] | None,
) -> dict[str, object]:
    """What fills the cache: a build with another signature must not reuse it. A local source's
    signature holds the sha256 of its content (read here), so an edited source is read again."""
    shard_field = list(shard) if shard else None
    if source is not None:
        kind, path = source
        return {
            "kind": kind,
            "path": str(path.resolve()),
            "articles": list(kinds),
            "shard": shard_field,
            CONTENT_KEY: folder_sha256(path) if kind == "folder" else file_sha256(path),
        }
    signature: dict[str, object] = {
        "kind": "api",
        "url": args.api_url,
        "articles": list(kinds),
        "shard": shard_field,
    }
    if args.from_manifest:
        signature["manifest_sha256"] = file_sha256(Path(args.from_manifest))
    return signature


def _stream(source: tuple[str, Path], kinds: tuple[str, ...]) -> Iterator[Article | Skipped]:
    kind, path = source
    if kind == "dump":
        return iter_dump(path, kinds)
    if kind == "folder":
        return iter_folder(path)
    return iter_jsonl(path, kinds)


def _fill(
    cache: Cache,
    args: argparse.Namespace,
    source: tuple[str, Path] | None,
    kinds: tuple[str, ...],
    plan: Plan,
    shard: tuple[int, int] | None,
) -> None:
    """Fill the cache from the local source, or from the API."""
    if source is not None:
        fill_from_stream(cache, _stream(source, kinds), shard, progress=not args.quiet)
        return
    client = MediaWikiClient(
        args.api_url,
        max_attempts=args.max_attempts,
        backoff_base=args.retry_backoff,
        timeout=args.timeout,
        user_agent=args.user_agent,
    )
    try:
        fill_from_api(cache, client, kinds, plan, shard, batch_size=args.batch_size, progress=not args.quiet)
    finally:
        client.close()


def _print_report(out_dir: Path, report: BuildReport) -> None:
    stats = report.statistics
    print(
        f"{out_dir}: "
        + ", ".join(
            f"{split} {report.articles[split]:,} articles / {stats['tokens'][split]:,} tokens"
            for split in report.articles
        )
        + f"; vocabulary {stats['vocabulary_size']:,}"
    )
    tokens = sum(stats["tokens"].values())
    seconds = max(report.render_seconds, 1e-9)
    print(
        f"rendered {report.rendered:,} articles in {report.render_seconds:.1f} s "
        f"({report.rendered / seconds:,.1f} articles/s, {tokens / seconds:,.0f} tokens/s)"
    )
    if report.skipped:
        counts = report.statistics["builder"]["skipped_counts"]
        print(
            f"skipped {len(report.skipped):,} article{'s' * (len(report.skipped) != 1)} ("
            + ", ".join(f"{count:,} {reason}" for reason, count in counts.items())
            + f"); each named in {out_dir / STATS_FILE}",
            file=sys.stderr,
        )


def command_build(args: argparse.Namespace) -> int:
    kinds = parse_kinds(args.articles)
    source = _local_source(args)
    if source is not None and args.api_url != DEFAULT_API_URL:  # (argparse keeps --from-manifest out)
        raise UsageError(
            "--api-url fetches from the API; it does not go with --dump, --folder, --jsonl or --sample"
        )
    plan = _plan_from_args(args)
    try:
        shard = parse_shard(args.shard) if args.shard else None
    except ValueError as error:
        raise UsageError(str(error)) from None
    overlap_check = load_check(plan.exclude_overlap, plan.exclude_threshold) if plan.exclude_overlap else None
    inputs = [source[1]] if source is not None else []
    if args.from_manifest:
        inputs.append(Path(args.from_manifest))
    if overlap_check is not None:
        inputs += overlap_check.files
    out_dir = check_output_dir(args.output_dir, "--output-dir", inputs=inputs, writes=WRITTEN_FILES)
    default_cache = f"cache.shard-{shard[0]}-of-{shard[1]}.sqlite" if shard else "cache.sqlite"
    cache_path = Path(args.cache) if args.cache else out_dir / default_cache
    check_output_file(cache_path, "--cache", inputs=inputs)
    _check_cache_not_written(cache_path, out_dir)
    _note_default_min_count(args)
    signature = _source_signature(args, source, kinds, shard)
    with holding_output(out_dir, cache_path), Cache(cache_path) as cache:
        if cache.bind_source(signature):
            print(
                f"note: {signature['path']} changed since {cache_path} was filled from it; reading it again",
                file=sys.stderr,
            )
        cache.set_meta("plan", plan.to_json())
        _fill(cache, args, source, kinds, plan, shard)
        if shard is not None:
            print(
                f"shard {shard[0]}/{shard[1]}: cache {cache_path} complete; build the corpus with "
                f"`python -m wikitext_builder merge --output-dir DIR` and the {shard[1]} shard caches"
            )
            return 0
        report = build_corpus(out_dir, [cache], plan, args.workers, not args.quiet, overlap_check)
    _print_report(out_dir, report)
    return 0


def _check_cache_not_written(cache_path: Path, out_dir: Path) -> None:
    """Refuse a ``--cache`` that is one of the files the build writes in ``out_dir`` (it would be
    replaced at the end of the build, and what was fetched lost)."""
    written = {(out_dir / name).resolve(): name for name in (*WRITTEN_FILES, LOCK_FILE)}
    name = written.get(cache_path.resolve())
    if name is not None:
        raise UsageError(
            f"--cache {cache_path}: is the build's own {name} in --output-dir {out_dir}; "
            "choose another cache file"
        )


def command_merge(args: argparse.Namespace) -> int:
    caches = []
    try:
        for path in args.caches:
            if not Path(path).is_file():
                raise CacheError(f"{path}: no such cache file")
            caches.append(Cache(Path(path)))
        check_shards(caches)
        recorded = caches[0].get_meta("plan")
        if recorded is None:
            raise CacheError(f"{caches[0].path}: no build has used this cache")
        plan = Plan.from_json(recorded)
        overlap_check = (
            load_check(plan.exclude_overlap, plan.exclude_threshold) if plan.exclude_overlap else None
        )
        inputs = [*args.caches, *(overlap_check.files if overlap_check is not None else [])]
        out_dir = check_output_dir(args.output_dir, "--output-dir", inputs=inputs, writes=WRITTEN_FILES)
        with holding_output(out_dir):
            report = build_corpus(out_dir, caches, plan, args.workers, not args.quiet, overlap_check)
    finally:
        for cache in caches:
            cache.close()
    _print_report(out_dir, report)
    return 0


def command_render(args: argparse.Namespace) -> int:
    from wikitext_builder.render import MarkupError, render_article

    path = Path(args.file)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as error:
        raise SourceError(f"{path}: cannot read ({error.strerror})") from None
    except UnicodeDecodeError as error:
        raise SourceError(f"{path}: not valid UTF-8 at byte {error.start}") from None
    title = args.title or path.stem.replace("_", " ")
    try:
        sys.stdout.write(render_article(title, text))
    except MarkupError as error:
        raise SourceError(f"{path}: {error}") from None
    return 0


def command_validate(args: argparse.Namespace) -> int:
    """Print every finding (stdout) and a summary per file (stderr); 1 on any error, and
    with ``--strict`` on any irregularity (a quirk of the 2016 release), else 0."""
    from wikitext_builder.validate import ERROR, validate_corpus

    directory = Path(args.directory)
    if not directory.is_dir():
        raise SourceError(f"{directory}: not a directory")
    results = validate_corpus(directory)
    if not results:
        raise SourceError(f"{directory}: no wiki.{{train,valid,test}}.{{tokens,raw}} files")
    failed = False
    for name, found in results.items():
        path = directory / name
        for violation in found:
            print(f"{path}:{violation.line_number}: {violation.severity}: {violation.message}")
        errors = sum(violation.severity == ERROR for violation in found)
        irregularities = len(found) - errors
        file_failed = errors > 0 or (args.strict and irregularities > 0)
        verdict = ("fails" if file_failed else "passes") + (" --strict" if args.strict else "")
        print(
            f"{path}: {errors} error{'s' * (errors != 1)}, {irregularities} irregularit"
            f"{'y' if irregularities == 1 else 'ies'}; {verdict}",
            file=sys.stderr,
        )
        failed = failed or file_failed
    return 1 if failed else 0


def command_stats(args: argparse.Namespace) -> int:
    try:
        statistics = corpus_statistics(Path(args.directory))
    except FileNotFoundError as error:
        raise SourceError(str(error)) from None
    except OSError as error:
        raise SourceError(f"{error.filename or args.directory}: cannot read ({error.strerror})") from None
    print(json.dumps(statistics, indent=2) if args.json else format_statistics(statistics))
    return 0


def _batch_size(text: str) -> int:
    value = positive_int(text)
    if value > BATCH_SIZE:
        raise argparse.ArgumentTypeError(f"must be 1..{BATCH_SIZE}, got {value}")
    return value


def _add_source_options(build: argparse.ArgumentParser) -> None:
    """The build command's options that say where the articles come from."""
    build.add_argument(
        "--articles",
        default="good,featured",
        metavar="KINDS",
        help="good, featured or good,featured (default: %(default)s)",
    )
    source = build.add_mutually_exclusive_group()
    source.add_argument(
        "--dump",
        metavar="FILE.xml[.bz2]",
        help="read a MediaWiki XML dump (default source: the API at --api-url)",
    )
    source.add_argument(
        "--folder",
        metavar="DIR",
        help="read DIR/*.wikitext, title from the file name (default source: the API)",
    )
    source.add_argument(
        "--jsonl",
        metavar="FILE.jsonl[.gz]",
        help="read a JSON-lines pool: title_guess/title, class GA/FA, wikitext (default source: the API)",
    )
    source.add_argument(
        "--from-manifest",
        metavar="FILE",
        help="refetch the exact revisions of a manifest.jsonl, with its split "
        "(default: the latest revisions of the listed articles)",
    )
    source.add_argument(
        "--sample",
        action="store_true",
        help="read the few Good/Featured articles packaged with the builder (wikitext_builder/sample): "
        "a small corpus in seconds, offline",
    )
    build.add_argument(
        "--api-url", default=DEFAULT_API_URL, metavar="URL", help="MediaWiki API (default: %(default)s)"
    )
    build.add_argument(
        "--cache",
        metavar="FILE.sqlite",
        help="cache file (default: DIR/cache.sqlite, DIR/cache.shard-K-of-N.sqlite); "
        "a build holds the cache's directory (its .lock) while it runs",
    )


def _add_selection_options(build: argparse.ArgumentParser) -> None:
    """The build command's options that choose the articles and their split."""
    build.add_argument(
        "--limit", type=positive_int, metavar="N", help="use N articles, a seeded sample (default: all)"
    )
    build.add_argument(
        "--preset",
        choices=sorted(PRESETS),
        help="WikiText-2 (600/60/60 articles) or WikiText-103 (28,475/60/60) sizes (default: none)",
    )
    build.add_argument(
        "--seed",
        type=int,
        help=f"article sample and split seed (default {DEFAULT_SEED}; not with --from-manifest)",
    )
    split_default = f"default {DEFAULT_SPLIT_ARTICLES}; {SAMPLE_SPLIT_ARTICLES} with --sample"
    build.add_argument("--valid-articles", type=non_negative_int, metavar="N", help=split_default)
    build.add_argument("--test-articles", type=non_negative_int, metavar="N", help=split_default)
    build.add_argument(
        "--min-count",
        type=positive_int,
        metavar="N",
        help=f"train count a type needs to stay out of <unk> (default {DEFAULT_MIN_COUNT}; with "
        "--from-manifest, the one its corpus's stats.json records)",
    )
    build.add_argument(
        "--exclude-overlap",
        action="append",
        metavar="NAME[:SPLITS]",
        help="drop the articles that overlap the articles of a benchmark (wikitext-2, wikitext-103, "
        "or a corpus directory) in SPLITS (default valid,test); repeatable, or comma-separated. "
        "Checked after rendering and before the split assignment, so valid and test keep the "
        "sizes asked for; each dropped article is named in stats.json and manifest.jsonl "
        "(default: no check)",
    )
    build.add_argument(
        "--exclude-threshold",
        type=share,
        metavar="SHARE",
        help="with --exclude-overlap: drop an article that holds at least this share of the "
        f"13-grams of one benchmark article (0 < SHARE <= 1, default {DEFAULT_THRESHOLD})",
    )
    build.add_argument(
        "--shard",
        metavar="K/N",
        help="fetch only shard K of N into its cache, see merge (default: no shards)",
    )


def _add_api_options(build: argparse.ArgumentParser) -> None:
    """The build command's options for the MediaWiki API."""
    build.add_argument(
        "--batch-size",
        type=_batch_size,
        default=BATCH_SIZE,
        metavar="N",
        help=f"titles per content request (1..{BATCH_SIZE}, default {BATCH_SIZE})",
    )
    build.add_argument(
        "--max-attempts",
        type=positive_int,
        default=8,
        metavar="N",
        help="attempts per API request (default 8; a connection failure before the API has "
        "answered at all is not retried)",
    )
    build.add_argument(
        "--retry-backoff",
        type=non_negative_float,
        default=1.0,
        metavar="SECONDS",
        help="first retry wait, doubled per attempt up to 60 s (default 1)",
    )
    build.add_argument(
        "--timeout",
        type=positive_float,
        default=60.0,
        metavar="SECONDS",
        help="API request timeout (default 60)",
    )
    build.add_argument(
        "--user-agent",
        default=USER_AGENT,
        help="User-Agent with your contact address (default: %(default)s)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog="python -m wikitext_builder",
        description="Build WikiText-style corpora from Wikipedia Good and Featured articles "
        "(the build command is the default).",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    corpus = _corpus_options()
    _add_build_parser(commands, corpus)
    _add_merge_parser(commands, corpus)
    _add_render_parser(commands)
    _add_validate_parser(commands)
    _add_stats_parser(commands)
    return parser


def _corpus_options() -> argparse.ArgumentParser:
    """The options of the commands that write a corpus (``build``, ``merge``), as a parent parser."""
    corpus = ArgumentParser(add_help=False)
    corpus.add_argument(
        "--output-dir",
        default="wikitext-corpus",
        metavar="DIR",
        help="output directory (default: %(default)s)",
    )
    corpus.add_argument(
        "--workers",
        type=positive_int,
        default=1,
        metavar="N",
        help="processes that render articles (default 1; output identical for any N; at most one per 2 "
        "articles and 2 per CPU, lowered with a note)",
    )
    corpus.add_argument("--quiet", action="store_true", help="no progress bars")
    return corpus


def _add_build_parser(commands: Any, corpus: argparse.ArgumentParser) -> None:
    build = commands.add_parser(
        "build",
        parents=[corpus],
        help="build a corpus (default command)",
        description="Fetch (or read) Good/Featured articles and build a corpus.",
    )
    _add_source_options(build)
    _add_selection_options(build)
    _add_api_options(build)
    build.set_defaults(handler=command_build)


def _add_merge_parser(commands: Any, corpus: argparse.ArgumentParser) -> None:
    merge = commands.add_parser(
        "merge",
        parents=[corpus],
        help="one corpus from the shard caches",
        description="Build one corpus from the caches of a --shard K/N build.",
    )
    merge.add_argument("caches", nargs="+", metavar="CACHE.sqlite")
    merge.set_defaults(handler=command_merge)


def _add_render_parser(commands: Any) -> None:
    render = commands.add_parser("render", help="print one article in WikiText form")
    render.add_argument("file", metavar="FILE.wikitext")
    render.add_argument("--title", help="article title (default: the file name)")
    render.set_defaults(handler=command_render)


def _add_validate_parser(commands: Any) -> None:
    validate = commands.add_parser(
        "validate",
        help="check a corpus against the WikiText format",
        description="Check every line of DIR/wiki.{train,valid,test}.{tokens,raw} against the WikiText "
        "format. Errors break the format; irregularities are the quirks of the 2016 "
        "release that the real files have (an article without its terminating blank "
        "line, a paragraph rendered as an article title, an unsplit number such as "
        "1,000th). Exit status 1 on any error (with --strict: on any finding), else 0.",
    )
    validate.add_argument("directory", metavar="DIR")
    validate.add_argument(
        "--strict",
        action="store_true",
        help="fail on irregularities too (a corpus the builder writes has none)",
    )
    validate.set_defaults(handler=command_validate)


def _add_stats_parser(commands: Any) -> None:
    stats = commands.add_parser("stats", help="Table 1 statistics of a corpus")
    stats.add_argument("directory", metavar="DIR")
    stats.add_argument("--json", action="store_true", help="print JSON")
    stats.set_defaults(handler=command_stats)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or (argv[0] not in COMMANDS and argv[0] not in ("-h", "--help")):
        argv.insert(0, "build")
    return run(
        build_parser(),
        argv,
        interrupted="interrupted: every committed batch is in the cache; rerun the same command to resume",
    )
