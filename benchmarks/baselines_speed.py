"""Speed of the baselines, each against its reference measured in the same run.

1. Training step (batch 32, BPTT 100 by default): ``torch.nn.LSTM`` LM (oneDNN on CPU, cuDNN on
   GPU) vs the zoneout LSTM (also with its plain recurrent matmul, the path taken where torch
   lacks the private oneDNN operators, and with the plain ``log_softmax`` and ``gather`` instead of
   the fused target log-softmax) vs the Pointer Sentinel-LSTM of the same size, with tokens/s and
   minutes per epoch of the dataset's train split. The models take turns step by step and each
   reports its median step, so a machine whose speed drifts during the run (other processes,
   the clock) slows them alike. ``--sampled-softmax K`` adds the zoneout LSTM and the pointer
   trained against a sampled softmax of ``K`` words (``baselines train --sampled-softmax``).
2. Neural-cache evaluation (batch 1, the papers' protocol) vs the plain LSTM's evaluation and vs
   the per-token algorithm of awd-lstm-lm's ``pointer.py`` (LSTM outputs computed a chunk at a
   time, then the cache applied one token at a time over a one-hot history of the next words),
   timed once its cache is full, as it is for all but the first ``--window`` tokens of a split.
   The plain LSTM's evaluation is also timed with its float32 products taken by the other library
   than this CPU's (oneDNN or torch's BLAS: :mod:`baselines.models.cpu_products`).

``--profile`` instead breaks one zoneout-LSTM training step down (forward, backward, optimizer;
matmuls, softmax, element-wise work). ``--layout`` instead compares the ways to train two models
on two CPU cores: one process with 2 threads (the models one after the other) against two
processes with 1 thread each at the same time, for each ``--layout-batch-sizes``; it reports the
total tokens/s of both models. ``--allocator`` instead times zoneout-LSTM steps in processes run
one after another, alternately with glibc's default ``malloc`` and with freed memory retained
(:func:`wikitext_toolkit_core.allocator.retain_freed_memory`, as ``baselines train`` has it on a
CPU; every other section has it too), in CPU seconds a step.

    python benchmarks/baselines_speed.py [--preset medium] [--steps 3] [--device cuda]
    python benchmarks/baselines_speed.py --preset medium --profile
    python benchmarks/baselines_speed.py --dataset wikitext-2 --preset medium --sampled-softmax 4096
    python benchmarks/baselines_speed.py --preset medium --layout --layout-batch-sizes 16 32 64
    python benchmarks/baselines_speed.py --dataset wikitext-2 --preset medium --amp --allocator

Models have random weights (speed does not depend on them); text is the start of the dataset's
splits (PTB by default, packaged).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch
from torch import nn

from baselines.models import (
    CoreConfig,
    LMOutput,
    NeuralCache,
    PointerConfig,
    PointerSentinelLSTM,
    UnigramSampler,
    ZoneoutLSTM,
)
from baselines.models.cpu_products import CpuProducts, cpu_vendor, onednn_float32, onednn_usable
from baselines.models.recurrent import LSTMCore
from baselines.plugin_bridge import TorchLanguageModel, detach_state
from baselines.training import PRESETS, bfloat16_is_emulated
from harness.datasets import load_dataset
from harness.evaluate import evaluate
from harness.protocol import EvaluationProtocol
from wikitext_toolkit_core.allocator import retain_freed_memory
from wikitext_toolkit_core.cli import positive_int


class CudnnLSTM(nn.Module):
    """The reference: ``torch.nn.LSTM`` of the same size, with the same embedding and decoder."""

    def __init__(self, config: CoreConfig) -> None:
        super().__init__()
        self.embedding = nn.Embedding(config.vocab_size, config.embedding_size)
        self.lstm = nn.LSTM(config.embedding_size, config.hidden_size, config.num_layers, batch_first=True)
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size)

    def initial_state(self, batch_size: int, device: str) -> tuple[torch.Tensor, torch.Tensor]:
        shape = (self.lstm.num_layers, batch_size, self.lstm.hidden_size)
        return torch.zeros(shape, device=device), torch.zeros(shape, device=device)

    def forward(self, inputs, targets, state, generator=None, distribution_rows=None) -> LMOutput:
        features, state = self.lstm(self.embedding(inputs), state)
        log_probs = torch.log_softmax(self.decoder(features).float(), dim=-1)
        return LMOutput(log_probs.gather(2, targets.unsqueeze(2)).squeeze(2), state)


#: The models the training section times against each other.
BenchmarkedModel = CudnnLSTM | ZoneoutLSTM | PointerSentinelLSTM


def training_steps(
    args: argparse.Namespace,
    model: BenchmarkedModel,
    train_ids: torch.Tensor,
    amp: bool,
    sampler: UnigramSampler | None = None,
) -> Callable[[int], None]:
    """``step(index)``: one training step of ``model`` on the ``index``-th chunk of the command
    line's batch and BPTT (SGD, gradient clipping, the state carried from the previous step),
    against the full softmax or, with ``sampler``, a sampled one drawn afresh each step."""
    device, batch, bptt = args.device, args.batch_size, args.bptt
    model.to(device).train()
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    generator = torch.Generator(device=device).manual_seed(0)
    state = model.initial_state(batch, device)
    streams = train_ids[: batch * (bptt + 1) * (args.steps + 2)].view(batch, -1).to(device)

    def step(index: int) -> None:
        nonlocal state
        chunk = streams[:, index * bptt : (index + 1) * bptt + 1]
        sampled = {} if sampler is None else {"vocab_sample": sampler.draw(None, device)}
        with torch.autocast(device.split(":")[0], dtype=torch.bfloat16, enabled=amp):
            output = model(chunk[:, :-1], chunk[:, 1:], state, generator, **sampled)
        loss = -output.target_log_probs.float().sum(dim=1).mean()
        if output.auxiliary_loss is not None:
            loss = loss + output.auxiliary_loss.float().sum(dim=1).mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        state = detach_state(output.state)

    return step


def synchronize(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def time_interleaved(
    steps: dict[str, Callable[[int], None]],
    count: int,
    device: str,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, list[float]]:
    """Seconds of each of ``count`` steps of every model by ``clock`` (``time.process_time``: the
    CPU time), after two warm-up steps each.

    The models take turns step by step, so a change in the machine's speed while it runs (another
    process, the clock) falls on all of them alike."""
    for step in steps.values():
        for index in range(2):
            step(index)
    seconds: dict[str, list[float]] = {name: [] for name in steps}
    for index in range(2, count + 2):
        for name, step in steps.items():
            synchronize(device)
            began = clock()
            step(index)
            synchronize(device)
            seconds[name].append(clock() - began)
    return seconds


def time_evaluation(
    model: ZoneoutLSTM | NeuralCache, ids: np.ndarray, eos_id: int, vocab_size: int, device: str
) -> float:
    """Tokens per second of the harness's evaluation (batch 1, BPTT 100, no audit)."""
    scorer = TorchLanguageModel(model, device)
    result = evaluate(
        scorer,
        ids,
        eos_id=eos_id,
        vocab_size=vocab_size,
        protocol=EvaluationProtocol(audit_positions=0),
        progress=False,
    )
    return result.tokens / result.seconds


