"""``{{convert}}`` (and ``{{cvt}}``): ``6.1 kilometres (3.8 mi)``, as Wikipedia's
Module:Convert printed it.

Units are :class:`Unit` records, registered under each code Wikipedia accepts for them.
Supported: ranges (``to``, ``-``, ``x``/``by``, ``and``, ``or``, ``+/-``, ...), fraction
input (``3/4``, ``1+1/2``), composite input (``5|ft|6|in``), ``abbr``, ``adj``/``sing``,
``disp`` (``flip``, ``or``, ``out``, ``comma``, ``sqbr``), ``order=flip``, ``sp=us``,
``sigfig``, a positional precision and the ``ftin`` output unit. An unknown unit shows
the input only.
"""

from __future__ import annotations

import math
import re
from typing import NamedTuple

from mwparserfromhell.nodes import Template

from .template_api import NodeRenderer, RendererTable, entries, is_yes, template_key


class Unit(NamedTuple):
    """One unit of measurement."""

    dimension: str  # units convert only within a dimension
    factor: float  # size in the dimension's base unit (temperatures: unused)
    singular: str  # spelled-out name for one
    plural: str  # spelled-out name for others
    symbol: str  # abbreviated form
    default_output: str  # space-separated codes converted to when none is given


UNITS: dict[str, Unit] = {}


def _define(codes: str, unit: Unit) -> None:
    """Register ``unit`` under each space-separated code (a code is defined once)."""
    for code in codes.split():
        if code in UNITS:
            raise ValueError(f"convert unit code {code!r} defined twice")
        UNITS[code] = unit


