"""``python -m baselines {train,tune,analyze,calibrate,package,pack-run,unpack-run}`` (console
script ``lm-baselines``)."""

from __future__ import annotations

import argparse
import json
import math
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from baselines import checkpoint as checkpoints
from baselines.analysis import analyze, attention_record
from baselines.calibration import calibration_record, fit_sentinel_shift, mixture_parts
from baselines.dynamic_eval import BASES, DEFAULT_RMS_TOKENS, BaseModel, DynamicFactory
from baselines.dynamic_tuning import DynamicGrid, tune_dynamic
from baselines.models import NeuralCache, PointerSentinelLSTM, ZoneoutLSTM
from baselines.models.dynamic import METHODS
from baselines.neural_cache import DEFAULT_WINDOW, cache_from_checkpoint
from baselines.plugin_bridge import (
    CPU_RECIPE,
    announce_checkpoint,
    cpu_recipe_minutes,
    dataset_argument,
    resolve_checkpoint,
)
from baselines.processes import distributed
from baselines.run_directory import RunDirectory, holding_run_dir
from baselines.trainer import Trainer
from baselines.training import (
    LARGEST_FLOAT32,
    PRESETS,
    Session,
    TrainOptions,
    bfloat16_is_emulated,
)
from baselines.transfer import MIN_PIECE_BYTES, PIECE_BYTES, PRECISIONS, pack_run, unpack_run
from baselines.tuning import TuningGrid, tune
from baselines.tuning_files import DYNAMIC_EVAL, NEURAL_CACHE, TuningKind, read_tuning_file, record_tuning
from harness.datasets import load_dataset
from harness.plugin import parse_model_args
from wikitext_toolkit_core.allocator import retain_freed_memory
from wikitext_toolkit_core.catalogue import BENCHMARKS
from wikitext_toolkit_core.cli import (
    ArgumentParser,
    UsageError,
    add_data_dir_option,
    below_one,
    check_not_an_input,
    check_output_dir,
    check_output_file,
    existing_file,
    non_negative_float,
    non_negative_int,
    positive_float,
    positive_int,
    run,
)
from wikitext_toolkit_core.devices import resolve_device
from wikitext_toolkit_core.files import write_atomically
from wikitext_toolkit_core.format import SPLITS
from wikitext_toolkit_core.threads import AUTO, THREADS_HELP, ThreadRequest, set_torch_threads, thread_request

#: PTB's validation tokens and vocabulary size, for the time of the CPU recipe on PTB.
PTB_VALIDATION_SIZE = (73_760, 10_000)
DEFAULT_THETAS = [0.0, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.7, 1.0]
DEFAULT_INTERPOLATIONS = [0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5]


def _switch(value: str, device: str) -> bool:
    return device.startswith("cuda") if value == "auto" else value == "on"


def _span(text: str) -> tuple[int, int]:
    start, sep, end = text.partition(":")
    try:
        span = int(start), int(end)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not START:END") from None
    if not sep or span[0] < 0 or span[1] <= span[0]:
        raise argparse.ArgumentTypeError(f"{text!r} is not START:END with 0 <= START < END")
    return span


def _prepare_process(threads: ThreadRequest, device: str) -> None:
    """Give torch the threads ``--threads`` asks for and, on a CPU, have this process keep the
    memory it frees (:func:`wikitext_toolkit_core.allocator.retain_freed_memory`): the models
    allocate and free the same large tensors at every step and chunk."""
    set_torch_threads(threads, torch)
    if device == "cpu":
        retain_freed_memory()


def _model_config(kind: str, preset: str, overrides: dict[str, Any], vocab_size: int) -> dict[str, Any]:
    """The hyper-parameters of the model to train: the preset's (and for the pointer a window of
    100), ``--model-args`` over them, the vocabulary size; checked, so that a bad value (one
    beyond float32 too, which the model computes in) is a one-line error naming ``--model-args``."""
    if "vocab_size" in overrides:
        raise UsageError("--model-args: vocab_size is the dataset's vocabulary size; it cannot be set")
    for name, value in overrides.items():
        if isinstance(value, float) and not abs(value) <= LARGEST_FLOAT32:
            raise UsageError(
                f"--model-args {name}={value:g}: a magnitude beyond {LARGEST_FLOAT32:.3g}, the largest "
                "float32, which the model computes in"
            )
    config = {
        **PRESETS[preset],
        **({"window": 100} if kind == "pointer_sentinel" else {}),
        **overrides,
        "vocab_size": vocab_size,
    }
    try:
        checkpoints.model_config(kind, config)
    except ValueError as error:
        raise UsageError(f"--model-args: {error}") from None
    return config


def _train_options(args: argparse.Namespace, model_config: dict[str, Any]) -> TrainOptions:
    return TrainOptions(
        kind=args.kind,
        model_config=model_config,
        batch_size=args.batch_size,
        bptt=args.bptt,
        learning_rate=args.lr,
        clip=args.clip,
        loss=args.loss,
        pointer_lr_scale=args.pointer_lr_scale,
        patience=args.patience,
        max_epochs=args.max_epochs,
        anneal_from=args.anneal_from,
        seed=args.seed,
        sampled_softmax=args.sampled_softmax,
        sampled_softmax_steps=args.sampled_softmax_steps,
    )


def _session(args: argparse.Namespace, device: str) -> Session:
    return Session(
        device=device,
        amp=_switch(args.amp, device),
        compile=_switch(args.compile, device),
        max_minutes=args.max_minutes,
        max_steps=args.max_steps,
        checkpoint_minutes=args.checkpoint_minutes,
        validate_every=args.validate_every,
    )