@torch.inference_mode()
def per_token_cache(cache: NeuralCache, ids: np.ndarray, eos_id: int, device: str) -> float:
    """Tokens per second of the algorithm of awd-lstm-lm's ``pointer.py`` once its cache is full:
    the LSTM a chunk at a time, then one token at a time, the cache distribution as attention
    times a one-hot history ``[window, V]`` of the next words, mixed with the full softmax. The
    first ``cache.window`` of ``ids`` fill the history untimed; the rest are timed."""
    lstm = cache.lstm.to(device).eval()
    vocab_size = lstm.config.vocab_size
    ids = ids.astype(np.int64)  # one_hot wants int64
    inputs = torch.from_numpy(np.concatenate([[eos_id], ids[:-1]])).to(device).view(1, -1)
    targets = torch.from_numpy(ids).to(device)
    state = lstm.initial_state(1, device)
    filled = []
    for begin in range(0, cache.window, 100):
        features, state = lstm.core(inputs[:, begin : min(begin + 100, cache.window)], state)
        filled.append(features[0])
    hidden_history = torch.cat(filled)
    word_history = torch.nn.functional.one_hot(targets[: cache.window], vocab_size).float()
    total = 0.0
    synchronize(device)
    began = time.perf_counter()
    for begin in range(cache.window, inputs.shape[1], 100):
        features, state = lstm.core(inputs[:, begin : begin + 100], state)
        vocab_probs = torch.softmax(lstm.core.logits(features[0]), dim=-1)
        for offset in range(features.shape[1]):
            target = int(targets[begin + offset])
            attention = torch.softmax(cache.theta * (hidden_history @ features[0, offset]), 0)
            cache_probs = (attention.unsqueeze(1) * word_history).sum(0)
            probs = cache.interpolation * cache_probs + (1 - cache.interpolation) * vocab_probs[offset]
            total += float(-torch.log(probs[target]))
            one_hot = torch.nn.functional.one_hot(targets[begin + offset], vocab_size).float()
            hidden_history = torch.cat([hidden_history, features[0, offset : offset + 1]])[-cache.window :]
            word_history = torch.cat([word_history, one_hot.unsqueeze(0)])[-cache.window :]
    synchronize(device)
    return (len(ids) - cache.window) / (time.perf_counter() - began)


