"""render_article: wikitext markup -> one article in WikiText form (no <unk> mapping)."""

from __future__ import annotations

import collections
import difflib
import os
import pickle
from pathlib import Path

import pytest

from wikitext_builder.render import MarkupError, render_article
from wikitext_builder.validate import validate_lines

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("WIKITEXT_SHARED_DIR") or REPO.parent / "shared")
WIKIPEDIA = SHARED / "wikipedia"


def body(wikitext: str, title: str = "T") -> list[str]:
    """The rendered body lines (without the title block and terminator)."""
    out = render_article(title, wikitext)
    assert out.startswith(f" \n = {title} = \n \n") and out.endswith(" \n")
    return out.split("\n")[3:-2]


def one(wikitext: str) -> str:
    """The single body line of a one-paragraph article, stripped."""
    lines = body(wikitext)
    assert len(lines) == 1, lines
    return lines[0].strip()


# --- layout -------------------------------------------------------------------------------


def test_exact_byte_layout() -> None:
    wikitext = """{{Infobox ship|name=X|length={{convert|10|m}}}}
'''Berg''' is a [[Railway station|station]] on the [[Sognsvann Line]].<ref>{{cite web|title=x}}</ref>
It opened in 1934.

Second paragraph.

== History ==
Old text, red-tipped.

=== Early ===
Early text.

== Empty section ==
{| class="wikitable"
| a || b
|}

== References ==
{{reflist}}
"""
    assert render_article("Berg (station)", wikitext) == (
        " \n"
        " = Berg ( station ) = \n"
        " \n"
        " Berg is a station on the Sognsvann Line . It opened in 1934 . \n"
        " Second paragraph . \n"
        " \n"
        " = = History = = \n"
        " \n"
        " Old text , red @-@ tipped . \n"
        " \n"
        " = = = Early = = = \n"
        " \n"
        " Early text . \n"
        " \n"
        " = = Empty section = = \n"
        " \n"
        " \n"
    )


def test_output_passes_validate_and_concatenates() -> None:
    article = render_article("A", "Text one.\n\n== H ==\nText two.\n")
    two = article + render_article("B", "Other.\n")
    assert validate_lines(two.splitlines(keepends=True)) == []


def test_heading_levels_and_markup_in_headings() -> None:
    lines = body("Lead.\n\n==''Italic'' [[Link|heading]]==\nA.\n\n====Deep====\nB.\n\n=====Deeper=====\nC.\n")
    assert " = = Italic heading = = " in lines
    assert " = = = = Deep = = = = " in lines
    assert " = = = = = Deeper = = = = = " in lines


# --- removal ------------------------------------------------------------------------------


def test_refs_tables_files_categories_interwiki_comments_removed() -> None:
    wikitext = """[[File:X.jpg|thumb|A caption with [[link]]]]
Text<ref name="a">{{cite book|title=Y}}</ref> more<ref name="a"/> text.<!-- hidden -->
{| class="wikitable"
|-
! h1 !! h2
|-
| cell || {{convert|1|km}}
|}
<gallery>
A.jpg|caption
</gallery>
[[Image:Y.png|left|other caption]]
End [[wikt:word|word]] here.
[[Category:Things]]
[[de:Ding]]
[[fr:Chose]]
"""
    assert body(wikitext) == [" Text more text . ", " End word here . "]


def test_reference_sections_removed_subsections_kept() -> None:
    wikitext = """Lead.

== See also ==
* [[Other]]

== Notes ==
{{notelist}}

== References ==
{{reflist}}
=== Video ===
* ''Match: A vs B'' DVD.

== External links ==
* [http://example.com Official site]
=== Profiles ===
* {{ATP|id=1}}

== Further reading ==
* Book.
"""
    out = render_article("T", wikitext)
    assert "See also" not in out and "References" not in out and "External" not in out
    assert "Further" not in out and "Notes" not in out and "Official site" not in out
    # WikiText keeps sub-headings of removed sections (with whatever body survives)
    assert " = = = Video = = = \n \n Match : A vs B DVD . \n" in out
    assert " = = = Profiles = = = \n \n \n" in out


