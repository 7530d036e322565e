"""Issue 26: {{convert}} precision, units and forms, ship names, {{nihongo}}, pronunciation
templates and verse, each checked against the templates' documented behaviour.

Sources of the expected outputs: Template:Convert's documentation ("Default rounding": the
conversion is rounded to the precision of the input, shifted by one per factor of ten of the
conversion factor around 0.2-2, or to two significant figures, whichever is more precise; its
examples are quoted as they are documented), Module:Convert's rules (output units marked
``integer_more_precision``, feet and pounds, give an integer input more precision; a
composite input ending in inches uses the output unit's scale; temperatures keep three
significant figures in kelvin; the input is spelled out and the output abbreviated unless
``abbr`` says otherwise; ``disp=flip`` swaps the sides), the units' names, symbols, scales
and default outputs in Module:Convert/data (the expected numbers worked out by hand with the
rounding rule above), the ship templates' display bit mask (4 prefix, 2 name, 1 id),
Template:Nihongo's and the IPA-xx templates' documented examples, the separator codes of
Template:IPAc-en (Module:IPAc-en/data), and WikiText-2's own rendering of verse.
"""

from __future__ import annotations

import math

import pytest

from wikitext_builder.render import render_article
from wikitext_builder.render.convert import UNITS, Unit, default_precision, format_rounded, parse_number


def body(wikitext: str) -> list[str]:
    """The rendered body lines of an article (without the title block and terminator)."""
    return render_article("T", wikitext).split("\n")[3:-2]


def one(markup: str) -> str:
    """The single rendered line of ``markup`` between two words, without them."""
    lines = body(f"x {markup} y")
    assert len(lines) == 1, lines
    line = lines[0].strip()
    assert line.startswith("x ") and line.endswith(" y"), line
    return line[2:-2]


# --- {{convert}}: default output precision ------------------------------------------------


@pytest.mark.parametrize(
    "markup, expected",
    [
        # Template:Convert documentation, "Default rounding" and its examples
        ("{{convert|123|ft|m}}", "123 feet ( 37 m )"),
        ("{{convert|123|ft|m|-1}}", "123 feet ( 40 m )"),
        ("{{convert|123|ft|m|0}}", "123 feet ( 37 m )"),
        ("{{convert|123|ft|m|1}}", "123 feet ( 37 @.@ 5 m )"),
        ("{{convert|123|ft|m|2}}", "123 feet ( 37 @.@ 49 m )"),
        ("{{convert|2|km|mi}}", "2 kilometres ( 1 @.@ 2 mi )"),
        ("{{convert|7.1|mi|km}}", "7 @.@ 1 miles ( 11 @.@ 4 km )"),
        ("{{convert|7.0|mi|km}}", "7 @.@ 0 miles ( 11 @.@ 3 km )"),
        ("{{convert|1|lb|kg}}", "1 pound ( 0 @.@ 45 kg )"),
        ("{{convert|100|ft|m}}", "100 feet ( 30 m )"),
        ("{{convert|2|to|5|km|mi}}", "2 to 5 kilometres ( 1 @.@ 2 to 3 @.@ 1 mi )"),
        ("{{convert|2|-|5|km|mi|2|abbr=on}}", "2 – 5 km ( 1 @.@ 24 – 3 @.@ 11 mi )"),
        ("{{convert|2|and|5|km|mi|sigfig=3|abbr=off}}", "2 and 5 kilometres ( 1 @.@ 24 and 3 @.@ 11 miles )"),
        # two significant figures at least: 210 kg is 463 lb, not 500
        ("{{convert|210|kg|lb}}", "210 kilograms ( 460 lb )"),
        # an integer converted to feet or pounds: the input unit's scale, not the ratio
        ("{{convert|33|m|ft}}", "33 metres ( 108 ft )"),
        ("{{convert|47|m|ft}}", "47 metres ( 154 ft )"),
        ("{{convert|7,600|kg|lb}}", "7 @,@ 600 kilograms ( 16 @,@ 800 lb )"),
        ("{{convert|33.5|m|ft}}", "33 @.@ 5 metres ( 110 ft )"),
        # ... but not to other units (73 m is 239.5 ft; 30 mi is 48 km)
        ("{{convert|30|mi|km}}", "30 miles ( 48 km )"),
        # a composite input ending in inches: 2 decimals of a metre, none of a centimetre
        ("{{convert|6|ft|1|in|m}}", "6 feet 1 inch ( 1 @.@ 85 m )"),
        ("{{convert|6|ft|1|in|cm}}", "6 feet 1 inch ( 185 cm )"),
        ("{{convert|505|ft|6|in|m|1}}", "505 feet 6 inches ( 154 @.@ 1 m )"),
        # temperatures: three significant figures in kelvin (Module:Convert's own example)
        ("{{convert|-100.1|C|K}}", "− 100 @.@ 1 ° C ( 173 @.@ 1 K )"),
        ("{{convert|100|F|C}}", "100 ° F ( 38 ° C )"),
    ],
)
def test_convert_default_precision(markup: str, expected: str) -> None:
    assert one(markup) == expected


