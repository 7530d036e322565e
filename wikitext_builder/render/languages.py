"""Language, transliteration and pronunciation templates, and the language-name table.

``{{lang-fr|texte}}`` reads ``French: texte``, ``{{IPA-fr|kʁak}}`` ``French pronunciation:
[kʁak]`` (``|pron`` gives ``pronounced [kʁak]``, the 2016 form WikiText shows), and
``{{nihongo|English|漢字|rōmaji}}`` ``English (漢字, rōmaji)``.
"""

from __future__ import annotations

from collections.abc import Callable

from mwparserfromhell.nodes import Template

from .template_api import NodeRenderer, RendererTable, TemplateRenderer, entries, first, is_yes, last, second

LANGUAGES: dict[str, str] = {
    "ar": "Arabic",
    "bg": "Bulgarian",
    "bn": "Bengali",
    "ca": "Catalan",
    "cs": "Czech",
    "cy": "Welsh",
    "da": "Danish",
    "de": "German",
    "el": "Greek",
    "en": "English",
    "es": "Spanish",
    "et": "Estonian",
    "eu": "Basque",
    "fa": "Persian",
    "fi": "Finnish",
    "fr": "French",
    "ga": "Irish",
    "gd": "Scottish Gaelic",
    "grc": "Ancient Greek",
    "he": "Hebrew",
    "hi": "Hindi",
    "hr": "Croatian",
    "hu": "Hungarian",
    "hy": "Armenian",
    "id": "Indonesian",
    "is": "Icelandic",
    "it": "Italian",
    "ja": "Japanese",
    "ka": "Georgian",
    "ko": "Korean",
    "la": "Latin",
    "lt": "Lithuanian",
    "lv": "Latvian",
    "mi": "Māori",
    "mn": "Mongolian",
    "ms": "Malay",
    "nl": "Dutch",
    "no": "Norwegian",
    "nb": "Norwegian Bokmål",
    "nn": "Norwegian Nynorsk",
    "pl": "Polish",
    "pt": "Portuguese",
    "ro": "Romanian",
    "ru": "Russian",
    "sa": "Sanskrit",
    "sk": "Slovak",
    "sl": "Slovene",
    "sq": "Albanian",
    "sr": "Serbian",
    "sv": "Swedish",
    "sw": "Swahili",
    "ta": "Tamil",
    "te": "Telugu",
    "th": "Thai",
    "tr": "Turkish",
    "uk": "Ukrainian",
    "ur": "Urdu",
    "vi": "Vietnamese",
    "yi": "Yiddish",
    "zh": "Chinese",
    "ang": "Old English",
    "non": "Old Norse",
    "sco": "Scots",
    "haw": "Hawaiian",
    "sh": "Serbo-Croatian",
    "bs": "Bosnian",
    "mk": "Macedonian",
    "be": "Belarusian",
    "az": "Azerbaijani",
    "kk": "Kazakh",
    "uz": "Uzbek",
    "tl": "Tagalog",
    "fil": "Filipino",
    "af": "Afrikaans",
    "gl": "Galician",
    "oc": "Occitan",
    "br": "Breton",
    "kw": "Cornish",
    "gv": "Manx",
    "fo": "Faroese",
    "mt": "Maltese",
    "lb": "Luxembourgish",
    "pa": "Punjabi",
    "ne": "Nepali",
    "si": "Sinhala",
    "my": "Burmese",
    "km": "Khmer",
    "lo": "Lao",
    "bo": "Tibetan",
    "am": "Amharic",
    "so": "Somali",
    "ha": "Hausa",
    "yo": "Yoruba",
    "zu": "Zulu",
    "xh": "Xhosa",
    "ku": "Kurdish",
    "ps": "Pashto",
    "tg": "Tajik",
    "tk": "Turkmen",
    "ky": "Kyrgyz",
    "tt": "Tatar",
    "ba": "Bashkir",
    "cv": "Chuvash",
    "sme": "Northern Sami",
    "se": "Northern Sami",
    "fy": "West Frisian",
    "eo": "Esperanto",
    "ia": "Interlingua",
    "gsw": "Swiss German",
    "nds": "Low German",
    "yue": "Cantonese",
    "cmn": "Mandarin",
    "kn": "Kannada",
    "ml": "Malayalam",
    "mr": "Marathi",
    "gu": "Gujarati",
    "or": "Odia",
    "as": "Assamese",
    "sd": "Sindhi",
    "ug": "Uyghur",
    "dv": "Dhivehi",
    "he-latn": "Hebrew",
    "fro": "Old French",
    "frm": "Middle French",
    "enm": "Middle English",
    "goh": "Old High German",
    "gmh": "Middle High German",
    "peo": "Old Persian",
    "pi": "Pali",
    "syc": "Syriac",
    "arc": "Aramaic",
    "egy": "Egyptian",
    "akk": "Akkadian",
    "sux": "Sumerian",
    "hns": "Hindustani",
    "myn": "Mayan",
    "cz": "Czech",
    "syr": "Syriac",
}


