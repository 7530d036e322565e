"""``{{convert}}`` (and ``{{cvt}}``): ``6.1 kilometres (3.8 mi)``, as Wikipedia's
Module:Convert printed it (the 2016 module that WikiText was rendered with).

Units are :class:`Unit` records, registered under each code the module accepts for them,
with the module's names, symbols and default outputs. Implemented from the module's
documented rules:

* **names and symbols**: by default the input unit is spelled out and the output unit
  abbreviated (``abbr=out``); ``abbr=on|off|in|out|values`` change that, ``disp=or`` spells
  the output too, a few units always show their name (``long tons``, ``acres``) and the
  temperatures their symbol (``°C``) unless ``abbr`` is given; ``disp=flip`` (or
  ``order=flip``) shows the outputs first and swaps ``abbr=in``/``out``, so the first unit
  shown is still the spelled-out one ("40 miles per hour (64 km/h)");
* **default output precision** (:func:`default_precision`): the input's precision (its
  decimals, or minus its trailing zeros) shifted by ``log10(input/output) + log10(2)``, at
  least two significant figures; an integer converted to feet or pounds uses the input
  unit's scale instead, a composite input ending in inches the output unit's scale plus 2;
  temperatures keep three significant figures in kelvin; a range uses the most precise;
* **forms**: ranges (``to``, ``-``, ``x``, ``and``, ``or``, ``+/-``, ...), fractions
  (``3/4``, ``1+1/2``), composite input (``5|ft|6|in``), ``adj=on|mid`` (hyphenated names,
  ``62-foot-4-inch``), ``disp`` (``flip``, ``or``, ``out``, ``comma``, ``sqbr``, ``slash``),
  ``sp=us`` (with the US units' ``U.S.`` names and symbols), ``sigfig``, a positional
  precision and the multiple outputs ``ftin`` and ``stlb`` ("16 st 11 lb");
* **output combinations**: ``km mi`` converts to each unit in turn; a few combination codes
  name other units than their words (``kPa kg/cm2`` shows kgf/cm2); if any part is unknown
  the module gives an error, not the known parts, so the conversion is dropped whole.

Facts (names, symbols, scales, default outputs) are Module:Convert/data's; units whose
default output is an engineering-notation unit (``Moilbbl``: ``e3m3`` or ``e6m3``) have no
default here, so without an explicit output only their input is shown.

An unknown unit, a unit of another kind or anything else this module cannot render exactly
drops the conversion and keeps the input: a number shown is never a wrong one.
"""

from __future__ import annotations

import math
import re
from typing import NamedTuple

from mwparserfromhell.nodes import Template

from .template_api import NodeRenderer, RendererTable, entries, is_yes, template_key


class Unit(NamedTuple):
    """One unit of measurement (a record of Module:Convert's unit table)."""

    dimension: str  # units convert only within a dimension
    factor: float  # size in the dimension's SI base unit (the module's "scale")
    singular: str  # name for one (British spelling)
    plural: str  # name for others
    symbol: str  # abbreviated form
    default_output: str  # space-separated codes converted to when none is given
    small_default: str = ""  # the default output for 0 < value < 3 instead (metres: ftin)
    always_name: bool = False  # shown spelled out even when abbreviated ("usename")
    symbol_unless_abbr: bool = False  # shown as a symbol unless abbr= is given ("usesymbol")
    integer_more_precision: bool = False  # as an output: more precision for integer inputs
    subunit_more_precision: bool = False  # ends a composite input with more precision
    subunits: tuple[tuple[str, int], ...] = ()  # composite input: (sub code, count per unit)
    composite_default: str = ""  # default output of a composite input starting with this
    symbol_us: str = ""  # symbol with sp=us when it differs ("sym_us": U.S. gal)
    singular_us: str = ""  # name for one with sp=us when not the US spelling ("name1_us")


UNITS: dict[str, Unit] = {}
US_SPELLING = ("meter", "liter")  # a unit code spelled this way asks for US spelling


def _define(codes: str, unit: Unit) -> None:
    """Register ``unit`` under each ``;``-separated code (a code is defined once)."""
    for code in codes.split(";"):
        if code in UNITS:
            raise ValueError(f"convert unit code {code!r} defined twice")
        UNITS[code] = unit


def _length(codes: str, factor: float, names: str, symbol: str, default: str, **extra) -> None:
    """A length (or any unit whose names are ``singular/plural``)."""
    _define(codes, _unit("length", factor, names, symbol, default, **extra))


def _unit(dimension: str, factor: float, names: str, symbol: str, default: str, **extra) -> Unit:
    """A :class:`Unit` whose ``names`` are ``singular/plural`` (the plural: singular + "s"
    when not given); ``extra``: the optional fields."""
    singular, _, plural = names.partition("/")
    return Unit(dimension, factor, singular, plural or singular + "s", symbol, default, **extra)