# length
_define("m metre meter metres meters", Unit("length", 1.0, "metre", "metres", "m", "ft"))
_define(
    "km kilometre kilometer kilometres kilometers",
    Unit("length", 1000.0, "kilometre", "kilometres", "km", "mi"),
)
_define(
    "cm centimetre centimeter centimetres centimeters",
    Unit("length", 0.01, "centimetre", "centimetres", "cm", "in"),
)
_define(
    "mm millimetre millimeter millimetres millimeters",
    Unit("length", 0.001, "millimetre", "millimetres", "mm", "in"),
)
_define("mi mile miles", Unit("length", 1609.344, "mile", "miles", "mi", "km"))
_define("ft foot feet", Unit("length", 0.3048, "foot", "feet", "ft", "m"))
# Module:Convert's default for inches is millimetres ("inches ( ... mm )" is the most common
# inch conversion in the WikiText-2 files)
_define("in inch inches", Unit("length", 0.0254, "inch", "inches", "in", "mm"))
_define("yd yard yards", Unit("length", 0.9144, "yard", "yards", "yd", "m"))
_define("nmi", Unit("length", 1852.0, "nautical mile", "nautical miles", "nmi", "km mi"))
_define("ly", Unit("length", 9.4607304725808e15, "light-year", "light-years", "ly", "km"))
_define("AU au", Unit("length", 149597870700.0, "astronomical unit", "astronomical units", "AU", "km mi"))
_define("furlong furlongs", Unit("length", 201.168, "furlong", "furlongs", "furlong", "m"))
_define("chain chains", Unit("length", 20.1168, "chain", "chains", "ch", "m"))
_define("fathom fathoms", Unit("length", 1.8288, "fathom", "fathoms", "fathom", "m"))
# area
_define("km2 sqkm", Unit("area", 1e6, "square kilometre", "square kilometres", "km2", "sqmi"))
_define("m2 sqm", Unit("area", 1.0, "square metre", "square metres", "m2", "sqft"))
_define("cm2", Unit("area", 1e-4, "square centimetre", "square centimetres", "cm2", "sqin"))
_define("sqmi mi2", Unit("area", 2589988.110336, "square mile", "square miles", "sq mi", "km2"))
_define("sqft ft2", Unit("area", 0.09290304, "square foot", "square feet", "sq ft", "m2"))
_define("sqin in2", Unit("area", 0.00064516, "square inch", "square inches", "sq in", "cm2"))
_define("sqyd yd2", Unit("area", 0.83612736, "square yard", "square yards", "sq yd", "m2"))
_define("ha hectare hectares", Unit("area", 1e4, "hectare", "hectares", "ha", "acre"))
_define("acre acres", Unit("area", 4046.8564224, "acre", "acres", "acres", "ha"))
# mass
_define("kg kilogram kilograms", Unit("mass", 1.0, "kilogram", "kilograms", "kg", "lb"))
_define("g gram grams", Unit("mass", 0.001, "gram", "grams", "g", "oz"))
_define("mg milligram milligrams", Unit("mass", 1e-6, "milligram", "milligrams", "mg", "gr"))
_define("gr grain grains", Unit("mass", 0.00006479891, "grain", "grains", "gr", "g"))
_define("t tonne tonnes", Unit("mass", 1000.0, "tonne", "tonnes", "t", "LT"))
_define("lb pound pounds", Unit("mass", 0.45359237, "pound", "pounds", "lb", "kg"))
_define("oz ounce ounces", Unit("mass", 0.028349523125, "ounce", "ounces", "oz", "g"))
_define("st stone", Unit("mass", 6.35029318, "stone", "stone", "st", "lb kg"))
_define("LT longton", Unit("mass", 1016.0469088, "long ton", "long tons", "long tons", "t"))
_define("ST shortton", Unit("mass", 907.18474, "short ton", "short tons", "short tons", "t"))
_define("MT Mt", Unit("mass", 1e9, "megatonne", "megatonnes", "Mt", "ST"))
_define("long cwt", Unit("mass", 50.80234544, "long hundredweight", "long hundredweight", "long cwt", "kg"))
# speed
_define("km/h kph", Unit("speed", 1 / 3.6, "kilometre per hour", "kilometres per hour", "km/h", "mph"))
_define("mph", Unit("speed", 0.44704, "mile per hour", "miles per hour", "mph", "km/h"))
_define("kn knot knots kt", Unit("speed", 1852 / 3600, "knot", "knots", "kn", "km/h mph"))
_define("m/s", Unit("speed", 1.0, "metre per second", "metres per second", "m/s", "ft/s"))
_define("ft/s", Unit("speed", 0.3048, "foot per second", "feet per second", "ft/s", "m/s"))
_define("km/s", Unit("speed", 1000.0, "kilometre per second", "kilometres per second", "km/s", "mi/s"))
_define("mi/s", Unit("speed", 1609.344, "mile per second", "miles per second", "mi/s", "km/s"))
# volume and flow
_define("l L litre liter litres liters", Unit("volume", 0.001, "litre", "litres", "l", "impgal USgal"))
_define("ml mL millilitre milliliter", Unit("volume", 1e-6, "millilitre", "millilitres", "ml", "usfloz"))
_define("m3 cum", Unit("volume", 1.0, "cubic metre", "cubic metres", "m3", "cuft"))
_define("cuft ft3", Unit("volume", 0.028316846592, "cubic foot", "cubic feet", "cu ft", "m3"))
_define("cuyd yd3", Unit("volume", 0.764554857984, "cubic yard", "cubic yards", "cu yd", "m3"))
_define("cuin in3", Unit("volume", 0.000016387064, "cubic inch", "cubic inches", "cu in", "cm3"))
_define("cm3 cc", Unit("volume", 1e-6, "cubic centimetre", "cubic centimetres", "cc", "cuin"))
_define("USgal", Unit("volume", 0.003785411784, "US gallon", "US gallons", "US gal", "l"))
_define("impgal", Unit("volume", 0.00454609, "imperial gallon", "imperial gallons", "imp gal", "l"))
_define("usfloz", Unit("volume", 2.95735295625e-5, "US fluid ounce", "US fluid ounces", "US fl oz", "ml"))
_define("km3", Unit("volume", 1e9, "cubic kilometre", "cubic kilometres", "km3", "cumi"))
_define("cumi mi3", Unit("volume", 4168181825.440579, "cubic mile", "cubic miles", "cu mi", "km3"))
_define("acre.ft acre-ft", Unit("volume", 1233.48183754752, "acre-foot", "acre-feet", "acre·ft", "m3"))
_define("cuft/s ft3/s", Unit("flow", 0.028316846592, "cu ft/s", "cu ft/s", "cu ft/s", "m3/s"))
_define("m3/s", Unit("flow", 1.0, "m3/s", "m3/s", "m3/s", "cuft/s"))
# power, force, energy
_define("hp", Unit("power", 745.69987158227022, "horsepower", "horsepower", "hp", "kW"))
_define("shp", Unit("power", 745.69987158227022, "shaft horsepower", "shaft horsepower", "shp", "kW"))
_define("ihp", Unit("power", 745.69987158227022, "indicated horsepower", "indicated horsepower", "ihp", "kW"))
_define("bhp", Unit("power", 745.69987158227022, "brake horsepower", "brake horsepower", "bhp", "kW"))
_define("PS", Unit("power", 735.49875, "metric horsepower", "metric horsepower", "PS", "kW hp"))
_define("W", Unit("power", 1.0, "watt", "watts", "W", "hp"))
_define("kW", Unit("power", 1000.0, "kilowatt", "kilowatts", "kW", "hp"))
_define("MW", Unit("power", 1e6, "megawatt", "megawatts", "MW", "hp"))
_define("N", Unit("force", 1.0, "newton", "newtons", "N", "lbf"))
_define("kN", Unit("force", 1000.0, "kilonewton", "kilonewtons", "kN", "lbf"))
_define("lbf", Unit("force", 4.4482216152605, "pound-force", "pounds-force", "lbf", "N"))
_define("kgf", Unit("force", 9.80665, "kilogram-force", "kilograms-force", "kgf", "N"))
_define("J", Unit("energy", 1.0, "joule", "joules", "J", "cal"))
_define("cal", Unit("energy", 4.184, "calorie", "calories", "cal", "J"))
_define("kcal", Unit("energy", 4184.0, "kilocalorie", "kilocalories", "kcal", "kJ"))
_define("kJ", Unit("energy", 1000.0, "kilojoule", "kilojoules", "kJ", "kcal"))
# temperature (converted through kelvin, not by factor)
_define("C °C", Unit("temperature", 1.0, "°C", "°C", "°C", "F"))
_define("F °F", Unit("temperature", 1.0, "°F", "°F", "°F", "C"))
_define("K", Unit("temperature", 1.0, "K", "K", "K", "C"))
# pressure
_define("inHg", Unit("pressure", 3386.389, "inch of mercury", "inches of mercury", "inHg", "mbar"))
_define("mbar hPa", Unit("pressure", 100.0, "millibar", "millibars", "mbar", "inHg"))
_define("Pa", Unit("pressure", 1.0, "pascal", "pascals", "Pa", "psi"))
_define("kPa", Unit("pressure", 1000.0, "kilopascal", "kilopascals", "kPa", "psi"))
_define("MPa", Unit("pressure", 1e6, "megapascal", "megapascals", "MPa", "psi"))
_define(
    "psi", Unit("pressure", 6894.757293168, "pound per square inch", "pounds per square inch", "psi", "kPa")
)
_define("bar", Unit("pressure", 1e5, "bar", "bars", "bar", "kPa psi"))
_define("atm", Unit("pressure", 101325.0, "standard atmosphere", "standard atmospheres", "atm", "kPa"))
_define(
    "mmHg", Unit("pressure", 133.322387415, "millimetre of mercury", "millimetres of mercury", "mmHg", "kPa")
)
# density and fuel
_define(
    "kg/m3", Unit("density", 1.0, "kilogram per cubic metre", "kilograms per cubic metre", "kg/m3", "lb/cuft")
)
_define(
    "lb/cuft",
    Unit("density", 16.018463373960138, "pound per cubic foot", "pounds per cubic foot", "lb/cu ft", "kg/m3"),
)
_define(
    "g/cm3",
    Unit("density", 1000.0, "gram per cubic centimetre", "grams per cubic centimetre", "g/cm3", "lb/cuin"),
)
_define(
    "lb/cuin",
    Unit("density", 27679.904710203125, "pound per cubic inch", "pounds per cubic inch", "lb/cu in", "g/cm3"),
)

