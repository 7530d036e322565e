"""Inventory of the ``{{convert}}`` unit codes a JSON-lines pool uses, against the renderer's table.

Every ``{{convert}}`` / ``{{cvt}}`` / ``{{convert/2}}`` of every article (nested ones included)
is split into its input and output unit codes the way ``wikitext_builder.render.convert``
reads it (values and range words, composite input ``5|ft|6|in``, output code, precision).
Prints each code with its count as input and as output, and the codes the renderer's unit
table (``convert.UNITS``) does not know: for those the renderer keeps the input and drops
the conversion. With ``--examples`` each unknown code's first template is rendered with
``render_article`` beside its markup, to check that.

    python benchmarks/convert_units.py [--pool ../shared/wikipedia/pool/ga_fa_pool.jsonl.gz]
        [--examples] [--json OUT]

``--pool`` defaults to ``$WIKITEXT_SHARED_DIR/wikipedia/pool/ga_fa_pool.jsonl.gz``, else
``../shared`` beside the checkout.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
from collections import Counter
from pathlib import Path

import mwparserfromhell

from wikitext_builder.render import render_article
from wikitext_builder.render.convert import (
    MULTIPLES,
    _composite,
    _output_codes,
    _output_settings,
    _split_values,
    lookup,
    parse_number,
)
from wikitext_builder.render.template_api import template_key

REPO = Path(__file__).resolve().parent.parent
NAMES = {"convert", "cvt", "convert/2"}


def default_pool() -> Path:
    shared = Path(os.environ.get("WIKITEXT_SHARED_DIR") or REPO.parent / "shared")
    return shared / "wikipedia" / "pool" / "ga_fa_pool.jsonl.gz"


def positional(tpl: mwparserfromhell.nodes.Template) -> list[str]:
    """The positional parameters' raw text, whitespace collapsed (markup left as it is)."""
    return [re.sub(r"\s+", " ", str(p.value)).strip() for p in tpl.params if not p.showkey]


def codes(pos: list[str]) -> tuple[str, list[str]]:
    """The input unit code and the output unit codes (each part of ``km mi``, ``m+ft``;
    an unknown multiple code as it is written) of one template's positional parameters."""
    raw, _, i = _split_values(pos)
    code = pos[i] if i < len(pos) else ""
    first, source = parse_number(raw[0]), lookup(code)
    rest = pos[i + 1 :]
    if first is not None and source is not None:
        rest = _composite(first, source, rest)[1]
    out_code = _output_settings(rest, False)[0]
    if not out_code:
        return code, []
    parts = _output_codes(out_code)
    return code, parts or [re.sub(r"[_ ]+", " ", out_code).strip()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pool", type=Path, default=default_pool(), help="JSON-lines pool (.gz or not)")
    parser.add_argument("--examples", action="store_true", help="render one template per unknown code")
    parser.add_argument("--json", type=Path, help="write the counts here")
    args = parser.parse_args()

    inputs: Counter[str] = Counter()
    outputs: Counter[str] = Counter()
    example: dict[str, str] = {}
    templates = articles = 0
    with (gzip.open if args.pool.suffix == ".gz" else open)(args.pool, "rt", encoding="utf-8") as f:
        for line in f:
            wikitext = json.loads(line)["wikitext"]
            articles += 1
            if "onvert" not in wikitext and "cvt" not in wikitext.lower():
                continue
            for tpl in mwparserfromhell.parse(wikitext).filter_templates(recursive=True):
                if template_key(str(tpl.name)) not in NAMES:
                    continue
                pos = positional(tpl)
                if not pos:
                    continue
                templates += 1
                code, outs = codes(pos)
                inputs[code] += 1
                outputs.update(outs)
                for unit in [code, *outs]:
                    if lookup(unit) is None and unit not in MULTIPLES:
                        example.setdefault(unit, str(tpl))

    def known(code: str) -> bool:
        return lookup(code) is not None or code in MULTIPLES

    print(f"{articles} articles, {templates} convert templates")
    print(f"{len(inputs)} input codes, {len(outputs)} output codes")
    print("\ncode\tas input\tas output\tknown")
    for code in sorted(set(inputs) | set(outputs), key=lambda c: -(inputs[c] + outputs[c])):
        print(f"{code!r}\t{inputs[code]}\t{outputs[code]}\t{'yes' if known(code) else 'NO'}")
    unknown = {c: inputs[c] + outputs[c] for c in set(inputs) | set(outputs) if not known(c)}
    print(
        f"\nunknown: {len(unknown)} codes, {sum(unknown.values())} uses "
        f"({sum(inputs[c] for c in unknown)} as input, {sum(outputs[c] for c in unknown)} as output)"
    )
    if args.examples:
        for code in sorted(unknown, key=lambda c: -unknown[c]):
            lines = render_article("T", f"x {example[code]} y").split("\n")[3:-2]
            print(f"{code!r}: {example[code]}  ->  {' | '.join(line.strip() for line in lines)}")
    if args.json:
        data = {"inputs": dict(inputs), "outputs": dict(outputs), "unknown": sorted(unknown)}
        args.json.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