def test_default_precision_rule() -> None:
    """floor(precision + log10(in / out) + log10 2), at least two significant figures."""
    metre, foot, mile, km = UNITS["m"], UNITS["ft"], UNITS["mi"], UNITS["km"]
    # 1,500 m: precision -2, 4,921 ft: -2 (two significant figures: -2)
    assert default_precision(1500, -2, metre, foot, 4921.26) == -2
    # 7.1 mi: one decimal; factor 1.6 is between 0.2 and 2: one decimal
    assert default_precision(7.1, 1, mile, km, 11.43) == 1
    # 123 ft -> 37.49 m: factor 0.3 between 0.2 and 2: no decimals
    assert default_precision(123, 0, foot, metre, 37.4904) == 0
    # a fraction's precision is log10 of its denominator, at least 1
    assert parse_number("3/4").precision == 1.0
    assert parse_number("1+1/16").precision == pytest.approx(math.log10(16))
    assert parse_number("1,200").precision == -2
    assert parse_number("1.23e3").precision == -1  # 1230 and 1.23e3 alike


def test_format_rounded_is_half_up_and_keeps_separators() -> None:
    assert format_rounded(16799.27, -2) == "16,800"
    assert format_rounded(2.675, 2) == "2.68"  # the module's 2e-14 nudge
    assert format_rounded(-0.004, 2) == "0.00"  # no minus on a value that rounds to zero
    assert format_rounded(-3.26, 1) == "−3.3"


# --- {{convert}}: units, names and forms --------------------------------------------------