def command_train(args: argparse.Namespace) -> int:
    if args.output_dir is not None:
        check_output_dir(args.output_dir, "--output-dir")
    overrides = parse_model_args(args.model_args)
    with distributed(resolve_device(args.device)) as device:
        dataset = load_dataset(args.dataset, data_dir=args.data_dir)
        model_config = _model_config(args.kind, args.preset, overrides, len(dataset.vocab))
        options = _train_options(args, model_config)
        option = "--output-dir" if args.output_dir else "the run directory"
        run_dir = (
            Path(args.output_dir)
            if args.output_dir
            else check_output_dir(checkpoints.default_run_dir(args.kind, dataset.name), option)
        )
        with holding_run_dir(run_dir, option):
            _prepare_process(args.threads, device)
            trainer = Trainer(options, _session(args, device), dataset, run_dir)
            resumed = trainer.state.resume()
            if args.init_from is not None and not resumed:
                trainer.state.initialize_from(args.init_from)
            if trainer.processes.writes:
                _announce(args, trainer, resumed)
            outcome = "already finished; nothing to do" if trainer.state.schedule.finished else trainer.run()
        if trainer.processes.writes:
            print(f"{outcome}. {_how_to_score(args, run_dir / checkpoints.BEST)}", file=sys.stderr)
    return 0 if trainer.stop_signal is None else 128 + trainer.stop_signal


def _how_to_score(args: argparse.Namespace, best: Path) -> str:
    if not best.is_file():
        return (
            "No best.pt here yet (no validation here has beaten the best the run recorded; a run "
            "unpacked without its best.pt keeps it where it was packed)"
        )
    return f"Best weights: {best}; score them with `{_eval_command(args.kind, args.dataset, best)}`"


def _eval_command(kind: str, dataset: str, checkpoint: Path, *options: str) -> str:
    """The shell command that scores ``checkpoint`` of the baseline ``kind`` on ``dataset``."""
    command = ["python", "-m", "harness", "eval", f"baselines.{kind}", "--dataset", dataset, *options]
    return shlex.join([*command, "--checkpoint", str(checkpoint)])


def _announce(args: argparse.Namespace, trainer: Trainer, resumed: bool) -> None:
    """Write the run's ``config.json`` and say on stderr what starts or resumes where."""
    state = trainer.state
    run_dir, dataset = state.directory.path, state.dataset
    write_atomically(
        run_dir / "config.json",
        json.dumps(
            {
                "options": state.identity(),
                "dataset": dataset.name,
                "initialized_from": state.initialized_from,
                "command": shlex.join(sys.argv),
            },
            indent=2,
        )
        + "\n",
    )
    where = (
        f"resuming epoch {state.progress.epoch} step {state.progress.next_chunk}" if resumed else "starting"
    )
    if state.initialized_from is not None and not resumed:
        copied = "weights" if state.initialized_from["layers"] == "all" else "layers"
        where += f" from the {copied} of {state.initialized_from['checkpoint']}"
    print(
        f"{args.kind} ({args.preset}) on {dataset.name}: {where} in {run_dir} "
        f"[{sum(p.numel() for p in state.model.parameters()):,} parameters, "
        f"{trainer.processes.world} process(es), device {trainer.session.device}]",
        file=sys.stderr,
    )
    if trainer.session.amp and bfloat16_is_emulated(trainer.session.device):
        print(
            "warning: --amp on: this CPU has no native bfloat16, so autocast is emulated and a "
            "step is many times slower than in float32 (11.6x on an AVX2 CPU, docs/measurements.md); "
            "--amp off trains faster here",
            file=sys.stderr,
        )


def _tuning_output(args: argparse.Namespace, kind: TuningKind, checkpoint: Path, inputs: list[Path]) -> Path:
    """The tuning file a tuner writes (``--output``, else the one of ``kind`` beside
    ``checkpoint``), read now: a corrupt one fails before the tuning run, not after it, and one
    tuned on another checkpoint is noted (its entries are replaced)."""
    if args.output is not None:
        output = Path(args.output)
        check_not_an_input(output, "--output", inputs)
    else:
        output = check_output_file(kind.path(checkpoint), "the tuning file", inputs=inputs)
    tuning = read_tuning_file(output, kind)
    if tuning is not None and not tuning.tuned_on(checkpoint):
        print(f"note: {output} was tuned on another checkpoint: its entries are replaced", file=sys.stderr)
    return output


#: One axis of a tuning grid: (the setting's name in the best entry, its option, the values
#: searched, the lowest and the highest value the setting can take).
GridAxis = tuple[str, str, Sequence[float], float, float]


def grid_edge_notes(where: str, best: dict[str, Any], axes: list[GridAxis]) -> list[str]:
    """One ``note:`` line for each setting of ``best`` that sits at an edge of its searched
    ``axes`` which a wider grid could pass (an edge at or past the setting's own bound is no
    reason to widen): there, the best value may lie outside the grid."""
    notes = []
    for name, option, values, lowest, highest in axes:
        if len(set(values)) < 2:
            continue
        edges = (
            (max(values), max(values) < highest, "largest"),
            (min(values), min(values) > lowest, "smallest"),
        )
        for edge, widenable, side in edges:
            if best[name] == edge and widenable:
                notes.append(
                    f"note: {where}: the best {name}, {edge:g}, is the {side} of {option}: the best "
                    f"value may lie beyond it; widen {option} and tune again"
                )
    return notes


