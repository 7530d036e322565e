"""A WikiText-103-sized build: wall time, throughput and peak memory for 1 and 2 workers.

    python benchmarks/builder_scale.py                      # 28,595 articles, workers 1 and 2
    python benchmarks/builder_scale.py --articles 3000 --workers 2 1 --json /tmp/scale.json

The pool is the shared one (``../shared/wikipedia/pool/ga_fa_pool.jsonl.gz``, 1,500 real
Good/Featured articles; ``--pool`` or ``$WIKITEXT_SHARED_DIR`` to point elsewhere), repeated
until ``--articles`` records: repetition k > 0 of an article is titled ``TITLE (copy k)``,
so every title is unique (a title the pool itself repeats gets its ``source_index``). The
default count is WikiText-103's: 28,475 train + 60 valid + 60 test articles. The pool file
is written uncompressed into a temporary directory (``--workdir``, default the system's
temp dir), never into the repository, and removed afterwards unless ``--keep``.

Each worker count runs the real command line from scratch in its own output directory,
``python -m wikitext_builder --jsonl POOL --output-dir DIR --workers N --quiet`` (read the pool
into the SQLite cache, render, count the vocabulary, write the splits), as a child process
whose process tree is sampled every 0.2 s for resident memory: reported are the peak of the
largest single process and the peak of the whole tree's sum. Articles/s counts the
articles rendered into the corpus; tokens/s the corpus tokens (Table 1 convention: with one
``<eos>`` per line, all splits) per second of wall time. Finally the corpora are compared
file by file (every file but the cache): byte-identical or not.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from wikitext_toolkit_core.cli import positive_int

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("WIKITEXT_SHARED_DIR") or REPO.parent / "shared")
DEFAULT_POOL = SHARED / "wikipedia" / "pool" / "ga_fa_pool.jsonl.gz"
WIKITEXT_103_ARTICLES = 28_475 + 60 + 60
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


def write_pool(source: Path, target: Path, count: int) -> tuple[int, int]:
    """Write ``count`` records cycling through ``source`` with unique titles; returns
    (records, characters of wikitext)."""
    with gzip.open(source, "rt", encoding="utf-8") as handle:
        records = [json.loads(line) for line in handle if line.strip()]
    if not records:
        raise SystemExit(f"error: no records in {source}")
    seen: set[str] = set()
    for record in records:
        title = (record.get("title") or record.get("title_guess") or "").strip() or "Untitled"
        if title in seen:
            title = f"{title} {record.get('source_index', len(seen))}"
        seen.add(title)
        record["title"] = title
    characters = 0
    with target.open("w", encoding="utf-8") as out:
        for number in range(count):
            record = records[number % len(records)]
            copy = number // len(records)
            title = record["title"] if copy == 0 else f"{record['title']} (copy {copy})"
            characters += len(record["wikitext"])
            out.write(
                json.dumps(
                    {"title": title, "class": record.get("class", ""), "wikitext": record["wikitext"]},
                    ensure_ascii=False,
                )
                + "\n"
            )
    return count, characters


def _tree_rss(root: int) -> tuple[int, int]:
    """(largest single process RSS, sum over the process tree) in bytes."""
    parents: dict[int, int] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry)] = int(fields[1])
        rss[int(entry)] = int(fields[21]) * PAGE_SIZE
    tree = {root}
    grew = True
    while grew:
        grew = False
        for pid, parent in parents.items():
            if parent in tree and pid not in tree:
                tree.add(pid)
                grew = True
    sizes = [rss.get(pid, 0) for pid in tree]
    return max(sizes, default=0), sum(sizes)


def run_build(pool: Path, out_dir: Path, workers: int) -> dict[str, Any]:
    """One build from scratch; wall time and sampled peak memory."""
    command = [
        sys.executable,
        "-m",
        "wikitext_builder",
        "--jsonl",
        str(pool),
        "--output-dir",
        str(out_dir),
        "--workers",
        str(workers),
        "--quiet",
    ]
    peaks = {"process": 0, "tree": 0}
    start = time.perf_counter()
    child = subprocess.Popen(command, cwd=REPO)
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            single, total = _tree_rss(child.pid)
            peaks["process"] = max(peaks["process"], single)
            peaks["tree"] = max(peaks["tree"], total)
            done.wait(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    code = child.wait()
    wall = time.perf_counter() - start
    done.set()
    sampler.join()
    if code != 0:
        raise SystemExit(f"error: {' '.join(command)} exited with {code}")
    stats = json.loads((out_dir / "stats.json").read_text(encoding="utf-8"))
    return {
        "workers": workers,
        "wall_s": wall,
        "stats": stats,
        "peak_rss_process_bytes": peaks["process"],
        "peak_rss_tree_bytes": peaks["tree"],
    }


def corpus_digest(out_dir: Path) -> dict[str, str]:
    """sha256 of every corpus file (the cache excluded)."""
    digests = {}
    for path in sorted(out_dir.iterdir()):
        if path.is_file() and not path.name.startswith("cache"):
            sha = hashlib.sha256()
            with path.open("rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    sha.update(block)
            digests[path.name] = sha.hexdigest()
    return digests


def _articles_and_tokens(stats: dict) -> tuple[int, int]:
    """Articles and tokens (with ``<eos>``) of all splits, from ``stats.json``."""
    return sum(stats["articles"].values()), sum(stats["tokens"].values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pool", type=Path, default=DEFAULT_POOL, help="default: %(default)s")
    parser.add_argument(
        "--articles",
        type=positive_int,
        default=WIKITEXT_103_ARTICLES,
        help="records in the repeated pool (default: WikiText-103's %(default)s)",
    )
    parser.add_argument("--workers", type=positive_int, nargs="+", default=[1, 2], help="default: 1 2")
    parser.add_argument("--workdir", type=Path, help="parent of the temporary directory")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args(argv)
    if not args.pool.is_file():
        print(f"error: pool not found: {args.pool} (pass --pool or set WIKITEXT_SHARED_DIR)", file=sys.stderr)
        return 2
    workdir = Path(tempfile.mkdtemp(prefix="builder-scale-", dir=args.workdir))
    try:
        pool = workdir / "pool.jsonl"
        started = time.perf_counter()
        records, characters = write_pool(args.pool, pool, args.articles)
        print(
            f"pool: {records:,} records, {characters / 1e6:,.0f} M characters of wikitext "
            f"({time.perf_counter() - started:.0f} s to write {pool})",
            flush=True,
        )
        runs = []
        for workers in args.workers:
            run = run_build(pool, workdir / f"out-w{workers}", workers)
            articles, tokens = _articles_and_tokens(run["stats"])
            run.update(
                articles=articles,
                tokens=tokens,
                articles_per_s=articles / run["wall_s"],
                tokens_per_s=tokens / run["wall_s"],
                digest=corpus_digest(workdir / f"out-w{workers}"),
            )
            runs.append(run)
            print(
                f"workers {workers}: wall {run['wall_s']:,.0f} s ({run['wall_s'] / 60:.1f} min), "
                f"{articles:,} articles ({run['articles_per_s']:.1f}/s), {tokens:,} tokens "
                f"({run['tokens_per_s'] / 1e3:,.0f} k/s), peak RSS "
                f"{run['peak_rss_process_bytes'] / 2**20:,.0f} MiB largest process, "
                f"{run['peak_rss_tree_bytes'] / 2**20:,.0f} MiB process tree",
                flush=True,
            )
        identical = all(run["digest"] == runs[0]["digest"] for run in runs)
        print(
            f"output byte-identical across worker counts {args.workers}: {'yes' if identical else 'NO'} "
            f"({len(runs[0]['digest'])} files compared)"
        )
        if args.json:
            summary = {
                "pool": str(args.pool),
                "records": records,
                "characters": characters,
                "identical": identical,
                "runs": [{k: v for k, v in run.items() if k not in ("stats", "digest")} for run in runs],
            }
            args.json.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
        return 0 if identical else 1
    finally:
        if args.keep:
            print(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
