"""Scoring beside a busy process with all threads, one thread and ``--threads auto`` (issue 45, item 4).

Issue 45 measured the packaged zoneout LSTM on PTB valid at 66 s on quiet cores of a 2-core
machine, 610 s with torch's two threads beside one busy process and 159 s with one thread beside
it. This benchmark scores the same model on the same split (batch 1, BPTT 100, the probability
audit on, the causality audit off: ``python -m harness eval baselines.zoneout_lstm --dataset ptb
--split valid --causality-audit 0``) in six settings, each in a fresh process: quiet cores, then
beside ``--neighbours`` busy processes (Python busy loops, not pinned), each with as many threads
as CPUs, one thread, and ``auto``. A setting's time runs from the thread choice (``auto`` samples
the CPUs for 0.2 s) to the end of the scoring, the model already loaded; it prints the times and
the ratios: ``auto`` under load against one thread under load (at most about 1: no collapse) and
``auto`` on quiet cores against all threads there (about 1: quiet cores lose nothing).

Run it on otherwise quiet cores: other work is load the benchmark does not control.

    python benchmarks/threads_under_load.py            # all 73,760 tokens: about 20 minutes on 2 cores
    python benchmarks/threads_under_load.py --quick    # the first 300 tokens: checks that it runs
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

from harness.datasets import load_dataset
from harness.evaluate import evaluate
from harness.plugin import create_model, load_factory
from harness.protocol import EvaluationProtocol
from wikitext_toolkit_core.cli import positive_int
from wikitext_toolkit_core.threads import allowed_cpus, choose_threads, set_torch_threads, thread_request

PLUGIN = "baselines.zoneout_lstm"
#: The settings, in the order they run: (neighbours busy, ``--threads``); "all": one per CPU.
SETTINGS = [(busy, threads) for busy in (False, True) for threads in ("all", "1", "auto")]
#: Tokens of ``--quick``.
QUICK_TOKENS = 300
#: A busy neighbour: one CPU's worth of work until it is stopped.
BUSY_LOOP = "while True: pass"


def main() -> None:
    args = build_parser().parse_args()
    if args.worker:
        print(json.dumps(score(args)))
        return
    tokens = QUICK_TOKENS if args.quick else args.tokens
    cpus = len(allowed_cpus())
    already = choose_threads()
    if already.busy:
        print(f"warning: {already.busy} of {cpus} CPUs busy before the benchmark: no setting is quiet")
    times: dict[tuple[bool, str], list[float]] = {setting: [] for setting in SETTINGS}
    used: dict[tuple[bool, str], int] = {}
    for _ in range(args.repeats):
        for busy, threads in SETTINGS:
            request = str(cpus) if threads == "all" else threads
            with busy_neighbours(args.neighbours if busy else 0):
                seconds, used[busy, threads] = run_worker(args, request, tokens)
            times[busy, threads].append(seconds)
    report(args, tokens, cpus, {setting: statistics.median(found) for setting, found in times.items()}, used)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", help="directory holding ptb/ (default: the usual search)")
    parser.add_argument("--dataset", default="ptb", help="(default: ptb)")
    parser.add_argument("--split", default="valid", help="(default: valid)")
    parser.add_argument("--tokens", type=positive_int, help="score the split's first N tokens (default: all)")
    parser.add_argument(
        "--quick", action="store_true", help=f"score {QUICK_TOKENS} tokens: a check that it runs"
    )
    parser.add_argument(
        "--neighbours", type=positive_int, default=1, help="busy processes of the load (default: 1)"
    )
    parser.add_argument(
        "--repeats", type=positive_int, default=1, help="runs of each setting, medians (default: 1)"
    )
    parser.add_argument("--worker", metavar="THREADS", help=argparse.SUPPRESS)  # one setting's process
    return parser


def score(args: argparse.Namespace) -> dict[str, float]:
    """One setting, in its own process: the model loaded, the seconds of choosing the threads as
    the commands do and scoring, and the threads used."""
    dataset = load_dataset(args.dataset, args.data_dir, download=False)
    ids = dataset.tokens(args.split).ids[: args.tokens]
    plugin, factory = load_factory(PLUGIN)
    model = create_model(factory, plugin, dataset, device="cpu", checkpoint=None, model_args={})
    import torch  # loaded by the plugin already

    began = time.perf_counter()
    threads = set_torch_threads(thread_request(args.worker), torch)
    evaluate(
        model,
        ids,
        eos_id=dataset.vocab.eos_id,
        vocab_size=len(dataset.vocab),
        protocol=EvaluationProtocol(causality_points=0),
        progress=False,
    )
    return {"seconds": time.perf_counter() - began, "threads": threads}


def run_worker(args: argparse.Namespace, threads: str, tokens: int | None) -> tuple[float, int]:
    """:func:`score` in a fresh process with ``--threads threads``: its seconds and threads."""
    command = [
        sys.executable,
        __file__,
        "--worker",
        threads,
        "--dataset",
        args.dataset,
        "--split",
        args.split,
    ]
    command += ["--data-dir", args.data_dir] if args.data_dir else []
    command += ["--tokens", str(tokens)] if tokens else []
    finished = subprocess.run(command, check=True, capture_output=True, text=True)
    result = json.loads(finished.stdout.splitlines()[-1])
    return result["seconds"], result["threads"]


@contextmanager
def busy_neighbours(count: int) -> Iterator[None]:
    """``count`` busy processes for the block's length."""
    neighbours = [subprocess.Popen([sys.executable, "-c", BUSY_LOOP]) for _ in range(count)]
    try:
        yield
    finally:
        for neighbour in neighbours:
            neighbour.kill()
            neighbour.wait()


def report(
    args: argparse.Namespace,
    tokens: int | None,
    cpus: int,
    seconds: dict[tuple[bool, str], float],
    used: dict[tuple[bool, str], int],
) -> None:
    """The times of the settings and the ratios the issue asks for."""
    print(
        f"{PLUGIN} on {args.dataset}/{args.split} ({tokens or 'all'} tokens), {cpus} CPUs, "
        f"{args.neighbours} busy neighbour(s) under load; medians of {args.repeats} run(s)"
    )
    print(f"{'cores':<8} {'--threads':<10} {'threads':>7} {'seconds':>9}")
    for busy, threads in SETTINGS:
        where = "loaded" if busy else "quiet"
        print(f"{where:<8} {threads:<10} {used[busy, threads]:>7} {seconds[busy, threads]:>9.2f}")
    ratios = [
        ("auto under load / 1 thread under load", (True, "auto"), (True, "1")),
        ("auto quiet / all threads quiet", (False, "auto"), (False, "all")),
        ("all threads under load / 1 thread under load", (True, "all"), (True, "1")),
    ]
    for label, numerator, denominator in ratios:
        print(f"{label}: x{seconds[numerator] / seconds[denominator]:.2f}")


if __name__ == "__main__":
    main()