def command_tune(args: argparse.Namespace) -> int:
    if args.output is not None:
        check_output_file(args.output, "--output")
    device = resolve_device(args.device)
    dataset = load_dataset(args.dataset, data_dir=args.data_dir)
    command = ["python", "-m", "baselines", "tune", "--dataset", dataset_argument(dataset)]
    path = resolve_checkpoint(ZoneoutLSTM.kind, dataset, args.checkpoint, device=device, command=command)
    output = _tuning_output(args, NEURAL_CACHE, path, [path, *dataset.files()])
    ids = dataset.tokens(args.split).ids
    _prepare_process(args.threads, device)
    lstm, _ = checkpoints.load_model(path, dataset.vocab, kind=ZoneoutLSTM.kind)
    assert isinstance(lstm, ZoneoutLSTM)  # load_model checked the kind
    announce_checkpoint(ZoneoutLSTM.kind, path)
    began = time.perf_counter()
    results = tune(
        lstm,
        ids,
        eos_id=dataset.vocab.eos_id,
        grid=TuningGrid(windows=args.windows, thetas=args.thetas, interpolations=args.interpolations),
        batch_size=args.batch_size,
        bptt=args.bptt,
        device=device,
    )
    axes: list[GridAxis] = [
        ("theta", "--thetas", args.thetas, 0.0, math.inf),
        ("interpolation", "--interpolations", args.interpolations, 0.0, 1.0),
    ]
    for window in args.windows:
        best = results["best"][str(window)]
        baseline = ""
        if 0.0 in args.interpolations:
            plain = results["searches"][str(window)]["grid"][0][args.interpolations.index(0.0)]
            baseline = f" (without the cache: {plain:.2f})"
        print(
            f"window {window}: theta {best['theta']:g}, lambda {best['interpolation']:g} -> "
            f"{args.split} perplexity {best['perplexity']:.2f}{baseline}",
            flush=True,
        )
        for note in grid_edge_notes(f"window {window}", best, axes):
            print(note, file=sys.stderr)
    run = {"split": args.split, "seconds": time.perf_counter() - began}
    searches = {window: {**search, **run} for window, search in results["searches"].items()}
    record_tuning(
        output, NEURAL_CACHE, checkpoint=path, dataset=dataset.name, best=results["best"], searches=searches
    )
    print(f"wrote {output}", file=sys.stderr)
    return 0


def command_tune_dynamic(args: argparse.Namespace) -> int:
    if args.output is not None:
        check_output_file(args.output, "--output")
    if args.cache_window and args.base != ZoneoutLSTM.kind:
        raise UsageError("--cache-window: the neural cache sits on the zoneout_lstm base only")
    if any(decay > 1 for decay in args.decays):
        raise UsageError(f"--decays: each must be at most 1, got {max(args.decays)}")
    lrs = DEFAULT_DYNAMIC_LRS[args.method] if args.lrs is None else args.lrs
    device = resolve_device(args.device)
    dataset = load_dataset(args.dataset, data_dir=args.data_dir)
    command = ["python", "-m", "baselines", "tune-dynamic", "--dataset", dataset_argument(dataset)]
    path = resolve_checkpoint(args.base, dataset, args.checkpoint, device=device, command=command)
    output = _tuning_output(args, DYNAMIC_EVAL, path, [path, *dataset.files()])
    ids = dataset.tokens(args.split).ids[: args.max_tokens]
    _prepare_process(args.threads, device)
    base = BaseModel(args.base, args.cache_window, args.theta, args.interpolation, args.rms_tokens)
    factory = DynamicFactory(dataset, path, base, device)
    announce_checkpoint(args.base, path)
    grid = DynamicGrid(args.method, lrs, args.decays, args.segments, args.bptt)
    began = time.perf_counter()
    results = tune_dynamic(factory, ids, grid)
    best = results["best"]
    print(
        f"{base.key(args.method)}: lr {best['lr']:g}, decay {best['decay']:g}, segment {best['segment']} -> "
        f"{args.split} perplexity {best['perplexity']:.2f} (static: {results['static_perplexity']:.2f})",
        flush=True,
    )
    axes: list[GridAxis] = [
        ("lr", "--lrs", lrs, 0.0, math.inf),
        ("decay", "--decays", args.decays, 0.0, 1.0),
        ("segment", "--segments", args.segments, 1, args.bptt),
    ]
    for note in grid_edge_notes(base.key(args.method), best, axes):
        print(note, file=sys.stderr)
    search = {**results, "split": args.split, "seconds": time.perf_counter() - began}
    del search["best"]
    key = base.key(args.method)
    record_tuning(
        output, DYNAMIC_EVAL, checkpoint=path, dataset=dataset.name, best={key: best}, searches={key: search}
    )
    print(f"wrote {output}", file=sys.stderr)
    return 0


def _check_analyze_options(args: argparse.Namespace) -> None:
    """Refuse the options of ``analyze`` that the model analysed has no use for, and a run that
    would write nothing."""
    if args.kind == "neural_cache":
        if args.save_gates is not None:
            raise UsageError("--save-gates: the neural cache has no pointer gate")
        if args.save_attention is None:
            raise UsageError("analyze neural_cache writes nothing without --save-attention")
        return
    for option, value in (
        ("--window", args.window),
        ("--theta", args.theta),
        ("--interpolation", args.interpolation),
    ):
        if value is not None:
            raise UsageError(f"{option}: the pointer sentinel has no cache")
    if args.save_gates is None and args.save_attention is None:
        raise UsageError("analyze pointer_sentinel writes nothing without --save-gates or --save-attention")