@pytest.mark.parametrize(
    "markup, expected",
    [
        # input spelled out, output abbreviated (abbr=out, the default); abbr= changes it
        ("{{convert|1|lb|kg|abbr=in}}", "1 lb ( 0 @.@ 45 kilograms )"),
        ("{{convert|1|lb|kg|abbr=on}}", "1 lb ( 0 @.@ 45 kg )"),
        ("{{convert|1|lb|kg|abbr=off}}", "1 pound ( 0 @.@ 45 kilograms )"),
        ("{{cvt|1|lb|kg}}", "1 lb ( 0 @.@ 45 kg )"),
        ("{{convert|40|mph}}", "40 miles per hour ( 64 km / h )"),
        ("{{convert|233|mi/h|km/h|0|abbr=on}}", "233 mi / h ( 375 km / h )"),
        # disp=flip: the outputs first, spelled out; the input abbreviated in brackets
        ("{{convert|64|km/h|mph|disp=flip}}", "40 miles per hour ( 64 km / h )"),
        ("{{convert|6.8|km|mi|adj=on|disp=flip}}", "4 @.@ 2 @-@ mile ( 6 @.@ 8 km )"),
        ("{{convert|500|m3|cuyd|disp=flip}}", "650 cubic yards ( 500 m3 )"),
        ("{{convert|20|kn|disp=flip}}", "37 kilometres per hour ; 23 miles per hour ( 20 kn )"),
        # disp=or spells the output out too
        ("{{convert|1|m|ft|disp=or}}", "1 metre or 3 @.@ 3 feet"),
        # cubic yards: "cu yd" as a symbol
        ("{{convert|500|m3|cuyd}}", "500 cubic metres ( 650 cu yd )"),
        ("{{convert|650000|cuyd}}", "650 @,@ 000 cubic yards ( 500 @,@ 000 m3 )"),
        # British spelling by default; sp=us, or a code spelled the US way, for US spelling
        ("{{convert|30|m|ft|abbr=off}}", "30 metres ( 98 feet )"),
        ("{{convert|30|m|ft|abbr=off|sp=us}}", "30 meters ( 98 feet )"),
        ("{{convert|30|meters|ft}}", "30 meters ( 98 ft )"),
        # tonnes and metric tons: to long and short tons; MT is the metric ton, Mt megatonnes
        ("{{convert|400|t}}", "400 tonnes ( 390 long tons ; 440 short tons )"),
        (
            "{{convert|6,000|metric ton}}",
            "6 @,@ 000 metric tons ( 5 @,@ 900 long tons ; 6 @,@ 600 short tons )",
        ),
        ("{{convert|24724|MT|abbr=on}}", "24 @,@ 724 t ( 24 @,@ 334 long tons ; 27 @,@ 254 short tons )"),
        ("{{convert|5.0|ST|MT}}", "5 @.@ 0 short tons ( 4 @.@ 5 t )"),
        ("{{convert|2|Mt|t}}", "2 megatonnes ( 2 @,@ 000 @,@ 000 t )"),
        # the tonne documentation's examples; sp=us names it the metric ton
        ("{{convert|2|tonne|ST}}", "2 tonnes ( 2 @.@ 2 short tons )"),
        ("{{convert|2|tonne|LT}}", "2 tonnes ( 2 @.@ 0 long tons )"),
        ("{{convert|2|tonne|lb}}", "2 tonnes ( 4 @,@ 400 lb )"),
        ("{{convert|3|tonne|lb|sp=us}}", "3 metric tons ( 6 @,@ 600 lb )"),
        ("{{convert|650|L|U.S.gal impgal}}", "650 litres ( 170 U.S. gal ; 140 imp gal )"),
        # long tons and acres are always named
        ("{{convert|1375|LT|t|abbr=on}}", "1 @,@ 375 long tons ( 1 @,@ 397 t )"),
        ("{{convert|10|ha}}", "10 hectares ( 25 acres )"),
        # metres below 3 default to feet and inches; "0 in" is shown after feet
        ("{{convert|2|m}}", "2 metres ( 6 ft 7 in )"),
        ("{{convert|1.8|m}}", "1 @.@ 8 metres ( 5 ft 11 in )"),
        ("{{convert|19.5|m|ftin|abbr=on}}", "19 @.@ 5 m ( 64 ft 0 in )"),
        ("{{convert|100|m}}", "100 metres ( 330 ft )"),
        # adjectives: hyphenated names, a composite input hyphenated throughout
        ("{{convert|10|mi|km|adj=on}}", "10 @-@ mile ( 16 km )"),
        ("{{convert|4.2|mi|adj=on}}", "4 @.@ 2 @-@ mile ( 6 @.@ 8 km )"),
        ("{{convert|9|in|cm|adj=on|abbr=on}}", "9 in ( 23 cm )"),
        ("{{convert|10|mi|km|adj=on|abbr=off}}", "10 @-@ mile ( 16 @-@ kilometre )"),
        ("{{convert|62|ft|4|in|adj=on}}", "62 @-@ foot @-@ 4 @-@ inch ( 19 @.@ 00 m )"),
        ("{{convert|62|ft|4|in|abbr=on}}", "62 ft 4 in ( 19 @.@ 00 m )"),
        ("{{convert|10|ft|m|adj=mid|-long}}", "10 @-@ foot @-@ long ( 3 @.@ 0 m )"),
        (
            "{{convert|400|to|500|tonne|adj=on}}",
            "400 @-@ to @-@ 500 @-@ tonne ( 390 @-@ to @-@ 490 @-@ long @-@ ton ; "
            "440 @-@ to @-@ 550 @-@ short @-@ ton )",
        ),
        # temperatures show their symbol unless abbr= is given
        ("{{convert|20|C}}", "20 ° C ( 68 ° F )"),
        ("{{convert|20|C|abbr=off}}", "20 degrees Celsius ( 68 degrees Fahrenheit )"),
    ],
)
def test_convert_units_and_forms(markup: str, expected: str) -> None:
    assert one(markup) == expected