# length
_length("m;metre;metres;meter;meters", 1.0, "metre", "m", "ft", small_default="ftin")
_length("km;kilometre;kilometres;kilometer;kilometers", 1000.0, "kilometre", "km", "mi")
_length("cm;centimetre;centimetres;centimeter;centimeters", 0.01, "centimetre", "cm", "in")
_length("mm;millimetre;millimetres;millimeter;millimeters", 0.001, "millimetre", "mm", "in")
_length(
    "mi;mile;miles",
    1609.344,
    "mile",
    "mi",
    "km",
    subunits=(("ch", 80), ("ft", 5280), ("furlong", 8), ("yd", 1760)),
    composite_default="km",
)
_length(
    "ft;foot;feet",
    0.3048,
    "foot/feet",
    "ft",
    "m",
    integer_more_precision=True,
    subunits=(("in", 12),),
    composite_default="m",
)
_length("in;inch;inches", 0.0254, "inch/inches", "in", "mm", subunit_more_precision=True)
_length("yd;yard;yards", 0.9144, "yard", "yd", "m", subunits=(("ft", 3),), composite_default="m")
_length("nmi", 1852.0, "nautical mile", "nmi", "km mi")
_length("NM", 1852.0, "nautical mile", "NM", "km mi")
_length("shaku", 0.30303030303030304, "shaku/shaku", "shaku", "m", always_name=True)
_length("furlong;furlongs", 201.168, "furlong", "furlong", "ft m")
_length("ch;chain;chains", 20.1168, "chain", "ch", "ft m")
_length("fathom;fathoms", 1.8288, "fathom", "fathom", "ft m")
_length("AU;au", 149597870700.0, "astronomical unit", "AU", "km mi")
_length("ly", 9.4607304725808e15, "light-year", "ly", "AU")
_length("pc", 3.0856775814913673e16, "parsec", "pc", "ly")
# area
_define("km2;sqkm", _unit("area", 1e6, "square kilometre", "km2", "sqmi"))
_define("m2;sqm", _unit("area", 1.0, "square metre", "m2", "sqft"))
_define("cm2", _unit("area", 1e-4, "square centimetre", "cm2", "sqin"))
_define("sqmi;mi2;sq mi", _unit("area", 2589988.110336, "square mile", "sq mi", "km2"))
_define("sqft;ft2;sq ft", _unit("area", 0.09290304, "square foot/square feet", "sq ft", "m2"))
_define("sqfoot", _unit("area", 0.09290304, "square foot/square foot", "sq ft", "m2"))
_define("sqin;in2", _unit("area", 0.00064516, "square inch/square inches", "sq in", "cm2"))
_define("sqyd;yd2", _unit("area", 0.83612736, "square yard", "sq yd", "m2"))
_define("ha;hectare;hectares", _unit("area", 1e4, "hectare", "ha", "acre"))
_define("acre;acres", _unit("area", 4046.8564224, "acre", "acre", "ha", always_name=True))
# volume and flow
_define("m3;cum", _unit("volume", 1.0, "cubic metre", "m3", "cuft"))
_define("km3", _unit("volume", 1e9, "cubic kilometre", "km3", "cumi"))
_define("cm3", _unit("volume", 1e-6, "cubic centimetre", "cm3", "cuin"))
_define("cc", _unit("volume", 1e-6, "cubic centimetre", "cc", "cuin"))
_define("cuft;ft3;cu ft", _unit("volume", 0.028316846592, "cubic foot/cubic feet", "cu ft", "m3"))
_define("cuyd;yd3;cu yd", _unit("volume", 0.764554857984, "cubic yard", "cu yd", "m3"))
_define("cuin;in3;cu in", _unit("volume", 0.000016387064, "cubic inch/cubic inches", "cu in", "cm3"))
_define("cumi;mi3", _unit("volume", 4168181825.440579, "cubic mile", "cu mi", "km3"))
_define("l;litre;litres;liter;liters", _unit("volume", 0.001, "litre", "l", "impgal USgal"))
_define("L", _unit("volume", 0.001, "litre", "L", "impgal USgal"))
_define("ml;millilitre;milliliter", _unit("volume", 1e-6, "millilitre", "ml", "impoz USoz"))
_define(
    "USgal;usgal;gal",
    _unit(
        "volume",
        0.003785411784,
        "US gallon",
        "US gal",
        "l impgal",
        symbol_us="U.S. gal",
        singular_us="U.S. gallon",
    ),
)
_define("U.S.gal", _unit("volume", 0.003785411784, "U.S. gallon", "U.S. gal", "l impgal"))
_define("impgal", _unit("volume", 0.00454609, "imperial gallon", "imp gal", "l USgal"))
_define(
    "USoz;usoz;usfloz;USfloz",
    _unit(
        "volume",
        2.95735295625e-5,
        "US fluid ounce",
        "US fl oz",
        "ml",
        symbol_us="U.S. fl oz",
        singular_us="U.S. fluid ounce",
    ),
)
_define("impoz", _unit("volume", 2.84130625e-5, "imperial fluid ounce", "imp fl oz", "ml USoz"))
_define("acre.ft;acre-ft", _unit("volume", 1233.48183754752, "acre-foot/acre-feet", "acre⋅ft", "m3"))
_define(
    "board feet",
    _unit("volume", 0.0023597372167, "board foot/board feet", "board foot", "m3", always_name=True),
)
_define(
    "board foot",
    _unit("volume", 0.0023597372167, "board foot/board foot", "board foot", "m3", always_name=True),
)
# oil barrels (Moilbbl, Goilbbl, Toilbbl: default e3m3 or e6m3, engineering notation: none here)
_define("oilbbl", _unit("volume", 0.158987294928, "barrel", "bbl", "m3"))
_define("Moilbbl", _unit("volume", 158987.294928, "million barrels/million barrels", "Mbbl", ""))
_define("Goilbbl", _unit("volume", 158987294.928, "billion barrels/billion barrels", "Gbbl", ""))
_define("Toilbbl", _unit("volume", 158987294928.0, "trillion barrels/trillion barrels", "Tbbl", ""))
_define(
    "cuft/s;ft3/s",
    _unit(
        "flow",
        0.028316846592,
        "cubic foot per second/cubic feet per second",
        "cu ft/s",
        "m3/s",
        symbol_unless_abbr=True,  # WikiText-2: "181 @,@ 800 cu ft / s ( 5 @,@ 150 m3 / s )"
    ),
)
_define(
    "m3/s",
    _unit(
        "flow",
        1.0,
        "cubic metre per second/cubic metres per second",
        "m3/s",
        "cuft/s",
        symbol_unless_abbr=True,
    ),
)
_define("oilbbl/d", _unit("flow", 1.8401307283333336e-6, "barrel per day/barrels per day", "bbl/d", "m3/d"))
_define(
    "koilbbl/d",
    _unit("flow", 0.0018401307283333335, "thousand barrels per day/thousand barrels per day", "kbbl/d", ""),
)
_define(
    "Moilbbl/d",
    _unit("flow", 1.8401307283333335, "million barrels per day/million barrels per day", "Mbbl/d", ""),
)
_define(
    "m3/d", _unit("flow", 1.1574074074074073e-5, "cubic metre per day/cubic metres per day", "m3/d", "cuft/d")
)
_define(
    "cuft/d;ft3/d",
    _unit("flow", 3.2774128000000003e-7, "cubic foot per day/cubic feet per day", "cu ft/d", "m3/d"),
)
# mass
_define("kg;kilogram;kilograms", _unit("mass", 1.0, "kilogram", "kg", "lb"))
_define("g;gram;grams", _unit("mass", 0.001, "gram", "g", "oz"))
_define("mg;milligram;milligrams", _unit("mass", 1e-6, "milligram", "mg", "gr"))
_define("gr;grain;grains", _unit("mass", 0.00006479891, "grain", "gr", "g"))
_define("t;tonne;tonnes", _unit("mass", 1000.0, "tonne", "t", "LT ST"))
_define("MT;metric ton;metric tons", _unit("mass", 1000.0, "metric ton", "t", "LT ST"))
_define("Mt;megatonne", _unit("mass", 1e9, "megatonne", "Mt", "LT ST"))
_define("kt;kilotonne", _unit("mass", 1e6, "kilotonne", "kt", "LT ST"))
_define("LT;long ton;long tons", _unit("mass", 1016.0469088, "long ton", "LT", "t", always_name=True))
_define("ST;short ton;short tons", _unit("mass", 907.18474, "short ton", "ST", "t", always_name=True))
_define("lt", _unit("mass", 1016.0469088, "long ton", "LT", "t"))
_define(
    "lb;lbs;pound;pounds",
    _unit(
        "mass",
        0.45359237,
        "pound",
        "lb",
        "kg",
        integer_more_precision=True,
        subunits=(("oz", 16),),
        composite_default="kg",
    ),
)
_define("oz;ounce;ounces", _unit("mass", 0.028349523125, "ounce", "oz", "g"))
_define("ozt", _unit("mass", 0.0311034768, "troy ounce", "ozt", "oz g"))
_define(
    "st;stone",
    _unit("mass", 6.35029318, "stone/stone", "st", "lb kg", subunits=(("lb", 14),), composite_default="kg"),
)
_define("long cwt", _unit("mass", 50.80234544, "long hundredweight/long hundredweight", "long cwt", "lb kg"))
# speed
_define("km/h;kph", _unit("speed", 1 / 3.6, "kilometre per hour/kilometres per hour", "km/h", "mph"))
_define("mph", _unit("speed", 0.44704, "mile per hour/miles per hour", "mph", "km/h"))
_define("mi/h", _unit("speed", 0.44704, "mile per hour/miles per hour", "mi/h", "km/h"))
_define("kn;knot;knots", _unit("speed", 1852 / 3600, "knot", "kn", "km/h mph"))
_define("m/s", _unit("speed", 1.0, "metre per second/metres per second", "m/s", "ft/s"))
_define("ft/s", _unit("speed", 0.3048, "foot per second/feet per second", "ft/s", "m/s"))
_define("km/s", _unit("speed", 1000.0, "kilometre per second/kilometres per second", "km/s", "mi/s"))
_define("mi/s", _unit("speed", 1609.344, "mile per second/miles per second", "mi/s", "km/s"))
# power, force, energy
_HORSEPOWER = 745.69987158227022
_define("hp", _unit("power", _HORSEPOWER, "horsepower/horsepower", "hp", "kW"))
_define("shp", _unit("power", _HORSEPOWER, "shaft horsepower/shaft horsepower", "shp", "kW"))
_define("ihp", _unit("power", _HORSEPOWER, "indicated horsepower/indicated horsepower", "ihp", "kW"))
_define("bhp", _unit("power", _HORSEPOWER, "brake horsepower/brake horsepower", "bhp", "kW"))
_define("PS", _unit("power", 735.49875, "metric horsepower/metric horsepower", "PS", "kW hp"))
_define("W", _unit("power", 1.0, "watt", "W", "hp"))
_define("kW", _unit("power", 1000.0, "kilowatt", "kW", "hp"))
_define("MW", _unit("power", 1e6, "megawatt", "MW", "hp"))
_define("N", _unit("force", 1.0, "newton", "N", "lbf"))
_define("kN", _unit("force", 1000.0, "kilonewton", "kN", "lbf"))
_define("lbf", _unit("force", 4.4482216152605, "pound-force/pounds-force", "lbf", "N"))
_define("kgf", _unit("force", 9.80665, "kilogram-force/kilograms-force", "kgf", "N"))
_define(
    "STf", _unit("force", 8896.443230521, "short ton-force/short tons-force", "STf", "kN", always_name=True)
)
_POUND_FOOT = 1.3558179483314004
_define("lbft", _unit("torque", _POUND_FOOT, "pound-foot/pound-feet", "lb⋅ft", "Nm"))
_define("lbfft", _unit("torque", _POUND_FOOT, "pound force-foot/pound force-feet", "lbf⋅ft", "Nm"))
_define("Nm", _unit("torque", 1.0, "newton-metre", "N⋅m", "lbfft"))
_define("J", _unit("energy", 1.0, "joule", "J", "cal"))
_define("kJ", _unit("energy", 1000.0, "kilojoule", "kJ", "cal"))
_define("cal", _unit("energy", 4.184, "calorie", "cal", "J"))
_define("kcal", _unit("energy", 4184.0, "kilocalorie", "kcal", "kJ"))
_define("W.h", _unit("energy", 3600.0, "watt-hour", "W⋅h", "kJ"))
# temperature: converted through kelvin (factor: kelvin per degree; offset in _KELVIN_AT_ZERO)
_define(
    "C;°C;Celsius",
    _unit("temperature", 1.0, "degree Celsius/degrees Celsius", "°C", "F", symbol_unless_abbr=True),
)
_define(
    "F;°F;Fahrenheit",
    _unit("temperature", 5 / 9, "degree Fahrenheit/degrees Fahrenheit", "°F", "C", symbol_unless_abbr=True),
)
_define("K", _unit("temperature", 1.0, "kelvin", "K", "C F", symbol_unless_abbr=True))
_KELVIN_AT_ZERO = {"°C": 273.15, "°F": 273.15 - 32 * 5 / 9, "K": 0.0}
# a temperature difference converts by the scale alone
_define(
    "C-change",
    _unit(
        "temperature change",
        1.0,
        "degree Celsius change/degrees Celsius change",
        "°C",
        "F-change",
        symbol_unless_abbr=True,
    ),
)
_define(
    "F-change",
    _unit(
        "temperature change",
        5 / 9,
        "degree Fahrenheit change/degrees Fahrenheit change",
        "°F",
        "C-change",
        symbol_unless_abbr=True,
    ),
)
# pressure
_define("Pa", _unit("pressure", 1.0, "pascal", "Pa", "psi"))
_define("hPa", _unit("pressure", 100.0, "hectopascal", "hPa", "inHg"))
_define("kPa", _unit("pressure", 1000.0, "kilopascal", "kPa", "psi"))
_define("MPa", _unit("pressure", 1e6, "megapascal", "MPa", "psi"))
_define("mbar", _unit("pressure", 100.0, "millibar", "mbar", "inHg"))
_define("mb", _unit("pressure", 100.0, "millibar", "mb", "inHg"))
_define("bar", _unit("pressure", 1e5, "bar", "bar", "kPa psi"))
_define(
    "psi", _unit("pressure", 6894.757293168, "pound per square inch/pounds per square inch", "psi", "kPa")
)
_define("atm", _unit("pressure", 101325.0, "standard atmosphere", "atm", "kPa"))
_define("inHg", _unit("pressure", 3386.388640341, "inch of mercury/inches of mercury", "inHg", "kPa"))
_define(
    "mmHg", _unit("pressure", 133.322387415, "millimetre of mercury/millimetres of mercury", "mmHg", "kPa")
)
_define(
    "kgf/cm2",
    _unit(
        "pressure",
        98066.5,
        "kilogram-force per square centimetre/kilograms-force per square centimetre",
        "kgf/cm2",
        "psi",
    ),
)
_define(
    "kg/cm2",
    _unit(
        "pressure", 98066.5, "kilogram per square centimetre/kilograms per square centimetre", "kg/cm2", "psi"
    ),
)
# density
_define(
    "kg/m3", _unit("density", 1.0, "kilogram per cubic metre/kilograms per cubic metre", "kg/m3", "lb/cuft")
)
_define(
    "lb/cuft",
    _unit("density", 16.018463373960138, "pound per cubic foot/pounds per cubic foot", "lb/cu ft", "kg/m3"),
)
_define(
    "g/cm3",
    _unit("density", 1000.0, "gram per cubic centimetre/grams per cubic centimetre", "g/cm3", "lb/cuin"),
)
_define(
    "lb/cuin",
    _unit("density", 27679.904710203125, "pound per cubic inch/pounds per cubic inch", "lb/cu in", "g/cm3"),
)
# linear density, per unit area, gradient
_define("kg/m", _unit("linear density", 1.0, "kilogram per metre/kilograms per metre", "kg/m", "lb/yd"))
_define(
    "lb/yd", _unit("linear density", 0.49605464785651798, "pound per yard/pounds per yard", "lb/yd", "kg/m")
)
_define(
    "/sqkm;/km2", _unit("per unit area", 1e-6, "per square kilometre/per square kilometre", "/km2", "/sqmi")
)
_define(
    "/sqmi",
    _unit("per unit area", 3.8610215854244582e-7, "per square mile/per square mile", "/sq mi", "/sqkm"),
)
_define("m/km", _unit("gradient", 0.001, "metre per kilometre/metres per kilometre", "m/km", "ft/mi"))
# default: cm/km below 5.28 ft/mi, else m/km (a default by value): none here
_define("ft/mi", _unit("gradient", 0.00018939393939393939, "foot per mile/feet per mile", "ft/mi", ""))