def report(rows: list[tuple[str, float, str]]) -> None:
    width = max(len(name) for name, _, _ in rows)
    for name, value, note in rows:
        print(f"  {name:<{width}}  {value:10.1f}  {note}")


def make_models(config: CoreConfig) -> dict[str, Callable[[], BenchmarkedModel]]:
    return {
        "torch.nn.LSTM": lambda: CudnnLSTM(config),
        "zoneout LSTM": lambda: ZoneoutLSTM(config),
        "Pointer Sentinel-LSTM": lambda: PointerSentinelLSTM(
            PointerConfig(**dataclasses.asdict(config), window=100)
        ),
    }


#: The zoneout LSTM with every product by ``torch.addmm``, as where torch lacks the private oneDNN
#: operators of the fast paths (:func:`baselines.models.cpu_products.onednn_usable`).
PLAIN_MATMUL = "zoneout LSTM, plain matmul"
#: The zoneout LSTM trained with ``log_softmax`` and ``gather`` instead of the fused target
#: log-softmax (:func:`baselines.models.recurrent.target_log_softmax`).
PLAIN_SOFTMAX = "zoneout LSTM, plain softmax"


@contextlib.contextmanager
def class_attribute(owner: type, name: str, value: Any) -> Iterator[None]:
    """The class attribute ``owner.name`` set to ``value`` inside the block (a fast path's switch)."""
    before = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, before)


def with_fast_path_off(step: Callable[[int], None], owner: type, switch: str) -> Callable[[int], None]:
    """``step`` with the class attribute ``owner.switch`` (a fast path's switch) False while it runs."""

    def plain_step(index: int) -> None:
        with class_attribute(owner, switch, False):
            step(index)

    return plain_step


#: The models that ``--sampled-softmax`` also times with a sampled softmax.
SAMPLED_MODELS = ("zoneout LSTM", "Pointer Sentinel-LSTM")


