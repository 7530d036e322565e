"""Measure the WikiText format on real files: the figures of ``docs/wikitext-format.md``.

    python docs/measure_format.py ../shared/data/wikitext-2

Reads ``wiki.{train,valid,test}.tokens`` of the directory (plain Python, nothing imported from
the toolkit) and prints one JSON object: per split, the line forms (blank, heading by level,
paragraph), the whitespace rules, the article layout, the token counts under the papers'
convention (tokens plus one ``<eos>`` per line), the ``@-@`` ``@,@`` ``@.@`` splits and ``<unk>``;
and the vocabulary built from train.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path

SPLITS = ("train", "valid", "test")
BLANK = " \n"
#: ``" " + "= " * n + title + " =" * n + " \n"`` with the same ``n`` on both sides.
HEADING = re.compile(r"^ ((?:= )+)(.+?)((?: =)+) \n$")
#: A digit, a comma or period, a digit, inside one token: a number the tokenizer did not split.
UNSPLIT_NUMBER = re.compile(r"\d[,.]\d")
#: An ASCII hyphen between two letters or digits inside one token: a hyphen left unsplit.
UNSPLIT_HYPHEN = re.compile(r"[^\W_]-[^\W_]")
#: Single tokens whose counts show the tokenizer's conventions.
MARKERS = (
    "@-@",
    "@,@",
    "@.@",
    "-",
    "–",
    "—",
    '"',
    "'s",
    "n't",
    "'t",
    "&quot;",
    "&amp;",
    "&apos;",
    "<formula>",
)


def heading_level(line: str) -> int:
    """``n`` for a heading line of level ``n`` (1: an article title), else 0."""
    match = HEADING.match(line)
    if not match or len(match.group(1)) != len(match.group(3)) or match.group(2).startswith("= "):
        return 0
    return len(match.group(1)) // 2


def kind_of(line: str) -> str:
    if line == BLANK:
        return "blank"
    return f"heading{heading_level(line)}" if heading_level(line) else "paragraph"


def measure_split(path: Path) -> tuple[dict, Counter]:
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    kinds = [kind_of(line) for line in lines]

    def framed(index: int) -> bool:
        """Whether line ``index`` has a blank line on each side."""
        return 0 < index < len(kinds) - 1 and kinds[index - 1] == kinds[index + 1] == "blank"

    shaped = [index for index, kind in enumerate(kinds) if kind.startswith("heading")]
    # A heading is a heading-shaped line between two blank lines; the others are paragraph text
    # that happens to read " = x = " (table legends such as "G = Goals ; A = ...").
    headings = [index for index in shaped if framed(index)]
    for index in set(shaped) - set(headings):
        kinds[index] = "paragraph"
    titles = [index for index in headings if kinds[index] == "heading1"]
    # What precedes each article title: how many blank lines, after what kind of line.
    before_title = Counter()
    for index in titles:
        run = 0
        while index - run - 1 >= 0 and kinds[index - run - 1] == "blank":
            run += 1
        previous = kinds[index - run - 1] if index - run > 0 else "file start"
        before_title[f"{run} after {previous}"] += 1
    # A heading whose section is empty: the next non-blank line is another heading of the same
    # or a higher level (the next article's title included), or the end of the file.
    empty_sections = 0
    for index in headings:
        following = next((j for j in range(index + 1, len(kinds)) if kinds[j] != "blank"), None)
        if following is None or following in headings and int(kinds[following][7:]) <= int(kinds[index][7:]):
            empty_sections += 1
    tokens: Counter = Counter()
    heading_tokens: Counter = Counter()
    for line, kind in zip(lines, kinds):
        words = line.split()
        tokens.update(words)
        if kind.startswith("heading"):
            heading_tokens.update(words[heading_level(line) : len(words) - heading_level(line)])
    pairs = Counter(zip(kinds, kinds[1:]))
    blank_between_paragraphs = sum(
        1 for a, b, c in zip(kinds, kinds[1:], kinds[2:]) if (a, b, c) == ("paragraph", "blank", "paragraph")
    )

    word_count = sum(tokens.values())
    return (
        {
            "bytes": len(text.encode("utf-8")),
            "lines": len(lines),
            "line_kinds": dict(sorted(Counter(kinds).items())),  # headings: framed ones only
            "whitespace": {
                "lines_not_starting_with_space": sum(not line.startswith(" ") for line in lines),
                "lines_not_ending_with_space_newline": sum(not line.endswith(" \n") for line in lines),
                "lines_with_two_spaces_in_a_row": sum("  " in line for line in lines),
                "empty_lines": sum(line == "\n" for line in lines),
                "tabs": text.count("\t"),
                "carriage_returns": text.count("\r"),
                "file_starts_with_blank_line": lines[0] == BLANK,
            },
            "heading_shaped_lines": len(shaped),
            "heading_shaped_paragraph_lines": len(shaped) - len(headings),
            "articles": len(titles),
            "blank_lines_before_article_titles": dict(sorted(before_title.items())),
            "headings_with_an_empty_section": empty_sections,
            "last_two_lines": kinds[-2:],
            "paragraph_followed_by_paragraph": pairs[("paragraph", "paragraph")],
            "paragraph_blank_paragraph": blank_between_paragraphs,
            "tokens": word_count,
            "tokens_with_eos": word_count + len(lines),
            "unk": tokens["<unk>"],
            "unk_rate_with_eos": round(tokens["<unk>"] / (word_count + len(lines)), 5),
            "unk_in_headings": heading_tokens["<unk>"],
            "markers": {marker: tokens[marker] for marker in MARKERS},
            "unsplit_numbers": sum(count for token, count in tokens.items() if UNSPLIT_NUMBER.search(token)),
            "unsplit_hyphens": sum(count for token, count in tokens.items() if UNSPLIT_HYPHEN.search(token)),
            "types": len(tokens),
        },
        tokens,
    )


def measure(directory: Path) -> dict:
    report, counts = {}, {}
    for split in SPLITS:
        report[split], counts[split] = measure_split(directory / f"wiki.{split}.tokens")
    train = counts["train"]
    rare = Counter(count for token, count in train.items() if token != "<unk>" and count < 5)
    report["vocabulary"] = {
        "train_types": len(train),
        "with_eos": len(train) + ("<eos>" not in train),
        "smallest_train_count_of_a_kept_type": min(
            count for token, count in train.items() if token != "<unk>"
        ),
        "train_types_by_count_below_5": dict(sorted(rare.items())),
        "valid_test_types_not_in_train": sum(
            1 for split in ("valid", "test") for token in counts[split] if token not in train
        ),
    }
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path, help="holds wiki.{train,valid,test}.tokens")
    args = parser.parse_args(argv)
    json.dump(measure(args.directory), sys.stdout, indent=1, ensure_ascii=False)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