# range words between two numbers: (text when the unit is spelled out, text with symbols);
# an "x" range with symbols repeats the unit after each number ("7 mm × 26 mm")
_RANGES: dict[str, tuple[str, str]] = {
    "to": (" to ", " to "),
    "-": ("–", "–"),
    "–": ("–", "–"),
    "and": (" and ", " and "),
    "or": (" or ", " or "),
    "x": (" by ", " × "),
    "×": (" by ", " × "),
    "by": (" by ", " by "),
    "to(-)": (" to ", " to "),
    "+/-": (" ± ", " ± "),
    "&": (" & ", " & "),
    "and(-)": (" and ", " and "),
    "or(-)": (" or ", " or "),
}
_TIMES = ("x", "×")
_INTEGER = re.compile(r"-?\d+")
_NUMBER = re.compile(r"^[-+−]?(?:\d+(?:,\d{3})*(?:\.\d*)?|\.\d+)(?:e[-+]?\d+)?$")
_FRACTION = re.compile(r"^([-+−]?)(?:(\d+)\+)?(\d+)/(\d+)$")
_SYMBOL_ABBR = ("on", "in", "values", "unit")


class Number(NamedTuple):
    """A parsed input number."""

    value: float
    precision: int  # decimal places; negative for trailing zeros of an integer
    text: str  # as Wikipedia shows it (thousands separators, fraction slash)
    fraction: bool  # written as a fraction with no whole part (3/4)