def lang_xx(code: str) -> TemplateRenderer:
    """{{lang-ar|الله|translit=Allāh}} -> Arabic: الله, translit. Allāh."""
    language = LANGUAGES.get(code, "")

    def render(tpl: Template, r: NodeRenderer) -> str:
        text = r.param(tpl, 1) or r.param(tpl, "text")
        if not text:
            return ""
        out = f"{language}: {text}" if language else text
        translit = r.param(tpl, "translit") or r.param(tpl, 2)
        if translit:
            out += f", translit. {translit}"
        translation = r.param(tpl, "lit") or r.param(tpl, "trans")
        if translation:
            out += f", lit. '{translation}'"
        return out

    return render


def _lang(tpl: Template, r: NodeRenderer) -> str:
    """{{lang|fr|texte}} -> texte."""
    return r.param(tpl, 2) or r.param(tpl, "text")


def _langx(tpl: Template, r: NodeRenderer) -> str:
    """{{langx|fr|texte}} -> French: texte (the newer form of {{lang-fr|texte}})."""
    pos = r.positional(tpl)
    if len(pos) < 2:
        return ""
    language = LANGUAGES.get(pos[0].lower(), "")
    return f"{language}: {pos[1]}" if language else pos[1]


# The label a pronunciation template's label key prints (IPA-xx's second parameter,
# IPAc-en's leading key), as the IPA-xx templates document it: no key (or the placeholder
# "-" that lets an audio file follow) is "French pronunciation:", an empty key no label,
# "lang" "French:", "pron" "pronounced", "IPA" "IPA:", any other text itself. ``|pron``
# reads "pronounced [ ... ]" without the language: WikiText-2 train has "Arabic : الله ,
# translit . Allāh , pronounced [ ... ]" (Allah: {{lang-ar|...}} {{IPA-ar|...|pron}}).
_PRONUNCIATION_LABELS = {
    "-": "{language} pronunciation:",
    "pron": "pronounced",
    "lang": "{language}:",
    "ipa": "IPA:",
    "local": "locally",
    "also": "also",
    "us": "US:",
    "uk": "UK:",
}


def ipa_xx(code: str) -> TemplateRenderer:
    """{{IPA-fr|kʁak}} -> French pronunciation: [kʁak]; ``|pron`` -> pronounced [kʁak];
    ``|lang`` -> French: [kʁak]; an empty label key prints no label, another text itself;
    a third parameter (an audio file) is not printed."""
    language = LANGUAGES.get(code, "")

    def render(tpl: Template, r: NodeRenderer) -> str:
        pos = r.positional(tpl)
        text = pos[0] if pos else ""
        if not text:
            return ""
        key = pos[1] if len(pos) > 1 else "-"
        label = _PRONUNCIATION_LABELS.get(key.lower(), key)
        if "{language}" in label:
            label = label.format(language=language) if language else ""
        return f"{label} [{text}]".strip()

    return render


def _pronounced(tpl: Template, r: NodeRenderer) -> str:
    """{{pronEng|ˈiːkoʊ}} (and {{pron-en}}) -> pronounced /ˈiːkoʊ/."""
    text = first(tpl, r)
    return f"pronounced /{text}/" if text else ""


def _slashed(tpl: Template, r: NodeRenderer) -> str:
    """{{IPAEng|ˈbɛləruːs}} -> /ˈbɛləruːs/."""
    text = first(tpl, r)
    return f"/{text}/" if text else ""


def _respell(tpl: Template, r: NodeRenderer) -> str:
    """{{respell|SIL|ə|SY|bin}} -> SIL-ə-SY-bin: the syllables joined by hyphens, ``_`` a
    space and a lone ``'`` joined without a hyphen."""
    text = ""
    for part in (p for p in r.positional(tpl) if p):
        text += part if part == "'" or not text else "-" + part
    return text.replace("-_-", " ").replace("_", " ")


# IPAc-en's separator codes and the text they print (Module:IPAc-en/data, "SEPARATORS"):
# ``_`` a space between words, ``,_`` a comma and a space, ``nbsp`` a space, ``–`` a hyphen.
# Every other parameter is a phoneme (or ``-``, ``(``, ``)``, ``...``) printed as written.
# (A separator is looked up by its markup: ``&nbsp;`` renders as a space, which is stripped.)
_IPAC_SEPARATORS = {"_": " ", ",_": ", ", "nbsp": " ", "&nbsp;": " ", "–": "-"}