class Multiple(NamedTuple):
    """An output in two units, the larger first ("5 ft 11 in"): one of the module's
    combinations with a ``multiple``."""

    large: str  # code of the larger unit
    small: str  # code of the smaller unit, the one the value is rounded in
    size: int  # small units in one large


MULTIPLES: dict[str, Multiple] = {
    "ftin": Multiple("ft", "in", 12),
    "stlb": Multiple("st", "lb", 14),
}
# output combination codes whose parts are other codes than their words
COMBINATIONS: dict[str, str] = {"kPa kg/cm2": "kPa kgf/cm2"}

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
_NUMBER = re.compile(r"^[-+−]?(?:\d+(?:,\d{3})*(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?$")
_FRACTION = re.compile(r"^([-+−]?)(?:(\d+)\+)?(\d+)/(\d+)$")
MINUS = "−"
FUDGE = 1e-14  # Module:Convert adds this before taking a floor of a log10


class Number(NamedTuple):
    """A parsed input number."""

    value: float
    precision: float  # the module's: decimals; minus trailing zeros; log10 of a denominator
    text: str  # as Wikipedia shows it (thousands separators, fraction slash, minus sign)
    singular: bool  # names a unit in the singular: exactly 1, or a fraction up to 1
    integral: bool  # written without decimals or fraction ("12", not "12.0")