@pytest.mark.parametrize(
    "markup, expected",
    [
        ("{{convert|3|cubit}}", "3 cubit"),  # an unknown unit: the input as given
        ("{{convert|3|m|kg}}", "3 metres"),  # an output of another kind is dropped
        ("{{convert|3|m|furlongs per fortnight}}", "3 metres"),
        ("{{convert|20|+/-|5|C}}", "20 ± 5 ° C"),  # a temperature change: never converted
        # outputs in engineering notation (e9m3; Moilbbl's default: e3m3 or e6m3) are not rendered
        ("{{convert|5|Toilbbl|e9m3}}", "5 trillion barrels"),
        ("{{convert|500|Moilbbl}}", "500 million barrels"),
        ("{{convert|82.12|Moilbbl/d}}", "82 @.@ 12 million barrels per day"),
        ("{{convert|3|ft/mi}}", "3 feet per mile"),  # default by value (cm/km below 5.28): none
        # a negative composite input is ambiguous (was −1.37 m, from −5 ft + 6 in)
        ("{{convert|-5|ft|6|in|m}}", "− 5 feet 6 inches"),
        ("{{convert|1|mi|-200|yd|m}}", "1 mile − 200 yards"),
    ],
)
def test_convert_keeps_the_input_when_it_cannot_convert_faithfully(markup: str, expected: str) -> None:
    assert one(markup) == expected


# --- {{convert}}: more of Module:Convert/data's units ---------------------------------------


