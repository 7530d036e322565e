"""Float32 products on this CPU: ``torch.addmm`` (torch's BLAS, MKL in the x86 wheels) against
oneDNN's linear, for the baselines' shapes, and the library the toolkit takes for each
(:mod:`baselines.models.cpu_products`).

Each row times ``bias + x @ W^T`` three ways: by ``torch.addmm``; by oneDNN's linear on the weight
as it is (what ``linear`` takes, for a product used once); by oneDNN's linear on the weight
prepacked (what the recurrent matmul takes for all the steps of a chunk; the reordering is timed
apart). It prints microseconds a product (the best of ``--rounds`` rounds, each as many products
as fit in ``--budget`` seconds, the three ways taking turns), each way's ratio to ``torch.addmm``,
and the library the toolkit takes, flagged ``<-`` where another way was more than 10% faster.
Then the weight gradients of those products (``grad^T @ x``, in the backward pass of training in
float32 and of dynamic evaluation), which the toolkit leaves to ``torch.mm`` on every CPU, against
oneDNN's linear from the transposed views.

Run it on quiet cores, at each thread count that evaluations use:

    python benchmarks/cpu_products.py --threads 1 2
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import torch

from baselines.models.cpu_products import cpu_vendor, onednn_usable, product_library
from wikitext_toolkit_core.cli import positive_float, positive_int

#: (what the weight is, out, in, rows of a product, used once): the recurrent matmuls of the
#: ``tiny``, ``cpu`` (2 x 200) and ``medium`` (2 x 650) LSTMs at batch 1 (evaluation), 10
#: (validation) and 32 (training); the medium LSTM's input projection and the decoders of a chunk
#: of 100 positions at batch 1.
PRODUCTS = [
    *(("tiny LSTM, recurrent", 256, 64, rows, False) for rows in (1, 10, 32)),
    *(("cpu LSTM, recurrent", 800, 200, rows, False) for rows in (1, 10, 32)),
    *(("medium LSTM, recurrent", 2600, 650, rows, False) for rows in (1, 10, 32)),
    ("medium LSTM, input projection", 2600, 650, 100, True),
    ("tiny PTB decoder", 10_000, 64, 100, True),
    ("cpu PTB decoder", 10_000, 200, 100, True),
    ("medium PTB decoder", 10_000, 650, 100, True),
    ("cpu WikiText-2 decoder", 33_278, 200, 100, True),
    ("medium WikiText-2 decoder", 33_278, 650, 100, True),
]
#: The three ways, in the order printed, and the name :func:`product_library` gives each.
WAYS = {"torch.addmm": "addmm", "oneDNN": "onednn", "oneDNN prepacked": "prepacked"}


def best_microseconds(
    products: dict[str, Callable[[], object]], rounds: int, budget: float
) -> dict[str, float]:
    """The best time a call of each of ``products`` took over ``rounds`` rounds (the products
    taking turns round by round), each round as many calls as fit in ``budget`` seconds."""
    best = dict.fromkeys(products, float("inf"))
    for _ in range(rounds):
        for name, product in products.items():
            product()  # warm: oneDNN makes its primitive on the first call of a shape
            calls, began = 0, time.perf_counter()
            while time.perf_counter() - began < budget:
                product()
                calls += 1
            best[name] = min(best[name], (time.perf_counter() - began) / calls * 1e6)
    return best


def product_row(
    label: str, out_size: int, in_size: int, rows: int, once: bool, args: argparse.Namespace
) -> str:
    """One printed row: the three ways' times and ratios, and the toolkit's choice."""
    generator = torch.Generator().manual_seed(0)
    weight = torch.randn(out_size, in_size, generator=generator) * 0.05
    bias, x = torch.randn(out_size, generator=generator), torch.randn(rows, in_size, generator=generator)
    linear = torch.ops.mkldnn._linear_pointwise
    began = time.perf_counter()
    packed = torch.ops.mkldnn._reorder_linear_weight(weight, rows)
    reorder = (time.perf_counter() - began) * 1e6
    times = best_microseconds(
        {
            "torch.addmm": lambda: torch.addmm(bias, x, weight.t()),
            "oneDNN": lambda: linear(x, weight, bias, "none", [], ""),
            "oneDNN prepacked": lambda: linear(x, packed, bias, "none", [], ""),
        },
        args.rounds,
        args.budget,
    )
    chosen = product_library(weight, rows, once)
    candidates = ("torch.addmm", "oneDNN") if once else ("torch.addmm", "oneDNN prepacked")
    fastest = min(candidates, key=times.__getitem__)
    taken = next(way for way, name in WAYS.items() if name == chosen)
    flag = "  <-" if times[fastest] * 1.1 < times[taken] else ""
    reference = times["torch.addmm"]
    cells = "  ".join(f"{times[way]:9.1f} x{times[way] / reference:4.2f}" for way in WAYS)
    shape = f"{out_size} x {in_size}, {rows} row{'s' if rows > 1 else ''}"
    return f"  {label:<30} {shape:<22} {cells}  reorder {reorder:8.1f}   takes {taken}{flag}"


def gradient_row(label: str, out_size: int, in_size: int, rows: int, args: argparse.Namespace) -> str:
    """One printed row for the weight gradient of a product of ``rows`` rows: ``torch.mm`` (the
    toolkit's) against oneDNN."""
    generator = torch.Generator().manual_seed(0)
    grad = torch.randn(rows, out_size, generator=generator)
    x = torch.randn(rows, in_size, generator=generator)
    linear = torch.ops.mkldnn._linear_pointwise
    times = best_microseconds(
        {
            "torch.mm": lambda: grad.t() @ x,
            "oneDNN": lambda: linear(grad.t(), x.t(), None, "none", [], ""),
        },
        args.rounds,
        args.budget,
    )
    flag = "  <-" if times["oneDNN"] * 1.1 < times["torch.mm"] else ""
    reference = times["torch.mm"]
    cells = "  ".join(f"{seconds:9.1f} x{seconds / reference:4.2f}" for seconds in times.values())
    return f"  {label:<30} {f'{out_size} x {in_size}, {rows} rows':<22} {cells}   takes torch.mm{flag}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--threads", type=positive_int, nargs="+", default=[1, 2])
    parser.add_argument("--rounds", type=positive_int, default=3)
    parser.add_argument("--budget", type=positive_float, default=0.1, help="seconds of products per round")
    args = parser.parse_args()
    if not (torch.backends.mkldnn.is_available() and onednn_usable()):
        raise SystemExit("error: no usable private oneDNN operators here: every product is torch.addmm")
    print(f"CPU vendor {cpu_vendor() or 'unknown'}, torch {torch.__version__}")
    for threads in args.threads:
        torch.set_num_threads(threads)
        print(f"\n{threads} thread(s): microseconds a product, and its ratio to torch.addmm's")
        print(f"  {'':<30} {'weight, rows':<22} " + "  ".join(f"{way:>15}" for way in WAYS))
        for product in PRODUCTS:
            print(product_row(*product, args), flush=True)
        print(f"  weight gradients:{'':<36}" + "  ".join(f"{way:>15}" for way in ("torch.mm", "oneDNN")))
        for label, out_size, in_size, rows, once in PRODUCTS:
            if once or rows == 32:  # the recurrent weight's over a chunk: rows = 100 x batch
                print(gradient_row(label, out_size, in_size, 100 if once else 3200, args), flush=True)


if __name__ == "__main__":
    main()
