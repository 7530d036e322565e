"""``compare`` and the plots of results refuse results that are not audited and verified (those
``build`` leaves unranked), naming them, unless ``--allow-unaudited``; then they go on with a
warning on stderr, in ``compare``'s output and in the figure. ``compare`` also refuses two
results that scored different numbers of tokens (issue 47).

The case behind it: a bigram whose probabilities sum to 1.02, scored with ``--audit 0``, claims a
perplexity far below its true one, and ``compare`` against KN-5 called it significantly better.
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pytest
from conftest import assert_one_line_error
from test_leaderboard import make_result

from harness.cli import main as harness_main
from leaderboard import plots
from leaderboard.cli import main

AUDIT_OFF = "unaudited (probability audit off (--audit 0))"
#: The fields of a result scored with ``harness eval --audit 0`` (the causality audit passed).
AUDIT_OFF_FIELDS = {
    "audit": {"requested": 0, "checked": 0, "max_sum_error": 0.0, "max_target_error": 0.0, "passed": False},
    "audited": False,
    "unaudited_reasons": ["probability audit off (--audit 0)"],
}
TOKENS = 2000


def scored(directory: Path, name: str, nll: float, *, audited: bool = True, tokens: int = TOKENS) -> Path:
    """A result of ``tokens`` tokens whose per-token log-probabilities vary around ``-nll``,
    saved beside it; scored with ``--audit 0`` unless ``audited``."""
    values = -nll + np.random.default_rng(len(name)).normal(0.0, 0.5, tokens)
    path = make_result(
        directory,
        name,
        model=name.split(".")[0],
        ppl=math.exp(-values.mean()),
        tokens=tokens,
        **({} if audited else AUDIT_OFF_FIELDS),
    )
    np.save(directory / f"{name}.logprobs.npy", values)
    return path


@pytest.fixture
def kn_and_bigram(tmp_path: Path) -> tuple[Path, Path]:
    """KN-5, audited, and a bigram scored with ``--audit 0`` that claims a lower perplexity."""
    results = tmp_path / "results"
    return scored(results, "kn5.test", nll=5.0), scored(results, "bigram.test", nll=4.5, audited=False)


def figures_saved(monkeypatch: pytest.MonkeyPatch) -> list[plt.Figure]:
    """The figures the plot commands draw, captured instead of written."""
    figures: list[plt.Figure] = []
    monkeypatch.setattr(plots, "_save", lambda figure, out: figures.append(figure) or Path(out))
    return figures


def warning_shown(figure: plt.Figure) -> str:
    """The warning across the top of ``figure`` (empty when there is none)."""
    title = figure._suptitle
    return title.get_text() if title is not None else ""


# ---- compare -------------------------------------------------------------------------------------


def test_compare_refuses_an_unaudited_result_in_one_line_naming_it(
    kn_and_bigram: tuple[Path, Path], capsys: pytest.CaptureFixture
) -> None:
    kn, bigram = kn_and_bigram
    assert main(["compare", str(kn), str(bigram), "--samples", "200"]) == 2
    error = assert_one_line_error(capsys, f"{bigram}: {AUDIT_OFF}: refused", "--allow-unaudited")
    assert str(kn) not in error


def test_compare_names_every_unaudited_result(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    a = scored(tmp_path, "a.test", nll=5.0, audited=False)
    b = scored(tmp_path, "b.test", nll=4.5, audited=False)
    assert main(["compare", str(a), str(b), "--samples", "200"]) == 2
    assert_one_line_error(capsys, f"{a}: {AUDIT_OFF}; {b}: {AUDIT_OFF}", "to compare them anyway")


def test_compare_with_allow_unaudited_warns_on_stderr_and_in_its_output(
    kn_and_bigram: tuple[Path, Path], capsys: pytest.CaptureFixture
) -> None:
    kn, bigram = kn_and_bigram
    assert main(["compare", str(kn), str(bigram), "--samples", "200", "--allow-unaudited"]) == 0
    captured = capsys.readouterr()
    first, *rest = captured.out.splitlines()
    assert (
        first.startswith("WARNING: ") and f"{bigram}: {AUDIT_OFF}" in first and "--allow-unaudited" in first
    )
    assert "B is better" in rest[-1]
    assert captured.err == first + "\n"


def test_compare_refuses_results_that_scored_different_numbers_of_tokens(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    a = scored(tmp_path, "a.test", nll=5.0)
    b = scored(tmp_path, "b.test", nll=4.5, tokens=TOKENS - 1)
    for allow in ([], ["--allow-unaudited"]):
        assert main(["compare", str(a), str(b), "--samples", "200", *allow]) == 2
        assert_one_line_error(
            capsys,
            f"{a} and {b} are not comparable: they scored different numbers of tokens (2,000 vs 1,999)",
        )


def test_compare_refuses_an_unverified_result_even_when_allowed(
    kn_and_bigram: tuple[Path, Path], capsys: pytest.CaptureFixture
) -> None:
    """Without its per-token log-probabilities there is nothing to compare; with ones that do not
    give its figures (an edited perplexity), they are not its own."""
    kn, bigram = kn_and_bigram
    npy = bigram.with_name("bigram.test.logprobs.npy")
    values = np.load(npy)
    np.save(npy, values - 0.1)
    assert main(["compare", str(kn), str(bigram), "--samples", "200", "--allow-unaudited"]) == 2
    assert_one_line_error(capsys, str(npy), "does not match the result's nll")
    npy.unlink()
    assert main(["compare", str(kn), str(bigram), "--samples", "200", "--allow-unaudited"]) == 2
    assert_one_line_error(capsys, str(bigram), "not found", "cannot be verified")


# ---- plot bars -----------------------------------------------------------------------------------


def bars(source: Path, out: Path, *options: str) -> int:
    return main(["plot", "bars", str(source), "--dataset", "ptb", "--output", str(out), *options])


def test_bars_refuse_an_unaudited_result_in_one_line_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    results = tmp_path / "results"
    make_result(results, "kn5.test", model="kneser_ney", ppl=141.19)
    make_result(results, "bigram.test", model="bigram", ppl=243.09, **AUDIT_OFF_FIELDS)
    out = tmp_path / "bars.png"
    assert bars(results, out) == 2
    error = assert_one_line_error(
        capsys, f"error: {results / 'bigram.test.json'}: {AUDIT_OFF}: refused", "--allow-unaudited"
    )
    assert "kn5" not in error
    assert not out.exists()


def test_bars_refuse_an_unverified_result_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    results = tmp_path / "results"
    make_result(results, "kn5.test", model="kneser_ney", ppl=141.19)
    make_result(results, "edited.test", model="edited", ppl=1.5, logprobs=False)
    assert bars(results, tmp_path / "bars.png") == 2
    assert_one_line_error(
        capsys, f"error: {results / 'edited.test.json'}: unverified (test figures not recomputed", "refused"
    )


def test_bars_with_allow_unaudited_draw_them_with_a_warning_on_stderr_and_in_the_figure(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    figures = figures_saved(monkeypatch)
    results = tmp_path / "results"
    make_result(results, "kn5.test", model="kneser_ney", ppl=141.19)
    make_result(results, "bigram.test", model="bigram", ppl=243.09, **AUDIT_OFF_FIELDS)
    for option in ("--allow-unaudited", "--include-unaudited"):  # the option's former name
        assert bars(results, tmp_path / "bars.png", option) == 0
        err = capsys.readouterr().err
        assert err.count("WARNING: ") == 1 and f"bigram.test.json: {AUDIT_OFF}" in err
        warning = warning_shown(figures.pop())
        assert (
            warning.startswith("WARNING: ")
            and "--allow-unaudited" in warning
            and "bigram.test.json" in warning
        )


def test_bars_of_a_table_refuse_its_unaudited_rows(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    results = tmp_path / "results"
    make_result(results, "kn5.test", model="kneser_ney", ppl=141.19)
    make_result(results, "bigram.test", model="bigram", ppl=243.09, **AUDIT_OFF_FIELDS)
    assert main(["build", str(results), "--output-dir", str(tmp_path / "tables"), "--include-unaudited"]) == 0
    table = tmp_path / "tables" / "ptb.csv"
    capsys.readouterr()
    assert bars(table, tmp_path / "bars.png") == 2
    assert_one_line_error(capsys, "bigram.test.json: unaudited (probability audit off (--audit 0)): refused")
    figures = figures_saved(monkeypatch)
    assert bars(table, tmp_path / "bars.png", "--allow-unaudited") == 0
    assert "WARNING: " in capsys.readouterr().err and warning_shown(figures[0]).startswith("WARNING: ")


def test_bars_of_audited_and_verified_results_carry_no_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    figures = figures_saved(monkeypatch)
    make_result(tmp_path / "results", "kn5.test", model="kneser_ney", ppl=141.19)
    assert bars(tmp_path / "results", tmp_path / "bars.png") == 0
    assert "WARNING" not in capsys.readouterr().err and warning_shown(figures[0]) == ""


# ---- plot frequency ------------------------------------------------------------------------------


def test_frequency_refuses_a_bigram_scored_without_the_audit_unless_allowed(
    corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = tmp_path / "runs"
    assert harness_main(["eval", "unigram", "--dataset", str(corpus), "--output-dir", str(runs / "uni")]) == 0
    bigram_args = ["--model-args", "order=2", "--audit", "0", "--output-dir", str(runs / "kn")]
    assert harness_main(["eval", "kneser_ney", "--dataset", str(corpus), *bigram_args]) == 0
    a = runs / "uni" / "harness.plugins.unigram.toy.test.json"
    b = runs / "kn" / "baselines.kneser_ney+order=2.toy.test.json"
    out = tmp_path / "fig4.png"
    capsys.readouterr()
    assert main(["plot", "frequency", str(a), str(b), "--buckets", "3", "--output", str(out)]) == 2
    assert_one_line_error(capsys, f"{b}: {AUDIT_OFF}: refused", "to plot it anyway")
    assert not out.exists()
    figures = figures_saved(monkeypatch)
    allowed = ["--buckets", "3", "--output", str(out), "--allow-unaudited"]
    assert main(["plot", "frequency", str(a), str(b), *allowed]) == 0
    assert f"{b}: {AUDIT_OFF}" in capsys.readouterr().err
    warning = warning_shown(figures[0])
    assert warning.startswith("WARNING: ") and b.name in warning and a.name not in warning