def _ipac_en(tpl: Template, r: NodeRenderer) -> str:
    """{{IPAc-en|ˈ|oʊ|l|d|əm}} -> /ˈoʊldəm/; {{IPAc-en|ˈ|eɪ|_|b|iː}} -> /ˈeɪ biː/ (the
    separator codes print their text); a leading label key (``pron``, ``us``, ...) prints
    its label; ``audio=`` and similar named parameters are dropped."""
    markup = [str(p.value).strip() for p in tpl.params if not p.showkey]
    pos = [_IPAC_SEPARATORS.get(code, text) for code, text in zip(markup, r.positional(tpl))]
    pos = [p for p in pos if p]
    label = ""
    if pos and pos[0].lower() in _PRONUNCIATION_LABELS:
        label = _PRONUNCIATION_LABELS[pos.pop(0).lower()].format(language="English")
    pos = [p for p in pos if p.lower() not in ("icon", "audio", "ipa")]
    if not "".join(pos).strip():
        return ""
    return f"{label} /{''.join(pos)}/".strip()


def _nihongo(tpl: Template, r: NodeRenderer) -> str:
    """{{nihongo|English|漢字|rōmaji|extra|extra2}} -> English (漢字, rōmaji, extra) extra2, the
    documented form; ``lead=yes`` labels the parts: English (Japanese: 漢字, Hepburn: rōmaji).
    Without English the rōmaji leads: {{nihongo||東京タワー|Tōkyō tawā}} -> Tōkyō tawā (東京タワー)."""
    english, kanji, romaji = (r.param(tpl, i) for i in (1, 2, 3))
    extra = r.param(tpl, 4) or r.param(tpl, "extra")
    extra2 = r.param(tpl, 5) or r.param(tpl, "extra2")
    lead = is_yes(r.param(tpl, "lead"))
    parts = []
    if kanji:
        parts.append(f"Japanese: {kanji}" if lead else kanji)
    if romaji and english:
        parts.append(f"Hepburn: {romaji}" if lead else romaji)
    if extra:
        parts.append(extra)
    head = english or romaji
    inside = ", ".join(parts)
    text = f"{head} ({inside})" if head and inside else head or inside
    return f"{text} {extra2}" if extra2 else text


def _nihongo3(tpl: Template, r: NodeRenderer) -> str:
    """{{nihongo3|English|漢字|rōmaji}} -> rōmaji (漢字, English): the rōmaji leads."""
    english, kanji, romaji = (r.param(tpl, i) for i in (1, 2, 3))
    inside = ", ".join(p for p in (kanji, english) if p)
    head = romaji or english
    if not inside or head == english:
        return head or kanji
    return f"{head} ({inside})"


def _transliteration(tpl: Template, r: NodeRenderer) -> str:
    """{{transl|ar|ALA|Allāh}}: the transliterated text (the last parameter)."""
    return last(tpl, r)


def _labelled(labels: tuple[tuple[str, str], ...]) -> TemplateRenderer:
    """Named parameters as ``label: value`` joined by ``; `` in the table's order (the
    positional parameters joined when none is named)."""

    def render(tpl: Template, r: NodeRenderer) -> str:
        parts = [
            label.format(value) if "{}" in label else f"{label}: {value}"
            for name, label in labels
            for value in [r.param(tpl, name)]
            if value
        ]
        return "; ".join(parts) if parts else " ".join(p for p in r.positional(tpl) if p)

    return render


# {{zh|s=...|t=...|p=...}}: WikiText-2 has "Chinese : X ; pinyin : Y" and
# "... ; traditional Chinese : Y" (the 2016 labels and separators)
_ZH_LABELS = (
    ("c", "Chinese"),
    ("s", "simplified Chinese"),
    ("t", "traditional Chinese"),
    ("p", "pinyin"),
    ("tp", "Tongyong Pinyin"),
    ("w", "Wade–Giles"),
    ("j", "Jyutping"),
    ("cy", "Cantonese Yale"),
    ("poj", "Pe̍h-ōe-jī"),
    ("zhu", "Zhuyin Fuhao"),
    ("l", "lit. '{}'"),
)
_KOREAN_LABELS = (("hangul", "Korean"), ("hanja", "Hanja"), ("rr", "RR"), ("mr", "MR"))


TEMPLATES: RendererTable = [
    *entries("lang", _lang),
    *entries("langx|lang-x", _langx),
    *entries("lang-en", lang_xx("en")),
    *entries("transl|transliteration|translit|transl-", _transliteration),
    *entries("ipa|ipa-all", first),
    *entries("ipac-en|ipac", _ipac_en),
    *entries("pron-en|proneng", _pronounced),
    *entries("ipaeng", _slashed),
    *entries("respell", _respell),
    *entries("nihongo", _nihongo),
    *entries("nihongo2", first),
    *entries("nihongo3", _nihongo3),
    *entries("korean", _labelled(_KOREAN_LABELS)),
    *entries("zh", _labelled(_ZH_LABELS)),
    *entries("native name|lang-rtl|script|tlit", second),
    # script and transliteration wrappers: a span holding their text
    *entries("polytonic|semxlit|hebrew|coptic", first),
]

# Families of templates sharing a prefix (``lang-fr``, ``IPA-de``): the factory gets the
# language code after the prefix.
FAMILIES: dict[str, Callable[[str], TemplateRenderer]] = {
    "lang-": lang_xx,
    "ipa-": ipa_xx,
}