@pytest.mark.parametrize(
    "markup, expected",
    [
        # aliases: lbs is lb (integer_more_precision as an output too), USfloz is USoz, gal USgal
        ("{{convert|140|lbs|kg}}", "140 pounds ( 64 kg )"),
        ("{{convert|41|lbs|adj=on}}", "41 @-@ pound ( 19 kg )"),
        ("{{convert|0.25|to|8|lbs|kg|abbr=on}}", "0 @.@ 25 to 8 lb ( 0 @.@ 11 to 3 @.@ 63 kg )"),
        ("{{convert|27|kg|lbs}}", "27 kilograms ( 60 lb )"),
        ("{{convert|72000|gal|l|abbr=on}}", "72 @,@ 000 US gal ( 270 @,@ 000 l )"),
        # sp=us: the US units' name1_us and sym_us
        ("{{convert|450|ml|USfloz|0|sp=us}}", "450 milliliters ( 15 U.S. fl oz )"),
        ("{{convert|5|USgal|l|sp=us}}", "5 U.S. gallons ( 19 l )"),
        # torque: lbft (pound-foot, lb⋅ft, default Nm), Nm (newton-metre, N⋅m, default lbfft)
        ("{{convert|170|lbft|Nm|abbr=on}}", "170 lb ⋅ ft ( 230 N ⋅ m )"),
        ("{{convert|100|lbft}}", "100 pound @-@ feet ( 140 N ⋅ m )"),
        ("{{convert|136|lbft|Nm|abbr=on|0|disp=flip}}", "184 N ⋅ m ( 136 lb ⋅ ft )"),
        ("{{convert|1|Nm}}", "1 newton @-@ metre ( 0 @.@ 74 lbf ⋅ ft )"),
        ("{{convert|300|Nm|lbft|abbr=off}}", "300 newton @-@ metres ( 220 pound @-@ feet )"),
        # oil barrels: oilbbl (barrel, bbl, 42 US gallons), oilbbl/d (default m3/d), Moilbbl
        ("{{convert|16000|oilbbl}}", "16 @,@ 000 barrels ( 2 @,@ 500 m3 )"),
        ("{{convert|1|oilbbl|USgal}}", "1 barrel ( 42 US gal )"),
        ("{{convert|100000|oilbbl/d|m3/d}}", "100 @,@ 000 barrels per day ( 16 @,@ 000 m3 / d )"),
        ("{{convert|17700|oilbbl/d}}", "17 @,@ 700 barrels per day ( 2 @,@ 810 m3 / d )"),
        ("{{convert|3|Moilbbl|m3}}", "3 million barrels ( 480 @,@ 000 m3 )"),
        # stlb, a multiple like ftin: rounded in pounds, then split; "0 st" is never shown
        ("{{convert|235|lb|kg stlb}}", "235 pounds ( 107 kg ; 16 st 11 lb )"),
        ("{{convert|100|kg|stlb}}", "100 kilograms ( 15 st 10 lb )"),
        ("{{convert|5|kg|stlb}}", "5 kilograms ( 11 lb )"),
        # the combination "kPa kg/cm2" is kPa and kgf/cm2 (kilogram-force per square centimetre)
        ("{{convert|235|psi|kPa kg/cm2|0|abbr=on}}", "235 psi ( 1 @,@ 620 kPa ; 17 kgf / cm2 )"),
        # NM (nautical mile, default km mi); shaku, board feet: always named ("usename")
        ("{{convert|27.4|NM}}", "27 @.@ 4 nautical miles ( 50 @.@ 7 km ; 31 @.@ 5 mi )"),
        ("{{convert|1|to|6|shaku|cm in}}", "1 to 6 shaku ( 30 to 182 cm ; 12 to 72 in )"),
        ("{{convert|6|shaku|cm|abbr=on}}", "6 shaku ( 180 cm )"),
        (
            "{{convert|1400000000|board feet}}",
            "1 @,@ 400 @,@ 000 @,@ 000 board feet ( 3 @,@ 300 @,@ 000 m3 )",
        ),
        ("{{convert|1|board feet|abbr=on}}", "1 board foot ( 0 @.@ 0024 m3 )"),
        ("{{convert|25000|sqfoot}}", "25 @,@ 000 square foot ( 2 @,@ 300 m2 )"),  # plural "square foot"
        # lt: long ton with the symbol LT (LT itself is always named)
        ("{{convert|37654|lt|t}}", "37 @,@ 654 long tons ( 38 @,@ 258 t )"),
        ("{{convert|37654|lt|t|abbr=on}}", "37 @,@ 654 LT ( 38 @,@ 258 t )"),
        ("{{convert|90|STf|kN}}", "90 short tons @-@ force ( 800 kN )"),
        ("{{convert|25|W.h|abbr=on}}", "25 W ⋅ h ( 90 kJ )"),
        ("{{convert|140|lb/yd|kg/m|-1|adj=on}}", "140 @-@ pound @-@ per @-@ yard ( 70 kg / m )"),
        ("{{convert|1982|/km2|/sqmi|abbr=on}}", "1 @,@ 982 / km2 ( 5 @,@ 130 / sq mi )"),
        ("{{convert|1|ft/mi|m/km|1}}", "1 foot per mile ( 0 @.@ 2 m / km )"),
        # temperature changes: scale only, no offset; shown as symbols unless abbr= is given
        ("{{convert|20|F-change|0}}", "20 ° F ( 11 ° C )"),
        ("{{convert|10|C-change}}", "10 ° C ( 18 ° F )"),
        (
            "{{convert|20|F-change|0|abbr=off}}",
            "20 degrees Fahrenheit change ( 11 degrees Celsius change )",
        ),
    ],
)
def test_convert_module_data_units(markup: str, expected: str) -> None:
    assert one(markup) == expected