def parse_number(text: str) -> Number | None:
    """The number ``text`` (``1,200``, ``6.1``, ``3/4``, ``1+1/2``), or None."""
    text = text.strip().replace("−", "-")
    fraction = _FRACTION.match(text)
    if fraction is not None:
        sign, whole, numerator, denominator = fraction.groups()
        if int(denominator) == 0:
            return None
        value = int(whole or 0) + int(numerator) / int(denominator)
        value = -value if sign in ("-", "−") else value
        shown = f"{numerator}\u2044{denominator}"
        shown = f"{'−' if value < 0 else ''}{whole + ' ' if whole else ''}{shown}"
        return Number(value, max(math.ceil(math.log10(int(denominator))), 1), shown, not whole)
    if not _NUMBER.match(text):
        return None
    plain = text.replace(",", "").lstrip("+")
    value = float(plain)
    if "e" in plain.lower():
        precision = 2
    else:
        digits = plain.lstrip("-")
        if "." in digits:
            precision = len(digits.split(".")[1])
        else:
            stripped = digits.rstrip("0")
            precision = -(len(digits) - len(stripped)) if stripped else 0
    return Number(value, precision, format_number(value, max(precision, 0)), False)


def format_number(value: float, precision: int) -> str:
    """``value`` rounded to ``precision`` decimals (negative: tens, hundreds), with commas."""
    if precision < 0:
        value = round(value, precision)
        precision = 0
    text = f"{value:,.{precision}f}"
    return "−" + text[1:] if text.startswith("-") else text


def convert_value(value: float, src: str, dst: str) -> float:
    """``value`` in unit code ``src`` expressed in unit code ``dst`` (same dimension)."""
    if UNITS[src].dimension == "temperature":
        kelvin = _to_kelvin(value, src.lstrip("°"))
        unit = dst.lstrip("°")
        return kelvin - 273.15 if unit == "C" else (kelvin - 273.15) * 9 / 5 + 32 if unit == "F" else kelvin
    return value * UNITS[src].factor / UNITS[dst].factor


def _to_kelvin(value: float, unit: str) -> float:
    if unit == "C":
        return value + 273.15
    if unit == "F":
        return (value - 32) * 5 / 9 + 273.15
    return value


def output_precision(value: float, precision: int, src: str, out: float) -> int:
    """Module:Convert's default output rounding: the input's precision shifted by the
    conversion's magnitude (plus log10 2), but at least two significant figures
    (temperatures: three significant figures in kelvin). Checked on the WikiText-2 files:
    floor, not round, matches their conversions ("73 metres ( 240 ft )")."""
    fudge = 1e-14
    if UNITS[src].dimension == "temperature":
        kelvin = abs(convert_value(value, src, "K"))
        minprec = 2 if kelvin < 1e-8 else 2 - math.floor(math.log10(kelvin) + fudge)
        adjust = 0.0
    else:
        if value == 0 or out == 0:
            return 0
        adjust = math.log10(abs(value / out)) + math.log10(2)
        minprec = 1 - math.floor(math.log10(abs(out)) + fudge)
    return min(max(math.floor(precision + adjust), minprec), 8)


