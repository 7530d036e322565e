"""Fidelity of the builder's rendering to WikiText-2, beside a naive pipeline run on the same pairs.

The 60 pairs of ``wikipedia/wt2_pairs`` (listed in ``PAIRS.tsv``) hold an article's wikitext
(``NAME.wikitext``) and the same article as it appears in WikiText-2 (``NAME.wt2.tokens``).
Each pipeline renders the wikitext; its tokens are mapped to ``<unk>`` with the WikiText-2
train vocabulary and compared with the reference:

* token ratio: ``difflib.SequenceMatcher(autojunk=False).ratio()`` of the two sequences of
  whitespace tokens (mean, median and min over the pairs);
* headings: the share of the reference's section headings (the `` = = ... = = `` lines,
  level >= 2) that the output has as a heading line of the same level and text (matched as
  multisets);
* markup leaking through: occurrences of ``{{ }} [[ ]] | <ref '''`` in the output (before the
  ``<unk>`` mapping) per 1,000 output tokens.

Pipelines: "ours" is ``wikitext_builder.render.render_article``; "naive" is mwparserfromhell's
``strip_code()`` of the whole page with every remaining line tokenized the same way (Moses plus
WikiText's number splitting, ``wikitext_builder.tokenize.tokenize_text``) under the same title
line; ``strip_code()`` keeps a heading's text but not its ``==`` markup.
The pairs' wikitext is not necessarily the revision WikiText-2 was built from in 2016, so
neither pipeline can reach 1.0.

``--drift-robust`` scores the builder with the drift-discounting instrument instead,
``SHARED/tools/fidelity2.py`` (its docstring defines sentence recall and precision,
headings, line recall and markup residue over the reference material a perfect renderer of
the stored revision could reproduce), rendering each pair with
``python -m wikitext_builder render``; ``--json OUT`` keeps its per-article detail.
``--pairs`` picks the pairs in ``PAIRS.tsv`` order: ``held-out`` is every 4th pair (the 4th,
8th, ...), kept apart from renderer development; ``development`` is the rest.

    python benchmarks/builder_fidelity.py [--shared-dir ../shared] [--data-dir ../shared/data]
        [--pairs all|development|held-out] [--per-article] [--drift-robust [--json OUT]]

``--shared-dir`` defaults to ``$WIKITEXT_SHARED_DIR``, else ``../shared`` beside the checkout;
``--data-dir`` (holding ``wikitext-2/wiki.train.tokens``) to ``$HARNESS_DATA_DIR``, else
``../shared/data``.
"""

from __future__ import annotations

import argparse
import difflib
import os
import shlex
import statistics
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import mwparserfromhell

from wikitext_builder.render import MarkupError, render_article
from wikitext_builder.tokenize import format_heading, format_paragraph, tokenize_text

REPO = Path(__file__).resolve().parent.parent
MARKUP = ("{{", "}}", "[[", "]]", "|", "<ref", "'''")


def naive_article(title: str, wikitext: str) -> str:
    """The naive pipeline: ``strip_code()`` of the page, one paragraph line per non-empty line."""
    lines = [" \n", format_heading(tokenize_text(title), 1), " \n"]
    for text in mwparserfromhell.parse(wikitext).strip_code().split("\n"):
        tokens = tokenize_text(text)
        if tokens:
            lines.append(format_paragraph(tokens))
    lines.append(" \n")
    return "".join(lines)


def in_vocabulary(tokens: list[str], vocabulary: set[str]) -> list[str]:
    return [token if token in vocabulary else "<unk>" for token in tokens]


def section_headings(text: str, vocabulary: set[str]) -> Counter[str]:
    """The heading lines of level >= 2 (`` = = T = = ``), ``<unk>``-mapped, as token strings."""
    return Counter(
        " ".join(in_vocabulary(line.split(), vocabulary))
        for line in text.split("\n")
        if line.startswith(" = = ")
    )


