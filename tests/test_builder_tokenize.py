"""WikiText tokenization: Moses + number splitting, exactly as the format spec measures it."""

from __future__ import annotations

import pickle

import pytest

from wikitext_builder.tokenize import format_heading, format_line, format_paragraph, tokenize_text


def tok(text: str) -> str:
    return " ".join(tokenize_text(text))


@pytest.mark.parametrize(
    "text, expected",
    [
        # @-@ between letters/digits; spaced hyphens and dashes stay separate tokens
        ("red-tipped", "red @-@ tipped"),
        ("M-82", "M @-@ 82"),
        ("a 33-year-old man", "a 33 @-@ year @-@ old man"),
        ("before - after", "before - after"),
        ("1886–1977", "1886 – 1977"),
        ("war—and peace", "war — and peace"),
        # @,@ and @.@ between digits only
        ("8,600 people", "8 @,@ 600 people"),
        ("0.7 m", "0 @.@ 7 m"),
        ("3,300.5 ft", "3 @,@ 300 @.@ 5 ft"),
        ("1,234,567", "1 @,@ 234 @,@ 567"),
        ("in 1990, 2000.", "in 1990 , 2000 ."),
        # abbreviations stay whole
        ("the U.S. Army", "the U.S. Army"),
        ("No. 5 and Mr. Smith", "No. 5 and Mr. Smith"),
        # Moses contractions, no escaping, no normalization
        ("Don't stop", "Don 't stop"),
        ("the band's album", "the band 's album"),
        ('He said "hello" & left', 'He said " hello " & left'),
        ("‘curly’ “quotes”", "‘ curly ’ “ quotes ”"),
        (
            "(Japanese: 戦場のヴァルキュリア3, lit. Valkyria)",
            "( Japanese : 戦場のヴァルキュリア3 , lit . Valkyria )",
        ),
        ("攻殻機動隊 and 大空", "攻殻機動隊 and 大空"),
        # marks Perl's IsAlnum excludes (viramas) are tokens, as in WikiText-2 ("<unk> ् <unk>")
        ("हिन्दी and ಕನ್ನಡ", "हिन ् दी and ಕನ ್ ನಡ"),
        ("한국어 text", "한국어 text"),
        ("$5.00 or 50%", "$ 5 @.@ 00 or 50 %"),
        ("", ""),
        ("   \n\t ", ""),
    ],
)
def test_tokenize_cases_from_the_spec(text: str, expected: str) -> None:
    assert tok(text) == expected


def test_whitespace_is_collapsed_and_no_empty_tokens() -> None:
    tokens = tokenize_text("  a \t b\n\nc  ")
    assert tokens == ["a", "b", "c"]


def test_tokens_never_contain_spaces() -> None:
    for token in tokenize_text("Kaj Munks vei 3,5 km; 戦場 のヴァルキュリア 1.2.3 x-y-z"):
        assert token and " " not in token


def test_cjk_placeholders_do_not_leak() -> None:
    text = "東京 zqcjkaqz 大阪"  # a literal that looks like an internal placeholder
    tokens = tokenize_text(text)
    assert "zqcjkaqz" in tokens and tokens.count("東") + tokens.count("東京") == 1


def test_format_lines() -> None:
    assert format_paragraph(["a", "b"]) == " a b \n"
    assert format_paragraph([]) == " \n"
    assert format_heading(["Early", "life"], 3) == " = = = Early life = = = \n"
    assert format_heading(["Berg", "(", "station", ")"], 1) == " = Berg ( station ) = \n"
    assert format_line("Early life", 2) == " = = Early life = = \n"
    assert format_line("red-tipped 8,600") == " red @-@ tipped 8 @,@ 600 \n"
    with pytest.raises(ValueError):
        format_heading([], 2)
    with pytest.raises(ValueError):
        format_heading(["x"], 0)


def test_tokenizer_is_picklable_for_workers() -> None:
    assert pickle.loads(pickle.dumps(tokenize_text))("a-b") == ["a", "@-@", "b"]


def test_formula_stays_one_token() -> None:
    assert tokenize_text("the value <formula> is, <formula>.") == [
        "the",
        "value",
        "<formula>",
        "is",
        ",",
        "<formula>",
        ".",
    ]
    assert tokenize_text("a < b > c") == ["a", "<", "b", ">", "c"]


def test_real_wikitext2_lines_round_trip(real_data_dir) -> None:
    """Detokenize real WikiText-2 valid/test paragraphs and tokenize them again: measured
    97.3 % come back byte-identical; the rest differ only through the stand-in used for
    <unk> (which is not a digit, so "16 @,@ <unk>" cannot be rebuilt) or detokenizer
    ambiguities (". . ." vs "...")."""
    from sacremoses import MosesDetokenizer

    detokenizer = MosesDetokenizer("en")
    lines = [
        line.strip()
        for split in ("valid", "test")
        for line in (real_data_dir / "wikitext-2" / f"wiki.{split}.tokens").open(encoding="utf-8")
        if line.strip() and not line.startswith(" =")
    ]
    assert len(lines) > 3000
    same = 0
    for line in lines:
        line = line.replace("<unk>", "Xunkx").replace("<formula>", "Xformulax")
        text = detokenizer.detokenize(
            line.replace(" @-@ ", "-").replace(" @,@ ", ",").replace(" @.@ ", ".").split()
        )
        same += " ".join(tokenize_text(text)) == line
    assert same / len(lines) >= 0.96
