"""Loading a WikiText-103-sized split: the token cache against the uncached path, in one run.

Builds a synthetic WikiText-103-sized corpus in a temporary directory: train is WikiText-2's
train repeated ``--copies`` times (49: 102.3 M tokens, about 530 MB), its vocabulary grown to
about ``--types`` types by giving a share of the rarest types a new spelling in each copy;
valid and test are WikiText-2's. Then times, as separate processes, the issue's command::

    python -m harness eval unigram --dataset DIR --split test

- **today's path**: the harness of ``--baseline-ref`` (the commit before the token cache),
  exported with ``git archive`` and put first on ``PYTHONPATH``; it re-reads and re-encodes
  the split every run;
- **first run**: this checkout's harness with an empty cache (``HARNESS_CACHE_DIR`` in the
  temporary directory): it encodes the splits and writes the cache;
- **later runs**: the same command again, reading the cache memory-mapped.

Each row is one command: wall time and CPU time (user + system, its worker processes
included) from ``wait4``, and peak resident memory, the largest sum of the resident sets of the
command's processes (it encodes a large train split in two), sampled every 10 ms from
``/proc``. The perplexities printed by every run must agree.

    python benchmarks/wikitext103_loading.py --data-dir ../shared/data
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from wikitext_toolkit_core.cli import positive_int

REPO = Path(__file__).resolve().parent.parent
#: The last commit whose harness re-encodes every split on every run.
BASELINE_REF = "797ae2a"


def build_corpus(wikitext2: Path, out: Path, copies: int, types: int) -> dict[str, int]:
    """Write ``out/wiki.{train,valid,test}.tokens``; returns train's token and type counts."""
    out.mkdir(parents=True)
    text = (wikitext2 / "wiki.train.tokens").read_text(encoding="utf-8")
    lines = text.split("\n")[:-1]
    counts = collections.Counter(token for line in lines for token in line.split())
    base_types = len(counts) + 1  # + <eos>
    per_copy = max(0, -(-(types - base_types) // max(copies - 1, 1)))
    # The rarest types get a new spelling in each copy after the first.
    rarest = sorted((token for token in counts if token != "<unk>"), key=lambda token: (counts[token], token))
    renamed = set(rarest[:per_copy])
    touched = [i for i, line in enumerate(lines) if renamed.intersection(line.split())]
    with (out / "wiki.train.tokens").open("w", encoding="utf-8") as handle:
        handle.write(text)
        for copy in range(1, copies):
            copy_lines = list(lines)
            for i in touched:
                copy_lines[i] = (
                    " "
                    + " ".join(f"{token}~{copy}" if token in renamed else token for token in lines[i].split())
                    + " "
                )
            handle.write("\n".join(copy_lines) + "\n")
    for split in ("valid", "test"):
        (out / f"wiki.{split}.tokens").write_bytes((wikitext2 / f"wiki.{split}.tokens").read_bytes())
    tokens = copies * (sum(counts.values()) + len(lines))
    return {"tokens": tokens, "types": base_types + (copies - 1) * len(renamed)}


def export_baseline(ref: str, where: Path) -> Path:
    """``git archive REF harness`` into ``where``; returns the directory to put on PYTHONPATH."""
    where.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "archive", ref, "harness"], cwd=REPO, capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(where)], input=archive, check=True)
    return where


def tree_rss_bytes(pid: int) -> int:
    """Resident memory of process ``pid`` and all its descendants (0 once it is gone)."""
    total, pending = 0, [pid]
    while pending:
        current = pending.pop()
        try:
            status = Path(f"/proc/{current}/status").read_text()
            children = Path(f"/proc/{current}/task/{current}/children").read_text().split()
        except OSError:
            continue
        found = re.search(r"^VmRSS:\s+(\d+) kB", status, re.M)
        total += int(found.group(1)) * 1024 if found else 0
        pending.extend(int(child) for child in children)
    return total


