"""``--protocol documents`` against lm-evaluation-harness's ``wikitext`` task on a whole split.

One model scores every page of WikiText-2 test both ways: lm-evaluation-harness's own task (its
YAML, detokenizer and metrics, pointed at a local JSON Lines file of the split's pages, built as
its ``wikitext_document_level`` builds them; installed as a development dependency: ``pip install
-e ".[dev]"``) and ``harness`` under ``--protocol documents`` with the ``hf`` plugin scoring
pages as lm-evaluation-harness does (``detokenizer=lm-eval,segmentation=natural``, windows of
``--max-context``: :func:`harness.tools.lm_eval_wikitext.documents_metrics`). It prints both sets
of figures, their relative differences (at most 1e-6: float32 arithmetic in different orders)
and the ratio of the two wall-clock times, measured in this process.

    python benchmarks/lm_eval_agreement.py --data-dir ../shared/data   # a tiny random GPT-2
    python benchmarks/lm_eval_agreement.py --data-dir DIR --model gpt2  # a hub model
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from harness.plugins.hf.detokenize import detokenize_line
from harness.tools import hf_tiny
from harness.tools.lm_eval_wikitext import FIGURES, documents_metrics, lm_eval_pages, wikitext_figures
from wikitext_toolkit_core.cli import positive_int


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", required=True, help="a directory holding wikitext-2/wiki.test.tokens")
    parser.add_argument("--model", help="a model directory or hub name (default: a tiny random GPT-2)")
    parser.add_argument("--max-context", type=positive_int, default=1024)
    args = parser.parse_args()
    for variable in ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        os.environ.setdefault(variable, "1")
    work = Path(tempfile.mkdtemp(prefix="lm_eval_agreement_"))
    os.environ.setdefault("HF_DATASETS_CACHE", str(work / "datasets-cache"))
    text = (Path(args.data_dir) / "wikitext-2" / "wiki.test.tokens").read_text(encoding="utf-8")
    model = args.model or str(
        hf_tiny.build(
            work / "model",
            [detokenize_line(line, "wikitext") + "\n" for line in text.split("\n")],
            hf_tiny.TinyModelSpec(
                vocab_size=2000,
                width=128,
                layers=2,
                heads=4,
                positions=args.max_context,
            ),
        )
    )
    began = time.perf_counter()
    ours = documents_metrics(model, text, work / "articles", args.max_context)
    ours_seconds = time.perf_counter() - began
    began = time.perf_counter()
    theirs = wikitext_figures(model, lm_eval_pages(text), work, args.max_context)
    theirs_seconds = time.perf_counter() - began
    print(
        f"model {model}; WikiText-2 test: {ours['pages']} pages, {ours['words']:,} words, "
        f"{ours['bytes']:,} bytes ({ours['variant']} variant)"
    )
    print(f"{'figure':<16} {'harness':>12} {'lm-eval':>12} {'relative difference':>20}")
    for figure in FIGURES:
        difference = (ours[figure] - theirs[figure]) / theirs[figure]
        print(f"{figure:<16} {ours[figure]:>12.6f} {theirs[figure]:>12.6f} {difference:>+20.2e}")
    print(
        f"time: harness {ours_seconds:.1f} s, lm-eval {theirs_seconds:.1f} s "
        f"(ratio harness / lm-eval {ours_seconds / theirs_seconds:.2f}; each includes loading the model)"
    )


if __name__ == "__main__":
    main()