def _check_span(span: tuple[int, int], ids: np.ndarray, split: str) -> None:
    """Fail unless the ``--span`` begins within the split's ``ids`` (int ``[N]``)."""
    if span[0] >= len(ids):
        raise UsageError(
            f"--span {span[0]}:{span[1]}: the {split} split has {len(ids):,} tokens, so a span must "
            f"begin below {len(ids)}"
        )


def command_analyze(args: argparse.Namespace) -> int:
    _check_analyze_options(args)
    outputs = {"--save-gates": args.save_gates, "--save-attention": args.save_attention}
    outputs = {option: path for option, path in outputs.items() if path is not None}
    for option, path in outputs.items():
        check_output_file(path, option)
    device = resolve_device(args.device)
    dataset = load_dataset(args.dataset, data_dir=args.data_dir)
    ids = dataset.tokens(args.split).ids
    _check_span(args.span, ids, args.split)
    module: PointerSentinelLSTM | NeuralCache
    command = ["python", "-m", "baselines", "analyze", args.kind, "--dataset", dataset_argument(dataset)]
    trained = ZoneoutLSTM.kind if args.kind == "neural_cache" else args.kind
    path = resolve_checkpoint(trained, dataset, args.checkpoint, device=device, command=command)
    _prepare_process(args.threads, device)
    if args.kind == "neural_cache":
        window = DEFAULT_WINDOW if args.window is None else args.window
        module = cache_from_checkpoint(
            path, dataset, window, theta=args.theta, interpolation=args.interpolation
        )
    else:
        pointer, _ = checkpoints.load_model(path, dataset.vocab, kind=args.kind)
        assert isinstance(pointer, PointerSentinelLSTM)  # the other kind analyze accepts
        module = pointer
    announce_checkpoint(trained, path)
    for option, output in outputs.items():
        check_not_an_input(output, option, [path, *dataset.files()])
    found = analyze(module, ids, dataset.vocab, span=args.span, bptt=args.bptt, device=device)
    if args.save_gates:
        gates = found["gates"]
        print(f"{len(gates)} gates, mean {gates.mean():.3f}", flush=True)
        write_atomically(args.save_gates, lambda handle: np.save(handle, gates))
        print(f"wrote {args.save_gates}", file=sys.stderr)
    if args.save_attention:
        write_atomically(
            args.save_attention,
            json.dumps(
                attention_record(
                    found,
                    model=args.kind,
                    checkpoint=path,
                    dataset=dataset.name,
                    split=args.split,
                    span=args.span,
                ),
                indent=1,
            )
            + "\n",
        )
        print(f"wrote attention for {len(found['span'])} positions to {args.save_attention}", file=sys.stderr)
    return 0


def command_calibrate(args: argparse.Namespace) -> int:
    output = check_output_file(args.output, "--output")
    device = resolve_device(args.device)
    dataset = load_dataset(args.dataset, data_dir=args.data_dir)
    check_not_an_input(output, "--output", [args.checkpoint, *dataset.files()])
    _prepare_process(args.threads, device)
    pointer, payload = checkpoints.load_model(args.checkpoint, dataset.vocab, kind=PointerSentinelLSTM.kind)
    assert isinstance(pointer, PointerSentinelLSTM)  # load_model checked the kind
    ids = dataset.tokens(args.split).ids[: args.max_tokens]
    parts = mixture_parts(
        pointer, ids, eos_id=dataset.vocab.eos_id, batch_size=args.batch_size, bptt=args.bptt, device=device
    )
    shift = fit_sentinel_shift(parts)
    record = calibration_record(
        parts,
        shift,
        pointer.config.sentinel_bias,
        dataset=dataset.name,
        split=args.split,
        batch_size=args.batch_size,
        bptt=args.bptt,
    )
    payload["config"] = {**payload["config"], "sentinel_bias": record["sentinel_bias"]}
    payload["calibration"] = record
    checkpoints.save(output, payload)
    print(
        f"sentinel bias {record['sentinel_bias']:+.2f} (shift {shift:+.2f}), fitted on {record['tokens']:,} "
        f"tokens of {dataset.name} {args.split} with dropout off: perplexity there "
        f"{record['perplexity_before']:.2f} -> {record['perplexity_after']:.2f}",
        flush=True,
    )
    print(f"wrote {output}", file=sys.stderr)
    return 0


def command_package(args: argparse.Namespace) -> int:
    check_output_dir(checkpoints.PACKAGED / args.dataset, "the package's trained/ directory")
    check_output_file(checkpoints.PACKAGED_SUMS, "the package's checksum file")
    target = checkpoints.package(args.checkpoint, args.dataset, args.precision)
    print(
        f"wrote {target} ({target.stat().st_size / 1e6:.1f} MB, {args.precision} weights) and updated "
        f"{checkpoints.PACKAGED_SUMS}",
        file=sys.stderr,
    )
    return 0


def command_pack_run(args: argparse.Namespace) -> int:
    manifest = pack_run(
        args.run_dir,
        args.destination,
        args.run_dir.name if args.name is None else args.name,
        args.precision,
        args.piece_bytes,
        with_best=not args.without_best,
    )
    pieces = json.loads(manifest.read_text(encoding="utf-8"))["pieces"]
    total = sum(piece["bytes"] for piece in pieces)
    best_from = f" --best-from {shlex.quote(str(args.run_dir))}" if args.without_best else ""
    print(
        f"wrote {manifest} and {len(pieces)} piece(s), {total / 1e6:.1f} MB in all ({args.precision}"
        f"{', best.pt left behind' if args.without_best else ''}); rebuild with: python -m baselines "
        f"unpack-run {shlex.quote(str(manifest))} RUN_DIR{best_from}",
        file=sys.stderr,
    )
    return 0