def test_column_blocks_and_template_tables_removed() -> None:
    wikitext = (
        "== Personnel ==\n{{Div col|cols=3}}\n* A – guitar\n* B – drums\n{{Div col end}}\n\n"
        "== Members ==\n{{col-begin}}\n{{col-2}}\n* C – bass\n{{col-end}}\nAfter.\n\n"
        "== Awards ==\n{{awards table}}\n|-\n"
        '| {{grammy|1998}} || "Song" || [[Best Metal Performance]] || {{won}}\n'
        "|-\n| 2001 || Other || Award || Nominated\n|}\nClosing text.\n"
    )
    assert body(wikitext) == [
        " ",
        " = = Personnel = = ",
        " ",
        " ",
        " = = Members = = ",
        " ",
        " After . ",
        " ",
        " = = Awards = = ",
        " ",
        " Closing text . ",
    ]


def test_brackets_emptied_by_removed_templates_are_tidied() -> None:
    assert (
        one(
            "Merkel ({{audio|a.ogg}}) and Bush ({{efn|x}}; {{coord|1|2}}) "
            "and Smith ({{IPAc-en|}}; born 1950) wrote."
        )
        == "Merkel and Bush and Smith ( born 1950 ) wrote ."
    )


def test_apostrophes_next_to_quote_markup() -> None:
    q2, q3, q4 = "'" * 2, "'" * 3, "'" * 4
    assert (
        one(f"{q2}Billboard{q3}s list and {q2}Billboard{q2}{{{{'}}}}s chart")
        == "Billboard 's list and Billboard 's chart"
    )
    assert one(f"x {q4}Four{q4} and L{q3}arc{q3} d'x") == "x ' Four ' and Larc d 'x"


def test_dropped_template_keeps_quote_runs_apart() -> None:
    # MediaWiki's quote rule sees a template's output between the runs: ''{{x}}'' is an
    # empty italic span, not four apostrophes (an apostrophe and bold)
    assert one("Words like ''{{foo|3}}'' 'wood'.") == "Words like ' wood ' ."
    assert (
        one("Greeks called themselves '''''Hellenes''''' ('''''{{foo|x}}'''''), though.")
        == "Greeks called themselves Hellenes , though ."
    )


def test_only_a_matched_blockquote_breaks_the_paragraph() -> None:
    # Charles-Valentin Alkan, dev pair: a closing tag with no open block quote is dropped
    assert body('Lead.\n\nHe wrote: "No goal."<ref>x</ref></blockquote> This spirit led him.\n') == [
        " Lead . ",
        ' He wrote : " No goal . " This spirit led him . ',
    ]
    assert body("Lead.\n\nBefore.<blockquote>Quoted.</blockquote> After.\n") == [
        " Lead . ",
        " Before . ",
        " Quoted . ",
        " After . ",
    ]


def test_tags_in_any_case_are_stripped_like_lowercase_ones() -> None:
    # the tag regexes ignore case, and so must the cheap tests that decide whether to run them
    assert body('Lead.\n\nHe wrote: "No goal."</Blockquote> This spirit led him.\n') == [
        " Lead . ",
        ' He wrote : " No goal . " This spirit led him . ',
    ]
    table = '<ONLYINCLUDE>{| class="wikitable"\n! No.\n|-\n| 1 || Pilot\n|}</ONLYINCLUDE>\n'
    assert body(f"Lead.\n\n== Episodes ==\n{table}After.\n") == [
        " Lead . ",
        " ",
        " = = Episodes = = ",
        " ",
        " After . ",
    ]
    assert body('Lead.\n\n<Div style="column-count:2">\n* credits\n</Div>\nAfter.\n') == [
        " Lead . ",
        " After . ",
    ]


def test_many_unclosed_tables_each_run_to_the_next_heading() -> None:
    # once a recursion per unclosed table: RecursionError from about 1,200 of them
    sections = "".join(f'{{| class="wikitable"\n| cell {i}\n== Part {i} ==\nText {i}.\n' for i in range(2000))
    lines = body("Lead.\n" + sections)
    assert lines[:5] == [" Lead . ", " ", " = = Part 0 = = ", " ", " Text 0 . "]
    assert len(lines) == 1 + 4 * 2000 and not any("cell" in line for line in lines)


def test_list_items_become_paragraph_lines() -> None:
    assert body("Intro:\n* first item\n** nested [[item]]\n# numbered\n; term\n: definition\nAfter.\n") == [
        " Intro : ",
        " first item ",
        " nested item ",
        " numbered ",
        " term ",
        " definition ",
        " After . ",
    ]