def group_digits(digits: str) -> str:
    """``12345.678`` -> ``12,345.678``: commas in an integer part of four digits or more."""
    whole, dot, decimals = digits.partition(".")
    if len(whole) >= 4:
        whole = f"{int(whole):,}"
    return whole + dot + decimals


def parse_number(text: str) -> Number | None:
    """The number ``text`` (``1,200``, ``6.1``, ``1.5e6``, ``3/4``, ``1+1/2``), or None."""
    text = text.strip().replace(MINUS, "-")
    fraction = _FRACTION.match(text)
    if fraction is not None:
        sign, whole, numerator, denominator = fraction.groups()
        if int(denominator) == 0:
            return None
        value = int(whole or 0) + int(numerator) / int(denominator)
        shown = f"{whole + ' ' if whole else ''}{numerator}\u2044{denominator}"
        negative = sign == "-"
        return Number(
            -value if negative else value,
            max(math.log10(int(denominator)), 1.0),
            (MINUS if negative else "") + shown,
            value <= 1,
            False,
        )
    if not _NUMBER.match(text):
        return None
    clean = text.replace(",", "")
    sign = MINUS if clean.startswith("-") else "+" if clean.startswith("+") else ""
    clean = clean.lstrip("+-")
    mantissa, _, exponent = clean.lower().partition("e")
    whole, dot, decimals = mantissa.partition(".")
    precision = len(decimals) if dot else -(len(whole) - len(whole.rstrip("0")))
    value = float(clean)
    signed = -value if sign == MINUS else value
    if exponent:  # 1.5e6 reads "1.5×106", as {{e}} prints it flattened
        power = int(exponent)
        shown = f"{sign}{mantissa}×10{MINUS if power < 0 else ''}{abs(power)}"
        return Number(signed, precision - power, shown, value == 1, False)
    return Number(signed, precision, sign + group_digits(mantissa), value == 1, not dot)