def command_unpack_run(args: argparse.Namespace) -> int:
    unpacked = unpack_run(args.manifest, args.run_dir, args.best_from)
    print(f"rebuilt {args.run_dir}; every piece matched its SHA-256", file=sys.stderr)
    if unpacked.best_taken:
        print(f"best.pt: taken from {args.best_from}, the best this run has recorded", file=sys.stderr)
    elif not unpacked.has_best:
        print(
            f"note: the pack carries no best.pt (left behind where it was packed); {args.run_dir} "
            "trains on, but writes a best.pt only when a validation beats the best the run recorded: "
            "unpack again with --best-from THAT_RUN_DIR to evaluate it",
            file=sys.stderr,
        )
    elif args.best_from is not None:
        print(f"best.pt: the pack's own, a new best; {args.best_from}'s was not used", file=sys.stderr)
    if unpacked.precision != "float32" and unpacked.has_best and not unpacked.best_taken:
        print(_rounded_weights_note(args.run_dir, unpacked.precision), file=sys.stderr)
    return 0


def _rounded_weights_note(run_dir: Path, precision: str) -> str:
    """What to check before resuming a run rebuilt from rounded weights: that its ``best.pt``
    still scores about the validation perplexity the run recorded for it."""
    best = run_dir / checkpoints.BEST
    note = f"note: the weights were packed in {precision}, so they are rounded; before resuming, check"
    recorded = RunDirectory(run_dir, writer=False).best_perplexity()
    try:
        config = json.loads((run_dir / "config.json").read_text(encoding="utf-8"))
        settings, dataset = config["options"]["options"], config["dataset"]
        kind, batch_size = settings["kind"], settings["eval_batch_size"]
    except (OSError, ValueError, KeyError, TypeError):
        recorded = math.inf  # no settings to name in a command
    if not math.isfinite(recorded):
        return f"{note} that {best} still scores about the validation perplexity the run recorded"
    # a corpus directory is recorded by its name only: the command names it as a placeholder
    dataset = dataset if dataset in BENCHMARKS else f"DIRECTORY/{dataset}"
    options = ("--split", "valid", "--batch-size", str(batch_size), "--causality-audit", "0")
    return (
        f"{note} that its best weights still score about the {recorded:.2f} the run recorded on valid "
        f"(under its own autocast setting): {_eval_command(kind, dataset, best, *options)}"
    )


#: ``--device`` of every command.
DEVICE_HELP = "cpu, cuda, cuda:1, ... (default: auto, a GPU when there is one)"
CHECKPOINT_HELP = (
    "the checkpoint to use, e.g. the best.pt of a `baselines train` run (default: the packaged {kind} "
    "of the dataset; a run of one's own is used only when named)"
)


def _add_threads_option(parser: argparse.ArgumentParser) -> None:
    """``--threads N|auto`` of the commands that run a model."""
    parser.add_argument("--threads", type=thread_request, default=AUTO, metavar="N|auto", help=THREADS_HELP)


def _add_dataset_options(parser: argparse.ArgumentParser) -> None:
    """``--dataset`` (required) and ``--data-dir``, where every command finds its corpus."""
    parser.add_argument("--dataset", required=True, help="benchmark name or corpus directory")
    add_data_dir_option(parser)


def _add_train_parser(commands: Any) -> None:
    train = commands.add_parser(
        "train",
        help="train a model with the papers' recipe (resumable: rerun the same command to continue)",
        description="Train a model with the papers' recipe; rerun the same command to continue a "
        "stopped run. A first run on a laptop CPU (about "
        f"{cpu_recipe_minutes(*PTB_VALIDATION_SIZE)} minutes; on PTB it ends far below the "
        "unigram's perplexity): python -m baselines train zoneout_lstm --dataset ptb "
        f"{' '.join(CPU_RECIPE)}",
    )
    train.add_argument("kind", choices=sorted(checkpoints.MODELS), help="the model to train")
    _add_dataset_options(train)
    train.add_argument(
        "--preset",
        choices=sorted(PRESETS),
        default="medium",
        help="model sizes: medium (the paper's, for a GPU), small, cpu (the packaged models), "
        "tiny (a laptop's first run) (default: medium)",
    )
    train.add_argument(
        "--model-args", help="override preset fields, e.g. dropout=0.4,window=50 (default: none)"
    )
    train.add_argument(
        "--output-dir",
        metavar="DIR",
        help="run directory (default: <cache>/runs/KIND/DATASET); its best.pt is scored when named "
        "by --checkpoint",
    )
    train.add_argument("--device", default="auto", help=DEVICE_HELP)
    train.add_argument(
        "--init-from",
        type=Path,
        metavar="CHECKPOINT",
        help="start a new run from a trained model of the same sizes: all its weights if it is of "
        "this kind (e.g. a packaged model), else the layers the two share (embedding, LSTM, "
        "decoder), e.g. a pointer_sentinel from a zoneout_lstm's best.pt; ignored when the run "
        "resumes from its own checkpoint (default: fresh weights)",
    )
    train.add_argument(
        "--batch-size", type=positive_int, default=32, help="streams trained together (default: 32)"
    )
    train.add_argument(
        "--bptt", type=positive_int, default=100, help="positions per step, truncated BPTT (default: 100)"
    )
    _add_recipe_options(train)
    _add_session_options(train)
    train.set_defaults(handler=command_train)


