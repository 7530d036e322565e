"""Detokenizers (``harness.plugins.hf.detokenize``): rules, alignment, causality and round-trips on
the real files, with the lines that do not round-trip counted and listed
(``harness.tools.detokenizer_round_trip``); and ``lm-eval`` (``harness.plugins.hf.lm_eval_pages``),
against lm-evaluation-harness's own ``wikitext_detokenizer`` on every real page and on crafted
ones."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from harness.plugins.hf.detokenize import Detokenizer, detokenize, detokenize_line, retokenize, round_trip
from harness.plugins.hf.lm_eval_pages import lm_eval_page
from harness.tools.detokenizer_round_trip import main
from harness.tools.lm_eval_wikitext import lm_eval_pages
from wikitext_toolkit_core.format import EOS

WIKITEXT_CASES = [
    (" = = Gameplay = = ", "== Gameplay =="),
    (
        " a role @-@ playing game , sold 1 @,@ 000 copies at 3 @.@ 5 % . ",
        "a role-playing game, sold 1,000 copies at 3.5%.",
    ),
    (
        ' as " Craig " in the episode " Teddy \'s Story " ( 2004 ) : <unk> ',
        'as "Craig" in the episode "Teddy\'s Story" (2004): <unk>',
    ),
    (" the players ' union didn 't ; it wasn 't [ sic ] ", "the players' union didn't; it wasn't [sic]"),
]
PTB_CASES = [
    (" it was n't black monday ", "it wasn't black monday"),
    (" the company 's N shares at $ N a share ", "the company's N shares at $ N a share"),
]


@pytest.mark.parametrize("line, text", WIKITEXT_CASES)
def test_wikitext_rules_and_their_inverse(line, text):
    assert detokenize_line(line, "wikitext") == text
    assert retokenize(text, "wikitext") == line.split()


@pytest.mark.parametrize("line, text", PTB_CASES)
def test_ptb_rules_and_their_inverse(line, text):
    assert detokenize_line(line, "ptb") == text
    assert retokenize(text, "ptb") == line.split()


def test_pieces_partition_the_text_and_lines_end_with_newlines():
    tokens = '= Title = <eos> <eos> He said " hi " , then left . <eos>'.split()
    result = detokenize(tokens, "wikitext")
    assert result.text == '= Title =\n\nHe said "hi", then left.\n'
    starts = np.concatenate([[0], result.piece_ends[:-1]])
    pieces = [result.text[a:b] for a, b in zip(starts, result.piece_ends)]
    assert pieces[:5] == ["=", " Title", " =", "\n", "\n"]
    assert "".join(pieces) == result.text
    # Each character belongs to the token whose piece holds it.
    owner = result.piece_of_char(np.arange(len(result.text)))
    assert [pieces[t] for t in owner[:3]] == ["=", " Title", " Title"]


@pytest.mark.parametrize("style", ["wikitext", "ptb", "none"])
def test_the_text_of_a_prefix_never_depends_on_later_tokens(style):
    tokens = ("= = A = = <eos> x ( \" y @-@ z \" ) , w 's n't ' . <unk> <eos> <eos> q @,@ 1 %").split()
    full = detokenize(tokens, style)
    for k in range(1, len(tokens) + 1):
        prefix = detokenize(tokens[:k], style)
        assert full.text.startswith(prefix.text)
        assert prefix.piece_ends.tolist() == full.piece_ends[:k].tolist()


def test_unknown_style_is_refused():
    with pytest.raises(ValueError, match="unknown detokenizer"):
        Detokenizer("moses")


def _real_round_trip(directory: Path, pattern: str, style: str) -> list[tuple[str, int, int]]:
    """(file, lines, exceptions) per split, printing every line that does not round-trip."""
    counts = []
    for split in ("train", "valid", "test"):
        path = directory / pattern.format(split)
        result = round_trip(path.read_text(encoding="utf-8").split("\n")[:-1], style)
        for number, original, again in result.exceptions:
            print(f"{path.name}:{number}: {' '.join(original)!r} -> {' '.join(again)!r}")
        counts.append((path.name, result.lines, len(result.exceptions)))
    print(counts)
    return counts


def test_ptb_round_trips_on_the_real_files(real_data_dir):
    counts = _real_round_trip(real_data_dir / "ptb", "ptb.{}.txt", "ptb")
    assert [exceptions for _, _, exceptions in counts] == [0, 0, 0]


def test_wikitext2_round_trips_on_the_real_files_but_for_listed_ambiguities(real_data_dir):
    """The exceptions are WikiText's own ambiguities (``c .`` vs ``c.``, ``Jr .`` vs ``Jr.``,
    ``1,000th`` left unsplit); run with ``-s`` to list them. Fewer than 1.1% of lines."""
    counts = _real_round_trip(real_data_dir / "wikitext-2", "wiki.{}.tokens", "wikitext")
    for name, lines, exceptions in counts:
        assert exceptions < 0.011 * lines, (name, exceptions, lines)


def test_command_lists_the_exceptions(tmp_path, capsys):
    path = tmp_path / "wiki.test.tokens"
    path.write_text(" in c . 1933 , the U.S. army \n = = A = = \n", encoding="utf-8")
    assert main([str(path), "--style", "wikitext"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"{path}: 1 of 2 lines do not round-trip"
    assert out[1].startswith("  line 1: ")


# --- lm-eval: lm-evaluation-harness's pages --------------------------------------------------

#: Pages in WikiText's layout (``" " + words + " "`` a line) that exercise every rule: quotes
#: paired across lines and a quote left open, brackets around a newline, `` N `` runs, degrees,
#: ``/' 1/``, ``s '`` and `` 's``, section headings, a page that ends without a blank line, a
#: one-line page, a last page with and without the file's final newline.
CRAFTED_PAGES = (
    ' = Alpha = \n \n He said " it is \n over " , and " then ( left \n ) at N N N . \n ',
    " = Beta = \n the players ' union ; 10 \N{DEGREE SIGN} C : a / ' 1 / b /' 2/ ! \n \n = = Gamma = = \n ",
    " = Delta = \n [ a @-@ b ] { c @,@ d } 3 @.@ 5 ? the dog 's N \n = = = Epsilon = = = ",
    " = Zeta = \n \" \n \" \n ' a ' b ' \n ",
    " = Eta = ",
    " = Theta = \n the end . \n \n",
    " = Iota = \n the end . \n",
)


def _page_tokens(page: str) -> list[str]:
    """The word-level tokens of a page: each line's words, and ``<eos>`` for each newline."""
    return [token for line in page.split("\n") for token in (*line.split(), EOS)][:-1]