def test_convert_unit_aliases_share_their_target() -> None:
    assert UNITS["lbs"] is UNITS["lb"]
    assert UNITS["USfloz"] is UNITS["USoz"]
    assert UNITS["gal"] is UNITS["USgal"]
    assert UNITS["/km2"] is UNITS["/sqkm"]


def _unit_definitions() -> dict[str, float]:
    """Each distinct unit's size in SI base units, from its legal or conventional definition
    (NIST SP 811, appendix B; the international yard and pound of 1959; the IAU's astronomical
    unit, light-year and parsec), written independently of Module:Convert's table."""
    ft, inch, lb, g0, day = 0.3048, 0.0254, 0.45359237, 9.80665, 86400.0
    mi, yd, us_gal, imp_gal = 5280 * ft, 3 * ft, 231 * inch**3, 4.54609e-3
    bbl, lbf, au = 42 * us_gal, lb * g0, 149_597_870_700.0
    acre = 43_560 * ft**2
    return {
        # length
        "m": 1, "km": 1e3, "cm": 1e-2, "mm": 1e-3, "mi": mi, "ft": ft, "in": inch, "yd": yd,
        "nmi": 1852, "NM": 1852, "shaku": 10 / 33, "furlong": 660 * ft, "ch": 66 * ft,
        "fathom": 6 * ft, "AU": au, "ly": 299_792_458 * 365.25 * day, "pc": 648_000 / math.pi * au,
        # area
        "km2": 1e6, "m2": 1, "cm2": 1e-4, "sqmi": mi**2, "sqft": ft**2, "sqin": inch**2,
        "sqfoot": ft**2, "sqyd": yd**2, "ha": 1e4, "acre": acre,
        # volume
        "m3": 1, "km3": 1e9, "cm3": 1e-6, "cc": 1e-6, "cuft": ft**3, "cuyd": yd**3, "cuin": inch**3,
        "cumi": mi**3, "l": 1e-3, "L": 1e-3, "ml": 1e-6, "USgal": us_gal, "U.S.gal": us_gal,
        "impgal": imp_gal, "USoz": us_gal / 128, "impoz": imp_gal / 160, "acre.ft": acre * ft,
        "board feet": 144 * inch**3, "board foot": 144 * inch**3, "oilbbl": bbl,
        "Moilbbl": 1e6 * bbl, "Goilbbl": 1e9 * bbl, "Toilbbl": 1e12 * bbl,
        # flow
        "cuft/s": ft**3, "m3/s": 1, "oilbbl/d": bbl / day, "koilbbl/d": 1e3 * bbl / day,
        "Moilbbl/d": 1e6 * bbl / day, "m3/d": 1 / day, "cuft/d": ft**3 / day,
        # mass
        "kg": 1, "g": 1e-3, "mg": 1e-6, "gr": lb / 7000, "t": 1e3, "MT": 1e3, "Mt": 1e9,
        "kt": 1e6, "LT": 2240 * lb, "lt": 2240 * lb, "ST": 2000 * lb, "lb": lb, "oz": lb / 16,
        "ozt": 480 * lb / 7000, "st": 14 * lb, "long cwt": 112 * lb,
        # speed
        "km/h": 1 / 3.6, "mph": mi / 3600, "mi/h": mi / 3600, "kn": 1852 / 3600, "m/s": 1, "ft/s": ft,
        "km/s": 1e3, "mi/s": mi,
        # power
        "hp": 550 * ft * lbf, "shp": 550 * ft * lbf, "ihp": 550 * ft * lbf,
        "bhp": 550 * ft * lbf, "PS": 75 * g0, "W": 1, "kW": 1e3, "MW": 1e6,
        # force, torque, energy
        "N": 1, "kN": 1e3, "lbf": lbf, "kgf": g0, "STf": 2000 * lbf, "lbft": lbf * ft,
        "lbfft": lbf * ft, "Nm": 1,
        "J": 1, "kJ": 1e3, "cal": 4.184, "kcal": 4184, "W.h": 3600,
        # temperature (kelvin per degree) and its changes
        "C": 1, "F": 5 / 9, "K": 1, "C-change": 1, "F-change": 5 / 9,
        # pressure: mmHg and inHg are the conventional 13,595.1 kg/m3 mercury under g0
        "Pa": 1, "hPa": 100, "kPa": 1e3, "MPa": 1e6, "mbar": 100, "mb": 100, "bar": 1e5,
        "psi": lbf / inch**2, "atm": 101_325, "mmHg": 13_595.1e-3 * g0,
        "inHg": 13_595.1 * inch * g0, "kgf/cm2": g0 * 1e4, "kg/cm2": g0 * 1e4,
        # densities, gradients, per area
        "kg/m3": 1, "lb/cuft": lb / ft**3, "g/cm3": 1e3, "lb/cuin": lb / inch**3,
        "kg/m": 1, "lb/yd": lb / yd, "/sqkm": 1e-6, "/sqmi": 1 / mi**2, "m/km": 1e-3,
        "ft/mi": ft / mi,
    }  # fmt: skip