def _add_session_options(train: argparse.ArgumentParser) -> None:
    """The options of ``train`` that set how this session runs, not what it trains: threads,
    mixed precision, compilation, the time and step limits, checkpoints within an epoch."""
    _add_threads_option(train)
    train.add_argument(
        "--amp",
        choices=["auto", "on", "off"],
        default="auto",
        help="bfloat16 autocast (default: auto, on for CUDA)",
    )
    train.add_argument(
        "--compile",
        choices=["auto", "on", "off"],
        default="auto",
        help="torch.compile the LSTM step (default: auto, on for CUDA)",
    )
    train.add_argument(
        "--max-minutes",
        type=non_negative_float,
        help="stop (resumably) after this long (default: no limit)",
    )
    train.add_argument(
        "--max-steps",
        type=non_negative_int,
        help="stop (resumably) once the run has taken this many steps in all, counting those of "
        "earlier invocations (default: no limit; 0 writes the initial weights)",
    )
    train.add_argument(
        "--checkpoint-minutes",
        type=positive_float,
        default=10.0,
        help="also checkpoint this often within an epoch (default: 10)",
    )
    train.add_argument(
        "--validate-every",
        type=positive_int,
        metavar="STEPS",
        help="also validate every STEPS steps within an epoch and keep the best weights in best.pt; "
        "the schedule still compares epoch ends only (default: at epoch ends and stops)",
    )


def _add_recipe_options(train: argparse.ArgumentParser) -> None:
    """The options of ``train`` that the checkpoint's :class:`TrainOptions` records besides the
    model and the batch: the optimiser, the loss, the schedule and the seed."""
    train.add_argument("--lr", type=positive_float, default=20.0, help="initial learning rate (default: 20)")
    train.add_argument(
        "--clip",
        type=positive_float,
        default=0.25,
        help="largest gradient norm of a step (default: 0.25)",
    )
    train.add_argument(
        "--loss",
        choices=["sum", "mean"],
        default="mean",
        help="reduce a chunk's losses by averaging over all positions (mean) or by summing over "
        "positions and averaging over streams (sum) (default: mean)",
    )
    train.add_argument(
        "--pointer-lr-scale",
        type=non_negative_float,
        default=0.05,
        help="learning-rate multiplier of the pointer's query and sentinel (pointer_sentinel) "
        "(default: 0.05)",
    )
    train.add_argument(
        "--patience",
        type=positive_int,
        default=3,
        help="stop after this many epochs in a row without a new best validation perplexity (default: 3)",
    )
    train.add_argument(
        "--max-epochs", type=positive_int, default=64, help="stop after this many epochs (default: 64)"
    )
    train.add_argument(
        "--anneal-from",
        type=non_negative_int,
        default=0,
        metavar="EPOCH",
        help="also decay the learning rate after every epoch from this one on, for a run of a "
        "fixed number of epochs (default: 0, off)",
    )
    train.add_argument(
        "--seed", type=generator_seed, default=1, help="seed of the weights and of every mask (default: 1)"
    )
    train.add_argument(
        "--sampled-softmax",
        type=non_negative_int,
        default=0,
        metavar="K",
        help="train the first --sampled-softmax-steps steps against a sampled softmax of K words a "
        "step (Jean et al. 2015), far cheaper than the full one on a large vocabulary; validation "
        "and the rest of the run use the full softmax, and the train perplexity printed meanwhile "
        "is the sampled estimate (default: 0, the full softmax throughout)",
    )
    train.add_argument(
        "--sampled-softmax-steps",
        type=non_negative_int,
        default=0,
        metavar="STEPS",
        help="how many of the run's first steps --sampled-softmax trains (default: 0)",
    )


def generator_seed(text: str) -> int:
    """A seed of torch's generators: an integer from 0 to 2**64 - 1."""
    value = non_negative_int(text)
    if value >= 2**64:
        raise argparse.ArgumentTypeError(f"must be below 2**64, got {value}")
    return value


def _add_tune_parser(commands: Any) -> None:
    tune_parser = commands.add_parser(
        "tune",
        help="grid-search the neural cache's theta and lambda on a split, every grid point in one pass",
    )
    _add_dataset_options(tune_parser)
    tune_parser.add_argument("--checkpoint", help=CHECKPOINT_HELP.format(kind="zoneout LSTM"))
    tune_parser.add_argument(
        "--split",
        choices=("train", "valid"),
        default="valid",
        help="the split tuned on; never test, the exam itself (default: valid)",
    )
    tune_parser.add_argument(
        "--windows",
        type=positive_int,
        nargs="+",
        default=[100, 2000],
        help="cache sizes, each tuned on its own (default: 100 2000)",
    )
    tune_parser.add_argument(
        "--thetas",
        type=non_negative_float,
        nargs="+",
        default=DEFAULT_THETAS,
        help=f"the grid's theta values (default: {' '.join(map(str, DEFAULT_THETAS))})",
    )
    tune_parser.add_argument(
        "--interpolations",
        type=below_one,
        nargs="+",
        default=DEFAULT_INTERPOLATIONS,
        help=f"the grid's lambda values (default: {' '.join(map(str, DEFAULT_INTERPOLATIONS))})",
    )
    tune_parser.add_argument(
        "--batch-size",
        type=positive_int,
        default=1,
        help="contiguous streams scored together (default: 1, the papers' test protocol)",
    )
    tune_parser.add_argument(
        "--bptt", type=positive_int, default=100, help="positions per chunk (default: 100)"
    )
    tune_parser.add_argument("--device", default="auto", help=DEVICE_HELP)
    _add_threads_option(tune_parser)
    tune_parser.add_argument(
        "--output",
        metavar="FILE.json",
        help="the tuning file (default: neural_cache.json beside the checkpoint, where the plugin reads it)",
    )
    tune_parser.set_defaults(handler=command_tune)