def training_section(args: argparse.Namespace, config: CoreConfig, train_ids: torch.Tensor) -> None:
    tokens = args.batch_size * args.bptt
    print(
        f"\nTraining step, batch {args.batch_size} x BPTT {args.bptt}, the median of {args.steps} steps, "
        "the models in turn (ms/step, ratio to torch.nn.LSTM, tokens/s, minutes per epoch of "
        f"{len(train_ids):,} tokens):"
    )
    emulated = args.amp and bfloat16_is_emulated(args.device)
    if emulated:
        print(
            "  this CPU has no native bfloat16, so autocast is emulated; torch.nn.LSTM runs in "
            "float32 (oneDNN has no bfloat16 LSTM here)"
        )
    steps = {}
    sampler = (
        UnigramSampler(train_ids.numpy(), config.vocab_size, args.sampled_softmax)
        if args.sampled_softmax
        else None
    )
    for name, make in make_models(config).items():
        for sampled in (False, True) if sampler is not None and name in SAMPLED_MODELS else (False,):
            model = make()
            if args.compile and not isinstance(model, CudnnLSTM):
                model.core.compile_step()
            amp = args.amp and not (emulated and name == "torch.nn.LSTM")
            label = f"{name}, sampled softmax of {args.sampled_softmax}" if sampled else name
            steps[label] = training_steps(args, model, train_ids, amp, sampler if sampled else None)
    for label, owner, switch in (
        (PLAIN_MATMUL, CpuProducts, "use_onednn"),
        (PLAIN_SOFTMAX, LSTMCore, "fuse_training_softmax"),
    ):
        step = training_steps(args, ZoneoutLSTM(config), train_ids, args.amp)
        steps[label] = with_fast_path_off(step, owner, switch)
    times = time_interleaved(steps, args.steps, args.device)
    seconds = {name: float(np.median(values)) for name, values in times.items()}
    reference = seconds["torch.nn.LSTM"]
    report(
        [
            (
                name,
                value * 1000,
                f"ms   x{value / reference:.2f}   {tokens / value:7.0f} tok/s   "
                f"{len(train_ids) / (tokens / value) / 60:6.1f} min/epoch",
            )
            for name, value in seconds.items()
        ]
    )
    ratios = np.array(times["zoneout LSTM"]) / np.array(times["torch.nn.LSTM"])
    print(
        f"  zoneout LSTM / torch.nn.LSTM: x{seconds['zoneout LSTM'] / reference:.3f} (target: at most 1.05; "
        f"step by step x{ratios.min():.3f} to x{ratios.max():.3f})"
    )
    print(
        f"  zoneout LSTM / {PLAIN_MATMUL}: x{seconds['zoneout LSTM'] / seconds[PLAIN_MATMUL]:.3f} "
        f"(the private oneDNN operators {'in use' if onednn_usable() else 'unusable here: both plain'})"
    )
    print(
        f"  zoneout LSTM / {PLAIN_SOFTMAX}: x{seconds['zoneout LSTM'] / seconds[PLAIN_SOFTMAX]:.3f} "
        "(the fused target log-softmax against log_softmax and gather)"
    )
    pointer_ratio = seconds["Pointer Sentinel-LSTM"] / seconds["zoneout LSTM"]
    print(
        f"  Pointer Sentinel-LSTM / zoneout LSTM of the same size: x{pointer_ratio:.2f} (target: at most 1.5)"
    )


def evaluation_section(args: argparse.Namespace, config: CoreConfig, dataset) -> None:
    valid_ids = dataset.tokens("valid").ids
    print(f"\nEvaluation, batch 1, BPTT 100 (tokens/s; cache window {args.window}):")
    lstm = ZoneoutLSTM(config)
    cache = NeuralCache(lstm, args.window, theta=0.3, interpolation=0.1)
    eval_ids = valid_ids[: args.eval_tokens]
    plain = time_evaluation(lstm, eval_ids, dataset.vocab.eos_id, len(dataset.vocab), args.device)
    chosen, other = ("oneDNN", "torch's BLAS") if onednn_float32() else ("torch's BLAS", "oneDNN")
    with class_attribute(CpuProducts, "onednn_float32", not onednn_float32()):
        switched = time_evaluation(lstm, eval_ids, dataset.vocab.eos_id, len(dataset.vocab), args.device)
    vectorized = time_evaluation(cache, eval_ids, dataset.vocab.eos_id, len(dataset.vocab), args.device)
    naive = per_token_cache(
        cache, valid_ids[: args.window + args.naive_tokens], dataset.vocab.eos_id, args.device
    )
    report(
        [
            (f"plain zoneout LSTM (float32 products by {chosen}, as on this CPU)", plain, "tok/s"),
            (
                f"plain zoneout LSTM, float32 products by {other}",
                switched,
                f"tok/s   x{plain / switched:.2f} the time of the plain LSTM",
            ),
            (
                "neural cache (this toolkit)",
                vectorized,
                f"tok/s   x{plain / vectorized:.2f} the plain LSTM's time (target: at most 1.3)",
            ),
            (
                "neural cache, pointer.py per-token loop, cache full",
                naive,
                f"tok/s   ours is x{vectorized / naive:.1f} faster (target: at least 50)",
            ),
        ]
    )


