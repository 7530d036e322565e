"""How far is a Pointer Sentinel-LSTM's gate from the one that scores a text best?

Scores a split once and prints the perplexity that every sentinel score moved by each
``--shifts`` value would give (the closed form of :mod:`baselines.calibration`), with dropout
off (as evaluated) or on (``--dropout``, as training sees the model), and the best shift on a
0.01 grid. ``baselines calibrate`` fits the same shift on the training text and writes it into a
checkpoint; this script shows the shift on any split, for the diagnosis in docs/baselines.md
("Calibrating the pointer's gate"):

    python benchmarks/pointer_gate_shift.py --checkpoint POINTER.pt --split valid
    python benchmarks/pointer_gate_shift.py --checkpoint POINTER.pt --split train --max-tokens 73760 --dropout

With ``--batch-size 1`` (the default) and dropout off, the unshifted perplexity is the harness's
(batch 1, BPTT 100).
"""

from __future__ import annotations

import argparse
import math

import numpy as np
import torch

from baselines import checkpoint as checkpoints
from baselines.calibration import fit_sentinel_shift, mixture_parts, shifted_log_probs
from baselines.models import PointerSentinelLSTM
from harness.datasets import load_dataset
from wikitext_toolkit_core.cli import non_negative_int, positive_int


def main() -> None:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--checkpoint", required=True, help="a pointer_sentinel checkpoint")
    parser.add_argument("--dataset", default="ptb")
    parser.add_argument("--split", default="valid", choices=["train", "valid", "test"])
    parser.add_argument("--max-tokens", type=positive_int, help="the split's first N tokens (default: all)")
    parser.add_argument("--batch-size", type=positive_int, default=1)
    parser.add_argument("--dropout", action="store_true", help="dropout and zoneout on, as in training")
    parser.add_argument("--shifts", type=float, nargs="+", default=[-5, -4, -3, -2, -1, 0, 1])
    parser.add_argument(
        "--seed", type=non_negative_int, default=0, help="of the dropout masks (with --dropout)"
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    dataset = load_dataset(args.dataset)
    model, _ = checkpoints.load_model(args.checkpoint, dataset.vocab, kind=PointerSentinelLSTM.kind)
    assert isinstance(model, PointerSentinelLSTM)
    ids = dataset.tokens(args.split).ids[: args.max_tokens]
    parts = mixture_parts(
        model, ids, eos_id=dataset.vocab.eos_id, batch_size=args.batch_size, dropout=args.dropout
    )
    mode = "dropout on" if args.dropout else "dropout off"
    bias = model.config.sentinel_bias
    print(f"{args.dataset} {args.split}, {parts.shape[1]:,} tokens, {mode}, sentinel bias {bias:g}")
    best = fit_sentinel_shift(parts)
    for shift in sorted({*args.shifts, best}):
        log_gate, log_pointer_total = parts[0], parts[1]
        gate = np.exp(shift + log_gate - np.logaddexp(shift + log_gate, log_pointer_total))
        perplexity = math.exp(-shifted_log_probs(parts, shift).mean())
        marker = "  (best)" if shift == best else ""
        print(f"shift {shift:+6.2f}: perplexity {perplexity:8.3f}, mean gate {gate.mean():.4f}{marker}")


if __name__ == "__main__":
    main()