@dataclass
class Scores:
    """One pipeline's figures, accumulated over the pairs."""

    ratios: dict[str, float] = field(default_factory=dict)
    headings_found: int = 0
    headings_total: int = 0
    markup: Counter[str] = field(default_factory=Counter)
    tokens: int = 0
    failures: dict[str, str] = field(default_factory=dict)

    def add(self, name: str, output: str, reference: str, vocabulary: set[str]) -> None:
        tokens = in_vocabulary(output.split(), vocabulary)
        self.ratios[name] = difflib.SequenceMatcher(None, tokens, reference.split(), autojunk=False).ratio()
        expected, found = section_headings(reference, vocabulary), section_headings(output, vocabulary)
        self.headings_found += sum((expected & found).values())
        self.headings_total += sum(expected.values())
        self.markup.update({marker: output.count(marker) for marker in MARKUP})
        self.tokens += len(tokens)

    def fail(self, name: str, reference: str, vocabulary: set[str], reason: str) -> None:
        """A page the pipeline cannot render: ratio 0, none of its headings reproduced."""
        self.ratios[name] = 0.0
        self.headings_total += sum(section_headings(reference, vocabulary).values())
        self.failures[name] = reason

    def per_thousand(self, markers: tuple[str, ...] = MARKUP) -> float:
        return 1000 * sum(self.markup[marker] for marker in markers) / max(self.tokens, 1)


def read_pairs(pairs_dir: Path) -> list[tuple[str, str]]:
    """``(name, title)`` of every pair in ``PAIRS.tsv``; both files of each must exist."""
    table = pairs_dir / "PAIRS.tsv"
    rows = [line.split("\t") for line in table.read_text(encoding="utf-8").splitlines() if line]
    header = rows.pop(0) if rows else []
    if "name" not in header or "title" not in header:
        raise ValueError(f"{table}: no 'name' and 'title' columns in the header")
    name_column, title_column = header.index("name"), header.index("title")
    pairs = [(row[name_column], row[title_column]) for row in rows]
    for name, _ in pairs:
        for suffix in (".wikitext", ".wt2.tokens"):
            if not (pairs_dir / f"{name}{suffix}").is_file():
                raise FileNotFoundError(f"{pairs_dir / (name + suffix)}: listed in PAIRS.tsv but missing")
    return pairs


def select_pairs(pairs: list[tuple[str, str]], which: str) -> list[tuple[str, str]]:
    """The ``all``, ``held-out`` (every 4th, from the 4th) or ``development`` (the rest) pairs."""
    if which == "all":
        return pairs
    return [pair for i, pair in enumerate(pairs) if (i % 4 == 3) == (which == "held-out")]


def drift_robust(
    instrument: Path, pairs_dir: Path, train: Path, pairs: list[tuple[str, str]], json_out: Path | None
) -> int:
    """Run the drift-discounting instrument on ``pairs``, rendering each with this
    interpreter's ``python -m wikitext_builder render``; its report goes to stdout."""
    render = f'{shlex.quote(sys.executable)} -m wikitext_builder render --title "$2" "$1"'
    command = [sys.executable, str(instrument), str(pairs_dir), str(train), "--show", "0"]
    for name, _ in pairs:
        command += ["--only", name]
    if json_out is not None:
        command += ["--json", str(json_out)]
    command += ["--", "sh", "-c", render, "render"]
    return subprocess.run(command, cwd=REPO, check=False).returncode


def measure(
    pairs_dir: Path,
    pairs: list[tuple[str, str]],
    vocabulary: set[str],
    pipelines: dict[str, Callable[[str, str], str]],
) -> dict[str, Scores]:
    scores = {label: Scores() for label in pipelines}
    for name, title in pairs:
        wikitext = (pairs_dir / f"{name}.wikitext").read_text(encoding="utf-8")
        reference = (pairs_dir / f"{name}.wt2.tokens").read_text(encoding="utf-8")
        for label, pipeline in pipelines.items():
            try:
                output = pipeline(title, wikitext)
            except MarkupError as error:
                scores[label].fail(name, reference, vocabulary, str(error))
            else:
                scores[label].add(name, output, reference, vocabulary)
    return scores