def test_wikilinks_and_external_links() -> None:
    assert (
        one(
            "[[Oslo Metro]] [[Ring Line (Oslo)|Ring Line]] [[cat]]s [[Foo (bar)|]] "
            "[[:Category:Trains|trains]] [http://x.org the site] [http://y.org] http://z.org"
        )
        == "Oslo Metro Ring Line cats Foo trains the site"
    )


def test_unmatched_link_and_template_markup_never_leaks() -> None:
    # issue 17: markup mwparserfromhell leaves as text (a link nested in a link target,
    # unbalanced or 2,000-deep brackets) loses its brackets and pipes and keeps its text;
    # WikiText-2 has no "[ [", "] ]", "{ {" or "} }" at all
    assert one("Alpha [[a [[b]] c|d]] end.") == "Alpha a b c d end ."
    assert one("Alpha [[a | b end.") == "Alpha a b end ."
    assert one("Alpha ]] b]] end [[x|y {{z]].") == "Alpha b end y z ."
    assert one("Alpha " + "[[" * 2000 + "a" + "]]" * 2000 + " end.") == "Alpha a end ."
    assert one("Alpha " + "[[a |" * 2000 + " end.") == "Alpha " + "a " * 2000 + "end ."
    assert body("== A [[b|c ==\nText.\n") == [" ", " = = A b c = = ", " ", " Text . "]
    # a single bracket or a pipe outside such markup is text, as in MediaWiki
    assert one("Alpha [[[b]]] and x | y.") == "Alpha [ b ] and x | y ."


def test_stray_ref_closer_and_unusual_tables_leave_no_markup() -> None:
    # a ref closed twice, a nested HTML table, a table a template opens and "|}" closes,
    # a wiki table right after <onlyinclude>, and one never closed ("|}" not at the start of
    # a line closes nothing), which runs to the next heading (all seen in the GA/FA pool)
    wikitext = (
        "Lead.<ref>a</ref> More.</ref>\n\n"
        '== Summary ==\n<table width="95%">\n<tr>\n<td><br />\n<table border=1>\n<tr>\n'
        "<td colspan=3>\n<div><strong>Summary<br />\nMay 18</strong></div>\n</td>\n</tr>\n"
        "</table></td>\n</tr></table>\n\n"
        "== Dukes ==\n{{Nobility table header|name=Duke}}\n| '''[[John]]'''<br>Earl || 1340\n|}\n\n"
        '== Episodes ==\n<onlyinclude>{| class="wikitable"\n! No.\n|-\n| 1 || Pilot\n|}</onlyinclude>\n'
        "After.\n\n"
        '== Charts ==\n{| class="wikitable"\n!Chart\n|-\n{{singlechart|Canada|42}}|}\nEnd.\n\n'
        "== Legacy ==\nText.\n"
    )
    assert body(wikitext) == [
        " Lead . More . ",
        " ",
        " = = Summary = = ",
        " ",
        " ",
        " = = Dukes = = ",
        " ",
        " ",
        " = = Episodes = = ",
        " ",
        " After . ",
        " ",
        " = = Charts = = ",
        " ",
        " ",
        " = = Legacy = = ",
        " ",
        " Text . ",
    ]


def test_bold_italic_removed_and_entities_decoded() -> None:
    assert (
        one("'''Bold''' and ''italic'' and '''''both''''' &amp; &nbsp;x&ndash;y &eacute; &#x3b1; &lt;tag&gt;")
        == "Bold and italic and both & x – y é α < tag >"
    )


def test_magic_words_nowiki_and_inline_html() -> None:
    assert body(
        "__NOTOC__\nText here . __TOC__\n{{DISPLAYTITLE:x}}{{DEFAULTSORT:y}}\n\n"
        "More <nowiki>[[x]]</nowiki> <code>c</code> H<sub>2</sub>O "
        '<span style="color:red">red</span> a<br/>b.'
    ) == [" Text here . ", " More x c H2O red a b . "]


def test_unbalanced_style_quotes_inside_templates_are_harmless() -> None:
    text = "A review<ref>{{citebook\n|author='''X'''\n|publisher=''Y\n|date=1986}}</ref> and more.\n"
    assert one(text) == "A review and more ."