#: How ``--profile`` groups the profiler's operators.
OPERATOR_GROUPS = {
    "matmuls (recurrent, input, decoder)": ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm"),
    "softmax (forward and backward)": (
        *("aten::_log_softmax", "aten::_log_softmax_backward_data"),
        *("aten::exp", "aten::exp_", "aten::scatter_add_"),  # the fused target log-softmax
    ),
}


def profile_section(args: argparse.Namespace, config: CoreConfig, train_ids: torch.Tensor) -> None:
    """One zoneout-LSTM training step under the profiler: time per phase and per operator group."""
    from torch.profiler import ProfilerActivity, profile, record_function

    model = ZoneoutLSTM(config).to(args.device).train()
    if args.compile:
        model.core.compile_step()
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    streams = train_ids[: args.batch_size * (args.bptt + 1) * 2].view(args.batch_size, -1).to(args.device)
    inputs, targets = streams[:, : args.bptt], streams[:, 1 : args.bptt + 1]

    def step() -> None:
        with record_function("phase: forward"):
            with torch.autocast(args.device.split(":")[0], dtype=torch.bfloat16, enabled=args.amp):
                output = model(inputs, targets, model.initial_state(args.batch_size, args.device))
            loss = -output.target_log_probs.float().mean()
        with record_function("phase: backward"):
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
        with record_function("phase: optimizer"):
            nn.utils.clip_grad_norm_(model.parameters(), 0.25)
            optimizer.step()

    step()  # warm-up
    with profile(activities=[ProfilerActivity.CPU]) as profiler:
        began = time.perf_counter()
        step()
        wall = time.perf_counter() - began
    events = profiler.key_averages()
    total = sum(event.self_cpu_time_total for event in events) / 1e6
    print(f"\nOne zoneout-LSTM training step, batch {args.batch_size} x BPTT {args.bptt}: {wall:.2f} s wall")
    phases = [(e.key, e.cpu_time_total / 1e6) for e in events if e.key.startswith("phase: ")]
    report([(name, value * 1000, f"ms   {value / wall:5.1%}") for name, value in sorted(phases)])
    grouped = {
        group: sum(e.self_cpu_time_total for e in events if e.key in names) / 1e6
        for group, names in OPERATOR_GROUPS.items()
    }
    grouped["element-wise and the rest"] = total - sum(grouped.values())
    print("  by operator (self time):")
    report([(name, value * 1000, f"ms   {value / total:5.1%}") for name, value in grouped.items()])


def run_workers(
    args: argparse.Namespace, threads: int, batch_size: int, count: int, options: tuple[str, ...] = ()
) -> list[float]:
    """Start ``count`` worker processes of ``threads`` threads at once, with the worker
    ``options``; their median seconds per step."""
    command = [
        sys.executable,
        __file__,
        "--worker",
        *("--preset", args.preset, "--dataset", args.dataset, "--bptt", str(args.bptt)),
        *("--batch-size", str(batch_size), "--steps", str(args.steps), "--threads", str(threads)),
        *(["--data-dir", args.data_dir] if args.data_dir else []),
        *(["--amp"] if args.amp else []),
        *options,
    ]
    workers = [subprocess.Popen(command, stdout=subprocess.PIPE, text=True) for _ in range(count)]
    return [json.loads(worker.communicate()[0])["seconds"] for worker in workers]


def layout_section(args: argparse.Namespace) -> None:
    """Total tokens/s of two models trained on two cores: one 2-thread process running them in
    turn (so each gets the whole machine half the time) against two 1-thread processes at once."""
    print(f"\nTwo models on two cores, zoneout LSTM, BPTT {args.bptt} (total tokens/s of both models):")
    rows = []
    for batch_size in args.layout_batch_sizes:
        tokens = batch_size * args.bptt
        (together,) = run_workers(args, threads=2, batch_size=batch_size, count=1)
        apart = run_workers(args, threads=1, batch_size=batch_size, count=2)
        one_process = tokens / together  # two models in turn: each step of each at this speed
        two_processes = sum(tokens / seconds for seconds in apart)
        rows.append((f"batch {batch_size}: 1 process x 2 threads", one_process, "tok/s"))
        rows.append(
            (
                f"batch {batch_size}: 2 processes x 1 thread",
                two_processes,
                f"tok/s   x{two_processes / one_process:.2f}",
            )
        )
    report(rows)


