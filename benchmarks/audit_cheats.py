"""Which cheats of issue 73 get past the audits, as a Markdown table.

Each plugin of ``tests/cheats`` (the honest bigram they cheat from, then each cheat) scores a
split under the default protocol and audits through ``harness.api.evaluate_model``, with a fresh
causality audit seed each time. A row gives how the cheat picks its moment (the first paragraph
of its module's docstring), its perplexity when it passed both audits ("-" when not) and the
outcome: passed, or the first words of the failing check's message.

    python benchmarks/audit_cheats.py                                   # PTB test, batch 1
    python benchmarks/audit_cheats.py --split valid --batch-size 10     # quicker
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

from harness.api import evaluate_model
from harness.datasets import Dataset, load_dataset
from harness.plugin import PluginError
from harness.protocol import DEFAULT_PROTOCOL
from wikitext_toolkit_core.cli import positive_int

#: The repository, under which the cheats are the package ``tests.cheats``.
REPO = Path(__file__).resolve().parent.parent
#: Words of a failing check's message shown.
OUTCOME_WORDS = 12


def moment(plugin: str) -> str:
    """How a cheat picks its moment: its module docstring's first paragraph, on one line."""
    text = importlib.import_module(plugin).__doc__ or ""
    return " ".join(text.split("\n\n")[0].split())


def outcome(error: PluginError) -> str:
    """The first words of a failed audit's message, after the plugin's name and split."""
    words = str(error).partition(": ")[2].split()
    return " ".join(words[:OUTCOME_WORDS]) + (" ..." if len(words) > OUTCOME_WORDS else "")


def row(plugin: str, dataset: Dataset, split: str, batch_size: int) -> str:
    """The table's row for ``plugin`` scored on ``split`` of ``dataset``."""
    try:
        (result,) = evaluate_model(plugin, dataset, splits=split, batch_size=batch_size, progress=False)
        perplexity, audits = f"{result.perplexity:.2f}", "passed"
    except PluginError as error:
        perplexity, audits = "-", outcome(error)
    return f"| {plugin.rpartition('.')[2]} | {moment(plugin)} | {perplexity} | {audits} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", help="directory holding the benchmark (default: the usual search)")
    parser.add_argument("--dataset", default="ptb")
    parser.add_argument("--split", default="test")
    parser.add_argument("--batch-size", type=positive_int, default=DEFAULT_PROTOCOL.batch_size)
    parser.add_argument("--cheats", nargs="+", help="the cheats to score (default: all, by module name)")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    cheats = importlib.import_module("tests.cheats")
    dataset = load_dataset(args.dataset, args.data_dir, download=False)
    print(
        f"{args.dataset}/{args.split}: {len(dataset.tokens(args.split).ids):,} tokens, batch "
        f"{args.batch_size}, bptt {DEFAULT_PROTOCOL.bptt}, default audits\n"
    )
    print(f"| cheat | how the cheat picks its moment | {args.dataset} {args.split} | both audits |")
    print("|---|---|---:|---|")
    for name in (cheats.HONEST, *(args.cheats or cheats.CHEATS)):
        print(row(f"tests.cheats.{name}", dataset, args.split, args.batch_size), flush=True)


if __name__ == "__main__":
    main()