def test_math_becomes_formula() -> None:
    lines = body(
        "Inline <math>x^2</math> and {{math|''y''}} text.\n"
        ":<math>a = b</math>\n"
        ":<math>2^x = </math> ''variation''\n"
        'Then <math display="block">z</math> after.\n'
    )
    assert lines == [
        " Inline <formula> and <formula> text . ",
        " <formula> ",
        " <formula> ",
        " Then ",
        " <formula> ",
        " after . ",
    ]
    # a bullet item keeps its text around an inline formula
    assert body("Intro.\n* bullet with <math>x</math> inline\n") == [
        " Intro . ",
        " bullet with <formula> inline ",
    ]


# --- templates ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "markup, expected",
    [
        ("{{convert|60|cm|abbr=on}}", "60 cm ( 24 in )"),
        ("{{convert|6.1|km}}", "6 @.@ 1 kilometres ( 3 @.@ 8 mi )"),
        ("{{convert|100|m}}", "100 metres ( 330 ft )"),
        ("{{convert|1|mi|km}}", "1 mile ( 1 @.@ 6 km )"),
        ("{{convert|201|ft|m}}", "201 feet ( 61 m )"),
        ("{{convert|1500|m|ft}}", "1 @,@ 500 metres ( 4 @,@ 900 ft )"),
        ("{{convert|700|ft|m|0}}", "700 feet ( 213 m )"),
        ("{{convert|10|kn}}", "10 knots ( 19 km / h ; 12 mph )"),
        ("{{convert|100|F|C}}", "100 ° F ( 38 ° C )"),
        ("{{convert|505|ft|6|in|m|1}}", "505 feet 6 inches ( 154 @.@ 1 m )"),
        ("{{convert|132.3|m|ftin|abbr=on}}", "132 @.@ 3 m ( 434 ft 1 in )"),
        ("{{convert|12000|to|14500|ft|m}}", "12 @,@ 000 to 14 @,@ 500 feet ( 3 @,@ 700 to 4 @,@ 400 m )"),
        ("{{convert|650|m|ft|adj=on}}", "650 @-@ metre ( 2 @,@ 130 ft )"),
        ("{{convert|9.2|in|mm|abbr=on|sigfig=3}}", "9 @.@ 2 in ( 234 mm )"),
        ("{{cvt|5|kg}}", "5 kg ( 11 lb )"),
        ("{{convert|3|cubit}}", "3 cubit"),
        ("{{lang-ar|الله|translit=Allāh}}", "Arabic : الله , translit . Allāh"),
        ("{{lang|fr|bonjour}}", "bonjour"),
        ("{{langx|de|Gott}}", "German : Gott"),
        ("{{transl|ar|ALA|Allāh}}", "Allāh"),
        ("{{IPAc-en|ˈ|oʊ|l|d|əm}}", "/ ˈoʊldəm /"),
        ("{{IPA-fr|kʁak}}", "French pronunciation : [ kʁak ]"),
        ("{{IPA|/ˈzɛnɒn/}}", "/ ˈzɛnɒn /"),
        (
            "{{nihongo|Valkyria Chronicles III|戦場のヴァルキュリア3|Senjō no Varukyuria}}",
            "Valkyria Chronicles III ( 戦場のヴァルキュリア3 , Senjō no Varukyuria )",
        ),
        ("{{abbr|NASA|National Aeronautics}}", "NASA"),
        ("{{nowrap|10 May}}", "10 May"),
        ("{{frac|132|1|3}}", "132 1 ⁄ 3"),
        ("{{sortname|John|Smith}}", "John Smith"),
        ("{{start date|2010|5|3}}", "May 3 , 2010"),
        ("{{birth date|1950|5|3|df=y}}", "3 May 1950"),
        ("{{death date and age|2000|1|2|1950|5|3}}", "January 2 , 2000 ( aged 49 )"),
        ("{{as of|2010|5}}", "As of May 2010"),
        ("{{as of|2020|lc=y}}", "as of 2020"),
        ("{{chem|H|2|O}}", "H2O"),
        ("{{ship|HMS|Dreadnought|1906}}", "HMS Dreadnought ( 1906 )"),
        ("{{SMS|Emden}}", "SMS Emden"),
        ("{{Solar mass}}", "M ☉"),
        ("a{{snd}}b", "a – b"),
        # issue 16: {{convert}} units, forms and ranges
        ("{{convert|6.1|km|mi|sing=on}}", "6 @.@ 1 @-@ kilometre ( 3 @.@ 8 mi )"),
        ("{{convert|10|x|20|m}}", "10 by 20 metres ( 33 ft × 66 ft )"),
        ("{{convert|7|x|26|mm|in|abbr=on}}", "7 mm × 26 mm ( 0 @.@ 28 in × 1 @.@ 02 in )"),
        ("{{convert|3/4|mi|m}}", "3 ⁄ 4 mile ( 1 @,@ 200 m )"),
        ("{{convert|1+1/2|in|mm}}", "1 1 ⁄ 2 inches ( 38 mm )"),
        ("{{convert|12|in}}", "12 inches ( 300 mm )"),
        ("{{convert|30|psi}}", "30 pounds per square inch ( 210 kPa )"),
        ("{{convert|5|l}}", "5 litres ( 1 @.@ 1 imp gal ; 1 @.@ 3 US gal )"),
        ("{{convert|20|kn|disp=flip}}", "37 kilometres per hour ; 23 miles per hour ( 20 kn )"),
        # issue 16: ship classes, {{sic}}, symbols, wrappers, pronunciation, nihongo3
        (
            "{{sclass|Duke of Edinburgh|cruiser|0}} armoured cruiser",
            "Duke of Edinburgh @-@ class armoured cruiser",
        ),
        ("{{sclass|Radetzky|battleship}}", "Radetzky @-@ class battleship"),
        ("{{sic}}", "[ sic ]"),
        ("{{sic|Teh}}", "Teh [ sic ]"),
        ("{{sic|hide=y|Teh}}", "Teh"),
        ("F{{music|sharp}}m", "F ♯ m"),
        ("{{nobreak|10 May}}", "10 May"),
        ("{{IPA-fr|kʁak|pron}}", "pronounced [ kʁak ]"),
        ("{{IPAc-en|pron|ˈ|oʊ|l|d|əm}}", "pronounced / ˈoʊldəm /"),
        ("{{nihongo3|English|漢字|rōmaji}}", "rōmaji ( 漢字 , English )"),
        (
            "{{zh|s=中国|t=中國|p=Zhōngguó}}",
            "simplified Chinese : 中国 ; traditional Chinese : 中國 ; pinyin : Zhōngguó",
        ),
        ("{{korean|hangul=조선|hanja=朝鮮|rr=Joseon}}", "Korean : 조선 ; Hanja : 朝鮮 ; RR : Joseon"),
        ("{{not a typo|teh}}", "teh"),
        ("{{USS|Chattanooga|CL-18|6}}", "USS Chattanooga"),
        ("{{SMS|Radetzky||2}}", "Radetzky"),
        ("{{HMS|Dreadnought|1906|3}}", "Dreadnought ( 1906 )"),
        ("{{color|red|Red text}} {{font|text=Font}}", "Red text Font"),
        ("then{{...}}", "then …"),
        # script wrappers and year links print their text
        ("{{polytonic|Ἕλληνες}} {{semxlit|ḥeth}}", "Ἕλληνες ḥeth"),
        ("a {{vgy|1990}} game", "a 1990 game"),
    ],
)
def test_text_templates_rendered(markup: str, expected: str) -> None:
    assert one(f"x {markup} y") == f"x {expected} y"


