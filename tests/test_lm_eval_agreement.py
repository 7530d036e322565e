"""``--protocol documents`` gives lm-evaluation-harness's own ``wikitext`` figures.

The same tiny, randomly initialised GPT-2 (built here) scores the same split twice: with
lm-evaluation-harness's ``wikitext`` task (its YAML, detokenizer and metric code, pointed at a
local JSON Lines file of the split's pages) and with ``harness`` under ``--protocol documents``
(the ``hf`` plugin with ``detokenizer=lm-eval``: each page's text as lm-evaluation-harness
detokenizes it, tokenized whole, in its rolling windows). The splits: toy articles that exercise
its detokenizer's rules, and real pages of WikiText-2 test (the packaged copy), each longer than
a window. All three figures must agree to 1e-6 relative (float32 arithmetic in another order).
"""

from __future__ import annotations

from pathlib import Path

import pytest

INSTALL = 'pip install -e ".[dev]" (lm-eval is a development dependency)'
lm_eval = pytest.importorskip("lm_eval", reason=f"needs lm-evaluation-harness: {INSTALL}")
pytest.importorskip("transformers", reason=f"needs transformers: {INSTALL}")

from lm_eval.utils import get_rolling_token_windows, make_disjoint_window  # noqa: E402

from harness.plugins.hf.detokenize import detokenize_line  # noqa: E402
from harness.plugins.hf.windows import WindowSettings  # noqa: E402
from harness.tools import hf_tiny  # noqa: E402
from harness.tools.lm_eval_wikitext import (  # noqa: E402
    FIGURES,
    documents_metrics,
    lm_eval_pages,
    wikitext_figures,
)

#: Toy articles in WikiText's layout: double quotes paired across lines, brackets around a
#: newline, `` N ``, ``@-@``, ``@,@``, a heading after a line of text, a page without a blank line
#: before the next.
TOY = (
    " \n"
    " = Alpha = \n"
    " \n"
    ' the role @-@ playing game " sold \n'
    ' 1 @,@ 000 " copies ( in N \n'
    " ) , and the dog ran away . \n"
    " \n"
    " = Beta = \n"
    " the dog and the cat , the mat and the game \n"
    " = Gamma = \n"
    " \n"
    " playing the game ' s , the dog sat on the mat . \n"
    " \n"
)
#: Real pages of WikiText-2 test: "Constant k filter" and the two table legends after it that
#: read as headings (each after a line of text), and "Chad at the 2008 Summer Olympics" (`` N ``).
REAL_PAGES = (27, 28, 29, 45)
POSITIONS = 256


@pytest.fixture(scope="module")
def real_pages(real_data_dir: Path) -> str:
    """The split made of :data:`REAL_PAGES`, as the file holds them, ending with a newline."""
    pages = lm_eval_pages((real_data_dir / "wikitext-2" / "wiki.test.tokens").read_text(encoding="utf-8"))
    return "\n".join(pages[index] for index in REAL_PAGES) + "\n"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory, real_pages: str) -> Path:
    lines = [detokenize_line(line, "wikitext") + "\n" for line in (TOY + real_pages).split("\n")]
    return hf_tiny.build(
        tmp_path_factory.mktemp("gpt2"),
        lines,
        hf_tiny.TinyModelSpec(arch="gpt2", vocab_size=1000, width=32, layers=2, heads=4, positions=POSITIONS),
    )


@pytest.fixture
def offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.setenv(variable, "1")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "datasets-cache"))


def _agree(model_dir: Path, text: str, work: Path) -> dict:
    """Both figures of ``text``, checked to agree; the harness's ``document_metrics``."""
    ours = documents_metrics(str(model_dir), text, work / "articles", POSITIONS)
    theirs = wikitext_figures(str(model_dir), lm_eval_pages(text), work, POSITIONS)
    for figure in FIGURES:
        assert ours[figure] == pytest.approx(theirs[figure], rel=1e-6), figure
    return ours


@pytest.mark.usefixtures("offline")
def test_toy_articles_give_lm_evals_figures(model_dir: Path, tmp_path: Path) -> None:
    metrics = _agree(model_dir, TOY, tmp_path)
    assert (metrics["documents"], metrics["pages"], metrics["variant"]) == (3, 3, "raw")


@pytest.mark.usefixtures("offline")
def test_real_pages_give_lm_evals_figures(model_dir: Path, real_pages: str, tmp_path: Path) -> None:
    metrics = _agree(model_dir, real_pages, tmp_path)
    assert (metrics["documents"], metrics["pages"], metrics["variant"]) == (4, 4, "<unk>")


@pytest.mark.parametrize("max_context", [1, 3, 8])
def test_lm_eval_windows_are_lm_evals_rolling_windows(max_context: int) -> None:
    """Each window reads and scores the subwords lm-evaluation-harness's ``loglikelihood_rolling``
    gives the model (subword ``p`` is ``p``, the start token 0)."""
    settings = WindowSettings(max_context, max_context, window_batch=1, full_last_window=True)
    for subwords in range(1, 4 * max_context + 2):
        theirs = [
            (context + targets)[-(max_context + 1) :][:-1]  # what its _loglikelihood_tokens feeds
            for context, targets in map(
                make_disjoint_window,
                get_rolling_token_windows(list(range(1, subwords + 1)), 0, max_context, 1),
            )
        ]
        ours = [list(range(start, end - 1)) for start, _, end in settings.plan(subwords)]
        assert ours == theirs, subwords
        assert [target for _, first, end in settings.plan(subwords) for target in range(first, end)] == list(
            range(1, subwords + 1)
        )
