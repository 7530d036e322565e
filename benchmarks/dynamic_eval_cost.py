"""What dynamic evaluation costs against static evaluation of the same model (issue 50).

Scores the first ``--tokens`` tokens of the valid split of ``--dataset`` (PTB by default) with
its packaged zoneout LSTM (with a neural cache of ``--cache-window`` positions on it, if given),
one stream in chunks of 100 (the harness's default protocol), exactly as ``tune-dynamic`` scores
them: statically (``lr`` 0, no update), then with one update every ``segment`` positions for
each segment of ``--segments`` (``sgd``, ``lr`` 0.01, no decay; with a decay too for the first
segment: one more pass over every weight; and the tuned ``rms`` setting of the package's
``dynamic_eval.json``, what the plugin runs by default, when it has one). Prints each setting's
seconds, perplexity and its time against the static pass measured in the same run (the issue's
bound: 4x).

Run it on quiet cores, one thread (``--threads``), as the figures in ``docs/measurements.md``:

    python benchmarks/dynamic_eval_cost.py                 # 2,000 tokens: about 2 minutes
    python benchmarks/dynamic_eval_cost.py --tokens 200    # checks that it runs
    python benchmarks/dynamic_eval_cost.py --dataset wikitext-2 --segments 100
    python benchmarks/dynamic_eval_cost.py --cache-window 2000 --segments 100
"""

from __future__ import annotations

import argparse
import time

import torch

from baselines.dynamic_eval import BaseModel, DynamicFactory, read_dynamic_tuning
from baselines.dynamic_tuning import perplexity
from baselines.models.dynamic import DynamicSettings
from baselines.plugin_bridge import resolve_checkpoint
from harness.datasets import load_dataset
from wikitext_toolkit_core.cli import non_negative_int, positive_int


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dataset", default="ptb", help="a benchmark with a packaged zoneout LSTM")
    parser.add_argument("--tokens", type=positive_int, default=2000, help="valid tokens scored")
    parser.add_argument("--cache-window", type=non_negative_int, default=0, help="a cache of this window")
    parser.add_argument("--segments", type=positive_int, nargs="+", default=[20, 50, 100])
    parser.add_argument("--threads", type=positive_int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    dataset = load_dataset(args.dataset)
    checkpoint = resolve_checkpoint("zoneout_lstm", dataset, None, device="cpu", command=["benchmark"])
    base = BaseModel(cache_window=args.cache_window)
    factory = DynamicFactory(dataset, checkpoint, base, "cpu")
    ids = dataset.tokens("valid").ids[: args.tokens]
    settings = [DynamicSettings("sgd", 0.0, 0.0, None)]
    settings += [DynamicSettings("sgd", 0.01, 0.0, segment) for segment in args.segments]
    settings.append(DynamicSettings("sgd", 0.01, 0.01, args.segments[0]))
    retune = ["python", "-m", "baselines", "tune-dynamic", "--dataset", args.dataset]
    tuned = read_dynamic_tuning(checkpoint, retune).get(base.key("rms"))
    if tuned is not None:  # what the plugin runs by default; its statistic is collected at load
        settings.append(DynamicSettings("rms", tuned["lr"], tuned["decay"], tuned["segment"]))
        factory.statistics(tuned["segment"])
    static_seconds = None
    cache = f", neural cache of {args.cache_window}" if args.cache_window else ""
    print(f"{args.dataset} valid, first {len(ids):,} tokens{cache}, {args.threads} thread(s)")
    for setting in settings:
        began = time.perf_counter()
        value = perplexity(factory, setting, ids, 100)
        seconds = time.perf_counter() - began
        static_seconds = static_seconds or seconds
        name = (
            "static"
            if setting.lr == 0
            else f"{setting.method}, segment {setting.segment}, decay {setting.decay:g}"
        )
        ratio = seconds / static_seconds
        print(f"{name:>34}: {seconds:7.1f} s  perplexity {value:8.2f}  {ratio:5.2f}x static")


if __name__ == "__main__":
    main()