@pytest.mark.parametrize(
    "markup",
    [
        "{{Infobox person|name=X|birth_date={{birth date|1950|1|1}}}}",
        "{{Navbox|title=Y|list1=[[A]] [[B]]}}",
        "{{cite web|url=http://x|title=T}}",
        "{{citation|title=T}}",
        "{{sfn|Smith|2000|p=1}}",
        "{{efn|a note}}",
        "{{Citation needed|date=May 2020}}",
        "{{Use dmy dates|date=2020}}",
        "{{main|Other article}}",
        "{{Good article}}",
        "{{coord|59|57|N|10|44|E}}",
        "{{Quote box|quote=A sidebar quotation.|source=X}}",
        "{{Some unknown template|with text}}",
    ],
)
def test_other_templates_dropped(markup: str) -> None:
    assert one(f"x {markup} y") == "x y"


def test_template_table_is_a_dict() -> None:
    from wikitext_builder import render

    assert isinstance(render.TEMPLATE_RENDERERS, dict) and len(render.TEMPLATE_RENDERERS) > 50
    assert render.template_key("Template:Convert ") == "convert"
    assert render.template_key("IPAc_en") == "ipac en"


# --- errors and purity ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "wikitext, fragment",
    [
        ("", "empty article"),
        ("   \n\n ", "empty article"),
        ("#REDIRECT [[Other]]", "redirect"),
        ("Text with {{convert|1|km\nnever closed and more text.", "unbalanced template"),
        ("{{Infobox x|a=b}}\n[[Category:Y]]", "no text left"),
    ],
)
def test_markup_errors(wikitext: str, fragment: str) -> None:
    with pytest.raises(MarkupError) as info:
        render_article("Some Title", wikitext)
    message = str(info.value)
    assert "Some Title" in message and fragment in message and "\n" not in message
    assert isinstance(info.value, ValueError)


