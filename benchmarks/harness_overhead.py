"""Harness overhead: ``harness.evaluate`` against a bare scoring loop over the same model.

The bare loop slices the stream into chunks and sums the model's target log-probabilities,
with none of the harness's checks (shapes, NaN/inf, audit, float64 accumulation, masking).
Both run in this process on the same data; the ratio is what the harness's guarantees cost.

    python benchmarks/harness_overhead.py --data-dir ../shared/data   # PTB test
    python benchmarks/harness_overhead.py                             # synthetic stream
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from functools import partial
from typing import TypeVar

import numpy as np

from baselines import kneser_ney
from harness.datasets import load_dataset
from harness.evaluate import evaluate
from harness.plugin import Chunk, LanguageModel
from harness.plugins import unigram
from harness.protocol import EvaluationProtocol
from wikitext_toolkit_core.cli import positive_int


def bare_loop(model, ids: np.ndarray, eos_id: int, bptt: int) -> float:
    """Sum of target log-probabilities, batch size 1, no checks."""
    inputs = np.concatenate([[eos_id], ids[:-1]])[None, :]
    targets = ids[None, :]
    model.reset(1)
    total = 0.0
    for begin in range(0, len(ids), bptt):
        chunk_targets = targets[:, begin : begin + bptt]
        chunk = Chunk(inputs[:, begin : begin + bptt], chunk_targets, np.ones_like(chunk_targets, bool))
        total += float(np.sum(model.score(chunk).target_log_probs))
    return total


Result = TypeVar("Result")


def best_of(repeats: int, run: Callable[[], Result]) -> tuple[float, Result]:
    """(fastest wall time in seconds, last result) over ``repeats >= 1`` runs."""
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - began)
    return min(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", help="directory holding ptb/ (default: a synthetic corpus)")
    parser.add_argument("--bptt", type=positive_int, default=100)
    parser.add_argument("--repeats", type=positive_int, default=5)
    args = parser.parse_args()
    if args.data_dir:
        dataset = load_dataset("ptb", data_dir=args.data_dir, download=False)
    else:
        import tempfile
        from pathlib import Path

        rng = np.random.default_rng(0)
        directory = Path(tempfile.mkdtemp()) / "synthetic"
        directory.mkdir()
        words = np.array([f"w{i}" for i in range(5000)])
        weights = 1 / np.arange(1, 5001)
        for split, lines in (("train", 40_000), ("valid", 10), ("test", 4_000)):
            text = "".join(
                " " + " ".join(rng.choice(words, 20, p=weights / weights.sum())) + " \n" for _ in range(lines)
            )
            (directory / f"wiki.{split}.tokens").write_text(text)
        dataset = load_dataset(str(directory))
    ids = dataset.tokens("test").ids
    eos = dataset.vocab.eos_id
    print(f"{dataset.name} test: {len(ids):,} tokens, batch size 1, bptt {args.bptt}, best of {args.repeats}")
    print(f"{'model':<10} {'bare loop s':>12} {'harness s':>10} {'ratio':>7}")
    models: dict[str, LanguageModel] = {
        "unigram": unigram.load_model(dataset, device="cpu", checkpoint=None),
        "kn5": kneser_ney.load_model(dataset, device="cpu", checkpoint=None),
    }
    for name, model in models.items():
        bare_seconds, bare_total = best_of(args.repeats, partial(bare_loop, model, ids, eos, args.bptt))
        harness_seconds, evaluation = best_of(
            args.repeats,
            partial(
                evaluate,
                model,
                ids,
                eos_id=eos,
                vocab_size=len(dataset.vocab),
                protocol=EvaluationProtocol(bptt=args.bptt),
                progress=False,
            ),
        )
        assert abs(evaluation.total_log_prob - bare_total) <= 1e-6 * abs(bare_total)
        print(
            f"{name:<10} {bare_seconds:>12.4f} {harness_seconds:>10.4f} "
            f"{harness_seconds / bare_seconds:>7.2f}"
        )


if __name__ == "__main__":
    main()