def run(command: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, float, str]:
    """Run ``command``; its wall seconds, CPU seconds, peak RSS of its process tree in GB and
    stdout."""
    with tempfile.TemporaryFile(mode="w+") as out, tempfile.TemporaryFile(mode="w+") as err:
        began = time.perf_counter()
        process = subprocess.Popen(command, env=env, cwd=cwd, stdout=out, stderr=err)
        peak = 0
        while True:
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)
            if pid:
                break
            peak = max(peak, tree_rss_bytes(process.pid))
            time.sleep(0.01)
        seconds = time.perf_counter() - began
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if process.returncode != 0:
            raise SystemExit(f"{' '.join(command)} failed ({process.returncode}): {err.read().strip()}")
        peak = max(peak, usage.ru_maxrss * 1024)  # a peak between two samples
        return seconds, usage.ru_utime + usage.ru_stime, peak / 1e9, out.read()


def perplexity(stdout: str) -> str:
    found = re.search(r"perplexity ([\d.]+)", stdout)
    return found.group(1) if found else "?"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", required=True, help="directory holding wikitext-2/")
    parser.add_argument("--copies", type=positive_int, default=49)
    parser.add_argument("--types", type=positive_int, default=267_000)
    parser.add_argument("--later-runs", type=positive_int, default=2)
    parser.add_argument(
        "--baseline-ref",
        default=BASELINE_REF,
        help="git commit of today's path (default: %(default)s); 'none' skips it",
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args()
    wikitext2 = Path(args.data_dir) / "wikitext-2"
    temporary = Path(tempfile.mkdtemp(prefix="wikitext103-loading-"))
    corpus = temporary / "wikitext-103-synthetic"
    began = time.perf_counter()
    sizes = build_corpus(wikitext2, corpus, args.copies, args.types)
    megabytes = (corpus / "wiki.train.tokens").stat().st_size / 1e6
    print(
        f"synthetic train: {sizes['tokens']:,} tokens, {sizes['types']:,} types, "
        f"{megabytes:,.0f} MB (built in {time.perf_counter() - began:.0f} s) in {corpus}"
    )

    command = [
        sys.executable,
        "-m",
        "harness",
        "eval",
        "unigram",
        "--dataset",
        str(corpus),
        "--split",
        "test",
    ]
    base_env = {
        key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "HARNESS_DATA_DIR")
    }
    rows = []
    if args.baseline_ref != "none":
        old = export_baseline(args.baseline_ref, temporary / "baseline")
        env = {**base_env, "PYTHONPATH": str(old), "HARNESS_CACHE_DIR": str(temporary / "old-cache")}
        where = subprocess.run(
            [sys.executable, "-c", "import harness; print(harness.__file__)"],
            env=env,
            cwd=temporary,
            capture_output=True,
            text=True,
            check=True,
        )
        assert where.stdout.startswith(str(old)), where.stdout
        rows.append((f"today's path ({args.baseline_ref})", *run(command, env, temporary)))
    env = {**base_env, "HARNESS_CACHE_DIR": str(temporary / "cache")}
    rows.append(("token cache, first run", *run(command, env, temporary)))
    for number in range(1, args.later_runs + 1):
        rows.append((f"token cache, later run {number}", *run(command, env, temporary)))

    print(
        f"\n{'`python -m harness eval unigram --split test`':<46} {'wall s':>8} {'cpu s':>7} "
        f"{'peak RSS GB':>12}  perplexity"
    )
    for label, seconds, cpu, rss, stdout in rows:
        print(f"{label:<46} {seconds:>8.1f} {cpu:>7.1f} {rss:>12.2f}  {perplexity(stdout)}")
    if len({perplexity(stdout) for *_, stdout in rows}) != 1:
        raise SystemExit("the runs disagree on the perplexity")
    if args.keep:
        print(f"kept {temporary}")
    else:
        shutil.rmtree(temporary)


if __name__ == "__main__":
    main()