def test_entities_in_the_title_are_decoded() -> None:
    # titles guessed from the page text ("State Route&nbsp;213", "Shuttle&ndash;Mir Program"
    # in the GA/FA pool); a bare "&" is text
    assert render_article("State Route&nbsp;213", "Text.").startswith(" \n = State Route 213 = \n")
    assert render_article("Shuttle&ndash;Mir Program", "Text.").startswith(" \n = Shuttle – Mir Program = \n")
    assert render_article("AT&T", "Text.").startswith(" \n = AT & T = \n")


def test_markup_in_a_guessed_title_is_rendered_not_kept() -> None:
    # title guesses of the GA/FA pool (records 450 and 543): a template gives its display text,
    # a comment is dropped; validate finds no residue in the heading
    article = render_article("{{Audio|ru-El_Lissitzky.ogg|Lazar Markovich Lissitzky}}", "Text.")
    assert article.startswith(" \n = Lazar Markovich Lissitzky = \n")
    article = render_article("Sir Noël Peirce<!--YES, it is spelled PEIRCE--> Coward", "Text.")
    assert article.startswith(" \n = Sir Noël Peirce Coward = \n")
    assert not [v for v in validate_lines(article.splitlines(keepends=True)) if v.severity == "error"]


def test_render_is_deterministic_and_picklable() -> None:
    text = "A {{convert|1|km}} b.\n\n== H ==\nC [[d|e]].\n"
    assert render_article("T", text) == render_article("T", text)
    assert pickle.loads(pickle.dumps(render_article))("T", text) == render_article("T", text)


def test_stray_closers_and_unclosed_tags_are_tolerated() -> None:
    assert one("Text }} with a stray closer.") == "Text with a stray closer ."
    assert one("A {{Sidebar|content=<div>side}} and <small>small text.") == "A and small text ."
    assert body("A {{Quote|text=<div>quoted}} and <small>small text.") == [
        " A ",
        " quoted ",
        " and small text . ",
    ]


def test_escaped_markup_is_unescaped() -> None:
    assert one("Text&lt;ref&gt;&quot;cite&quot;&lt;/ref&gt; more &amp;amp; x.") == "Text more & x ."


# --- real articles --------------------------------------------------------------------------


def _shared(sub: str) -> Path:
    path = WIKIPEDIA / sub
    if not path.is_dir():
        pytest.skip(f"shared Wikipedia material not found at {path} (set WIKITEXT_SHARED_DIR)")
    return path


def test_every_ga_fa_article_renders_and_validates() -> None:
    folder = _shared("ga_fa")
    files = sorted(folder.glob("*.wikitext"))
    assert len(files) >= 70
    corpus = []
    for path in files:
        title = path.stem.replace("_", " ")
        out = render_article(title, path.read_text(encoding="utf-8"))
        assert validate_lines(out.splitlines(keepends=True)) == [], title
        assert out.count("\n") > 10, title
        for leak in ("{{", "}}", "[[", "]]", "<ref", "'''", "{|", "__"):
            assert leak not in out, (title, leak)
        corpus.append(out)
    # concatenated, as the corpus files are: still valid (terminators, empty last sections)
    assert validate_lines("".join(corpus).splitlines(keepends=True)) == []


