"""Does the Pointer Sentinel-LSTM's gate survive the first training steps of a recipe?

Trains a fresh pointer model on PTB train for ``--steps`` SGD steps (the recipe given by the
flags: loss reduction, learning rate, clipping, batch, BPTT), once for each
``--pointer-lr-scale``, and prints the sentinel gate ``g`` (the vocabulary softmax's share;
``1 - g`` goes to the pointer) over the training chunk every ``--every`` steps. A gate stuck
at 1.000 is a dead pointer: the model has become a plain LSTM and gets no gradient to revive it.

    python benchmarks/pointer_gate.py --pointer-lr-scale 1 0.05

The masks are drawn exactly as ``baselines train`` draws them, so the two runs differ only in
the pointer's learning-rate scale.
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

from baselines import checkpoint as checkpoints
from baselines.plugin_bridge import detach_state
from baselines.training import PRESETS, chunk_loss, parameter_groups, step_seed, training_streams
from harness.datasets import load_dataset
from wikitext_toolkit_core.cli import non_negative_float, non_negative_int, positive_float, positive_int


def probe(streams: torch.Tensor, config: dict, args: argparse.Namespace, scale: float) -> None:
    torch.manual_seed(args.seed)
    model = checkpoints.build_model("pointer_sentinel", config)
    model.train()
    groups = parameter_groups(model, scale)
    for group in groups:
        group["lr"] = args.lr * group["lr_scale"]
    optimizer = torch.optim.SGD(groups, lr=args.lr)
    state = model.initial_state(streams.shape[0], "cpu")
    generator = torch.Generator()
    for step in range(args.steps):
        begin = step * args.bptt
        inputs = streams[:, begin : begin + args.bptt]
        targets = streams[:, begin + 1 : begin + args.bptt + 1]
        generator.manual_seed(step_seed(args.seed, 1, step, 0))
        output = model(inputs, targets, state, generator, analyze=True)
        loss = chunk_loss(output, args.loss)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        optimizer.step()
        state = detach_state(output.state)
        if step % args.every == 0 or step == args.steps - 1:
            gate = output.analysis["gate"]  # [B, T]
            print(
                f"pointer lr scale {scale:g}  step {step:4d}  train loss {chunk_loss(output, 'mean'):6.3f}  "
                f"gate mean {gate.mean():.3f}  min {gate.min():.3f}  "
                f"std {gate.std():.3f}",
                flush=True,
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir")
    parser.add_argument("--preset", choices=sorted(PRESETS), default="cpu")
    parser.add_argument("--pointer-lr-scale", type=non_negative_float, nargs="+", default=[1.0, 0.05])
    parser.add_argument("--loss", choices=["sum", "mean"], default="mean")
    parser.add_argument("--lr", type=positive_float, default=20.0)
    parser.add_argument("--clip", type=positive_float, default=0.25)
    parser.add_argument("--batch-size", type=positive_int, default=20)
    parser.add_argument("--bptt", type=positive_int, default=35)
    parser.add_argument("--steps", type=positive_int, default=150)
    parser.add_argument("--every", type=positive_int, default=25)
    parser.add_argument("--seed", type=non_negative_int, default=1)
    parser.add_argument("--threads", type=positive_int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    dataset = load_dataset("ptb", data_dir=args.data_dir)
    streams = training_streams(np.asarray(dataset.tokens("train").ids), args.batch_size)
    config = dict(PRESETS[args.preset], window=100, vocab_size=len(dataset.vocab))
    print(
        f"recipe: loss {args.loss}, lr {args.lr:g}, clip {args.clip:g}, batch {args.batch_size}, "
        f"bptt {args.bptt}, preset {args.preset}"
    )
    for scale in args.pointer_lr_scale:
        probe(streams, config, args, scale)


if __name__ == "__main__":
    main()