# ---- conversion, precision and number formatting -------------------------------------------


def lookup(code: str) -> Unit | None:
    """The unit of a code (``board_feet`` and ``board  feet`` read as ``board feet``)."""
    return UNITS.get(re.sub(r"[_ ]+", " ", code).strip())


def convert_value(value: float, source: Unit, target: Unit) -> float:
    """``value`` in ``source`` units expressed in ``target`` units (same dimension)."""
    if source.dimension == "temperature":
        kelvin = value * source.factor + _KELVIN_AT_ZERO[source.symbol]
        return (kelvin - _KELVIN_AT_ZERO[target.symbol]) / target.factor
    return value * source.factor / target.factor


def default_precision(
    value: float, precision: float, source: Unit, target: Unit, out: float, *, composite: bool = False
) -> int:
    """Module:Convert's default output precision (decimals; negative: tens, hundreds, ...).

    ``precision`` is the input's (:attr:`Number.precision`); ``out`` the converted value. The
    input's precision is shifted by ``log10(value / out) + log10(2)`` (an integer converted to
    a unit marked ``integer_more_precision``, feet or pounds: by minus the log10 of the input
    unit's scale; a composite input ending in a ``subunit_more_precision`` unit, inches: by
    the log10 of the output unit's scale plus 2), floored, and kept to at least two
    significant figures; temperatures keep three significant figures in kelvin.
    """
    out = abs(out)
    if source.dimension == "temperature":
        kelvin = abs(convert_value(value, source, UNITS["K"]))
        minimum = 2 if kelvin < 1e-8 else 2 - math.floor(math.log10(kelvin) + FUDGE)
        adjust = 0.0
    else:
        if value == 0 or out == 0:
            return 0
        if target.integer_more_precision and float(value).is_integer():
            adjust = -math.log10(source.factor)
        elif composite and source.subunit_more_precision:
            adjust = math.log10(target.factor) + 2
        else:
            adjust = math.log10(abs(value / out))
        adjust += math.log10(2)
        minimum = 1 - math.floor(math.log10(out) + FUDGE)
    return max(math.floor(precision + adjust), minimum)


def sigfig_precision(value: float, figures: int) -> int:
    """The decimals that round ``value`` to ``figures`` significant figures."""
    if value == 0:
        return max(figures - 1, 0)
    exponent = math.floor(math.log10(abs(value)) + FUDGE)
    precision = figures - 1 - exponent
    if abs(float(format_rounded(value, precision).replace(",", "").lstrip(MINUS))) >= 10 ** (exponent + 1):
        precision -= 1  # 0.9999 to three figures is 1.00, not 1.000
    return precision