# Measured on the 60 pairs (tokens <unk>-mapped with the WikiText-2 train vocabulary):
# mean token-multiset F1 0.895 (min 0.39), mean difflib ratio 0.828 (median 0.93, min 0.11). The
# revisions differ from the 2016 ones WikiText used (whole sections rewritten), so these
# floors only guard against regressions of the cleaning rules.
FLOOR_MEAN_F1 = 0.87
FLOOR_MEAN_RATIO = 0.80


def _pairs(real_data_dir: Path):
    folder = _shared("wt2_pairs")
    vocab = set((real_data_dir / "wikitext-2" / "wiki.train.tokens").read_text(encoding="utf-8").split())
    rows = [line.split("\t") for line in (folder / "PAIRS.tsv").read_text(encoding="utf-8").splitlines()[1:]]
    assert len(rows) == 60
    for row in rows:
        name, title = row[0], row[1]
        out = render_article(title, (folder / f"{name}.wikitext").read_text(encoding="utf-8"))
        ours = [t if t in vocab else "<unk>" for t in out.split()]
        ref = (folder / f"{name}.wt2.tokens").read_text(encoding="utf-8").split()
        assert ours[: len(row[3].split())] == row[3].split(), name  # the title line
        yield ours, ref


def test_fidelity_on_wt2_pairs_token_f1(real_data_dir: Path) -> None:
    f1s = []
    for ours, ref in _pairs(real_data_dir):
        a, b = collections.Counter(ours), collections.Counter(ref)
        f1s.append(2 * sum((a & b).values()) / (sum(a.values()) + sum(b.values())))
    assert sum(f1s) / len(f1s) >= FLOOR_MEAN_F1


@pytest.mark.slow
def test_fidelity_on_wt2_pairs_difflib_ratio(real_data_dir: Path) -> None:
    ratios = [
        difflib.SequenceMatcher(None, ours, ref, autojunk=False).ratio()
        for ours, ref in _pairs(real_data_dir)
    ]
    assert sum(ratios) / len(ratios) >= FLOOR_MEAN_RATIO


# --- fidelity fixes measured on the wt2_pairs ----------------------------------------------


def test_column_divs_dropped_like_column_templates() -> None:
    # Lágrimas Cálidas: WikiText keeps "Performance credits" but none of the list in the
    # <div style="column-count"> block; other divs keep their text; unclosed runs to the heading
    wikitext = (
        "== Credits ==\nFrom Allmusic.\n\n'''Performance credits'''\n"
        '<div style="-moz-column-count:2; column-count:2;">\n*A – accordion\n<div>inner</div>\n'
        "*B – bass\n</div>\n\n'''Technical credits'''\n<div class=\"plain\">Kept text.</div>\n"
        '<div style="column-width: 20em">\n*unclosed\n== Next ==\nText.\n'
    )
    assert body(wikitext) == [
        " ",
        " = = Credits = = ",
        " ",
        " From Allmusic . ",
        " Performance credits ",
        " Technical credits ",
        " Kept text . ",
        " ",
        " = = Next = = ",
        " ",
        " Text . ",
    ]


def test_formatnum_parser_function() -> None:
    # Oldham: "{{formatnum:12000}} in 1801" reads "12 @,@ 000 in 1801" in WikiText-2
    assert (
        one(
            "From {{formatnum:12000}} to {{formatnum:1234567.5}}, {{formatnum:950}} "
            "and {{formatnum:1,200|R}}."
        )
        == "From 12 @,@ 000 to 1 @,@ 234 @,@ 567 @.@ 5 , 950 and 1200 ."
    )
    assert one("Cost {{formatnum:{{Inflation|US|5|1961}}|0}} dollars.") == "Cost dollars ."


def test_dash_and_space_template_spellings() -> None:
    # Charmbracelet: '"Satisfy"{{emdash}}the latter' reads '" Satisfy " — the latter'
    assert (
        one('"Satisfy"{{emdash}}the latter, 1990{{endash}}91, "Yours"{{sp}}"a" and b{{space}}c.')
        == '" Satisfy " — the latter , 1990 – 91 , " Yours " " a " and b c .'
    )


