"""``--protocol documents`` agrees with lm-evaluation-harness's own ``wikitext`` task.

The same tiny, randomly initialised GPT-2 (built here) scores the same local documents twice:
with lm-evaluation-harness's ``wikitext`` task (its YAML, detokenizer and metric code, pointed at
a local JSON Lines file) and with ``harness`` under ``--protocol documents`` (the ``hf`` plugin,
``segmentation=natural``: the whole text tokenized at once, as lm-evaluation-harness does). The
documents are chosen so that the inputs are the same: lm-evaluation-harness's detokenizer and the
plugin's give the same text, each document is the whole file (a page of lm-evaluation-harness
keeps its last newline only at the end of a file) and fits one window. All three figures must
agree to 1e-4 relative.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

INSTALL = 'pip install -e ".[dev]" (lm-eval is a development dependency)'
lm_eval = pytest.importorskip("lm_eval", reason=f"needs lm-evaluation-harness: {INSTALL}")
pytest.importorskip("transformers", reason=f"needs transformers: {INSTALL}")

from harness.plugins.hf.detokenize import detokenize_line  # noqa: E402
from harness.tools import hf_tiny  # noqa: E402
from harness.tools.lm_eval_wikitext import FIGURES, documents_metrics, wikitext_figures  # noqa: E402

#: Articles whose text both detokenizers agree on: ``@-@``, ``@,@`` and commas inside lines, blank
#: lines, no space at either end of a line (which lm-evaluation-harness would keep at the start of
#: a page).
DOCUMENTS = (
    "= Alpha =\nthe cat sat on the mat , and the dog ran away\n\n"
    "the role @-@ playing game sold 1 @,@ 000 copies\n",
    "= Beta =\nthe dog and the cat , the mat and the game\n",
    "= Gamma =\nplaying the game , the dog sat\n\nthe cat ran 1 @,@ 000 miles , and the dog ran\n",
)
POSITIONS = 256


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    lines = [detokenize_line(line, "wikitext") + "\n" for text in DOCUMENTS for line in text.split("\n")]
    return hf_tiny.build(
        tmp_path_factory.mktemp("gpt2"),
        lines * 20,
        hf_tiny.TinyModelSpec(
            arch="gpt2",
            vocab_size=300,
            width=32,
            layers=2,
            heads=4,
            positions=POSITIONS,
        ),
    )


def harness_figures(model_dir: Path, work: Path) -> dict[str, float]:
    """The documents protocol on :data:`DOCUMENTS`, each in a dataset of its own, pooled as
    lm-evaluation-harness pools its pages: log-likelihoods, words and bytes summed."""
    each = [
        documents_metrics(str(model_dir), text, work / f"article-{index}", POSITIONS)
        for index, text in enumerate(DOCUMENTS)
    ]
    assert all(metrics["documents"] == 1 for metrics in each)
    log_likelihood = sum(metrics["log_likelihood"] for metrics in each)
    words, size = sum(metrics["words"] for metrics in each), sum(metrics["bytes"] for metrics in each)
    return {
        "word_perplexity": math.exp(-log_likelihood / words),
        "byte_perplexity": math.exp(-log_likelihood / size),
        "bits_per_byte": -log_likelihood / size / math.log(2),
    }


def test_the_documents_protocol_gives_lm_evals_figures(
    model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for variable in ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.setenv(variable, "1")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "datasets-cache"))
    ours = harness_figures(model_dir, tmp_path)
    theirs = wikitext_figures(str(model_dir), list(DOCUMENTS), tmp_path)
    for figure in FIGURES:
        assert ours[figure] == pytest.approx(theirs[figure], rel=1e-4), figure