# Around the best of the PTB medium zoneout LSTM's searches (docs/dynamic_evaluation.md); one
# segment of 100, since shorter ones cost more than 4x the static evaluation (segment 20: 6.4x).
DEFAULT_DYNAMIC_LRS = {"sgd": [0.1, 0.3, 1.0, 2.0], "rms": [1e-4, 2e-4, 3e-4, 5e-4]}
DEFAULT_DYNAMIC_DECAYS = [0.0, 1e-3, 3e-3, 1e-2]
DEFAULT_DYNAMIC_SEGMENTS = [100]


def _add_tune_dynamic_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "tune-dynamic",
        help="grid-search dynamic evaluation's lr, decay and segment on the validation split",
        description="Score a split once per (segment, lr, decay) of a grid with dynamic evaluation "
        "(one stream, chunks of --bptt) and write the best setting beside the checkpoint "
        "(dynamic_eval.json), where `harness eval baselines.dynamic_eval` reads it.",
    )
    _add_dataset_options(parser)
    parser.add_argument("--checkpoint", help=CHECKPOINT_HELP.format(kind="base model"))
    parser.add_argument(
        "--base", choices=BASES, default=ZoneoutLSTM.kind, help="the model adapted (default: zoneout_lstm)"
    )
    parser.add_argument("--method", choices=METHODS, default="sgd", help="the update rule (default: sgd)")
    parser.add_argument(
        "--split",
        choices=("train", "valid"),
        default="valid",
        help="the split tuned on; never test, the exam itself (default: valid)",
    )
    parser.add_argument(
        "--max-tokens", type=positive_int, help="tune on the split's first N tokens (default: all)"
    )
    parser.add_argument(
        "--lrs",
        type=non_negative_float,
        nargs="+",
        help="the grid's learning rates (default: sgd "
        f"{' '.join(map(str, DEFAULT_DYNAMIC_LRS['sgd']))}; "
        f"rms {' '.join(map(str, DEFAULT_DYNAMIC_LRS['rms']))})",
    )
    parser.add_argument(
        "--decays",
        type=non_negative_float,
        nargs="+",
        default=DEFAULT_DYNAMIC_DECAYS,
        help=f"the grid's decays, each at most 1 (default: {' '.join(map(str, DEFAULT_DYNAMIC_DECAYS))})",
    )
    parser.add_argument(
        "--segments",
        type=positive_int,
        nargs="+",
        default=DEFAULT_DYNAMIC_SEGMENTS,
        help=f"the grid's positions per update (default: {' '.join(map(str, DEFAULT_DYNAMIC_SEGMENTS))})",
    )
    parser.add_argument(
        "--cache-window",
        type=non_negative_int,
        default=0,
        help="a neural cache of this window under it (default: 0, none)",
    )
    parser.add_argument("--theta", type=non_negative_float, help="the cache's theta (default: the tuned one)")
    parser.add_argument("--interpolation", type=below_one, help="the cache's lambda (default: the tuned one)")
    parser.add_argument(
        "--rms-tokens",
        type=positive_int,
        default=DEFAULT_RMS_TOKENS,
        help=f"training tokens of the rms statistic (default: {DEFAULT_RMS_TOKENS})",
    )
    parser.add_argument("--bptt", type=positive_int, default=100, help="positions per chunk (default: 100)")
    parser.add_argument("--device", default="auto", help=DEVICE_HELP)
    _add_threads_option(parser)
    parser.add_argument(
        "--output",
        metavar="FILE.json",
        help="the tuning file (default: dynamic_eval.json beside the checkpoint, where the plugin reads it)",
    )
    parser.set_defaults(handler=command_tune_dynamic)


def _add_analyze_parser(commands: Any) -> None:
    inspect = commands.add_parser("analyze", help="per-token pointer gates and attention for a span")
    inspect.add_argument("kind", choices=["pointer_sentinel", "neural_cache"], help="the model analysed")
    _add_dataset_options(inspect)
    inspect.add_argument(
        "--checkpoint", help=CHECKPOINT_HELP.format(kind="model (the zoneout LSTM for the cache)")
    )
    inspect.add_argument("--split", choices=SPLITS, default="valid", help="the split read (default: valid)")
    inspect.add_argument(
        "--span",
        type=_span,
        default=(0, 100),
        help="START:END token positions whose attention is written (default: 0:100)",
    )
    inspect.add_argument(
        "--save-gates",
        metavar="FILE.npy",
        help="save the per-token pointer gates (pointer_sentinel; float32 [N]) (default: not saved)",
    )
    inspect.add_argument(
        "--save-attention", metavar="FILE.json", help="save the span's attention (default: not saved)"
    )
    inspect.add_argument(
        "--window", type=positive_int, help=f"cache size (neural_cache) (default: {DEFAULT_WINDOW})"
    )
    inspect.add_argument(
        "--theta",
        type=non_negative_float,
        help="the cache's theta (neural_cache) (default: the tuned one, from the tuning file)",
    )
    inspect.add_argument(
        "--interpolation",
        type=below_one,
        help="the cache's lambda (neural_cache) (default: the tuned one, from the tuning file)",
    )
    inspect.add_argument("--bptt", type=positive_int, default=100, help="positions per chunk (default: 100)")
    inspect.add_argument("--device", default="auto", help=DEVICE_HELP)
    _add_threads_option(inspect)
    inspect.set_defaults(handler=command_analyze)