def test_external_link_templates_in_surviving_link_lists() -> None:
    # Alkan, Finkelstein, Federer: link-list sub-sections WikiText kept read "T on YouTube",
    # "Free scores by C at the International Music Score Library Project", "N at the Internet Movie Database"
    wikitext = (
        "== Performances ==\n"
        "*{{YouTube|id=adyZmD14F0w|link=no|title=Scherzo Focoso, Op. 34}}, played by Lloyd Buck\n"
        "*{{IMSLP|id=Alkan, Charles-Valentin|cname=Alkan}}\n"
        "*{{IMDb name|0001168|Bob Dylan}}\n*{{IMDb name|id=1|name=Norman Finkelstein}}\n"
    )
    assert body(wikitext, "Alkan") == [
        " ",
        " = = Performances = = ",
        " ",
        " Scherzo Focoso , Op. 34 on YouTube , played by Lloyd Buck ",
        " Free scores by Alkan at the International Music Score Library Project ",
        " Bob Dylan at the Internet Movie Database ",
        " Norman Finkelstein at the Internet Movie Database ",
    ]


# --- issue 16: fidelity fixes measured on the development pairs -----------------------------


def test_block_quote_templates_are_paragraphs() -> None:
    assert body("Before.\n{{cquote|Pulled quote.}}\n{{bquote|Kept text.|Author}}\nAfter.\n") == [
        " Before . ",
        " Pulled quote . ",
        " Kept text . ",
        " After . ",
    ]


Q2, Q3 = "'" * 2, "'" * 3


@pytest.mark.parametrize(
    "wikitext, expected",
    [
        # Bob Dylan: MediaWiki reads quote markup before links, so a link's edge apostrophe stays
        (
            f"{Q2}[[The Times They Are a-Changin']]{Q2}, reflected",
            "The Times They Are a @-@ Changin ' , reflected",
        ),
        # Bob Dylan: odd bold and italic counts: the bold run after a word is apostrophe + italic
        (f"on {Q2}The New York Times{Q3} Hardcover list", "on The New York Times ' Hardcover list"),
        # Cole Hamels: <nowiki>'</nowiki> is a literal apostrophe
        (
            f"the <nowiki>'</nowiki>{Q2}Phantastic Phour{Q2}<nowiki>'</nowiki> by fans",
            "the ' Phantastic Phour ' by fans",
        ),
        # an entity apostrophe is text too
        (f"x &#39;{Q2}d{Q2}&#39; y", "x ' d ' y"),
    ],
)
def test_apostrophes_kept_as_mediawiki_does(wikitext: str, expected: str) -> None:
    assert one(wikitext) == expected


def test_reference_section_spellings_removed() -> None:
    out = render_article(
        "T",
        "Lead.\n\n== Online sources ==\n* A site.\n\n"
        "== Cultural references ==\nKept.\n\n== Notes and references ==\nX.\n",
    )
    assert "Online" not in out and "A site" not in out and " X . " not in out
    assert " = = Cultural references = = \n \n Kept . \n" in out


def test_reference_list_blocks_dropped() -> None:
    # Chagas disease: a citation in <div class="references-small"> is not in WikiText-2
    wikitext = (
        '== Original publication ==\n<div class="references-small">\n* Chagas, C. Nova.\n</div>\n'
        '== Works ==\n{{Refbegin|2}}\n* A book.\n{{Refend}}\nKept text.\n<div class="plain">Kept too.</div>\n'
    )
    assert body(wikitext) == [
        " ",
        " = = Original publication = = ",
        " ",
        " ",
        " = = Works = = ",
        " ",
        " Kept text . ",
        " Kept too . ",
    ]


def test_comment_alone_on_its_line_keeps_the_paragraph() -> None:
    # MediaWiki removes such a line with its newline: the text around stays one paragraph
    assert body(
        "Text one.\n<!-- hidden -->\nMore text.\n  <!-- a\nb --> <!-- c -->\nLast <!-- x --> word.\n\nNew."
    ) == [" Text one . More text . Last word . ", " New . "]


def test_a_line_starting_with_equals_inside_a_block_is_no_heading() -> None:
    # a template parameter continued on a line that starts with "=" does not end the block
    wikitext = (
        "Text.\n\n;Books cited\n{{Refbegin}}\n* {{cite book | title = Mammals | year\n"
        "= 2007 | isbn = 978-0-300-12550-4}}\n{{Refend}}\n\n== Next ==\nMore.\n"
    )
    assert body(wikitext) == [" Text . ", " Books cited ", " ", " = = Next = = ", " ", " More . "]