def _feet_inches(value: float, unit: str) -> str:
    """A length as ``X ft Y in`` rounded to the inch (the ``ftin`` output unit)."""
    inches = round(abs(convert_value(value, unit, "in")))
    feet, inches = divmod(inches, 12)
    sign = "−" if value < 0 else ""
    return f"{sign}{feet:,} ft {inches} in" if inches else f"{sign}{feet:,} ft"


def _american(name: str, us: bool) -> str:
    return name.replace("metre", "meter").replace("litre", "liter") if us else name


class _Options(NamedTuple):
    """The named parameters of one {{convert}}."""

    in_symbol: bool  # the input unit abbreviated
    out_symbol: bool  # the output unit abbreviated
    adjective: str  # '' or the adj= value ('on', 'mid')
    disp: str
    us: bool
    sigfig: str


def _options(tpl: Template, r: NodeRenderer) -> _Options:
    abbr = (r.param(tpl, "abbr") or ("on" if template_key(str(tpl.name)) == "cvt" else "")).lower()
    adj = (r.param(tpl, "adj") or "").lower()
    if not adj and is_yes(r.param(tpl, "sing")):  # sing=on: the old spelling of adj=on
        adj = "on"
    disp = (r.param(tpl, "disp") or "").lower()
    if (r.param(tpl, "order") or "").lower() == "flip":
        disp = "flip"
    return _Options(
        in_symbol=abbr in _SYMBOL_ABBR,
        out_symbol=abbr not in ("off", "in"),
        adjective=adj if adj in ("on", "yes", "y", "mid") else "",
        disp=disp,
        us=(r.param(tpl, "sp") or "").lower() == "us",
        sigfig=r.param(tpl, "sigfig"),
    )


def _join_range(texts: list[str], seps: list[str], symbol: bool, unit_text: str) -> str:
    """``texts`` joined by their range words; an "x" range with symbols repeats the unit."""
    out = texts[0]
    for sep, text in zip(seps, texts[1:]):
        if sep in _TIMES and symbol and unit_text:
            out += f" {unit_text}"
        out += _RANGES[sep][1 if symbol else 0] + text
    return out


def convert(tpl: Template, r: NodeRenderer) -> str:
    """{{convert|VALUE[|RANGE|VALUE...]|UNIT[|OUT UNITS][|PRECISION]|...}}."""
    pos = r.positional(tpl)
    if not pos:
        return ""
    raw_values = [pos[0]]
    seps: list[str] = []
    i = 1
    while i + 1 < len(pos) and pos[i] in _RANGES and parse_number(pos[i + 1]) is not None:
        seps.append(pos[i])
        raw_values.append(pos[i + 1])
        i += 2
    unit_code = pos[i] if i < len(pos) else ""
    rest = pos[i + 1 :]
    options = _options(tpl, r)
    unit = UNITS.get(unit_code)
    parsed = [parse_number(v) for v in raw_values]
    numbers = [n for n in parsed if n is not None]
    if unit is None or len(numbers) < len(parsed):
        shown = [n.text if n is not None else v for n, v in zip(parsed, raw_values)]
        return f"{_join_range(shown, seps, False, '')} {unit_code}".strip()
    # composite input {{convert|5|ft|6|in|m}}: the sub-unit's number and unit follow
    sub_number = parse_number(rest[0]) if len(rest) >= 2 else None
    sub_unit = UNITS.get(rest[1]) if len(rest) >= 2 else None
    if (
        len(numbers) == 1
        and sub_number is not None
        and sub_unit is not None
        and sub_unit.dimension == unit.dimension
        and unit.dimension != "temperature"
    ):
        return _composite(numbers[0], unit_code, sub_number, rest[1], rest[2:], options)
    return _render(numbers, seps, unit_code, rest, options)


def _out_settings(rest: list[str]) -> tuple[list[str], int | None]:
    """The output unit codes and an explicit precision from the parameters after the unit."""
    out_unit = ""
    precision: int | None = None
    for item in rest:
        if _INTEGER.fullmatch(item) and precision is None:
            precision = int(item)
        elif not out_unit and item and not item.startswith("-") and precision is None:
            out_unit = item
    return out_unit.split(), precision


