"""Issue 26's rule, "no numeric value may ever be wrong", on real articles: every {{convert}}
and {{cvt}} of the shared 1,500-article pool is rendered, and each number shown as a conversion
must be the shown input converted, to within half the output's last shown digit (of a whole
number, its last digit before trailing zeros, which may be rounding: 1,500 is 1,450 to 1,550).

The check reads the rendered text only ("2 to 5 kilometres ( 1 @.@ 2 to 3 @.@ 1 mi )"): the
units by their names and symbols, the scales from the unit table (which
``test_every_unit_has_the_size_its_definition_gives`` checks against the units' definitions),
temperatures through their own offsets. What it cannot read unambiguously (``abbr=values``,
temperature changes, a unit's name it does not know) is counted, and must stay rare.
"""

from __future__ import annotations

import gzip
import json
import os
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import REPO

from wikitext_builder.render import render_article
from wikitext_builder.render.convert import UNITS, Unit, american

POOL = (
    Path(os.environ.get("WIKITEXT_SHARED_DIR") or REPO.parent / "shared")
    / "wikipedia/pool/ga_fa_pool.jsonl.gz"
)

_TEMPLATE_START = re.compile(r"\{\{\s*(?:[Cc]onvert|[Cc]vt)\s*\|")
# a number as rendered and detokenized: "−1,499.5", ".75"; a hyphen before it is adjectival
_NUMBER = re.compile(r"(?<![\w-])−?(?:\d[\d,]*(?:\.\d+)?|\.\d+)|(?<=-)(?:\d[\d,]*(?:\.\d+)?|\.\d+)")
_RANGE_WORD = re.compile(r"^(?:to|and|or|by|×|–|±|&)(?=[\s-]|$)-?|\s*(?:×|–|to|and)$")
_KELVIN = {"°C": (1.0, 273.15), "°F": (5 / 9, 459.67 * 5 / 9), "K": (1.0, 0.0)}  # scale, offset


def convert_templates(wikitext: str) -> Iterator[str]:
    """Each ``{{convert|...}}`` of ``wikitext``, nested templates included in its text."""
    for start in _TEMPLATE_START.finditer(wikitext):
        depth, i = 0, start.start()
        while i < len(wikitext) - 1:
            pair = wikitext[i : i + 2]
            depth += (pair == "{{") - (pair == "}}")
            i += 2 if pair in ("{{", "}}") else 1
            if depth == 0:
                break
        yield wikitext[start.start() : i]


def unit_names() -> dict[str, Unit]:
    """Every name and symbol a unit is shown with (British, US and adjectival forms)."""
    names: dict[str, Unit] = {}
    for unit in UNITS.values():
        shown = {unit.symbol, unit.singular, unit.plural, unit.symbol_us, unit.singular_us}
        shown |= {american(unit.singular), american(unit.plural), unit.singular_us + "s"}
        for name in shown - {"", "s"}:
            names.setdefault(name, unit)
            names.setdefault(name.replace(" ", "-"), unit)
    return names


def read_side(text: str, names: dict[str, Unit]) -> list[tuple[str, Unit]] | None:
    """The numbers of one side with their units: ``2 to 5 km`` -> [("2", km), ("5", km)],
    ``6 ft 1 in`` -> [("6", ft), ("1", in)]; None when a unit is not read."""
    found = list(_NUMBER.finditer(text))
    items = []
    for number, after in zip(found, [*found[1:], None]):
        unit_text = text[number.end() : after.start() if after else len(text)].strip(" -")
        unit_text = _RANGE_WORD.sub("", unit_text).strip(" -")
        if unit_text not in names and unit_text.rsplit("-", 1)[0] in names:
            unit_text = unit_text.rsplit("-", 1)[0]  # adj=mid's text after the unit: "foot-long"
        items.append((number.group(), unit_text))
    quantities, unit = [], None
    for number, unit_text in reversed(items):  # "2 to 5 km": a range's unit follows its last number
        if unit_text:
            unit = names.get(unit_text)
        if unit is None:
            return None
        quantities.append((number, unit))
    return quantities[::-1]


def half_last_digit(number: str) -> float:
    """Half of the last digit shown: 0.05 for "1.2", 50 for "1,500" (trailing zeros may be rounding)."""
    digits = number.replace(",", "").lstrip("−")
    if "." in digits:
        return 0.5 * 10 ** -len(digits.split(".")[1])
    return 0.5 * 10 ** (len(digits) - len(digits.rstrip("0"))) if digits.strip("0") else 0.5


def value(number: str) -> float:
    return float(number.replace(",", "").replace("−", "-"))


def in_si(quantities: list[tuple[str, Unit]]) -> list[tuple[float, float]]:
    """Each value of a side in SI units with its rounding tolerance; a composite value
    (``6 ft 1 in``: units that differ) is one value, its tolerance the last part's."""
    if quantities[0][1].dimension == "temperature":
        return [
            (
                value(n) * _KELVIN[u.symbol][0] + _KELVIN[u.symbol][1],
                half_last_digit(n) * _KELVIN[u.symbol][0],
            )
            for n, u in quantities
        ]
    if len({id(u) for _, u in quantities}) > 1:
        last_number, last_unit = quantities[-1]
        return [
            (sum(value(n) * u.factor for n, u in quantities), half_last_digit(last_number) * last_unit.factor)
        ]
    return [(value(n) * u.factor, half_last_digit(n) * u.factor) for n, u in quantities]


