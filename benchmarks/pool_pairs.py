"""Pairs unseen by the renderer's development: pool articles that are also WikiText-2 articles.

The 1,500-article pool (``wikipedia/pool/ga_fa_pool.jsonl.gz``) was never compared with
WikiText-2. An article of the pool is paired with a WikiText-2 article (train, valid or test)
when one of the first three bold phrases of its lead, or its ``title_guess``, is that
article's title without a trailing parenthetical, compared as lower-case letters and digits
("Gerard" matches "Gerard ( archbishop of York )"). Pairs whose title is among the 60 of
``wikipedia/wt2_pairs`` are left out. Writes, in ``OUT``, what ``tools/fidelity2.py`` reads:
``PAIRS.tsv``, and per pair ``NAME.wikitext`` (the pool's revision) and ``NAME.wt2.tokens``
(the article as WikiText-2 has it, from the blank line before its title to the blank line
before the next article's title). Then score them with the instrument:

    python benchmarks/pool_pairs.py /tmp/pool-pairs
    python ../shared/tools/fidelity2.py /tmp/pool-pairs ../shared/data/wikitext-2/wiki.train.tokens \\
        -- sh -c 'python -m wikitext_builder render --title "$2" "$1"' x

``--shared-dir`` defaults to ``$WIKITEXT_SHARED_DIR``, else ``../shared`` beside the checkout.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import os
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TITLE_LINE = re.compile(r"^ = ([^=].*[^=]) = $")
SPLITS = ("train", "valid", "test")


def title_key(text: str) -> str:
    """A title compared loosely: without a trailing parenthetical, letters and digits only."""
    text = re.sub(r"\s*\([^()]*\)\s*$", "", text.replace(" @-@ ", "-"))
    return re.sub(r"[^0-9a-z]", "", text.lower())


def untokenized(title: str) -> str:
    """A WikiText-2 title as a page title, for the renderer's ``--title`` (the common joins:
    ``@-@``, ``@,@``, ``@.@``, brackets, commas, colons and possessives)."""
    for tokenized, plain in ((" @-@ ", "-"), (" @,@ ", ","), (" @.@ ", "."), ("( ", "("), (" )", ")")):
        title = title.replace(tokenized, plain)
    return re.sub(r" ([,:]|'s\b)", r"\1", title)


def wikitext2_articles(data_dir: Path) -> dict[str, tuple[str, str, list[str]]]:
    """title key -> (split, title as tokenized, the article's lines)."""
    articles: dict[str, tuple[str, str, list[str]]] = {}
    for split in SPLITS:
        lines = (data_dir / f"wiki.{split}.tokens").read_text(encoding="utf-8").split("\n")
        starts = [i for i, line in enumerate(lines) if TITLE_LINE.match(line)] + [len(lines) + 1]
        for start, end in zip(starts, starts[1:]):
            title = TITLE_LINE.match(lines[start]).group(1)  # type: ignore[union-attr]
            articles.setdefault(title_key(title), (split, title, lines[start - 1 : end - 1]))
    return articles


def lead_titles(wikitext: str, title_guess: str) -> set[str]:
    """The keys an article of the pool may be known by: its first bold phrases and its guess."""
    bold = re.findall(r"'''(.+?)'''", wikitext[:6000])[:3]
    unlinked = [re.sub(r"\[\[(?:[^|\]]*\|)?([^\]]*)\]\]", r"\1", phrase) for phrase in bold]
    return {key for key in map(title_key, [*unlinked, title_guess]) if len(key) > 3}


def main() -> int:
    shared = REPO.parent / "shared"
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="directory to write the pairs to")
    parser.add_argument(
        "--shared-dir",
        type=Path,
        default=Path(os.environ.get("WIKITEXT_SHARED_DIR") or shared),
        help=f"holds wikipedia/ and data/ (default: $WIKITEXT_SHARED_DIR, else {shared})",
    )
    args = parser.parse_args()
    pool = args.shared_dir / "wikipedia" / "pool" / "ga_fa_pool.jsonl.gz"
    if not pool.is_file():
        print(f"error: {pool} not found (pass --shared-dir or set WIKITEXT_SHARED_DIR)", file=sys.stderr)
        return 2
    articles = wikitext2_articles(args.shared_dir / "data" / "wikitext-2")
    with open(args.shared_dir / "wikipedia" / "wt2_pairs" / "PAIRS.tsv", encoding="utf-8") as handle:
        known = {title_key(row["title"]) for row in csv.DictReader(handle, delimiter="\t")}
    args.out.mkdir(parents=True, exist_ok=True)
    rows: list[tuple[str, str, str, str, int, int]] = []
    with gzip.open(pool, "rt", encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            for key in sorted(lead_titles(record["wikitext"], record.get("title_guess") or "") - known):
                if key not in articles or any(row[0] == key for row in rows):
                    continue
                split, title, reference = articles[key]
                name = re.sub(r"[^0-9A-Za-z]+", "_", title).strip("_")
                (args.out / f"{name}.wikitext").write_text(record["wikitext"], encoding="utf-8")
                (args.out / f"{name}.wt2.tokens").write_text("\n".join(reference) + "\n", encoding="utf-8")
                rows.append((key, name, title, split, record["source_index"], len(reference)))
    with open(args.out / "PAIRS.tsv", "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, delimiter="\t", lineterminator="\n")
        writer.writerow(["name", "title", "wt2_split", "wt2_heading", "source", "wt2_lines"])
        for _, name, title, split, index, count in rows:
            writer.writerow([name, untokenized(title), split, f"= {title} =", f"pool #{index}", count])
    print(f"{len(rows)} pairs written to {args.out}: " + ", ".join(f"{r[2]} ({r[3]})" for r in rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