def _add_calibrate_parser(commands: Any) -> None:
    calibrate = commands.add_parser(
        "calibrate",
        help="fit the Pointer Sentinel-LSTM's sentinel bias on the training text with dropout off",
        description="Fit one number, a bias added to every sentinel score of a Pointer "
        "Sentinel-LSTM, on a split with dropout off, and write the checkpoint with it (training "
        "sees the pointer through dropout and trusts it less than evaluation should).",
    )
    calibrate.add_argument(
        "checkpoint", type=existing_file, help="a pointer_sentinel checkpoint (a best.pt or a packaged model)"
    )
    _add_dataset_options(calibrate)
    calibrate.add_argument(
        "--output", required=True, metavar="FILE.pt", help="the calibrated checkpoint to write"
    )
    calibrate.add_argument(
        "--split",
        choices=("train", "valid"),
        default="train",
        help="the text fitted on; never test, which would tune the model on its own exam (default: train)",
    )
    calibrate.add_argument(
        "--max-tokens", type=positive_int, help="fit on the split's first N tokens (default: all)"
    )
    calibrate.add_argument(
        "--batch-size", type=positive_int, default=32, help="contiguous streams scored together (default: 32)"
    )
    calibrate.add_argument(
        "--bptt", type=positive_int, default=100, help="positions per chunk (default: 100)"
    )
    calibrate.add_argument("--device", default="auto", help=DEVICE_HELP)
    _add_threads_option(calibrate)
    calibrate.set_defaults(handler=command_calibrate)


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog="python -m baselines",
        description="Train, tune, inspect, calibrate and package the baseline models.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    _add_train_parser(commands)
    _add_tune_parser(commands)
    _add_tune_dynamic_parser(commands)
    _add_analyze_parser(commands)
    _add_calibrate_parser(commands)
    ship = commands.add_parser(
        "package",
        help="ship a trained checkpoint in the package (float16 or int8 weights, listed in "
        "trained/SHA256SUMS)",
    )
    ship.add_argument("checkpoint", type=existing_file, help="a best.pt written by `baselines train`")
    ship.add_argument(
        "--dataset", required=True, help="the benchmark it was trained on (its packaged directory)"
    )
    ship.add_argument(
        "--precision",
        choices=checkpoints.PRECISIONS,
        default="float16",
        help="how the weights are stored: float16, or int8 matrices with a float32 scale per row "
        "(half the size) (default: %(default)s)",
    )
    ship.set_defaults(handler=command_package)
    _add_transfer_parsers(commands)
    return parser


def _piece_bytes(text: str) -> int:
    """``--piece-bytes``: at least :data:`baselines.transfer.MIN_PIECE_BYTES`, not a piece per
    byte."""
    value = positive_int(text)
    if value < MIN_PIECE_BYTES:
        raise argparse.ArgumentTypeError(f"must be at least {MIN_PIECE_BYTES}, got {value}")
    return value


def _add_transfer_parsers(commands: Any) -> None:
    """``pack-run`` and ``unpack-run``: a run directory moved between machines in pieces."""
    pack = commands.add_parser(
        "pack-run",
        help="write a run directory as checksummed pieces of bounded size, to move it to another "
        "machine (e.g. back from a lent accelerator)",
    )
    pack.add_argument("run_dir", type=Path, help="a `baselines train` --output-dir")
    pack.add_argument("destination", type=Path, help="where NAME.manifest.json and NAME.partNN go")
    pack.add_argument("--name", help="the files' prefix (default: the run directory's name)")
    pack.add_argument(
        "--precision",
        choices=PRECISIONS,
        default="float32",
        help="float32: lossless; float16: float32 tensors rounded (relative error < 2**-11), about "
        "half the size (default: %(default)s)",
    )
    pack.add_argument(
        "--piece-bytes",
        type=_piece_bytes,
        default=PIECE_BYTES,
        help=f"the largest piece, at least {MIN_PIECE_BYTES} (default: %(default)s, under 16 MiB)",
    )
    pack.add_argument(
        "--without-best",
        action="store_true",
        help="leave best.pt behind, about half the size when it differs from the checkpoint: for a leg "
        "of training elsewhere, which writes its own only when it beats the best recorded (unpack what "
        "comes back with --best-from RUN_DIR)",
    )
    pack.set_defaults(handler=command_pack_run)
    unpack = commands.add_parser(
        "unpack-run", help="rebuild a run directory from `pack-run`'s pieces, checking each one"
    )
    unpack.add_argument("manifest", type=existing_file, help="NAME.manifest.json (its pieces beside it)")
    unpack.add_argument("run_dir", type=Path, help="the run directory to write (holding no run yet)")
    unpack.add_argument(
        "--best-from",
        type=Path,
        metavar="RUN_DIR",
        help="where a pack made with --without-best was made: its best.pt is taken when the pack "
        "carries none (a leg with no new best), after checking it is the best the run recorded "
        "(default: none; such a run has no best.pt until it beats that best)",
    )
    unpack.set_defaults(handler=command_unpack_run)


def main(argv: list[str] | None = None) -> int:
    """``lm-baselines`` / ``python -m baselines``; returns the exit status."""
    return run(build_parser(), argv)