def plain(rendered: str) -> str:
    """Rendered tokens as the reader reads them: ``1 @,@ 499`` -> ``1,499``, ``1 1 ⁄ 2`` -> 1.5."""
    text = re.sub(r"− (?=[\d.])", "−", rendered.strip())
    for token, joined in (
        (" @,@ ", ","),
        (" @.@ ", "."),
        (" @-@ ", "-"),
        (" ⋅ ", "⋅"),
        (" / ", "/"),
        ("° ", "°"),
    ):
        text = text.replace(token, joined)
    fraction = r"(?:(\d+) )?(\d+) ⁄ (\d+)"
    return re.sub(fraction, lambda m: repr(int(m[1] or 0) + int(m[2]) / int(m[3])), text)


def shown_sides(rendered: str, template: str) -> tuple[str, list[str]] | None:
    """The input and the outputs of a rendered conversion, as ``disp=`` lays them out; None
    when only the input is shown."""
    layouts = {
        "disp=or": r"(.*?) or (.*)",
        "disp=/": r"(.*?) / (?=[−\d.])(.*)",
        "disp=sqbr": r"(.*?) \[ (.*) \]",
    }
    pattern = next((p for option, p in layouts.items() if option in template), r"(.*?) \( (.*) \)")
    shown = re.fullmatch(pattern, rendered)
    if shown is None:
        return None
    source, outputs = shown.groups()
    separator = " or " if "disp=or" in template else " ; "
    if "flip" in template:
        source, outputs = outputs, source
    return plain(source), [plain(output) for output in outputs.split(separator)]


def wrong_numbers(template: str, names: dict[str, Unit]) -> list[str] | None:
    """The output numbers of ``template`` that are not its input converted ([] when all are
    right, or when only the input is shown); None when its rendering cannot be read (see
    the module's docstring)."""
    if "-change" in template or "abbr=values" in template or "disp=comma" in template:
        return None
    rendered = " ".join(render_article("T", f"x {template} y").split("\n")[3:-2]).strip()[2:-2]
    sides = shown_sides(rendered, template)
    if sides is None:
        return []
    inputs = read_side(sides[0], names)
    if not inputs:
        return None
    expected, wrong = in_si(inputs), []
    for output in sides[1]:
        targets = read_side(output, names)
        shown = in_si(targets) if targets else []
        if len(shown) != len(expected):
            return None
        for (want, _), (have, tolerance) in zip(expected, shown):
            if abs(want - have) > tolerance * 1.0001 + 1e-12 * abs(want):
                wrong.append(f"{template} -> {plain(rendered)}: {output} (expected {want:g} in SI units)")
    return wrong


def test_every_number_a_pool_conversion_shows_is_right() -> None:
    if not POOL.is_file():
        pytest.skip(f"the shared article pool was not found at {POOL} (set WIKITEXT_SHARED_DIR)")
    templates: set[str] = set()
    with gzip.open(POOL, "rt", encoding="utf-8") as lines:
        for line in lines:
            templates.update(convert_templates(json.loads(line)["wikitext"]))
    names, outcome, wrong = unit_names(), Counter[str](), []
    for template in sorted(templates):
        found = wrong_numbers(template, names)
        outcome["unread" if found is None else "wrong" if found else "right"] += 1
        wrong += found or []
    assert wrong == []
    # measured: 4,376 distinct templates; 4,337 show conversions (5,110 output numbers, none
    # wrong), 31 their input alone, 8 unread (abbr=values, temperature changes, a range of ftin)
    assert len(templates) > 4000 and outcome["unread"] < 0.01 * len(templates), outcome


def test_the_check_catches_a_wrong_number(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not vacuous: ranges, adjectival composites and temperatures are read, an unknown unit
    is unread, and a renderer whose metre is 1% off is caught."""
    names = unit_names()
    assert read_side("6-foot-1-inch", names) == [("6", UNITS["ft"]), ("1", UNITS["in"])]
    assert read_side("2 to 5 kilometres", names) == [("2", UNITS["km"]), ("5", UNITS["km"])]
    assert read_side("3 cubits", names) is None
    assert in_si([("−40", UNITS["F"])])[0][0] == pytest.approx(in_si([("−40", UNITS["C"])])[0][0])
    assert wrong_numbers("{{convert|6|ft|1|in|m}}", names) == []
    assert wrong_numbers("{{convert|2|to|5|km|mi}}", names) == []
    assert wrong_numbers("{{convert|-40|C|F}}", names) == []
    monkeypatch.setitem(UNITS, "m", UNITS["m"]._replace(factor=1.01))
    [wrong] = wrong_numbers("{{convert|6|ft|1|in|m}}", names)
    assert wrong.startswith("{{convert|6|ft|1|in|m}} -> 6 feet 1 inch ( 1.84 m ): 1.84 m")