def _outputs(
    numbers: list[Number],
    seps: list[str],
    unit_code: str,
    codes: list[str],
    precision: int | None,
    options: _Options,
) -> list[str]:
    unit = UNITS[unit_code]
    outputs: list[str] = []
    for code in codes:
        if code == "ftin" and unit.dimension == "length":
            outputs.append(" to ".join(_feet_inches(n.value, unit_code) for n in numbers))
            continue
        target = UNITS.get(code)
        if target is None or target.dimension != unit.dimension:
            continue
        converted = [convert_value(n.value, unit_code, code) for n in numbers]
        if options.sigfig.isdigit() and int(options.sigfig) > 0:
            prec = max(
                int(options.sigfig) - 1 - math.floor(math.log10(abs(v))) if v else 0 for v in converted
            )
        elif precision is not None:
            prec = precision
        else:
            prec = max(
                output_precision(n.value, n.precision, unit_code, v) for n, v in zip(numbers, converted)
            )
        texts = [format_number(v, prec) for v in converted]
        single = len(texts) == 1 and texts[0] in ("1", "1.0")
        name = (
            target.symbol
            if options.out_symbol
            else _american(target.singular if single else target.plural, options.us)
        )
        outputs.append(f"{_join_range(texts, seps, options.out_symbol, name)} {name}")
    return outputs


def _render(
    numbers: list[Number], seps: list[str], unit_code: str, rest: list[str], options: _Options
) -> str:
    unit = UNITS[unit_code]
    first = numbers[0]
    singular = len(numbers) == 1 and (abs(first.value) == 1 or first.fraction and abs(first.value) < 1)
    if options.in_symbol:
        name = unit.symbol
    else:
        name = _american(unit.singular if singular or options.adjective else unit.plural, options.us)
    number_text = _join_range([n.text for n in numbers], seps, options.in_symbol, name)
    if options.adjective and not options.in_symbol:
        suffix = (
            next((item for item in rest if item.startswith("-") and not _INTEGER.fullmatch(item)), "")
            if options.adjective == "mid"
            else ""
        )
        in_text = f"{number_text}-{name}{suffix}"
    else:
        in_text = f"{number_text} {name}"
    codes, precision = _out_settings(rest)
    outputs = _outputs(numbers, seps, unit_code, codes or unit.default_output.split(), precision, options)
    return _layout(in_text, outputs, options.disp)


def _composite(
    whole: Number, unit_code: str, sub: Number, sub_code: str, rest: list[str], options: _Options
) -> str:
    """{{convert|505|ft|6|in|m|1}}: ``505 feet 6 inches (154.1 m)``."""
    unit, sub_unit = UNITS[unit_code], UNITS[sub_code]
    total = whole.value + sub.value * sub_unit.factor / unit.factor
    if options.in_symbol:
        main, minor = unit.symbol, sub_unit.symbol
    else:
        main = unit.singular if whole.value == 1 else unit.plural
        minor = sub_unit.singular if sub.value == 1 else sub_unit.plural
    in_text = f"{whole.text} {main} {sub.text} {minor}"
    codes, precision = _out_settings(rest)
    number = Number(total, 1 + sub.precision, repr(total), False)
    outputs = _outputs([number], [], unit_code, codes or unit.default_output.split(), precision, options)
    return _layout(in_text, outputs, options.disp)


def _layout(in_text: str, outputs: list[str], disp: str) -> str:
    if not outputs:
        return in_text
    if disp in ("out", "output only"):
        return outputs[0]
    if disp == "or":
        return f"{in_text} or {' or '.join(outputs)}"
    if disp == "flip":
        return f"{outputs[0]} ({in_text})"
    if disp == "comma":
        return f"{in_text}, {', '.join(outputs)}"
    if disp == "sqbr":
        return f"{in_text} [{'; '.join(outputs)}]"
    return f"{in_text} ({'; '.join(outputs)})"


TEMPLATES: RendererTable = entries("convert|cvt|convert/2", convert)
