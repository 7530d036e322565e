"""Speed of the ``hf`` plugin against a bare ``model(input_ids)`` loop over the same windows.

The adapter run is the whole path of an evaluation: ``harness.evaluate`` (batch 1, the audits
off: they are the harness's cost, not the adapter's) -> the plugin's ``score_stream``: detokenize, tokenize,
windows of ``max_context`` by ``stride`` in batches of ``window_batch``, log-softmax, attribution
to the word-level tokens. The bare loop runs the model's forward over the same batches of the
same windows (token ids prepared beforehand) and nothing else. Both run in this process, on the
same model and text; each figure is the best of ``--repeats`` runs.

    python benchmarks/hf_speed.py --data-dir ../shared/data            # WikiText-2 test lines
    python benchmarks/hf_speed.py --model DIR --device cuda --lines 4358
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from harness.datasets import load_dataset
from harness.evaluate import evaluate
from harness.plugins import hf
from harness.plugins.hf.detokenize import detokenize, detokenize_line
from harness.protocol import EvaluationProtocol
from harness.tools import hf_tiny
from wikitext_toolkit_core.cli import positive_int


def bare_loop(model: hf.HFCausalLM, windows: list[torch.Tensor]) -> None:
    """The forward of every batch of windows, nothing else."""
    with torch.inference_mode():
        for inputs in windows:
            model.scorer.network(input_ids=inputs)
    if model.scorer.device.startswith("cuda"):
        torch.cuda.synchronize()


def same_windows(model: hf.HFCausalLM, ids: np.ndarray) -> tuple[list[torch.Tensor], int]:
    """The batches of windows the plugin runs for the stream ``ids``, and its subword count."""
    scorer, max_context = model.scorer, model.scorer.settings.max_context
    subwords, _, _ = model.tokenize(detokenize((model.vocab[i] for i in ids), model.text.detokenizer))
    positions = np.concatenate([[scorer.bos_id], subwords, np.full(max_context, scorer.bos_id)])
    batches = []
    for group in scorer.settings.groups(len(subwords)):
        windows = np.stack([positions[start : start + max_context] for start, _, _ in group])
        batches.append(torch.from_numpy(windows).to(scorer.device))
    return batches, len(subwords)


def best_of(repeats: int, run) -> float:
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        run()
        times.append(time.perf_counter() - began)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", help="directory holding wikitext-2/ (default: the toy text)")
    parser.add_argument("--lines", type=positive_int, default=300, help="lines of WikiText-2 test scored")
    parser.add_argument(
        "--model",
        help="a model directory or hub name (default: build a small "
        "random-weight GPT-2, 4 x 256, 4,000 BPE types)",
    )
    parser.add_argument("--max-context", type=positive_int, default=1024)
    parser.add_argument("--stride", type=positive_int, default=512)
    parser.add_argument("--window-batch", type=positive_int, default=8)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=positive_int, default=3)
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="hf_speed_"))
    source = Path(args.data_dir) / "wikitext-2" / "wiki.test.tokens" if args.data_dir else None
    if source is not None:
        lines = source.read_text(encoding="utf-8").split("\n")[: args.lines]
    else:
        lines = [" the cat sat on the mat , and the dog sat on the log . "] * args.lines
    corpus = work / "corpus"
    corpus.mkdir()
    for split in ("train", "valid", "test"):  # one text: the vocabulary covers it
        (corpus / f"wiki.{split}.tokens").write_text("\n".join(lines) + "\n", encoding="utf-8")
    dataset = load_dataset(str(corpus))
    name = args.model or str(
        hf_tiny.build(
            work / "model",
            [detokenize_line(line, "wikitext") + "\n" for line in lines],
            hf_tiny.TinyModelSpec(
                vocab_size=4000,
                width=256,
                layers=4,
                heads=4,
                positions=args.max_context,
            ),
        )
    )
    loaded = hf.load_model(
        dataset,
        device=args.device,
        checkpoint=None,
        model=name,
        max_context=args.max_context,
        stride=args.stride,
        window_batch=args.window_batch,
    )
    ids = dataset.tokens("test").ids

    def adapter() -> None:
        evaluate(
            loaded,
            ids,
            eos_id=dataset.vocab.eos_id,
            vocab_size=len(dataset.vocab),
            protocol=EvaluationProtocol(audit_positions=0, causality_points=0),
            progress=False,
        )

    windows, subwords = same_windows(loaded, ids)
    bare_loop(loaded, windows[:1])  # warm-up
    adapter_seconds = best_of(args.repeats, adapter)
    bare_seconds = best_of(args.repeats, lambda: bare_loop(loaded, windows))
    print(
        f"model {name} on {args.device}; {len(ids):,} word-level tokens, {subwords:,} subwords, "
        f"{sum(len(w) for w in windows)} windows of {args.max_context} (stride {args.stride}, "
        f"batches of {args.window_batch})"
    )
    print(
        f"adapter:   {adapter_seconds:7.2f} s  {subwords / adapter_seconds:10,.0f} subwords/s "
        f"({len(ids) / adapter_seconds:,.0f} word-level tokens/s)"
    )
    print(f"bare loop: {bare_seconds:7.2f} s  {subwords / bare_seconds:10,.0f} subwords/s")
    print(f"ratio (adapter time / bare time): {adapter_seconds / bare_seconds:.3f}")


if __name__ == "__main__":
    main()