def format_rounded(value: float, precision: int) -> str:
    """``value`` rounded to ``precision`` decimals (negative: to tens, hundreds, ...), with
    thousands separators and a minus sign unless it rounds to zero, as the module shows an
    output (``%.Nf`` of the value plus 2e-14 up to 8 decimals; of value / 10^-N below 0)."""
    magnitude = abs(value)
    if precision >= 0:
        digits = f"{magnitude + (2e-14 if precision <= 8 else 0.0):.{precision}f}"
    else:
        digits = f"{magnitude / 10**-precision:.0f}"
        digits = digits + "0" * -precision if digits != "0" else "0"
    negative = value < 0 and digits.strip("0.") != ""
    return (MINUS if negative else "") + group_digits(digits)


def is_one(text: str) -> bool:
    """An output shown as 1 (``1``, ``1.0``), which names its unit in the singular."""
    return re.fullmatch(r"1(?:\.0*)?", text) is not None


_AMERICAN_NAMES = {"tonne": "metric ton", "tonnes": "metric tons"}


def american(name: str) -> str:
    """A unit name in US spelling (``sp=us``): metre -> meter, litre -> liter, tonne ->
    metric ton (Template:Convert: "{{convert|3|tonne|lb|sp=us}}" gives "3 metric tons")."""
    return _AMERICAN_NAMES.get(name) or name.replace("metre", "meter").replace("litre", "liter")


# ---- options and unit names --------------------------------------------------------------

_ABBREVIATIONS = {
    "on": "on",
    "unit": "on",
    "off": "off",
    "in": "in",
    "out": "out",
    "values": "values",
    "mos": "out",
}
_SWAPPED = {"in": "out", "out": "in"}


class Options(NamedTuple):
    """The named parameters of one {{convert}}, resolved as Module:Convert resolves them."""

    abbr: str  # "on", "off", "in", "out" (the side abbreviated) or "values" (no units)
    abbr_given: bool  # abbr= was given (a cvt counts as abbr=on)
    names_wanted: bool  # disp=or / slash without abbr=: the outputs are spelled out too
    adjective: bool  # adj=on (or sing=on, adj=mid): "10-mile"
    mid: bool  # adj=mid: a text after the output unit goes after the input's name
    flip: bool  # disp=flip or order=flip: the outputs first, the input in brackets
    disp: str
    us: bool  # sp=us, or a unit code spelled the US way ("meters")
    sigfig: int | None


def options(tpl: Template, r: NodeRenderer, unit_code: str) -> Options:
    """The options of ``tpl`` (whose input unit code is ``unit_code``)."""
    abbr = (r.param(tpl, "abbr") or ("on" if template_key(str(tpl.name)) == "cvt" else "")).lower()
    given = abbr in _ABBREVIATIONS
    abbr = _ABBREVIATIONS.get(abbr, "out")
    disp = (r.param(tpl, "disp") or "").lower()
    flip = disp == "flip" or (r.param(tpl, "order") or "").lower() == "flip"
    adj = (r.param(tpl, "adj") or ("on" if is_yes(r.param(tpl, "sing")) else "")).lower()
    sigfig = r.param(tpl, "sigfig")
    return Options(
        abbr=_SWAPPED.get(abbr, abbr) if flip else abbr,
        abbr_given=given,
        names_wanted=not given and disp in ("or", "slash", "/"),
        adjective=adj in ("on", "yes", "y", "mid"),
        mid=adj == "mid",
        flip=flip,
        disp=disp,
        us=(r.param(tpl, "sp") or "").lower() == "us" or any(us in unit_code for us in US_SPELLING),
        sigfig=int(sigfig) if sigfig.isdigit() and int(sigfig) > 0 else None,
    )


def unit_id(unit: Unit, side: str, singular: bool, opts: Options) -> tuple[str, bool]:
    """The name or symbol of ``unit`` on ``side`` ("in" or "out"), and whether it is a
    name ("" with abbr=values); names are hyphenated in the adjectival form."""
    if opts.abbr == "values":
        return "", False
    if unit.always_name:
        named = True
    elif not opts.abbr_given and unit.symbol_unless_abbr:
        named = False
    elif not opts.abbr_given and opts.names_wanted:
        named = True
    else:
        named = opts.abbr not in ("on", side)
    if not named:
        return (unit.symbol_us if opts.us and unit.symbol_us else unit.symbol), False
    if opts.us and unit.singular_us:
        name = unit.singular_us + ("" if singular or opts.adjective else "s")
    else:
        name = unit.singular if singular or opts.adjective else unit.plural
        name = american(name) if opts.us else name
    return (name.replace(" ", "-") if opts.adjective else name), True


def quantity(texts: list[str], seps: list[str], ident: tuple[str, bool], opts: Options, mid: str = "") -> str:
    """Numbers joined by their range words, then the unit: ``2 to 5 kilometres``,
    ``7 mm × 26 mm``, the adjectival ``400-to-500-tonne``."""
    name, named = ident
    hyphenated = opts.adjective and named
    space = "" if name.startswith("/") else " "  # "1,982/km2", as the module omits it
    out = texts[0]
    for sep, text in zip(seps, texts[1:]):
        word = _RANGES[sep][0 if named else 1]
        if hyphenated:
            word = word.replace(" ", "-")
        elif word == "–" and text.startswith(MINUS):
            word = " – "
        if sep in _TIMES and name and not named:
            out += f"{space}{name}"
        out += word + text
    if not name:
        return out
    return f"{out}-{name}{mid}" if hyphenated else f"{out}{space}{name}{mid}"


# ---- outputs -----------------------------------------------------------------------------