def report(scores: dict[str, Scores], pairs: int, vocabulary: int, per_article: bool) -> None:
    labels = list(scores)
    width = 14

    def row(caption: str, values: list[str]) -> None:
        print(f"{caption:<36}" + "".join(f"{value:>{width}}" for value in values))

    first = scores[labels[0]]
    print(
        f"WikiText-2 fidelity over {pairs} article pairs; <unk> mapping with the {vocabulary:,} "
        f"types of WikiText-2 train; {first.headings_total} reference section headings"
    )
    row("", labels)
    ratios = {label: list(scores[label].ratios.values()) for label in labels}
    row("token ratio, mean", [f"{statistics.mean(ratios[label]):.3f}" for label in labels])
    row("token ratio, median", [f"{statistics.median(ratios[label]):.3f}" for label in labels])
    row("token ratio, min", [f"{min(ratios[label]):.3f}" for label in labels])
    row(
        "headings reproduced",
        [f"{scores[label].headings_found / max(scores[label].headings_total, 1):.3f}" for label in labels],
    )
    row("markup per 1,000 tokens", [f"{scores[label].per_thousand():.2f}" for label in labels])
    for marker in MARKUP:
        row(f"  {marker}", [f"{scores[label].per_thousand((marker,)):.2f}" for label in labels])
    row("output tokens", [f"{scores[label].tokens:,}" for label in labels])
    for label in labels:
        for name, reason in scores[label].failures.items():
            print(f"{label}: {name}: not rendered ({reason})")
    if per_article:
        print()
        row("token ratio per article", labels)
        for name in first.ratios:
            row(f"  {name[:34]}", [f"{scores[label].ratios[name]:.3f}" for label in labels])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    shared, data = REPO.parent / "shared", REPO.parent / "shared" / "data"
    parser.add_argument(
        "--shared-dir",
        type=Path,
        default=Path(os.environ.get("WIKITEXT_SHARED_DIR") or shared),
        help=f"holds wikipedia/wt2_pairs/ (default: $WIKITEXT_SHARED_DIR, else {shared})",
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=Path(os.environ.get("HARNESS_DATA_DIR") or data),
        help=f"holds wikitext-2/wiki.train.tokens (default: $HARNESS_DATA_DIR, else {data})",
    )
    parser.add_argument(
        "--pairs",
        choices=("all", "development", "held-out"),
        default="all",
        help="held-out: every 4th pair of PAIRS.tsv; development: the rest (default: all)",
    )
    parser.add_argument("--per-article", action="store_true", help="also print every pair's token ratio")
    parser.add_argument(
        "--drift-robust",
        action="store_true",
        help="score with SHARED/tools/fidelity2.py (drift discounted) instead",
    )
    parser.add_argument("--json", type=Path, help="with --drift-robust: write the per-article detail here")
    args = parser.parse_args(argv)
    if args.json is not None and not args.drift_robust:
        parser.error("--json needs --drift-robust")

    pairs_dir = args.shared_dir / "wikipedia" / "wt2_pairs"
    train = args.data_dir / "wikitext-2" / "wiki.train.tokens"
    if not (pairs_dir / "PAIRS.tsv").is_file():
        print(
            f"error: {pairs_dir / 'PAIRS.tsv'} not found (pass --shared-dir or set WIKITEXT_SHARED_DIR)",
            file=sys.stderr,
        )
        return 2
    if not train.is_file():
        print(f"error: {train} not found (pass --data-dir or set HARNESS_DATA_DIR)", file=sys.stderr)
        return 2
    try:
        pairs = select_pairs(read_pairs(pairs_dir), args.pairs)
    except (FileNotFoundError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.drift_robust:
        instrument = args.shared_dir / "tools" / "fidelity2.py"
        if not instrument.is_file():
            print(
                f"error: {instrument} not found (pass --shared-dir or set WIKITEXT_SHARED_DIR)",
                file=sys.stderr,
            )
            return 2
        return drift_robust(instrument, pairs_dir, train, pairs, args.json)
    vocabulary = set(train.read_text(encoding="utf-8").split())
    scores = measure(pairs_dir, pairs, vocabulary, {"ours": render_article, "naive": naive_article})
    report(scores, len(pairs), len(vocabulary), args.per_article)
    return 0


if __name__ == "__main__":
    sys.exit(main())