def test_every_unit_has_the_size_its_definition_gives() -> None:
    """A wrong scale would print a wrong number (the metric ton once read as a megatonne):
    every unit of the table (each alias is the same record) against its definition."""
    definitions = _unit_definitions()
    units_by_first_code: dict[int, tuple[str, Unit]] = {}
    for code, unit in UNITS.items():
        units_by_first_code.setdefault(id(unit), (code, unit))  # aliases are the same record
    for code, unit in units_by_first_code.values():
        assert code in definitions, f"{code}: no definition to check its scale against"
        assert math.isclose(unit.factor, definitions[code], rel_tol=1e-9), (code, unit.factor)


# --- ship names ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "markup, expected",
    [
        ("{{HMS|Invincible|1907}}", "HMS Invincible ( 1907 )"),
        ("{{HMS|Invincible|1907|6}}", "HMS Invincible"),
        ("{{HMS|Invincible|1907|3}}", "Invincible ( 1907 )"),
        ("{{HMS|Invincible|1907|2}}", "Invincible"),
        ("{{HMS|Invincible|1907|1}}", "1907"),
        ("{{ship|HMS|Invincible|1907|6}}", "HMS Invincible"),
        ("{{USS|Hornet|CV-12|6}}", "USS Hornet"),
        ("{{SMS|Goeben}}", "SMS Goeben"),
        ("{{ship|Japanese cruiser|Azuma||2}}", "Azuma"),
        ("{{GS|U-199||2}}", "U @-@ 199"),
    ],
)
def test_ship_display_codes(markup: str, expected: str) -> None:
    assert one(markup) == expected


# --- {{nihongo}} and pronunciations -------------------------------------------------------