def _output(
    numbers: list[Number],
    seps: list[str],
    source: Unit,
    code: str,
    precision: int | None,
    opts: Options,
    *,
    composite: bool,
    mid: str,
) -> str | None:
    """One output unit's text (``3.8 mi``), or None when ``code`` is no unit of the input's
    kind; ``composite``: the input is composite; ``mid``: the adj=mid text on this side."""
    target = lookup(code)
    if target is None or target.dimension != source.dimension:
        return None
    values = [convert_value(n.value, source, target) for n in numbers]
    precisions = _precisions(numbers, values, source, target, precision, opts, composite)
    texts = [format_rounded(v, p) for v, p in zip(values, precisions)]
    ident = unit_id(target, "out", is_one(texts[-1].lstrip(MINUS)), opts)
    return quantity(texts, seps, ident, opts, mid)


def _precisions(
    numbers: list[Number],
    values: list[float],
    source: Unit,
    target: Unit,
    precision: int | None,
    opts: Options,
    composite: bool,
) -> list[int]:
    """The rounding of each output value: ``sigfig=``, else the explicit precision, else
    the default precision of the most precise value of a range."""
    if opts.sigfig is not None:
        return [sigfig_precision(v, opts.sigfig) for v in values]
    if precision is None:
        precision = max(
            default_precision(n.value, n.precision, source, target, v, composite=composite)
            for n, v in zip(numbers, values)
        )
    return [precision] * len(values)


def _multiple(
    numbers: list[Number],
    seps: list[str],
    source: Unit,
    multiple: Multiple,
    precision: int | None,
    opts: Options,
    *,
    composite: bool,
    mid: str,
) -> str | None:
    """A multiple output (``5 ft 11 in``, ``16 st 11 lb``): rounded in the small unit (the
    module's precision of that output; whole units unless that has decimals), then split."""
    small = UNITS[multiple.small]
    if source.dimension != small.dimension:
        return None
    values = [convert_value(n.value, source, small) for n in numbers]
    precisions = _precisions(numbers, values, source, small, precision, opts, composite)
    texts = [_multiple_text(v, p, multiple, opts) for v, p in zip(values, precisions)]
    named = unit_id(small, "out", False, opts)[1]
    return quantity(texts, seps, ("", named), opts) + mid