def _lm_evals_text(page: str) -> str:
    lm_eval = pytest.importorskip("lm_eval.tasks.wikitext.preprocess_wikitext", reason="needs lm-eval")
    return lm_eval.wikitext_detokenizer({"page": page})


@pytest.mark.parametrize("page", CRAFTED_PAGES)
def test_lm_eval_pages_are_lm_evals_text_and_each_piece_is_its_tokens(page):
    tokens = _page_tokens(page)
    result = lm_eval_page(tokens)
    assert result.text == _lm_evals_text(page)
    starts = np.concatenate([[0], result.piece_ends[:-1]])
    substituted = {"@-@": "-", "@,@": ",", "@.@": ".", "N": "1", "2/": "[0-9]/"}  # as lm-eval writes them
    for token, start, end in zip(tokens, starts, result.piece_ends):
        kept = result.text[start:end].strip(" \n")  # a piece is its token, spaces and newlines aside
        assert kept in ("" if token == EOS else (token, substituted.get(token))), (token, kept)


def test_lm_eval_pages_leave_the_newline_before_a_page_and_blank_lines_out():
    page = CRAFTED_PAGES[5]
    before = lm_eval_page([EOS, *_page_tokens(page)])  # a document: the page with the <eos> before it
    assert before.text == _lm_evals_text(page) and before.piece_ends[0] == 0
    assert lm_eval_page([EOS, EOS]).text == "" and lm_eval_page([EOS, EOS]).piece_ends.tolist() == [0, 0]
    text_first = lm_eval_page([EOS, "a", EOS])  # lines before any heading: the page holds them all
    assert text_first.text == _lm_evals_text(" \n a \n")


@pytest.mark.parametrize("split", ["train", "valid", "test"])
def test_lm_eval_pages_are_lm_evals_text_on_every_real_page(real_data_dir, split):
    text = (real_data_dir / "wikitext-2" / f"wiki.{split}.tokens").read_text(encoding="utf-8")
    for page in lm_eval_pages(text):
        assert lm_eval_page(_page_tokens(page)).text == _lm_evals_text(page), page[:60]
