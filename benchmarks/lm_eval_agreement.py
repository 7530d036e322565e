"""``--protocol documents`` against lm-evaluation-harness's ``wikitext`` task, figures and time.

One model scores the same WikiText pages both ways: lm-evaluation-harness's own task (its YAML,
detokenizer and metrics, pointed at a local JSON Lines file; installed as a development
dependency: ``pip install -e ".[dev]"``) and ``harness`` under ``--protocol documents`` with the
``hf`` plugin (``segmentation=natural``, windows of the model's length). It prints both sets of
figures, their relative differences and the ratio of the two wall-clock times, measured in this
process.

The inputs differ where the two detokenizers do (lm-evaluation-harness's keeps the space that
starts a page, pairs double quotes across lines and writes `` N `` as `` 1 ``), and the plugin
also scores the newline that ends each page but the last, which lm-evaluation-harness's pages
leave out; ``tests/test_lm_eval_agreement.py`` checks the two agree to 1e-4 where the inputs are
the same. This script shows how far apart they are on real text.

    python benchmarks/lm_eval_agreement.py --data-dir ../shared/data --pages 5   # WikiText-2 test
    python benchmarks/lm_eval_agreement.py --model gpt2 --data-dir DIR           # a hub model
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from harness.documents import is_article_heading
from harness.plugins.hf.detokenize import detokenize_line
from harness.tools import hf_tiny
from harness.tools.lm_eval_wikitext import FIGURES, documents_metrics, lm_eval_pages, wikitext_figures
from wikitext_toolkit_core.cli import positive_int


def first_pages(path: Path, count: int) -> str:
    """The text of ``path`` from its first article heading through ``count`` articles."""
    lines = path.read_text(encoding="utf-8").split("\n")
    headings = [index for index, line in enumerate(lines) if is_article_heading(line)]
    end = headings[count] if count < len(headings) else len(lines) - 1
    return "\n".join(lines[headings[0] : end]) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", required=True, help="a directory holding wikitext-2/wiki.test.tokens")
    parser.add_argument("--pages", type=positive_int, default=5, help="articles scored (default 5)")
    parser.add_argument("--model", help="a model directory or hub name (default: a tiny random GPT-2)")
    parser.add_argument("--max-context", type=positive_int, default=1024)
    args = parser.parse_args()
    for variable in ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        os.environ.setdefault(variable, "1")
    work = Path(tempfile.mkdtemp(prefix="lm_eval_agreement_"))
    os.environ.setdefault("HF_DATASETS_CACHE", str(work / "datasets-cache"))
    text = first_pages(Path(args.data_dir) / "wikitext-2" / "wiki.test.tokens", args.pages)
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
    theirs = wikitext_figures(model, lm_eval_pages(text), work)
    theirs_seconds = time.perf_counter() - began
    print(f"model {model}; {ours['documents']} articles of WikiText-2 test, {ours['bytes']:,} bytes")
    print(f"{'figure':<16} {'harness':>12} {'lm-eval':>12} {'relative difference':>20}")
    for figure in FIGURES:
        difference = (ours[figure] - theirs[figure]) / theirs[figure]
        print(f"{figure:<16} {ours[figure]:>12.4f} {theirs[figure]:>12.4f} {difference:>+20.2e}")
    print(
        f"time: harness {ours_seconds:.1f} s, lm-eval {theirs_seconds:.1f} s "
        f"(ratio harness / lm-eval {ours_seconds / theirs_seconds:.2f}; each includes loading the model)"
    )


if __name__ == "__main__":
    main()
