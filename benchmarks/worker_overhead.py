"""What running a plugin in worker processes costs (issue 73): one split scored with both audits at
their defaults by the plugin in worker processes (each pass in a fresh one, as ``harness eval``
runs it) and in the harness's own process (``--in-process``), interleaved, in one run.

Each evaluation is timed whole, as a user waits for it: the model loaded (once in the harness's
process; once per pass in workers), both passes and the audits' checks. Every round scores both
ways, in alternating order; the medians and their ratio, workers over the harness's process, are
printed (target: at most 1.05), and whether the two ways agreed to the bit. Run it on quiet cores.

    python benchmarks/worker_overhead.py                                  # the PTB pointer, valid
    python benchmarks/worker_overhead.py --split test --rounds 5
    python benchmarks/worker_overhead.py --plugin unigram --rounds 1      # checks that it runs
"""

from __future__ import annotations

import argparse
import statistics
import time

from harness.api import SplitResult, evaluate_model
from harness.datasets import load_dataset
from wikitext_toolkit_core.cli import positive_int

#: How the two ways are named in the output, by ``in_process``.
WAYS = {False: "workers", True: "in-process"}


def timed_evaluation(plugin: str, args: argparse.Namespace, *, in_process: bool) -> tuple[float, SplitResult]:
    """Seconds of one whole evaluation of ``args.split`` by ``plugin``, and its result."""
    dataset = load_dataset(args.dataset, args.data_dir, download=False)
    began = time.perf_counter()
    (result,) = evaluate_model(
        plugin,
        dataset,
        splits=args.split,
        device=args.device,
        data_dir=args.data_dir,
        progress=False,
        in_process=in_process,
    )
    return time.perf_counter() - began, result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--plugin", default="pointer_sentinel", help="default pointer_sentinel (packaged for PTB)"
    )
    parser.add_argument("--dataset", default="ptb", help="default ptb (packaged)")
    parser.add_argument("--split", default="valid", choices=("valid", "test"), help="default valid")
    parser.add_argument("--data-dir", help="where the dataset is looked for first (default none)")
    parser.add_argument("--device", default="cpu", help="default cpu")
    parser.add_argument("--rounds", type=positive_int, default=3, help="rounds of both ways (default 3)")
    args = parser.parse_args()
    print(f"{args.plugin} on {args.dataset}/{args.split}, device {args.device}, {args.rounds} rounds")
    print(f"{'round':>5} {'way':<11} {'seconds':>9} {'scoring s':>10} {'perplexity':>11}")
    seconds: dict[bool, list[float]] = {False: [], True: []}
    identical = True
    for round_number in range(args.rounds):
        results = {}
        for in_process in (round_number % 2 == 1, round_number % 2 == 0):  # alternating order
            elapsed, results[in_process] = timed_evaluation(args.plugin, args, in_process=in_process)
            seconds[in_process].append(elapsed)
            record = results[in_process].record
            print(
                f"{round_number + 1:>5} {WAYS[in_process]:<11} {elapsed:>9.2f} "
                f"{record.runtime_seconds or 0:>10.2f} {record.perplexity:>11.4f}"
            )
        worker, harness = (results[way].token_log_probs for way in (False, True))
        identical &= worker.tobytes() == harness.tobytes()
    workers, harness_process = (statistics.median(seconds[way]) for way in (False, True))
    print(
        f"median: workers {workers:.2f} s, in-process {harness_process:.2f} s, "
        f"ratio {workers / harness_process:.3f}"
    )
    print(f"log-probabilities identical to the bit in every round: {'yes' if identical else 'NO'}")


if __name__ == "__main__":
    main()