def _multiple_text(value: float, precision: int, multiple: Multiple, opts: Options) -> str:
    """One value of a multiple output, in small units; "0 in" is shown after feet, "0 ft"
    never."""
    sign = MINUS if value < 0 else ""
    value = abs(value)
    if precision > 0:
        rounded = float(f"{value + 2e-14:.{precision}f}")
        large = int(rounded // multiple.size)
        rest = f"{rounded - multiple.size * large:.{precision}f}"
    else:
        large, whole = divmod(math.floor(value + 0.5), multiple.size)
        rest = str(whole)
    small_id, named = unit_id(UNITS[multiple.small], "out", is_one(rest), opts)
    sep = "-" if opts.adjective and named else " "
    small_text = f"{rest}{sep}{small_id}" if small_id else rest
    if large == 0:
        return sign + small_text
    large_id = unit_id(UNITS[multiple.large], "out", large == 1, opts)[0]
    large_text = f"{large:,}{sep}{large_id}" if large_id else f"{large:,}"
    return f"{sign}{large_text}{sep}{small_text}"


def _output_codes(code: str) -> list[str]:
    """The output units of an output code: one unit (``sq mi``, ``ftin``) or several
    (``km mi``, ``m+ft``, ``kg stlb``, the combination ``kPa kg/cm2``); none when a part is
    no unit code (``furlongs per fortnight``): the module then shows an error, not the
    known parts."""
    code = re.sub(r"[_ ]+", " ", code).strip()
    code = COMBINATIONS.get(code, code)
    if code in UNITS or code in MULTIPLES:
        return [code]
    parts = [part for part in re.split(r"\s*\+\s*|\s+", code) if part]
    return parts if all(part in UNITS or part in MULTIPLES for part in parts) else []


def _outputs(
    numbers: list[Number],
    seps: list[str],
    source: Unit,
    codes: list[str],
    precision: int | None,
    opts: Options,
    *,
    composite: bool,
    mid: str,
) -> list[str]:
    """The texts of the output units that can be rendered (the others are dropped)."""
    if source.dimension == "temperature" and "+/-" in seps:
        return []  # "20 ± 5 °C": the 5 is a change, not a temperature
    found = []
    for code in codes:
        if code in MULTIPLES:
            multiple = MULTIPLES[code]
            text = _multiple(numbers, seps, source, multiple, precision, opts, composite=composite, mid=mid)
        else:
            text = _output(numbers, seps, source, code, precision, opts, composite=composite, mid=mid)
        if text:
            found.append(text)
    return found


def _layout(in_text: str, outputs: list[str], opts: Options) -> str:
    """The input and its conversions as ``disp=`` and ``order=`` arrange them."""
    if not outputs:
        return in_text
    if opts.disp in ("out", "output only"):
        return "; ".join(outputs)
    if opts.flip:
        return f"{'; '.join(outputs)} ({in_text})"
    if opts.disp == "or":
        return f"{in_text} or {' or '.join(outputs)}"
    if opts.disp == "comma":
        return f"{in_text}, {', '.join(outputs)}"
    if opts.disp == "sqbr":
        return f"{in_text} [{'; '.join(outputs)}]"
    if opts.disp in ("slash", "/"):
        return f"{in_text} / {'; '.join(outputs)}"
    return f"{in_text} ({'; '.join(outputs)})"


# ---- reading the parameters --------------------------------------------------------------


def _split_values(pos: list[str]) -> tuple[list[str], list[str], int]:
    """The input values and range words at the start of ``pos``, and the index after them."""
    raw, seps, i = [pos[0]], [], 1
    while i + 1 < len(pos) and pos[i] in _RANGES and parse_number(pos[i + 1]) is not None:
        seps.append(pos[i])
        raw.append(pos[i + 1])
        i += 2
    return raw, seps, i


def _composite(first: Number, unit: Unit, rest: list[str]) -> tuple[list[tuple[Number, Unit]], list[str]]:
    """``5|ft|6|in``: the (number, unit) parts of a composite input (one part when there
    is none) and the parameters after it."""
    parts = [(first, unit)]
    while len(rest) >= 2:
        number, sub = parse_number(rest[0]), lookup(rest[1])
        if number is None or sub is None or sub not in {lookup(code) for code, _ in unit.subunits}:
            break
        parts.append((number, sub))
        unit, rest = sub, rest[2:]
    return parts, rest


def _composite_total(parts: list[tuple[Number, Unit]]) -> Number:
    """A composite input as one number of its last (smallest) unit, with the precision of
    the last part's text (an integer counts as 0 decimals, not minus its trailing zeros)."""
    total = parts[0][0].value
    for (number, sub), (_, unit) in zip(parts[1:], parts):
        count = dict((lookup(code), n) for code, n in unit.subunits)[sub]
        total = total * count + number.value
    last = parts[-1][0]
    return Number(total, 0.0 if last.integral else last.precision, "", total == 1, float(total).is_integer())


def _is_number(text: str) -> bool:
    """``text`` reads as a number (where Module:Convert expects a precision)."""
    try:
        float(text)
    except ValueError:
        return False
    return True


def _output_settings(rest: list[str], mid_wanted: bool) -> tuple[str, int | None, str]:
    """From the parameters after the input: the output unit code ('' for the default), an
    explicit precision (None for the default) and the adj=mid text (``-long``, `` long``).
    A number where a precision goes that is not an integer is ignored, as the module does."""
    out_code, precision, i = "", None, 0
    if rest and not _is_number(rest[0]):
        out_code, i = rest[0], 1
    if i < len(rest) and _is_number(rest[i]):
        precision, i = (int(rest[i]) if _INTEGER.fullmatch(rest[i]) else None), i + 1
    mid = ""
    if mid_wanted and i < len(rest):
        mid = rest[i] if rest[i].startswith("-") else f" {rest[i]}"
        i += 1
    if precision is None and i < len(rest) and _INTEGER.fullmatch(rest[i]):
        precision = int(rest[i])
    return out_code, precision, mid


def _default_codes(parts: list[tuple[Number, Unit]]) -> list[str]:
    """The default output units of an input (of its first value)."""
    first, unit = parts[0]
    if len(parts) > 1 and unit.composite_default:
        return unit.composite_default.split()
    if unit.small_default and 0 < first.value < 3:
        return unit.small_default.split()
    return unit.default_output.split()


_PLAIN = Options("out", False, False, False, False, False, "", False, None)


def convert(tpl: Template, r: NodeRenderer) -> str:
    """{{convert|VALUE[|RANGE|VALUE...]|UNIT[|VALUE|SUBUNIT...][|OUT UNITS][|PRECISION]|...}}."""
    pos = r.positional(tpl)
    if not pos:
        return ""
    raw, seps, i = _split_values(pos)
    code = pos[i] if i < len(pos) else ""
    parsed = [parse_number(value) for value in raw]
    numbers = [n for n in parsed if n is not None]
    source = lookup(code)
    if source is None or len(numbers) < len(parsed):  # the input as given, unconverted
        shown = [n.text if n is not None else value for n, value in zip(parsed, raw)]
        return quantity(shown, seps, (code, True), _PLAIN)
    opts = options(tpl, r, code)
    parts, rest = (
        _composite(numbers[0], source, pos[i + 1 :]) if not seps else ([(numbers[0], source)], pos[i + 1 :])
    )
    out_code, precision, mid = _output_settings(rest, opts.mid)
    in_mid, out_mid = ("", mid) if opts.flip else (mid, "")
    if len(parts) > 1:
        in_text = _composite_text(parts, opts) + in_mid
        if any(number.value < 0 for number, _ in parts):
            return in_text  # is "−5 feet 6 inches" −5.5 feet or −4.5? No number is better than a wrong one
        numbers, source = [_composite_total(parts)], parts[-1][1]
    else:
        in_text = quantity(
            [n.text for n in numbers], seps, unit_id(source, "in", numbers[-1].singular, opts), opts, in_mid
        )
    codes = _output_codes(out_code) if out_code else _default_codes(parts)
    outputs = _outputs(numbers, seps, source, codes, precision, opts, composite=len(parts) > 1, mid=out_mid)
    return _layout(in_text, outputs, opts)


def _composite_text(parts: list[tuple[Number, Unit]], opts: Options) -> str:
    """``62 feet 4 inches``, adjectival ``62-foot-4-inch``, abbreviated ``62 ft 4 in``."""
    named = unit_id(parts[0][1], "in", False, opts)[1]
    sep = "-" if opts.adjective and named else " "
    texts = []
    for number, unit in parts:
        name = unit_id(unit, "in", number.singular, opts)[0]
        texts.append(f"{number.text}{sep}{name}" if name else number.text)
    return sep.join(texts)


TEMPLATES: RendererTable = entries("convert|cvt|convert/2", convert)