#: How many processes ``--allocator`` runs with each allocator, alternately.
ALLOCATOR_ROUNDS = 3


def allocator_section(args: argparse.Namespace) -> None:
    """CPU seconds per zoneout-LSTM step with glibc's default ``malloc`` and with freed memory
    retained: one process at a time, alternately, ``ALLOCATOR_ROUNDS`` of each."""
    threads = args.threads or torch.get_num_threads()
    print(f"\nAllocators, zoneout LSTM, {threads} thread(s) (median CPU seconds a step, over processes):")
    options = {"glibc's default malloc": ("--worker-glibc-default",), "freed memory retained": ()}
    seconds: dict[str, list[float]] = {name: [] for name in options}
    for _ in range(ALLOCATOR_ROUNDS):
        for name, extra in options.items():
            (step,) = run_workers(args, threads, args.batch_size, 1, ("--worker-cpu-clock", *extra))
            seconds[name].append(step)
    reference = float(np.median(seconds["glibc's default malloc"]))
    report(
        [
            (name, float(np.median(values)) * 1000, f"ms   x{float(np.median(values)) / reference:.2f}")
            for name, values in seconds.items()
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir")
    parser.add_argument("--dataset", default="ptb")
    parser.add_argument("--preset", choices=sorted(PRESETS), default="small")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--batch-size", type=positive_int, default=32)
    parser.add_argument("--bptt", type=positive_int, default=100)
    parser.add_argument("--steps", type=positive_int, default=5)
    parser.add_argument("--threads", type=positive_int, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--eval-tokens", type=positive_int, default=20_000)
    parser.add_argument(
        "--naive-tokens",
        type=positive_int,
        default=200,
        help="tokens the per-token loop times once its cache is full",
    )
    parser.add_argument("--window", type=positive_int, default=2000)
    parser.add_argument("--amp", action="store_true", help="bfloat16 autocast in training")
    parser.add_argument("--compile", action="store_true", help="torch.compile the LSTM step")
    parser.add_argument(
        "--sampled-softmax",
        type=positive_int,
        metavar="K",
        help="also time the zoneout LSTM and the pointer trained against a sampled softmax of K words",
    )
    parser.add_argument("--no-evaluation", action="store_true", help="time the training steps only")
    parser.add_argument("--profile", action="store_true", help="break one training step down instead")
    parser.add_argument("--layout", action="store_true", help="compare process/thread layouts instead")
    parser.add_argument("--layout-batch-sizes", type=positive_int, nargs="+", default=[32])
    parser.add_argument(
        "--allocator",
        action="store_true",
        help="compare glibc's default malloc with freed memory retained instead",
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--worker-glibc-default", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--worker-cpu-clock", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if not args.worker_glibc_default:
        retain_freed_memory()
    if args.threads:
        torch.set_num_threads(args.threads)

    dataset = load_dataset(args.dataset, data_dir=args.data_dir)
    config = CoreConfig(vocab_size=len(dataset.vocab), **PRESETS[args.preset])
    train_ids = torch.tensor(dataset.tokens("train").ids, dtype=torch.long)
    torch.manual_seed(0)
    if args.worker:
        times = time_interleaved(
            {"zoneout LSTM": training_steps(args, ZoneoutLSTM(config), train_ids, args.amp)},
            args.steps,
            args.device,
            time.process_time if args.worker_cpu_clock else time.perf_counter,
        )
        print(json.dumps({"seconds": float(np.median(times["zoneout LSTM"]))}))
        return
    print(
        f"{args.preset} preset ({config.num_layers} x {config.hidden_size}), {args.dataset}, "
        f"device {args.device}, torch {torch.__version__}, {torch.get_num_threads()} CPU threads, "
        f"CPU vendor {cpu_vendor() or 'unknown'}"
    )
    if args.profile:
        profile_section(args, config, train_ids)
    elif args.layout:
        layout_section(args)
    elif args.allocator:
        allocator_section(args)
    else:
        training_section(args, config, train_ids)
        if not args.no_evaluation:
            evaluation_section(args, config, dataset)


if __name__ == "__main__":
    main()
