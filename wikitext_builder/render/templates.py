"""Renderers of the templates that print text, other than {{convert}} and the language
templates: formatting wrappers, punctuation, dates, ship names, quotations, numbers and
currencies, math, and a few link templates. Every template not in a table is dropped.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from mwparserfromhell.nodes import Template

from .markers import APOSTROPHE, FORMULA, PARA_BREAK, verse
from .template_api import (
    NodeRenderer,
    RendererTable,
    TemplateRenderer,
    constant,
    entries,
    first,
    is_yes,
    last,
    second,
)


def _formula(tpl: Template, r: NodeRenderer) -> str:
    return FORMULA


def _block_quote(tpl: Template, r: NodeRenderer) -> str:
    """Quotations: the quoted text as a paragraph of its own."""
    text = r.param(tpl, "text") or r.param(tpl, "quote") or first(tpl, r)
    return PARA_BREAK + text + PARA_BREAK if text else ""


def _poem_quote(tpl: Template, r: NodeRenderer) -> str:
    """{{poem quote}}: a quotation of verse, each of its lines a line of its own."""
    return verse(r.param(tpl, "text") or first(tpl, r))


def _sic(tpl: Template, r: NodeRenderer) -> str:
    """{{sic}} -> [sic]; {{sic|word}} -> word [sic]; {{sic|?|word}} -> word [sic?];
    ``hide=y`` prints the word alone (WikiText-2 has "[ sic ]" 32 times)."""
    pos = r.positional(tpl)
    mark = "[sic]"
    if pos and pos[0] == "?":
        mark, pos = "[sic?]", pos[1:]
    text = "".join(pos)
    if is_yes(r.param(tpl, "hide")):
        return text
    return f"{text} {mark}" if text else mark


_MUSIC_SYMBOLS = {
    "sharp": "♯",
    "#": "♯",
    "flat": "♭",
    "b": "♭",
    "natural": "♮",
    "n": "♮",
    "doublesharp": "𝄪",
    "x": "𝄪",
    "doubleflat": "𝄫",
    "bb": "𝄫",
    "treble": "𝄞",
    "bass": "𝄢",
    "alto": "𝄡",
    "coda": "𝄌",
    "segno": "𝄋",
    "fermata": "𝄐",
    "common": "𝄴",
    "cut": "𝄵",
    "crotchet": "♩",
    "quarter": "♩",
    "quaver": "♪",
    "eighth": "♪",
    "beamed": "♫",
}


def _music(tpl: Template, r: NodeRenderer) -> str:
    """{{music|sharp}} -> ♯ (Mothers of the Disappeared, dev pair: "F{{music|sharp}}m" reads
    "F ♯ m" in WikiText-2)."""
    return _MUSIC_SYMBOLS.get(first(tpl, r).lower(), "")


def _youtube(tpl: Template, r: NodeRenderer) -> str:
    """``{{YouTube|id=..|title=T}}``: "T on YouTube" (title defaults to the page name)."""
    title = r.param(tpl, "title") or second(tpl, r) or r.title
    return f"{title} on YouTube"


def _imslp(tpl: Template, r: NodeRenderer) -> str:
    """``{{IMSLP|id=..|cname=C}}``: "Free scores by C at the International Music Score Library Project"."""
    name = r.param(tpl, "cname") or second(tpl, r) or r.title
    return f"Free scores by {name} at the International Music Score Library Project"


def _imdb(tpl: Template, r: NodeRenderer) -> str:
    """``{{IMDb name|id|Name}}`` / ``{{IMDb title|id|Title}}``: "Name at the Internet Movie Database"."""
    name = r.param(tpl, "name") or r.param(tpl, "title") or second(tpl, r) or r.title
    return f"{name} at the Internet Movie Database"


def _join_positional(tpl: Template, r: NodeRenderer) -> str:
    return " ".join(p for p in r.positional(tpl) if p)


def _chem(tpl: Template, r: NodeRenderer) -> str:
    """{{chem|H|2|O}} -> H2O."""
    return "".join(r.positional(tpl))


def _isbn(tpl: Template, r: NodeRenderer) -> str:
    pos = [p for p in r.positional(tpl) if p]
    return "ISBN " + ", ".join(pos) if pos else ""


def _times_ten(tpl: Template, r: NodeRenderer) -> str:
    """{{e|5}} -> ×105 (the superscript flattened, as in WikiText)."""
    exponent = first(tpl, r)
    return f"×10{exponent}" if exponent else ""


def _frac(tpl: Template, r: NodeRenderer) -> str:
    pos = r.positional(tpl)
    if len(pos) >= 3:
        return f"{pos[0]} {pos[1]}\u2044{pos[2]}"
    if len(pos) == 2:
        return f"{pos[0]}\u2044{pos[1]}"
    if len(pos) == 1:
        return f"1\u2044{pos[0]}"
    return ""


def _sortname(tpl: Template, r: NodeRenderer) -> str:
    first_name, last_name = r.param(tpl, 1), r.param(tpl, 2)
    return f"{first_name} {last_name}".strip()


def _val(tpl: Template, r: NodeRenderer) -> str:
    value = first(tpl, r)
    unit = r.param(tpl, "u") or r.param(tpl, "ul")
    err = second(tpl, r)
    out = f"{value} ± {err}" if err else value
    return f"{out} {unit}".strip()


def _currency(symbol: str) -> TemplateRenderer:
    return lambda tpl, r: f"{symbol}{first(tpl, r)}"


def _prefixed(prefix: str) -> TemplateRenderer:
    """``{{floruit|1200}}`` -> ``fl. 1200``."""
    return lambda tpl, r: f"{prefix} {first(tpl, r)}"


# ---- dates ------------------------------------------------------------------------------
_MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]


def _format_date(year: str, month: str = "", day: str = "", *, df: bool = False) -> str:
    year, month, day = year.strip(), month.strip(), day.strip()
    if not year:
        return ""
    try:
        month_name = _MONTHS[int(month) - 1] if month else ""
    except (ValueError, IndexError):
        month_name = month
    try:
        day_text = str(int(day)) if day else ""
    except ValueError:
        day_text = day
    if month_name and day_text:
        return f"{day_text} {month_name} {year}" if df else f"{month_name} {day_text}, {year}"
    if month_name:
        return f"{month_name} {year}"
    return year


def _is_df(tpl: Template, r: NodeRenderer) -> bool:
    return is_yes(r.param(tpl, "df") or r.param(tpl, "day first"))


def _date_template(tpl: Template, r: NodeRenderer) -> str:
    """start date / birth date / ...: year, month, day from the numeric parameters."""
    values = ([p for p in r.positional(tpl) if p.isdigit()][:3] + ["", "", ""])[:3]
    return _format_date(*values, df=_is_df(tpl, r))


def _death_date_and_age(tpl: Template, r: NodeRenderer) -> str:
    pos = (r.positional(tpl) + [""] * 6)[:6]
    death = _format_date(pos[0], pos[1], pos[2], df=_is_df(tpl, r))
    try:
        y1, m1, d1, y2, m2, d2 = (int(x) if x else 0 for x in pos)
    except ValueError:
        return death
    age = y1 - y2 - ((m1, d1) < (m2, d2))
    return f"{death} (aged {age})"


def _as_of(tpl: Template, r: NodeRenderer) -> str:
    pos = (r.positional(tpl) + ["", "", ""])[:3]
    date = _format_date(pos[0], pos[1], pos[2], df=_is_df(tpl, r))
    lower = (r.param(tpl, "lc") or "").lower() in ("y", "yes")
    word = "as of" if lower else "As of"
    if r.param(tpl, "since"):
        word = "since" if lower else "Since"
    return f"{word} {date}" if date else word


def _circa(tpl: Template, r: NodeRenderer) -> str:
    year = first(tpl, r)
    return f"c. {year}" if year else "c."


# ---- ships ------------------------------------------------------------------------------


def _ship(prefix: str | None = None) -> TemplateRenderer:
    """{{ship|HMS|Dreadnought|1906}} -> HMS Dreadnought (1906); {{HMS|Dreadnought|1906}}.

    The optional display code (after the id) is the documented bit mask of the ship
    templates: 4 shows the prefix, 2 the name, 1 the id, so 6 is "HMS Dreadnought", 3
    "Dreadnought (1906)", 2 the name alone; without a code (or with an invalid one) all three
    are shown ({{HMS|Invincible|1907|6}} -> HMS Invincible; {{SMS|Radetzky||2}} -> Radetzky;
    {{HMS|Invincible|1907|1}} -> 1907).
    """

    def render(tpl: Template, r: NodeRenderer) -> str:
        pos = r.positional(tpl)
        if prefix is None:
            pre, name, ident, code = (pos + ["", "", "", ""])[:4]
        else:
            (name, ident, code), pre = (pos + ["", "", ""])[:3], prefix
        mask = int(code) if code.isdigit() and 0 < int(code) < 8 else 7
        shown_id = ident if mask == 1 else f"({ident})"  # an id shown alone has no brackets
        parts = [
            pre if mask & 4 else "",
            name if mask & 2 else "",
            shown_id if mask & 1 and ident else "",
        ]
        return " ".join(part for part in parts if part)

    return render


def _ship_class(tpl: Template, r: NodeRenderer) -> str:
    """{{sclass|Radetzky|battleship}} -> Radetzky-class battleship; the format code picks
    the form: 0 and 3 "Name-class" (HMS Black Prince (1904), dev pair:
    {{sclass|Duke of Edinburgh|cruiser|0}} [[armoured cruiser]] reads "Duke of Edinburgh
    @-@ class armoured cruiser"), 2 and 6 "Name class", 4 "Name class type"."""
    pos = r.positional(tpl)
    name, kind, code = (pos + ["", "", ""])[:3]
    if not name:
        return ""
    kind = re.sub(r"\s*\([^)]*\)$", "", kind)  # "cruiser (1905)": the disambiguator
    forms = {
        "0": f"{name}-class",
        "3": f"{name}-class",
        "2": f"{name} class",
        "6": f"{name} class",
        "4": f"{name} class {kind}",
    }
    return forms.get(code, f"{name}-class {kind}").strip()


_SHIP_PREFIXES = (
    "HMS",
    "USS",
    "SMS",
    "HMAS",
    "HMCS",
    "HMNZS",
    "INS",
    "RMS",
    "SS",
    "USNS",
    "USAT",
    "NCS",
    "MV",
    "HNLMS",
    "JDS",
    "HMY",
    "HMHS",
    "USCGC",
    "USRC",
    "HDMS",
    "HNoMS",
    "HSwMS",
    "KRI",
    "ORP",
    "SMU",
    "TCG",
    "ARA",
    "BAP",
    "HTMS",
    "RFA",
    "MS",
)

# ---- parser functions -------------------------------------------------------------------
_PLAIN_NUMBER = re.compile(r"^([-−]?)(\d+)(\.\d+)?$")


def _formatnum(arg: str, tpl: Template, r: NodeRenderer) -> str:
    """``{{formatnum:12000}}`` reads "12,000"; ``|R`` (reverse) and ``|NOSEP`` keep the digits."""
    flags = {p.upper() for p in r.positional(tpl)}
    arg = arg.strip()
    if "R" in flags:
        return arg.replace(",", "")
    match = _PLAIN_NUMBER.match(arg)
    if match is None or "NOSEP" in flags:
        return arg
    sign, digits, decimals = match.groups()
    return sign + re.sub(r"(?<=\d)(?=(?:\d{3})+$)", ",", digits) + (decimals or "")


# Parser functions (``{{formatnum:12000}}``), keyed by the name before the colon; the
# renderer gets the rendered argument, the template and the walker.
ParserFunction = Callable[[str, Template, NodeRenderer], str]
PARSER_FUNCTIONS: dict[str, ParserFunction] = {
    "formatnum": _formatnum,
    "uc": lambda arg, tpl, r: arg.upper(),
    "lc": lambda arg, tpl, r: arg.lower(),
    "ucfirst": lambda arg, tpl, r: arg[:1].upper() + arg[1:],
    "lcfirst": lambda arg, tpl, r: arg[:1].lower() + arg[1:],
}


TEMPLATES: RendererTable = [
    # numbers and currencies
    *entries("val", _val),
    *entries("frac|fraction|sfrac", _frac),
    *entries("e", _times_ten),
    *entries("us$|usd", _currency("US$")),
    *entries("£|gbp", _currency("£")),
    *entries("€|euro", _currency("€")),
    *entries("inr|inrconvert", _currency("₹")),
    *entries("a$|aud", _currency("A$")),
    *entries("ca$|cad", _currency("CA$")),
    *entries("nzd", _currency("NZ$")),
    *entries("yen|jpy", _currency("¥")),
    # formatting wrappers: their text is kept (year links too: "is a {{vgy|1990}} point-and-
    # click" reads "is a 1990 point @-@ and @-@ click", The Secret of Monkey Island, dev pair)
    *entries(
        "abbr|abbrlink|nowrap|nobr|nobreak|no break|no wrap|avoid wrap|j|nowr|wrap|nowraplinks|"
        "longitem|center|centre|large|huge|midsize|highlight|underline|del|var|code|tt|"
        "mono|kbd|samp|smallsup|su|small|smaller|"
        "big|larger|smallcaps|sc|small caps|em|strong|nobold|noitalic|sup|sub|"
        "visible anchor|vanchor|keypress|unicode|flag|flagcountry|flagu|tooltip|"
        "ill|interlanguage link|interlanguage link multi|date|oldstyledate|"
        "birth year and age|death year and age|mlby|mlb year|by|year|vgy|chem2|ce|sclass2|"
        "not a typo|notatypo|proper name|as written|iast",
        first,
    ),
    *entries("resize|color|colour|font color", last),
    *entries("font", lambda tpl, r: r.param(tpl, "text") or first(tpl, r)),
    *entries("sortname", _sortname),
    *entries("sort|hover title", second),
    *entries("lit", lambda tpl, r: f"lit. '{first(tpl, r)}'"),
    *entries("linktext", _join_positional),
    *entries("chem", _chem),
    *entries("isbn", _isbn),
    *entries("sic", _sic),
    *entries("music", _music),
    # ship names
    *entries("ship", _ship()),
    *[row for prefix in _SHIP_PREFIXES for row in entries(prefix, _ship(prefix))],
    *entries("GS", _ship("German submarine")),
    *entries("sclass|sclass-", _ship_class),
    *entries("circa|c.|ca.", _circa),
    # block quotations are paragraphs of their own in WikiText (Réunion ibis, dev pair:
    # the {{Quotation}} texts); floating boxes ({{quote box}}, pull quotes: sidebars in the
    # HTML) are not (Laurence Olivier, Missouri River, The Crab with the Golden Claws,
    # Cole Hamels, dev pairs: no {{Quote box}} text in the references)
    *entries(
        "quote|blockquote|quotation|cquote|bquote|centered pull quote|quote frame",
        _block_quote,
    ),
    *entries("poemquote|poem quote", _poem_quote),
    # punctuation and spacing
    *entries("'", constant(APOSTROPHE)),
    *entries("' \"", constant(APOSTROPHE + '"')),
    *entries("\" '", constant('"' + APOSTROPHE)),
    *entries("'s", constant(APOSTROPHE + "s")),
    *entries("nbsp|spaces|thinsp|sp|space", constant(" ")),
    *entries("ndash|dash|en dash|endash", constant("–")),
    *entries("mdash|em dash|emdash", constant("—")),
    *entries("snd|spnd|spaced ndash|spaced en dash|sndash", constant(" – ")),
    *entries("zwsp|shy", constant("")),
    *entries("okina", constant("ʻ")),
    *entries("...|ellipsis", constant(" …")),
    *entries("·|dot", constant(" · ")),
    *entries("middot", constant("·")),
    *entries("!|pipe", constant("|")),
    *entries("=", constant("=")),
    # dates
    *entries(
        "start date|end date|birth date|death date|start date and age|end date and age|"
        "birth date and age|bda|film date|release date|dts",
        _date_template,
    ),
    *entries("death date and age|dda", _death_date_and_age),
    *entries("as of|asof", _as_of),
    *entries("floruit|fl.", _prefixed("fl.")),
    *entries("reign|r.", _prefixed("r.")),
    # math and astronomy
    *entries("math|mvar|tmath|bigmath|mathcal|overline|overset|underset|sqrt|radic", _formula),
    *entries("pi", constant("π")),
    *entries("solar mass", constant("M☉")),
    *entries("solar radius", constant("R☉")),
    *entries("solar luminosity", constant("L☉")),
    *entries("jupiter mass", constant("MJ")),
    *entries("earth mass", constant("M🜨")),
    *entries("jupiter radius", constant("RJ")),
    # external-link templates that WikiText kept as text in surviving link lists
    # (Alkan: "Scherzo Focoso , Op. 34 on YouTube , played by ..."; Finkelstein, Federer:
    # "... at the Internet Movie Database"; Alkan: "Free scores by Alkan at the ...")
    *entries("youtube", _youtube),
    *entries("imslp", _imslp),
    *entries("imdb name|imdb title", _imdb),
]
