"""The contamination check at scale: the 1,500-article Good/Featured pool against WikiText-2
valid and test, with wall time, CPU time and peak memory, and what it finds.

    python benchmarks/contamination_scale.py                          # the whole pool (quiet cores)
    python benchmarks/contamination_scale.py --limit 100              # the first 100 records
    python benchmarks/contamination_scale.py --json /tmp/contamination_scale.json

The pool (``../shared/wikipedia/pool/ga_fa_pool.jsonl.gz``; ``--pool`` or
``$WIKITEXT_SHARED_DIR``) holds wikitext markup, so the check runs on two corpora made from it:

- ``raw``: the pool file itself, ``--text-field wikitext``, nothing prepared. The normalisation
  drops the markup's symbols (brackets, braces, pipes, quotes), but template names and
  parameters, reference citations and link targets stay in as words and break the n-grams they
  fall into. This is the scale measurement: all 76 M characters, as the user would pass them.
- ``rendered``: every article rendered first by the builder's renderer
  (:func:`wikitext_builder.render.render_article`, ``--workers`` processes; timed apart, as a
  one-off preparation), written as ``.jsonl.gz``. This is the text a WikiText-style corpus holds
  (and what WikiText itself was made from: rendered articles, templates such as ``{{convert}}``
  expanded, references and tables removed), and exactly what the builder's own overlap filter
  will check, so the findings come from this one.

Each check is the real command, ``python -m harness contamination CORPUS --dataset wikitext-2
--split S --output REPORT``, run as a child process: wall time, CPU time and peak resident memory
(the kernel's high-water mark, ``wait4``) are its own. The reference, measured in the same run
and the same way, is a child that only reads, decompresses and parses the same file
(``gzip`` + ``json.loads`` per line): the floor of any pass over that corpus.

Outputs: a table of the runs, then per corpus and split the contaminated articles (overlap at
least ``--threshold``) and the others above 0.05; ``--json`` saves all of it. Temporary files go
to ``--workdir`` (default: the system's temporary directory), removed afterwards unless ``--keep``.
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness.contamination import DEFAULT_THRESHOLD
from wikitext_builder.corpus import render_all
from wikitext_builder.sources import POOL_CLASSES, Article, iter_jsonl
from wikitext_toolkit_core.cli import positive_int, share
from wikitext_toolkit_core.files import write_atomically

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("WIKITEXT_SHARED_DIR") or REPO.parent / "shared")
DEFAULT_POOL = SHARED / "wikipedia" / "pool" / "ga_fa_pool.jsonl.gz"
SPLITS = ("valid", "test")
#: Overlap above which an article below the threshold is still listed.
NOTABLE = 0.05
#: What the reference child runs: read, decompress and parse every line of a .jsonl.gz.
READ_ONLY = (
    "import gzip, json, sys\nwith gzip.open(sys.argv[1], 'rb') as f:\n    for line in f: json.loads(line)\n"
)


def run_child(command: list[str]) -> dict[str, Any]:
    """Run ``command`` in the repository; its wall and CPU seconds and peak RSS (bytes)."""
    with tempfile.TemporaryFile() as output:
        start = time.perf_counter()
        child = subprocess.Popen(command, cwd=REPO, stdout=output, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - start
        child.returncode = os.waitstatus_to_exitcode(status)
        output.seek(0)
        text = output.read().decode("utf-8", errors="replace")
    if child.returncode != 0:
        raise SystemExit(f"error: {' '.join(command)} exited with {child.returncode}:\n{text}")
    return {
        "wall_s": wall,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "peak_rss_bytes": usage.ru_maxrss * 1024,  # Linux reports KiB
        "stdout": text,
    }


def limited_pool(pool: Path, limit: int | None, workdir: Path) -> Path:
    """The pool itself, or a copy of its first ``limit`` records."""
    if limit is None:
        return pool
    target = workdir / f"pool.first{limit}.jsonl.gz"
    with gzip.open(pool, "rb") as source, gzip.open(target, "wb") as copy:
        copy.writelines(itertools.islice(source, limit))
    return target


def render_pool(pool: Path, workers: int, workdir: Path) -> tuple[Path, dict[str, Any]]:
    """Render every article of ``pool`` with the builder's renderer into ``rendered.jsonl.gz``
    (``title``, ``text``); the file and what it took (seconds, articles, skipped, characters)."""
    target = workdir / "rendered.jsonl.gz"
    articles = (item for item in iter_jsonl(pool, tuple(POOL_CLASSES)) if isinstance(item, Article))
    counts = {"articles": 0, "skipped": 0, "characters": 0}
    start = time.perf_counter()
    with gzip.open(target, "wt", encoding="utf-8", compresslevel=6) as out:
        for rendered in render_all(articles, workers):
            if rendered.text is None:
                counts["skipped"] += 1
                continue
            counts["articles"] += 1
            counts["characters"] += len(rendered.text)
            out.write(
                json.dumps({"title": rendered.article.title, "text": rendered.text}, ensure_ascii=False)
                + "\n"
            )
    return target, {"seconds": time.perf_counter() - start, **counts}


def check(
    corpus: Path, text_field: str, split: str, args: argparse.Namespace, workdir: Path
) -> dict[str, Any]:
    """One ``harness contamination`` run; its measurements and findings."""
    report_path = workdir / f"report.{corpus.name}.{split}.json"
    command = [sys.executable, "-m", "harness", "contamination", str(corpus), "--dataset", "wikitext-2"]
    command += ["--split", split, "--output", str(report_path), "--text-field", text_field]
    command += ["--threshold", str(args.threshold)]
    if args.data_dir:
        command += ["--data-dir", str(args.data_dir)]
    measured = run_child(command)
    report = json.loads(report_path.read_text(encoding="utf-8"))
    notable = [
        {
            "article": i,
            "title": a["title"],
            "overlap": a["overlap"],
            "tokens": a["tokens"],
            "found_in": a["found_in"][:1],
        }
        for i, a in enumerate(report["articles"])
        if a["overlap"] > NOTABLE
    ]
    return {
        **{key: value for key, value in measured.items() if key != "stdout"},
        "corpus_documents": report["corpus_documents"],
        "corpus_words": report["corpus_words"],
        "corpus_characters": report["corpus_characters"],
        "contaminated": report["contaminated"],
        "contaminated_token_share": report["contaminated_token_share"],
        "above_notable": sorted(notable, key=lambda entry: -entry["overlap"]),
    }


def print_table(results: dict[str, Any]) -> None:
    print(
        f"{'run':<28} {'wall s':>7} {'CPU s':>7} {'peak RSS MB':>12} {'characters':>12} {'contaminated':>13}"
    )
    for name, run in results["runs"].items():
        contaminated = (
            f"{len(run['contaminated'])} ({run['contaminated_token_share']:.1%})"
            if "contaminated" in run
            else ""
        )
        characters = f"{run['corpus_characters']:,}" if "corpus_characters" in run else ""
        print(
            f"{name:<28} {run['wall_s']:>7.1f} {run['cpu_s']:>7.1f} {run['peak_rss_bytes'] / 2**20:>12.0f} "
            f"{characters:>12} {contaminated:>13}"
        )
    if "render" in results:
        render = results["render"]
        print(
            f"rendering (preparation, {results['workers']} workers): {render['seconds']:.1f} s wall, "
            f"{render['articles']:,} articles, {render['skipped']} skipped, "
            f"{render['characters']:,} characters"
        )
    for name, run in results["runs"].items():
        for entry in run.get("above_notable", []):
            mark = "CONTAMINATED" if entry["overlap"] >= results["threshold"] else "below threshold"
            source = entry["found_in"][0]["document"] if entry["found_in"] else "-"
            print(
                f"  {name}: {entry['overlap']:.3f} {mark}: {entry['title']} "
                f"({entry['tokens']:,} tokens; in {source})"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pool", type=Path, default=DEFAULT_POOL, help=f"the pool (default {DEFAULT_POOL})")
    parser.add_argument("--limit", type=positive_int, help="only the first N records (default: all)")
    parser.add_argument("--workers", type=positive_int, default=2, help="renderer processes (default 2)")
    parser.add_argument(
        "--threshold", type=share, default=DEFAULT_THRESHOLD, help=f"(default {DEFAULT_THRESHOLD})"
    )
    parser.add_argument("--data-dir", type=Path, help="passed to the harness (default: its own search)")
    parser.add_argument("--workdir", type=Path, help="for temporary files (default: the system's)")
    parser.add_argument(
        "--keep", action="store_true", help="keep the temporary files and reports (default: no)"
    )
    parser.add_argument("--json", type=Path, help="save the measurements and findings (default: none)")
    args = parser.parse_args()
    if not args.pool.is_file():
        raise SystemExit(f"error: no pool at {args.pool} (--pool or $WIKITEXT_SHARED_DIR)")
    workdir = Path(tempfile.mkdtemp(prefix="contamination-scale-", dir=args.workdir))
    pool = limited_pool(args.pool, args.limit, workdir)
    results: dict[str, Any] = {"pool": str(args.pool), "limit": args.limit, "threshold": args.threshold}
    results["runs"] = {"reference: read raw pool": run_child([sys.executable, "-c", READ_ONLY, str(pool)])}
    for split in SPLITS:
        results["runs"][f"raw pool, {split}"] = check(pool, "wikitext", split, args, workdir)
    rendered, results["render"] = render_pool(pool, args.workers, workdir)
    results["workers"] = args.workers
    results["runs"]["reference: read rendered"] = run_child([sys.executable, "-c", READ_ONLY, str(rendered)])
    for split in SPLITS:
        results["runs"][f"rendered, {split}"] = check(rendered, "text", split, args, workdir)
    for run in results["runs"].values():
        run.pop("stdout", None)
    print_table(results)
    if args.json:
        write_atomically(args.json, json.dumps(results, indent=2) + "\n")
    if args.keep:
        print(f"files kept in {workdir}")
    else:
        for path in workdir.iterdir():
            path.unlink()
        workdir.rmdir()


if __name__ == "__main__":
    main()
