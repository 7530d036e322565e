"""Cost of the causality audit against the evaluation it guards.

For each plugin, ``harness.evaluate`` scores a split with both audits at their defaults;
``Evaluation.seconds`` times the scoring loop (with the probability audit) and
``Evaluation.causality.seconds`` the causality audit's pass (before or after it). Each plugin is evaluated
``--repeats`` times (the first, a warm-up, is dropped) and the medians are printed.

    python benchmarks/causality_audit_cost.py --data-dir ../shared/data
    python benchmarks/causality_audit_cost.py --data-dir ../shared/data \
        --plugins baselines.zoneout_lstm --device cuda
"""

from __future__ import annotations

import argparse
import statistics

from harness.datasets import load_dataset
from harness.evaluate import evaluate
from harness.plugin import create_model, load_factory
from harness.protocol import EvaluationProtocol
from wikitext_toolkit_core.cli import non_negative_float, positive_int


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", help="directory holding the benchmark (default: the usual search)")
    parser.add_argument("--dataset", default="ptb")
    parser.add_argument("--split", default="test")
    parser.add_argument("--plugins", nargs="+", default=["unigram", "kneser_ney"])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=positive_int, default=6)
    parser.add_argument(
        "--tolerance",
        type=non_negative_float,
        help="the audit's tolerance (default: 0, or 1e-4 for scores on an accelerator)",
    )
    args = parser.parse_args()
    dataset = load_dataset(args.dataset, args.data_dir, download=False)
    ids = dataset.tokens(args.split).ids
    print(
        f"{args.dataset}/{args.split}: {len(ids):,} tokens, V = {len(dataset.vocab):,}, "
        f"batch 1, bptt 100, device {args.device}; medians of {args.repeats - 1} runs"
    )
    print(f"{'plugin':<28} {'evaluation s':>13} {'causality s':>12} {'ratio':>7}  audit")
    for name in args.plugins:
        plugin, factory = load_factory(name)
        model = create_model(factory, plugin, dataset, device=args.device, checkpoint=None, model_args={})
        runs = [
            evaluate(
                model,
                ids,
                eos_id=dataset.vocab.eos_id,
                vocab_size=len(dataset.vocab),
                protocol=EvaluationProtocol(causality_tolerance=args.tolerance),
                progress=False,
            )
            for _ in range(args.repeats)
        ][1:]
        scoring = statistics.median(run.seconds for run in runs)
        audit = statistics.median(run.causality.seconds for run in runs)
        causality = runs[-1].causality
        print(
            f"{plugin:<28} {scoring:>13.4f} {audit:>12.4f} {audit / scoring:>7.3f}  "
            f"{causality.points} substitutions, evidence {causality.evidence:.3g} nats (bound "
            f"{causality.evidence_bound:.3g}), compared {causality.compared} at "
            f"{causality.compared_positions:,} positions, max change {causality.max_difference:.3g}"
        )


if __name__ == "__main__":
    main()