@pytest.mark.parametrize(
    "markup, expected",
    [
        ("{{Nihongo|Tokyo Tower|東京タワー|Tōkyō tawā}}", "Tokyo Tower ( 東京タワー , Tōkyō tawā )"),
        (
            "{{Nihongo|Tokyo Tower|東京タワー|Tōkyō tawā|lead=yes}}",
            "Tokyo Tower ( Japanese : 東京タワー , Hepburn : Tōkyō tawā )",
        ),
        ("{{Nihongo||東京タワー|Tōkyō tawā}}", "Tōkyō tawā ( 東京タワー )"),
        ("{{Nihongo||東京タワー|Tōkyō tawā|lead=yes}}", "Tōkyō tawā ( Japanese : 東京タワー )"),
        (
            "{{Nihongo|Sokoban|倉庫番|Sōko-ban|extra=warehouse keeper}}",
            "Sokoban ( 倉庫番 , Sōko @-@ ban , warehouse keeper )",
        ),
        # IPA-xx label keys, as the IPA-xx templates document them
        ("{{IPA-fr|kʁak}}", "French pronunciation : [ kʁak ]"),
        ("{{IPA-fr|kʁak|-|Fr-krak.ogg}}", "French pronunciation : [ kʁak ]"),
        ("{{IPA-fr|kʁak|pron}}", "pronounced [ kʁak ]"),
        ("{{IPA-fr|kʁak|lang}}", "French : [ kʁak ]"),
        ("{{IPA-fr|kʁak|IPA}}", "IPA : [ kʁak ]"),
        ("{{IPA-fr|kʁak|}}", "[ kʁak ]"),
        ("{{IPA-hns|kəˈɦaːni}}", "Hindustani pronunciation : [ kəˈɦaːni ]"),
        ("{{pronEng|ˈiːkoʊ}}", "pronounced / ˈiːkoʊ /"),
        ("{{IPAEng|ˈiːkoʊ}}", "/ ˈiːkoʊ /"),
        ("{{respell|in|SY|clo|pee|dee|ə}}", "in @-@ SY @-@ clo @-@ pee @-@ dee @-@ ə"),
        ("{{respell|tip|ee-kə|noo|'}}", "tip @-@ ee @-@ kə @-@ noo '"),
    ],
)
def test_nihongo_and_pronunciations(markup: str, expected: str) -> None:
    assert one(markup) == expected


@pytest.mark.parametrize(
    "markup, expected",
    [
        # Template:IPAc-en's separator codes (Module:IPAc-en/data, "SEPARATORS"): they print
        # their label, not the code: "_" a space between words, ",_" a comma and a space,
        # "nbsp" a space, "–" a hyphen
        ("{{IPAc-en|ˈ|m|aɪ|.|ə|_|ˈ|æ|n|dʒ|ə|l|oʊ}}", "/ ˈmaɪ.ə ˈændʒəloʊ /"),
        ("{{IPAc-en|ˌ|s|aʊ|θ|_|d|ə|ˈ|k|oʊ|t|ə}}", "/ ˌsaʊθ dəˈkoʊtə /"),
        ("{{IPAc-en|ˈ|ɑː|ŋ|ɡ|ə|l|ə|,_|ˈ|æ|ŋ|-}}", "/ ˈɑːŋɡələ , ˈæŋ- /"),
        ("{{IPAc-en|ˈ|eɪ|nbsp|b|iː}}", "/ ˈeɪ biː /"),
        ("{{IPAc-en|ˈ|eɪ|&nbsp;|b|iː}}", "/ ˈeɪ biː /"),
        ("{{IPAc-en|ˈ|b|ɒ|–|t|ɒ|n}}", "/ ˈbɒ @-@ tɒn /"),
        # a label key first, then words: the label, then the slashed words
        ("{{IPAc-en|us|ˈ|eɪ|_|b|iː}}", "US : / ˈeɪ biː /"),
    ],
)
def test_ipac_en_separators_print_their_labels(markup: str, expected: str) -> None:
    line = one(markup)
    assert line == expected
    assert "_" not in line.split()  # WikiText-2 has no "_" token at all


# --- verse ----------------------------------------------------------------------------------


def test_poem_lines_are_lines_of_their_own() -> None:
    wikitext = (
        "The first verse is:\n<blockquote><poem>\n''Jack and Jill went up the hill\n"
        "To fetch a pail of water.''\n\nJack fell down,\n</poem></blockquote>\nThen prose.\n"
    )
    assert body(wikitext) == [
        " The first verse is : ",
        " Jack and Jill went up the hill ",
        " To fetch a pail of water . ",
        " Jack fell down , ",
        " Then prose . ",
    ]


def test_poem_quote_lines_and_prose_breaks() -> None:
    assert body("Before.\n{{poemquote|One line,\nanother line.}}\nAfter.\n") == [
        " Before . ",
        " One line , ",
        " another line . ",
        " After . ",
    ]
    # a <br> in prose joins its line to the next, as WikiText-2 shows
    assert body("A sentence.<br />\nAnother one.\n") == [" A sentence . Another one . "]
